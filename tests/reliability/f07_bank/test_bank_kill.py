"""Family 7 (docs/reliability.md): the bank invariant under kill -9. A child moves money between
three partitions of one topic, each transfer a transaction (a debit on one partition, the
credit on another, some aborted), while a reader thread in the same process sums the balance
over and over in read_committed snapshots (a consistent cut of the three partitions from
broker.transactions.stable_offsets, then every committed record below it) and reports every
sum. The child is SIGKILLed at random
moments, many times, in one directory. Every sum the reader saw, and the sum after every
reopen, must be zero; every transfer the child saw committed must be there, once.
"""

from __future__ import annotations

import os
import random
import textwrap

import pytest

import eoslog
from tests.support.killharness import run_child

TS = 1_700_000_000_000
TXN = "bank-3"
CI_TRIALS = 30
SOAK_TRIALS = 500

CHILD = textwrap.dedent(
    """
    import json, random, sys, threading
    import eoslog
    from eoslog.record import codec

    root, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    broker = eoslog.open(root, durability="commit", clock_ms=lambda: {ts}, background=False)
    if "accounts" not in broker.list_topics():
        broker.create_topic("accounts", 3, {{"segment.bytes": 4096}})
    coordinator = broker.transactions
    producer = coordinator.init_producer_id({txn!r}, 60000)
    stop = threading.Event()
    printing = threading.Lock()

    def say(**fields):
        with printing:  # two threads report: one whole line at a time
            print(json.dumps(fields), flush=True)

    def audit():
        # A read_committed snapshot: a consistent cut of the three partitions (no end
        # half-written across them), then every committed record below it.
        partitions = [("accounts", p) for p in range(3)]
        while not stop.is_set():
            cut = coordinator.stable_offsets(partitions)
            consumer = broker.consumer({{"auto.offset.reset": "earliest"}})
            consumer.assign([eoslog.TopicPartition(t, p, 0) for t, p in partitions])
            total = 0
            while messages := consumer.consume(1000, timeout=0):
                total += sum(
                    int(m.value()) for m in messages if m.offset() < cut[(m.topic(), m.partition())]
                )
            consumer.close()
            say(sum=total)
            stop.wait(0.005)

    reader = threading.Thread(target=audit, daemon=True)
    reader.start()
    for number in range(100000):
        tag = f"{{seed}}-{{number}}"
        source, target = rng.sample(range(3), 2)
        amount = rng.randint(1, 1000)
        commit = rng.random() > 0.3
        coordinator.add_partitions(
            {txn!r}, *producer, [("accounts", source), ("accounts", target)]
        )
        for partition, sign in ((source, -1), (target, 1)):
            builder = codec.BatchBuilder(
                producer_id=producer[0], producer_epoch=producer[1], base_sequence=0,
                is_transactional=True,
            )
            builder.append({ts}, tag.encode(), str(sign * amount).encode())
            broker.log("accounts", partition).append_batch(builder.build())
        producer = coordinator.end_transaction({txn!r}, *producer, commit)
        if commit:
            say(committed=tag)
    """
).format(ts=TS, txn=TXN)


def balance(root: str) -> tuple[int, list[str]]:
    with eoslog.open(root, background=False, clock_ms=lambda: TS) as broker:
        broker.transactions.init_producer_id(TXN, 60_000)  # aborts a transfer left open
        consumer = broker.consumer({"auto.offset.reset": "earliest"})
        consumer.assign([eoslog.TopicPartition("accounts", p, 0) for p in range(3)])
        total, tags = 0, []
        while messages := consumer.consume(1000, timeout=0):
            for message in messages:
                total += int(message.value())
                tags.append(message.key().decode())
        consumer.close()
    return total, tags


def run_bank(root: str, trials: int, seed: int) -> None:
    rng = random.Random(seed)
    print(f"seed={seed} trials={trials}")
    committed: set[str] = set()
    sums_seen = kills = 0
    for trial in range(trials):
        child = run_child(CHILD, [root, str(rng.randrange(1 << 30))], rng, rng.uniform(0.05, 0.4))
        kills += child.killed
        for line in child.lines:
            if "sum" in line:
                sums_seen += 1
                assert line["sum"] == 0, f"seed={seed} trial {trial}: a reader saw {line}"
            elif "committed" in line:
                committed.add(line["committed"])
        total, tags = balance(root)
        assert total == 0, f"seed={seed} trial {trial}: balance {total} after the kill"
        assert len(tags) == len(set(tags)) * 2, f"seed={seed} trial {trial}: a half transfer"
        missing = committed - set(tags)
        assert not missing, f"seed={seed} trial {trial}: committed transfers lost: {missing}"
    print(f"seed={seed}: {kills} kills, {len(committed)} committed, {sums_seen} sums read")
    assert kills == trials and sums_seen > trials


@pytest.mark.parametrize("seed", [7])
def test_the_bank_balance_is_zero_in_every_read_committed_view_under_kill_9(
    tmp_path: os.PathLike[str], seed: int
) -> None:
    run_bank(os.path.join(tmp_path, "data"), CI_TRIALS, seed)


@pytest.mark.soak
@pytest.mark.parametrize("seed", [8])
def test_the_bank_balance_is_zero_in_every_read_committed_view_under_kill_9_soak(
    tmp_path: os.PathLike[str], seed: int
) -> None:
    run_bank(os.path.join(tmp_path, "data"), SOAK_TRIALS, seed)
