"""Reading an internal topic's partition from start to end, as the coordinators do at open to
rebuild their state (`__transaction_state`, `__consumer_offsets`).

`chunks` is the open's path: each read (limits.replay_read_bytes of whole batches) is decoded
at once, natively, into columns (codec.decode_columns, and scan_batches for the batch
fields), so the replay's per-record work is a loop over plain lists, with no header or record
object per batch (docs/style.md: per-record work native or vectorized). A chunk the columnar
decoder refuses is walked again batch by batch (`located_batches`), which raises what it
always raised, naming the file and byte. Offsets may have gaps (a compacted log): each read
starts after the last batch the previous one consumed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple, TypeVar

import numpy as np

from eoslog import limits
from eoslog._ext import scan
from eoslog.errors import KafkaException
from eoslog.record import codec, layout
from eoslog.record.types import BatchHeader, Record

if TYPE_CHECKING:
    from eoslog.log.partition import PartitionLog
    from eoslog.log.partition_reads import FetchResult


def batches(log: PartitionLog) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Every batch of the partition with its records, in log order: control batches and
    batches of open or aborted transactions included (read_uncommitted), since a replay
    decides about them itself. CorruptRecordError for damaged bytes, naming the segment
    file and the byte of it."""
    for header, records, _ in located_batches(log):
        yield header, records


class Place(NamedTuple):
    """Where a batch lies: its segment file and the byte of it the batch starts at."""

    file: str
    position: int


def located_batches(log: PartitionLog) -> Iterator[tuple[BatchHeader, list[Record], Place]]:
    """batches(), each with its Place: a replay that finds a record it cannot decode names
    it (in_place)."""
    return _reads(log, _walked)


_Item = TypeVar("_Item")


def _reads(
    log: PartitionLog, walk: Callable[[FetchResult, bytes], Iterator[tuple[_Item, int]]]
) -> Iterator[_Item]:
    """What `walk` makes of each read from the log start to its end: it yields each item
    with the offset the next read starts at (after the item's last batch, so a gap in the
    offsets is stepped over)."""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        fetched = log.read(offset, limits.replay_read_bytes, isolation_level="read_uncommitted")
        data = bytes(fetched.records)
        if not data:
            return
        for item, next_offset in walk(fetched, data):
            offset = next_offset
            yield item


def _walked(
    fetched: FetchResult, data: bytes
) -> Iterator[tuple[tuple[BatchHeader, list[Record], Place], int]]:
    for header, records, place in _located(fetched, data):
        yield (header, records, place), header.last_offset + 1


def in_place(error: KafkaException, place: Place) -> KafkaException:
    """`error`, raised replaying the batch at `place`, as the same class naming it."""
    return type(error)(f"{place.file}, the batch at byte {place.position}: {error}")


def _decoded(fetched: FetchResult, data: bytes) -> Iterator[tuple[BatchHeader, list[Record], int]]:
    """The batches of one read (data is its records' bytes), each decoded; a decoding error
    is re-raised naming the segment file and the byte of it (FetchResult.in_file)."""
    headers = codec.iter_headers(data)
    while True:
        try:
            position, header = next(headers)
        except StopIteration:
            return
        except KafkaException as error:
            raise fetched.in_file(error) from error  # its byte is one of `data`
        try:
            records = codec.batch_records(data[position : position + header.size_in_bytes])
        except KafkaException as error:
            raise fetched.in_file(error, position) from error  # its byte is one of the batch
        yield header, records, position


class Chunk(NamedTuple):
    """The records of one read, in log order, as parallel lists, each with its batch's fields;
    `places[i]` is where record i's batch lies (for in_place)."""

    offsets: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    producer_ids: list[int]
    transactional: list[bool]
    control: list[bool]
    batch_positions: list[int]
    file: str

    def place(self, index: int) -> Place:
        return Place(self.file, self.batch_positions[index])


def chunks(log: PartitionLog) -> Iterator[Chunk]:
    """Every record of the partition, a read at a time (module doc), control records and
    those of open or aborted transactions included (read_uncommitted). CorruptRecordError
    for damaged bytes, naming the segment file and the byte of it."""
    return _reads(log, _chunked)


def _chunked(fetched: FetchResult, data: bytes) -> Iterator[tuple[Chunk, int]]:
    decoded = _columns(fetched, data)
    if decoded is not None:
        yield decoded
        return
    for header, records, place in _located(fetched, data):  # damage: the walk names it
        yield _chunk_of(header, records, place), header.last_offset + 1


def _columns(fetched: FetchResult, data: bytes) -> tuple[Chunk, int] | None:
    """The chunk of one read and the offset after its last consumed batch; None if the
    bytes are not clean whole batches (the caller walks them batch by batch)."""
    infos, stop, status = scan.scan_batches(data, verify_crc=False)
    if status != 0 or stop != len(data) or not len(infos):
        return None
    try:
        columns = codec.decode_columns(data, include_control=True)
    except KafkaException:
        return None
    consumed = infos[infos["position"] < columns.end_position]
    if not len(consumed):
        return None
    count = columns.count
    batch_of = np.searchsorted(consumed["last_offset"], columns.offset[:count])
    attributes = consumed["attributes"][batch_of]
    keys = _binary(count, columns.key_offsets, columns.key_data, columns.key_validity)
    values = _binary(count, columns.value_offsets, columns.value_data, columns.value_validity)
    chunk = Chunk(
        columns.offset[:count].tolist(),
        keys,
        values,
        consumed["producer_id"][batch_of].tolist(),
        ((attributes & layout.TRANSACTIONAL_MASK) != 0).tolist(),
        ((attributes & layout.CONTROL_MASK) != 0).tolist(),
        (consumed["position"][batch_of] + fetched.position).tolist(),
        fetched.file,
    )
    return chunk, int(consumed["last_offset"][-1]) + 1


def _binary(count: int, offsets: np.ndarray, data: object, validity: object) -> list[bytes | None]:
    """Column `count` values as bytes, None where the validity bitmap says null."""
    bounds = np.asarray(offsets)[: count + 1].tolist()
    raw = bytes(data)  # type: ignore[call-overload]
    valid = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")[:count]  # type: ignore[call-overload]
    return [
        raw[bounds[i] : bounds[i + 1]] if present else None
        for i, present in enumerate(valid.tolist())
    ]


def _located(
    fetched: FetchResult, data: bytes
) -> Iterator[tuple[BatchHeader, list[Record], Place]]:
    for header, records, position in _decoded(fetched, data):
        yield header, records, Place(fetched.file, fetched.position + position)


def _chunk_of(header: BatchHeader, records: list[Record], place: Place) -> Chunk:
    """One batch walked by `_decoded`, as a chunk."""
    count = len(records)
    return Chunk(
        [r.offset for r in records],
        [r.key for r in records],
        [r.value for r in records],
        [header.producer_id] * count,
        [header.is_transactional] * count,
        [header.is_control] * count,
        [place.position] * count,
        place.file,
    )
