"""Committed offsets expire after offsets.retention.minutes by Kafka's rule
(coordinator/offset_expiry.py, docs/coordinator.md §6.5): each is tombstoned in
`__consumer_offsets`, and a group left with nothing is removed with a group tombstone, so a
reopen (and a compacted log) no longer has them."""

from __future__ import annotations

import eoslog
from eoslog.coordinator.group_coordinator import ConsumerGroupMetadata, OffsetToCommit
from eoslog.coordinator.offsets_log import GroupMetadataKey, OffsetCommitKey, decode_key
from tests.support import logtools

GROUP = "expiring"
RETENTION_MS = 7 * 24 * 60 * 60 * 1000  # offsets.retention.minutes' default
CHECK_MS = 600_000  # offsets.retention.check.interval.ms' default
DAY_MS = 24 * 60 * 60 * 1000


def commit(broker: eoslog.Broker, metadata: ConsumerGroupMetadata, topic: str, offset: int) -> None:
    broker.groups.commit_offsets(metadata, [OffsetToCommit(topic, 0, offset)])


def committed(broker: eoslog.Broker, topic: str) -> int | None:
    found = broker.groups.fetch_offsets(GROUP, [(topic, 0)], require_stable=False)[(topic, 0)]
    return None if found is None else found.offset


def tombstoned_keys(broker: eoslog.Broker) -> list[object]:
    """The keys of the null-valued records in the group's `__consumer_offsets` partition."""
    log = broker.log(*broker.groups.offsets_partition(GROUP))
    return [
        decode_key(record.key)
        for record in logtools.read_all(log)
        if record.value is None and record.key is not None
    ]


def test_a_standalone_commit_expires_with_a_tombstone_once_its_retention_passed(
    root: str, broker: eoslog.Broker, clock: logtools.Clock
) -> None:
    commit(broker, ConsumerGroupMetadata(GROUP), "a", 5)
    clock.advance(RETENTION_MS - 1)
    broker.run_transaction_maintenance()
    assert committed(broker, "a") == 5
    clock.advance(CHECK_MS - 1)
    broker.run_transaction_maintenance()
    assert committed(broker, "a") == 5  # not checked again before the check interval
    clock.advance(1)
    broker.run_transaction_maintenance()
    assert committed(broker, "a") is None
    assert GROUP not in broker.groups.group_ids()
    assert tombstoned_keys(broker) == [OffsetCommitKey(GROUP, "a", 0), GroupMetadataKey(GROUP)]
    broker.close()
    with eoslog.open(root, background=False, clock_ms=clock) as again:
        assert committed(again, "a") is None


def test_a_stable_group_keeps_its_subscribed_topics_and_an_empty_one_keeps_all_for_retention(
    broker: eoslog.Broker, clock: logtools.Clock
) -> None:
    groups = broker.groups
    joined = groups.join_group(
        GROUP, "", topics=["a"], strategies=("range",), rebalance_timeout_ms=30 * DAY_MS
    )
    member = ConsumerGroupMetadata(GROUP, joined.generation_id, joined.member_id)
    commit(broker, member, "a", 3)
    commit(broker, member, "b", 4)
    clock.advance(RETENTION_MS)
    groups.heartbeat(GROUP, joined.member_id, joined.generation_id)
    broker.run_transaction_maintenance()
    assert (committed(broker, "a"), committed(broker, "b")) == (3, None)
    groups.leave_group(GROUP, joined.member_id)
    clock.advance(RETENTION_MS - 1)
    broker.run_transaction_maintenance()
    assert committed(broker, "a") == 3
    clock.advance(CHECK_MS)
    broker.run_transaction_maintenance()
    assert committed(broker, "a") is None
    assert GROUP not in groups.group_ids()


def test_an_offset_a_transaction_holds_pending_outlives_its_retention(
    broker: eoslog.Broker, clock: logtools.Clock
) -> None:
    commit(broker, ConsumerGroupMetadata(GROUP), "a", 1)
    producer = broker.producer({"transactional.id": "pending", "transaction.timeout.ms": 60_000})
    producer.init_transactions()
    producer.begin_transaction()
    producer.send_offsets_to_transaction(
        [eoslog.TopicPartition("a", 0, 2)], ConsumerGroupMetadata(GROUP)
    )
    clock.advance(2 * RETENTION_MS)
    assert broker.groups.expire_offsets() == 0
    assert committed(broker, "a") == 1
    producer.commit_transaction()
    assert committed(broker, "a") == 2
    producer.close()


def test_after_a_reopen_offsets_are_kept_a_retention_past_the_open(
    root: str, broker: eoslog.Broker, clock: logtools.Clock
) -> None:
    """Membership is not persisted: a group whose member was there until the process ended
    looks standalone after a reopen, so its offsets get a full retention from the open."""
    commit(broker, ConsumerGroupMetadata(GROUP), "a", 7)
    broker.close()
    clock.advance(2 * RETENTION_MS)
    with eoslog.open(root, background=False, clock_ms=clock) as again:
        clock.advance(CHECK_MS)
        again.run_transaction_maintenance()
        assert committed(again, "a") == 7
        clock.advance(RETENTION_MS)
        again.run_transaction_maintenance()
        assert committed(again, "a") is None


def test_deleting_a_group_tombstones_its_offsets_and_its_group_metadata(
    broker: eoslog.Broker,
) -> None:
    commit(broker, ConsumerGroupMetadata(GROUP), "b", 9)
    broker.groups.delete_group(GROUP)
    assert tombstoned_keys(broker) == [OffsetCommitKey(GROUP, "b", 0), GroupMetadataKey(GROUP)]
