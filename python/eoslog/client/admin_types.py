"""The request and result types of the AdminClient (docs/api.md "Drop-in for confluent-kafka"),
with confluent_kafka.admin's names, constructor shapes and attribute names, so code written
against confluent's AdminClient reads eoslog's answers unchanged: NewTopic, NewPartitions,
ConfigResource (with ResourceType), ConfigEntry, TopicCollection, TopicDescription,
ConsumerGroupTopicPartitions, OffsetSpec, and the group listings and descriptions.

Cluster metadata (ClusterMetadata and its parts) is eoslog.client.metadata's. The enums have
confluent's members and values (which are Kafka's protocol values). Plain value objects:
built per call, any thread may read them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from eoslog import arguments
from eoslog.client.message import TopicPartition
from eoslog.errors import KafkaError


class NewTopic:
    """A topic to create (confluent_kafka.admin.NewTopic). num_partitions -1: the broker's
    num.partitions; replication_factor and replica_assignment are accepted (a log directory
    is one replica of everything) but only -1 / 1 and None are valid; config: topic-level
    properties ({"retention.ms": "1000"}). TypeError as confluent raises it."""

    def __init__(
        self,
        topic: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        replica_assignment: list[list[int]] | None = None,
        config: Mapping[str, object] | None = None,
    ) -> None:
        if not isinstance(topic, str):
            raise TypeError(f"argument 1 must be str, not {type(topic).__name__}")
        self.topic = topic
        self.num_partitions = arguments.integer("num_partitions", num_partitions)
        self.replication_factor = arguments.integer("replication_factor", replication_factor)
        self.replica_assignment = replica_assignment
        if config is not None and not isinstance(config, Mapping):
            raise TypeError("config must be a dict of strings")
        self.config = None if config is None else dict(config)

    def __repr__(self) -> str:
        return f"NewTopic(topic={self.topic},num_partitions={self.num_partitions})"


class NewPartitions:
    """A topic's new partition count (confluent_kafka.admin.NewPartitions)."""

    def __init__(
        self,
        topic: str,
        new_total_count: int,
        replica_assignment: list[list[int]] | None = None,
    ) -> None:
        if not isinstance(topic, str):
            raise TypeError(f"argument 1 must be str, not {type(topic).__name__}")
        self.topic = topic
        self.new_total_count = arguments.integer("new_total_count", new_total_count)
        self.replica_assignment = replica_assignment

    def __repr__(self) -> str:
        return f"NewPartitions(topic={self.topic},new_total_count={self.new_total_count})"


class DeletedRecords:
    """What delete_records leaves of a partition (confluent_kafka.admin.DeletedRecords): its
    low watermark, the log start offset after the deletion."""

    def __init__(self, low_watermark: int) -> None:
        self.low_watermark = low_watermark

    def __repr__(self) -> str:
        return f"DeletedRecords(low_watermark={self.low_watermark})"


class ResourceType(enum.Enum):
    """confluent_kafka.admin.ResourceType (Kafka's resource type codes)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    BROKER = 4
    TRANSACTIONAL_ID = 5


class ConfigSource(enum.Enum):
    """confluent_kafka.admin.ConfigSource: where a config value comes from."""

    UNKNOWN_CONFIG = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8


class AlterConfigOpType(enum.Enum):
    """confluent_kafka.admin.AlterConfigOpType."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConfigEntry:
    """One config value (confluent_kafka.admin.ConfigEntry)."""

    def __init__(
        self,
        name: str,
        value: str | None,
        source: ConfigSource = ConfigSource.UNKNOWN_CONFIG,
        is_read_only: bool = False,
        is_default: bool = False,
        is_sensitive: bool = False,
        is_synonym: bool = False,
        synonyms: dict[str, ConfigEntry] | None = None,
        incremental_operation: AlterConfigOpType | None = None,
    ) -> None:
        self.name = name
        self.value = value
        self.source = source
        self.is_read_only = is_read_only
        self.is_default = is_default
        self.is_sensitive = is_sensitive
        self.is_synonym = is_synonym
        self.synonyms = {} if synonyms is None else synonyms
        self.incremental_operation = incremental_operation

    def __repr__(self) -> str:
        return f"ConfigEntry({self.name}={self.value})"

    def __str__(self) -> str:
        return f"{self.name}={self.value}"


