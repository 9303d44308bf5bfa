"""Regression: a read_committed Consumer reading while transactions are written, in a log
reopened several times (so older segments are mapped, the active one grows), never delivers
a record twice in one pass over the partitions.

The zero-copy consume() path of the perf-consume branch did (found by the bank test under
kill -9, then reproduced in process: one pass returned 9,837 records of which 1,731 were
distinct); the merge was reverted and this test guards the next attempt."""

from __future__ import annotations

import os
import random
import threading

import pytest

import eoslog
from eoslog.record import codec

TS = 1_700_000_000_000
REOPENS = 5
TRANSFERS = 300
# A pass reads at most a few thousand records: far longer than this means the reader is stuck.
PASS_DEADLINE_S = 120


@pytest.mark.parametrize("seed", [7, 8])
def test_a_concurrent_read_committed_pass_never_repeats_a_record(
    tmp_path: os.PathLike[str], seed: int
) -> None:
    root = os.path.join(tmp_path, "data")
    rng = random.Random(seed)
    problems: list[str] = []
    committed = 0  # transfers committed so far, two records each
    for run in range(REOPENS):
        broker = eoslog.open(root, durability="commit", clock_ms=lambda: TS, background=False)
        if run == 0:
            broker.create_topic("accounts", 3, {"segment.bytes": 4096})
        coordinator = broker.transactions
        producer = coordinator.init_producer_id("bank", 60_000)
        stop = threading.Event()
        passes: list[int] = []  # records seen by each pass the reader completed

        def one_pass(broker: eoslog.Broker = broker, run: int = run) -> list[tuple[int, int]]:
            consumer = broker.consumer({"auto.offset.reset": "earliest"})
            consumer.assign([eoslog.TopicPartition("accounts", p, 0) for p in range(3)])
            seen: list[tuple[int, int]] = []
            while messages := consumer.consume(1000, timeout=0):
                seen.extend((m.partition(), m.offset()) for m in messages)
                if len(seen) > 100_000:
                    break
            consumer.close()
            if len(seen) != len(set(seen)):
                problems.append(f"run {run}: {len(seen)} records, {len(set(seen))} distinct")
            return seen

        first_pass = threading.Event()

        def audit(
            stop: threading.Event = stop,
            first_pass: threading.Event = first_pass,
            passes: list[int] = passes,
        ) -> None:
            while not stop.is_set() and not problems:
                passes.append(len(one_pass()))
                first_pass.set()

        reader = threading.Thread(target=audit)
        reader.start()
        try:
            for number in range(TRANSFERS):
                source, target = rng.sample(range(3), 2)
                coordinator.add_partitions(
                    "bank", *producer, [("accounts", source), ("accounts", target)]
                )
                for partition, sign in ((source, -1), (target, 1)):
                    builder = codec.BatchBuilder(
                        producer_id=producer[0],
                        producer_epoch=producer[1],
                        base_sequence=0,
                        is_transactional=True,
                    )
                    builder.append(TS, b"%d-%d" % (run, number), b"%d" % (sign * 10))
                    broker.log("accounts", partition).append_batch(builder.build())
                commit = rng.random() > 0.3
                producer = coordinator.end_transaction("bank", *producer, commit)
                committed += commit
                if number == TRANSFERS // 2:
                    # Half the transfers are written: the reader must have finished a pass
                    # concurrently before the rest are (a test that never reads proves nothing).
                    assert first_pass.wait(PASS_DEADLINE_S), f"seed={seed}: no pass finished"
        finally:
            stop.set()
            reader.join()
        try:
            assert not problems, f"seed={seed}: {problems[0]}"
            assert passes, f"seed={seed}: run {run}: the reader completed no pass"
            # After the writes, one pass sees every committed record exactly once.
            assert len(one_pass()) == 2 * committed, f"seed={seed}: run {run}"
        finally:
            broker.close()
