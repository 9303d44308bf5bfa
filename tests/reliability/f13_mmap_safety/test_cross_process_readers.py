"""Family 13 (docs/reliability.md): mmap safety with readers in other processes.

An owner subprocess appends to a topic with tiny segments, so it rolls (and trims the rolled
segment's mapped indexes) every few appends, runs retention (retention.bytes) and truncate_to
in a loop, while reader threads in the owner read through the partition log, and 1-2 reader
subprocesses read the partition directory's files hard without the lock: they list the
directory, open each .log read-only, pread it and decode it with the codec
(decode_columns / iter_headers), and pread the index files, tolerating files that vanish and
partial tails. Nothing may die: every process exits 0 (a SIGBUS would show as -SIGBUS), after at
least CI_ITERATIONS reads by the subprocesses in total (soak: SOAK_ITERATIONS). At the end the
owner closes and checks the invariants (tests/support/invariants.py) for every append it kept.

Readers count what a lock-free reader may legitimately meet (a file gone between listdir and
open, a partial tail, bytes of a batch being rewritten after truncate_to) and report it; only
an exception other than eoslog's typed errors, or a crash, fails the run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.support import REPO_ROOT

CI_ITERATIONS = 2_000
SOAK_ITERATIONS = 10_000
PROCESS_TIMEOUT_S = 120

OWNER = textwrap.dedent(
    """
    import json, os, random, sys, threading, time
    sys.path.insert(0, sys.argv[3])
    import eoslog
    from eoslog.errors import KafkaException
    from eoslog.record import codec
    from tests.support.invariants import Ledger, check_log

    path, seed = sys.argv[1], int(sys.argv[2])
    readers = int(sys.argv[4])
    rng = random.Random(seed)
    config = {"log.index.size.max.bytes": 4096}
    broker = eoslog.open(path, "none", config, background=False)
    broker.create_topic("t", 1, {"segment.bytes": 1024, "index.interval.bytes": 128,
                                 "segment.index.bytes": 256, "retention.bytes": 4096})
    log = broker.log("t", 0)
    tp = ("t", 0)
    ledger = Ledger("always")
    ledger.add_partition(tp)
    stop = threading.Event()
    in_process_reads = [0]
    reader_errors = []

    def read_in_process():
        local = random.Random(seed + 1)
        while not stop.is_set():
            start, end = log.log_start_offset, log.log_end_offset
            if end <= start:
                continue
            try:
                raw = log.read(local.randrange(start, end), 2048, "read_uncommitted").records
                codec.decode_columns(raw)
                in_process_reads[0] += 1
            except KafkaException:
                pass  # retention or truncation moved the range under the read
            except Exception as error:
                reader_errors.append(repr(error))
                return

    threads = [threading.Thread(target=read_in_process) for _ in range(2)]
    for thread in threads:
        thread.start()
    counts = {"append": 0, "retention": 0, "truncate": 0, "roll": 0}
    sequence = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = [f for f in os.listdir(os.path.dirname(path)) if f.startswith("reader-done-")]
        if len(done) >= readers and counts["append"] > 200:
            break
        sequence += 1
        builder = codec.BatchBuilder(compression=3 if sequence % 3 == 0 else 0)
        values = []
        for i in range(rng.randint(1, 4)):
            value = b"x:%d:%d|" % (sequence, i) + bytes(rng.randrange(256) for _ in range(40))
            builder.append(1_700_000_000_000 + sequence, None, value)
            values.append(value)
        info = log.append_batch(builder.build())
        ledger.appended(tp, info, values)
        counts["append"] += 1
        choice = rng.random()
        if choice < 0.15:
            ledger.floor[tp] = log.segments[-1].base_offset
            log.delete_retained_segments()
            ledger.floor[tp] = log.log_start_offset
            counts["retention"] += 1
        elif choice < 0.22 and log.log_end_offset - log.log_start_offset > 8:
            target = max(log.log_start_offset, info.base_offset - rng.randint(0, 6))
            # A batch boundary: the first batch whose last offset reaches the target.
            bases = [entry[0] for entry in ledger.acked[tp] if entry[1] >= target]
            if bases:
                ledger.truncating(tp, bases[0])
                log.truncate_to(bases[0])
                counts["truncate"] += 1
        elif choice < 0.27:
            log.roll()
            counts["roll"] += 1
    stop.set()
    for thread in threads:
        thread.join()
    broker.close()
    acked, floor = ledger.snapshot()
    report = check_log(path, acked, missing_allowed_below=floor, config=config)
    print(json.dumps({"counts": counts, "in_process_reads": in_process_reads[0],
                      "reader_errors": reader_errors[:3], "report": report.describe()}))
    sys.exit(0 if report.ok and not reader_errors else 1)
    """
)

READER = textwrap.dedent(
    """
    import json, os, sys, time
    import numpy as np
    from eoslog.errors import KafkaException
    from eoslog.record import codec

    directory, marker_dir, name, target = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    seen = {"iterations": 0, "vanished": 0, "partial_tail": 0, "torn": 0, "records": 0,
            "index_entries": 0, "empty": 0}
    announced = False
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if seen["iterations"] >= target and not announced:
            open(os.path.join(marker_dir, "reader-done-" + name), "w").close()
            announced = True
        if announced and os.path.exists(os.path.join(marker_dir, "owner-done")):
            break
        try:
            names = sorted(os.listdir(directory))
        except FileNotFoundError:
            continue
        for file_name in names:
            path = os.path.join(directory, file_name)
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                seen["vanished"] += 1
                continue
            try:
                size = os.fstat(fd).st_size
                data = os.pread(fd, size, 0) if size else b""
            finally:
                os.close(fd)
            if file_name.endswith((".index", ".timeindex")):
                width = 8 if file_name.endswith(".index") else 12
                whole = len(data) - len(data) % width
                entries = np.frombuffer(data[:whole], dtype=">i4").reshape(-1, width // 4)
                seen["index_entries"] += len(entries)
                continue
            if not file_name.endswith(".log"):
                continue
            seen["iterations"] += 1
            if not data:
                seen["empty"] += 1
                continue
            try:
                ends = [position + header.size_in_bytes
                        for position, header in codec.iter_headers(data)]
                columns = codec.decode_columns(data)
                seen["records"] += columns.count
                if (ends[-1] if ends else 0) < len(data):
                    seen["partial_tail"] += 1
            except KafkaException:
                seen["torn"] += 1  # bytes changing under a lock-free read (truncate_to)
    print(json.dumps(seen))
    """
)


def run_family(tmp_path: os.PathLike[str], readers: int, iterations: int, seed: int) -> None:
    marker_dir = os.fspath(tmp_path)
    path = os.path.join(marker_dir, "log")
    partition_dir = os.path.join(path, "t-0")
    print(f"\nseed={seed} readers={readers} iterations>={iterations}")
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, path, str(seed), REPO_ROOT, str(readers)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + PROCESS_TIMEOUT_S
    while not os.path.isdir(partition_dir):
        if time.monotonic() > deadline or owner.poll() is not None:
            owner.kill()
            _, err = owner.communicate()
            pytest.fail(f"seed={seed}: the owner created no partition directory: {err[-2000:]}")
        time.sleep(0.01)
    per_reader = -(-iterations // readers)
    reader_processes = [
        subprocess.Popen(
            [sys.executable, "-c", READER, partition_dir, marker_dir, str(i), str(per_reader)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(readers)
    ]
    try:
        owner_out, owner_err = owner.communicate(timeout=PROCESS_TIMEOUT_S)
    finally:
        open(os.path.join(marker_dir, "owner-done"), "w").close()
    results = [process.communicate(timeout=PROCESS_TIMEOUT_S) for process in reader_processes]
    print(f"owner exit {owner.returncode}: {owner_out.strip()}")
    totals: dict[str, int] = {}
    for process, (out, err) in zip(reader_processes, results, strict=True):
        print(f"reader exit {process.returncode}: {out.strip()} {err.strip()[-2000:]}")
        if process.returncode == 0:
            for key, value in json.loads(out).items():
                totals[key] = totals.get(key, 0) + value
    for name, process, err in [
        ("owner", owner, owner_err),
        *((f"reader {i}", process, results[i][1]) for i, process in enumerate(reader_processes)),
    ]:
        assert process.returncode != -signal.SIGBUS, f"seed={seed}: {name} died of SIGBUS"
        assert process.returncode == 0, f"seed={seed}: {name} exit {process.returncode}: {err}"
    print(f"subprocess reads: {totals}")
    assert totals["iterations"] >= iterations, totals


@pytest.mark.parametrize("readers", [1, 2])
def test_readers_in_other_processes_survive_roll_retention_and_truncation(
    tmp_path: os.PathLike[str], readers: int
) -> None:
    run_family(tmp_path, readers, CI_ITERATIONS, seed=readers)


@pytest.mark.soak
def test_readers_in_other_processes_survive_roll_retention_and_truncation_soak(
    tmp_path: os.PathLike[str],
) -> None:
    run_family(tmp_path, 2, SOAK_ITERATIONS, seed=100)