class ConfigResource:
    """A resource whose configs are described or altered (confluent_kafka.admin.ConfigResource):
    restype a ResourceType, its name (case-insensitive) or its value. Equal and hashed by
    (restype, name), so it keys the result dict. ValueError for an unknown type name or a
    name of None, as confluent's."""

    Type = ResourceType

    def __init__(
        self,
        restype: ResourceType | str | int,
        name: str,
        set_config: Mapping[str, str] | None = None,
        described_configs: dict[str, ConfigEntry] | None = None,
        error: KafkaError | None = None,
        incremental_configs: list[ConfigEntry] | None = None,
    ) -> None:
        if name is None:
            raise ValueError("Expected resource name to be a string")
        if isinstance(restype, str):
            try:
                restype = ResourceType[restype.upper()]
            except KeyError:
                raise ValueError(
                    f'Unknown resource type "{restype}": should be a ConfigResource.Type'
                ) from None
        elif isinstance(restype, int):
            restype = ResourceType(restype)
        self.restype = restype
        self.restype_int = int(restype.value)
        self.name = name
        self.set_config_dict = {} if set_config is None else dict(set_config)
        self.incremental_configs = list(incremental_configs or [])
        self.configs = described_configs
        self.error = error

    def __repr__(self) -> str:
        if self.error is not None:
            return f"ConfigResource({self.restype},{self.name},{self.error!r})"
        return f"ConfigResource({self.restype},{self.name})"

    def __hash__(self) -> int:
        return hash((self.restype, self.name))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfigResource):
            return NotImplemented
        return (self.restype, self.name) == (other.restype, other.name)

    def __lt__(self, other: ConfigResource) -> bool:
        return (self.restype.value, self.name) < (other.restype.value, other.name)

    def set_config(self, name: str, value: str, overwrite: bool = True) -> None:
        if not overwrite and name in self.set_config_dict:
            return
        self.set_config_dict[name] = value

    def add_incremental_config(self, config_entry: ConfigEntry) -> None:
        self.incremental_configs.append(config_entry)


class Node:
    """A broker as the admin results name it (confluent_kafka.Node)."""

    def __init__(self, id: int, host: str, port: int, rack: str | None = None) -> None:
        self.id = id
        self.id_string = str(id)
        self.host = host
        self.port = port
        self.rack = rack

    def __str__(self) -> str:
        rack = f"(Rack - {self.rack})" if self.rack else ""
        return f"({self.id}) {self.host}:{self.port} {rack}"


class TopicPartitionInfo:
    """One partition of a TopicDescription (confluent_kafka.TopicPartitionInfo)."""

    def __init__(self, id: int, leader: Node, replicas: list[Node], isr: list[Node]) -> None:
        self.id = id
        self.leader = leader
        self.replicas = replicas
        self.isr = isr


class TopicCollection:
    """The topics describe_topics asks for (confluent_kafka.TopicCollection)."""

    def __init__(self, topic_names: list[str]) -> None:
        self.topic_names = topic_names


class TopicDescription:
    """describe_topics' answer for one topic (confluent_kafka.admin.TopicDescription).
    topic_id is None: eoslog.meta keeps no topic ids yet."""

    def __init__(
        self,
        name: str,
        topic_id: Any,
        is_internal: bool,
        partitions: list[TopicPartitionInfo],
        authorized_operations: list[Any] | None = None,
    ) -> None:
        self.name = name
        self.topic_id = topic_id
        self.is_internal = is_internal
        self.partitions = partitions
        self.authorized_operations = authorized_operations


class ConsumerGroupTopicPartitions:
    """A group and some of its partitions (confluent_kafka.ConsumerGroupTopicPartitions): the
    request and the answer of list/alter_consumer_group_offsets."""

    def __init__(self, group_id: str, topic_partitions: list[TopicPartition] | None = None) -> None:
        self.group_id = group_id
        self.topic_partitions = topic_partitions

    def __repr__(self) -> str:
        return f"ConsumerGroupTopicPartitions({self.group_id}, {self.topic_partitions})"


class ConsumerGroupState(enum.Enum):
    """confluent_kafka.ConsumerGroupState (librdkafka's values)."""

    UNKNOWN = 0
    UNKOWN = 0  # confluent's misspelt alias of UNKNOWN, kept for code that names it
    PREPARING_REBALANCING = 1
    COMPLETING_REBALANCING = 2
    STABLE = 3
    DEAD = 4
    EMPTY = 5


