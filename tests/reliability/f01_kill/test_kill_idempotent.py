"""Family 1 (docs/reliability.md) for the idempotent producer: an idempotent writer subprocess is
killed with SIGKILL at random moments, over and over, in one log directory. Each new child
first retries the batch the last one may have had in flight and a few batches it had
acknowledged, then goes on. Every retry must come back as the original append (duplicate=True,
the original offsets), or, for an old batch whose metadata the reopen did not keep, as
OutOfOrderSequenceError; never as a second copy. At the end (and every few trials) the
invariant checker finds every acknowledged record exactly once, in order.

CI runs CI_TRIALS kills; `pytest -m soak` runs SOAK_TRIALS.
"""

from __future__ import annotations

import json
import os
import random
import textwrap

import pytest

import eoslog
from tests.support.invariants import check_log
from tests.support.killharness import run_child

CI_TRIALS = 100
SOAK_TRIALS = 2_000
CHECK_EVERY = 50
TOPIC = "t"
PRODUCER_ID = 4242
TS = 1_700_000_000_000
# Small segments, so that kills land around rolls and snapshots too.
TOPIC_CONFIG = {"segment.bytes": 16 * 1024}

CHILD = textwrap.dedent(
    """
    import json, random, sys
    import eoslog
    from eoslog.errors import OutOfOrderSequenceError
    from eoslog.record import codec

    root = sys.argv[1]
    producer_id, next_sequence, seed = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    retries = json.loads(sys.argv[5])
    rng = random.Random(seed)

    def batch(sequence, count):
        builder = codec.BatchBuilder(
            producer_id=producer_id, producer_epoch=0, base_sequence=sequence
        )
        for i in range(count):
            assert builder.append({ts} + sequence + i, None, b"%d:%d" % (producer_id, sequence + i))
        return builder.build()

    def say(**fields):
        print(json.dumps(fields), flush=True)

    broker = eoslog.open(root, durability="none", clock_ms=lambda: {ts})
    log = broker.log({topic!r}, 0)
    for sequence, count in retries:
        say(retry=sequence, count=count)
        try:
            info = log.append_batch(batch(sequence, count))
        except OutOfOrderSequenceError:
            say(retried=sequence, count=count, refused=True)
            continue
        say(retried=sequence, count=count, base=info.base_offset, last=info.last_offset,
            duplicate=info.duplicate)
    sequence = next_sequence
    for _ in range(5000):  # far more than a kill lets it write: kills land mid-run
        count = rng.randint(1, 8)
        say(sending=sequence, count=count)
        info = log.append_batch(batch(sequence, count))
        say(acked=sequence, count=count, base=info.base_offset, last=info.last_offset,
            duplicate=info.duplicate)
        sequence += count
    broker.close()
    """
).format(ts=TS, topic=TOPIC)


def values(sequence: int, count: int) -> tuple[bytes, ...]:
    return tuple(b"%d:%d" % (PRODUCER_ID, sequence + i) for i in range(count))


def run_trials(root: str, trials: int, seed: int) -> None:
    rng = random.Random(seed)
    print(f"seed={seed} trials={trials}")
    with eoslog.open(root, durability="none", background=False) as broker:
        broker.create_topic(TOPIC, 1, TOPIC_CONFIG)
    acked: dict[int, tuple[int, int, int]] = {}  # sequence -> (count, base, last)
    in_flight: tuple[int, int] | None = None
    next_sequence = 0
    counts = {"kills": 0, "finished": 0, "in_flight_landed": 0, "in_flight_lost": 0}
    counts.update({"retries_recognized": 0, "retries_refused": 0})
    for trial in range(trials):
        recent = sorted(acked)[-5:]
        retries = [[in_flight[0], in_flight[1]]] if in_flight else []
        retries += [[s, acked[s][0]] for s in rng.sample(recent, min(len(recent), 2))]
        kill_after = None if rng.random() < 0.05 else rng.uniform(0.0, 0.15)
        run = run_child(
            CHILD,
            [
                root,
                str(PRODUCER_ID),
                str(next_sequence),
                str(rng.randrange(1 << 30)),
                json.dumps(retries),
            ],
            rng,
            kill_after,
        )
        counts["kills" if run.killed else "finished"] += 1
        for line in run.lines:
            if "retried" in line:
                sequence, count = line["retried"], line["count"]
                if sequence in acked:
                    if line.get("refused"):
                        counts["retries_refused"] += 1
                        continue
                    assert line["duplicate"], f"trial {trial}: retry of {sequence} appended again"
                    assert (line["base"], line["last"]) == acked[sequence][1:], line
                    counts["retries_recognized"] += 1
                else:  # the in-flight batch of the killed child
                    assert not line.get("refused"), f"trial {trial}: in-flight refused: {line}"
                    acked[sequence] = (count, line["base"], line["last"])
                    counts["in_flight_landed" if line["duplicate"] else "in_flight_lost"] += 1
                    in_flight = None
                    next_sequence = max(next_sequence, sequence + count)
            elif "sending" in line:
                in_flight = (line["sending"], line["count"])
            elif "acked" in line:
                assert not line["duplicate"], line
                acked[line["acked"]] = (line["count"], line["base"], line["last"])
                in_flight = None
                next_sequence = line["acked"] + line["count"]
        if in_flight is not None:
            next_sequence = in_flight[0] + in_flight[1]
        if (trial + 1) % CHECK_EVERY == 0 or trial == trials - 1:
            expected = [
                (base, last, values(sequence, count))
                for sequence, (count, base, last) in sorted(acked.items())
            ]
            # The children's clock: with the real one, the open would expire the producer
            # (its record timestamps are from 2023) and a retry would no longer be known.
            report = check_log(
                root,
                {(TOPIC, 0): expected},
                deterministic=trial == trials - 1,
                clock_ms=lambda: TS,
            )
            assert report.ok, f"seed={seed} after trial {trial}: {report.describe()}"
    print(f"seed={seed}: {counts}, {len(acked)} batches acknowledged")
    assert counts["kills"] >= trials * 0.8


@pytest.mark.parametrize("seed", [1])
def test_killed_idempotent_writers_never_write_a_batch_twice(
    tmp_path: os.PathLike[str], seed: int
) -> None:
    run_trials(os.path.join(tmp_path, "data"), CI_TRIALS, seed)


@pytest.mark.soak
@pytest.mark.parametrize("seed", [2])
def test_killed_idempotent_writers_never_write_a_batch_twice_soak(
    tmp_path: os.PathLike[str], seed: int
) -> None:
    run_trials(os.path.join(tmp_path, "data"), SOAK_TRIALS, seed)
