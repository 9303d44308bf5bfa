"""The history checker's classes that follow one process, or one group, through time: sends and
polls in process order, the write-read graph, and a group's offsets
(tests/support/history_checker.py defines the classes; this module finds them).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from tests.support import graphs
from tests.support.history import READ_COMMITTED, Key, Op, Read
from tests.support.history_model import COMMITTED, Model

if TYPE_CHECKING:
    from tests.support.history_checker import Report

# A consumer's position in a partition, as an index in the order it reads: ("at", i) after an
# assign or seek (the next record must be the i-th), ("after", i) after it returned the i-th.
Position = tuple[str, int]


def by_process(ops: Iterable[Op]) -> dict[str, list[Op]]:
    found: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        found[op.process].append(op)
    return found


# --- sends ------------------------------------------------------------------------------------


def check_sends(model: Model, report: Report) -> None:
    """nonmonotonic_send and internal_nonmonotonic_send."""
    for ops in by_process(model.ops).values():
        last: dict[Key, tuple[int, Op]] = {}
        for op in ops:
            for write in op.writes:
                offset = write.offset
                if offset is None:
                    continue
                previous = last.get(write.key)
                if previous is not None and offset <= previous[0]:
                    same = previous[1] is op
                    report.add(
                        "internal_nonmonotonic_send" if same else "nonmonotonic_send",
                        f"{op.describe()} sent {write.value!r} to {write.key} at offset {offset}"
                        f", after offset {previous[0]} ({previous[1].describe()})",
                    )
                last[write.key] = (offset, op)


# --- polls ------------------------------------------------------------------------------------


def check_polls(model: Model, report: Report) -> None:
    """poll_skip, nonmonotonic_poll and their internal forms, one process at a time."""
    for ops in by_process(model.ops).values():
        positions: dict[Key, Position] = {}
        for op in ops:
            if op.type == "fail" and op.f in ("assign", "subscribe", "seek"):
                continue
            if op.f == "assign":
                positions = {}
                _place(model, op, positions, {key: op.offsets.get(key) for key in op.keys})
            elif op.f == "subscribe":
                positions = {}
            elif op.f == "seek":
                _place(model, op, positions, op.offsets)
            elif op.reads:
                for key in op.rebalanced:
                    positions.pop(key, None)
                _check_poll(model, report, op, positions)


def _place(
    model: Model, op: Op, positions: dict[Key, Position], starts: dict[Key, int | None]
) -> None:
    for key, start in starts.items():
        if start is None:
            positions.pop(key, None)
        else:
            positions[key] = ("at", model.order(op.isolation, key).first_at_or_after(start))


def _check_poll(model: Model, report: Report, op: Op, positions: dict[Key, Position]) -> None:
    reads: dict[Key, list[Read]] = defaultdict(list)
    for read in op.reads:
        reads[read.key].append(read)
    for key, found in reads.items():
        order = model.order(op.isolation, key)
        previous: int | None = None
        for read in found:
            index = order.index.get(read.value)
            if index is None:
                continue  # not visible at this level: aborted_read's business
            at = read.at_ns or op.end_ns
            if previous is not None:
                _compare(model, report, op, key, ("after", previous), index, "internal_", at)
            elif key in positions:
                _compare(model, report, op, key, positions[key], index, "", at)
            previous = index
        if previous is not None:
            positions[key] = ("after", previous)


def _compare(
    model: Model,
    report: Report,
    op: Op,
    key: Key,
    position: Position,
    index: int,
    prefix: str,
    at: float,
) -> None:
    """One record at `index` of the order, read at `at` from `position`. Passing over values
    the cleaner may have removed by then is no skip."""
    order = model.order(op.isolation, key)
    kind, known = position
    expected = known if kind == "at" else known + 1
    passed = order.values[expected:index]
    if index == expected or (
        index > expected and all(model.cleaned_by(key, value, at) for value in passed)
    ):
        return
    if kind == "after":
        was = f"after {order.values[known]!r}"
    else:
        was = f"where {order.values[known]!r} was next" if known < len(order.values) else "at end"
    if index > expected:
        skipped = [value for value in passed if not model.cleaned_by(key, value, at)]
        report.add(
            prefix + "poll_skip",
            f"{op.describe()} {key}: {order.values[index]!r} {was}, skipping {skipped[:5]}"
            f"{' ...' if len(skipped) > 5 else ''} ({len(skipped)})",
        )
    else:
        report.add(
            prefix + "nonmonotonic_poll",
            f"{op.describe()} {key}: {order.values[index]!r} (index {index}) {was}",
        )


# --- the write-read graph ---------------------------------------------------------------------


def check_cycles(model: Model, report: Report) -> None:
    """g1c: the cycles of the graph whose edges go from a value's writer to each operation that
    read it at read_committed (one per strongly connected group of operations)."""
    edges: dict[int, set[int]] = defaultdict(set)
    for (key, value), readers in model.committed_reads.items():
        writer = model.writer_of(key, value)
        if writer is None or writer.op.type == "fail":
            continue
        for reader, _ in readers:
            if reader is not writer.op:
                edges[writer.op.index].add(reader.index)
    ops = {op.index: op for op in model.ops}
    for cycle in graphs.cycles(edges):
        report.add("g1c", " -> ".join(ops[index].describe() for index in cycle))


# --- groups -----------------------------------------------------------------------------------


def _commit_start(op: Op) -> int:
    return op.commit_ns if op.f == "txn" and op.commit_ns is not None else op.invoke_ns


def check_group_offsets(model: Model, report: Report) -> None:
    """committed_offsets: every committed() answer against the group's commits."""
    commits: dict[tuple[str, Key], list[tuple[Op, int | None]]] = defaultdict(list)
    for op in model.ops:
        can_commit = op.f == "commit" or (op.f == "txn" and op.commit_ns is not None)
        if op.group is not None and can_commit and op.type != "fail":
            for key, offset in op.offsets.items():
                commits[(op.group, key)].append((op, offset))
    for op in model.ops:
        if op.f != "committed" or op.type != "ok" or op.group is None:
            continue
        for key, seen in op.offsets.items():
            allowed = _allowed_offsets(commits.get((op.group, key), []), op)
            if seen not in allowed:
                report.add(
                    "committed_offsets",
                    f"{op.describe()}: group {op.group} {key} at {seen}, not one of "
                    f"{sorted(allowed, key=lambda offset: -2 if offset is None else offset)}",
                )


