"""The coordinators load the same state from their internal topics once the cleaner has
compacted them (issue 14): superseded records gone (gaps in the offsets, inside and between
batches), aborted offsets gone, and past the delete horizon tombstones and spent markers gone
too. The compacted logs are built from the full ones (tests/support/compaction.py) and replayed
next to them."""

from __future__ import annotations

from typing import Any

import pytest

import eoslog
from eoslog import ConsumerGroupMetadata, TopicPartition
from eoslog.coordinator import transaction_replay
from eoslog.coordinator.group_coordinator import GroupCoordinator, OffsetToCommit
from tests.support import compaction, logtools

DAY_MS = 24 * 60 * 60 * 1000
GROUPS = ("g0", "g1", "g2")


def transactions(broker: eoslog.Broker, ids: list[str], rounds: int, offset: int) -> None:
    """`rounds` transactions per id, each a record and offsets for one of GROUPS; every
    third aborted."""
    for number, transactional_id in enumerate(ids):
        producer = broker.producer({"transactional.id": transactional_id})
        producer.init_transactions()
        for round_number in range(rounds):
            producer.begin_transaction()
            producer.produce("in", b"v", partition=number % 2)
            group = GROUPS[(number + round_number) % len(GROUPS)]
            producer.send_offsets_to_transaction(
                [TopicPartition("in", number % 2, offset + round_number)],
                ConsumerGroupMetadata(group),
            )
            if round_number % 3 == 2:
                producer.abort_transaction()
            else:
                producer.commit_transaction()
        producer.close()


def plain_commits(broker: eoslog.Broker, group: str, offsets: range) -> None:
    for offset in offsets:
        broker.groups.commit_offsets(
            ConsumerGroupMetadata(group),
            [OffsetToCommit("in", 0, offset), OffsetToCommit("in", 1, offset + 1)],
        )


def history(broker: eoslog.Broker, clock: logtools.Clock) -> eoslog.Producer:
    """Transactions and commits; expired ids and offsets (tombstones); a deleted group; more
    of the same; a transaction left open with offsets pending. Returns its producer."""
    broker.create_topic("in", 2)
    transactions(broker, ["t0", "t1", "t2", "t3"], 4, 0)
    plain_commits(broker, "plain", range(5))
    plain_commits(broker, "gone", range(3))
    clock.advance(8 * DAY_MS)
    broker.run_transaction_maintenance()  # every id and offset so far expires
    transactions(broker, ["t0", "t1", "t4"], 5, 100)
    plain_commits(broker, "plain", range(10, 14))
    plain_commits(broker, "deleted", range(2))
    broker.groups.delete_group("deleted")
    open_one = broker.producer({"transactional.id": "open"})
    open_one.init_transactions()
    open_one.begin_transaction()
    open_one.produce("in", b"pending", partition=0)
    open_one.flush()  # its partition is in the transaction: nothing more is written later
    open_one.send_offsets_to_transaction(
        [TopicPartition("in", 0, 999)], ConsumerGroupMetadata("g0")
    )
    plain_commits(broker, "plain", range(20, 22))  # after the open transaction's records
    return open_one


def transaction_state(logs: list[Any]) -> dict[str, object]:
    replayed = transaction_replay.replay(logs, set())
    return {tid: meta.current() for tid, meta in replayed.metadata.items()}


def group_state(broker: eoslog.Broker, logs: list[Any]) -> dict[str, object]:
    groups = GroupCoordinator(
        offsets_logs=logs,
        log_of=broker.log,
        partition_counts=broker.partition_counts,
        clock_ms=broker.clock_ms,
        durability="none",
    )
    groups.load()
    return {
        group: (
            {p: (s.offset, s.metadata, s.commit_timestamp) for p, s in committed.items()},
            groups.pending_producers(group),
            groups.fetch_offsets_marking_unstable(group, None)[1],
        )
        for group in groups.group_ids()
        if (committed := groups.committed_partitions(group)) is not None
    }


@pytest.mark.parametrize("past_horizon", [False, True], ids=["tombstones-kept", "past-horizon"])
def test_the_coordinators_load_the_same_state_from_compacted_internal_topics(
    root: str, broker: eoslog.Broker, clock: logtools.Clock, past_horizon: bool
) -> None:
    open_one = history(broker, clock)
    state_log = broker.log("__transaction_state", 0)
    offsets_log = broker.log("__consumer_offsets", 0)
    full, compacted = [], []
    for log in (state_log, offsets_log):
        batches = compaction.whole_batches(log)
        kept = compaction.compacted(batches, log.last_stable_offset, past_horizon=past_horizon)
        assert len(kept) < len(batches), "the history leaves records superseded"
        full.append(compaction.CompactedLog(log, [batch for _, batch, _ in batches]))
        compacted.append(compaction.CompactedLog(log, kept))
    full_transactions = transaction_state([full[0]])
    assert full_transactions == transaction_state([state_log])
    assert set(full_transactions) == {"t0", "t1", "t4", "open"}
    assert transaction_state([compacted[0]]) == full_transactions
    full_groups = group_state(broker, [full[1]])
    assert full_groups == group_state(broker, [offsets_log])
    assert set(full_groups) == {"g0", "g1", "g2", "plain"}
    assert full_groups["g0"][1], "the open transaction holds offsets pending"
    assert group_state(broker, [compacted[1]]) == full_groups
    open_one.abort_transaction()
    open_one.close()
