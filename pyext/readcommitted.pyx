# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The consumer's read_committed filter (docs/format.md §6.4; Kafka's CompletedFetch
nextFetchedRecord / isBatchAborted), in Cython: which batches of a fetch reach the
application. The contract is eoslog.client.fetch.plan_fetch, which wraps the result in a
FetchPlan; the readable twin is tests/support/fetch_reference.py (tests/client/test_fetch_plan.py
holds the two together).

The batch headers are scanned in C (scan.scan_batches), or come scanned with the read
(FetchResult.batches); the loop over them runs here without Python objects per batch, except for control batches (one per transaction), whose ABORT /
COMMIT type is read from their one record.
"""

cimport cython
from libc.stdint cimport int16_t, int64_t

from engine cimport batch_info_rows, eos_batch_info

import numpy as np

from eoslog._ext import scan
from eoslog.errors import CorruptRecordError, InvalidRecordError, raise_for_status
from eoslog.record import codec, control, layout

cdef int64_t NO_PRODUCER_ID = -1
cdef int16_t CONTROL_MASK = layout.CONTROL_MASK
cdef int16_t TRANSACTIONAL_MASK = layout.TRANSACTIONAL_MASK


def is_abort_marker(records, Py_ssize_t position):
    """Whether the control batch at `position` holds an ABORT marker (its first record's key
    is version int16 + type int16; docs/format.md §3). InvalidRecordError for a key shorter than
    4 bytes; an empty control batch is not one."""
    found = codec.batch_records(records, position)
    if not found:
        return False
    control_type = control.read_type(found[0].key)
    if control_type is None:
        raise InvalidRecordError(f"control record key shorter than 4 bytes (batch at {position})")
    return control_type == control.ABORT


def offsets_break(Py_ssize_t position, int64_t fetch_offset, int64_t base_offset,
                  int64_t last_offset, int64_t previous_last):
    """The CorruptRecordError for a batch whose offsets break a fetch's order (see
    plan_fetch): built here, off the loop's fast path."""
    if previous_last < 0:
        what = f"offsets {base_offset}-{last_offset} end before the fetch offset {fetch_offset}"
    else:
        what = f"offsets {base_offset}-{last_offset} do not follow offset {previous_last}"
    return CorruptRecordError(
        f"the batch at byte {position} of a fetch from offset {fetch_offset} is out of order: "
        f"{what} (a base offset or length the CRC does not cover is damaged)"
    )


def check_skipped(records, Py_ssize_t position, Py_ssize_t end):
    """A batch the plan leaves out unread (a control batch, an aborted transactional one)
    is still checked against its CRC-32C: the control and transactional bits are attributes
    the CRC covers, and a flipped one would otherwise drop a data batch without a word.
    Control batches are one per transaction, so this costs nothing per data record."""
    infos, stop, status = scan.scan_batches(memoryview(records)[position:end], verify_crc=True)
    if status != 0:
        raise_for_status(status, position + stop)
    if len(infos) != 1:
        raise CorruptRecordError(f"the batch at byte {position} of a fetch cannot be read whole")


def _rows_end_at(infos, Py_ssize_t size):
    """Whether BATCH_INFO rows end exactly at byte `size` (none: at 0)."""
    if infos.dtype != scan.BATCH_INFO:
        raise TypeError("expected an array of scan.BATCH_INFO rows")
    if len(infos) == 0:
        return size == 0
    last = infos[len(infos) - 1]
    return int(last["position"]) + int(last["size"]) == size


def plan_fetch(records, int64_t fetch_offset, aborted_transactions, records_max=None,
               batches=None):
    """See eoslog.client.fetch.plan_fetch: the same plan as a tuple (runs, next_offset,
    records, planned_bytes), with the same errors. `batches`: the scan.BATCH_INFO rows of
    `records` when the read already scanned them (FetchResult.batches), so the headers are
    not scanned again. Rows that do not end where the records end are ignored (the records
    are scanned); rows that end there must tile them from byte 0 (ValueError otherwise)."""
    cdef Py_ssize_t records_size = len(memoryview(records).cast("B"))
    infos = None if batches is None else np.ascontiguousarray(batches)
    if infos is not None and not _rows_end_at(infos, records_size):
        infos = None  # rows of other bytes (records replaced since the read): scan these
    if infos is None:
        infos, stop, status = scan.scan_batches(records, verify_crc=False)
        if status != 0:
            raise_for_status(status, stop)
    cdef const eos_batch_info *rows = batch_info_rows(infos, scan.BATCH_INFO)
    cdef Py_ssize_t count = len(infos)
    cdef bint read_committed = aborted_transactions is not None
    pending = sorted(aborted_transactions or (), key=lambda entry: entry[1])
    cdef Py_ssize_t pending_index = 0, pending_count = len(pending)
    cdef set aborted_producers = set()
    cdef list runs = []
    cdef int64_t run_start = -1, next_offset = fetch_offset, planned = 0, end = 0
    cdef int64_t limit = -1 if records_max is None else records_max
    cdef int64_t position, last_offset, producer_id, first, base_offset
    # The first batch of a fetch must end at or past the fetch offset and the batches must
    # strictly increase after it: base offsets and lengths lie outside the CRC, and a reader
    # trusting a damaged one would move backwards or loop. The first may begin past the
    # fetch offset: in a compacted log a fetch inside a gap gets the next batch (Kafka's
    # rule); where the log has no gaps, the segment read refuses such a batch first.
    cdef int64_t previous_last = -1
    cdef int16_t attrs
    cdef bint dropped, control
    cdef Py_ssize_t i
    for i in range(count):
        position = rows[i].position
        if position != end or rows[i].size <= 0 or position + rows[i].size > records_size:
            # Rows given by a caller that do not tile the records (a scan's always do).
            raise ValueError(f"batch row {i} does not follow the one before it in the records")
        end = position + rows[i].size
        last_offset = rows[i].last_offset
        base_offset = rows[i].base_offset
        if (
            last_offset < base_offset
            or (i == 0 and last_offset < fetch_offset)
            or (i > 0 and base_offset <= previous_last)
        ):
            raise offsets_break(
                position, fetch_offset, base_offset, last_offset, previous_last if i else -1
            )
        previous_last = last_offset
        producer_id = rows[i].producer_id
        attrs = rows[i].attributes
        control = (attrs & CONTROL_MASK) != 0
        if control:
            check_skipped(records, position, end)
        dropped = False
        if read_committed and producer_id > NO_PRODUCER_ID:
            while pending_index < pending_count and pending[pending_index][1] <= last_offset:
                aborted_producers.add(pending[pending_index][0])
                pending_index += 1
            if aborted_producers and producer_id in aborted_producers:
                if control:
                    if is_abort_marker(records, position):
                        aborted_producers.discard(producer_id)
                elif attrs & TRANSACTIONAL_MASK:
                    dropped = True
        if dropped:
            check_skipped(records, position, end)
            if run_start >= 0:
                runs.append((run_start, position))
                run_start = -1
        elif run_start < 0 and not control:
            run_start = position
        next_offset = last_offset + 1
        if not dropped and not control:
            first = base_offset if base_offset > fetch_offset else fetch_offset
            if last_offset + 1 > first:
                planned += last_offset + 1 - first
            if limit >= 0 and planned >= limit:
                break
    if run_start >= 0:
        runs.append((run_start, end))
    if next_offset < fetch_offset:
        raise AssertionError(f"a fetch from {fetch_offset} planned up to {next_offset}")
    return runs, next_offset, planned, end
