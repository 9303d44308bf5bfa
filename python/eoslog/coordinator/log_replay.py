"""Reading an internal topic's partition from start to end, as the coordinators do at open to
rebuild their state (`__transaction_state`, `__consumer_offsets`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from eoslog.record import codec
from eoslog.record.types import BatchHeader, Record

if TYPE_CHECKING:
    from eoslog.log.partition import PartitionLog

# Bytes read per step: a bound on the memory a replay holds at once.
READ_BYTES: int = 1 << 20


def batches(log: PartitionLog) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Every batch of the partition with its records, in log order: control batches and
    batches of open or aborted transactions included (read_uncommitted), since a replay
    decides about them itself. CorruptRecordError for damaged bytes."""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        fetched = log.read(offset, READ_BYTES, isolation_level="read_uncommitted")
        data = bytes(fetched.records)
        if not data:
            return
        for position, header in codec.iter_headers(data):
            offset = header.last_offset + 1
            yield header, codec.batch_records(data[position : position + header.size_in_bytes])
