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
    Recorder,
    key_of,
    load,
    read_records,
)
from tests.support.history_checker import Report, check
from tests.support.history_workload import (
    AUDITORS,
    COPIERS,
    TOPICS,
    TRANSACTIONAL_IDS,
    create_topics,
    keys,
    observe_committed,
    partitions,
    polled,
)
from tests.support.killharness import run_child

CHILD = "import sys\nfrom tests.support.history_workload import main\nmain(sys.argv[1:])\n"
SEEDS = [1, 2, 3]
CI_RUNS = 10
CI_OPS = 100  # per thread and run; a killed run does fewer
# The soak checks many histories of moderate length rather than one long one: the checker
# holds a whole history in memory.
SOAK_SEEDS = range(100, 130)
SOAK_RUNS = 25
SOAK_OPS = 200
KILL_FRACTION = 0.85
KILL_AFTER_S_MAX = 0.3
ARM_AFTER_LINES_MAX = 8


def run_history(root: str, seed: int, runs: int, ops_per_thread: int) -> Report:
    """The runs, the final reads, and the checker's report over the whole history."""
    rng = random.Random(seed)
    print(f"seed={seed} runs={runs} ops per thread={ops_per_thread}")
    started = time.monotonic()
    data, histories = os.path.join(root, "data"), os.path.join(root, "history")
    os.makedirs(histories)
    with eoslog.open(data) as broker:
        create_topics(broker)
    paths, kills = [], 0
    for run in range(runs):
        path = os.path.join(histories, f"run-{run:04d}.jsonl")
        killing = rng.random() < KILL_FRACTION
        child = run_child(
            CHILD,
            [data, str(rng.randrange(1 << 30)), str(run), path, str(ops_per_thread)],
            rng,
            rng.uniform(0.0, KILL_AFTER_S_MAX) if killing else None,
            arm_after_lines=rng.randint(1, ARM_AFTER_LINES_MAX),
        )
        kills += child.killed
        recorder = Recorder(path)
        recorder.write({"p": "nemesis", "k": "killed", "run": run, "t": recorder.clock()})
        recorder.close()
        paths.append(path)
    paths.append(finish(data, os.path.join(histories, "final.jsonl")))
    ops = load(read_records(paths))
    report = check(ops)
    report.stats.update(
        runs=runs,
        kills=kills,
        seeks=sum(op.f == "seek" for op in ops),
        offset_commits=sum(op.f == "commit" for op in ops),
        rebalanced=sum(bool(op.rebalanced) for op in ops),
        delayed_refused=sum(op.process.endswith("-delayed") and op.type == "fail" for op in ops),
        seconds=round(time.monotonic() - started),
    )
    print(f"seed={seed}: {report.summary()}")
    return report


def finish(data: str, path: str) -> str:
    """The final operations (module docstring), recorded as processes "final*"."""
    recorder = Recorder(path)
    with eoslog.open(data) as broker:
        for transactional_id in TRANSACTIONAL_IDS:
            producer = broker.producer({"transactional.id": transactional_id})
            producer.init_transactions()
            producer.close()
        for group in (COPIERS, AUDITORS):
            consumer = broker.consumer({"group.id": group, "isolation.level": READ_COMMITTED})
            observe_committed(recorder, "final", consumer, group, keys())
            consumer.close()
        for isolation in (READ_COMMITTED, READ_UNCOMMITTED):
            read_everything(broker, recorder, isolation)
    scan_offline(data, recorder)
    scan_files(data, recorder)
    recorder.close()
    return path


def read_everything(broker: eoslog.Broker, recorder: Recorder, isolation: str) -> None:
    process = f"final-{isolation}"
    consumer = broker.consumer({"isolation.level": isolation})
    starts = dict.fromkeys(keys(), 0)
    with recorder.op(process, "assign", keys=list(starts), o=starts, isolation=isolation):
        consumer.assign(partitions(list(starts), starts))
    with recorder.op(process, "poll", isolation=isolation) as op:
        while messages := consumer.consume(10_000, timeout=0):
            op.read(polled(messages))
    consumer.close()


def scan_offline(data: str, recorder: Recorder) -> None:
    """eoslog.scan's read_committed view, as one more reader."""
    starts = dict.fromkeys(keys(), 0)
    with recorder.op("final-scan", "assign", keys=list(starts), o=starts):
        pass
    with recorder.op("final-scan", "poll") as op:
        for batch in eoslog.scan(data, topics=list(TOPICS), isolation_level=READ_COMMITTED):
            rows = batch.to_pydict()
            op.read(
                [
                    (key_of(topic, partition), offset, value.decode())
                    for topic, partition, offset, value in zip(
                        rows["topic"], rows["partition"], rows["offset"], rows["value"], strict=True
                    )
                ]
            )


def scan_files(data: str, recorder: Recorder) -> None:
    """Every record and marker of the topics' .log files, batch by batch (the broker closed)."""
    with recorder.op("final", "scan") as op:
        for topic, (count, _) in TOPICS.items():
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
                value = (record.value or b"").decode()
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


@pytest.mark.soak
@pytest.mark.parametrize("seed", SOAK_SEEDS)
def test_randomized_histories_under_kill_9_have_no_anomaly_soak(tmp_path: str, seed: int) -> None:
    report = run_history(str(tmp_path), seed, SOAK_RUNS, SOAK_OPS)
    assert report.ok, f"seed={seed}: {report.describe()}"
