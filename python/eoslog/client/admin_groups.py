"""The AdminClient's consumer-group calls (eoslog.client.admin), over the broker's
GroupCoordinator: listing, describing, reading and altering committed offsets. Argument checks
raise at the call with confluent's exception types and messages; the rest raises the
KafkaException the AdminClient puts in the call's future.

A group is known here when it has members now or committed offsets (GroupCoordinator
group_ids). A group that never completed a rebalance in this process (generation 0, no
members) is reported as a simple consumer group, Kafka's name for a group that only commits
offsets (assign() consumers, admin tools); its partition_assignor is "".

Thread safety: any thread; each coordinator call is atomic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eoslog.client.admin_types import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    ListConsumerGroupsResult,
    MemberAssignment,
    MemberDescription,
    Node,
)
from eoslog.client.message import OFFSET_INVALID, TopicPartition
from eoslog.client.metadata import NO_PORT, NODE_ID
from eoslog.coordinator.group_coordinator import ConsumerGroupMetadata, OffsetToCommit
from eoslog.coordinator.group_membership import GroupState
from eoslog.errors import KafkaError, KafkaException

if TYPE_CHECKING:
    from eoslog.coordinator.group_coordinator import GroupCoordinator

# The coordinator's states as confluent names them (librdkafka's rd_kafka_consumer_group_state_t).
STATES = {
    GroupState.EMPTY: ConsumerGroupState.EMPTY,
    GroupState.PREPARING_REBALANCE: ConsumerGroupState.PREPARING_REBALANCING,
    GroupState.COMPLETING_REBALANCE: ConsumerGroupState.COMPLETING_REBALANCING,
    GroupState.STABLE: ConsumerGroupState.STABLE,
}


def group_id_list(value: object, verb: str) -> list[str]:
    """confluent's checks of describe/delete_consumer_groups' group_ids."""
    if not isinstance(value, list):
        raise TypeError(f"Expected input to be list of group ids to be {verb}")
    if not value:
        raise ValueError(f"Expected at least one group to be {verb}")
    for group_id in value:
        if not isinstance(group_id, str):
            raise TypeError(f"Expected input to be list of group ids to be {verb}")
    return value


def one_request(value: object, verb: str) -> ConsumerGroupTopicPartitions:
    """confluent's checks of a list/alter_consumer_group_offsets request: a list of exactly
    one ConsumerGroupTopicPartitions with a group id."""
    if not isinstance(value, list):
        raise TypeError("Expected list of 'ConsumerGroupTopicPartitions'")
    if len(value) != 1:
        raise ValueError(f"Currently we support {verb} offsets for a single consumer group only")
    request = value[0]
    if not isinstance(request, ConsumerGroupTopicPartitions):
        raise TypeError("Expected list of 'ConsumerGroupTopicPartitions'")
    if not isinstance(request.group_id, str):
        raise TypeError("'group_id' must be a string")
    if not request.group_id:
        raise ValueError("'group_id' cannot be empty")
    return request


def _partitions(request: ConsumerGroupTopicPartitions) -> list[TopicPartition]:
    partitions = request.topic_partitions
    if not isinstance(partitions, list):
        raise TypeError("'topic_partitions' must be a list or None")
    if not partitions:
        raise ValueError("'topic_partitions' cannot be empty")
    for tp in partitions:
        if not isinstance(tp, TopicPartition):
            raise TypeError("Element of 'topic_partitions' must be of type TopicPartition")
        if tp.partition < 0:
            raise ValueError(
                "Element of 'topic_partitions' must not have negative 'partition' value"
            )
    return partitions


def check_listed_partitions(request: ConsumerGroupTopicPartitions) -> None:
    """list_consumer_group_offsets: None (every partition) or partitions without offsets."""
    if request.topic_partitions is None:
        return
    for tp in _partitions(request):
        if tp.offset != OFFSET_INVALID:
            raise ValueError("Element of 'topic_partitions' must not have 'offset' value")


def check_altered_partitions(request: ConsumerGroupTopicPartitions) -> None:
    """alter_consumer_group_offsets: partitions, each with an offset >= 0."""
    if request.topic_partitions is None:
        raise ValueError("'topic_partitions' cannot be null")
    for tp in _partitions(request):
        if tp.offset < 0:
            raise ValueError(
                "Element of 'topic_partitions' must not have negative value for 'offset' field"
            )


def _listing(groups: GroupCoordinator, group_id: str) -> ConsumerGroupListing:
    state, generation, _, members = groups.describe_group(group_id)
    simple = generation == 0 and not members
    return ConsumerGroupListing(group_id, simple, STATES[state], ConsumerGroupType.CLASSIC)


def list_groups(groups: GroupCoordinator, states: Any, types: Any) -> ListConsumerGroupsResult:
    """Every known group, kept to those in `states` and of `types` when given (sets)."""
    for name, wanted in (("states", states), ("types", types)):
        if wanted is not None and not isinstance(wanted, set):
            raise TypeError(f"'{name}' must be a set")
    listings = [_listing(groups, group_id) for group_id in groups.group_ids()]
    if states:
        listings = [listing for listing in listings if listing.state in states]
    if types:
        listings = [listing for listing in listings if listing.type in types]
    return ListConsumerGroupsResult(listings, [])


def describe(groups: GroupCoordinator, group_id: str) -> ConsumerGroupDescription:
    """The group's state, assignor and members; GROUP_ID_NOT_FOUND if it is not known."""
    if group_id not in groups.group_ids():
        raise KafkaException(
            KafkaError(KafkaError.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        )
    state, generation, protocol, members = groups.describe_group(group_id)
    described = [
        MemberDescription(
            member_id,
            "",
            "",
            MemberAssignment([TopicPartition(topic, index) for topic, index in assignment]),
        )
        for member_id, assignment in members.items()
    ]
    return ConsumerGroupDescription(
        group_id,
        generation == 0 and not members,
        described,
        protocol or "",
        STATES[state],
        Node(NODE_ID, "", NO_PORT),
        type=ConsumerGroupType.CLASSIC,
    )


def committed(
    groups: GroupCoordinator, request: ConsumerGroupTopicPartitions, require_stable: bool
) -> ConsumerGroupTopicPartitions:
    """The committed offsets of the partitions asked for, or of all the group has."""
    if request.topic_partitions is None:
        stored = groups.fetch_offsets(
            request.group_id,
            sorted(groups.committed_partitions(request.group_id)),
            require_stable=require_stable,
        )
    else:
        wanted = [(tp.topic, tp.partition) for tp in request.topic_partitions]
        stored = groups.fetch_offsets(request.group_id, wanted, require_stable=require_stable)
    answer = []
    for (topic, partition), offset in stored.items():
        if offset is None:
            answer.append(TopicPartition(topic, partition, OFFSET_INVALID))
            continue
        epoch = offset.leader_epoch if offset.leader_epoch >= 0 else None
        answer.append(TopicPartition(topic, partition, offset.offset, offset.metadata, epoch))
    return ConsumerGroupTopicPartitions(request.group_id, answer)


def alter(
    groups: GroupCoordinator, request: ConsumerGroupTopicPartitions
) -> ConsumerGroupTopicPartitions:
    """A plain commit of the request's offsets for a group without members."""
    partitions = request.topic_partitions or []
    offsets = [
        OffsetToCommit(
            tp.topic,
            tp.partition,
            tp.offset,
            tp.metadata or "",
            -1 if tp.leader_epoch is None else tp.leader_epoch,
        )
        for tp in partitions
    ]
    groups.commit_offsets(ConsumerGroupMetadata(request.group_id), offsets)
    return ConsumerGroupTopicPartitions(
        request.group_id, [TopicPartition(tp.topic, tp.partition, tp.offset) for tp in partitions]
    )
