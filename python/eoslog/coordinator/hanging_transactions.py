"""The check made before an admin aborts one partition's transaction (Kafka's
AbortTransaction, KIP-664; docs/coordinator.md §4.4): the named producer must have a
transaction open there at the named epoch, and the coordinator epoch given must not be older
than the one of that producer's last marker there, which is what a Kafka partition leader
checks of a WriteTxnMarkers request. A failed check raises and nothing is written.

Thread safety: any thread; the partition's producers are read as one copy under its lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog import limits
from eoslog._ext.producer_state import NO_OFFSET
from eoslog.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)

if TYPE_CHECKING:
    from eoslog.log.partition import PartitionLog
    from eoslog.log.producer_state import ActiveProducer


def _producer(log: PartitionLog, producer_id: int) -> ActiveProducer | None:
    return next((p for p in log.active_producers() if p.producer_id == producer_id), None)


def is_open(log: PartitionLog, producer_id: int, producer_epoch: int) -> bool:
    """Whether `producer_id` has a transaction open in `log` at `producer_epoch`."""
    found = _producer(log, producer_id)
    return (
        found is not None
        and found.epoch == producer_epoch
        and found.current_txn_first_offset != NO_OFFSET
    )


def open_transaction(
    log: PartitionLog, producer_id: int, producer_epoch: int, coordinator_epoch: int
) -> ActiveProducer:
    """The producer's state in `log` when it has a transaction open there at
    `producer_epoch`. InvalidTxnStateError when it has none open; InvalidProducerEpochError
    for another epoch (an older one is stale, a newer one names a transaction this partition
    never saw) or one with no epoch above it for the marker; TransactionCoordinatorFencedError
    for a coordinator epoch older than that of the producer's last marker here."""
    where = f"{log.topic}-{log.partition}"
    found = _producer(log, producer_id)
    if found is None or found.current_txn_first_offset == NO_OFFSET:
        raise InvalidTxnStateError(
            f"{where}: producer {producer_id} has no transaction open in this partition"
        )
    if producer_epoch != found.epoch:
        raise InvalidProducerEpochError(
            f"{where}: producer {producer_id}'s open transaction (from offset "
            f"{found.current_txn_first_offset}) is at epoch {found.epoch}, not {producer_epoch}"
        )
    if producer_epoch >= limits.producer_epoch_max:
        # The ABORT marker carries the epoch above the data's (every end bumps it).
        raise InvalidProducerEpochError(
            f"{where}: producer {producer_id}'s epoch {producer_epoch} has no epoch above it"
        )
    if coordinator_epoch < found.coordinator_epoch:
        raise TransactionCoordinatorFencedError(
            f"{where}: coordinator epoch {coordinator_epoch} is older than "
            f"{found.coordinator_epoch}, that of producer {producer_id}'s last marker here"
        )
    return found
