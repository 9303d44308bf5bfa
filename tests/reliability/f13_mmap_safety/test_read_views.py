"""Family 13 (docs/reliability.md), in the owner process: reads return views into mapped segments.

PartitionLog.read returns a read-only memoryview into a shared mapping of the segment's .log
(eoslog.log.mapped_log), not a copy. A view lives as long as its caller keeps it, and touching
a mapped page wholly past the end of its file kills the process with SIGBUS, so every view
must stay readable, with the bytes it had, through everything the writer does: appends (the
mapping is redone at the new length), roll, retention (unlink), truncate_to (which must not cut
a file under a live view: it replaces the file instead) and close.

The stress test runs in a subprocess, so a SIGBUS fails the test instead of killing pytest; a
control run with the safety removed shows that the harness does see one.
"""

from __future__ import annotations

import json
import mmap
import os
import random
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

import eoslog
from eoslog import limits
from eoslog.errors import KafkaStorageError
from eoslog.log.mapped_log import TEMP_SUFFIX
from eoslog.log.partition import PartitionLog
from tests.support import REPO_ROOT, logtools
from tests.support.imaging_twin import ImagingTwin
from tests.support.invariants import check_log

TS = logtools.TS
# Each test batch is about 10 KiB (40 values of 256 bytes): several pages, so a cut between
# two batches leaves the later one's pages wholly past the end of the file.
VALUES_PER_BATCH = 40
VALUE_BYTES = 256
CONFIG = {"segment.index.bytes": 4096}
STRESS_ITERATIONS = 2_000  # docs/reliability.md family 13 CI size (soak: 10,000)
SOAK_STRESS_ITERATIONS = 10_000
PROCESS_TIMEOUT_S = 180


def big_batch(index: int) -> bytes:
    return logtools.batch(logtools.values(index * 1000, VALUES_PER_BATCH, width=VALUE_BYTES))


@pytest.fixture
def clock() -> logtools.Clock:
    return logtools.Clock(TS)


@pytest.fixture
def broker(tmp_path: os.PathLike[str], clock: logtools.Clock) -> Iterator[eoslog.Broker]:
    opened = eoslog.open(os.path.join(tmp_path, "data"), "commit", clock_ms=clock, background=False)
    yield opened
    opened.close()


def new_topic(broker: eoslog.Broker, **config: object) -> PartitionLog:
    broker.create_topic("t", 1, config={**CONFIG, **config})
    return broker.log("t", 0)


def active_log_path(log: PartitionLog) -> str:
    return log.segments[-1].path(".log")


def temp_files(log: PartitionLog) -> list[str]:
    return [name for name in os.listdir(log.segments[-1].directory) if name.endswith(".tmp")]


def test_read_returns_a_read_only_view_of_the_mapped_segment(broker: eoslog.Broker) -> None:
    log = new_topic(broker)
    raw = big_batch(0)
    log.append_batch(raw)
    records = log.read(0, max_bytes=1).records
    assert isinstance(records.obj, mmap.mmap), "the records must be a view, not a copy"
    assert records.readonly
    with pytest.raises(TypeError):
        records[0] = 0
    assert logtools.records(records)[0].value == logtools.values(0, 1, width=VALUE_BYTES)[0]


def test_a_view_returned_by_read_stays_readable_after_truncate_to_removes_its_batch(
    broker: eoslog.Broker,
) -> None:
    log = new_topic(broker)
    infos = [log.append_batch(big_batch(i)) for i in range(4)]
    view = log.read(infos[2].base_offset, max_bytes=1).records
    expected = bytes(view)
    path = active_log_path(log)
    inode = os.stat(path).st_ino
    log.truncate_to(infos[1].base_offset)
    # Touch every byte of the view: its pages now lie past the new end of the .log, so this
    # would be a SIGBUS had the file under the mapping been cut.
    assert bytes(view) == expected
    assert os.stat(path).st_ino != inode, "a file under a live view was cut in place"
    assert os.path.getsize(path) == log.segments[-1].size == len(big_batch(0))
    assert temp_files(log) == []
    # The log carries on in the new file; the view keeps the old bytes.
    again = log.append_batch(big_batch(9))
    assert again.base_offset == infos[1].base_offset
    assert [r.value for r in logtools.records(log.read(again.base_offset).records)] == (
        logtools.values(9000, VALUES_PER_BATCH, width=VALUE_BYTES)
    )
    assert bytes(view) == expected


