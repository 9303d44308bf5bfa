"""Family 8 (docs/reliability.md): the history checker fires. Each test plants one anomaly in a
small clean history, built by hand, and the checker must report that class (and only the
classes the anomaly implies); the clean history itself must pass. The recorder and the loader
are tested here too: a killed operation becomes indeterminate, a torn last line is skipped.

The clean history: an idempotent producer writes a, b to in/0; a transactional producer
(producer id 7) commits c (in/0) and d (in/1), then aborts e (in/0); a copier in group g reads
a, b, c and commits x (out/0) with the offsets; an auditor in group aud reads everything
read_committed and commits its offsets; a read_uncommitted reader reads in/0, e included; at
the end, the group's offsets are read back and the log scanned.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from tests.support.history import (
    READ_UNCOMMITTED,
    Op,
    Read,
    Recorder,
    ScanRecord,
    Write,
    load,
    read_records,
)
from tests.support.history_checker import CLASSES, check
from tests.support.history_model import MalformedHistoryError

Placed = tuple[str, int, str]  # key, offset, value


class History:
    """Operations built in time order: each gets an invocation and a completion 10 ns apart,
    and a transaction's commit_transaction() is invoked just before it completes."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.now = 0

    def add(self, process: str, f: str, type: str = "ok", **fields: Any) -> Op:
        self.now += 10
        invoke = self.now
        self.now += 10
        op = Op(process, f, type, invoke_ns=invoke, index=len(self.ops), **fields)
        if type != "info":
            op.complete_ns = self.now
        self.ops.append(op)
        return op

    def reads(self, placed: Sequence[Placed]) -> list[Read]:
        return [Read(key, offset, value, self.now + 15) for key, offset, value in placed]

    def send(self, process: str, *writes: Placed, type: str = "ok") -> Op:
        return self.add(process, "send", type, writes=[Write(k, v, o) for k, o, v in writes])

    def txn(
        self,
        process: str,
        writes: Sequence[Placed] = (),
        reads: Sequence[Placed] = (),
        type: str = "ok",
        **fields: Any,
    ) -> Op:
        op = self.add(
            process,
            "txn",
            type,
            writes=[Write(k, v, o) for k, o, v in writes],
            reads=self.reads(reads),
            **fields,
        )
        if type == "ok":
            op.commit_ns = self.now - 1
        return op

    def poll(self, process: str, *placed: Placed, **fields: Any) -> Op:
        return self.add(process, "poll", reads=self.reads(placed), **fields)

    def assign(self, process: str, starts: dict[str, int | None], **fields: Any) -> Op:
        return self.add(process, "assign", keys=tuple(starts), offsets=dict(starts), **fields)


def data(key: str, offset: int, value: str, pid: int = -1, epoch: int = -1) -> ScanRecord:
    return ScanRecord(key, offset, value, pid, epoch, transactional=pid >= 0)


def marker(key: str, offset: int, pid: int, epoch: int, decision: str) -> ScanRecord:
    return ScanRecord(key, offset, None, pid, epoch, True, decision)


CLEAN_SCAN = [
    data("in/0", 0, "a"),
    data("in/0", 1, "b"),
    data("in/0", 2, "c", 7, 0),
    marker("in/0", 3, 7, 1, "commit"),
    data("in/0", 4, "e", 7, 1),
    marker("in/0", 5, 7, 2, "abort"),
    data("in/1", 0, "d", 7, 0),
    marker("in/1", 1, 7, 1, "commit"),
    data("out/0", 0, "x", 8, 0),
    marker("out/0", 1, 8, 1, "commit"),
]


def clean(scan: Sequence[ScanRecord] = CLEAN_SCAN, *, end: bool = True) -> History:
    """The clean history of the module docstring; end=False leaves out the final committed()
    and the scan, for a test to add its own operations first."""
    h = History()
    h.send("r0:idem", ("in/0", 0, "a"), ("in/0", 1, "b"))
    h.txn("r0:txw", [("in/0", 2, "c"), ("in/1", 0, "d")], transactional_id="w", producer_id=7)
    h.txn("r0:txw", [("in/0", 4, "e")], type="fail", transactional_id="w", producer_id=7)
    h.add("r0:cp", "subscribe", keys=("in/0",), group="g")
    h.txn(
        "r0:cp",
        [("out/0", 0, "x")],
        [("in/0", 0, "a"), ("in/0", 1, "b"), ("in/0", 2, "c")],
        group="g",
        offsets={"in/0": 4},
    )
    h.assign("r0:aud", {"in/0": 0, "in/1": 0, "out/0": 0}, group="aud")
    h.poll("r0:aud", ("in/0", 0, "a"), ("in/0", 1, "b"), ("in/1", 0, "d"))
    h.poll("r0:aud", ("in/0", 2, "c"), ("out/0", 0, "x"))
    h.add("r0:aud", "commit", group="aud", offsets={"in/0": 4})
    h.add("r0:aud", "committed", group="aud", offsets={"in/0": 4, "in/1": None})
    h.assign("r0:ru", {"in/0": 0}, isolation=READ_UNCOMMITTED)
    h.poll(
        "r0:ru",
        ("in/0", 0, "a"),
        ("in/0", 1, "b"),
        ("in/0", 2, "c"),
        ("in/0", 4, "e"),
        isolation=READ_UNCOMMITTED,
    )
    if end:
        finish(h, scan)
    return h


