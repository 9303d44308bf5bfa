"""Family 5 extended (docs/reliability.md): I/O errors at the k-th file-system call of a
transactional + consumer-group workload, so that every call site of the transaction
coordinator (`__transaction_state` appends and fsyncs), the markers, consumer offset commits
(`__consumer_offsets`, plain and transactional), producer snapshots, checkpoints and
`eoslog.meta` writes is faulted (test_faults_partition_log.py, beside this file, covers the
plain partition log).

The workload runs once on the recording twin (eoslog.fs_twin) to count its N calls; then for
every k < N and the fault kinds of fault_plan (under "commit": EIO everywhere, ENOSPC and
short writes at writes; under "always": EIO at every write and fsync) it runs again with
twin.fail_at(k, kind). After the first error it goes on probing (another
transaction, another consumer commit): those calls may fail or succeed, but
- a call that fails raises a typed eoslog error (KafkaException), never a bare OSError, and
  fails at once: no transaction call waits out its timeout (CONCURRENT_TRANSACTIONS retried
  by the client) because an earlier fault left the id's transaction unfinished;
- nothing is acknowledged after a failed fsync that the acknowledgement depends on (a failed
  fsync of a partition's file stops that partition; one of a checkpoint stops the broker);
- reopening the files (as a process crash leaves them, as the worst power loss leaves them:
  every file cut back to its last fsync, and as a random power loss leaves them) works and
  keeps every acknowledged outcome: each committed transaction's records (read_committed,
  at the offsets its delivery callbacks reported) and its offsets; no record of an aborted
  transaction, nor of one whose commit failed unless all of its records are there
  (all-or-nothing); every acknowledged consumer commit; the partition-log invariants
  (tests/support/invariants.py check_broker) for every acknowledged record.

Each failure names (k, kind, call, step) and replays with run_workload(k, kind). The run
prints the call count, the faulted runs per operation and the anomaly counters.
"""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

import eoslog
from eoslog.errors import KafkaException, OperationTimedOutError
from eoslog.fs_twin import RecordingFileSystem
from tests.support.invariants import check_broker, copy_twin

ROOT = "/data"
LOG_DIR = "/data/log"
OUT = "out"
IN = "in"
GROUP = "g"
TXN = "f5"
TS = 1_700_000_000_000
BROKER_CONFIG = {"log.index.size.max.bytes": 4096}
# Tiny segments: the output partitions roll (writing producer snapshots) during the workload.
OUT_CONFIG = {"segment.bytes": 600, "index.interval.bytes": 64, "segment.index.bytes": 128}
TRANSACTIONS = 4
ABORTED = 2  # the transaction number that aborts
PROBES = 2  # transactions tried after the first error
IMAGE_SEED = 7
# Seconds each transaction call may block. Nothing in this single-threaded workload waits
# for anything: a call answered CONCURRENT_TRANSACTIONS (retried by the client until its
# timeout) after a fault is an anomaly ("timed_out"), as a failed marker write once left the
# id in Prepare* with every later call waiting out max.block.ms. The bound only keeps such a
# regression from costing a minute per call; a call that fails must fail at once, typed.
CALL_TIMEOUT_S = 5.0


class Clock:
    def __init__(self) -> None:
        self.now = TS

    def __call__(self) -> int:
        self.now += 1
        return self.now


@dataclass
class Transaction:
    number: int
    values: dict[int, list[bytes]]  # partition -> values, in order
    offsets: dict[tuple[int, int], bytes] = field(default_factory=dict)  # (partition, offset)
    input_offset: int = 0
    outcome: str = "unknown"  # committed, aborted, unknown (the end call failed)


@dataclass
class Run:
    call: int | None
    kind: str | None
    durability: str = "commit"
    step: str = ""
    error: BaseException | None = None
    failed_at_step: str = ""
    transactions: list[Transaction] = field(default_factory=list)
    commits: dict[int, int] = field(default_factory=dict)  # in-1 offset acked -> step index
    acked_commits: list[int] = field(default_factory=list)
    tried_commits: list[int] = field(default_factory=list)
    acks_after_error: list[tuple[str, set[str]]] = field(default_factory=list)
    untyped: list[str] = field(default_factory=list)
    timed_out: list[str] = field(default_factory=list)  # calls that waited out their timeout
    twin: RecordingFileSystem | None = None
    calls: int = 0


