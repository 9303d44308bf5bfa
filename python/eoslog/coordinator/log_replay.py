"""Reading an internal topic's partition from start to end, as the coordinators do at open to
rebuild their state (`__transaction_state`, `__consumer_offsets`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from eoslog import limits
from eoslog.errors import KafkaException
from eoslog.record import codec
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
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        fetched = log.read(offset, limits.replay_read_bytes, isolation_level="read_uncommitted")
        data = bytes(fetched.records)
        if not data:
            return
        for header, records, position in _decoded(fetched, data):
            offset = header.last_offset + 1
            yield header, records, Place(fetched.file, fetched.position + position)


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
