"""The admin APIs of `eoslog serve`: CreateTopics, DeleteTopics, CreatePartitions,
DescribeConfigs, IncrementalAlterConfigs, DeleteRecords (docs/api.md "Wire protocol").

Each is the in-process AdminClient's call (eoslog.client.admin) on the wire: the request's
items become the AdminClient's arguments, one item at a time, and its answer or error
becomes the item's result and Kafka error code, so the checks and the crash-safe changes
are the AdminClient's and the broker's, not written twice. An item the AdminClient refuses
as a bad argument (TypeError, ValueError) is INVALID_REQUEST; an item named twice in one
request is INVALID_REQUEST, as Kafka answers it.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Final

from eoslog.broker_config import BROKER_DEFAULTS
from eoslog.client.admin_types import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from eoslog.client.message import TopicPartition
from eoslog.errors import KafkaError, KafkaException
from eoslog.log.config import BROKER_KEYS
from eoslog.serve.data_apis import NO_TOPIC_ID
from eoslog.serve.messages import NO_THROTTLE, build, by_topic, code_of, error_code, response_module
from eoslog.serve.registry import Context, api

if TYPE_CHECKING:
    from eoslog.broker import Broker
    from eoslog.client.admin import AdminClient

# DescribeConfigs' config_type (v3+): the types Kafka's ConfigDefs give the topic configs eoslog
# keeps (log/config.py TOPIC_KEYS, whose broker-level names map through BROKER_KEYS) and the
# broker's own settings (broker_config.BROKER_DEFAULTS); UNKNOWN (0) for any other name.
_CONFIG_BOOLEAN: Final = 1
_CONFIG_STRING: Final = 2
_CONFIG_INT: Final = 3
_CONFIG_LONG: Final = 5
_CONFIG_DOUBLE: Final = 6
_CONFIG_LIST: Final = 7
_CONFIG_TYPES: Final = {
    "segment.bytes": _CONFIG_INT,
    "segment.ms": _CONFIG_LONG,
    "segment.index.bytes": _CONFIG_INT,
    "index.interval.bytes": _CONFIG_INT,
    "retention.ms": _CONFIG_LONG,
    "retention.bytes": _CONFIG_LONG,
    "max.message.bytes": _CONFIG_INT,
    "message.timestamp.type": _CONFIG_STRING,
    "message.timestamp.before.max.ms": _CONFIG_LONG,
    "message.timestamp.after.max.ms": _CONFIG_LONG,
    "remote.storage.enable": _CONFIG_BOOLEAN,
    "local.retention.ms": _CONFIG_LONG,
    "local.retention.bytes": _CONFIG_LONG,
    "cleanup.policy": _CONFIG_LIST,
    "min.cleanable.dirty.ratio": _CONFIG_DOUBLE,
    "min.compaction.lag.ms": _CONFIG_LONG,
    "max.compaction.lag.ms": _CONFIG_LONG,
    "delete.retention.ms": _CONFIG_LONG,
    "log.cleaner.io.max.bytes.per.second": _CONFIG_DOUBLE,
    "offsets.retention.minutes": _CONFIG_INT,
    "offsets.retention.check.interval.ms": _CONFIG_LONG,
    "auto.create.topics.enable": _CONFIG_BOOLEAN,
    "log.retention.check.interval.ms": _CONFIG_LONG,
    "queued.max.request.bytes": _CONFIG_LONG,
}
_CONFIG_TYPE_UNKNOWN: Final = 0
_UNKNOWN_TOPIC_ID: Final = 100


class Outcome:
    """One item's answer: the AdminClient's result, or the Kafka code and message."""

    __slots__ = ("code", "message", "result")

    def __init__(self, result: Any = None, code: int = 0, message: str | None = None) -> None:
        self.result = result
        self.code = code
        self.message = message

    def error_fields(self) -> dict[str, Any]:
        """The error_code and error_message fields of the item's answer."""
        return {"error_code": error_code(self.code), "error_message": self.message}


def outcome(call: Callable[[], Future[Any]]) -> Outcome:
    """Run one AdminClient call for one item and take its answer."""
    try:
        return Outcome(call().result())
    except KafkaException as error:
        return Outcome(code=code_of(error), message=str(error))
    except (TypeError, ValueError) as error:  # the AdminClient refuses the argument itself
        return Outcome(code=KafkaError.INVALID_REQUEST, message=str(error))


def _named_twice(keys: Iterable[object]) -> set[object]:
    return {key for key, count in Counter(keys).items() if count > 1}


def _each(keys: list[Any], answer: Callable[[Any], Outcome]) -> list[Outcome]:
    """answer(key) for each key, and INVALID_REQUEST for a key named twice."""
    twice = _named_twice(keys)
    return [
        Outcome(code=KafkaError.INVALID_REQUEST, message=f"{key!r} is named more than once")
        if key in twice
        else answer(key)
        for key in keys
    ]


