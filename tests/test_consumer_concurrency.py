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


@pytest.mark.parametrize("seed", [7, 8])
def test_a_concurrent_read_committed_pass_never_repeats_a_record(
    tmp_path: os.PathLike[str], seed: int
) -> None:
    root = os.path.join(tmp_path, "data")
    rng = random.Random(seed)
    problems: list[str] = []
    for run in range(REOPENS):
        broker = eoslog.open(root, durability="commit", clock_ms=lambda: TS, background=False)
        if run == 0:
            broker.create_topic("accounts", 3, {"segment.bytes": 4096})
        coordinator = broker.transactions
        producer = coordinator.init_producer_id("bank", 60_000)
        stop = threading.Event()

        def audit(
            broker: eoslog.Broker = broker, stop: threading.Event = stop, run: int = run
        ) -> None:
            while not stop.is_set():
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
                    stop.set()

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
                producer = coordinator.end_transaction("bank", *producer, rng.random() > 0.3)
        finally:
            stop.set()
            reader.join()
            broker.close()
        assert not problems, f"seed={seed}: {problems[0]}"