def finish(h: History, scan: Sequence[ScanRecord] = CLEAN_SCAN, offset: int = 4) -> None:
    h.add("final", "committed", group="g", offsets={"in/0": offset})
    h.add("final", "scan", scan=list(scan))


def found(h: History) -> set[str]:
    report = check(h.ops)
    print(report.describe())
    return report.found()


def by_process(h: History, process: str) -> list[Op]:
    return [op for op in h.ops if op.process == process]


def test_the_clean_history_has_no_anomaly() -> None:
    report = check(clean().ops)
    assert report.ok, report.describe()
    assert set(report.counts) == set(CLASSES)
    assert report.stats["txns"] == 3 and report.stats["writes"] == 6


def test_a_value_at_two_offsets_is_a_duplicate() -> None:
    assert found(clean([*CLEAN_SCAN, data("in/0", 6, "b")])) == {"duplicate"}


def test_a_read_of_a_value_nobody_wrote_is_an_inconsistent_offset() -> None:
    h = clean()
    h.poll("r0:ru", ("in/0", 6, "q"), isolation=READ_UNCOMMITTED)
    assert found(h) == {"inconsistent_offsets"}


def test_one_offset_seen_holding_two_values_is_an_inconsistent_offset() -> None:
    # The reader sees d where the log holds b: also d at two offsets, and a read of in/0
    # that d was never written to.
    h = clean()
    h.poll("r0:ru", ("in/0", 1, "d"), isolation=READ_UNCOMMITTED)
    assert "inconsistent_offsets" in found(h)


def test_an_acknowledged_write_no_reader_returned_below_what_they_read_is_lost() -> None:
    h = clean(end=False)
    h.send("r0:idem", ("in/1", 2, "f"), ("in/1", 3, "g"))
    h.assign("r0:late", {"in/1": 3})
    h.poll("r0:late", ("in/1", 3, "g"))
    finish(h, [*CLEAN_SCAN, data("in/1", 2, "f"), data("in/1", 3, "g")])
    assert found(h) == {"lost_write"}


def test_an_acknowledged_write_no_reader_reached_is_unseen() -> None:
    h = clean(end=False)
    h.send("r0:idem", ("in/1", 2, "f"))
    finish(h, [*CLEAN_SCAN, data("in/1", 2, "f")])
    assert found(h) == {"unseen"}


def test_a_read_committed_read_of_an_aborted_value_is_an_aborted_read() -> None:
    h = clean()
    h.poll("r0:aud", ("in/0", 4, "e"))
    assert found(h) == {"aborted_read"}


def test_a_read_of_a_failed_send_is_an_aborted_read_without_a_log_scan() -> None:
    h = clean(end=False)
    h.send("r0:idem", ("in/1", 2, "f"), type="fail")
    h.poll("r0:aud", ("in/1", 2, "f"))
    assert found(h) == {"aborted_read"}


def test_a_read_before_the_writer_invoked_commit_is_an_intermediate_read() -> None:
    h = clean()
    copier = next(op for op in h.ops if op.process == "r0:cp" and op.f == "txn")
    h.assign("r0:peek", {"out/0": 0})
    h.poll("r0:peek")
    h.ops[-1].reads = [Read("out/0", 0, "x", (copier.commit_ns or 0) - 5)]
    assert found(h) == {"intermediate_read"}


def test_a_transaction_reading_its_own_write_is_an_intermediate_read() -> None:
    h = clean(end=False)
    h.txn("r0:own", [("in/1", 2, "f")], [("in/1", 2, "f")], producer_id=9)
    finish(h, [*CLEAN_SCAN, data("in/1", 2, "f", 9, 0), marker("in/1", 3, 9, 1, "commit")])
    assert found(h) == {"intermediate_read"}


def test_a_read_of_a_transaction_never_asked_to_commit_is_an_intermediate_read() -> None:
    h = clean(end=False)
    h.txn("r0:dead", [("in/1", 2, "f")], type="info", producer_id=9)
    h.poll("r0:aud", ("in/1", 2, "f"))
    assert found(h) == {"intermediate_read"}


