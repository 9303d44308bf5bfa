"""The data-plane APIs of `eoslog serve` but Fetch and ListOffsets (eoslog.serve.fetch_api):
ApiVersions, Metadata, Produce, FindCoordinator, DescribeCluster (docs/api.md "Wire
protocol"). Each answers every version it registers; eoslog.serve.messages.build drops the
fields an older version lacks.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import uuid
from typing import TYPE_CHECKING, Any, Final

from eoslog.broker import INTERNAL_TOPICS
from eoslog.client import metadata as client_metadata
from eoslog.errors import InvalidTopicError, KafkaError, KafkaException
from eoslog.serve.connection import api_versions_table
from eoslog.serve.messages import (
    NO_THROTTLE,
    build,
    by_topic,
    code_of,
    error_code,
    response_module,
)
from eoslog.serve.registry import Context, Later, ProtocolViolation, api

if TYPE_CHECKING:
    from eoslog.broker import Broker
    from eoslog.log.partition import AppendInfo, PartitionLog

# Kafka's Uuid.ZERO_UUID: "no topic id". Clients address topics by name at the versions served
# (Fetch stops at v12, before topic ids).
NO_TOPIC_ID: Final = uuid.UUID(int=0)
# A partition's leader epoch, unknown: clients then skip the epoch validation (KIP-320)
# that would ask OffsetForLeaderEpoch, which a single node with no epochs does not serve.
NO_LEADER_EPOCH: Final = -1
_GROUP_KEY, _TRANSACTION_KEY = 0, 1
# A directory's cluster id is a function of its path (eoslog.client.metadata.cluster_id).
cluster_id = functools.lru_cache(maxsize=16)(client_metadata.cluster_id)


@api(18, 0, 4)
async def api_versions(ctx: Context, request: Any) -> Any:
    module = response_module(18, request.__version__)
    keys = tuple(
        build(module.ApiVersion, api_key=key, min_version=low, max_version=high)
        for key, low, high in api_versions_table()
    )
    return build(
        module.ApiVersionsResponse,
        error_code=error_code(KafkaError.NO_ERROR),
        api_keys=keys,
        throttle_time=NO_THROTTLE,
    )


# --- Metadata -------------------------------------------------------------------------------


def _topic_answers(
    broker: Broker, names: list[str] | None, auto_create: bool
) -> list[tuple[str, int, int]]:
    """(name, error code, partition count) of each topic asked for (None: every topic),
    creating unknown ones as Broker.topic_metadata does. Blocking: a worker thread's."""
    if names is None:
        return [(name, 0, meta.num_partitions) for name, meta in broker.list_topics().items()]
    answers = []
    for name in names:
        try:
            answers.append(
                (name, 0, broker.topic_metadata(name, auto_create=auto_create).num_partitions)
            )
        except KafkaException as error:
            answers.append((name, code_of(error), 0))
    return answers


@api(3, 0, 12)
async def metadata(ctx: Context, request: Any) -> Any:
    version = request.__version__
    module = response_module(3, version)
    names: list[str] | None
    if request.topics is None or (version == 0 and not request.topics):
        names = None  # v0 asks for every topic with an empty list, later versions with null
    else:
        names = [topic.name for topic in request.topics]
        if any(name is None for name in names):
            raise ProtocolViolation("a Metadata request by topic id (no topic ids are served)")
    auto_create = getattr(request, "allow_auto_topic_creation", True)  # v4+; before: yes
    answers = await ctx.call(_topic_answers, ctx.broker, names, auto_create)
    node = ctx.node_id
    topics = tuple(
        build(
            module.MetadataResponseTopic,
            error_code=error_code(code),
            name=name,
            topic_id=NO_TOPIC_ID,
            is_internal=name in INTERNAL_TOPICS,
            partitions=tuple(
                build(
                    module.MetadataResponsePartition,
                    error_code=error_code(0),
                    partition_index=index,
                    leader_id=node,
                    leader_epoch=NO_LEADER_EPOCH,
                    replica_nodes=(node,),
                    isr_nodes=(node,),
                    offline_replicas=(),
                )
                for index in range(count)
            ),
        )
        for name, code, count in answers
    )
    return build(
        module.MetadataResponse,
        throttle_time=NO_THROTTLE,
        brokers=(build(module.MetadataResponseBroker, node_id=node, host=ctx.host, port=ctx.port),),
        cluster_id=cluster_id(ctx.broker.path),
        controller_id=node,
        topics=topics,
    )


# --- Produce --------------------------------------------------------------------------------

_ACKS: Final = (0, 1, -1)


class _Appended:
    """One partition's answer to a Produce: the append's result, or the error code."""

    __slots__ = ("error", "info", "log", "log_start_offset", "message")

    def __init__(self) -> None:
        self.info: AppendInfo | None = None
        self.log: PartitionLog | None = None  # the log appended to
        self.error = 0
        self.message: str | None = None
        self.log_start_offset = -1