def _single(result: dict[Any, Future[Any]]) -> Future[Any]:
    (future,) = result.values()
    return future


# --- topics ---------------------------------------------------------------------------------


def _create_topics(broker: Broker, request: Any) -> list[tuple[Outcome, int, Any]]:
    """Each topic's outcome, and once created its partition count and configs."""
    admin = broker.admin()
    topics = {topic.name: topic for topic in request.topics}

    def create(name: str) -> Outcome:
        topic = topics[name]
        configs = {config.name: config.value for config in topic.configs}
        if any(value is None for value in configs.values()):
            return Outcome(code=KafkaError.INVALID_CONFIG, message="a config with a null value")
        assignment = [list(a.broker_ids) for a in sorted(topic.assignments, key=_index)] or None
        new = NewTopic(name, topic.num_partitions, topic.replication_factor, assignment, configs)
        return outcome(
            lambda: _single(admin.create_topics([new], validate_only=request.validate_only))
        )

    names = [topic.name for topic in request.topics]
    answers = []
    for name, done in zip(names, _each(names, create), strict=True):
        count, configs = -1, None
        if done.code == 0 and not request.validate_only:
            count = broker.topic_metadata(name).num_partitions
            configs = _described(admin, ResourceType.TOPIC, name, None).result
        answers.append((done, count, configs))
    return answers


def _index(assignment: Any) -> int:
    return int(assignment.partition_index)


@api(19, 2, 7)
async def create_topics(ctx: Context, request: Any) -> Any:
    module = response_module(19, request.__version__)
    answers = await ctx.call(_create_topics, ctx.broker, request)
    results = tuple(
        build(
            module.CreatableTopicResult,
            name=topic.name,
            topic_id=NO_TOPIC_ID,
            **done.error_fields(),
            topic_config_error_code=0,
            num_partitions=count,
            replication_factor=1 if done.code == 0 else -1,
            configs=_creatable_configs(module, configs),
        )
        for topic, (done, count, configs) in zip(request.topics, answers, strict=True)
    )
    return build(module.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=results)


def _creatable_configs(module: Any, entries: dict[str, ConfigEntry] | None) -> Any:
    """A created topic's configs (v5+; None for a failure or before v5)."""
    if entries is None or not hasattr(module, "CreatableTopicConfigs"):
        return None
    return tuple(
        build(
            module.CreatableTopicConfigs,
            name=entry.name,
            value=entry.value,
            read_only=entry.is_read_only,
            config_source=entry.source.value,
            is_sensitive=entry.is_sensitive,
        )
        for entry in entries.values()
    )


def _delete_topics(admin: AdminClient, names: list[str | None]) -> list[Outcome]:
    def delete(name: str | None) -> Outcome:
        if name is None:
            return Outcome(code=_UNKNOWN_TOPIC_ID, message="topics are deleted by name")
        return outcome(lambda: _single(admin.delete_topics([name])))

    return _each(names, delete)


@api(20, 1, 6)
async def delete_topics(ctx: Context, request: Any) -> Any:
    module = response_module(20, request.__version__)
    names = list(getattr(request, "topic_names", None) or [t.name for t in request.topics])
    answers = await ctx.call(_delete_topics, ctx.broker.admin(), names)
    results = tuple(
        build(
            module.DeletableTopicResult,
            name=name,
            topic_id=NO_TOPIC_ID,
            **done.error_fields(),
        )
        for name, done in zip(names, answers, strict=True)
    )
    return build(module.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=results)


def _create_partitions(admin: AdminClient, request: Any) -> list[Outcome]:
    topics = {topic.name: topic for topic in request.topics}

    def grow(name: str) -> Outcome:
        topic = topics[name]
        assignments = topic.assignments
        assignment = None if assignments is None else [list(a.broker_ids) for a in assignments]
        new = NewPartitions(name, topic.count, assignment)
        return outcome(
            lambda: _single(admin.create_partitions([new], validate_only=request.validate_only))
        )

    return _each([topic.name for topic in request.topics], grow)


@api(37, 0, 3)
async def create_partitions(ctx: Context, request: Any) -> Any:
    module = response_module(37, request.__version__)
    answers = await ctx.call(_create_partitions, ctx.broker.admin(), request)
    results = tuple(
        build(
            module.CreatePartitionsTopicResult,
            name=topic.name,
            **done.error_fields(),
        )
        for topic, done in zip(request.topics, answers, strict=True)
    )
    return build(module.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=results)


# --- configs --------------------------------------------------------------------------------


def _resource(resource_type: int | ResourceType, name: str) -> ConfigResource:
    """ValueError for a resource type Kafka does not define."""
    return ConfigResource(ResourceType(resource_type), name)


