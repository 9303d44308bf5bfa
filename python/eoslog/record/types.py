"""Value types the codec twins return: one definition shared by the Cython module and the
pure-Python twin, so both hand back identical objects for identical bytes."""

from __future__ import annotations

from typing import NamedTuple

from eoslog.record import layout


def increment_sequence(sequence: int, delta: int) -> int:
    """sequence + delta in Kafka's wrapping sequence space [0, 2**31 - 1] (docs/format.md §1.3)."""
    top = (1 << 31) - 1
    if sequence > top - delta:
        return delta - (top - sequence) - 1
    return sequence + delta


def decrement_sequence(sequence: int, delta: int) -> int:
    """sequence - delta in Kafka's wrapping sequence space [0, 2**31 - 1] (docs/format.md §1.3)."""
    top = (1 << 31) - 1
    if sequence < delta:
        return top - (delta - sequence) + 1
    return sequence - delta


class BatchHeader(NamedTuple):
    """The 61-byte v2 batch header, field for field in layout order (docs/format.md §1.1)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        return layout.LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & layout.COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & layout.TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & layout.TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & layout.CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > layout.NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == layout.NO_SEQUENCE:
            return layout.NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)


class Record(NamedTuple):
    """One decoded record. Header values and key/value may be None (Kafka's null)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class ValidatedBatch(NamedTuple):
    """What validate_batch learned: the header plus facts only a walk of the records gives."""

    header: BatchHeader
    # The largest record timestamp and the offset delta of the first record carrying it; for
    # LogAppendTime the header's max timestamp and the last offset delta, since every record
    # carries that time and Kafka's time index keys a batch by its last offset (docs/format.md
    # §5.7).
    max_timestamp: int
    offset_delta_of_max_timestamp: int
    # The smallest record timestamp other than -1 (NO_TIMESTAMP), -1 when no record has one
    # (LogAppendTime: the header's max timestamp, as for max_timestamp). With max_timestamp
    # it bounds what the leader's timestamp range rule checks (eoslog.log.timestamps), so an
    # append decodes no record to apply it.
    min_timestamp: int
