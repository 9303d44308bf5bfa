"""Which committed offsets have expired (offsets.retention.minutes), by Kafka's rule
(GroupMetadata.removeExpiredOffsets; docs/coordinator.md §6.5):

| the group                           | an offset expires once retention has passed      |
|-------------------------------------|--------------------------------------------------|
| Empty (its last member left)        | since the group became Empty                     |
| Stable, consumer protocol           | since its commit, unless a member subscribes to its topic |
| none here (standalone, or reopened) | since its commit and since the open              |
| rebalancing, or another protocol    | never                                            |

In every case an offset a transaction holds pending for the partition is kept (it appears or
goes with the transaction's marker), and an offset written with an explicit expire timestamp
(value version 1, Kafka before 2.1) expires at that timestamp instead. A group whose offsets
have all expired, with no members and no transaction holding offsets, is removed (Kafka: Dead).

eoslog keeps membership in memory only, so after a reopen it cannot tell a standalone group
from one whose members were there until the process ended; it keeps such offsets at least
the retention past the open, later than Kafka would drop a standalone group's, never earlier
than it would drop a consumer group's.

Pure: reads the group and the store, changes nothing. The group coordinator calls it under
its lock.
"""

from __future__ import annotations

from eoslog.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from eoslog.coordinator.group_membership import Group, GroupState
from eoslog.coordinator.offset_store import OffsetStore, Partition, StoredOffset
from eoslog.coordinator.offsets_log import NO_EXPIRE_TIMESTAMP


def expired_partitions(
    group_id: str,
    group: Group | None,
    store: OffsetStore,
    *,
    now_ms: int,
    retention_ms: int,
    opened_ms: int,
) -> list[Partition]:
    """The group's committed partitions whose offsets have expired, sorted (module doc)."""
    subscribed: frozenset[str] = frozenset()
    empty_since_ms: int | None = None
    if group is None:
        floor_ms = opened_ms
    elif not group.members and group.state is GroupState.EMPTY:
        floor_ms, empty_since_ms = -1, group.empty_since_ms
    elif group.state is GroupState.STABLE and group.protocol_type == CONSUMER_PROTOCOL_TYPE:
        floor_ms = -1
        protocol = group.protocol or ""
        subscribed = frozenset().union(*(m.topics_for(protocol) for m in group.members.values()))
    else:
        return []
    expired = []
    for partition, stored in store.committed_partitions(group_id).items():
        if partition[0] in subscribed or store.is_unstable(group_id, partition):
            continue
        base_ms = stored.commit_timestamp if empty_since_ms is None else empty_since_ms
        if _expired(stored, max(base_ms, floor_ms), now_ms, retention_ms):
            expired.append(partition)
    return sorted(expired)


def _expired(stored: StoredOffset, base_ms: int, now_ms: int, retention_ms: int) -> bool:
    if stored.expire_timestamp != NO_EXPIRE_TIMESTAMP:
        return now_ms >= stored.expire_timestamp
    return now_ms - base_ms >= retention_ms


def group_removable(
    group_id: str, group: Group | None, store: OffsetStore, expired: list[Partition]
) -> bool:
    """Whether the group has nothing left once its `expired` offsets are gone: no committed
    offset, no transaction holding one, no member (Kafka moves such a group to Dead and
    writes its tombstone)."""
    return (
        set(store.committed_partitions(group_id)) <= set(expired)
        and not store.pending_producers(group_id)
        and (group is None or (not group.members and group.state is GroupState.EMPTY))
    )
