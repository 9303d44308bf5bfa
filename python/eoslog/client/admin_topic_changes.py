"""The AdminClient's calls that change a topic (docs/api.md "Drop-in for confluent-kafka"):
create_partitions, incremental_alter_configs and delete_records, over the broker's
create_partitions, alter_topic_config and delete_records (eoslog.log.topic_changes,
PartitionLog.delete_records).

The `check_*` functions are the checks confluent's AdminClient makes at the call (TypeError,
ValueError, or an _INVALID_ARG future for a key named twice); the others answer one key,
raising the KafkaException its future holds. Thread safety: as the AdminClient's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from eoslog.client.admin_types import (
    AlterConfigOpType,
    ConfigResource,
    DeletedRecords,
    NewPartitions,
    ResourceType,
)
from eoslog.client.message import TopicPartition
from eoslog.client.metadata import NODE_ID
from eoslog.errors import KafkaError, KafkaException
from eoslog.log.meta_file import TopicMetadata

_SHAPE = (
    "replica_assignment must be a list of int lists with an outer size of new_total_count - "
    "existing partition count"
)


class TopicChanger(Protocol):
    """What these calls need of the Broker."""

    def topic_metadata(self, name: str, *, auto_create: bool = False) -> TopicMetadata: ...

    def create_partitions(
        self, name: str, total: int, *, validate_only: bool = False
    ) -> TopicMetadata: ...

    def alter_topic_config(
        self, name: str, changes: Mapping[str, object | None], *, validate_only: bool = False
    ) -> TopicMetadata: ...

    def delete_records(self, topic: str, partition: int, offset: int) -> int: ...


def _refused(code: int, reason: str) -> KafkaException:
    return KafkaException(KafkaError(code, reason))


# --- create_partitions -------------------------------------------------------------------


def check_new_partitions(requests: list[NewPartitions]) -> None:
    """confluent's check of replica_assignment at the call: a list of int lists, no more of
    them than new_total_count (ValueError)."""
    for request in requests:
        assignment = request.replica_assignment
        if assignment is None:
            continue
        if (
            not isinstance(assignment, list)
            or len(assignment) > request.new_total_count
            or not all(
                isinstance(replicas, list) and all(isinstance(r, int) for r in replicas)
                for replicas in assignment
            )
        ):
            raise ValueError(_SHAPE)


def create_partitions(broker: TopicChanger, request: NewPartitions, validate_only: bool) -> None:
    """One topic grown (Broker.create_partitions): UNKNOWN_TOPIC_OR_PART, INVALID_PARTITIONS,
    TOPIC_EXCEPTION (an internal topic), INVALID_REPLICA_ASSIGNMENT (one list per new
    partition, each naming node 0 alone: a log directory is the only replica),
    KAFKA_STORAGE_ERROR."""
    assignment = request.replica_assignment
    if assignment is not None:
        current = broker.topic_metadata(request.topic).num_partitions
        added = request.new_total_count - current
        if added > 0 and len(assignment) != added:
            raise _refused(
                KafkaError.INVALID_REPLICA_ASSIGNMENT,
                f"Increasing the number of partitions by {added} but {len(assignment)} "
                "assignments provided.",
            )
        if any(replicas != [NODE_ID] for replicas in assignment):
            raise _refused(
                KafkaError.INVALID_REPLICA_ASSIGNMENT,
                f"a log directory is the only replica: every assignment must be [{NODE_ID}]",
            )
    broker.create_partitions(request.topic, request.new_total_count, validate_only=validate_only)


# --- incremental_alter_configs -------------------------------------------------------------


def check_alterations(resources: list[ConfigResource]) -> None:
    """confluent's checks of each entry at the call: an AlterConfigOpType, and a str value
    unless the operation is DELETE (TypeError)."""
    for resource in resources:
        for entry in resource.incremental_configs:
            operation = entry.incremental_operation
            if not isinstance(operation, AlterConfigOpType):
                raise TypeError("Required attribute .value missing")
            if operation is not AlterConfigOpType.DELETE and not isinstance(entry.value, str):
                raise TypeError(f"Expected .value to be str type, not {type(entry.value).__name__}")


def alter_config(broker: TopicChanger, resource: ConfigResource, validate_only: bool) -> None:
    """One resource's entries applied together (Broker.alter_topic_config): SET a value,
    DELETE back to the default. APPEND and SUBTRACT are for list-typed configs, and no topic
    config eoslog honours is a list: INVALID_CONFIG, as Kafka answers them for a scalar.
    INVALID_REQUEST for a BROKER resource (its settings are fixed when the directory is
    opened, as Kafka's static broker configs) or another type; UNKNOWN_TOPIC_OR_PART;
    INVALID_CONFIG naming a bad key or value; TOPIC_EXCEPTION for an internal topic."""
    if resource.restype is ResourceType.BROKER:
        raise _refused(
            KafkaError.INVALID_REQUEST,
            "Cannot update these configs dynamically: eoslog's broker settings are fixed when "
            "the directory is opened",
        )
    if resource.restype is not ResourceType.TOPIC:
        raise _refused(
            KafkaError.INVALID_REQUEST, f"eoslog alters TOPIC configs only, not {resource!r}"
        )
    changes: dict[str, object | None] = {}
    for entry in resource.incremental_configs:
        operation = entry.incremental_operation
        if operation in (AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT):
            assert operation is not None
            raise _refused(
                KafkaError.INVALID_CONFIG,
                f"Config value {operation.name.lower()} is not allowed for config key: "
                f"{entry.name} (it is not a list)",
            )
        if entry.name in changes:
            raise _refused(
                KafkaError.INVALID_CONFIG, f"Duplicate alter config entry for {entry.name}"
            )
        changes[entry.name] = None if operation is AlterConfigOpType.DELETE else entry.value
    broker.alter_topic_config(resource.name, changes, validate_only=validate_only)


# --- delete_records ----------------------------------------------------------------------


def check_delete_records(request: object) -> list[TopicPartition]:
    """confluent's checks at the call: a list of TopicPartition (TypeError), partitions not
    negative (ValueError)."""
    if not isinstance(request, list):
        raise TypeError(f"Expected Request to be a list, got '{type(request).__name__}' ")
    for item in request:
        if not isinstance(item, TopicPartition):
            raise TypeError(
                "Element of the request list must be of type 'TopicPartition' got "
                f"'{type(item).__name__}' "
            )
        if item.partition < 0:
            raise ValueError("'partition' cannot be negative")
    return request


def delete_records(broker: TopicChanger, tp: TopicPartition) -> DeletedRecords:
    """One partition's records below tp.offset deleted (Broker.delete_records):
    OFFSET_OUT_OF_RANGE past the high watermark, UNKNOWN_TOPIC_OR_PART, TOPIC_EXCEPTION (an
    internal topic), KAFKA_STORAGE_ERROR."""
    return DeletedRecords(broker.delete_records(tp.topic, tp.partition, tp.offset))


def duplicated(keys: list[TopicPartition] | list[ConfigResource]) -> bool:
    return len(set(keys)) != len(keys)
