"""Family 8 (docs/reliability.md): randomized multi-threaded workloads under kill -9, checked by the
history checker.

Each run is a child process running tests/support/history_workload.py against one log
directory (idempotent and transactional producers over five partitions of two topics, random
aborts, copiers in a group sending their offsets in their transactions, a read_committed
consumer committing and seeking, a read_uncommitted reader, delayed requests of ended
transactions), recording every operation. The parent SIGKILLs most runs at a random moment and
starts the next in the same directory. After the last, it reopens the directory, fences every
transactional id (aborting what a kill left open), records the groups' committed offsets, a
complete read of every partition at both isolation levels, eoslog.scan's read_committed view,
and a scan of the log files batch by batch (markers included). Then the checker
(tests/support/history_checker.py) runs over the whole history: every class must be 0.

With compaction (COMPACTION_SEEDS), the workload adds a compacted topic written with repeating
record keys and a thread that keeps the log cleaner running; the history declares the topic's
partitions compacted, and the checker's rule for records the cleaner may remove applies.

The seed is printed and in every assertion message; a failing seed becomes a regression test
(a new entry in SEEDS). CI runs SEEDS at CI size; `pytest -m soak` runs the soak size.
"""

from __future__ import annotations

import os
import random
import time

import pytest

import eoslog
from eoslog.record import codec, control
from tests.support.history import (
    ABORT,
    COMMIT,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    Op,
    Recorder,
    identity,
    key_of,
    load,
    read_records,
    split_key,
)
from tests.support.history_checker import Report, check
from tests.support.history_workload import (
    AUDITORS,
    COMPACTED,
    COPIERS,
    TRANSACTIONAL_IDS,
    create_topics,
    keys,
    observe_committed,
    partitions,
    polled,
    topics,
)
from tests.support.killharness import run_child

CHILD = "import sys\nfrom tests.support.history_workload import main\nmain(sys.argv[1:])\n"
SEEDS = [1, 2]
COMPACTION_SEEDS = [3]
CI_RUNS = 10
CI_OPS = 100  # per thread and run; a killed run does fewer
# The soak checks many histories of moderate length rather than one long one: the checker
# holds a whole history in memory.
SOAK_SEEDS = range(100, 130)
SOAK_COMPACTION_SEEDS = range(200, 215)
SOAK_RUNS = 25
SOAK_OPS = 200
KILL_FRACTION = 0.85
KILL_AFTER_S_MAX = 0.3
ARM_AFTER_LINES_MAX = 8


def run_history(
    root: str, seed: int, runs: int, ops_per_thread: int, compaction: bool = False
) -> Report:
    """The runs, the final reads, and the checker's report over the whole history."""
    rng = random.Random(seed)
    print(f"seed={seed} runs={runs} ops per thread={ops_per_thread} compaction={compaction}")
    started = time.monotonic()
    data, histories = os.path.join(root, "data"), os.path.join(root, "history")
    os.makedirs(histories)
    with eoslog.open(data) as broker:
        create_topics(broker, compaction)
    paths, kills = [setup(os.path.join(histories, "setup.jsonl"), compaction)], 0
    mode = ["compact"] if compaction else []
    for run in range(runs):
        path = os.path.join(histories, f"run-{run:04d}.jsonl")
        killing = rng.random() < KILL_FRACTION
        child = run_child(
            CHILD,
            [data, str(rng.randrange(1 << 30)), str(run), path, str(ops_per_thread), *mode],
            rng,
            rng.uniform(0.0, KILL_AFTER_S_MAX) if killing else None,
            arm_after_lines=rng.randint(1, ARM_AFTER_LINES_MAX),
        )
        kills += child.killed
        recorder = Recorder(path)
        recorder.write({"p": "nemesis", "k": "killed", "run": run, "t": recorder.clock()})
        recorder.close()
        paths.append(path)
    paths.append(finish(data, os.path.join(histories, "final.jsonl"), compaction))
    ops = load(read_records(paths))
    report = check(ops)
    report.stats.update(
        runs=runs,
        kills=kills,
        seeks=sum(op.f == "seek" for op in ops),
        offset_commits=sum(op.f == "commit" for op in ops),
        rebalanced=sum(bool(op.rebalanced) for op in ops),
        delayed_refused=sum(op.process.endswith("-delayed") and op.type == "fail" for op in ops),
        cleans=sum(op.f == "clean" and op.type == "ok" for op in ops),
        cleaned_away=cleaned_away(ops),
        tombstones=sum(write.tombstone for op in ops for write in op.writes),
        seconds=round(time.monotonic() - started),
    )
    print(f"seed={seed}: {report.summary()}")
    return report


def setup(path: str, compaction: bool) -> str:
    """The history's first file: which partitions are compacted (none without compaction)."""
    recorder = Recorder(path)
    for name, (_, config) in COMPACTED.items() if compaction else ():
        retention_ms = config["delete.retention.ms"]
        with recorder.op(
            "setup", "compacted", keys=keys(name, True), delete_retention_ms=retention_ms
        ):
            pass
    recorder.close()
    return path


def cleaned_away(ops: list[Op]) -> int:
    """The values written to compacted partitions at a known offset that the log scan no
    longer holds: what the cleaner removed."""
    scanned = {(r.key, r.value) for op in ops if op.f == "scan" for r in op.scan}
    return sum(
        write.offset is not None
        and split_key(write.key)[0] in COMPACTED
        and (write.key, write.value) not in scanned
        for op in ops
        for write in op.writes
    )


