"""The loop behind Consumer.poll, consume and consume_arrow (docs/api.md "Consumer",
docs/design.md "Fetch"): make the group's step, take records from the assigned partitions in
turn (storing, with enable.auto.offset.store, each partition's offset once its records are
taken: eoslog.client.offset_store), and wait for more until the call has what it asked for or
its timeout expires. A rebalance that comes due while the call holds records ends the call
with them (Step.DELIVER_FIRST); the next call makes it, so no call delivers a record twice.

Waiting: while nothing new is readable the loop waits on the broker's AppendSignal
(eoslog.log.append_signal), which every partition log bumps when it publishes a new log end
or LSO: an append in another thread wakes the waiting consumer at once. The wait also ends
after a pause growing from limits.poll_sleep_s_min to limits.poll_sleep_s_max, so the group's
steps (rebalances, heartbeats) go on while no data comes.

The Consumer checks the arguments and owns the parts; this module only runs the loop.
Thread safety: used from the consumer's thread only, as the Consumer is.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa

from eoslog import limits
from eoslog.client import offset_store
from eoslog.client.fetcher import ARROW, ARROW_HEADERS
from eoslog.client.message import Message
from eoslog.errors import KafkaException
from eoslog.record.columns import spark_schema

if TYPE_CHECKING:
    from eoslog.client.assignment import Assignment
    from eoslog.client.fetcher import AssignedPartition, Fetcher
    from eoslog.log.append_signal import AppendSignal


class Step(enum.Enum):
    """What a step of the consumer's group leaves the read loop to do."""

    READ = "read"  # the member has its partitions
    REBALANCING = "rebalancing"  # a rebalance is in progress: nothing to read yet
    # A rebalance is due while the call holds records: they are delivered first, and the
    # next step carries the rebalance out. Carried out now, it would move the partitions back
    # to their committed offsets, and the same call would take the same records again.
    DELIVER_FIRST = "deliver first"