def test_truncate_to_cuts_in_place_when_no_view_is_alive(broker: eoslog.Broker) -> None:
    log = new_topic(broker)
    infos = [log.append_batch(big_batch(i)) for i in range(4)]
    copy = bytes(log.read(infos[2].base_offset, max_bytes=1).records)  # the view is dropped
    path = active_log_path(log)
    inode = os.stat(path).st_ino
    log.truncate_to(infos[1].base_offset)
    assert os.stat(path).st_ino == inode
    assert os.path.getsize(path) == len(big_batch(0))
    assert logtools.header(copy).base_offset == infos[2].base_offset


def test_a_view_returned_by_read_stays_readable_after_retention_deletes_its_segment(
    broker: eoslog.Broker, clock: logtools.Clock
) -> None:
    log = new_topic(broker, **{"retention.bytes": 1})
    infos = [log.append_batch(big_batch(i)) for i in range(2)]
    log.roll()
    log.append_batch(big_batch(2))
    first = log.segments[0]
    view = log.read(infos[1].base_offset, max_bytes=1).records
    expected = bytes(view)
    assert log.delete_retained_segments() == 1
    assert not os.path.exists(first.path(".log"))
    assert bytes(view) == expected
    # Past the grace period the retired segment's files are closed too.
    clock.advance(limits.retired_segment_grace_ms + 1)
    log.delete_retained_segments()
    assert bytes(view) == expected


def test_a_view_returned_by_read_stays_readable_after_roll(broker: eoslog.Broker) -> None:
    """Appends grow the active segment under the view (the next read maps the file again at
    its new length); a roll trims the indexes and makes a new segment; the view holds."""
    log = new_topic(broker)
    log.append_batch(big_batch(0))
    view = log.read(0, max_bytes=1).records
    expected = bytes(view)
    second = log.append_batch(big_batch(1))
    later = log.read(second.base_offset, max_bytes=1).records  # past the first mapping
    assert later.obj is not view.obj, "growth must be mapped anew"
    log.roll()
    third = log.append_batch(big_batch(2))
    assert len(log.segments) == 2
    assert bytes(log.read(third.base_offset, max_bytes=1).records) == bytes(
        log.read(third.base_offset).records
    )
    assert bytes(view) == expected
    assert logtools.header(later).base_offset == second.base_offset


def test_views_stay_readable_after_the_log_is_closed(tmp_path: os.PathLike[str]) -> None:
    broker = eoslog.open(os.path.join(tmp_path, "data"), "none", background=False)
    log = new_topic(broker)
    log.append_batch(big_batch(0))
    view = log.read(0).records
    expected = bytes(view)
    broker.close()
    assert bytes(view) == expected


def test_a_read_after_close_raises_instead_of_reading_unmapped_memory(
    tmp_path: os.PathLike[str],
) -> None:
    broker = eoslog.open(os.path.join(tmp_path, "data"), "none", background=False)
    log = new_topic(broker)
    log.append_batch(big_batch(0))
    broker.close()
    with pytest.raises(KafkaStorageError):
        log.read(0)


# --- power loss while a truncation replaces the file (the fs twin) -----------------------------

TWIN_ROOT = "/data"
TWIN_LOG_DIR = "/data/log"
TWIN_CONFIG = {"log.index.size.max.bytes": 4096}