def finish(data: str, path: str, compaction: bool = False) -> str:
    """The final operations (module docstring), recorded as processes "final*"."""
    recorder = Recorder(path)
    with eoslog.open(data) as broker:
        for transactional_id in TRANSACTIONAL_IDS:
            producer = broker.producer({"transactional.id": transactional_id})
            producer.init_transactions()
            producer.close()
        for group in (COPIERS, AUDITORS):
            consumer = broker.consumer({"group.id": group, "isolation.level": READ_COMMITTED})
            observe_committed(recorder, "final", consumer, group, keys(compaction=compaction))
            consumer.close()
        for isolation in (READ_COMMITTED, READ_UNCOMMITTED):
            read_everything(broker, recorder, isolation, compaction)
    scan_offline(data, recorder, compaction)
    scan_files(data, recorder, compaction)
    recorder.close()
    return path


def read_everything(
    broker: eoslog.Broker, recorder: Recorder, isolation: str, compaction: bool
) -> None:
    process = f"final-{isolation}"
    consumer = broker.consumer({"isolation.level": isolation})
    starts = dict.fromkeys(keys(compaction=compaction), 0)
    with recorder.op(process, "assign", keys=list(starts), o=starts, isolation=isolation):
        consumer.assign(partitions(list(starts), starts))
    with recorder.op(process, "poll", isolation=isolation) as op:
        while messages := consumer.consume(10_000, timeout=0):
            op.read(polled(messages))
    consumer.close()


def scan_offline(data: str, recorder: Recorder, compaction: bool) -> None:
    """eoslog.scan's read_committed view, as one more reader."""
    starts = dict.fromkeys(keys(compaction=compaction), 0)
    with recorder.op("final-scan", "assign", keys=list(starts), o=starts):
        pass
    with recorder.op("final-scan", "poll") as op:
        names = list(topics(compaction))
        batches = eoslog.scan(
            data, topics=names, isolation_level=READ_COMMITTED, include_headers=True
        )
        for batch in batches:
            rows = batch.to_pydict()
            columns = ("topic", "partition", "offset", "value", "headers")
            op.read(
                [
                    (key_of(t, p), o, identity(v, [(h["key"], h["value"]) for h in hs or ()]))
                    for t, p, o, v, hs in zip(*(rows[c] for c in columns), strict=True)
                ]
            )


def scan_files(data: str, recorder: Recorder, compaction: bool) -> None:
    """Every record and marker of the topics' .log files, batch by batch (the broker closed)."""
    with recorder.op("final", "scan") as op:
        for topic, (count, _) in topics(compaction).items():
            for partition in range(count):
                directory = os.path.join(data, f"{topic}-{partition}")
                for name in sorted(n for n in os.listdir(directory) if n.endswith(".log")):
                    with open(os.path.join(directory, name), "rb") as file:
                        segment = file.read()
                    op.step(scan=list(scan_segment(key_of(topic, partition), segment)))


def scan_segment(key: str, segment: bytes) -> list[list[object]]:
    found: list[list[object]] = []
    for position, header in codec.iter_headers(segment):
        pid, epoch = header.producer_id, header.producer_epoch
        for record in codec.batch_records(segment, position):
            if header.is_control:
                decision = COMMIT if control.read_type(record.key) == control.COMMIT else ABORT
                found.append([key, record.offset, None, pid, epoch, True, decision])
            else:
                value = identity(record.value, record.headers)
                found.append([key, record.offset, value, pid, epoch, header.is_transactional])
    return found


@pytest.mark.parametrize("seed", SEEDS)
def test_randomized_histories_under_kill_9_have_no_anomaly(tmp_path: str, seed: int) -> None:
    report = run_history(str(tmp_path), seed, CI_RUNS, CI_OPS)
    assert report.ok, f"seed={seed}: {report.describe()}"
    # The workload did what it is meant to (module docstring).
    stats = report.stats
    assert stats["kills"] >= 1 and stats["committed"] > 0 and stats["aborted"] > 0
    assert stats["seeks"] > 0 and stats["offset_commits"] > 0 and stats["rebalanced"] > 0
    assert stats["delayed_refused"] > 0 and stats["log_records"] > 0


@pytest.mark.parametrize("seed", COMPACTION_SEEDS)
def test_randomized_histories_with_compaction_under_kill_9_have_no_anomaly(
    tmp_path: str, seed: int
) -> None:
    report = run_history(str(tmp_path), seed, CI_RUNS, CI_OPS, compaction=True)
    assert report.ok, f"seed={seed}: {report.describe()}"
    stats = report.stats
    assert stats["kills"] >= 1 and stats["committed"] > 0 and stats["aborted"] > 0
    assert stats["cleans"] > 0 and stats["cleaned_away"] > 0  # the cleaner removed records
    assert stats["tombstones"] > 0


@pytest.mark.soak
@pytest.mark.parametrize(
    ("seed", "compaction"),
    [*((seed, False) for seed in SOAK_SEEDS), *((seed, True) for seed in SOAK_COMPACTION_SEEDS)],
)
def test_randomized_histories_under_kill_9_have_no_anomaly_soak(
    tmp_path: str, seed: int, compaction: bool
) -> None:
    report = run_history(str(tmp_path), seed, SOAK_RUNS, SOAK_OPS, compaction)
    assert report.ok, f"seed={seed}: {report.describe()}"
