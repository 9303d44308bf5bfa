"""Family 2 (docs/reliability.md): named crash points × the n-th hit (n <= 5). A child process runs
bank transfers as transactions through the coordinator (debit on one partition, credit on
another, about a third aborted) with EOSLOG_CRASH_AT=<point>:<n>, and is killed there by
SIGKILL. The parent reopens the directory and checks, under read_committed: every
transaction the child saw committed is visible whole, no aborted or unfinished one is
visible at all, each transaction is all-or-nothing across the two partitions, the balance
sums to zero, and once the transactional id is re-initialized no transaction holds the LSO.
"""

from __future__ import annotations

import os
import random
import textwrap

import pytest

import eoslog
from eoslog.crashpoints import ENV, POINTS
from tests.support.killharness import run_child

TS = 1_700_000_000_000
TXN = "bank"
HITS_MAX = 5
TRANSFERS = 12

CHILD = textwrap.dedent(
    """
    import json, random, sys
    import eoslog
    from eoslog.coordinator.group_coordinator import ConsumerGroupMetadata, OffsetToCommit
    from eoslog.record import codec

    root, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    broker = eoslog.open(root, durability="commit", clock_ms=lambda: {ts}, background=False)
    for topic in ("debits", "credits"):
        if topic not in broker.list_topics():
            broker.create_topic(topic, 1, {{"segment.bytes": 512}})
    if "audit" not in broker.list_topics():
        # Plain writes that retention keeps trimming, so the retention point is met too.
        broker.create_topic("audit", 1, {{"segment.bytes": 256, "retention.bytes": 256}})
    coordinator = broker.transactions
    producer = coordinator.init_producer_id({txn!r}, 60000)
    for number in range({transfers}):
        tag = f"{{seed}}-{{number}}"
        amount = rng.randint(1, 100)
        commit = rng.random() > 0.33
        coordinator.add_partitions({txn!r}, *producer, [("debits", 0), ("credits", 0)])
        for topic, sign in (("debits", -1), ("credits", 1)):
            builder = codec.BatchBuilder(
                producer_id=producer[0], producer_epoch=producer[1], base_sequence=0,
                is_transactional=True,
            )
            builder.append({ts}, tag.encode(), str(sign * amount).encode())
            broker.log(topic, 0).append_batch(builder.build())
        print(json.dumps({{"ending": tag, "commit": commit}}), flush=True)
        producer = coordinator.end_transaction({txn!r}, *producer, commit)
        print(json.dumps({{"ended": tag, "commit": commit}}), flush=True)
        broker.groups.commit_offsets(
            ConsumerGroupMetadata("bank-audit"), [OffsetToCommit("debits", 0, number + 1)]
        )
        print(json.dumps({{"offset": number + 1}}), flush=True)
        audit = codec.BatchBuilder()
        audit.append({ts}, None, tag.encode() * 8)
        broker.log("audit", 0).append_batch(audit.build())
        broker.run_maintenance()
    broker.close()
    """
).format(ts=TS, txn=TXN, transfers=TRANSFERS)


def committed_view(broker: eoslog.Broker, topic: str) -> dict[str, int]:
    consumer = broker.consumer({"auto.offset.reset": "earliest"})
    consumer.assign([eoslog.TopicPartition(topic, 0, 0)])
    seen: dict[str, int] = {}
    while messages := consumer.consume(1000, timeout=0):
        for message in messages:
            tag = message.key().decode()
            assert tag not in seen, f"{topic}: {tag} twice"
            seen[tag] = int(message.value())
    consumer.close()
    return seen


def check(root: str, committed: set[str], aborted: set[str], offset_acked: int, label: str) -> None:
    with eoslog.open(root, background=False, clock_ms=lambda: TS) as broker:
        stored = broker.groups.fetch_offsets("bank-audit", [("debits", 0)], require_stable=True)
        offset = stored[("debits", 0)]
        found = 0 if offset is None else offset.offset
        assert found >= offset_acked, f"{label}: acknowledged offset {offset_acked} lost"
        # Re-initializing the id aborts whatever transaction the kill left open.
        broker.transactions.init_producer_id(TXN, 60_000)
        for topic in ("debits", "credits"):
            log = broker.log(topic, 0)
            assert log.last_stable_offset == log.log_end_offset, f"{label}: {topic} LSO held"
        debits, credits = committed_view(broker, "debits"), committed_view(broker, "credits")
    assert set(debits) == set(credits), f"{label}: not all-or-nothing: {debits} {credits}"
    assert committed <= set(debits), f"{label}: committed lost: {committed - set(debits)}"
    assert not aborted & set(debits), f"{label}: aborted visible: {aborted & set(debits)}"
    assert all(debits[tag] == -credits[tag] for tag in debits), f"{label}: amounts differ"
    assert sum(debits.values()) + sum(credits.values()) == 0


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_any_crash_point_keeps_transactions_all_or_nothing(
    tmp_path: os.PathLike[str], point: str
) -> None:
    rng = random.Random(point)
    killed = 0
    for hit in range(1, HITS_MAX + 1):
        root = os.path.join(tmp_path, f"hit-{hit}")
        committed: set[str] = set()
        aborted: set[str] = set()
        offset_acked = 0
        for run in range(2):  # a crashed run, then a clean one continuing on its files
            os.environ[ENV] = f"{point}:{hit}" if run == 0 else ""
            try:
                child = run_child(CHILD, [root, str(rng.randrange(1 << 30))], rng, None)
            finally:
                os.environ.pop(ENV, None)
            killed += child.killed
            for line in child.lines:
                offset_acked = max(offset_acked, line.get("offset", 0))
                if "ended" in line:
                    (committed if line["commit"] else aborted).add(line["ended"])
                elif "ending" in line and not line["commit"]:
                    aborted.add(line["ending"])  # an abort the kill interrupted stays aborted
            check(root, committed, aborted, offset_acked, f"{point}:{hit} run {run}")
    print(f"\n{point}: {killed} of {HITS_MAX} runs killed at the point")
    assert killed == HITS_MAX, f"{point} was hit fewer than {HITS_MAX} times"


def test_an_unknown_crash_point_is_refused(tmp_path: os.PathLike[str]) -> None:
    rng = random.Random(0)
    os.environ[ENV] = "nowhere:1"
    try:
        with pytest.raises(AssertionError, match="expected <point>:<n>"):
            run_child("import eoslog.crashpoints", [], rng, None)
    finally:
        os.environ.pop(ENV, None)
