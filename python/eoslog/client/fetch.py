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
- The first batch ends at or past the fetch offset (it begins past it when the fetch offset
  lies in a gap the cleaner left: Kafka's consumer moves on to it) and every later batch
  begins past the one before: base offsets and lengths are outside the CRC, and a reader
  trusting a damaged one would move backwards or loop. A break raises CorruptRecordError
  naming the batch's position. (Where the log has no gaps, the partition's read refuses a
  first batch beginning past the fetch offset.)

plan_fetch runs the Cython filter (pyext/readcommitted.pyx); its readable twin,
plan_fetch_reference, lives with the tests that hold the two together
(tests/support/fetch_reference.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from eoslog._ext import readcommitted

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np
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
    batches: np.ndarray | None = None,
) -> FetchPlan:
    """Plan the delivery of the whole batches in `records` (a FetchResult's bytes) for a
    fetch from `fetch_offset`, in the Cython filter (eoslog._ext.readcommitted), without a
    Python object per batch. `aborted_transactions` is FetchResult.aborted_transactions:
    (producer id, first offset) pairs under read_committed, None under read_uncommitted.
    With records_max, planning stops after the batch that brings the records to at least
    that many (the rest stays in the log for the next fetch). `batches`: the records'
    scan.BATCH_INFO rows when the read scanned them already (FetchResult.batches), so the
    headers are scanned once per fetch.

    Raises CorruptRecordError for a bad batch header (iter_headers' rules), offsets out of
    order (module doc) or a batch left out unread (a control batch, an aborted one) that
    fails its CRC (readcommitted.check_skipped), and InvalidRecordError for a control batch
    whose record key is shorter than 4 bytes."""
    return FetchPlan(
        *readcommitted.plan_fetch(records, fetch_offset, aborted_transactions, records_max, batches)
    )