def state_and_offsets_dirs(broker: eoslog.Broker) -> tuple[str, str]:
    state_log, _ = broker.transactions._placement(TXN)
    offsets = broker.groups.offsets_partition(GROUP)
    return f"{state_log.topic}-{state_log.partition}", "{}-{}".format(*offsets)


class Workload:
    """The steps, each a method; an error in one is recorded and the rest are probes."""

    def __init__(self, run: Run, twin: RecordingFileSystem) -> None:
        self.run = run
        self.twin = twin
        self.clock = Clock()
        self.broker: eoslog.Broker | None = None
        self.producer: Any = None
        self.consumer: Any = None
        self.dirs: set[str] = set()  # what a transaction depends on
        self.offsets_dir = ""

    def do(self, step: str, action: Any) -> bool:
        """Run one step; False (and the error recorded) when it raised."""
        self.run.step = step
        try:
            action()
        except Exception as error:  # classified: typed or not, first or later
            if isinstance(error, OperationTimedOutError):
                self.run.timed_out.append(f"{step}: {error}"[:300])
            if not isinstance(error, KafkaException):
                self.run.untyped.append(f"{step}: {type(error).__name__}: {error}"[:300])
            if self.run.error is None:
                self.run.error, self.run.failed_at_step = error, step
            return False
        return True

    def open(self) -> None:
        self.broker = eoslog.open(
            LOG_DIR,
            self.run.durability,
            BROKER_CONFIG,
            fs=self.twin,
            clock_ms=self.clock,
            background=False,
        )
        self.broker.create_topic(IN, 2)
        self.broker.create_topic(OUT, 2, OUT_CONFIG)
        state_dir, self.offsets_dir = state_and_offsets_dirs(self.broker)
        self.dirs = {f"{OUT}-0", f"{OUT}-1", state_dir, self.offsets_dir}
        self.consumer = self.broker.consumer({"group.id": GROUP, "enable.auto.commit": False})
        self.producer = self.broker.producer({"transactional.id": TXN, "linger.ms": 0})
        self.producer.init_transactions(CALL_TIMEOUT_S)

    def transaction(self, number: int) -> None:
        txn = Transaction(number, {0: [], 1: []}, input_offset=10 * (number + 1))
        self.run.transactions.append(txn)

        def delivered(error: Any, report: Any) -> None:
            if error is None:
                txn.offsets[(report.partition(), report.offset())] = report.value()

        self.producer.begin_transaction()
        for partition in (0, 1):
            for index in range(3):
                value = b"txn%d:p%d:%d|" % (number, partition, index) + b"x" * 80
                txn.values[partition].append(value)
                self.producer.produce(OUT, value, partition=partition, on_delivery=delivered)
        self.producer.send_offsets_to_transaction(
            [eoslog.TopicPartition(IN, 0, txn.input_offset)],
            self.consumer.consumer_group_metadata(),
            CALL_TIMEOUT_S,
        )
        failed_before = self.run.error is not None
        if number == ABORTED:
            self.producer.abort_transaction(CALL_TIMEOUT_S)
            txn.outcome = "aborted"
        else:
            self.producer.commit_transaction(CALL_TIMEOUT_S)
            txn.outcome = "committed"
            if failed_before:
                self.run.acks_after_error.append((f"commit_transaction {number}", self.dirs))

    def plain_commit(self, offset: int) -> None:
        failed_before = self.run.error is not None
        self.run.tried_commits.append(offset)
        self.consumer.commit(offsets=[eoslog.TopicPartition(IN, 1, offset)])
        self.run.acked_commits.append(offset)
        if failed_before:
            self.run.acks_after_error.append((f"consumer commit {offset}", {self.offsets_dir}))

    def maintenance(self) -> None:
        assert self.broker is not None
        self.broker.run_maintenance()

    def close(self) -> None:
        for closable in (self.producer, self.consumer, self.broker):
            if closable is not None:
                closable.close()