def test_a_poll_starting_past_the_next_visible_value_is_a_poll_skip() -> None:
    h = clean()
    first = by_process(h, "r0:aud")[1]
    first.reads = [r for r in first.reads if r.value != "b"]  # a, then c in the next poll
    assert found(h) == {"poll_skip"}


def test_a_poll_starting_past_its_assigned_offset_is_a_poll_skip() -> None:
    h = clean()
    first = by_process(h, "r0:aud")[1]
    first.reads = [r for r in first.reads if r.value != "a"]  # assigned at 0: a was next
    assert found(h) == {"poll_skip"}


def test_a_poll_repeating_the_last_value_is_a_nonmonotonic_poll() -> None:
    h = clean()
    second = by_process(h, "r0:aud")[2]
    second.reads = [replace(second.reads[0], offset=1, value="b"), *second.reads]
    assert found(h) == {"nonmonotonic_poll"}


def test_a_poll_skipping_within_itself_is_an_internal_poll_skip() -> None:
    h = clean()
    first, second = by_process(h, "r0:aud")[1:3]
    first.reads = [r for r in first.reads if r.value != "b"] + second.reads[:1]
    second.reads = second.reads[1:]
    assert found(h) == {"internal_poll_skip"}


def test_a_poll_going_back_within_itself_is_an_internal_nonmonotonic_poll() -> None:
    h = clean()
    first = by_process(h, "r0:aud")[1]
    first.reads = [*first.reads, *first.reads[:2]]  # a, b, d, a, b
    assert found(h) == {"internal_nonmonotonic_poll"}


def test_a_seek_resets_where_the_next_poll_must_start() -> None:
    h = clean(end=False)
    h.add("r0:aud", "seek", offsets={"in/0": 1})
    h.poll("r0:aud", ("in/0", 1, "b"), ("in/0", 2, "c"))
    h.add("r0:aud", "seek", offsets={"in/0": 0})
    h.poll("r0:aud", ("in/0", 1, "b"))  # a was next
    finish(h)
    assert found(h) == {"poll_skip"}


def test_a_rebalance_inside_a_poll_excuses_where_it_starts() -> None:
    h = clean(end=False)
    h.poll("r0:aud", ("in/0", 0, "a"), rebalanced=frozenset({"in/0"}))
    finish(h)
    assert found(h) == set()


def sends_out_of_order(same_op: bool) -> History:
    h = clean(end=False)
    if same_op:
        h.send("r0:idem", ("in/2", 1, "f"), ("in/2", 0, "g"))
    else:
        h.send("r0:idem", ("in/2", 1, "f"))
        h.send("r0:idem", ("in/2", 0, "g"))
    h.assign("r0:aud2", {"in/2": 0})
    h.poll("r0:aud2", ("in/2", 0, "g"), ("in/2", 1, "f"))
    finish(h, [*CLEAN_SCAN, data("in/2", 0, "g"), data("in/2", 1, "f")])
    return h


def test_a_later_send_at_a_lower_offset_is_a_nonmonotonic_send() -> None:
    assert found(sends_out_of_order(same_op=False)) == {"nonmonotonic_send"}


def test_sends_of_one_operation_out_of_order_are_an_internal_nonmonotonic_send() -> None:
    assert found(sends_out_of_order(same_op=True)) == {"internal_nonmonotonic_send"}


def test_two_transactions_reading_each_others_writes_are_a_g1c_cycle() -> None:
    h = clean(end=False)
    first = h.txn("r0:t1", [("out/1", 0, "y")], producer_id=11)
    second = h.txn("r0:t2", [("out/2", 0, "z")], producer_id=12)
    first.reads = [Read("out/2", 0, "z", (second.commit_ns or 0) + 1)]
    second.reads = [Read("out/1", 0, "y", (first.commit_ns or 0) + 100)]
    finish(h)
    assert found(h) == {"g1c"}


def test_a_produce_after_its_transactions_marker_is_a_delayed_marker() -> None:
    # e's transaction (epoch 1) was aborted by the marker at 5; h of epoch 1 lands after it.
    h = clean(end=False)
    h.ops[2].writes.append(Write("in/0", "h", 6))
    finish(h, [*CLEAN_SCAN, data("in/0", 6, "h", 7, 1)])
    assert found(h) == {"delayed_marker"}


def test_an_end_of_the_previous_transaction_during_the_next_is_a_delayed_marker() -> None:
    # The abort marker of epoch 2 (ending e's transaction) lands again in in/1, after k of the
    # next transaction (epoch 2), and aborts it: k, committed, is never seen.
    h = clean(end=False)
    h.txn("r0:txw", [("in/1", 2, "k")], transactional_id="w", producer_id=7)
    scan = [*CLEAN_SCAN, data("in/1", 2, "k", 7, 2), marker("in/1", 3, 7, 2, "abort")]
    finish(h, [*scan, marker("in/1", 4, 7, 3, "commit")])
    assert found(h) == {"delayed_marker", "unseen"}


