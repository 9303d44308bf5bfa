"""The AdminClient (docs/api.md "Drop-in for confluent-kafka"): confluent_kafka.admin.AdminClient's
calls over one Broker, made by `broker.admin(config)` or `eoslog.confluent.AdminClient(conf)`.

Each call checks its arguments at once, raising TypeError / ValueError as confluent's does, then
answers as confluent's does: a dict from each requested key (topic name, ConfigResource, group
id, TopicPartition) to a concurrent.futures.Future, or one Future (list_consumer_groups), or
the value itself (list_topics); Java's KIP-664 transaction calls, which confluent's lacks,
answer the same way (eoslog.client.admin_transactions). Here the work is done before the call
returns, so every future is already done: its result, or its exception, a KafkaException
carrying the KafkaError with confluent's code (TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PART,
INVALID_PARTITIONS, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...). One key failing leaves the
others to their own answers, as in Kafka.

Adding partitions, changing a topic's config and deleting records are
eoslog.client.admin_topic_changes. What the broker cannot do is refused in the future, with
nothing changed: OffsetSpec.max_timestamp() gets _UNSUPPORTED_FEATURE.

Thread safety: any thread may call; each call is one or more broker operations, each atomic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from eoslog import arguments
from eoslog.arguments import real
from eoslog.client import admin_groups, admin_topic_changes, admin_transactions
from eoslog.client.admin_answers import answered, check_options, node, non_empty_list, refused
from eoslog.client.admin_cluster import ClusterCalls
from eoslog.client.admin_transaction_types import (
    AbortTransactionSpec,
    ProducerState,
    TransactionDescription,
    TransactionListing,
)
from eoslog.client.admin_types import (
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConsumerGroupDescription,
    ConsumerGroupTopicPartitions,
    DeletedRecords,
    IsolationLevel,
    ListConsumerGroupsResult,
    ListOffsetsResultInfo,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
    TopicCollection,
    TopicDescription,
    TopicPartitionInfo,
)
from eoslog.client.message import TopicPartition
from eoslog.client.metadata import NODE_ID, ClusterMetadata, cluster_metadata
from eoslog.errors import KafkaError
from eoslog.log.config import LogConfig
from eoslog.log.meta_file import validate_topic_name

if TYPE_CHECKING:
    from eoslog.coordinator.group_coordinator import GroupCoordinator
    from eoslog.coordinator.transaction_coordinator import TransactionCoordinator
    from eoslog.log.meta_file import TopicMetadata
    from eoslog.log.partition import PartitionLog

_K = TypeVar("_K", TopicPartition, ConfigResource)
_R = TypeVar("_R", NewTopic, NewPartitions)

# The topic names Kafka marks is_internal (eoslog's two internal topics).
_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class AdminBroker(admin_topic_changes.TopicChanger, Protocol):
    """What the AdminClient needs of the Broker."""

    path: str
    groups: GroupCoordinator
    transactions: TransactionCoordinator
    clock_ms: Callable[[], int]

    @property
    def settings(self) -> Mapping[str, Any]: ...

    def create_topic(
        self,
        name: str,
        num_partitions: int | None = None,
        config: Mapping[str, object] | None = None,
    ) -> TopicMetadata: ...

    def delete_topic(self, name: str) -> None: ...

    def list_topics(self) -> Mapping[str, TopicMetadata]: ...

    def topic_metadata(self, name: str, *, auto_create: bool = False) -> TopicMetadata: ...

    def log(self, topic: str, partition: int) -> PartitionLog: ...


class AdminClient(ClusterCalls):
    """confluent_kafka.admin.AdminClient over one broker (module docstring). Config keys are
    accepted and ignored: an admin call has nothing to tune here (confluent's timeouts are
    taken per call, and calls never wait). The cluster-wide calls (describe_cluster, ACLs,
    SCRAM, elect_leaders, alter_configs, list_groups, poll) are eoslog.client.admin_cluster's.
    A context manager, as confluent's: __exit__ closes it; every call on a closed client
    raises RuntimeError."""

    def __init__(self, broker: AdminBroker, config: Mapping[str, object] | None = None) -> None:
        arguments.refuse_config_as_broker("AdminClient", broker)
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"config must be a dict, not {type(config).__name__}")
        self._open_broker: AdminBroker | None = broker
        self.config = dict(config or {})

    @property
    def _broker(self) -> AdminBroker:
        broker = self._open_broker
        if broker is None:
            raise RuntimeError("AdminClient has been closed")
        return broker

    def close(self) -> None:
        """Close the client (idempotent): later calls raise RuntimeError. The broker is the
        caller's and stays open (eoslog.confluent's AdminClient also releases its
        directory)."""
        self._open_broker = None

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close it, as confluent's destroys its handle; an exception propagates."""
        self.close()

    # --- topics -----------------------------------------------------------------------------

    def create_topics(self, new_topics: list[NewTopic], **kwargs: Any) -> dict[str, Future[None]]:
        """Create each topic: None, or TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS,
        INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG, TOPIC_EXCEPTION
        (a bad name), INVALID_REQUEST (a topic named twice). validate_only=True checks all of
        it and creates nothing. operation_timeout and request_timeout are accepted."""
        check_options(
            "create_topics", kwargs, ("validate_only", "operation_timeout", "request_timeout")
        )
        topics = non_empty_list(new_topics, NewTopic, "NewTopic objects")
        validate_only = _validate_only(kwargs)
        return _each_topic_once(
            {topic.topic: topic for topic in topics},
            [topic.topic for topic in topics],
            lambda topic: self._create_topic(topic, validate_only),
        )

    def _create_topic(self, topic: NewTopic, validate_only: bool) -> None:
        validate_topic_name(topic.topic)
        count = None if topic.num_partitions == -1 else topic.num_partitions
        if count is not None and count < 1:
            raise refused(
                KafkaError.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
            )
        if topic.replication_factor not in (-1, 1):
            raise refused(
                KafkaError.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {topic.replication_factor} larger than available brokers: 1.",
            )
        if topic.replica_assignment is not None:
            raise refused(
                KafkaError.INVALID_REPLICA_ASSIGNMENT,
                "a log directory is the only replica of every partition: no replica_assignment",
            )
        config = {key: str(value) for key, value in (topic.config or {}).items()}
        if validate_only:
            LogConfig().with_properties(config)  # InvalidConfigError
            if topic.topic in self._broker.list_topics():
                raise refused(
                    KafkaError.TOPIC_ALREADY_EXISTS, f"Topic '{topic.topic}' already exists."
                )
            return
        self._broker.create_topic(topic.topic, count, config)

    def delete_topics(self, topics: list[str], **kwargs: Any) -> dict[str, Future[None]]:
        """Delete each topic: None, or UNKNOWN_TOPIC_OR_PART, or TOPIC_EXCEPTION (an internal
        topic, a bad name)."""
        check_options("delete_topics", kwargs, ("operation_timeout", "request_timeout"))
        if not isinstance(topics, list):
            raise TypeError(f"argument 1 must be list, not {type(topics).__name__}")
        names = non_empty_list(topics, str, "topic strings")
        return {name: answered(self._broker.delete_topic, name) for name in names}

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The cluster's metadata (eoslog.client.metadata), as Consumer.list_topics answers."""
        if topic is not None and not isinstance(topic, str):
            raise TypeError(f"argument 1 must be str or None, not {type(topic).__name__}")
        real("timeout", timeout)
        return cluster_metadata(self._broker, topic)

    def describe_topics(
        self, topics: TopicCollection, **kwargs: Any
    ) -> dict[str, Future[TopicDescription]]:
        """A TopicDescription per topic, or UNKNOWN_TOPIC_OR_PART."""
        check_options(
            "describe_topics", kwargs, ("include_authorized_operations", "request_timeout")
        )
        if not isinstance(topics, TopicCollection):
            raise TypeError("Expected input to be instance of TopicCollection")
        names = arguments.names("topic_names", topics.topic_names)
        return {name: answered(self._describe_topic, name) for name in names}

    def _describe_topic(self, name: str) -> TopicDescription:
        count = self._broker.topic_metadata(name).num_partitions
        partitions = [
            TopicPartitionInfo(index, node(), [node()], [node()]) for index in range(count)
        ]
        return TopicDescription(name, None, name in _INTERNAL_TOPICS, partitions)

    def create_partitions(
        self, new_partitions: list[NewPartitions], **kwargs: Any
    ) -> dict[str, Future[None]]:
        """Grow each topic to new_total_count partitions (Broker.create_partitions, crash-safe;
        producers and subscribed groups pick the new partitions up at their next call): None,
        or UNKNOWN_TOPIC_OR_PART, INVALID_PARTITIONS (not above the count now),
        INVALID_REPLICA_ASSIGNMENT, TOPIC_EXCEPTION (an internal topic), INVALID_REQUEST (a
        topic named twice). validate_only=True checks all of it and changes nothing."""
        check_options(
            "create_partitions",
            kwargs,
            ("validate_only", "operation_timeout", "request_timeout"),
        )
        requests = non_empty_list(new_partitions, NewPartitions, "NewPartitions objects")
        validate_only = _validate_only(kwargs)
        admin_topic_changes.check_new_partitions(requests)
        return _each_topic_once(
            {request.topic: request for request in requests},
            [request.topic for request in requests],
            lambda request: admin_topic_changes.create_partitions(
                self._broker, request, validate_only
            ),
        )

    # --- configs ----------------------------------------------------------------------------

    def describe_configs(
        self, resources: list[ConfigResource], **kwargs: Any
    ) -> dict[ConfigResource, Future[dict[str, ConfigEntry]]]:
        """{name: ConfigEntry} for a TOPIC (every topic property, DYNAMIC_TOPIC_CONFIG for
        those set on the topic, DEFAULT_CONFIG for the broker's defaults) or the BROKER "0"
        (its settings, STATIC_BROKER_CONFIG); UNKNOWN_TOPIC_OR_PART, or INVALID_REQUEST for
        another resource type."""
        check_options(
            "describe_configs",
            kwargs,
            ("include_synonyms", "include_documentation", "request_timeout"),
        )
        if not isinstance(resources, list):
            raise ValueError(f"Expected list of {ConfigResource}")
        wanted = non_empty_list(resources, ConfigResource, "ConfigResource objects")
        return {resource: answered(self._describe_config, resource) for resource in wanted}

    def _describe_config(self, resource: ConfigResource) -> dict[str, ConfigEntry]:
        if resource.restype is ResourceType.BROKER and resource.name == str(NODE_ID):
            return {
                key: ConfigEntry(
                    key, str(value), ConfigSource.STATIC_BROKER_CONFIG, is_read_only=True
                )
                for key, value in self._broker.settings.items()
            }
        if resource.restype is not ResourceType.TOPIC:
            raise refused(
                KafkaError.INVALID_REQUEST,
                f"eoslog describes TOPIC and BROKER {NODE_ID} configs, not {resource!r}",
            )
        set_on_topic = self._broker.topic_metadata(resource.name).config
        effective = self._broker.list_topics()[resource.name].config
        entries = {}
        for key, value in effective.items():
            own = key in set_on_topic
            source = ConfigSource.DYNAMIC_TOPIC_CONFIG if own else ConfigSource.DEFAULT_CONFIG
            entries[key] = ConfigEntry(key, str(value), source, is_default=not own)
        return entries

    def incremental_alter_configs(
        self, resources: list[ConfigResource], **kwargs: Any
    ) -> dict[ConfigResource, Future[None]]:
        """Change topic configs (Broker.alter_topic_config: checked as create_topics checks
        them, persisted crash-safely, taken by the live partition logs): SET a value, DELETE
        back to the broker's default; a resource's entries apply together or not at all.
        None, or UNKNOWN_TOPIC_OR_PART, INVALID_CONFIG (a bad key or value; APPEND/SUBTRACT,
        which need a list-typed config), TOPIC_EXCEPTION (an internal topic), INVALID_REQUEST
        (a BROKER resource: its settings are fixed at open; another type), _INVALID_ARG (a
        resource named twice). validate_only=True checks and changes nothing."""
        check_options(
            "incremental_alter_configs",
            kwargs,
            ("validate_only", "request_timeout", "broker"),
        )
        wanted = non_empty_list(resources, ConfigResource, "ConfigResource objects")
        for resource in wanted:
            if not resource.incremental_configs:
                raise ValueError(
                    "expected non-empty list of ConfigEntry to alter incrementally in "
                    "incremental_configs field"
                )
        validate_only = _validate_only(kwargs)
        admin_topic_changes.check_alterations(wanted)
        if admin_topic_changes.duplicated(wanted):
            return _all_refused(wanted, "Duplicate ConfigResource found")
        return {
            resource: answered(
                admin_topic_changes.alter_config, self._broker, resource, validate_only
            )
            for resource in wanted
        }

    # --- groups (eoslog.client.admin_groups) ----------------------------------------------

    def list_consumer_groups(self, **kwargs: Any) -> Future[ListConsumerGroupsResult]:
        """Every group this broker knows (members now, or committed offsets), filtered by
        states= / types= (sets) as confluent's."""
        check_options("list_consumer_groups", kwargs, ("states", "types", "request_timeout"))
        states, types = kwargs.get("states"), kwargs.get("types")
        return answered(admin_groups.list_groups, self._broker.groups, states, types)

    def describe_consumer_groups(
        self, group_ids: list[str], **kwargs: Any
    ) -> dict[str, Future[ConsumerGroupDescription]]:
        """A ConsumerGroupDescription per group, or GROUP_ID_NOT_FOUND."""
        check_options(
            "describe_consumer_groups",
            kwargs,
            ("include_authorized_operations", "request_timeout"),
        )
        ids = admin_groups.group_id_list(group_ids, "described")
        groups = self._broker.groups
        return {group_id: answered(admin_groups.describe, groups, group_id) for group_id in ids}

    def list_consumer_group_offsets(
        self, list_consumer_group_offsets_request: list[ConsumerGroupTopicPartitions], **kwargs: Any
    ) -> dict[str, Future[ConsumerGroupTopicPartitions]]:
        """The group's committed offsets: of the partitions asked for (OFFSET_INVALID where
        there is none), or of every partition it has committed. require_stable=True:
        UNSTABLE_OFFSET_COMMIT while a transaction holds offsets for one of them."""
        check_options("list_consumer_group_offsets", kwargs, ("require_stable", "request_timeout"))
        request = admin_groups.one_request(list_consumer_group_offsets_request, "listing")
        admin_groups.check_listed_partitions(request)
        stable = bool(kwargs.get("require_stable", False))
        groups = self._broker.groups
        return {request.group_id: answered(admin_groups.committed, groups, request, stable)}

    def alter_consumer_group_offsets(
        self,
        alter_consumer_group_offsets_request: list[ConsumerGroupTopicPartitions],
        **kwargs: Any,
    ) -> dict[str, Future[ConsumerGroupTopicPartitions]]:
        """Commit these offsets for a group with no members (a plain commit, durable before
        the future is set); UNKNOWN_MEMBER_ID while the group has members,
        UNKNOWN_TOPIC_OR_PART for a partition the broker does not have."""
        check_options("alter_consumer_group_offsets", kwargs, ("request_timeout",))
        request = admin_groups.one_request(alter_consumer_group_offsets_request, "altering")
        admin_groups.check_altered_partitions(request)
        groups = self._broker.groups
        return {request.group_id: answered(admin_groups.alter, groups, request)}

    def delete_consumer_groups(
        self, group_ids: list[str], **kwargs: Any
    ) -> dict[str, Future[None]]:
        """Delete each group's committed offsets: None, NON_EMPTY_GROUP while it has members,
        GROUP_ID_NOT_FOUND for a group unknown here (GroupCoordinator.delete_group)."""
        check_options("delete_consumer_groups", kwargs, ("request_timeout",))
        ids = admin_groups.group_id_list(group_ids, "deleted")
        groups = self._broker.groups
        return {group_id: answered(groups.delete_group, group_id) for group_id in ids}

    # --- offsets ----------------------------------------------------------------------------

    def delete_records(
        self, topic_partition_offsets: list[TopicPartition], **kwargs: Any
    ) -> dict[TopicPartition, Future[DeletedRecords]]:
        """Delete the records below each TopicPartition's offset (OFFSET_END, -1: all of
        them) by moving the partition's log start offset up (Broker.delete_records; durable
        before the future is set): DeletedRecords(low_watermark), or OFFSET_OUT_OF_RANGE
        (past the high watermark), UNKNOWN_TOPIC_OR_PART, TOPIC_EXCEPTION (an internal
        topic), _INVALID_ARG (a partition named twice)."""
        check_options("delete_records", kwargs, ("operation_timeout", "request_timeout"))
        request = admin_topic_changes.check_delete_records(topic_partition_offsets)
        if admin_topic_changes.duplicated(request):
            return _all_refused(request, "Duplicate partitions not allowed")
        return {
            tp: answered(admin_topic_changes.delete_records, self._broker, tp) for tp in request
        }

    def list_offsets(
        self, topic_partition_offsets: dict[TopicPartition, OffsetSpec], **kwargs: Any
    ) -> dict[TopicPartition, Future[ListOffsetsResultInfo]]:
        """For each partition: OffsetSpec.earliest() the log start offset; latest() the high
        watermark (the last stable offset with isolation_level=IsolationLevel.READ_COMMITTED;
        the default is READ_UNCOMMITTED, as confluent's); for_timestamp(ms) the first offset
        whose record's timestamp is >= ms with that timestamp, or offset -1 when there is
        none (below the bound above); max_timestamp() the offset of the largest timestamp
        with that timestamp (offset -1 when none). UNKNOWN_TOPIC_OR_PART for a partition
        the broker does not have."""
        check_options("list_offsets", kwargs, ("isolation_level", "request_timeout"))
        if not isinstance(topic_partition_offsets, dict):
            raise TypeError(
                "Expected topic_partition_offsets to be dict of [TopicPartitions,OffsetSpec] "
                "for list offsets request"
            )
        isolation = kwargs.get("isolation_level", IsolationLevel.READ_UNCOMMITTED)
        if not isinstance(isolation, IsolationLevel):
            raise TypeError("isolation_level argument should be an IsolationLevel")
        for tp, spec in topic_partition_offsets.items():
            if not isinstance(tp, TopicPartition):
                raise TypeError("Key must be a TopicPartition")
            if not isinstance(spec, OffsetSpec):
                raise TypeError("Value must be a OffsetSpec")
            if tp.partition < 0:
                raise ValueError("partition index must be non-negative")
        committed = isolation is IsolationLevel.READ_COMMITTED
        return {
            tp: answered(self._list_offset, tp, spec, committed)
            for tp, spec in topic_partition_offsets.items()
        }

    def _list_offset(
        self, tp: TopicPartition, spec: OffsetSpec, committed: bool
    ) -> ListOffsetsResultInfo:
        log = self._broker.log(tp.topic, tp.partition)
        bound = log.last_stable_offset if committed else log.high_watermark
        if spec._value == OffsetSpec.EARLIEST:
            return ListOffsetsResultInfo(log.log_start_offset, -1, None)
        if spec._value == OffsetSpec.LATEST:
            return ListOffsetsResultInfo(bound, -1, None)
        if spec._value == OffsetSpec.MAX_TIMESTAMP:
            largest = log.largest_timestamp()
            if largest is None or largest[1] >= bound or largest[1] < log.log_start_offset:
                return ListOffsetsResultInfo(-1, -1, None)
            return ListOffsetsResultInfo(largest[1], largest[0], None)
        found = log.offset_for_timestamp(spec._value)
        if found is None or found[0] >= bound:
            return ListOffsetsResultInfo(-1, -1, None)
        return ListOffsetsResultInfo(found[0], found[1], None)

    # --- transactions (KIP-664; eoslog.client.admin_transactions) ---------------------------

    def list_transactions(self, **kwargs: Any) -> Future[list[TransactionListing]]:
        """Every transactional id the coordinator holds, as TransactionListing, filtered as
        Java's ListTransactionsOptions: state_filters, producer_id_filters (sets or lists),
        duration_filter_ms (in progress for longer than that)."""
        check_options(
            "list_transactions",
            kwargs,
            ("state_filters", "producer_id_filters", "duration_filter_ms", "request_timeout"),
        )
        keep = admin_transactions.listing_filter(kwargs)
        now_ms = self._broker.clock_ms()
        coordinator = self._broker.transactions
        return answered(admin_transactions.list_transactions, coordinator, keep, now_ms)

    def describe_transactions(
        self, transactional_ids: list[str], **kwargs: Any
    ) -> dict[str, Future[TransactionDescription]]:
        """A TransactionDescription per id, or TRANSACTIONAL_ID_NOT_FOUND."""
        check_options("describe_transactions", kwargs, ("request_timeout",))
        ids = non_empty_list(transactional_ids, str, "transactional id strings")
        coordinator = self._broker.transactions
        describe = admin_transactions.describe_transaction
        return {tid: answered(describe, coordinator, tid) for tid in ids}

    def describe_producers(
        self, partitions: list[TopicPartition], **kwargs: Any
    ) -> dict[TopicPartition, Future[list[ProducerState]]]:
        """Each partition's active producers (a list of ProducerState), or
        UNKNOWN_TOPIC_OR_PART."""
        check_options("describe_producers", kwargs, ("request_timeout",))
        wanted = admin_transactions.check_partitions(
            non_empty_list(partitions, TopicPartition, "TopicPartition objects")
        )
        return {tp: answered(admin_transactions.producers, self._broker, tp) for tp in wanted}

    def abort_transaction(self, spec: AbortTransactionSpec, **kwargs: Any) -> Future[None]:
        """ABORT the transaction the spec names on its partition, to clear a hanging one
        (TransactionCoordinator.abort_partition_transaction): UNKNOWN_TOPIC_OR_PART,
        INVALID_TXN_STATE (none open), INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED
        or CONCURRENT_TRANSACTIONS, nothing written."""
        check_options("abort_transaction", kwargs, ("request_timeout",))
        checked = admin_transactions.check_spec(spec)
        return answered(admin_transactions.abort, self._broker, checked)


def _each_topic_once(
    requests: Mapping[str, _R], named: list[str], work: Callable[[_R], None]
) -> dict[str, Future[None]]:
    """Each topic's request answered by work(request), except a topic the call names more
    than once: INVALID_REQUEST, as Kafka answers a duplicate topic."""
    return {
        name: answered(_raiser(KafkaError.INVALID_REQUEST, f"topic {name} is named twice"))
        if named.count(name) > 1
        else answered(work, request)
        for name, request in requests.items()
    }


def _validate_only(kwargs: Mapping[str, object]) -> bool:
    validate_only = kwargs.get("validate_only", False)
    if not isinstance(validate_only, bool):
        raise TypeError(
            f"Expected validate_only to be bool type, not {type(validate_only).__name__}"
        )
    return validate_only


def _all_refused(keys: list[_K], reason: str) -> dict[_K, Future[Any]]:
    """confluent's answer to a request naming a key twice: every future _INVALID_ARG."""
    return {key: answered(_raiser(KafkaError._INVALID_ARG, reason)) for key in keys}


def _raiser(code: int, reason: str) -> Callable[[], None]:
    def raise_it() -> None:
        raise refused(code, reason)

    return raise_it
