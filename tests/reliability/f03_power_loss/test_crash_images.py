"""Family 3 (docs/reliability.md): simulated power loss through the fs seam.

A seeded workload runs a broker on the recording twin (eoslog.fs_twin): it appends batches
(some lz4) to a topic with tiny segments and indexes, so that it rolls often, flushes at random
points, runs retention (retention.bytes) and truncate_to, and records in a Ledger which appends
were acknowledged DURABLY (under "always" every append that returned; under "commit" the
appends before a flush() that returned). Before randomly chosen file-system calls - in the
middle of appends, rolls, retention, truncation and checkpoint writes - it takes a crash image
(unsynced writes applied, dropped or torn at 512 B / 4 KiB, directory entries lost without a
directory fsync), and after the workload each image is reopened with eoslog.open(...,
fs=image, background=False). Every image must open (a power loss is never "damage in the
middle") and pass the invariant checker (tests/support/invariants.py) for the acknowledged records,
and no read may return a corrupt batch.

Every run prints its seeds, image count and anomaly counters; a failure message names the seed
and the file-system call of the image, so `run_workload(seed, durability, crash_calls={call})`
replays it. The regression tests after the family pin each bug the family found.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import eoslog
from eoslog.fs_twin import RecordingFileSystem
from eoslog.record import codec
from tests.support.invariants import Ledger, Report, check_log, copy_twin

TOPIC = "t"
PARTITIONS = 2
ROOT = "/data"
LOG_DIR = "/data/log"
TS = 1_700_000_000_000
LZ4 = 3
# CI size: 2 durabilities x 33 workloads x (30 images + 1 after close) = 2,046 images.
CI_WORKLOADS = 33
CI_IMAGES_PER_WORKLOAD = 30
# Soak: 100,000 images (pytest -m soak).
SOAK_WORKLOADS = 1000
SOAK_IMAGES_PER_WORKLOAD = 50
OPERATIONS = 70
# Small preallocated indexes for every topic, the internal ones included: the twin holds files
# in memory and copies them into every crash image.
BROKER_CONFIG = {"log.index.size.max.bytes": 4096}


# --- the fs tap: crash images before chosen calls ----------------------------------------------


class _TapFile:
    """A twin file handle that runs the tap before each counted call."""

    def __init__(self, handle: Any, tap: Callable[[], None]) -> None:
        self._handle = handle
        self._tap = tap

    @property
    def path(self) -> str:
        return str(self._handle.path)

    def size(self) -> int:
        return int(self._handle.size())

    def pread(self, size: int, offset: int) -> bytes:
        self._tap()
        return bytes(self._handle.pread(size, offset))

    def pwrite(self, data: Any, offset: int) -> None:
        self._tap()
        self._handle.pwrite(data, offset)

    def truncate(self, size: int) -> None:
        self._tap()
        self._handle.truncate(size)

    def sync(self) -> None:
        self._tap()
        self._handle.sync()

    def map(self, size: int) -> Any:
        self._tap()
        return self._handle.map(size)

    def close(self) -> None:
        self._handle.close()


class CrashTap:
    """A FileSystem over a RecordingFileSystem that calls `before_call(twin)` before every
    call the twin counts, so a test can take crash images in the middle of any operation."""

    def __init__(self, twin: RecordingFileSystem, before_call: Callable[[], None]) -> None:
        self.twin = twin
        self._before_call = before_call

    def _tap(self) -> None:
        self._before_call()

    def open(
        self, path: str, *, create: bool = False, read_only: bool = False, exclusive: bool = False
    ) -> _TapFile:
        self._tap()
        handle = self.twin.open(path, create=create, read_only=read_only, exclusive=exclusive)
        return _TapFile(handle, self._tap)

    def exists(self, path: str) -> bool:
        return self.twin.exists(path)

    def file_size(self, path: str) -> int:
        return self.twin.file_size(path)

    def listdir(self, path: str) -> list[str]:
        self._tap()
        return self.twin.listdir(path)

    def list_directories(self, path: str) -> list[str]:
        self._tap()
        return self.twin.list_directories(path)

    def mkdir(self, path: str) -> None:
        self._tap()
        self.twin.mkdir(path)

    def rmdir(self, path: str) -> None:
        self._tap()
        self.twin.rmdir(path)

    def unlink(self, path: str) -> None:
        self._tap()
        self.twin.unlink(path)

    def rename(self, source: str, target: str) -> None:
        self._tap()
        self.twin.rename(source, target)

    def sync_dir(self, path: str) -> None:
        self._tap()
        self.twin.sync_dir(path)

    def lock(self, path: str) -> Any:
        self._tap()
        return self.twin.lock(path)


# --- the workload --------------------------------------------------------------------------


@dataclass
class CrashImage:
    image: RecordingFileSystem
    acked: dict[tuple[str, int], list[tuple[int, int, tuple[bytes | None, ...]]]]
    floor: dict[tuple[str, int], int]
    label: str


@dataclass
class WorkloadRun:
    seed: int
    durability: str
    calls: int = 0
    images: list[CrashImage] = field(default_factory=list)
    operations: Counter[str] = field(default_factory=Counter)


class Clock:
    """Milliseconds that advance by one per batch: record timestamps and the broker's clock
    move together, so time-based retention and rolls never fire."""

    def __init__(self) -> None:
        self.now = TS

    def __call__(self) -> int:
        return self.now


def build_batch(
    rng: random.Random, clock: Clock, label: bytes, sequence: int
) -> tuple[bytes, list[bytes | None]]:
    """A batch of 1-6 records with unique values and strictly increasing timestamps."""
    builder = codec.BatchBuilder(compression=LZ4 if rng.random() < 0.3 else 0)
    values: list[bytes | None] = []
    for i in range(rng.randint(1, 6)):
        clock.now += 1
        value = b"%s:%d:%d|" % (label, sequence, i) + bytes([65 + i]) * rng.randint(0, 90)
        assert builder.append(clock.now, b"k%d" % i if i % 2 else None, value)
        values.append(value)
    return builder.build(), values


def image_rng(seed: int, call: int) -> random.Random:
    """The randomness of the image taken before `call`: the same with or without the other
    images, so that run_workload(seed, durability, {call}) replays one image."""
    return random.Random(f"crash image {seed} {call}")


def topic_config(rng: random.Random) -> dict[str, int]:
    segment_bytes = rng.choice([1024, 2048, 4096])
    return {
        "segment.bytes": segment_bytes,
        "index.interval.bytes": rng.choice([0, 64, 300]),
        "segment.index.bytes": rng.choice([64, 128, 1024]),
        "retention.bytes": rng.choice([-1, 3 * segment_bytes]),
    }


def run_workload(
    seed: int, durability: str, crash_calls: set[int] | frozenset[int] = frozenset()
) -> WorkloadRun:
    """Run the seeded workload on a fresh twin, taking a crash image before each counted
    call whose number is in crash_calls, and one after the final close()."""
    rng = random.Random(seed)
    twin = RecordingFileSystem(seed)
    twin.makedirs(ROOT, durable=True)
    ledger = Ledger(durability)
    run = WorkloadRun(seed, durability)

    def before_call() -> None:
        call = twin.calls
        if call in crash_calls:
            acked, floor = ledger.snapshot()
            label = f"seed={seed} durability={durability} call={call}"
            image = twin.crash_image(image_rng(seed, call))
            run.images.append(CrashImage(image, acked, floor, label))

    clock = Clock()
    broker = eoslog.open(
        LOG_DIR,
        durability,
        BROKER_CONFIG,
        fs=CrashTap(twin, before_call),
        clock_ms=clock,
        background=False,
    )
    broker.create_topic(TOPIC, PARTITIONS, topic_config(rng))
    tps = [(TOPIC, p) for p in range(PARTITIONS)]
    for tp in tps:
        ledger.add_partition(tp)
    batches: dict[tuple[str, int], list[tuple[int, int]]] = {tp: [] for tp in tps}
    for sequence in range(OPERATIONS):
        tp = rng.choice(tps)
        log = broker.log(*tp)
        choice = rng.random()
        if choice < 0.70:
            raw, values = build_batch(rng, clock, b"%d:%d" % (seed, tp[1]), sequence)
            info = log.append_batch(raw)
            ledger.appended(tp, info, values)
            batches[tp].append((info.base_offset, info.last_offset))
            run.operations["append"] += 1
        elif choice < 0.82:
            log.flush()
            ledger.flushed(tp)
            run.operations["flush"] += 1
        elif choice < 0.88:
            # Retention by bytes never removes the active segment; afterwards everything
            # below the new log start is gone for good (unlinked, directory synced).
            for each in tps:
                ledger.floor[each] = broker.log(*each).segments[-1].base_offset
            broker.run_maintenance()
            for each in tps:
                ledger.floor[each] = broker.log(*each).log_start_offset
            run.operations["retention"] += 1
        elif choice < 0.94:
            live = [b for b in batches[tp] if b[0] >= log.log_start_offset]
            if live:
                # A batch boundary among the last few batches (test_truncate_inside_a_batch
                # covers targets inside a batch).
                target = rng.choice(live[-4:])[0]
                ledger.truncating(tp, target)
                log.truncate_to(target)
                batches[tp] = [b for b in batches[tp] if b[1] < target]
                run.operations["truncate"] += 1
        else:
            log.roll()
            run.operations["roll"] += 1
    broker.close()
    ledger.flushed()
    run.calls = twin.calls
    acked, floor = ledger.snapshot()
    label = f"seed={seed} durability={durability} after close"
    image = twin.crash_image(image_rng(seed, run.calls))
    run.images.append(CrashImage(image, acked, floor, label))
    return run


def check_image(crash: CrashImage) -> tuple[Report, str | None]:
    """Reopen one image and check it: (report, error if it did not open)."""
    try:
        report = check_log(
            LOG_DIR,
            crash.acked,
            fs=crash.image,
            missing_allowed_below=crash.floor,
            label=f"[{crash.label}] ",
            config=BROKER_CONFIG,
            clock_ms=Clock(),
        )
    except Exception as error:  # every image must open: any exception is a finding
        return Report(), f"[{crash.label}] reopen failed: {type(error).__name__}: {error}"
    return report, None


def run_family(durability: str, workloads: range, images_per_workload: int) -> None:
    total = Report()
    failures: list[str] = []
    images = 0
    unopenable = 0
    operations: Counter[str] = Counter()
    for seed in workloads:
        calls = run_workload(seed, durability).calls
        chosen = frozenset(random.Random(seed).sample(range(calls), images_per_workload))
        run = run_workload(seed, durability, chosen)
        operations.update(run.operations)
        for crash in run.images:
            images += 1
            report, error = check_image(crash)
            total.merge(report)
            if error is not None:
                unopenable += 1
                failures.append(error)
            elif not report.ok:
                failures.append(f"[{crash.label}] {report.describe()}")
    print(
        f"\nfamily 3 durability={durability} seeds={workloads.start}..{workloads.stop - 1} "
        f"images={images} records_checked={total.records_checked} "
        f"batches_read={total.batches_read} operations={dict(operations)}\n"
        f"anomalies: unopenable={unopenable} {total.summary()}"
    )
    for line in failures[:10]:
        print(line)
    assert images >= len(workloads) * images_per_workload
    assert unopenable == 0 and total.ok, (
        f"{unopenable} images did not open, {total.summary()} over {images} images; "
        f"first failures:\n" + "\n".join(failures[:5])
    )


@pytest.mark.parametrize("durability", ["commit", "always"])
def test_power_loss_images_keep_every_durably_acknowledged_record(durability: str) -> None:
    run_family(durability, range(CI_WORKLOADS), CI_IMAGES_PER_WORKLOAD)


@pytest.mark.soak
@pytest.mark.parametrize("durability", ["commit", "always"])
def test_power_loss_images_soak(durability: str) -> None:
    run_family(durability, range(1000, 1000 + SOAK_WORKLOADS), SOAK_IMAGES_PER_WORKLOAD)


# --- the delivery callback as an acknowledgement -----------------------------------------------

# CI size: 2 durabilities x 6 workloads x ~12 images.
CALLBACK_WORKLOADS = 6
CALLBACK_IMAGES_PER_WORKLOAD = 12
CALLBACK_OPERATIONS = 60


def run_callback_workload(seed: int, durability: str) -> WorkloadRun:
    """A producer with an on_delivery callback: produce() to random partitions, poll(0) and
    flush() at random. The ledger records each record as acknowledged when its callback
    reports it without error, and crash images are taken inside callbacks (the moment of
    the acknowledgement) and right after flush() returns."""
    rng = random.Random(seed)
    twin = RecordingFileSystem(seed)
    twin.makedirs(ROOT, durable=True)
    ledger = Ledger(durability)
    run = WorkloadRun(seed, durability)
    image_chance = CALLBACK_IMAGES_PER_WORKLOAD / CALLBACK_OPERATIONS

    def take_image(moment: str) -> None:
        acked, floor = ledger.snapshot()
        label = f"seed={seed} durability={durability} call={twin.calls} {moment}"
        image = twin.crash_image(image_rng(seed, twin.calls))
        run.images.append(CrashImage(image, acked, floor, label))

    def on_delivery(error: Any, report: Any) -> None:
        assert error is None, error
        ledger.delivered((report.topic(), report.partition()), report.offset(), report.value())
        run.operations["callback"] += 1
        if rng.random() < image_chance:
            take_image(f"in the callback of offset {report.offset()}")

    broker = eoslog.open(
        LOG_DIR, durability, BROKER_CONFIG, fs=twin, clock_ms=Clock(), background=False
    )
    broker.create_topic(TOPIC, PARTITIONS, {**topic_config(rng), "retention.bytes": -1})
    for partition in range(PARTITIONS):
        ledger.add_partition((TOPIC, partition))
    # linger.ms 0 appends every record at once; 60 s leaves batches to poll()'s linger check
    # and flush(): no linger thread acts during this single-threaded run.
    producer = broker.producer(
        {"linger.ms": rng.choice([0, 60_000]), "on_delivery": on_delivery, "batch.size": 512}
    )
    for sequence in range(CALLBACK_OPERATIONS):
        value = b"%d:%d|" % (seed, sequence) + b"v" * rng.randint(0, 120)
        producer.produce(TOPIC, value, partition=rng.randrange(PARTITIONS))
        run.operations["produce"] += 1
        if rng.random() < 0.4:
            producer.poll(0)
            run.operations["poll"] += 1
        elif rng.random() < 0.1:
            assert producer.flush() == 0
            take_image("after flush() returned")
            run.operations["flush"] += 1
    assert producer.flush() == 0
    take_image("after the last flush() returned")
    producer.close()
    broker.close()
    run.calls = twin.calls
    return run


@pytest.mark.parametrize("durability", ["commit", "always"])
def test_power_loss_images_at_delivery_callbacks_keep_every_acknowledged_record(
    durability: str,
) -> None:
    total = Report()
    failures: list[str] = []
    images = 0
    operations: Counter[str] = Counter()
    for seed in range(CALLBACK_WORKLOADS):
        run = run_callback_workload(seed, durability)
        operations.update(run.operations)
        for crash in run.images:
            images += 1
            report, error = check_image(crash)
            total.merge(report)
            if error is not None or not report.ok:
                failures.append(error or f"[{crash.label}] {report.describe()}")
    print(
        f"\nfamily 3 (callbacks) durability={durability} seeds=0..{CALLBACK_WORKLOADS - 1} "
        f"images={images} records_checked={total.records_checked} operations={dict(operations)}"
        f"\nanomalies: {total.summary()} unopenable_or_failed={len(failures)}"
    )
    assert images >= CALLBACK_WORKLOADS and total.records_checked > 0
    assert not failures, "\n".join(failures[:5])


# --- regression tests for what the family found ----------------------------------------------

REGRESSION_TOPIC_CONFIG = {
    "segment.bytes": 1024,
    "index.interval.bytes": 64,
    "segment.index.bytes": 1024,
}


def small_broker(
    twin: RecordingFileSystem, durability: str = "always", **config: int
) -> eoslog.Broker:
    twin.makedirs(ROOT, durable=True)
    broker = eoslog.open(
        LOG_DIR, durability, BROKER_CONFIG, fs=twin, clock_ms=Clock(), background=False
    )
    broker.create_topic(TOPIC, 1, {**REGRESSION_TOPIC_CONFIG, **config})
    return broker


def append_batches(log: Any, count: int, seed: int = 0) -> list[tuple[int, int, list[Any]]]:
    rng = random.Random(seed)
    clock = Clock()
    clock.now += 1000 * seed
    appended = []
    for sequence in range(count):
        raw, values = build_batch(rng, clock, b"r%d" % seed, sequence)
        info = log.append_batch(raw)
        appended.append((info.base_offset, info.last_offset, values))
    return appended


def check_image_opens_and_keeps(
    image: RecordingFileSystem, acked: list[Any], label: str
) -> tuple[Report, str | None]:
    """check_log on one image: (report, error if it did not open)."""
    try:
        report = check_log(
            LOG_DIR, {(TOPIC, 0): acked}, fs=image, config=BROKER_CONFIG, clock_ms=Clock()
        )
    except Exception as error:  # every image must open
        return Report(), f"{label}: open failed: {type(error).__name__}: {error}"
    return report, None if report.ok else f"{label}: {report.describe()}"


def images_during(
    seed: int, setup: Callable[[eoslog.Broker], Any], action: Callable[[eoslog.Broker], Any]
) -> list[tuple[int, RecordingFileSystem, Any]]:
    """Power-loss images before every file-system call of `action`, run after `setup` on a
    fresh twin: [(call, image, what setup returned)]. Replays the run once per call."""
    twin = RecordingFileSystem(seed=seed)
    broker = small_broker(twin)
    setup(broker)
    first = twin.calls
    action(broker)
    images = []
    for call in range(first, twin.calls):
        again = RecordingFileSystem(seed=seed)
        taken: list[RecordingFileSystem] = []

        def tap(
            again: RecordingFileSystem = again,
            call: int = call,
            taken: list[RecordingFileSystem] = taken,
        ) -> None:
            if again.calls == call:
                taken.append(again.crash_image(image_rng(seed, call)))

        again.makedirs(ROOT, durable=True)
        replay = eoslog.open(
            LOG_DIR,
            "always",
            BROKER_CONFIG,
            fs=CrashTap(again, tap),
            clock_ms=Clock(),
            background=False,
        )
        replay.create_topic(TOPIC, 1, REGRESSION_TOPIC_CONFIG)
        kept = setup(replay)
        action(replay)
        images.extend((call, image, kept) for image in taken)
    return images


def test_a_process_crash_after_time_index_entries_reopens() -> None:
    """kill -9 with an active segment whose time index holds entries: every write reached the
    page cache, so nothing is lost, and the directory must open (recovery rescanned the last
    segment twice without re-expanding its trimmed indexes: IndexFullError)."""
    twin = RecordingFileSystem(seed=1)
    broker = small_broker(twin, "none", **{"segment.bytes": 1 << 20})
    acked = append_batches(broker.log(TOPIC, 0), 30)
    _, error = check_image_opens_and_keeps(copy_twin(twin), acked, "process crash")
    assert error is None, error


def test_appends_after_truncate_to_are_fsynced_before_they_are_acknowledged() -> None:
    """Under durability="always" an append returns only once it is durable. After truncate_to
    the group-sync durable mark stayed above the new log end, so appends were acknowledged
    without any fsync until the log grew past the old end."""
    twin = RecordingFileSystem(seed=2)
    broker = small_broker(twin, "always", **{"segment.bytes": 1 << 20})
    log = broker.log(TOPIC, 0)
    appended = append_batches(log, 10)
    log.truncate_to(appended[5][0])
    after = append_batches(log, 2, seed=1)
    unsynced = [path for path in twin.unsynced_paths() if path.endswith(".log")]
    assert unsynced == [], f"acknowledged appends {after} are not durable: {unsynced}"
    _, error = check_image_opens_and_keeps(
        twin.crash_image(random.Random(0)), appended[:5] + after, "power loss"
    )
    assert error is None, error


def test_flush_after_truncate_to_makes_the_new_appends_durable() -> None:
    """The same under durability="commit": flush() after truncate_to and new appends must
    fsync them."""
    twin = RecordingFileSystem(seed=3)
    broker = small_broker(twin, "commit", **{"segment.bytes": 1 << 20})
    log = broker.log(TOPIC, 0)
    appended = append_batches(log, 10)
    log.flush()
    log.truncate_to(appended[5][0])
    after = append_batches(log, 3, seed=1)
    log.flush()
    unsynced = [path for path in twin.unsynced_paths() if path.endswith(".log")]
    assert unsynced == [], f"flush() returned with {after} not durable: {unsynced}"


def test_truncate_inside_a_batch_removes_the_batch_and_leaves_no_gap() -> None:
    """truncate_to(offset) with offset inside a batch removes the whole batch (docs/api.md); the
    log end must then be that batch's base offset, as a reopen computes it. It was `offset`,
    so the next append left a gap without control records (invariant 2) and the log end
    differed before and after a reopen (invariant 8)."""
    twin = RecordingFileSystem(seed=4)
    broker = small_broker(twin, "always")
    log = broker.log(TOPIC, 0)
    appended = append_batches(log, 12)
    base, last, _ = next(entry for entry in appended[6:] if entry[1] > entry[0])
    log.truncate_to(base + 1)
    assert log.log_end_offset == base, (log.log_end_offset, base, last)
    after = append_batches(log, 2, seed=1)
    kept = [entry for entry in appended if entry[1] < base]
    report = check_log(broker, {(TOPIC, 0): kept + after}, config=BROKER_CONFIG)
    assert report.ok, report.describe()


@pytest.mark.parametrize("seed", range(4))
def test_a_power_loss_during_truncate_to_opens_to_a_prefix_of_the_log(seed: int) -> None:
    """truncate_to over several segments, an image before every file-system call it makes:
    each must open (the partly cut segment is a torn tail, not middle damage: its bytes past
    the cut were being discarded) and hold every record below the target, with no hole."""
    target: list[int] = []

    def setup(broker: eoslog.Broker) -> list[Any]:
        log = broker.log(TOPIC, 0)
        appended = append_batches(log, 40, seed=seed)
        assert len(log.segments) >= 4, len(log.segments)
        broker.run_maintenance()  # the recovery point checkpoint now covers everything
        target[:] = [log.segments[1].base_offset + 1]
        return [entry for entry in appended if entry[1] < target[0]]

    def action(broker: eoslog.Broker) -> None:
        broker.log(TOPIC, 0).truncate_to(target[0])

    problems = []
    images = images_during(seed, setup, action)
    for call, image, kept in images:
        _, problem = check_image_opens_and_keeps(image, kept, f"seed={seed} call={call}")
        if problem is not None:
            problems.append(problem)
    print(f"\nseed={seed}: {len(images)} images during truncate_to, {len(problems)} wrong")
    assert not problems, "\n".join(problems[:5])


@pytest.mark.parametrize("seed", range(3))
def test_a_power_loss_before_the_first_maintenance_checkpoint_opens_with_every_fsynced_record(
    seed: int,
) -> None:
    """A new topic, a flush, more appends, and a power loss before any maintenance pass
    wrote a recovery point: the images hold holes with valid unsynced batches after them.
    They open because create_topic wrote the partition's recovery point (0), a trusted
    "nothing known durable past here", so those holes are cut; without it the open would
    trust no recovery point and refuse them as middle damage (eoslog.log.recovery)."""
    problems = []
    for number in range(20):
        twin = RecordingFileSystem(seed=seed)
        broker = small_broker(twin, "commit", **{"segment.bytes": 1 << 20})
        log = broker.log(TOPIC, 0)
        kept = append_batches(log, 5, seed=seed)
        log.flush()
        append_batches(log, 15, seed=seed + 100)  # unsynced: applied, dropped or torn
        image = twin.crash_image(random.Random(f"{seed} {number}"))
        _, problem = check_image_opens_and_keeps(image, kept, f"seed={seed} {number}")
        if problem is not None:
            problems.append(problem)
    print(f"\nseed={seed}: 20 images before the first checkpoint, {len(problems)} wrong")
    assert not problems, "\n".join(problems[:5])


@pytest.mark.parametrize("seed", range(0, 40, 4))
def test_a_power_loss_after_a_roll_keeps_the_rolled_segment_indexes_right(seed: int) -> None:
    """flush, roll, checkpoint (run_maintenance), then a power loss: the recovery point covers
    the rolled segment, so it is not rescanned, and its trimmed indexes and final time-index
    entry, written by the roll, must already be durable (invariant 7)."""
    problems = []
    for number in range(10):
        twin = RecordingFileSystem(seed=seed)
        broker = small_broker(twin, "commit", **{"segment.bytes": 2048})
        log = broker.log(TOPIC, 0)
        appended = append_batches(log, 8, seed=seed)
        log.flush()
        log.roll()
        broker.run_maintenance()  # writes the recovery point checkpoint
        rolled = log.segments[-2].base_offset
        # Producer snapshots are written without fsync on purpose: one lost or torn by a power
        # loss fails its CRC and the state is replayed from the log instead.
        stale = [
            path
            for path in twin.unsynced_paths()
            if path.startswith(f"{LOG_DIR}/{TOPIC}-0/{rolled:020d}.")
            and not path.endswith(".snapshot")
        ]
        if stale:
            problems.append(f"seed={seed}: below the recovery point, not durable: {stale}")
        label = f"seed={seed} image={number}"
        image = twin.crash_image(random.Random(f"{seed} {number}"))
        _, problem = check_image_opens_and_keeps(image, appended, label)
        if problem is not None:
            problems.append(problem)
    assert not problems, "\n".join(problems[:5])


def test_a_roll_right_after_truncate_to_makes_the_deactivated_segment_durable() -> None:
    """truncate_to that retires the active segment, then roll(): the segment it makes active
    again and then deactivates gets its indexes trimmed and a final time-index entry; they
    must be synced before the recovery point covers it (they never were: the segment was
    not in the unsynced set)."""
    twin = RecordingFileSystem(seed=8)
    broker = small_broker(twin, "always")
    log = broker.log(TOPIC, 0)
    appended = append_batches(log, 12)
    assert len(log.segments) >= 2
    target = log.segments[-1].base_offset - 1
    kept = [entry for entry in appended if entry[1] < target]
    log.truncate_to(next(entry[0] for entry in appended if entry[1] >= target))
    log.roll()
    after = append_batches(log, 3, seed=1)
    broker.run_maintenance()
    stale = [
        path
        for path in twin.unsynced_paths()
        if path.startswith(f"{LOG_DIR}/{TOPIC}-0/")
        and path.endswith((".index", ".timeindex"))
        and int(os.path.basename(path).split(".")[0]) < log.segments[-1].base_offset
    ]
    assert stale == [], f"index files below the recovery point are not durable: {stale}"
    _, error = check_image_opens_and_keeps(
        twin.crash_image(random.Random(8)), kept + after, "power loss"
    )
    assert error is None, error


def test_a_power_loss_after_a_clean_close_leaves_indexes_that_match_the_log() -> None:
    """close() trims every index and then writes the clean-shutdown marker, which makes the
    next open trust the index files without a check: the trims must be durable first."""
    problems = []
    for seed in range(10):
        twin = RecordingFileSystem(seed=seed)
        broker = small_broker(twin, "commit")
        appended = append_batches(broker.log(TOPIC, 0), 20, seed=seed)
        broker.close()
        image = twin.crash_image(random.Random(seed))
        _, problem = check_image_opens_and_keeps(image, appended, f"seed={seed}")
        if problem is not None:
            problems.append(problem)
    assert not problems, "\n".join(problems[:5])


def test_recovery_rebuilds_a_tiny_index_even_when_the_rescan_finds_more_entries() -> None:
    """A segment whose appends after truncate_to (or after a reopen) started counting
    index.interval.bytes afresh holds more batches than its rebuilt index has slots for:
    recovery must still open it (an index may stay sparser), not raise IndexFullError."""
    twin = RecordingFileSystem(seed=9)
    broker = small_broker(twin, "none", **{"segment.bytes": 1 << 20, "segment.index.bytes": 64})
    log = broker.log(TOPIC, 0)
    appended = append_batches(log, 6)
    log.truncate_to(appended[1][0])
    after = append_batches(log, 40, seed=1)
    _, error = check_image_opens_and_keeps(copy_twin(twin), appended[:1] + after, "process crash")
    assert error is None, error
