"""The transaction APIs of `eoslog serve` (docs/api.md "Wire protocol"; docs/coordinator.md §3):
InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit over the
broker's TransactionCoordinator and GroupCoordinator, and KIP-664's DescribeProducers,
DescribeTransactions and ListTransactions over the same queries the AdminClient makes
(eoslog.client.admin_transactions).

Which versions, and why (transactions v1 over the wire): every Kafka client a user points at
the server speaks transactions v1. librdkafka 2.x sends EndTxn v0-v1, kafka-python EndTxn up to
v3 and AddPartitionsToTxn up to v3, aiokafka v0-v1; each adds its partitions itself
(AddPartitionsToTxn, AddOffsetsToTxn) and keeps its producer epoch across transactions. So the
table stops below the versions of transactions v2 (KIP-890 part 2): EndTxn v0-v4 (v5 hands the
client a bumped epoch per transaction), TxnOffsetCommit v0-v4 (v5 adds the offsets partition
implicitly), AddPartitionsToTxn v0-v3 (v4 and up is the batched broker-to-broker form, verify
requests from partition leaders; there is no other broker). Those requests reach the
coordinator with transaction_version 0, as Kafka records them: the transaction ends at its own
epoch (TransactionCoordinator.end_transaction's v1 rules). A Java client of Kafka 4 also stays
on v1 here, as it moves to v2 only when a broker finalizes the transaction.version feature.
InitProducerId is served up to v5 (v3 adds KIP-360's producer id and epoch, with which a
client bumps its own epoch after an abortable error; v6 is KIP-939's two-phase commit, not
implemented), AddOffsetsToTxn v0-v4, DescribeProducers and DescribeTransactions v0 and
ListTransactions v0-v2.

Errors are Kafka's codes for eoslog's exceptions (eoslog.errors, eoslog.error_codes), with
Kafka's two translations: PRODUCER_FENCED goes to a client older than KIP-588's versions as
INVALID_PRODUCER_EPOCH (Kafka's KafkaApis does the same), and a storage failure of a coordinator
write is NOT_COORDINATOR (docs/coordinator.md §3.8), on which clients find the coordinator
again and retry. The generation and member fencing of TxnOffsetCommit v3+ (KIP-447) is the group
coordinator's (commit_transactional_offsets).

Thread safety: the handlers run on the server's loop; every coordinator call goes through
Context.call (the server's worker threads), since it may wait for an fsync or an id's lock.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Final

from kio.schema.errors import ErrorCode

from eoslog.coordinator.group_coordinator import ConsumerGroupMetadata, OffsetToCommit
from eoslog.errors import (
    KafkaError,
    KafkaException,
    KafkaStorageError,
    UnknownTopicOrPartitionError,
)
from eoslog.serve import messages
from eoslog.serve.messages import NO_THROTTLE, by_topic, code_of, response_module, to_milliseconds
from eoslog.serve.registry import Context, api, response_type

if TYPE_CHECKING:
    from eoslog.broker import Broker

# The client transaction version these requests are served at (module docstring).
WIRE_TRANSACTION_VERSION: Final = 0
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
# The first version of each API whose clients know PRODUCER_FENCED (KIP-588); older ones get
# INVALID_PRODUCER_EPOCH, which they treat as fenced too. TxnOffsetCommit never answers it
# (Kafka's group coordinator reports a stale producer as INVALID_PRODUCER_EPOCH), so no
# version of it does here.
_FENCED_SINCE: Final = {22: 4, 24: 2, 25: 2, 26: 2, 28: 2**15}


def error_code(error: KafkaException, request: Any) -> ErrorCode:
    """The Kafka error code answering `request` for `error` (module docstring)."""
    if isinstance(error, KafkaStorageError):
        return ErrorCode.not_coordinator
    code = code_of(error)
    if code == KafkaError.PRODUCER_FENCED and request.__version__ < _FENCED_SINCE.get(
        int(request.__api_key__), 0
    ):
        code = KafkaError.INVALID_PRODUCER_EPOCH
    return messages.error_code(code)


# --- InitProducerId (api key 22) ------------------------------------------------------------


@api(22, 0, 5)
async def init_producer_id(ctx: Context, request: Any) -> Any:
    """A new producer id (epoch 0) for an idempotent producer (no transactional id), whatever
    producer id it names, as Kafka does; for a transactional id, the coordinator's
    init_producer_id (fencing older producers, aborting what the id left open; KIP-360's
    expected producer with v3+)."""
    respond = response_type(request)
    transactional_id = request.transactional_id
    try:
        if transactional_id is None:
            producer_id, epoch = await ctx.call(ctx.broker.init_producer_id)
        else:
            expected = None
            if request.__version__ >= 3 and request.producer_id != NO_PRODUCER_ID:
                expected = (int(request.producer_id), int(request.producer_epoch))
            timeout_ms = to_milliseconds(request.transaction_timeout)
            producer_id, epoch = await ctx.call(
                ctx.broker.transactions.init_producer_id, transactional_id, timeout_ms, expected
            )
    except KafkaException as error:
        return respond(
            throttle_time=NO_THROTTLE,
            error_code=error_code(error, request),
            producer_id=NO_PRODUCER_ID,
            producer_epoch=NO_PRODUCER_EPOCH,
        )
    return respond(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        producer_id=producer_id,
        producer_epoch=epoch,
    )


# --- AddPartitionsToTxn (api key 24) --------------------------------------------------------


@api(24, 0, 3)
async def add_partitions_to_txn(ctx: Context, request: Any) -> Any:
    """The client's AddPartitionsToTxn: one answer for every partition, as Kafka gives it. A
    partition the broker does not have gets UNKNOWN_TOPIC_OR_PARTITION and the others
    OPERATION_NOT_ATTEMPTED, nothing added; otherwise the coordinator's answer for all."""
    respond = response_type(request)
    wanted = [
        (topic.name, int(partition))
        for topic in request.v3_and_below_topics
        for partition in topic.partitions
    ]
    unknown = await ctx.call(_unknown_partitions, ctx.broker, wanted)
    if unknown:
        codes = {
            tp: ErrorCode.unknown_topic_or_partition
            if tp in unknown
            else ErrorCode.operation_not_attempted
            for tp in wanted
        }
    else:
        add = functools.partial(
            ctx.broker.transactions.add_partitions,
            request.v3_and_below_transactional_id,
            int(request.v3_and_below_producer_id),
            int(request.v3_and_below_producer_epoch),
            wanted,
            transaction_version=WIRE_TRANSACTION_VERSION,
        )
        code = await _coordinator_answer(ctx, request, add)
        codes = dict.fromkeys(wanted, code)
    schema = response_module(24, request.__version__)
    topics = by_topic(
        schema.AddPartitionsToTxnTopicResult,
        request.v3_and_below_topics,
        [[codes[(t.name, int(p))] for p in t.partitions] for t in request.v3_and_below_topics],
        lambda partition, code: schema.AddPartitionsToTxnPartitionResult(
            partition_index=partition, partition_error_code=code
        ),
        partitions_field="results_by_partition",
    )
    return respond(throttle_time=NO_THROTTLE, results_by_topic_v3_and_below=topics)


