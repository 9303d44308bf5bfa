"""The consumer's offset store, as librdkafka keeps it (docs/api.md "Consumer"): for each
assigned partition, the offset its next commit() without arguments, or auto-commit, commits.

With enable.auto.offset.store (the default) the consumer stores, for each partition it
delivered from, its position once the records are taken: the last record's offset + 1, or
past the control and aborted batches that follow it (librdkafka's too: after a transaction's
records, a commit goes past its commit marker). A position moved by seek() or assign() alone
stores nothing: the store follows what the application was given. Without it, only
store_offsets() stores. A stored offset belongs to the assignment: it goes with its partition.

commit() without arguments and auto-commit commit the stored offsets that moved since this
consumer last committed the partition (the offset it committed is kept beside the stored one).

The offsets live on the fetcher's AssignedPartitions (stored, stored_metadata, committed);
this module holds the rules. Thread safety: used from the consumer's thread only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from eoslog.client.assignment import Assignment, PartitionKey
from eoslog.client.fetcher import AssignedPartition
from eoslog.client.message import Message, TopicPartition, topic_partitions
from eoslog.coordinator.group_coordinator import OffsetToCommit
from eoslog.errors import KafkaError, KafkaException


def store_delivered(assigned: AssignedPartition, position_before: int, delivered: bool) -> None:
    """Auto-store after a read of `assigned` that started at position_before: its position,
    when the read delivered records, or when it only moved past control or aborted batches
    from a position already stored."""
    position = assigned.current_position()
    if position < 0 or position == assigned.stored:
        return
    if delivered or (position_before >= 0 and assigned.stored == position_before):
        assigned.stored = position
        assigned.stored_metadata = None


def store(
    assignment: Assignment,
    exists: Callable[[TopicPartition], bool],
    partitions: Sequence[TopicPartition],
) -> None:
    """store_offsets(): each partition's offset (and metadata) becomes its stored offset; a
    logical (negative) one clears it. As librdkafka's rd_kafka_offsets_store, the partitions
    that can be stored are, and only when none could does it raise, with the last error:
    _UNKNOWN_PARTITION for a partition the broker does not have, _STATE for one not assigned
    (a logical offset for it is accepted and changes nothing)."""
    last_error: KafkaError | None = None
    stored = 0
    for tp in partitions:
        assigned = assignment.get(tp.topic, tp.partition)
        if assigned is not None:
            assigned.stored = tp.offset
            assigned.stored_metadata = tp.metadata
            stored += 1
        elif not exists(tp):
            last_error = KafkaError(
                KafkaError._UNKNOWN_PARTITION,
                f"StoreOffsets failed: {tp.topic} [{tp.partition}] is unknown",
            )
        elif tp.offset < 0:
            stored += 1
        else:
            last_error = KafkaError(
                KafkaError._STATE,
                f"StoreOffsets failed: {tp.topic} [{tp.partition}] is not assigned",
            )
    if last_error is not None and not stored:
        raise KafkaException(last_error)


def to_commit(
    assignment: Assignment, keys: Iterable[PartitionKey] | None = None
) -> tuple[list[OffsetToCommit], list[TopicPartition]]:
    """The stored offsets of the assigned partitions (only those of `keys` when given): those
    that moved since this consumer last committed them, to commit, and all of them, as
    commit() reports them."""
    chosen: Iterable[AssignedPartition] = assignment.partitions.values()
    if keys is not None:
        chosen = [assignment.partitions[key] for key in keys]
    moved: list[OffsetToCommit] = []
    stored: list[TopicPartition] = []
    for assigned in chosen:
        if assigned.stored < 0:
            continue
        metadata = assigned.stored_metadata
        stored.append(TopicPartition(assigned.topic, assigned.partition, assigned.stored, metadata))
        if assigned.stored != assigned.committed:
            moved.append(
                OffsetToCommit(assigned.topic, assigned.partition, assigned.stored, metadata or "")
            )
    return moved, stored


def store_request(message: object, offsets: object, *, automatic: bool) -> list[TopicPartition]:
    """What store_offsets(message, offsets) asks to store, checked as librdkafka and
    confluent check it: ValueError unless exactly one is given, TypeError for a wrong type,
    KafkaException _INVALID_ARG while the store is automatic (enable.auto.offset.store)."""
    message, offsets = _message_or_offsets(message, offsets)
    if message is not None:
        wanted = [_after(message)]
    elif offsets is not None:
        wanted = offsets
    else:
        raise ValueError("expected either message or offsets")
    if automatic:
        raise KafkaException(
            KafkaError(
                KafkaError._INVALID_ARG, "StoreOffsets failed: enable.auto.offset.store is true"
            )
        )
    return wanted


def _after(message: Message) -> TopicPartition:
    """The offset after `message`, what storing or committing it means. KafkaException
    _INVALID_ARG for an error message without an offset (offset() None)."""
    offset = message.offset()
    if offset is None:
        raise KafkaException(
            KafkaError(KafkaError._INVALID_ARG, "the message has no offset to store or commit")
        )
    return TopicPartition(message.topic(), message.partition(), offset + 1)


def commit_request(
    assignment: Assignment, message: object, offsets: object
) -> tuple[list[OffsetToCommit], list[TopicPartition]]:
    """What commit(message, offsets) writes and what it reports: the message's offset + 1,
    or the offsets as given, or by default to_commit()'s answer. ValueError when both are
    given, TypeError for a wrong type."""
    message, offsets = _message_or_offsets(message, offsets)
    if message is not None:
        given = [_after(message)]
    elif offsets is not None:
        given = list(offsets)
    else:
        return to_commit(assignment)
    writes = [OffsetToCommit(tp.topic, tp.partition, tp.offset, tp.metadata or "") for tp in given]
    return writes, given


def committed(assignment: Assignment, offsets: Iterable[OffsetToCommit]) -> None:
    """Note a successful commit of `offsets` on the partitions that are assigned."""
    for item in offsets:
        assigned = assignment.get(item.topic, item.partition)
        if assigned is not None:
            assigned.committed = item.offset


def _message_or_offsets(
    message: object, offsets: object
) -> tuple[Message | None, list[TopicPartition] | None]:
    """commit's and store_offsets' arguments, checked as confluent checks them."""
    if message is not None and not isinstance(message, Message):
        raise TypeError(f"message must be a Message, not {type(message).__name__}")
    checked = None if offsets is None else topic_partitions("offsets", offsets)
    if message is not None and checked is not None:
        raise ValueError("message and offsets are mutually exclusive")
    return message, checked