def test_a_transaction_ended_by_the_other_decision_is_a_delayed_marker() -> None:
    scan = [marker("in/0", 5, 7, 2, "commit") if r.offset == 5 else r for r in CLEAN_SCAN]
    assert found(clean(scan)) == {"delayed_marker"}


def test_a_committed_offset_older_than_the_last_acknowledged_commit_is_reported() -> None:
    h = clean()
    next(op for op in h.ops if op.f == "committed").offsets["in/0"] = 2
    assert found(h) == {"committed_offsets"}


def test_offsets_of_an_aborted_transaction_are_never_committed() -> None:
    h = clean(end=False)
    h.txn("r0:cp", [], [], type="fail", group="g", offsets={"in/0": 9})
    finish(h, offset=9)
    assert found(h) == {"committed_offsets"}


def test_an_undecided_commit_may_or_may_not_have_happened() -> None:
    h = clean(end=False)
    h.add("r0:aud", "commit", type="info", group="aud", offsets={"in/0": 5}, bound_ns=10**9)
    h.add("r1:aud", "committed", group="aud", offsets={"in/0": 5})
    h.add("r1:aud", "committed", group="aud", offsets={"in/0": 4})
    finish(h)
    assert found(h) == set()


def test_a_value_two_committed_transactions_of_a_group_read_is_consumed_twice() -> None:
    h = clean(end=False)
    h.add("r0:cp", "seek", offsets={"in/0": 2})
    h.txn("r0:cp", [], [("in/0", 2, "c")], group="g", offsets={"in/0": 4})
    finish(h)
    assert found(h) == {"consumed_twice"}


def test_a_value_below_the_groups_offset_no_transaction_read_is_consumed_never() -> None:
    h = clean()
    copier = next(op for op in h.ops if op.process == "r0:cp" and op.f == "txn")
    copier.reads = copier.reads[:2]
    assert found(h) == {"consumed_never"}


def test_a_value_written_twice_is_a_malformed_history() -> None:
    h = clean()
    h.send("r0:idem", ("in/1", 5, "a"))
    with pytest.raises(MalformedHistoryError):
        check(h.ops)


# --- the recorder and the loader --------------------------------------------------------------


def test_recorded_operations_load_with_their_steps_and_outcomes(tmp_path: str) -> None:
    path = os.path.join(tmp_path, "history.jsonl")
    clock = iter(range(100, 10_000, 10))
    recorder = Recorder(path, clock=lambda: next(clock))
    with recorder.op("r0:txw", "txn", tid="w", pid=7, epoch=0) as op:
        op.writing("in/0", "a")
        op.read([("in/1", 0, "z")])
        op.delivered("a", 3)
        op.fields["commit_t"] = 125
    with pytest.raises(RuntimeError), recorder.op("r0:cp", "poll"):
        raise RuntimeError("boom")
    recorder.op("r0:idem", "send").writing("in/0", "b")  # killed: no completion
    recorder.write({"p": "nemesis", "k": "killed", "run": 0, "t": 900})
    recorder.close()
    with open(path, "ab") as file:
        file.write(b'{"p": "r1:idem", "k": "inv')  # torn by the kill
    txn, poll, send = load(read_records([path]))
    assert (txn.type, txn.writes, txn.reads) == (
        "ok",
        [Write("in/0", "a", 3)],
        [Read("in/1", 0, "z", 120)],
    )
    assert (txn.transactional_id, txn.producer_id, txn.commit_ns) == ("w", 7, 125)
    assert (poll.type, poll.error) == ("info", "RuntimeError('boom')")
    assert (send.type, send.complete_ns, send.bound_ns) == ("info", None, 900)
    assert send.writes == [Write("in/0", "b")]
    with open(path, "rb") as file:
        lines = [json.loads(line) for line in file.read().splitlines()[:-1]]
    assert [line["k"] for line in lines] == [
        "invoke",
        "step",
        "step",
        "ok",
        "invoke",
        "info",
        "invoke",
        "step",
        "killed",
    ]


def test_a_long_chain_of_transactions_reading_each_other_is_checked_without_recursion() -> None:
    # Each transaction reads the previous one's write: a path of 3,000 operations, deeper than
    # Python's recursion limit, and no cycle.
    h = History()
    previous: list[tuple[str, int, str]] = []
    for number in range(3000):
        value = f"v{number}"
        h.txn(f"r0:t{number}", [("chain/0", number, value)], previous, producer_id=number)
        previous = [("chain/0", number, value)]
    h.poll("r0:last", ("chain/0", 2999, "v2999"))
    assert found(h) == set()
