"""Which batches of a fetch a consumer delivers (docs/format.md §6.4; docs/design.md "Fetch").

PartitionLog.read returns whole v2 batches from the one holding the fetch offset, with the
aborted transactions overlapping them (read_committed). plan_fetch decides, batch by batch,
what reaches the application, and returns the byte ranges to decode plus the offset the
consumer moves to. The rules, in Kafka's consumer order (CF `nextFetchedRecord`):

- Control batches never surface; they only move the position past themselves. An ABORT
  marker ends its producer's aborted range.
- read_committed: a transactional data batch of a producer with an aborted transaction that
  began at or before the batch's last offset, and whose ABORT marker has not been passed yet,
  is dropped whole.
- Records below the fetch offset (a fetch may start inside a batch) are skipped by the decode
  (offset_min), not here.
- Offsets may have gaps (control records, dropped batches): the next position is the last
  offset of the last batch planned + 1, never a record offset + 1 by assumption.
- The first batch holds the fetch offset and every later batch begins past the one before:
  base offsets and lengths are outside the CRC, and a reader trusting a damaged one would
  move backwards or loop. A break raises CorruptRecordError naming the batch's position.

plan_fetch runs the Cython filter (pyext/readcommitted.pyx); plan_fetch_reference is its
readable twin, which tests hold it to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from eoslog._ext import readcommitted
from eoslog.errors import InvalidRecordError
from eoslog.record import codec, layout

if TYPE_CHECKING:
    from collections.abc import Sequence

    from typing_extensions import Buffer


class FetchPlan(NamedTuple):
    # [start, end) byte ranges of whole batches to decode, in offset order. A range may hold
    # control batches (the decoder skips them) but never a dropped data batch.
    runs: list[tuple[int, int]]
    # The offset after the last batch planned: the consumer's position once every record of
    # the runs is consumed. Equals the fetch offset only when nothing was planned.
    next_offset: int
    # Records of the runs at or after the fetch offset (outside control batches).
    records: int
    # Bytes of the batches planned, dropped ones included.
    planned_bytes: int


def plan_fetch(
    records: Buffer,
    fetch_offset: int,
    aborted_transactions: Sequence[tuple[int, int]] | None,
    records_max: int | None = None,
) -> FetchPlan:
    """plan_fetch_reference's plan, computed by the Cython filter (eoslog._ext.readcommitted):
    the same values and errors, without a Python object per batch."""
    return FetchPlan(
        *readcommitted.plan_fetch(records, fetch_offset, aborted_transactions, records_max)
    )


def plan_fetch_reference(
    records: Buffer,
    fetch_offset: int,
    aborted_transactions: Sequence[tuple[int, int]] | None,
    records_max: int | None = None,
) -> FetchPlan:
    """Plan the delivery of the whole batches in `records` (a FetchResult's bytes) for a
    fetch from `fetch_offset`. `aborted_transactions` is FetchResult.aborted_transactions:
    (producer id, first offset) pairs under read_committed, None under read_uncommitted.
    With records_max, planning stops after the batch that brings the records to at least
    that many (the rest stays in the log for the next fetch).

    Raises CorruptRecordError for a bad batch header (iter_headers' rules), offsets out of
    order (module doc) or a batch left out unread (a control batch, an aborted one) that
    fails its CRC (readcommitted.check_skipped), and InvalidRecordError for a control batch
    whose record key is shorter than 4 bytes."""
    pending = sorted(aborted_transactions or (), key=lambda entry: entry[1])
    pending_index = 0
    aborted_producers: set[int] = set()
    read_committed = aborted_transactions is not None
    runs: list[tuple[int, int]] = []
    run_start = -1
    next_offset = fetch_offset
    planned = 0
    end = 0
    previous_last: int | None = None
    for position, header in codec.iter_headers(records):
        end = position + header.size_in_bytes
        last_offset = header.last_offset
        base_offset = header.base_offset
        if (
            last_offset < base_offset
            or (previous_last is None and not base_offset <= fetch_offset <= last_offset)
            or (previous_last is not None and base_offset <= previous_last)
        ):
            raise readcommitted.offsets_break(
                position,
                fetch_offset,
                base_offset,
                last_offset,
                -1 if previous_last is None else previous_last,
            )
        previous_last = last_offset
        if header.is_control:
            readcommitted.check_skipped(records, position, end)
        dropped = False
        if read_committed and header.producer_id > layout.NO_PRODUCER_ID:
            while pending_index < len(pending) and pending[pending_index][1] <= last_offset:
                aborted_producers.add(pending[pending_index][0])
                pending_index += 1
            if header.is_control:
                if header.producer_id in aborted_producers and is_abort_marker(records, position):
                    aborted_producers.discard(header.producer_id)
            elif header.is_transactional and header.producer_id in aborted_producers:
                dropped = True
        if dropped:
            readcommitted.check_skipped(records, position, end)
            if run_start >= 0:
                runs.append((run_start, position))
                run_start = -1
        elif run_start < 0 and not header.is_control:
            run_start = position
        next_offset = last_offset + 1
        if not dropped and not header.is_control:
            first = max(header.base_offset, fetch_offset)
            planned += max(0, last_offset + 1 - first)
            if records_max is not None and planned >= records_max:
                break
    if run_start >= 0:
        runs.append((run_start, end))
    assert next_offset >= fetch_offset
    return FetchPlan(runs, next_offset, planned, end)


def is_abort_marker(records: Buffer, position: int) -> bool:
    """Whether the control batch at `position` holds an ABORT marker (its first record's key
    is version int16 + type int16; docs/format.md §3). Control batches are one per transaction, so
    decoding this one record in Python costs nothing per data record."""
    found = codec.batch_records(records, position)
    if not found:
        return False  # an empty control batch (left by compaction) is ignored
    key = found[0].key
    if key is None or len(key) < layout.CONTROL_KEY_SIZE:
        raise InvalidRecordError(f"control record key shorter than 4 bytes (batch at {position})")
    return int.from_bytes(key[2:4], "big", signed=True) == layout.CONTROL_ABORT
