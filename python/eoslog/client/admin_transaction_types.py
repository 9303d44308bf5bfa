"""The request and result types of the AdminClient's transaction calls (KIP-664: hanging
transaction tooling; docs/api.md "Drop-in for confluent-kafka"). confluent-kafka has no such
calls; the types follow the Java AdminClient's (org.apache.kafka.clients.admin), with Python
names: TransactionState, TransactionListing, TransactionDescription, ProducerState and
AbortTransactionSpec. Java's optional values (OptionalLong, OptionalInt) are None here.

Plain value objects: built per call, any thread may read them.
"""

from __future__ import annotations

import enum
from typing import Final

from eoslog import arguments
from eoslog.client.message import TopicPartition

# Kafka's protocol code for a transactional id the coordinator does not know
# (Errors.TRANSACTIONAL_ID_NOT_FOUND). librdkafka has no name for it, so KafkaError(105).name()
# is librdkafka's "ERR_105?", as confluent-kafka would report it.
TRANSACTIONAL_ID_NOT_FOUND: Final = 105


class TransactionState(enum.Enum):
    """A transaction's state as the coordinator reports it (Java's
    org.apache.kafka.clients.admin.TransactionState): each value is Kafka's name for it."""

    ONGOING = "Ongoing"
    PREPARE_ABORT = "PrepareAbort"
    PREPARE_COMMIT = "PrepareCommit"
    COMPLETE_ABORT = "CompleteAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    EMPTY = "Empty"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    UNKNOWN = "Unknown"


class TransactionListing:
    """One transactional id of list_transactions (Java's TransactionListing)."""

    def __init__(self, transactional_id: str, producer_id: int, state: TransactionState) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.state = state

    def _key(self) -> tuple[str, int, TransactionState]:
        return (self.transactional_id, self.producer_id, self.state)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TransactionListing):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"TransactionListing(transactional_id={self.transactional_id!r}, "
            f"producer_id={self.producer_id}, state={self.state.name})"
        )


class TransactionDescription:
    """describe_transactions' answer for one id (Java's TransactionDescription): the
    coordinator's node id, the state, the producer id and epoch it holds, the timeout, when
    the transaction in progress began (None when none is in progress: Empty and Complete*)
    and the partitions in it, sorted."""

    def __init__(
        self,
        coordinator_id: int,
        state: TransactionState,
        producer_id: int,
        producer_epoch: int,
        transaction_timeout_ms: int,
        transaction_start_time_ms: int | None,
        topic_partitions: list[TopicPartition],
    ) -> None:
        self.coordinator_id = coordinator_id
        self.state = state
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.transaction_timeout_ms = transaction_timeout_ms
        self.transaction_start_time_ms = transaction_start_time_ms
        self.topic_partitions = topic_partitions

    def __repr__(self) -> str:
        return (
            f"TransactionDescription(state={self.state.name}, producer_id={self.producer_id}, "
            f"producer_epoch={self.producer_epoch}, topic_partitions={self.topic_partitions})"
        )


class ProducerState:
    """One active producer of a partition, from describe_producers (Java's ProducerState):
    the sequence of its last batch (-1 if it wrote only markers there), the timestamp of its
    last batch or marker, the coordinator epoch of its last marker (None before any) and the
    first offset of its open transaction (None when none is open)."""

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int,
        last_sequence: int,
        last_timestamp_ms: int,
        coordinator_epoch: int | None,
        current_transaction_start_offset: int | None,
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.last_sequence = last_sequence
        self.last_timestamp_ms = last_timestamp_ms
        self.coordinator_epoch = coordinator_epoch
        self.current_transaction_start_offset = current_transaction_start_offset

    def __repr__(self) -> str:
        return (
            f"ProducerState(producer_id={self.producer_id}, "
            f"producer_epoch={self.producer_epoch}, "
            f"current_transaction_start_offset={self.current_transaction_start_offset})"
        )


class AbortTransactionSpec:
    """Which transaction abort_transaction ends (Java's AbortTransactionSpec): the partition
    and the producer id, epoch and coordinator epoch describe_producers reports for it (a
    coordinator epoch of None there is given as 0, as Kafka's kafka-transactions tool does).
    TypeError at construction for an argument of the wrong type."""

    def __init__(
        self,
        topic_partition: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
    ) -> None:
        if not isinstance(topic_partition, TopicPartition):
            raise TypeError(
                f"topic_partition must be a TopicPartition, not {type(topic_partition).__name__}"
            )
        self.topic_partition = topic_partition
        self.producer_id = arguments.integer("producer_id", producer_id)
        self.producer_epoch = arguments.integer("producer_epoch", producer_epoch)
        self.coordinator_epoch = arguments.integer("coordinator_epoch", coordinator_epoch)

    def __repr__(self) -> str:
        return (
            f"AbortTransactionSpec(topic_partition={self.topic_partition}, "
            f"producer_id={self.producer_id}, producer_epoch={self.producer_epoch}, "
            f"coordinator_epoch={self.coordinator_epoch})"
        )
