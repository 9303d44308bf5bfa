"""Family 1 (docs/reliability.md) through the cleaner: a writer subprocess appends keyed
batches to a compacted topic and runs the cleaner every few batches (roll, then a maintenance
pass), and is killed with SIGKILL at random moments, over and over, in one log directory. Kills
land in the middle of cleaning passes as well as appends.

After each kill the directory must open, and its log must hold, for every key, the latest
acknowledged record at its offset (or a later one from the batch the killed child had in
flight), every acknowledged record it holds as acknowledged, no record twice and offsets in
increasing order. The same directory reopened reads the same, and the next child appends on.

CI runs CI_TRIALS kills; `pytest -m soak` runs SOAK_TRIALS.
"""

from __future__ import annotations

import os
import random
import textwrap

import pytest

import eoslog
from tests.support import logtools
from tests.support.killharness import run_child

CI_TRIALS = 30
SOAK_TRIALS = 1_000
TOPIC = "compacted"
TS = 1_700_000_000_000
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": 2048,
    "min.cleanable.dirty.ratio": 0.01,
    "min.compaction.lag.ms": 0,
}

CHILD = textwrap.dedent(
    """
    import json, random, sys
    import eoslog
    from eoslog.record import codec

    root, trial, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)

    def say(**fields):
        print(json.dumps(fields), flush=True)

    broker = eoslog.open(root, durability="none", clock_ms=lambda: {ts}, background=False)
    log = broker.log({topic!r}, 0)
    say(opened=log.log_end_offset)
    for number in range(400):  # more than a kill usually lets it write: kills land mid-run
        records = [
            ("key%d" % rng.randrange(10), "%d:%d:%d" % (trial, number, index))
            for index in range(rng.randint(1, 4))
        ]
        builder = codec.BatchBuilder()
        for key, value in records:
            assert builder.append({ts}, key.encode(), value.encode())
        say(sending=records)
        info = log.append_batch(builder.build())
        say(acked=records, base=info.base_offset)
        if number % 8 == 7:
            log.roll()
            say(cleaning=True)
            broker.run_maintenance()
            say(cleaned=True)
    broker.close()
    """
).format(ts=TS, topic=TOPIC)


def read_log(root: str) -> list[tuple[int, str, str]]:
    with eoslog.open(root, durability="none", clock_ms=lambda: TS, background=False) as broker:
        records = logtools.read_all(broker.log(TOPIC, 0))
    return [
        (r.offset, bytes(r.key or b"").decode(), bytes(r.value or b"").decode()) for r in records
    ]


def consumed(root: str) -> list[tuple[int, str, str]]:
    """The log as a Consumer reads it (the client's fetch path, over the gaps cleaning left)."""
    with eoslog.open(root, durability="none", clock_ms=lambda: TS, background=False) as broker:
        consumer = broker.consumer({})
        consumer.assign([eoslog.TopicPartition(TOPIC, 0, 0)])
        rows = []
        while messages := consumer.consume(500, timeout=0):
            for message in messages:
                assert message.error() is None, message.error()
                key, value = bytes(message.key() or b""), bytes(message.value() or b"")
                rows.append((message.offset(), key.decode(), value.decode()))
        consumer.close()
    return rows


def check(
    rows: list[tuple[int, str, str]],
    acked: dict[int, tuple[str, str]],
    in_flight: list[tuple[str, str]],
    label: str,
) -> None:
    offsets = [offset for offset, _, _ in rows]
    assert offsets == sorted(set(offsets)), f"[{label}] offsets not increasing"
    values = [value for _, _, value in rows]
    assert len(values) == len(set(values)), f"[{label}] a record is there twice"
    landed = set(in_flight)
    last: dict[str, tuple[int, str]] = {}
    for offset, key, value in rows:
        if offset in acked:
            assert acked[offset] == (key, value), f"[{label}] offset {offset} changed"
        else:
            assert (key, value) in landed, f"[{label}] {offset} holds {(key, value)}, never sent"
        last[key] = (offset, value)
    latest: dict[str, tuple[int, str]] = {}
    for offset, (key, value) in sorted(acked.items()):
        latest[key] = (offset, value)
    for key, (offset, value) in latest.items():
        got = last.get(key)
        assert got is not None and got[0] >= offset, (
            f"[{label}] {key}'s latest acknowledged record {(offset, value)} is gone: {got}"
        )
        if got[0] == offset:
            assert got[1] == value, f"[{label}] {key} at {offset} reads {got[1]}"
        else:
            assert (key, got[1]) in landed, f"[{label}] {key} reads {got}, never acknowledged"


def run_trials(root: str, trials: int, seed: int) -> None:
    rng = random.Random(seed)
    print(f"seed={seed} trials={trials}")
    with eoslog.open(root, durability="none", clock_ms=lambda: TS, background=False) as broker:
        broker.create_topic(TOPIC, 1, TOPIC_CONFIG)
    acked: dict[int, tuple[str, str]] = {}
    counts = {"kills": 0, "finished": 0, "kills_while_cleaning": 0, "passes": 0}
    for trial in range(trials):
        kill_after = None if rng.random() < 0.03 else rng.uniform(0.0, 0.25)
        run = run_child(CHILD, [root, str(trial), str(rng.randrange(1 << 30))], rng, kill_after)
        counts["kills" if run.killed else "finished"] += 1
        in_flight: list[tuple[str, str]] = []
        cleaning = False
        for line in run.lines:
            if "sending" in line:
                in_flight = [tuple(pair) for pair in line["sending"]]
            elif "acked" in line:
                for index, (key, value) in enumerate(line["acked"]):
                    acked[line["base"] + index] = (key, value)
                in_flight = []
            elif "cleaning" in line:
                cleaning = True
            elif "cleaned" in line:
                cleaning = False
                counts["passes"] += 1
        counts["kills_while_cleaning"] += run.killed and cleaning
        label = f"seed={seed} trial={trial}"
        rows = read_log(root)
        check(rows, acked, in_flight, label)
        assert read_log(root) == rows, f"[{label}] a second open reads differently"
        # What landed of the in-flight batch is in the log now: later checks hold it to that.
        for offset, key, value in rows:
            if offset not in acked and (key, value) in set(in_flight):
                acked[offset] = (key, value)
    print(f"seed={seed}: {counts}, {len(acked)} records acknowledged")
    assert consumed(root) == read_log(root)
    assert counts["kills"] >= trials * 0.8
    assert counts["passes"] > 0 and counts["kills_while_cleaning"] > 0, counts


@pytest.mark.parametrize("seed", [1])
def test_writers_killed_while_cleaning_keep_each_keys_latest_acknowledged_record(
    tmp_path: os.PathLike[str], seed: int
) -> None:
    run_trials(os.path.join(tmp_path, "data"), CI_TRIALS, seed)


@pytest.mark.soak
@pytest.mark.parametrize("seed", [2])
def test_writers_killed_while_cleaning_soak(tmp_path: os.PathLike[str], seed: int) -> None:
    run_trials(os.path.join(tmp_path, "data"), SOAK_TRIALS, seed)
