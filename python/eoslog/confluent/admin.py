"""eoslog's confluent_kafka.admin (docs/api.md "Drop-in for confluent-kafka"): what
`from confluent_kafka.admin import AdminClient, NewTopic, ...` imports, for
`from eoslog.confluent.admin import AdminClient, NewTopic, ...`."""

from __future__ import annotations

from eoslog.client.admin_transaction_types import (
    TRANSACTIONAL_ID_NOT_FOUND,
    AbortTransactionSpec,
    ProducerState,
    TransactionDescription,
    TransactionListing,
    TransactionState,
)
from eoslog.client.admin_types import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    IsolationLevel,
    ListConsumerGroupsResult,
    ListOffsetsResultInfo,
    MemberAssignment,
    MemberDescription,
    NewPartitions,
    NewTopic,
    Node,
    OffsetSpec,
    ResourceType,
    TopicCollection,
    TopicDescription,
    TopicPartitionInfo,
)
from eoslog.client.metadata import (
    BrokerMetadata,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from eoslog.confluent import AdminClient, KafkaError, KafkaException

__all__ = [
    "TRANSACTIONAL_ID_NOT_FOUND",
    "AbortTransactionSpec",
    "AdminClient",
    "AlterConfigOpType",
    "BrokerMetadata",
    "ClusterMetadata",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "ConsumerGroupDescription",
    "ConsumerGroupListing",
    "ConsumerGroupState",
    "ConsumerGroupTopicPartitions",
    "ConsumerGroupType",
    "IsolationLevel",
    "KafkaError",
    "KafkaException",
    "ListConsumerGroupsResult",
    "ListOffsetsResultInfo",
    "MemberAssignment",
    "MemberDescription",
    "NewPartitions",
    "NewTopic",
    "Node",
    "OffsetSpec",
    "PartitionMetadata",
    "ProducerState",
    "ResourceType",
    "TopicCollection",
    "TopicDescription",
    "TopicMetadata",
    "TopicPartitionInfo",
    "TransactionDescription",
    "TransactionListing",
    "TransactionState",
]
