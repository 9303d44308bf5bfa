"""A log as Kafka's cleaner leaves it, built from a full log (issue 14): below the last stable
offset, the latest record of each key among the records of committed transactions and plain
batches, at its original offset; aborted transactional data removed; every batch keeps its
base offset, last offset delta and producer fields (so offsets are never renumbered and gaps
appear inside and between batches); a batch left empty removed. Past the delete horizon
(`past_horizon`), tombstones go too, and so do markers whose data is all gone. At and above the
last stable offset nothing changes (not cleanable).

`CompactedLog` serves those batches as PartitionLog.read serves a log with gaps: whole batches
from the first one ending at or past the offset asked for. eoslog.log has no compaction yet and
refuses gaps at open (eoslog.log.recovery: a batch whose base offset is not the previous one's
last + 1 is damage), so the coordinators' replay is tried against this stand-in."""

from __future__ import annotations

from typing import Any

from eoslog.log.partition_reads import FetchResult
from eoslog.log.producer_state import marker_type
from eoslog.record import codec, control
from eoslog.record.types import BatchHeader, Record
from tests.support.batches import assemble, raw_record

Batch = tuple[BatchHeader, bytes, list[Record]]


def whole_batches(log: Any) -> list[Batch]:
    """Every batch of a PartitionLog, with its bytes and records, read_uncommitted."""
    found: list[Batch] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = bytes(log.read(offset, 1 << 20, "read_uncommitted").records)
        for position, header in codec.iter_headers(data):
            batch = data[position : position + header.size_in_bytes]
            found.append((header, batch, codec.batch_records(batch)))
            offset = header.last_offset + 1
    return found


def compacted(batches: list[Batch], last_stable_offset: int, *, past_horizon: bool) -> list[bytes]:
    """The batches the cleaner keeps of `batches` (module doc), as bytes."""
    outcome: dict[int, bool] = {}  # data batch index -> its transaction committed
    covers: dict[int, list[int]] = {}  # marker index -> the data batches it ends
    open_by_producer: dict[int, list[int]] = {}
    for index, (header, _, records) in enumerate(batches):
        if header.is_control:
            ended = open_by_producer.pop(header.producer_id, [])
            commit = marker_type(records[0].key) == control.COMMIT
            outcome.update((data_index, commit) for data_index in ended)
            covers[index] = ended
        elif header.is_transactional:
            open_by_producer.setdefault(header.producer_id, []).append(index)
    latest: dict[bytes | None, int] = {}  # over the cleanable range only, as Kafka's map
    for index, (header, _, records) in enumerate(batches):
        cleanable = header.base_offset < last_stable_offset
        if cleanable and not header.is_control and outcome.get(index, True):
            latest.update((record.key, record.offset) for record in records)
    kept: dict[int, bytes] = {}
    for index, (header, batch, records) in enumerate(batches):
        if header.base_offset >= last_stable_offset:
            kept[index] = batch
        elif not header.is_control and outcome.get(index, True):
            retained = [
                r
                for r in records
                if latest[r.key] == r.offset and not (past_horizon and r.value is None)
            ]
            if retained:
                kept[index] = batch if retained == records else _rebuilt(header, retained)
    for index, (header, batch, _) in enumerate(batches):
        ended = covers.get(index)
        if (
            ended is not None
            and header.base_offset < last_stable_offset
            and (not past_horizon or any(data_index in kept for data_index in ended))
        ):
            kept[index] = batch
    return [kept[index] for index in sorted(kept)]


def _rebuilt(header: BatchHeader, records: list[Record]) -> bytes:
    """`header`'s batch holding only `records`, at their offsets (deltas from its base)."""
    section = b"".join(
        raw_record(
            offset_delta=record.offset - header.base_offset,
            timestamp_delta=record.timestamp - header.base_timestamp,
            key=record.key,
            value=record.value,
        )
        for record in records
    )
    return assemble(
        section,
        records_count=len(records),
        last_offset_delta=header.last_offset_delta,
        attributes=header.attributes,
        base_offset=header.base_offset,
        base_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
    )


class CompactedLog:
    """The read side of a compacted PartitionLog (module doc): log start and end unchanged."""

    def __init__(self, log: Any, batches: list[bytes]) -> None:
        self.topic, self.partition = log.topic, log.partition
        self.log_start_offset, self.log_end_offset = log.log_start_offset, log.log_end_offset
        self._batches = batches
        self._headers = [codec.read_header(batch) for batch in batches]

    def read(self, offset: int, max_bytes: int, isolation_level: str) -> FetchResult:
        assert isolation_level == "read_uncommitted"
        first = next(
            (i for i, header in enumerate(self._headers) if header.last_offset >= offset),
            len(self._batches),
        )
        position = sum(len(batch) for batch in self._batches[:first])
        taken: list[bytes] = []
        for batch in self._batches[first:]:
            if taken and sum(map(len, taken)) + len(batch) > max_bytes:
                break
            taken.append(batch)
        end = self.log_end_offset
        records = memoryview(b"".join(taken))
        return FetchResult(records, None, end, end, self.log_start_offset, "compacted", position)