class ReadLoop:
    """Reads for one Consumer. `step_group(holding)` makes the step of the consumer's group,
    if it has one (holding: whether the call has records it has not delivered yet).
    auto_store: enable.auto.offset.store."""

    def __init__(
        self,
        signal: AppendSignal,
        assignment: Assignment,
        fetcher: Fetcher,
        step_group: Callable[[bool], Step],
        group_errors: Callable[[int], list[Message]],
        *,
        auto_store: bool,
    ) -> None:
        self._signal = signal
        self._auto_store = auto_store
        self._assignment = assignment
        self._fetcher = fetcher
        self._step_group = step_group
        self._group_errors = group_errors

    def messages(self, num_messages: int, timeout: float) -> list[Message]:
        """Consumer.consume's loop (see its docstring)."""
        deadline = _deadline(timeout)
        out: list[Message] = []
        held = [0]  # decompressed bytes the messages taken keep alive
        sleep_s = limits.poll_sleep_s_min
        while True:
            seen = self._signal.generation  # before looking: no append missed
            step = self._step_group(bool(out))
            if step is Step.DELIVER_FIRST:
                return out
            if len(out) < num_messages:
                out += self._group_errors(num_messages - len(out))
            if step is Step.REBALANCING:
                if out or not self._wait(deadline, sleep_s, seen):
                    return out
                sleep_s = min(sleep_s * 2, limits.poll_sleep_s_max)
                continue
            for assigned in self._assignment.rotation():
                if len(out) >= num_messages or held[0] >= limits.decompressed_batch_bytes_max:
                    break
                taken, before = len(out), assigned.current_position()
                reported = 0  # error messages (_PARTITION_EOF, ...): they deliver no record
                try:
                    reported = self._fetcher.take_messages(assigned, out, num_messages, held)
                except KafkaException:
                    if not out:
                        raise
                    # The records taken have moved their positions: deliver them. The failing
                    # fetch is at its partition's position, so the next call raises it.
                    return out
                finally:
                    if self._auto_store:
                        delivered = len(out) - reported > taken
                        offset_store.store_delivered(assigned, before, delivered)
            if len(out) >= num_messages or held[0] >= limits.decompressed_batch_bytes_max:
                return out
            if not self._wait(deadline, sleep_s, seen):
                return out
            sleep_s = min(sleep_s * 2, limits.poll_sleep_s_max)

    def arrow(self, max_records: int, timeout: float, include_headers: bool) -> pa.RecordBatch:
        """Consumer.consume_arrow's loop (see its docstring)."""
        deadline = _deadline(timeout)
        pieces: list[pa.RecordBatch] = []
        total = held = 0
        budget = limits.decompressed_batch_bytes_max
        kind = ARROW_HEADERS if include_headers else ARROW
        sleep_s = limits.poll_sleep_s_min
        while True:
            seen = self._signal.generation  # before looking: no append missed
            step = self._step_group(bool(total))
            if step is Step.DELIVER_FIRST:
                return _one_batch(pieces, include_headers)
            # Not reported here (a RecordBatch has no row for them): the topic joins the
            # subscription once it exists.
            self._group_errors(limits.consume_messages_max)
            if step is Step.REBALANCING:
                if not self._wait(deadline, sleep_s, seen):
                    return _one_batch(pieces, include_headers)
                sleep_s = min(sleep_s * 2, limits.poll_sleep_s_max)
                continue
            for assigned in self._assignment.rotation():
                taken, before = total, assigned.current_position()
                try:
                    while (
                        total < max_records
                        and held < budget
                        and self._fetcher.fill(assigned, max_records - total, kind)
                    ):
                        piece = self._fetcher.take_arrow(
                            assigned, max_records - total, include_headers
                        )
                        pieces.append(piece)
                        total += piece.num_rows
                        held += piece.nbytes
                    self._raise_reported(assigned, total)
                except KafkaException:
                    if not total:
                        raise
                    return _one_batch(pieces, include_headers)  # as in messages()
                finally:
                    if self._auto_store:
                        offset_store.store_delivered(assigned, before, total > taken)
            if total >= max_records or held >= budget or not self._wait(deadline, sleep_s, seen):
                return _one_batch(pieces, include_headers)
            sleep_s = min(sleep_s * 2, limits.poll_sleep_s_max)

    def _raise_reported(self, assigned: AssignedPartition, total: int) -> None:
        """consume_arrow's form of the error messages poll() delivers: a RecordBatch has no
        row for an event, so a halted partition's error (_AUTO_OFFSET_RESET) is raised, once
        no records were collected before it (else the next call raises it). _PARTITION_EOF
        is not reported at all: it tells where the records end, which an empty or short
        batch already tells."""
        if assigned.error is not None and not total:
            error = self._fetcher.take_error(assigned)
            assert error is not None
            raise KafkaException(error)

    def _wait(self, deadline: float | None, pause_s: float, seen: int) -> bool:
        """Wait until the broker publishes data past generation `seen` (an append, a marker),
        at most pause_s; False once the deadline has passed."""
        if deadline is None:
            self._signal.wait_for_change(seen, pause_s)
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        self._signal.wait_for_change(seen, min(pause_s, left))
        return True


def _deadline(timeout: float) -> float | None:
    return None if timeout < 0 else time.monotonic() + timeout


def _one_batch(pieces: list[pa.RecordBatch], include_headers: bool) -> pa.RecordBatch:
    if len(pieces) == 1:
        return pieces[0]
    schema = spark_schema(include_headers)
    if not pieces:
        # pa.nulls, not pa.array([]): the latter imports pandas when it is installed.
        return pa.RecordBatch.from_arrays([pa.nulls(0, type=f.type) for f in schema], schema=schema)
    combined = pa.Table.from_batches(pieces, schema=schema).combine_chunks()
    return combined.to_batches()[0]
