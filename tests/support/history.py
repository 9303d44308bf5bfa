"""Operation histories for the history checker (docs/reliability.md family 8): what an operation
record holds, the recorder a workload writes them with, and the loader that turns the files
back into operations for tests/support/history_checker.py.

A history is a list of operations, each done by one *process* (a thread of one run of the
workload, named "r<run>:<role>"; a process does one operation at a time). An operation has an
invocation and a completion, as in Jepsen: its type is

- "ok": it happened (a send acknowledged, a transaction committed, a poll returned);
- "fail": it certainly did not take effect (a transaction aborted by abort_transaction(), a
  commit refused);
- "info": unknown, because the process was killed before the completion was written, or the
  call raised something that does not say either way.

What an operation did on the way is written as *steps* before the call that does it: the value
about to be produced (so that a value found in the log always has a known writer, however the
process died), the records a poll returned, the offsets sent with a transaction. The
completion adds what is only known at the end: each write's offset from its delivery report,
the moment commit_transaction() was invoked, the partitions a rebalance moved. Keys are
partitions, written "topic/partition"; values are strings unique across the whole history.

The recorder writes one JSON object per line with a single os.write() on an O_APPEND file, so
a SIGKILL loses at most the line being written (the page cache keeps the rest, and the loader
ignores a torn last line): an invocation or step written is never lost, and an invocation with
no completion is an indeterminate ("info") operation.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any

Key = str  # a partition, "topic/partition"
READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"
OP_TYPES = ("ok", "fail", "info")
COMMIT = "commit"
ABORT = "abort"
# A tombstone's value is null: this header holds what identifies it in the history.
TOMBSTONE_HEADER = "id"


def key_of(topic: str, partition: int) -> Key:
    return f"{topic}/{partition}"


def split_key(key: Key) -> tuple[str, int]:
    topic, _, partition = key.rpartition("/")
    return topic, int(partition)


def identity(value: bytes | None, headers: Iterable[tuple[str, bytes | None]] | None) -> str:
    """What identifies a record read in the history: its value, or a tombstone's
    TOMBSTONE_HEADER header ("" if it has neither)."""
    if value is None:
        value = dict(headers or ()).get(TOMBSTONE_HEADER)
    return (value or b"").decode()


@dataclass(frozen=True)
class Write:
    """One record sent: to `key`, the unique `value`, at `offset` (None while unknown), with
    the record key `record_key` (None: none; it matters on compacted partitions only). A
    tombstone is sent with a null value and `value` in its TOMBSTONE_HEADER header."""

    key: Key
    value: str
    offset: int | None = None
    record_key: str | None = None
    tombstone: bool = False


@dataclass(frozen=True)
class Read:
    """One record a poll returned, and when the poll returned it (monotonic ns)."""

    key: Key
    offset: int
    value: str
    at_ns: int = 0


@dataclass(frozen=True)
class ScanRecord:
    """One record of the log files themselves, read batch by batch after the last run: a data
    record (value set, marker None) or a transaction marker (marker "commit" or "abort").
    producer_id is -1 for a record written without one."""

    key: Key
    offset: int
    value: str | None
    producer_id: int
    producer_epoch: int
    transactional: bool
    marker: str | None = None


@dataclass
class Op:
    """A completed operation (see the module docstring). `f` says what it was:

    send       records produced by a non-transactional (idempotent) producer: `writes`
    txn        a transaction: `reads` from its consumer, `writes`, and the consumed
               `offsets` sent with it for `group`; `commit_ns` when commit_transaction() was
               invoked (None if it never was); transactional_id / producer_id /
               producer_epoch as at its start
    poll       records a consumer returned (`reads`), at `isolation`
    assign     a new assignment of `keys`, each starting at offsets[key] (None: from the
               group's committed offset or the reset policy, not known to the history)
    subscribe  a new subscription: the group decides the partitions
    seek       positions moved to offsets[key]
    commit     a consumer's plain commit of `offsets` for `group`
    committed  the offsets `group` had committed, as committed() returned them (None: none)
    compacted  `keys` are partitions of compacted topics (cleanup.policy=compact) with
               delete.retention.ms `delete_retention_ms`: the cleaner may remove records there
               (tests/support/history_model.py, cleanable)
    clean      a log cleaner pass ran (no effect on the checks)
    scan       the log files read after the last run (`scan`)

    complete_ns is None when no completion was written (the process was killed); bound_ns is
    then the moment the process was known dead, when the history says (else None)."""

    process: str
    f: str
    type: str = "ok"
    invoke_ns: int = 0
    complete_ns: int | None = None
    bound_ns: int | None = None
    writes: list[Write] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    isolation: str = READ_COMMITTED
    group: str | None = None
    keys: tuple[Key, ...] = ()
    offsets: dict[Key, int | None] = field(default_factory=dict)
    rebalanced: frozenset[Key] = frozenset()
    transactional_id: str | None = None
    producer_id: int | None = None
    producer_epoch: int | None = None
    commit_ns: int | None = None
    scan: list[ScanRecord] = field(default_factory=list)
    delete_retention_ms: int | None = None
    error: str | None = None
    index: int = 0

    def __post_init__(self) -> None:
        assert self.type in OP_TYPES, self.type

    @property
    def end_ns(self) -> float:
        """The latest moment the operation could still take effect: its completion, else the
        moment its process was known dead, else never."""
        if self.complete_ns is not None:
            return self.complete_ns
        return float("inf") if self.bound_ns is None else self.bound_ns

    def describe(self) -> str:
        return f"#{self.index} {self.process} {self.f} {self.type}"


# --- recording --------------------------------------------------------------------------------


class Recorder:
    """Appends records to one history file; any thread (one os.write per line, under a lock).
    `clock` gives monotonic nanoseconds, comparable between the processes of one machine."""

    def __init__(self, path: str, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()
        self.clock = clock

    def write(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        with self._lock:
            os.write(self._fd, line)

    def op(self, process: str, f: str, **fields: Any) -> Recording:
        """Write the invocation of an operation and return its recording; use it as a context
        manager (`with recorder.op(...) as op:`) so that a completion is always written: the
        type set on it ("ok" unless changed), or "info" when the block raises."""
        self.write({"p": process, "k": "invoke", "f": f, "t": self.clock(), **fields})
        return Recording(self, process)

    def close(self) -> None:
        os.close(self._fd)


class Recording:
    """One operation being recorded (Recorder.op)."""

    def __init__(self, recorder: Recorder, process: str) -> None:
        self._recorder = recorder
        self._process = process
        self.type = "ok"
        self.fields: dict[str, Any] = {}
        self.written: dict[str, int] = {}

    def step(self, **fields: Any) -> None:
        self._recorder.write(
            {"p": self._process, "k": "step", "t": self._recorder.clock(), **fields}
        )

    def writing(
        self, key: Key, value: str, record_key: str | None = None, tombstone: bool = False
    ) -> None:
        """Before producing `value` to `key` (with `record_key`, if any; as a tombstone)."""
        write: list[object] = [key, value]
        if record_key is not None or tombstone:
            write.append(record_key)
        if tombstone:
            write.append(True)
        self.step(w=[write])

    def read(self, records: Sequence[tuple[Key, int, str]]) -> None:
        """What one poll returned, in order."""
        if records:
            self.step(r=[list(record) for record in records])

    def delivered(self, value: str, offset: int) -> None:
        """A delivery report gave `value` its offset (written with the completion)."""
        self.written[value] = offset

    def __enter__(self) -> Recording:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is not None:
            self.type = "info"
            self.fields["error"] = repr(error)
        record = {"p": self._process, "k": self.type, "t": self._recorder.clock(), **self.fields}
        if self.written:
            record["written"] = self.written
        self._recorder.write(record)


# --- loading ----------------------------------------------------------------------------------


def read_records(paths: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Every record of the files, in order; a torn last line (a kill mid-write) is skipped."""
    for path in paths:
        with open(path, "rb") as file:
            for line in file:
                if line.endswith(b"\n"):
                    yield json.loads(line)


_INVOKE_FIELDS = {
    "isolation": "isolation",
    "group": "group",
    "tid": "transactional_id",
    "pid": "producer_id",
    "epoch": "producer_epoch",
    "delete_retention_ms": "delete_retention_ms",
}


def load(records: Iterable[dict[str, Any]]) -> list[Op]:
    """Operations from records (read_records): each invocation with its steps and completion,
    in invocation order. A record {"p": "nemesis", "k": "killed", "run": r, "t": ns} says the
    processes of run r ("r<r>:...") were dead by then: an operation of theirs left without a
    completion becomes "info" with bound_ns = that moment."""
    ops: list[Op] = []
    open_ops: dict[str, Op] = {}
    for record in records:
        process, kind = record["p"], record["k"]
        if kind == "killed":
            prefix = f"r{record['run']}:"
            for name in [name for name in open_ops if name.startswith(prefix)]:
                open_ops.pop(name).bound_ns = record["t"]
        elif kind == "invoke":
            if process in open_ops:
                open_ops.pop(process).type = "info"
            op = Op(process, record["f"], type="info", invoke_ns=record["t"], index=len(ops))
            for name, attribute in _INVOKE_FIELDS.items():
                if name in record:
                    setattr(op, attribute, record[name])
            _apply(op, record)
            ops.append(op)
            open_ops[process] = op
        elif kind == "step":
            _apply(open_ops[process], record)
        else:
            op = open_ops.pop(process)
            op.type, op.complete_ns = kind, record["t"]
            _apply(op, record)
    return ops


def _apply(op: Op, record: dict[str, Any]) -> None:
    """The fields an invocation, a step or a completion adds to its operation."""
    for key, value, *more in record.get("w", ()):
        record_key, tombstone = (*more, None, False)[:2]
        op.writes.append(Write(key, value, record_key=record_key, tombstone=bool(tombstone)))
    for key, offset, value in record.get("r", ()):
        op.reads.append(Read(key, offset, value, record["t"]))
    if "written" in record:
        written = record["written"]
        op.writes = [replace(w, offset=written.get(w.value, w.offset)) for w in op.writes]
    op.offsets.update(record.get("o", {}))
    op.keys = tuple(record.get("keys", op.keys))
    op.rebalanced = op.rebalanced | frozenset(record.get("rebalanced", ()))
    if "commit_t" in record:
        op.commit_ns = record["commit_t"]
    if "error" in record:
        op.error = record["error"]
    op.scan.extend(ScanRecord(*entry) for entry in record.get("scan", ()))
