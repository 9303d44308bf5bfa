"""eoslog's confluent_kafka.admin (docs/api.md "Drop-in for confluent-kafka"): what
`from confluent_kafka.admin import AdminClient, NewTopic, ...` imports, for
`from eoslog.confluent.admin import AdminClient, NewTopic, ...`."""

from __future__ import annotations

from typing import Final

from eoslog.client.admin_acl_types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from eoslog.client.admin_cluster import DescribeClusterResult, GroupMember, GroupMetadata
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
    DeletedRecords,
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
from eoslog.client.message import OFFSET_INVALID
from eoslog.client.metadata import (
    BrokerMetadata,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from eoslog.confluent import AdminClient, KafkaError, KafkaException

# confluent_kafka.admin's module constants: the values of ConfigSource and ResourceType.
CONFIG_SOURCE_UNKNOWN_CONFIG: Final = ConfigSource.UNKNOWN_CONFIG.value
CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG: Final = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG: Final = ConfigSource.DYNAMIC_BROKER_CONFIG.value
CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG: Final = (
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
)
CONFIG_SOURCE_STATIC_BROKER_CONFIG: Final = ConfigSource.STATIC_BROKER_CONFIG.value
CONFIG_SOURCE_DEFAULT_CONFIG: Final = ConfigSource.DEFAULT_CONFIG.value
CONFIG_SOURCE_GROUP_CONFIG: Final = ConfigSource.GROUP_CONFIG.value
RESOURCE_UNKNOWN: Final = ResourceType.UNKNOWN.value
RESOURCE_ANY: Final = ResourceType.ANY.value
RESOURCE_TOPIC: Final = ResourceType.TOPIC.value
RESOURCE_GROUP: Final = ResourceType.GROUP.value
RESOURCE_BROKER: Final = ResourceType.BROKER.value
RESOURCE_TRANSACTIONAL_ID: Final = ResourceType.TRANSACTIONAL_ID.value

__all__ = [
    "CONFIG_SOURCE_DEFAULT_CONFIG",
    "CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG",
    "CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG",
    "CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG",
    "CONFIG_SOURCE_GROUP_CONFIG",
    "CONFIG_SOURCE_STATIC_BROKER_CONFIG",
    "CONFIG_SOURCE_UNKNOWN_CONFIG",
    "OFFSET_INVALID",
    "RESOURCE_ANY",
    "RESOURCE_BROKER",
    "RESOURCE_GROUP",
    "RESOURCE_TOPIC",
    "RESOURCE_TRANSACTIONAL_ID",
    "RESOURCE_UNKNOWN",
    "TRANSACTIONAL_ID_NOT_FOUND",
    "AbortTransactionSpec",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
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
    "DeletedRecords",
    "DescribeClusterResult",
    "GroupMember",
    "GroupMetadata",
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
    "ResourcePatternType",
    "ResourceType",
    "ScramCredentialInfo",
    "ScramMechanism",
    "TopicCollection",
    "TopicDescription",
    "TopicMetadata",
    "TopicPartitionInfo",
    "TransactionDescription",
    "TransactionListing",
    "TransactionState",
    "UserScramCredentialAlteration",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
]
