"""The committed and pending offsets of every group, as a replay of `__consumer_offsets`
builds them (docs/coordinator.md §6.1, Kafka's OffsetMetadataManager): one state machine fed in
log order at open and by the group coordinator as it appends.

* A non-transactional OffsetCommit record sets the committed offset.
* A transactional one (batch producer id >= 0) is held pending under its producer id and is
  invisible to committed(); a partition with any pending entry is unstable (§6.2).
* A COMMIT marker for the producer id moves its pending entries into the committed offsets,
  each only if its record sits later in `__consumer_offsets` than the entry it would replace
  (so a plain commit written after it wins: log order decides, as in Kafka); ABORT drops them.
  A marker for a producer with nothing pending is ignored.
* A tombstone (null value) deletes the committed offset and that partition's pending entries.

Thread safety: none of its own; the group coordinator calls it under its lock.
"""

from __future__ import annotations

from dataclasses import dataclass

from eoslog.coordinator.offsets_log import OffsetCommitKey, OffsetCommitValue

Partition = tuple[str, int]  # (topic, partition)


@dataclass(frozen=True, slots=True)
class StoredOffset:
    """A committed (or pending) offset and where its record sits in `__consumer_offsets`."""

    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int
    record_offset: int
    # Kafka's expireTimestamp (value version 1, written by Kafka before 2.1); -1: none.
    expire_timestamp: int = -1


class OffsetStore:
    """See the module docstring."""

    def __init__(self) -> None:
        self._committed: dict[str, dict[Partition, StoredOffset]] = {}
        # producer id -> group -> partition -> pending offset
        self._pending: dict[int, dict[str, dict[Partition, StoredOffset]]] = {}
        # group -> producer ids with pending offsets for it
        self._open_by_group: dict[str, set[int]] = {}

    # --- replay ----------------------------------------------------------------------------

    def replay_offset(
        self,
        producer_id: int,
        transactional: bool,
        key: OffsetCommitKey,
        value: OffsetCommitValue | None,
        record_offset: int,
    ) -> None:
        """Apply one OffsetCommit record found at `record_offset`."""
        partition = (key.topic, key.partition)
        if value is None:
            self._delete(key.group, partition)
            return
        stored = StoredOffset(
            value.offset,
            value.metadata,
            value.commit_timestamp,
            value.leader_epoch,
            record_offset,
            value.expire_timestamp,
        )
        if transactional and producer_id >= 0:
            self._pending.setdefault(producer_id, {}).setdefault(key.group, {})[partition] = stored
            self._open_by_group.setdefault(key.group, set()).add(producer_id)
        else:
            self._put_if_newer(key.group, partition, stored)

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        """Apply a COMMIT or ABORT marker of `producer_id`."""
        pending = self._pending.pop(producer_id, None)
        if pending is None:
            return
        for group, offsets in pending.items():
            producers = self._open_by_group.get(group)
            if producers is not None:
                producers.discard(producer_id)
                if not producers:
                    del self._open_by_group[group]
            if commit:
                for partition, stored in offsets.items():
                    self._put_if_newer(group, partition, stored)

    # --- reading ---------------------------------------------------------------------------

    def committed(self, group: str, partition: Partition) -> StoredOffset | None:
        return self._committed.get(group, {}).get(partition)

    def groups(self) -> set[str]:
        """The groups with a committed offset."""
        return {group for group, offsets in self._committed.items() if offsets}

    def committed_partitions(self, group: str) -> dict[Partition, StoredOffset]:
        return dict(self._committed.get(group, {}))

    def is_unstable(self, group: str, partition: Partition) -> bool:
        """Whether an open transaction holds an offset for the partition (§6.2)."""
        return any(
            partition in self._pending[producer_id].get(group, {})
            for producer_id in self._open_by_group.get(group, ())
        )

    def pending_producers(self, group: str) -> frozenset[int]:
        return frozenset(self._open_by_group.get(group, ()))

    # --- internals -------------------------------------------------------------------------

    def _put_if_newer(self, group: str, partition: Partition, stored: StoredOffset) -> None:
        offsets = self._committed.setdefault(group, {})
        existing = offsets.get(partition)
        if existing is None or existing.record_offset < stored.record_offset:
            offsets[partition] = stored

    def _delete(self, group: str, partition: Partition) -> None:
        self._committed.get(group, {}).pop(partition, None)
        for producer_id in self._open_by_group.get(group, ()):
            self._pending[producer_id].get(group, {}).pop(partition, None)
