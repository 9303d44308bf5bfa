"""KIP-664's transaction queries over the wire (docs/api.md "Wire protocol"): DescribeProducers
v0, DescribeTransactions v0 and ListTransactions v0-v2, answered from the same coordinator and
partition queries as the AdminClient's in-process calls (eoslog.client.admin_transactions), so
`kafka-transactions.sh` and the Java AdminClient see what `eoslog transactions` sees. Kafka's
fourth tool, the abort of a hanging transaction, is a WriteTxnMarkers to the partition leader,
a broker-to-broker API this server does not serve (`eoslog transactions DIR abort` does it).

Thread safety: as eoslog.serve.txn_apis; the queries run on the worker threads (each takes an
id's or a partition's lock).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from kio.schema.errors import ErrorCode

from eoslog.client import admin_transactions
from eoslog.client.admin_transaction_types import TransactionListing, TransactionState
from eoslog.client.message import TopicPartition
from eoslog.errors import KafkaException
from eoslog.serve.messages import NO_THROTTLE, code_of, error_code, milliseconds, response_module
from eoslog.serve.registry import Context, api, response_type

if TYPE_CHECKING:
    from eoslog.broker import Broker
    from eoslog.coordinator.transaction_state import TransitionTarget

# Kafka writes -1 for "no transaction in progress"; kio's datetime field takes a datetime, so
# the instant one millisecond before the epoch stands for it (written as -1).
NO_START_TIME: Final = datetime.datetime.fromtimestamp(-0.001, datetime.UTC)
_KNOWN_STATES: Final = {state.value: state for state in TransactionState}


# --- DescribeProducers (api key 61) ---------------------------------------------------------


@api(61, 0, 0)
async def describe_producers(ctx: Context, request: Any) -> Any:
    """Each partition's active producers (admin_transactions.producers), or
    UNKNOWN_TOPIC_OR_PARTITION for a partition the broker does not have."""
    respond = response_type(request)
    schema = response_module(int(request.__api_key__), request.__version__)
    topics = []
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            tp = TopicPartition(topic.name, int(index))
            try:
                found = await ctx.call(admin_transactions.producers, ctx.broker, tp)
            except KafkaException as error:
                partitions.append(
                    schema.PartitionResponse(
                        partition_index=index,
                        error_code=error_code(code_of(error)),
                        error_message=str(error),
                        active_producers=(),
                    )
                )
                continue
            partitions.append(
                schema.PartitionResponse(
                    partition_index=index,
                    error_code=ErrorCode.none,
                    error_message=None,
                    active_producers=tuple(_producer_state(schema, state) for state in found),
                )
            )
        topics.append(schema.TopicResponse(name=topic.name, partitions=tuple(partitions)))
    return respond(throttle_time=NO_THROTTLE, topics=tuple(topics))


def _producer_state(schema: Any, state: Any) -> Any:
    return schema.ProducerState(
        producer_id=state.producer_id,
        producer_epoch=state.producer_epoch,
        last_sequence=state.last_sequence,
        last_timestamp=state.last_timestamp_ms,
        coordinator_epoch=-1 if state.coordinator_epoch is None else state.coordinator_epoch,
        current_txn_start_offset=(
            -1
            if state.current_transaction_start_offset is None
            else state.current_transaction_start_offset
        ),
    )


# --- DescribeTransactions (api key 65) ------------------------------------------------------


@api(65, 0, 0)
async def describe_transactions(ctx: Context, request: Any) -> Any:
    """Each id's state, producer, timeout, start time and partitions, or
    TRANSACTIONAL_ID_NOT_FOUND for an id the coordinator does not hold."""
    respond = response_type(request)
    schema = response_module(int(request.__api_key__), request.__version__)
    states = []
    for transactional_id in request.transactional_ids:
        try:
            found = await ctx.call(
                admin_transactions.describe_transaction,
                ctx.broker.transactions,
                transactional_id,
            )
        except KafkaException as error:
            states.append(
                schema.TransactionState(
                    error_code=error_code(code_of(error)),
                    transactional_id=transactional_id,
                    transaction_state="",
                    transaction_timeout=NO_THROTTLE,
                    transaction_start_time=NO_START_TIME,
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=(),
                )
            )
            continue
        states.append(_description(schema, transactional_id, found))
    return respond(throttle_time=NO_THROTTLE, transaction_states=tuple(states))


def _description(schema: Any, transactional_id: str, found: Any) -> Any:
    start_ms = found.transaction_start_time_ms
    topics: dict[str, list[int]] = {}
    for tp in found.topic_partitions:
        topics.setdefault(tp.topic, []).append(tp.partition)
    return schema.TransactionState(
        error_code=ErrorCode.none,
        transactional_id=transactional_id,
        transaction_state=found.state.value,
        transaction_timeout=milliseconds(found.transaction_timeout_ms),
        transaction_start_time=(
            NO_START_TIME
            if start_ms is None
            else datetime.datetime.fromtimestamp(start_ms / 1000, datetime.UTC)
        ),
        producer_id=found.producer_id,
        producer_epoch=found.producer_epoch,
        topics=tuple(
            schema.TopicData(topic=topic, partitions=tuple(partitions))
            for topic, partitions in topics.items()
        ),
    )


# --- ListTransactions (api key 66) ----------------------------------------------------------


@api(66, 0, 2)
async def list_transactions(ctx: Context, request: Any) -> Any:
    """The ids the coordinator holds, filtered by state, producer id, (v1) how long their
    transaction has been running, as admin_transactions.listing_filter reads the filters, and
    (v2, KIP-1152) an id pattern the whole id must match (Java's Pattern.matches; Python's re
    reads the patterns users write the same way), INVALID_REGULAR_EXPRESSION if it does not
    compile. A state filter Kafka does not know is echoed back in unknown_state_filters; when
    state filters were given and none is known, nothing matches (Kafka's coordinator)."""
    respond = response_type(request)
    schema = response_module(int(request.__api_key__), request.__version__)
    names = list(request.state_filters)
    known = [_KNOWN_STATES[name] for name in names if name in _KNOWN_STATES]
    unknown = tuple(name for name in names if name not in _KNOWN_STATES)
    try:
        pattern = _id_pattern(getattr(request, "transactional_id_pattern", None))
    except re.error:
        return respond(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.invalid_regular_expression,
            unknown_state_filters=unknown,
            transaction_states=(),
        )
    listings: list[TransactionListing] = []
    if not names or known:
        keep = admin_transactions.listing_filter(
            {
                "state_filters": known,
                "producer_id_filters": [int(pid) for pid in request.producer_id_filters],
                "duration_filter_ms": int(getattr(request, "duration_filter", -1)),
            }
        )
        listings = await ctx.call(_listings, ctx.broker, keep, pattern)
    return respond(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        unknown_state_filters=unknown,
        transaction_states=tuple(
            schema.TransactionState(
                transactional_id=listing.transactional_id,
                producer_id=listing.producer_id,
                transaction_state=listing.state.value,
            )
            for listing in listings
        ),
    )


def _listings(
    broker: Broker, keep: Callable[[TransitionTarget, int], bool], pattern: re.Pattern[str] | None
) -> list[TransactionListing]:
    """admin_transactions.list_transactions, then the id pattern: on a worker thread, so a
    client's costly pattern never stalls the server's loop."""
    found = admin_transactions.list_transactions(broker.transactions, keep, broker.clock_ms())
    return [item for item in found if pattern is None or pattern.fullmatch(item.transactional_id)]


def _id_pattern(text: str | None) -> re.Pattern[str] | None:
    """The compiled id pattern, or None for none (null or empty: every id)."""
    return re.compile(text) if text else None