@pytest.mark.parametrize("seed", range(3))
def test_a_power_loss_while_truncate_to_replaces_a_viewed_file_opens_to_a_prefix(
    seed: int,
) -> None:
    """truncate_to under a live view writes the kept prefix to a temp file, syncs it, renames
    it over the .log and syncs the directory. An image before every file-system call it makes
    must open, keep every record below the target, and hold no temp file after the open."""
    twin = ImagingTwin(seed, "view truncation")
    twin.makedirs(TWIN_ROOT, durable=True)
    clock = logtools.Clock(TS)
    broker = eoslog.open(
        TWIN_LOG_DIR, "always", TWIN_CONFIG, fs=twin, clock_ms=clock, background=False
    )
    log = new_topic(broker, **{"segment.bytes": 64 * 1024})
    rng = random.Random(seed)
    appended = []
    for index in range(8):
        values = logtools.values(index * 1000, rng.randint(1, VALUES_PER_BATCH), VALUE_BYTES)
        info = log.append_batch(logtools.batch(values))
        appended.append((info.base_offset, info.last_offset, values))
    broker.run_maintenance()  # the recovery-point checkpoint covers everything
    target = appended[rng.randint(2, 6)][0]
    view = log.read(appended[-1][0], max_bytes=1).records
    expected = bytes(view)
    twin.armed = True
    log.truncate_to(target)
    twin.armed = False
    assert bytes(view) == expected
    operations = [(operation, path) for _, operation, path, _ in twin.images]
    assert ("rename", active_log_path(log) + TEMP_SUFFIX) in operations, operations
    assert ("truncate", active_log_path(log)) not in operations, "cut in place under a view"
    broker.close()
    kept = {("t", 0): [entry for entry in appended if entry[0] < target]}
    problems = []
    for call, operation, path, image in twin.images:
        label = f"seed={seed} image before call {call} ({operation} {path})"
        try:
            report = check_log(TWIN_LOG_DIR, kept, fs=image, config=TWIN_CONFIG, clock_ms=clock)
        except Exception as error:  # every image must open
            problems.append(f"{label}: open failed: {type(error).__name__}: {error}")
            continue
        if not report.ok:
            problems.append(f"{label}: {report.describe()}")
        leftovers = [n for n in image.listdir(f"{TWIN_LOG_DIR}/t-0") if n.endswith(".tmp")]
        if leftovers:
            problems.append(f"{label}: temp files left after open: {leftovers}")
    print(f"\nseed={seed}: {len(twin.images)} images during truncate_to, {len(problems)} wrong")
    assert not problems, "\n".join(problems[:5])


# --- no SIGBUS under a writer that appends, rolls, truncates and deletes (subprocess) ----------

STRESS = textwrap.dedent(
    """
    import collections, json, os, random, sys, threading
    sys.path.insert(0, sys.argv[4])
    import eoslog
    from tests.support import logtools
    from eoslog.errors import KafkaException

    path, seed, iterations = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    broker = eoslog.open(path, "none", {"log.index.size.max.bytes": 4096}, background=False)
    broker.create_topic("t", 1, {"segment.bytes": 96 * 1024, "index.interval.bytes": 4096,
                                 "segment.index.bytes": 4096, "retention.bytes": 256 * 1024})
    log = broker.log("t", 0)
    stop = threading.Event()
    errors, reads, touched = [], [0], [0]

    def reader(number):
        local = random.Random(seed * 100 + number)
        held = collections.deque(maxlen=32)  # views kept across the writer's changes
        while not stop.is_set():
            start, end = log.log_start_offset, log.log_end_offset
            if end <= start:
                continue
            try:
                records = log.read(local.randrange(start, end),
                                   local.choice((1, 16384, 65536)), "read_uncommitted").records
            except KafkaException:
                continue  # retention or truncation moved the range under the read
            except Exception as error:
                errors.append(repr(error))
                return
            held.append((records, bytes(records)))
            reads[0] += 1
            # Touch every byte of some held views, the oldest first: their batches may be
            # truncated, deleted or rolled away by now.
            for view, copy in list(held)[: local.randint(1, 4)]:
                touched[0] += len(view)
                if bytes(view) != copy:
                    errors.append("a view changed under its reader")
            if local.random() < 0.02:
                held.clear()  # sometimes nothing is held: truncations may then cut in place

    threads = [threading.Thread(target=reader, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    counts = collections.Counter()
    for sequence in range(iterations):
        count = rng.randint(1, 40)
        values = [b"%d:%d|" % (sequence, i) + bytes([65 + i % 26]) * rng.randint(50, 900)
                  for i in range(count)]
        info = log.append_batch(logtools.batch(values))
        counts["append"] += 1
        choice = rng.random()
        if choice < 0.05:
            log.roll()
            counts["roll"] += 1
        elif choice < 0.12:
            counts["retention_deleted"] += log.delete_retained_segments()
        elif choice < 0.24 and info.base_offset > log.log_start_offset:
            target = rng.randint(max(log.log_start_offset, info.base_offset - 20),
                                 info.base_offset)
            active = log.segments[-1].path(".log")
            inode = os.stat(active).st_ino
            log.truncate_to(target)
            if log.segments[-1].path(".log") != active:
                counts["truncate_retired_active"] += 1
            elif os.stat(active).st_ino == inode:
                counts["truncate_in_place"] += 1
            else:
                counts["truncate_replaced"] += 1
    stop.set()
    for thread in threads:
        thread.join()
    broker.close()
    print(json.dumps({"counts": counts, "reads": reads[0], "touched_bytes": touched[0],
                      "errors": errors[:3]}))
    sys.exit(1 if errors else 0)
    """
)


