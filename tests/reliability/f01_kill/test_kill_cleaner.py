"""Family 1 for the log cleaner (docs/reliability.md): a child writes keyed rounds to a
compacted topic under durability "always", printing each round once its appends returned
(acknowledged durably), and runs the cleaner after every round; the parent kills it with
SIGKILL at a random moment (armed on its first line, so most kills land mid-run, many while
it cleans), reopens the directory and checks that the latest acknowledged value of every key
is there at its offset, that every record read is one written at its own offset, and that a
second open after cleaning again shows the same. Seeds are printed by the parametrization."""

from __future__ import annotations

import os
import random
import textwrap

import pytest

import eoslog
from tests.support import logtools
from tests.support.killharness import kill_delay, run_child

KEYS = 4
ROUNDS = 40
TRIALS = 6

CHILD = textwrap.dedent(
    """
    import json, sys
    import eoslog
    from eoslog.record import codec

    broker = eoslog.open(sys.argv[1], durability="always", background=False)
    broker.create_topic("t", 1, {{"cleanup.policy": "compact", "segment.bytes": 300,
                                 "min.cleanable.dirty.ratio": 0}})
    log = broker.log("t", 0)
    for round_ in range({rounds}):
        for k in range({keys}):
            builder = codec.BatchBuilder()
            builder.append(1_700_000_000_000, b"key%d" % k, b"value%d-%d" % (round_, k))
            log.append_batch(builder.build())
        print(json.dumps({{"acked": round_}}), flush=True)
        broker.run_maintenance()
    broker.close()
    """
).format(rounds=ROUNDS, keys=KEYS)


@pytest.mark.parametrize("seed", range(TRIALS))
def test_a_kill_while_cleaning_loses_no_acknowledged_latest_value(
    tmp_path: os.PathLike[str], seed: int
) -> None:
    rng = random.Random(seed)
    root = os.path.join(tmp_path, "d")
    child = run_child(CHILD, [root], rng, kill_delay(rng, 1.5))
    acked = max((line["acked"] for line in child.lines), default=-1)
    for attempt in range(2):
        with eoslog.open(root, background=False) as broker:
            records = [(r.offset, r.key, r.value) for r in logtools.read_all(broker.log("t", 0))]
            offsets = [offset for offset, _, _ in records]
            assert offsets == sorted(set(offsets)), (seed, attempt)
            for offset, key, value in records:
                round_, k = divmod(offset, KEYS)
                assert (key, value) == (b"key%d" % k, b"value%d-%d" % (round_, k))
            if acked >= 0:
                for k in range(KEYS):
                    latest = [o for o, key, _ in records if key == b"key%d" % k]
                    assert latest and latest[-1] >= acked * KEYS + k, (seed, attempt, k)
            broker.run_maintenance()
