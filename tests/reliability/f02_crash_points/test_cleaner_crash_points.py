"""Family 2 for the log cleaner (docs/reliability.md; eoslog.crashpoints.CLEANER_POINTS;
docs/design.md "Compaction", the swap table): a child writes keyed records to a compacted
topic (the last write of one key a tombstone), makes them durable, then cleans
them, and is killed by SIGKILL at the n-th hit of each of the cleaner's points. The parent
reopens the directory and checks that no record a consumer could still read is lost (the
latest value of every key, at its offset), that every record read is
one written at its own offset, that the open is
deterministic (two copies of the crashed directory open to the same log), and that cleaning
again and reopening cleanly keep all of that."""

from __future__ import annotations

import os
import random
import shutil
import textwrap

import pytest

import eoslog
from eoslog.crashpoints import CLEANER_POINTS, ENV
from eoslog.log.partition import PartitionLog
from tests.support import logtools
from tests.support.killharness import run_child

ROUNDS = 6
KEYS = 5
HITS_MAX = 3

CHILD = textwrap.dedent(
    """
    import json, sys
    import eoslog
    from eoslog.record import codec

    broker = eoslog.open(sys.argv[1], background=False, durability="commit")
    broker.create_topic("t", 1, {{"cleanup.policy": "compact", "segment.bytes": 500,
                                 "delete.retention.ms": 0}})
    log = broker.log("t", 0)
    for round_ in range({rounds}):
        for k in range({keys}):
            builder = codec.BatchBuilder()
            deleted = round_ == {rounds} - 1 and k == 0
            value = None if deleted else b"value%d-%d" % (round_, k)
            builder.append(1_700_000_000_000, b"key%d" % k, value)
            log.append_batch(builder.build())
        log.roll()
    log.flush()
    print(json.dumps({{"acked": log.log_end_offset}}), flush=True)
    for _ in range(3):
        broker.run_maintenance()
        print(json.dumps({{"cleaned": log.cleaned_end}}), flush=True)
    broker.close()
    """
).format(rounds=ROUNDS, keys=KEYS)


def expected_latest() -> dict[bytes, tuple[int, bytes | None]]:
    """key -> (offset, value) of its last write: offset ROUNDS-1 rounds in, key k at k."""
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for round_ in range(ROUNDS):
        for k in range(KEYS):
            deleted = round_ == ROUNDS - 1 and k == 0
            value = None if deleted else b"value%d-%d" % (round_, k)
            latest[b"key%d" % k] = (round_ * KEYS + k, value)
    return latest


def check_log(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record read is the one written at its offset, in order, and every key's last
    write is there (a tombstone may be gone: delete.retention.ms is 0)."""
    records = [(r.offset, r.key, r.value) for r in logtools.read_all(log)]
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets))
    for offset, key, value in records:
        round_, k = divmod(offset, KEYS)
        deleted = round_ == ROUNDS - 1 and k == 0
        assert (key, value) == (b"key%d" % k, None if deleted else b"value%d-%d" % (round_, k))
    for key, (offset, value) in expected_latest().items():
        if value is not None:
            assert (offset, key, value) in records, (key, offset)
    return records


@pytest.mark.parametrize("hit", range(1, HITS_MAX + 1))
@pytest.mark.parametrize("point", CLEANER_POINTS)
def test_a_kill_at_each_step_of_a_clean_loses_nothing_readable_and_reopens_the_same(
    tmp_path: os.PathLike[str], point: str, hit: int
) -> None:
    root = os.path.join(tmp_path, "d")
    os.environ[ENV] = f"{point}:{hit}"
    try:
        child = run_child(CHILD, [root], random.Random(f"{point}{hit}"), None)
    finally:
        os.environ.pop(ENV, None)
    if not child.killed:
        assert child.returncode == 0, child.stderr
        if hit == 1:
            pytest.fail(f"{point} was never hit")
    assert any("acked" in line for line in child.lines), child.stderr
    copy = os.path.join(tmp_path, "copy")
    shutil.copytree(root, copy)
    with eoslog.open(root, background=False) as broker, eoslog.open(copy, background=False) as twin:
        seen = check_log(broker.log("t", 0))
        assert [(r.offset, r.key, r.value) for r in logtools.read_all(twin.log("t", 0))] == seen
        assert not [name for name in os.listdir(broker.log("t", 0).directory) if ".cleaned" in name]
        broker.run_maintenance()
        after = check_log(broker.log("t", 0))
    with eoslog.open(root, background=False) as broker:
        assert [(r.offset, r.key, r.value) for r in logtools.read_all(broker.log("t", 0))] == after