def run_workload(
    call: int | None = None, kind: str | None = None, durability: str = "commit"
) -> Run:
    twin = RecordingFileSystem(seed=call or 0)
    twin.makedirs(ROOT, durable=True)
    run = Run(call, kind, durability, twin=twin)
    if call is not None and kind is not None:
        twin.fail_at(call, kind)
    work = Workload(run, twin)
    if work.do("open", work.open):
        for number in range(TRANSACTIONS + PROBES):
            if number >= TRANSACTIONS and run.error is None:
                break
            # A transaction left in an error state is aborted (or the producer is fatal and
            # every later call raises): what an application does.
            if not work.do(f"transaction {number}", lambda n=number: work.transaction(n)):
                work.do(f"abort {number}", lambda: work.producer.abort_transaction(CALL_TIMEOUT_S))
            work.do(f"consumer commit {number}", lambda n=number: work.plain_commit(100 + n))
            if number == 1:
                work.do("run_maintenance", work.maintenance)
    # A failed open step (a create_topic, say) is closed too: what it left must not be
    # marked cleanly shut down unless a clean open can trust it.
    if run.error is None:
        # Close writes the deferred Complete*, snapshots, checkpoints and the clean-shutdown
        # marker: a fault there must surface too.
        work.do("close", work.close)
    with contextlib.suppress(Exception):  # close after a failure may report it again
        work.close()
    run.calls = twin.calls
    return run


# --- checking ----------------------------------------------------------------------------------


def faulted_dir(run: Run) -> str | None:
    """The partition directory of the faulted call, "" for a file at the log directory's
    root (checkpoints, eoslog.meta), None for a call that is not a write or fsync."""
    assert run.twin is not None and run.call is not None
    operation, path = run.twin.recorded_calls()[run.call]
    if operation not in ("sync", "sync_dir", "pwrite", "truncate"):
        return None
    relative = path.removeprefix(LOG_DIR).strip("/")
    if operation == "sync_dir":
        return relative  # the directory itself: a partition's, or "" for the log directory
    return relative.split("/")[0] if "/" in relative else ""


def classify(run: Run) -> list[tuple[str, str]]:
    assert run.twin is not None and run.call is not None
    operation, path = run.twin.recorded_calls()[run.call]
    where = f"fault {run.kind} at call {run.call} ({operation} {path}), step {run.failed_at_step!r}"
    anomalies = [("untyped", f"{where}: {text}") for text in run.untyped]
    anomalies.extend(("timed_out", f"{where}: {text}") for text in run.timed_out)
    if run.error is None and run.calls > run.call:
        anomalies.append(("silent", f"{where}: nothing failed"))
    failed = faulted_dir(run)
    if operation in ("sync", "sync_dir") and failed is not None:
        for name, depends_on in run.acks_after_error:
            if failed == "" or failed in depends_on:
                anomalies.append(("acked_after_failed_fsync", f"{where}: {name} succeeded"))
    return anomalies


def images(run: Run) -> list[tuple[str, RecordingFileSystem]]:
    """The process-crash image, the worst power-loss image and a random one, whose
    randomness depends only on (IMAGE_SEED, k, kind), so one run replays on its own."""
    assert run.twin is not None
    twin = run.twin
    rng = random.Random(f"{IMAGE_SEED} {run.call} {run.kind}")
    return [
        ("process crash", copy_twin(twin)),
        ("worst power loss", copy_twin(twin, content_of=twin.durable_bytes)),
        ("power loss", twin.crash_image(rng)),
    ]