def run_stress(tmp_path: os.PathLike[str], seed: int, iterations: int) -> dict[str, object]:
    log_dir = os.path.join(tmp_path, "log")
    result = subprocess.run(
        [sys.executable, "-c", STRESS, log_dir, str(seed), str(iterations), REPO_ROOT],
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_S,
    )
    assert result.returncode != -signal.SIGBUS, f"SIGBUS (seed {seed}):\n{result.stderr[-2000:]}"
    assert result.returncode == 0, (
        f"seed {seed}: exit {result.returncode}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    )
    summary: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"\nseed={seed} iterations={iterations}: {summary}")
    return summary


@pytest.mark.parametrize("seed", [1, 2])
def test_a_reader_holding_views_while_the_writer_appends_rolls_truncates_and_deletes_gets_no_sigbus(
    tmp_path: os.PathLike[str], seed: int
) -> None:
    summary = run_stress(tmp_path, seed, STRESS_ITERATIONS)
    counts = summary["counts"]
    assert isinstance(counts, dict)
    assert counts.get("truncate_replaced", 0) > 0, "no truncation ran under a live view"
    assert counts.get("retention_deleted", 0) > 0 and counts.get("roll", 0) > 0
    assert isinstance(summary["reads"], int) and summary["reads"] > 0


@pytest.mark.soak
def test_soak_no_sigbus_in_ten_thousand_iterations(tmp_path: os.PathLike[str]) -> None:
    run_stress(tmp_path, 3, SOAK_STRESS_ITERATIONS)


CONTROL = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[3])
    import eoslog
    from tests.support import logtools
    from eoslog.log import mapped_log

    path, mode = sys.argv[1], sys.argv[2]
    if mode == "cut-in-place":
        # What a truncation that ignores live views would do.
        mapped_log.MappedLog.shrink = lambda self, size: self.handle.truncate(size)
    broker = eoslog.open(path, "none", background=False)
    broker.create_topic("t", 1, {})
    log = broker.log("t", 0)
    infos = [log.append_batch(logtools.batch(logtools.values(i * 1000, 40, width=256)))
             for i in range(3)]
    view = log.read(infos[2].base_offset, max_bytes=1).records
    log.truncate_to(infos[1].base_offset)
    print(sum(view))  # touches every byte of the view
    """
)


@pytest.mark.parametrize("mode", ["safe", "cut-in-place"])
def test_the_harness_sees_a_sigbus_when_a_file_is_cut_under_a_view(
    tmp_path: os.PathLike[str], mode: str
) -> None:
    """The control for the stress test: with the safety removed, touching a view after its
    file was cut kills the subprocess with SIGBUS, which the harness reports."""
    result = subprocess.run(
        [sys.executable, "-c", CONTROL, os.path.join(tmp_path, "log"), mode, REPO_ROOT],
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_S,
    )
    if mode == "safe":
        assert result.returncode == 0, result.stderr[-2000:]
    else:
        assert result.returncode == -signal.SIGBUS, (result.returncode, result.stderr[-2000:])
