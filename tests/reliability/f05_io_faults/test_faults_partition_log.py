"""Family 5 (docs/reliability.md): I/O errors injected at the k-th file-system call.

An append-roll-close workload runs on the recording twin (eoslog.fs_twin) once without faults,
counting its N file-system calls. Then, for every call index k < N and each fault kind that
call can take (EIO and ENOSPC for every call; a short write, which lands a prefix and fails
with ENOSPC, for pwrite), the workload runs again with twin.fail_at(k, kind):

- the failure surfaces as a typed eoslog error (a KafkaException: KafkaStorageError for I/O,
  which is also an OSError), never a bare OSError, another exception or a silent success;
- after a failed write or fsync nothing more is acknowledged: later appends and flushes
  raise KafkaStorageError (fail-stop, docs/design.md "Durability");
- the files left behind reopen (both as a process crash leaves them and as a power loss
  then leaves them) and pass the invariant checker for every acknowledged append.

Disk full on real files: a subprocess lowers RLIMIT_FSIZE (SIGXFSZ ignored) and appends until
the kernel refuses (EFBIG); the error must be KafkaStorageError, nothing may be acknowledged
after it, and reopening the directory must recover every acknowledged record.

Each failure message names (k, kind, the call) so it replays with run_with_fault(k, kind).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass, field

import pytest

import eoslog
from eoslog.errors import KafkaException, KafkaStorageError
from eoslog.fs_twin import RecordingFileSystem
from eoslog.log import checkpoints
from eoslog.record import codec
from tests.support.invariants import Ledger, check_log, copy_twin

ROOT = "/data"
LOG_DIR = "/data/log"
TOPIC = "t"
TS = 1_700_000_000_000
LZ4 = 3
BROKER_CONFIG = {"log.index.size.max.bytes": 4096}
TOPIC_CONFIG = {"segment.bytes": 1024, "index.interval.bytes": 64, "segment.index.bytes": 128}
APPENDS = 14
APPENDS_AFTER_FAILURE = 3
FAULT_KINDS = ("EIO", "ENOSPC", "short")


class Clock:
    def __init__(self) -> None:
        self.now = TS

    def __call__(self) -> int:
        return self.now


def make_batch(sequence: int, clock: Clock) -> tuple[bytes, list[bytes | None]]:
    """Batch `sequence`: 3 records of ~60 bytes, every third one lz4."""
    builder = codec.BatchBuilder(compression=LZ4 if sequence % 3 == 2 else 0)
    values: list[bytes | None] = []
    for i in range(3):
        clock.now += 1
        value = b"f:%d:%d|" % (sequence, i) + b"x" * 60
        assert builder.append(clock.now, None, value)
        values.append(value)
    return builder.build(), values


@dataclass
class FaultRun:
    """What one run of the workload did."""

    kind: str | None
    call: int | None
    call_name: str = ""
    error: BaseException | None = None
    failed_step: str = ""
    acked_after_failure: list[str] = field(default_factory=list)
    not_storage_errors_after_failure: list[str] = field(default_factory=list)
    ledger: Ledger = field(default_factory=lambda: Ledger("always"))
    twin: RecordingFileSystem | None = None
    calls: int = 0
    close_started_at: int | None = None


def run_with_fault(call: int | None, kind: str | None, durability: str = "always") -> FaultRun:
    """The workload: open, create a topic with 1 KiB segments, append APPENDS batches (it
    rolls every few), run retention and checkpoints, flush, close. With a fault, the first
    error stops it; then APPENDS_AFTER_FAILURE more appends and a flush must all raise
    KafkaStorageError, and close() is called (its own errors are ignored)."""
    twin = RecordingFileSystem(seed=call or 0)
    twin.makedirs(ROOT, durable=True)
    run = FaultRun(kind, call, ledger=Ledger(durability), twin=twin)
    if call is not None and kind is not None:
        twin.fail_at(call, kind)
    clock = Clock()
    broker: eoslog.Broker | None = None
    tp = (TOPIC, 0)
    step = "open"
    try:
        broker = eoslog.open(
            LOG_DIR, durability, BROKER_CONFIG, fs=twin, clock_ms=clock, background=False
        )
        step = "create_topic"
        broker.create_topic(TOPIC, 1, TOPIC_CONFIG)
        run.ledger.add_partition(tp)
        log = broker.log(TOPIC, 0)
        for sequence in range(APPENDS):
            step = f"append {sequence}"
            raw, values = make_batch(sequence, clock)
            run.ledger.appended(tp, log.append_batch(raw), values)
            if sequence == APPENDS // 2:
                step = "run_maintenance"
                broker.run_maintenance()
        step = "flush"
        log.flush()
        run.ledger.flushed()
        step = "close"
        run.close_started_at = twin.calls
        broker.close()
        run.ledger.flushed()
    except Exception as error:  # every failure is classified by the caller
        run.error = error
        run.failed_step = step
        operation = twin.recorded_calls()[call][0] if call is not None else ""
        if broker is not None and must_fail_stop(step, operation):
            _check_fail_stop(broker, run, clock)
        if broker is not None:
            with contextlib.suppress(Exception):  # close after a failure may report it again
                broker.close()
    run.calls = twin.calls
    if call is not None and call < len(twin.recorded_calls()):
        operation, path = twin.recorded_calls()[call]
        run.call_name = f"{operation} {path}"
    return run


def must_fail_stop(step: str, operation: str) -> bool:
    """A failed append or flush stops the partition, and a failed fsync anywhere stops the
    broker (docs/design.md "Durability": fail-stop). Only a topic-creation failure leaves no
    partition to probe."""
    if step in ("open", "create_topic", "close"):
        return False
    return step.startswith(("append", "flush")) or operation in ("sync", "sync_dir")


def _check_fail_stop(broker: eoslog.Broker, run: FaultRun, clock: Clock) -> None:
    """After a storage failure every write must be refused with KafkaStorageError."""
    log = broker.log(TOPIC, 0)
    attempts = [
        ("append", lambda i=i: log.append_batch(make_batch(900 + i, clock)[0]))
        for i in range(APPENDS_AFTER_FAILURE)
    ]
    attempts.append(("flush", log.flush))
    for name, attempt in attempts:
        try:
            attempt()
        except KafkaStorageError:
            continue
        except Exception as error:  # anything but KafkaStorageError is a finding
            run.not_storage_errors_after_failure.append(f"{name}: {type(error).__name__}: {error}")
        else:
            run.acked_after_failure.append(name)


def classify(run: FaultRun) -> list[tuple[str, str]]:
    """(anomaly class, message) for everything wrong with one faulted run."""
    where = f"fault {run.kind} at call {run.call} ({run.call_name}), step {run.failed_step!r}"
    anomalies: list[tuple[str, str]] = []
    assert run.call is not None
    if run.error is None:
        if run.calls > run.call:
            anomalies.append(("silent", f"{where}: the workload succeeded"))
    elif not isinstance(run.error, KafkaException):
        anomalies.append(("untyped", f"{where}: {type(run.error).__name__}: {run.error}"[:300]))
    for name in run.acked_after_failure:
        anomalies.append(("acked_after_failure", f"{where}: {name} succeeded after it"))
    for text in run.not_storage_errors_after_failure:
        anomalies.append(("untyped", f"{where}: after it, {text}"[:300]))
    return anomalies


def check_restart(run: FaultRun, rng: random.Random) -> list[tuple[str, str]]:
    """Reopen the twin as a process crash leaves it and as a power loss leaves it."""
    assert run.twin is not None
    where = f"fault {run.kind} at call {run.call} ({run.call_name})"
    acked, floor = run.ledger.snapshot()
    anomalies: list[tuple[str, str]] = []
    for name, image in (
        ("process crash", copy_twin(run.twin)),
        ("power loss", run.twin.crash_image(rng)),
    ):
        try:
            report = check_log(
                LOG_DIR,
                acked,
                fs=image,
                missing_allowed_below=floor,
                config=BROKER_CONFIG,
                clock_ms=Clock(),
                label=f"[{where}, {name}] ",
            )
        except Exception as error:  # every restart must open
            anomalies.append(("unopenable", f"[{where}, {name}] {type(error).__name__}: {error}"))
            continue
        for kind in report.counts:
            if report.counts[kind]:
                anomalies.append((kind, report.describe()))
    return anomalies


def fault_plan(calls: list[tuple[str, str]]) -> list[tuple[int, str]]:
    """Every call index with every kind it can take: a short write only means something for
    pwrite (any other call fails with EIO for it)."""
    plan = []
    for index, (operation, _) in enumerate(calls):
        kinds = FAULT_KINDS if operation == "pwrite" else ("EIO", "ENOSPC")
        plan.extend((index, kind) for kind in kinds)
    return plan


def test_fault_free_workload_acknowledges_everything() -> None:
    run = run_with_fault(None, None)
    assert run.error is None, run.error
    assert run.twin is not None
    report = check_log(
        LOG_DIR, run.ledger.snapshot()[0], fs=copy_twin(run.twin), config=BROKER_CONFIG
    )
    assert report.ok, report.describe()
    assert len(run.ledger.acked[(TOPIC, 0)]) == APPENDS


def test_every_injected_io_error_is_typed_fail_stop_and_recoverable() -> None:
    """Every call index k of the workload, every kind: typed error, fail-stop, and a clean
    restart. Prints the counters per anomaly class."""
    clean = run_with_fault(None, None)
    assert clean.twin is not None
    calls = clean.twin.recorded_calls()
    plan = fault_plan(calls)
    counters: Counter[str] = Counter()
    # (anomaly, workload step, faulted operation) -> messages: one line per distinct site.
    sites: dict[tuple[str, str, str], list[str]] = {}
    by_operation: Counter[str] = Counter()
    rng = random.Random(5)
    for call, kind in plan:
        run = run_with_fault(call, kind)
        operation = calls[call][0]
        by_operation[operation] += 1
        step = run.failed_step.split(" ")[0]
        for anomaly, message in classify(run) + check_restart(run, rng):
            counters[anomaly] += 1
            sites.setdefault((anomaly, step, operation), []).append(message)
    print(
        f"\nfamily 5: N={len(calls)} calls, {len(plan)} faulted runs (seed 5 for power-loss "
        f"images), calls by operation {dict(by_operation)}\n"
        f"anomalies: {dict(counters) or 'none'}"
    )
    for (anomaly, step, operation), messages in sorted(sites.items()):
        print(f"  {anomaly} x{len(messages)} (step {step}, failed {operation}): {messages[0]}")
    assert {call for call, _ in plan} == set(range(len(calls)))
    assert not counters, f"anomalies {dict(counters)}; first per site:\n" + "\n".join(
        f"{anomaly} (step {step}, failed {operation}): {messages[0]}"
        for (anomaly, step, operation), messages in sorted(sites.items())
    )


def test_a_failed_fsync_stops_every_later_acknowledgement() -> None:
    """Fail the first .log fsync after the topic exists: that append raises
    KafkaStorageError, and so does every later append and flush, even though the disk
    works again."""
    clean = run_with_fault(None, None)
    assert clean.twin is not None
    calls = clean.twin.recorded_calls()
    first_log_sync = next(
        index
        for index, (operation, path) in enumerate(calls)
        if operation == "sync" and path.endswith(".log") and "/t-0/" in path
    )
    run = run_with_fault(first_log_sync, "EIO")
    assert isinstance(run.error, KafkaStorageError), run.error
    assert run.acked_after_failure == [] and run.not_storage_errors_after_failure == []
    assert run.ledger.acked[(TOPIC, 0)] == []


def test_a_failed_partition_is_not_marked_cleanly_shut_down() -> None:
    """After a failed fsync, close() must not write the clean-shutdown marker: the next open
    would skip recovery and trust a .log with a torn, never-synced tail and its indexes.
    (PartitionLog.close returns normally when its group sync already failed, so
    Broker.close writes the checkpoints and the marker.)"""
    clean = run_with_fault(None, None)
    assert clean.twin is not None
    first_log_sync = next(
        index
        for index, (operation, path) in enumerate(clean.twin.recorded_calls())
        if operation == "sync" and path.endswith(".log") and "/t-0/" in path
    )
    run = run_with_fault(first_log_sync, "EIO")
    assert run.twin is not None and isinstance(run.error, KafkaStorageError), run.error
    marker = f"{LOG_DIR}/{checkpoints.CLEAN_SHUTDOWN_FILE}"
    assert not run.twin.exists(marker), "close() marked a failed log directory clean"


def test_close_reports_an_fsync_that_fails_during_close() -> None:
    """A sync that fails inside close() must reach the caller as KafkaStorageError: the
    data flushed by close is not durable and the next open must recover."""
    clean = run_with_fault(None, None)
    assert clean.twin is not None and clean.close_started_at is not None
    calls = clean.twin.recorded_calls()
    close_sync = next(
        index
        for index in range(clean.close_started_at, len(calls))
        if calls[index][0] == "sync" and "/t-0/" in calls[index][1]
    )
    run = run_with_fault(close_sync, "EIO")
    assert run.failed_step == "close", (run.failed_step, run.error)
    assert isinstance(run.error, KafkaStorageError), run.error


# --- disk full on real files ---------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys
    import eoslog
    from eoslog.errors import KafkaStorageError
    from eoslog.record import codec

    path, limit, segment_bytes, index_bytes = sys.argv[1], *map(int, sys.argv[2:5])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    broker = eoslog.open(path, "always", {"log.index.size.max.bytes": 4096}, background=False)
    broker.create_topic("t", 1, {"segment.bytes": segment_bytes,
                                 "segment.index.bytes": index_bytes,
                                 "index.interval.bytes": 4096})
    log = broker.log("t", 0)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    def batch(sequence):
        builder = codec.BatchBuilder(compression=3 if sequence % 4 == 3 else 0)
        values = []
        for i in range(4):
            value = b"d:%d:%d|" % (sequence, i) + bytes(range(256))[: 40 + 13 * i]
            builder.append(1_700_000_000_000 + sequence, None, value)
            values.append(value.hex())
        return builder.build(), values

    failure = None
    sequence = 0
    while failure is None and sequence < 2_000:
        raw, values = batch(sequence)
        try:
            info = log.append_batch(raw)
        except Exception as error:
            failure = error
            break
        print(json.dumps(["ack", info.base_offset, info.last_offset, values]), flush=True)
        sequence += 1
    after = []
    for extra in range(3):
        try:
            log.append_batch(batch(10_000 + extra)[0])
            after.append("acknowledged")
        except Exception as error:
            after.append(type(error).__name__)
    errno_ = getattr(failure, "errno", None)
    cause = getattr(failure, "__cause__", None)
    print(json.dumps(["failure", type(failure).__name__, str(failure), errno_,
                      getattr(cause, "errno", None), after]), flush=True)
    try:
        broker.close()
    except Exception as error:
        print(json.dumps(["close", type(error).__name__, str(error)]), flush=True)
    """
)


