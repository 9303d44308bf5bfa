"""Family 3 (docs/reliability.md) through the cleaner: power-loss images before every
file-system call of a compaction pass (docs/design.md "Compaction": the checkpoint raise, each
`.cleaned` write and sync, the index removals, the rename over the `.log`, the directory sync
and the index rebuild), over a compacted topic written by a transactional producer that
commits and aborts, with tombstones.

Every image must open, and its read_committed view must hold, for every key, the latest
committed record at its own offset (a tombstone may be gone once its horizon passed), only
records that were written and committed at the offsets they are read at, in increasing
offsets. The same image opened twice reads the same (recovery is deterministic), and the
cleaner run again on a recovered image keeps all of that. Seeds are printed; a failure names
the seed and the file-system call of the image.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field

import pytest

import eoslog
from eoslog.fs_twin import RecordingFileSystem
from tests.support import logtools
from tests.support.imaging_twin import ImagingTwin

ROOT = "/data"
LOG_DIR = "/data/log"
TOPIC = "compacted"
# Small preallocated indexes (the twin copies files into every image).
BROKER_CONFIG = {"log.index.size.max.bytes": 4096}
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": 700,
    "segment.index.bytes": 4096,
    "min.cleanable.dirty.ratio": 0.01,
    "min.compaction.lag.ms": 0,
    "delete.retention.ms": 1_000,
}
KEYS = 6
TRANSACTIONS = 40
CI_SEEDS = 6
IMAGES_PER_SEED = 24

Row = tuple[int, bytes | None, bytes | None]  # (offset, key, value)


@dataclass
class Written:
    """What the workload wrote: every record by offset, the committed ones, and each key's
    latest committed record."""

    records: dict[int, tuple[bytes, bytes | None]] = field(default_factory=dict)
    committed: set[int] = field(default_factory=set)
    latest: dict[bytes, tuple[int, bytes | None]] = field(default_factory=dict)


def open_image(image: RecordingFileSystem, clock: logtools.Clock) -> eoslog.Broker:
    return eoslog.open(LOG_DIR, "always", BROKER_CONFIG, fs=image, clock_ms=clock, background=False)


def read_committed(broker: eoslog.Broker) -> list[Row]:
    consumer = broker.consumer({"isolation.level": "read_committed"})
    consumer.assign([eoslog.TopicPartition(TOPIC, 0, 0)])
    rows: list[Row] = []
    while messages := consumer.consume(100, timeout=0):
        for message in messages:
            assert message.error() is None, message.error()
            key, value = message.key(), message.value()
            rows.append(
                (
                    message.offset(),
                    None if key is None else bytes(key),
                    None if value is None else bytes(value),
                )
            )
    consumer.close()
    return rows


def transaction(
    broker: eoslog.Broker, producer: eoslog.Producer, rng: random.Random, number: int, seed: int
) -> tuple[list[tuple[int, bytes, bytes | None]], bool]:
    """One transaction of 1-3 keyed records (one in ten a tombstone), committed three times in
    four; its (offset, key, value) rows and whether it committed."""
    rows: list[tuple[int, bytes, bytes | None]] = []

    def delivered(error: object, message: eoslog.Message) -> None:
        assert error is None, error
        value = message.value()
        rows.append(
            (message.offset(), bytes(message.key()), None if value is None else bytes(value))
        )

    producer.begin_transaction()
    for index in range(rng.randint(1, 3)):
        key = b"key%d" % rng.randrange(KEYS)
        value = None if rng.random() < 0.1 else b"%d-%d-%d" % (seed, number, index)
        producer.produce(TOPIC, value, key=key, partition=0, on_delivery=delivered)
    producer.flush()
    commit = rng.random() < 0.75
    if commit:
        producer.commit_transaction()
    else:
        producer.abort_transaction()
    return rows, commit


@dataclass
class Image:
    """A power-loss image, with what was written and committed when it was taken."""

    label: str
    image: RecordingFileSystem
    clock: logtools.Clock
    written: Written


def run_workload(seed: int) -> list[Image]:
    """The seeded workload on a fresh twin, with images before every call of each pass."""
    rng = random.Random(seed)
    twin = ImagingTwin(seed, "compaction")
    twin.makedirs(ROOT, durable=True)
    clock = logtools.Clock()
    broker = open_image(twin, clock)
    broker.create_topic(TOPIC, 1, config=TOPIC_CONFIG)
    producer = broker.producer({"transactional.id": "writer", "linger.ms": 0})
    producer.init_transactions()
    written = Written()
    images: list[Image] = []
    for number in range(TRANSACTIONS):
        rows, commit = transaction(broker, producer, rng, number, seed)
        for offset, key, value in rows:
            written.records[offset] = (key, value)
        if commit:
            for offset, key, value in sorted(rows):
                written.committed.add(offset)
                written.latest[key] = (offset, value)
        clock.advance(rng.choice([1, 400]))
        if number % 5 == 4:
            first = len(twin.images)
            twin.armed = True
            broker.run_maintenance()
            twin.armed = False
            state = copy.deepcopy(written)
            for call, operation, path, image in twin.images[first:]:
                label = f"seed={seed} transaction={number} call={call} before {operation} {path}"
                images.append(Image(label, image, logtools.Clock(clock.now_ms), state))
    producer.close()
    broker.close()
    return rng.sample(images, min(IMAGES_PER_SEED, len(images)))


def check_rows(rows: list[Row], written: Written, label: str) -> None:
    offsets = [offset for offset, _, _ in rows]
    assert offsets == sorted(set(offsets)), f"[{label}] offsets not increasing: {offsets}"
    for offset, key, value in rows:
        assert written.records.get(offset) == (key, value), (
            f"[{label}] offset {offset} reads {(key, value)}, written {written.records.get(offset)}"
        )
        assert offset in written.committed, f"[{label}] offset {offset} was aborted"
    last: dict[bytes | None, tuple[int, bytes | None]] = {}
    for offset, key, value in rows:
        last[key] = (offset, value)
    for key, (offset, value) in written.latest.items():
        if value is None:  # a tombstone: kept until its horizon, then gone with the key
            assert last.get(key) in (None, (offset, None)), (
                f"[{label}] {key!r} was deleted at {offset}, reads {last.get(key)}"
            )
        else:
            assert last.get(key) == (offset, value), (
                f"[{label}] {key!r}'s latest committed {(offset, value)} reads {last.get(key)}"
            )


def check_image(
    label: str, image: RecordingFileSystem, clock: logtools.Clock, written: Written
) -> None:
    twin_copy = image.crash_image(random.Random(0))  # all durable: an exact copy
    broker = open_image(image, clock)
    try:
        rows = read_committed(broker)
        check_rows(rows, written, label)
        broker.run_maintenance()  # the cleaner goes on from the recovered state
        check_rows(read_committed(broker), written, f"{label}, cleaned again")
    finally:
        broker.close()
    again = open_image(twin_copy, clock)
    try:
        assert read_committed(again) == rows, f"[{label}] a second open of the image differs"
    finally:
        again.close()


def run_family(seeds: range) -> None:
    images = 0
    operations: set[str] = set()
    for seed in seeds:
        print(f"compaction power loss: seed {seed}")
        for taken in run_workload(seed):
            label = taken.label
            operations.add(label.split(" before ")[1].split()[0])
            try:
                check_image(label, taken.image, taken.clock, taken.written)
            except AssertionError:
                raise
            except Exception as error:  # every image must open and read: any error is a finding
                raise AssertionError(f"[{label}] {type(error).__name__}: {error}") from error
            images += 1
    print(
        f"family 3 compaction: seeds {seeds.start}..{seeds.stop - 1}, {images} images, "
        f"before calls of kinds {sorted(operations)}"
    )
    # The passes did clean: images were taken before renames of a `.cleaned` file.
    assert "rename" in operations, operations


def test_every_power_loss_during_compaction_keeps_each_keys_latest_committed_record() -> None:
    run_family(range(CI_SEEDS))


@pytest.mark.soak
def test_compaction_power_loss_soak() -> None:
    run_family(range(CI_SEEDS, CI_SEEDS + 200))
