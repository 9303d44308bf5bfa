"""The AdminClient's transaction calls (eoslog.client.admin), Kafka's hanging-transaction tooling
(KIP-664) shaped after the Java AdminClient: list_transactions, describe_transactions,
describe_producers and abort_transaction, over the broker's TransactionCoordinator and its
partitions' producer state. confluent-kafka has none of them; the answers are futures, already
done, as every other AdminClient call gives (docs/api.md "Drop-in for confluent-kafka").

Argument checks raise TypeError / ValueError at the call; the rest raises the KafkaException
the AdminClient puts in the future (TRANSACTIONAL_ID_NOT_FOUND, UNKNOWN_TOPIC_OR_PART,
INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED,
CONCURRENT_TRANSACTIONS).

Thread safety: any thread; the coordinator reads each id under its lock and a partition's
producers under the partition lock, so no answer is caught half-way through a change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eoslog import arguments
from eoslog._ext.producer_state import NO_OFFSET
from eoslog.client.admin_transaction_types import (
    TRANSACTIONAL_ID_NOT_FOUND,
    AbortTransactionSpec,
    ProducerState,
    TransactionDescription,
    TransactionListing,
    TransactionState,
)
from eoslog.client.message import TopicPartition
from eoslog.client.metadata import NODE_ID
from eoslog.coordinator.transaction_state import NO_TIMESTAMP
from eoslog.coordinator.transaction_state import TransactionState as CoordinatorState
from eoslog.errors import KafkaError, KafkaException

if TYPE_CHECKING:
    from eoslog.client.admin import AdminBroker
    from eoslog.coordinator.transaction_coordinator import TransactionCoordinator
    from eoslog.coordinator.transaction_state import TransitionTarget

# The states in which a transaction is in progress (it has a start time).
_IN_PROGRESS = frozenset(
    {
        CoordinatorState.ONGOING,
        CoordinatorState.PREPARE_COMMIT,
        CoordinatorState.PREPARE_ABORT,
        CoordinatorState.PREPARE_EPOCH_FENCE,
    }
)


def state_of(state: CoordinatorState) -> TransactionState:
    """The coordinator's state as the admin types name it (Kafka's names for both)."""
    return TransactionState(state.kafka_name)


def _collection(name: str, value: object, kind: type, what: str) -> list[Any]:
    """A set, frozenset, list or tuple of `kind`: TypeError otherwise."""
    if not isinstance(value, set | frozenset | list | tuple):
        raise TypeError(f"'{name}' must be a set or list of {what}, not {type(value).__name__}")
    for item in value:
        if not isinstance(item, kind) or isinstance(item, bool):
            raise TypeError(f"'{name}' must hold {what}, found {type(item).__name__}")
    return list(value)


def listing_filter(options: dict[str, Any]) -> Callable[[TransitionTarget, int], bool]:
    """list_transactions' filters, checked now (Java's ListTransactionsOptions): the states
    (state_filters), the producer ids (producer_id_filters), each empty or absent for all, and
    duration_filter_ms, a transaction in progress for longer than that (negative or absent:
    every id). The answer takes an id's state and the broker's time now."""
    states = set(
        _collection(
            "state_filters", options.get("state_filters", ()), TransactionState, "TransactionState"
        )
    )
    producer_ids = set(
        _collection("producer_id_filters", options.get("producer_id_filters", ()), int, "int")
    )
    duration_ms = arguments.integer("duration_filter_ms", options.get("duration_filter_ms", -1))

    def keep(target: TransitionTarget, now_ms: int) -> bool:
        if states and state_of(target.state) not in states:
            return False
        if producer_ids and target.producer_id not in producer_ids:
            return False
        if duration_ms < 0:
            return True
        # Only a transaction in progress has been running for a while (Kafka's broker would
        # also count an id at rest by the start time of its last transaction).
        return (
            target.state in _IN_PROGRESS
            and target.txn_start_timestamp_ms != NO_TIMESTAMP
            and now_ms - target.txn_start_timestamp_ms > duration_ms
        )

    return keep


def list_transactions(
    coordinator: TransactionCoordinator, keep: Callable[[TransitionTarget, int], bool], now_ms: int
) -> list[TransactionListing]:
    """Every transactional id the coordinator holds that `keep` accepts, by id."""
    found = coordinator.transaction_snapshots()
    return [
        TransactionListing(transactional_id, target.producer_id, state_of(target.state))
        for transactional_id, target in sorted(found.items())
        if keep(target, now_ms)
    ]


def describe_transaction(
    coordinator: TransactionCoordinator, transactional_id: str
) -> TransactionDescription:
    """The id's state now; TRANSACTIONAL_ID_NOT_FOUND for an id the coordinator does not
    hold (never initialised, or expired)."""
    target = coordinator.transaction_snapshots([transactional_id]).get(transactional_id)
    if target is None:
        raise KafkaException(
            KafkaError(
                TRANSACTIONAL_ID_NOT_FOUND,
                f"Transactional id {transactional_id!r} is not known to the coordinator",
            )
        )
    in_progress = target.state in _IN_PROGRESS and target.txn_start_timestamp_ms != NO_TIMESTAMP
    return TransactionDescription(
        NODE_ID,
        state_of(target.state),
        target.producer_id,
        target.producer_epoch,
        target.txn_timeout_ms,
        target.txn_start_timestamp_ms if in_progress else None,
        [TopicPartition(topic, partition) for topic, partition in sorted(target.partitions)],
    )


def check_partitions(partitions: list[TopicPartition]) -> list[TopicPartition]:
    """describe_producers' partitions (a list of TopicPartition, checked by the caller): each
    partition index >= 0."""
    for tp in partitions:
        if tp.partition < 0:
            raise ValueError("partition index must be non-negative")
    return partitions


def producers(broker: AdminBroker, tp: TopicPartition) -> list[ProducerState]:
    """The partition's active producers (Kafka's DescribeProducers), by producer id;
    UNKNOWN_TOPIC_OR_PART for a partition the broker does not have."""
    return [
        ProducerState(
            found.producer_id,
            found.epoch,
            found.last_sequence,
            found.last_timestamp,
            None if found.coordinator_epoch < 0 else found.coordinator_epoch,
            None if found.current_txn_first_offset == NO_OFFSET else found.current_txn_first_offset,
        )
        for found in broker.log(tp.topic, tp.partition).active_producers()
    ]


def check_spec(spec: object) -> AbortTransactionSpec:
    """abort_transaction's argument: an AbortTransactionSpec naming a partition >= 0."""
    if not isinstance(spec, AbortTransactionSpec):
        raise TypeError(f"Expected an AbortTransactionSpec, not {type(spec).__name__}")
    if spec.topic_partition.partition < 0:
        raise ValueError("partition index must be non-negative")
    return spec


def abort(broker: AdminBroker, spec: AbortTransactionSpec) -> None:
    """The ABORT of spec's transaction on its partition
    (TransactionCoordinator.abort_partition_transaction), durable before it returns;
    UNKNOWN_TOPIC_OR_PART for a partition the broker does not have."""
    tp = spec.topic_partition
    broker.transactions.abort_partition_transaction(
        broker.log(tp.topic, tp.partition),
        spec.producer_id,
        spec.producer_epoch,
        spec.coordinator_epoch,
    )