def _allowed_offsets(commits: list[tuple[Op, int | None]], observer: Op) -> set[int | None]:
    """What the group's offset could be during `observer`: any commit invoked before it ended
    and not superseded by a commit acknowledged before it began (nothing committed, None, if
    no commit was acknowledged before it began)."""
    assert observer.complete_ns is not None
    done = [op for op, _ in commits if op.type == "ok" and op.end_ns < observer.invoke_ns]
    allowed: set[int | None] = set() if done else {None}
    for op, offset in commits:
        if _commit_start(op) >= observer.complete_ns:
            continue
        if not any(op.end_ns < _commit_start(later) for later in done):
            allowed.add(offset)
    return allowed


def committed_transaction(model: Model, op: Op) -> bool:
    """A transaction that committed: acknowledged, or undecided with a write the log shows
    committed."""
    if op.f != "txn":
        return False
    if op.type == "ok":
        return True
    return op.type == "info" and any(
        model.fate.get((write.key, write.value)) == COMMITTED for write in op.writes
    )


def check_consumption(model: Model, report: Report) -> None:
    """consumed_twice and consumed_never, for each group whose transactions send offsets."""
    groups = {op.group for op in model.ops if op.f == "txn" and op.group and op.offsets}
    final: dict[tuple[str, Key], int] = {}
    for op in model.ops:
        if op.f == "committed" and op.type == "ok" and op.group in groups:
            for key, offset in op.offsets.items():
                if offset is not None:
                    final[(op.group, key)] = offset
    for group in sorted(g for g in groups if g is not None):
        consumed: Counter[tuple[Key, str]] = Counter()
        for op in model.ops:
            if op.group == group and committed_transaction(model, op):
                consumed.update((read.key, read.value) for read in op.reads)
        for (key, value), times in consumed.items():
            if times > 1:
                report.add("consumed_twice", f"group {group}: {value!r} of {key} {times} times")
        for (owner, key), end in final.items():
            if owner != group:
                continue
            order = model.order(READ_COMMITTED, key)
            for value in order.values[: order.first_at_or_after(end)]:
                if (key, value) not in consumed and not model.cleaned_by(key, value):
                    report.add(
                        "consumed_never",
                        f"group {group}: {value!r} of {key} below its committed offset {end}",
                    )