def _append_all(broker: Broker, request: Any) -> list[list[_Appended]]:
    """Append every partition's batch bytes unchanged (PartitionLog.append_batch validates
    them as Kafka's leader does). Blocking: a worker thread's."""
    answers: list[list[_Appended]] = []
    for topic in request.topic_data:
        row = []
        for partition in topic.partition_data:
            answer = _Appended()
            row.append(answer)
            try:
                if topic.name in INTERNAL_TOPICS:
                    raise InvalidTopicError(f"{topic.name} is an internal topic")
                log = broker.log(topic.name, partition.index)
                if not partition.records:
                    raise KafkaException(KafkaError(KafkaError.INVALID_RECORD, "no records"))
                answer.info = log.append_batch(partition.records)
                answer.log_start_offset = log.log_start_offset
                answer.log = log
            except KafkaException as error:
                answer.error, answer.message = code_of(error), str(error)
        answers.append(row)
    return answers


def _flush_all(answers: list[list[_Appended]]) -> None:
    """Wait for the fsync covering each partition's append (group commit: concurrent
    callers share one). Blocking: a worker thread's."""
    for row in answers:
        for answer in row:
            if answer.log is None or answer.info is None:
                continue
            try:
                answer.log.flush_through(answer.info.last_offset + 1)
            except KafkaException as error:
                answer.error, answer.message = code_of(error), str(error)


async def _durable_answer(
    ctx: Context, module: Any, request: Any, answers: list[list[_Appended]]
) -> Any:
    await ctx.call(_flush_all, answers)
    return _produce_response(module, request, answers)


def _append_time(info: AppendInfo | None) -> datetime.datetime | None:
    if info is None or info.log_append_time_ms < 0:
        return None
    return datetime.datetime.fromtimestamp(info.log_append_time_ms / 1000, tz=datetime.UTC)


@api(0, 3, 11)
async def produce(ctx: Context, request: Any) -> Any:
    """acks maps onto the broker's durability (docs/api.md "Wire protocol"): acks=1 answers
    once the batch is appended, which is what produce_batch() promises; acks=all (-1) once
    it is as durable as a delivery report in this process is (under "commit" the group fsync
    covering it); acks=0 gets no answer, and a failed append closes the connection, as Kafka
    closes it to tell such a producer."""
    module = response_module(0, request.__version__)
    acks = request.acks
    if acks not in _ACKS:
        answers = [
            [_refused(KafkaError.INVALID_REQUIRED_ACKS)] * len(t.partition_data)
            for t in request.topic_data
        ]
    else:
        answers = await ctx.call(_append_all, ctx.broker, request)
        if acks == -1 and ctx.broker.durability == "commit":
            # Applied; the fsync is awaited apart, so that the connection's next request
            # starts meanwhile and pipelined requests share fsyncs (registry.Later).
            return Later(asyncio.ensure_future(_durable_answer(ctx, module, request, answers)))
    if acks == 0:
        failed = [a.message for row in answers for a in row if a.error]
        if failed:
            raise ProtocolViolation(f"an acks=0 Produce failed: {failed[0]}")
        return None
    return _produce_response(module, request, answers)


def _produce_response(module: Any, request: Any, answers: list[list[_Appended]]) -> Any:
    def answer(partition: Any, appended: _Appended) -> Any:
        return build(
            module.PartitionProduceResponse,
            index=partition.index,
            error_code=error_code(appended.error),
            base_offset=appended.info.base_offset if appended.info else -1,
            log_append_time=_append_time(appended.info),
            log_start_offset=appended.log_start_offset,
            record_errors=(),
            error_message=appended.message,
        )

    topics = by_topic(
        module.TopicProduceResponse,
        request.topic_data,
        answers,
        answer,
        partitions_field="partition_responses",
        request_partitions="partition_data",
    )
    return build(module.ProduceResponse, responses=topics, throttle_time=NO_THROTTLE)


def _refused(code: int) -> _Appended:
    answer = _Appended()
    answer.error = code
    return answer


# --- FindCoordinator, DescribeCluster -------------------------------------------------------


@api(10, 0, 4)
async def find_coordinator(ctx: Context, request: Any) -> Any:
    """This node coordinates every group and every transactional id."""
    version = request.__version__
    module = response_module(10, version)
    key_type = getattr(request, "key_type", _GROUP_KEY)
    code = 0 if key_type in (_GROUP_KEY, _TRANSACTION_KEY) else KafkaError.INVALID_REQUEST
    node, host, port = (ctx.node_id, ctx.host, ctx.port) if code == 0 else (-1, "", -1)
    if version < 4:
        return build(
            module.FindCoordinatorResponse,
            throttle_time=NO_THROTTLE,
            error_code=error_code(code),
            error_message=None,
            node_id=node,
            host=host,
            port=port,
        )
    coordinators = tuple(
        build(
            module.Coordinator,
            key=key,
            node_id=node,
            host=host,
            port=port,
            error_code=error_code(code),
            error_message=None,
        )
        for key in request.coordinator_keys
    )
    return build(
        module.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=coordinators
    )


@api(60, 0, 1)
async def describe_cluster(ctx: Context, request: Any) -> Any:
    module = response_module(60, request.__version__)
    broker = build(
        module.DescribeClusterBroker, broker_id=ctx.node_id, host=ctx.host, port=ctx.port
    )
    return build(
        module.DescribeClusterResponse,
        throttle_time=NO_THROTTLE,
        error_code=error_code(0),
        error_message=None,
        cluster_id=cluster_id(ctx.broker.path),
        controller_id=ctx.node_id,
        brokers=(broker,),
    )