@pytest.mark.parametrize(
    ("limit", "segment_bytes", "index_bytes"),
    [
        (48 * 1024, 1 << 20, 1024),  # the .log reaches the limit mid-batch
        (20 * 1024, 8 * 1024, 64 * 1024),  # a roll cannot preallocate the new indexes
    ],
    ids=["log-write", "index-preallocation"],
)
def test_disk_full_is_a_storage_error_and_every_acknowledged_record_survives(
    tmp_path: os.PathLike[str], limit: int, segment_bytes: int, index_bytes: int
) -> None:
    path = os.path.join(os.fspath(tmp_path), "log")
    child = subprocess.run(
        [sys.executable, "-c", CHILD, path, str(limit), str(segment_bytes), str(index_bytes)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, (child.returncode, child.stderr[-3000:])
    lines = [json.loads(line) for line in child.stdout.splitlines()]
    acked = [
        (base, last, [bytes.fromhex(v) for v in values])
        for tag, base, last, values in (line for line in lines if line[0] == "ack")
    ]
    failure = next(line for line in lines if line[0] == "failure")
    _, error_type, message, errno_, cause_errno, after = failure
    print(f"\ndisk full at {limit} B after {len(acked)} appends: {error_type}: {message}")
    assert acked, "the limit was hit before anything was appended"
    assert error_type == "KafkaStorageError", failure
    assert 27 in (errno_, cause_errno), f"EFBIG expected: {failure}"  # errno.EFBIG
    assert after == ["KafkaStorageError"] * 3, f"acknowledged after the failure: {after}"
    report = check_log(path, {(TOPIC, 0): acked})
    assert report.ok, report.describe()
