"""Message and TopicPartition (API.md "Consumer"), shaped like confluent-kafka-python's,
and FetchedRecords, the decoded fetch a Message views.

A consume() makes one Message per record and nothing else per record: the records of a fetch
are decoded once into Arrow-layout columns (codec.decode_columns, in C), and each Message
(eoslog._ext.message, a C type) holds the fetch and an index. FetchedRecords turns a column
into Python objects the first time any Message of the fetch asks for it, in one C-level pass,
so a consumer that reads only values never pays for keys or headers.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final

import numpy as np

from eoslog._ext.message import Message, binary_list, make_messages
from eoslog.errors import KafkaError

if TYPE_CHECKING:
    import pyarrow as pa

    from eoslog.record.columns import ColumnarRecords

# Special offsets, with librdkafka's values (rdkafka.h RD_KAFKA_OFFSET_*), as
# confluent_kafka exports them.
OFFSET_BEGINNING: Final = -2
OFFSET_END: Final = -1
OFFSET_STORED: Final = -1000
OFFSET_INVALID: Final = -1001

# Message.timestamp() types, as confluent_kafka numbers them (Kafka's timestamp type + 1).
TIMESTAMP_NOT_AVAILABLE: Final = 0
TIMESTAMP_CREATE_TIME: Final = 1
TIMESTAMP_LOG_APPEND_TIME: Final = 2

Header = tuple[str, bytes | None]

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "OFFSET_STORED",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "FetchedRecords",
    "Message",
    "TopicPartition",
    "make_messages",
]


class TopicPartition:
    """A topic, a partition and an offset (confluent_kafka.TopicPartition).

    `offset` is a real offset or one of OFFSET_BEGINNING, OFFSET_END, OFFSET_STORED,
    OFFSET_INVALID. Equality, ordering and hashing use (topic, partition) only, as in
    confluent-kafka-python, so a TopicPartition works as a dict key for its partition."""

    __slots__ = ("error", "leader_epoch", "metadata", "offset", "partition", "topic")

    def __init__(
        self,
        topic: str,
        partition: int = -1,
        offset: int = OFFSET_INVALID,
        metadata: str | None = None,
        leader_epoch: int | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.metadata = metadata
        self.leader_epoch = leader_epoch
        self.error: KafkaError | None = None

    def _key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicPartition):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: TopicPartition) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"TopicPartition{{topic={self.topic},partition={self.partition},"
            f"offset={self.offset},leader_epoch={self.leader_epoch},error={self.error}}}"
        )


class FetchedRecords:
    """The decoded records of one fetch of one partition: the columns every Message of the
    fetch views, and the Python lists made from them on first use.

    Thread safety: built and read by the one thread that owns the Consumer. The lists are
    made at most once each; a Message keeps the whole fetch alive (about
    max.partition.fetch.bytes of decoded data), as a confluent Message keeps its fetch buffer."""

    __slots__ = (
        "_headers",
        "_keys",
        "_offsets",
        "_timestamps",
        "_values",
        "columns",
        "count",
        "next_offset",
        "partition",
        "topic",
    )

    def __init__(
        self, topic: str, partition: int, columns: ColumnarRecords, next_offset: int
    ) -> None:
        assert columns.count > 0, "a fetch with no records is never buffered"
        self.topic = topic
        self.partition = partition
        self.columns = columns
        self.count = columns.count
        # Where the consumer's position goes once every record here is consumed: past the
        # last batch these records came from, and past control or aborted batches after them.
        self.next_offset = next_offset
        assert next_offset > int(columns.offset[-1])
        self._offsets: list[int] | None = None
        self._timestamps: list[tuple[int, int]] | None = None
        self._keys: list[bytes | None] | None = None
        self._values: list[bytes | None] | None = None
        self._headers: list[list[Header] | None] | None = None

    def offset_at(self, index: int) -> int:
        return int(self.columns.offset[index])

    def offsets(self) -> list[int]:
        if self._offsets is None:
            self._offsets = self.columns.offset.tolist()
        return self._offsets

    def timestamps(self) -> list[tuple[int, int]]:
        """(confluent timestamp type, ms) per record."""
        if self._timestamps is None:
            types = (self.columns.timestamp_type + TIMESTAMP_CREATE_TIME).tolist()
            self._timestamps = list(zip(types, self.columns.timestamp_ms.tolist(), strict=True))
        return self._timestamps

    def keys(self) -> list[bytes | None]:
        if self._keys is None:
            c = self.columns
            self._keys = binary_list(self.count, c.key_validity, c.key_offsets, c.key_data)
        return self._keys

    def values(self) -> list[bytes | None]:
        if self._values is None:
            c = self.columns
            self._values = binary_list(self.count, c.value_validity, c.value_offsets, c.value_data)
        return self._values

    def headers(self) -> list[list[Header] | None]:
        if self._headers is None:
            self._headers = header_lists(self.count, self.columns)
        return self._headers

    def to_arrow(self, start: int, stop: int, include_headers: bool) -> pa.RecordBatch:
        """Records [start, stop) in the Spark Kafka source's schema (API.md "Spark")."""
        columns = self.columns
        if not include_headers and columns.headers is not None:
            columns = dataclasses.replace(columns, headers=None)
        batch = columns.to_arrow(self.topic, self.partition)
        return batch if start == 0 and stop == self.count else batch.slice(start, stop - start)


def header_lists(count: int, columns: ColumnarRecords) -> list[list[Header] | None]:
    """Each record's headers as [(key, value), ...], None for a record without any."""
    found = columns.headers
    if found is None:
        return [None] * count
    has_headers = np.unpackbits(found.validity, count=count, bitorder="little")
    if not has_headers.any():
        return [None] * count
    entries = len(found.key_offsets) - 1
    # Header keys are valid UTF-8 already: the decoder replaced malformed bytes.
    keys = [
        key.decode("utf-8")
        for key in binary_list(
            entries, np.full((entries + 7) // 8, 0xFF, np.uint8), found.key_offsets, found.key_data
        )
        if key is not None
    ]
    values = binary_list(entries, found.value_validity, found.value_offsets, found.value_data)
    pairs = list(zip(keys, values, strict=True))
    bounds = found.offsets.tolist()
    return [
        pairs[bounds[i] : bounds[i + 1]] if present else None
        for i, present in enumerate(has_headers.tolist())
    ]