class ConsumerGroupType(enum.Enum):
    """confluent_kafka.ConsumerGroupType (KIP-848): eoslog's groups are CLASSIC."""

    UNKNOWN = 0
    CONSUMER = 1
    CLASSIC = 2


class IsolationLevel(enum.Enum):
    """confluent_kafka.IsolationLevel, for list_offsets."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class ConsumerGroupListing:
    """One group of list_consumer_groups (confluent_kafka.admin.ConsumerGroupListing)."""

    def __init__(
        self,
        group_id: str,
        is_simple_consumer_group: bool,
        state: ConsumerGroupState | None = None,
        type: ConsumerGroupType | None = None,
    ) -> None:
        self.group_id = group_id
        self.is_simple_consumer_group = is_simple_consumer_group
        self.state = state
        self.type = type


class ListConsumerGroupsResult:
    """list_consumer_groups' answer (confluent_kafka.admin.ListConsumerGroupsResult)."""

    def __init__(
        self,
        valid: list[ConsumerGroupListing] | None = None,
        errors: list[KafkaError] | None = None,
    ) -> None:
        self.valid = valid
        self.errors = errors


class MemberAssignment:
    """A member's partitions (confluent_kafka.admin.MemberAssignment)."""

    def __init__(self, topic_partitions: list[TopicPartition] | None) -> None:
        self.topic_partitions = [] if topic_partitions is None else topic_partitions


class MemberDescription:
    """One member of a described group (confluent_kafka.admin.MemberDescription)."""

    def __init__(
        self,
        member_id: str,
        client_id: str,
        host: str,
        assignment: MemberAssignment,
        group_instance_id: str | None = None,
        target_assignment: MemberAssignment | None = None,
    ) -> None:
        self.member_id = member_id
        self.client_id = client_id
        self.host = host
        self.assignment = assignment
        self.group_instance_id = group_instance_id
        self.target_assignment = target_assignment


class ConsumerGroupDescription:
    """describe_consumer_groups' answer for one group
    (confluent_kafka.admin.ConsumerGroupDescription)."""

    def __init__(
        self,
        group_id: str,
        is_simple_consumer_group: bool,
        members: list[MemberDescription],
        partition_assignor: str,
        state: ConsumerGroupState | None,
        coordinator: Node,
        authorized_operations: list[Any] | None = None,
        type: ConsumerGroupType = ConsumerGroupType.UNKNOWN,
    ) -> None:
        self.group_id = group_id
        self.is_simple_consumer_group = is_simple_consumer_group
        self.members = members
        self.partition_assignor = partition_assignor
        self.state = state
        self.coordinator = coordinator
        self.authorized_operations = authorized_operations
        self.type = type


class OffsetSpec:
    """What list_offsets looks up for a partition (confluent_kafka.admin.OffsetSpec):
    OffsetSpec.earliest(), .latest(), .max_timestamp() or .for_timestamp(ms). `_value` is
    librdkafka's: -2, -1, -3, or the timestamp."""

    EARLIEST = -2
    LATEST = -1
    MAX_TIMESTAMP = -3

    def __init__(self, value: int) -> None:
        self._value = value

    @classmethod
    def earliest(cls) -> OffsetSpec:
        return cls(cls.EARLIEST)

    @classmethod
    def latest(cls) -> OffsetSpec:
        return cls(cls.LATEST)

    @classmethod
    def max_timestamp(cls) -> OffsetSpec:
        return cls(cls.MAX_TIMESTAMP)

    @classmethod
    def for_timestamp(cls, timestamp: int) -> OffsetSpec:
        return cls(arguments.integer("timestamp", timestamp))

    def __repr__(self) -> str:
        names = {self.EARLIEST: "earliest", self.LATEST: "latest", self.MAX_TIMESTAMP: "max"}
        return f"OffsetSpec({names.get(self._value, self._value)})"


class ListOffsetsResultInfo:
    """list_offsets' answer for one partition (confluent_kafka.admin.ListOffsetsResultInfo):
    the offset, its record's timestamp (-1 when not looked up by time) and leader epoch."""

    def __init__(self, offset: int, timestamp: int, leader_epoch: int | None) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.leader_epoch = leader_epoch

    def __repr__(self) -> str:
        return f"ListOffsetsResultInfo(offset={self.offset}, timestamp={self.timestamp})"
