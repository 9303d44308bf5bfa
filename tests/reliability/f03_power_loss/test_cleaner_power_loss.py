"""Family 3 for the log cleaner (docs/reliability.md; docs/design.md "Compaction", the swap
table): a broker on the recording twin (eoslog.fs_twin) writes keyed records to a compacted
topic under durability "commit", flushes them, then runs the cleaner; before every
file-system call of the cleaning pass a crash image is taken (unsynced writes applied,
dropped or torn, directory entries lost without a directory fsync). Every image must open,
hold every key's latest flushed value at its offset, and hold only records written at their
own offsets; cleaning it again keeps that."""

from __future__ import annotations

import pytest

import eoslog
from eoslog.log.partition import PartitionLog
from eoslog.record import codec
from tests.support import logtools
from tests.support.imaging_twin import ImagingTwin

ROOT = "/data"
LOG_DIR = "/data/log"
TS = 1_700_000_000_000
ROUNDS = 5
KEYS = 4
SEEDS = range(3)
CONFIG = {"cleanup.policy": "compact", "segment.bytes": 400, "delete.retention.ms": 0}


def value_at(offset: int) -> tuple[bytes, bytes | None]:
    round_, k = divmod(offset, KEYS)
    deleted = round_ == ROUNDS - 1 and k == 0
    return b"key%d" % k, None if deleted else b"value%d-%d" % (round_, k)


def write(log: PartitionLog) -> None:
    for offset in range(ROUNDS * KEYS):
        key, value = value_at(offset)
        builder = codec.BatchBuilder()
        builder.append(TS, key, value)
        log.append_batch(builder.build())
        if offset % KEYS == KEYS - 1:
            log.roll()
    log.flush()


def check(log: PartitionLog) -> None:
    records = [(r.offset, r.key, r.value) for r in logtools.read_all(log)]
    assert [offset for offset, _, _ in records] == sorted({offset for offset, _, _ in records})
    for offset, key, value in records:
        assert (key, value) == value_at(offset), offset
    for k in range(1, KEYS):  # key0's last write is a tombstone, which may go
        offset = (ROUNDS - 1) * KEYS + k
        assert (offset, *value_at(offset)) in records


@pytest.mark.parametrize("seed", SEEDS)
def test_every_power_loss_image_of_a_cleaning_pass_opens_with_every_latest_value(
    seed: int,
) -> None:
    fs = ImagingTwin(seed, "cleaner power loss")
    fs.makedirs(ROOT, durable=True)
    broker = eoslog.open(LOG_DIR, "commit", fs=fs, clock_ms=lambda: TS, background=False)
    broker.create_topic("t", 1, config=CONFIG)
    log = broker.log("t", 0)
    write(log)
    fs.armed = True
    broker.run_maintenance()
    fs.armed = False
    images = fs.images
    assert log.cleaned_end > 0 and images
    operations = {operation for _, operation, _, _ in images}
    assert {"rename", "unlink"} <= operations, operations
    for _, operation, path, image in images:
        try:
            with eoslog.open(
                LOG_DIR, "commit", fs=image, clock_ms=lambda: TS, background=False
            ) as b:
                check(b.log("t", 0))
                b.run_maintenance()
                check(b.log("t", 0))
        except Exception as error:
            raise AssertionError(f"seed {seed}, image before {operation} {path}") from error
    broker.close()