def committed_view(broker: eoslog.Broker) -> dict[tuple[int, int], bytes]:
    """(partition, offset) -> value of every record a read_committed reader sees in OUT."""
    consumer = broker.consumer(
        {"auto.offset.reset": "earliest", "isolation.level": "read_committed"}
    )
    consumer.assign([eoslog.TopicPartition(OUT, p, 0) for p in (0, 1)])
    seen: dict[tuple[int, int], bytes] = {}
    while messages := consumer.consume(100, timeout=0):
        seen.update(((m.partition(), m.offset()), bytes(m.value())) for m in messages)
    consumer.close()
    return seen


def check_outcomes(broker: eoslog.Broker, run: Run, label: str) -> list[tuple[str, str]]:
    anomalies: list[tuple[str, str]] = []
    # Ends the producer's transaction left open, as the next init_transactions would: the
    # LSO no longer holds what follows, and a transaction in doubt is decided.
    broker.transactions.init_producer_id(TXN, 60_000)
    seen = committed_view(broker)
    visible_values = set(seen.values())
    stored = broker.groups.fetch_offsets(GROUP, [(IN, 0), (IN, 1)], require_stable=False)
    input_offset = stored[(IN, 0)].offset if stored[(IN, 0)] is not None else None
    for txn in run.transactions:
        values = {value for partition in txn.values.values() for value in partition}
        present = values & visible_values
        name = f"{label}transaction {txn.number} ({txn.outcome})"
        if txn.outcome == "committed":
            lost = {k: v for k, v in txn.offsets.items() if seen.get(k) != v}
            if lost or present != values:
                anomalies.append(("lost", f"{name}: records missing {sorted(values - present)}"))
        elif txn.outcome == "aborted" and present:
            anomalies.append(("aborted_read", f"{name}: visible {sorted(present)[:2]}"))
        elif present and present != values:
            anomalies.append(("not_atomic", f"{name}: {len(present)} of {len(values)} visible"))
    committed_inputs = [t.input_offset for t in run.transactions if t.outcome == "committed"]
    if committed_inputs and (input_offset is None or input_offset < max(committed_inputs)):
        anomalies.append(
            ("lost_offsets", f"{label}{IN}-0 offset {input_offset} < {max(committed_inputs)}")
        )
    plain = stored[(IN, 1)].offset if stored[(IN, 1)] is not None else None
    if run.acked_commits and (plain is None or plain not in run.tried_commits):
        anomalies.append(("lost_offsets", f"{label}{IN}-1 offset {plain}"))
    elif run.acked_commits and plain is not None and plain < max(run.acked_commits):
        anomalies.append(("lost_offsets", f"{label}{IN}-1 offset {plain} < acknowledged"))
    return anomalies


def check_restart(run: Run) -> list[tuple[str, str]]:
    assert run.twin is not None
    where = "no fault"
    if run.call is not None:
        operation, path = run.twin.recorded_calls()[run.call]
        where = f"fault {run.kind} at call {run.call} ({operation} {path})"
    acked: dict[tuple[str, int], list[Any]] = {(OUT, 0): [], (OUT, 1): []}
    for txn in run.transactions:
        if txn.outcome == "committed":
            for (partition, offset), value in sorted(txn.offsets.items()):
                acked[(OUT, partition)].append((offset, offset, (value,)))
    anomalies: list[tuple[str, str]] = []
    for name, image in images(run):
        label = f"[{where}, {name}] "
        try:
            broker = eoslog.open(LOG_DIR, "commit", BROKER_CONFIG, fs=image, background=False)
        except Exception as error:  # every restart must open
            anomalies.append(("unopenable", f"{label}{type(error).__name__}: {error}"[:400]))
            continue
        try:
            if OUT in broker.list_topics():
                report, _ = check_broker(broker, acked, label=label)
                anomalies.extend(
                    (kind, report.describe()) for kind in report.counts if report.counts[kind]
                )
                anomalies.extend(check_outcomes(broker, run, label))
            elif any(t.outcome == "committed" for t in run.transactions):
                anomalies.append(("lost", f"{label}topic {OUT} is gone"))
        except Exception as error:  # a check that cannot run is a finding too
            anomalies.append(("check_failed", f"{label}{type(error).__name__}: {error}"[:400]))
        finally:
            with contextlib.suppress(Exception):
                broker.close()
    return anomalies


