"""The read_committed filter's readable twin: plan_fetch_reference plans a fetch exactly as
eoslog.client.fetch.plan_fetch (the Cython filter, pyext/readcommitted.pyx) does, one Python
object per batch. Test-only: tests/client/test_fetch_plan.py and
tests/reliability/f04_file_corruption/test_derived_files.py hold the two together (docs/style.md
rule 12)."""

from __future__ import annotations

from collections.abc import Sequence

from typing_extensions import Buffer

from eoslog._ext import readcommitted
from eoslog.client.fetch import FetchPlan
from eoslog.errors import InvalidRecordError
from eoslog.record import codec, control, layout


def plan_fetch_reference(
    records: Buffer,
    fetch_offset: int,
    aborted_transactions: Sequence[tuple[int, int]] | None,
    records_max: int | None = None,
) -> FetchPlan:
    """eoslog.client.fetch.plan_fetch's plan and errors (see its docstring), computed in
    Python from the batch headers."""
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
            or (previous_last is None and last_offset < fetch_offset)
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
    control_type = control.read_type(found[0].key)
    if control_type is None:
        raise InvalidRecordError(f"control record key shorter than 4 bytes (batch at {position})")
    return control_type == control.ABORT