def _unknown_partitions(broker: Broker, wanted: list[tuple[str, int]]) -> set[tuple[str, int]]:
    """The partitions of `wanted` the broker does not have (on a worker thread: the lookup
    may wait for the broker's lock while a topic is created or deleted)."""
    unknown = set()
    for topic_name, partition in wanted:
        try:
            broker.log(topic_name, partition)
        except UnknownTopicOrPartitionError:
            unknown.add((topic_name, partition))
    return unknown


async def _coordinator_answer(
    ctx: Context, request: Any, call: functools.partial[Any]
) -> ErrorCode:
    """Run a coordinator call on the worker threads: NONE, or the code for its error."""
    try:
        await ctx.call(call)
    except KafkaException as error:
        return error_code(error, request)
    return ErrorCode.none


# --- AddOffsetsToTxn (api key 25) -----------------------------------------------------------


@api(25, 0, 4)
async def add_offsets_to_txn(ctx: Context, request: Any) -> Any:
    """The group's `__consumer_offsets` partition joins the transaction, so that its
    TxnOffsetCommit can follow (docs/coordinator.md §3.4)."""
    partition = ctx.broker.groups.offsets_partition(request.group_id)
    add = functools.partial(
        ctx.broker.transactions.add_partitions,
        request.transactional_id,
        int(request.producer_id),
        int(request.producer_epoch),
        [partition],
        transaction_version=WIRE_TRANSACTION_VERSION,
    )
    code = await _coordinator_answer(ctx, request, add)
    return response_type(request)(throttle_time=NO_THROTTLE, error_code=code)


# --- EndTxn (api key 26) --------------------------------------------------------------------


@api(26, 0, 4)
async def end_txn(ctx: Context, request: Any) -> Any:
    """Commit or abort under the v1 rules (docs/coordinator.md §3.6): answered once the markers
    are written, so a read_committed reader sees the outcome as soon as the client does."""
    end = functools.partial(
        ctx.broker.transactions.end_transaction,
        request.transactional_id,
        int(request.producer_id),
        int(request.producer_epoch),
        bool(request.committed),
        transaction_version=WIRE_TRANSACTION_VERSION,
    )
    code = await _coordinator_answer(ctx, request, end)
    return response_type(request)(throttle_time=NO_THROTTLE, error_code=code)


# --- TxnOffsetCommit (api key 28) -----------------------------------------------------------


@api(28, 0, 4)
async def txn_offset_commit(ctx: Context, request: Any) -> Any:
    """The offsets written pending in the transaction (docs/coordinator.md §3.5), all or none:
    one code for every partition. From v3 the group's generation and member fence a zombie
    (KIP-447), as the group coordinator checks them."""
    respond = response_type(request)
    generation_id = getattr(request, "generation_id", -1)
    metadata = ConsumerGroupMetadata(
        request.group_id,
        int(generation_id),
        getattr(request, "member_id", ""),
        getattr(request, "group_instance_id", None),
    )
    offsets = [
        OffsetToCommit(
            topic.name,
            int(partition.partition_index),
            int(partition.committed_offset),
            partition.committed_metadata or "",
            int(getattr(partition, "committed_leader_epoch", -1)),
        )
        for topic in request.topics
        for partition in topic.partitions
    ]
    commit = functools.partial(
        ctx.broker.groups.commit_transactional_offsets,
        int(request.producer_id),
        int(request.producer_epoch),
        metadata,
        offsets,
    )
    code = await _coordinator_answer(ctx, request, commit)
    schema = response_module(28, request.__version__)
    topics = by_topic(
        schema.TxnOffsetCommitResponseTopic,
        request.topics,
        [[code] * len(topic.partitions) for topic in request.topics],
        lambda partition, found: schema.TxnOffsetCommitResponsePartition(
            partition_index=partition.partition_index, error_code=found
        ),
    )
    return respond(throttle_time=NO_THROTTLE, topics=topics)