def fault_plan(calls: list[tuple[str, str]], durability: str) -> list[tuple[int, str]]:
    """EIO at every call index (every call site); ENOSPC and a short write at every pwrite,
    ENOSPC at every truncate (an index preallocation). ENOSPC at other calls takes the same
    path as EIO (test_faults_partition_log.py runs both everywhere on the plain log), so it is
    left out to keep this family near a minute of CI. Under "always" (which differs from
    "commit" in when markers, offsets and data are fsynced) only the writes and fsyncs are
    faulted, with EIO."""
    plan = []
    for index, (operation, _) in enumerate(calls):
        if durability == "always":
            if operation in ("pwrite", "sync", "sync_dir"):
                plan.append((index, "EIO"))
            continue
        kinds = {"pwrite": ("EIO", "ENOSPC", "short"), "truncate": ("EIO", "ENOSPC")}
        plan.extend((index, kind) for kind in kinds.get(operation, ("EIO",)))
    return plan


def test_the_fault_free_transactional_workload_acknowledges_every_outcome() -> None:
    run = run_workload()
    assert run.error is None and not run.untyped, (run.failed_at_step, run.error)
    assert [t.outcome for t in run.transactions] == [
        "committed",
        "committed",
        "aborted",
        "committed",
    ]
    assert run.acked_commits == [100, 101, 102, 103]
    anomalies = check_restart(run)
    assert not anomalies, anomalies[:5]


@pytest.mark.parametrize("durability", ["commit", "always"])
def test_every_io_error_in_the_coordinator_markers_offsets_snapshots_checkpoints_and_meta(
    durability: str,
) -> None:
    """Every call index k of the transactional workload, every kind: typed errors, no
    acknowledgement after a failed fsync it depends on, every acknowledged outcome after a
    restart. Prints the seed, the counts and the counters per anomaly class."""
    clean = run_workload(durability=durability)
    assert clean.twin is not None and clean.error is None, clean.error
    calls = clean.twin.recorded_calls()
    plan = fault_plan(calls, durability)
    counters: Counter[str] = Counter()
    sites: dict[tuple[str, str], list[str]] = {}
    by_file: Counter[str] = Counter()
    for call, kind in plan:
        run = run_workload(call, kind, durability)
        operation, path = calls[call]
        by_file[_file_kind(path)] += 1
        for anomaly, message in classify(run) + check_restart(run):
            counters[anomaly] += 1
            sites.setdefault((anomaly, f"{operation} {_file_kind(path)}"), []).append(message)
    print(
        f"\nfamily 5 (transactions, groups) durability={durability}: N={len(calls)} calls, "
        f"{len(plan)} faulted runs, "
        f"image seed {IMAGE_SEED}; faulted runs by file {dict(by_file)}\n"
        f"anomalies: {dict(counters) or 'none'}"
    )
    for (anomaly, site), messages in sorted(sites.items()):
        print(f"  {anomaly} x{len(messages)} ({site}): {messages[0]}")
    covered = {_file_kind(path) for _, path in calls}
    for needed in ("__transaction_state", "__consumer_offsets", "snapshot", "checkpoint", "meta"):
        assert any(needed in kind for kind in covered), (needed, covered)
    assert not counters, f"anomalies {dict(counters)}; first per site:\n" + "\n".join(
        f"{anomaly} ({site}): {messages[0]}" for (anomaly, site), messages in sorted(sites.items())
    )


def _file_kind(path: str) -> str:
    """A call's file as a kind: `__transaction_state .log`, `out .snapshot`, `checkpoint`."""
    relative = path.removeprefix(LOG_DIR).strip("/")
    if "/" not in relative:
        if "checkpoint" in relative:
            return "checkpoint"
        return "meta" if "meta" in relative else relative or "(log dir)"
    directory, name = relative.split("/", 1)
    topic = directory.rsplit("-", 1)[0]
    return f"{topic} {name[name.index('.') :] if '.' in name else name}"