def _described(
    admin: AdminClient, resource_type: int | ResourceType, name: str, keys: Any
) -> Outcome:
    """One resource's configs ({name: ConfigEntry}, only `keys` unless None)."""

    def describe() -> Future[Any]:
        kind = (
            resource_type
            if isinstance(resource_type, ResourceType)
            else ResourceType(resource_type)
        )
        return _single(admin.describe_configs([ConfigResource(kind, name)]))

    done = outcome(describe)
    if done.code == 0 and keys is not None:
        done.result = {key: entry for key, entry in done.result.items() if key in set(keys)}
    return done


@api(32, 1, 4)
async def describe_configs(ctx: Context, request: Any) -> Any:
    module = response_module(32, request.__version__)
    admin = ctx.broker.admin()
    answers = [
        await ctx.call(_described, admin, r.resource_type, r.resource_name, r.configuration_keys)
        for r in request.resources
    ]
    results = tuple(
        build(
            module.DescribeConfigsResult,
            **done.error_fields(),
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
            configs=() if done.code else tuple(_config(module, e) for e in done.result.values()),
        )
        for resource, done in zip(request.resources, answers, strict=True)
    )
    return build(module.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=results)


def _config(module: Any, entry: ConfigEntry) -> Any:
    return build(
        module.DescribeConfigsResourceResult,
        name=entry.name,
        value=entry.value,
        read_only=entry.is_read_only,
        is_default=entry.is_default,  # v0 only
        config_source=entry.source.value,
        is_sensitive=entry.is_sensitive,
        synonyms=(),
        config_type=_config_type(entry.name),
        documentation=None,
    )


def _config_type(name: str) -> int:
    """Kafka's type of a config eoslog describes; the broker settings not in the table are
    Kafka INTs (partition counts, segment sizes, timeouts in ms, connection limits)."""
    key = BROKER_KEYS.get(name, name)
    if key in _CONFIG_TYPES:
        return _CONFIG_TYPES[key]
    return _CONFIG_INT if key in BROKER_DEFAULTS else _CONFIG_TYPE_UNKNOWN


def _alter_configs(admin: AdminClient, request: Any) -> list[Outcome]:
    def alter(key: tuple[int, str]) -> Outcome:
        resource = resources[key]

        def call() -> Future[Any]:
            altered = _resource(resource.resource_type, resource.resource_name)
            for config in resource.configs:
                operation = AlterConfigOpType(config.config_operation)
                altered.add_incremental_config(
                    ConfigEntry(config.name, config.value, incremental_operation=operation)
                )
            if not altered.incremental_configs:
                done: Future[None] = Future()
                done.set_result(None)  # nothing to change: Kafka answers success
                return done
            return _single(
                admin.incremental_alter_configs([altered], validate_only=request.validate_only)
            )

        return outcome(call)

    resources = {(r.resource_type, r.resource_name): r for r in request.resources}
    return _each([(r.resource_type, r.resource_name) for r in request.resources], alter)


@api(44, 0, 1)
async def incremental_alter_configs(ctx: Context, request: Any) -> Any:
    module = response_module(44, request.__version__)
    answers = await ctx.call(_alter_configs, ctx.broker.admin(), request)
    results = tuple(
        build(
            module.AlterConfigsResourceResponse,
            **done.error_fields(),
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        for resource, done in zip(request.resources, answers, strict=True)
    )
    return build(
        module.IncrementalAlterConfigsResponse, throttle_time=NO_THROTTLE, responses=results
    )


# --- DeleteRecords --------------------------------------------------------------------------


def _delete_records(admin: AdminClient, request: Any) -> list[list[Outcome]]:
    keys = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    twice = _named_twice(keys)
    answers = []
    for topic in request.topics:
        row = []
        for partition in topic.partitions:
            if (topic.name, partition.partition_index) in twice:
                row.append(Outcome(code=KafkaError.INVALID_REQUEST))
                continue
            tp = TopicPartition(topic.name, partition.partition_index, partition.offset)
            row.append(outcome(functools.partial(_deleted_below, admin, tp)))
        answers.append(row)
    return answers


def _deleted_below(admin: AdminClient, tp: TopicPartition) -> Future[Any]:
    return _single(admin.delete_records([tp]))


@api(21, 0, 2)
async def delete_records(ctx: Context, request: Any) -> Any:
    module = response_module(21, request.__version__)
    answers = await ctx.call(_delete_records, ctx.broker.admin(), request)

    def answer(partition: Any, done: Outcome) -> Any:
        return build(
            module.DeleteRecordsPartitionResult,
            partition_index=partition.partition_index,
            low_watermark=done.result.low_watermark if done.code == 0 else -1,
            error_code=error_code(done.code),
        )

    topics = by_topic(module.DeleteRecordsTopicResult, request.topics, answers, answer)
    return build(module.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=topics)
