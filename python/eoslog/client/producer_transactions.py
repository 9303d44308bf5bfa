"""The Producer's transactional calls (docs/api.md "Producer"; docs/coordinator.md §7.2):
init_transactions, begin_transaction, send_offsets_to_transaction, commit_transaction and
abort_transaction, with Kafka's rules for when each may run. They are the API; the states and
the errors of each call are eoslog.client.transaction_manager's, the coordinator requests and
the sends eoslog.client.sender's. eoslog.client.producer.Producer inherits them: one class for
the user, two files for the reader (the per-record path and the transaction protocol).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from eoslog.client.message import TopicPartition
from eoslog.client.transaction_manager import (
    TransactionManager,
    TxnState,
    coordinator_error,
    offset_to_commit,
)
from eoslog.coordinator.group_coordinator import ConsumerGroupMetadata
from eoslog.errors import (
    InvalidProducerIdMappingError,
    KafkaError,
    KafkaException,
    OperationTimedOutError,
    ProducerClosedError,
    ProducerStateError,
)

if TYPE_CHECKING:
    from eoslog.client.producer import ProducerBroker
    from eoslog.client.producer_config import ProducerSettings
    from eoslog.client.record_accumulator import BatchAccumulator
    from eoslog.client.sender import Sender


class TransactionalCalls:
    """The transactional half of Producer: what it needs of the other half is declared here
    and set by Producer.__init__."""

    _broker: ProducerBroker
    _settings: ProducerSettings
    _lock: threading.Lock
    _txn_call_lock: threading.RLock
    _sender: Sender
    _batches: BatchAccumulator
    _txn: TransactionManager | None

    def _flush_until(self, deadline: float | None) -> int:
        """Producer.flush until a monotonic deadline (the other half), which
        commit_transaction runs."""
        raise NotImplementedError

    def init_transactions(self, timeout: float | None = None) -> None:
        """InitProducerId for transactional.id with transaction.timeout.ms: fences every
        older producer with the id and has the coordinator abort (or finish) what it left
        open; then adopts the producer id and epoch and restarts every sequence at 0.
        CONCURRENT_TRANSACTIONS is retried with a short backoff for up to `timeout` seconds
        (None or negative: max.block.ms), then OperationTimedOutError: the state stays
        INITIALIZING and init_transactions may be called again. A fatal error (e.g.
        InvalidTransactionTimeoutError) moves to FATAL_ERROR. Any thread; one transaction
        call runs at a time."""
        transactional_id = self._require_transactional("init_transactions")
        txn = self._txn
        assert txn is not None
        with self._txn_call_lock:
            with self._lock:
                self._check_open()
                txn.check_call("init_transactions")
                if txn.state is TxnState.UNINITIALIZED:
                    txn.transition(TxnState.INITIALIZING)
            self._sender.initialize(transactional_id, self._sender.deadline(timeout), None)

    def begin_transaction(self) -> None:
        """Open a transaction (READY -> IN_TRANSACTION); local only, as in Kafka: partitions
        join the coordinator's transaction as their first batch is sent. Any thread."""
        self._require_transactional("begin_transaction")
        txn = self._txn
        assert txn is not None
        with self._lock:
            self._check_open()
            txn.check_call("begin_transaction")
            txn.partitions.clear()
            txn.transition(TxnState.IN_TRANSACTION)

    def send_offsets_to_transaction(
        self,
        offsets: Sequence[TopicPartition],
        group_metadata: ConsumerGroupMetadata,
        timeout: float | None = None,
    ) -> None:
        """Commit the group's offsets as part of the open transaction (docs/coordinator.md §3.4,
        §3.5, §6.4): each TopicPartition's offset is the next record to read. The group's
        `__consumer_offsets` partition joins the transaction (AddOffsetsToTxn) and the
        offsets are written pending: committed() does not show them until the transaction
        commits, and they are dropped if it aborts. `group_metadata` is the consuming
        consumer's consumer_group_metadata(): offsets from a member the group has dropped or
        from an older generation raise CommitFailedError (UnknownMemberIdError,
        IllegalGenerationError; abortable: abort_transaction() and carry on, as a fenced
        zombie must). A partition whose offset is negative (position() of a partition not
        read yet gives OFFSET_INVALID) is left out, and with none left nothing is sent, as
        librdkafka does. TypeError for bad arguments, changing nothing. InvalidGroupIdError
        for an empty group id. `timeout` bounds the partition add (None: max.block.ms). Any
        thread; one transaction call runs at a time."""
        self._require_transactional("send_offsets_to_transaction")
        txn = self._txn
        assert txn is not None
        if not isinstance(group_metadata, ConsumerGroupMetadata):
            raise TypeError("group_metadata must come from Consumer.consumer_group_metadata()")
        wanted = [offset for tp in offsets if (offset := offset_to_commit(tp)) is not None]
        groups = self._broker.groups
        with self._txn_call_lock:
            with self._lock:
                self._check_open()
                txn.check_call("send_offsets_to_transaction")
                producer_id, producer_epoch = (
                    self._batches.producer_id,
                    self._batches.producer_epoch,
                )
            if not wanted:
                return
            partition = groups.offsets_partition(group_metadata.group_id)
            if partition not in txn.partitions:
                error = self._sender.add_to_transaction(
                    partition, producer_id, producer_epoch, timeout
                )
                if error is not None:
                    with self._lock:
                        raise self._sender.txn_failed(error) from error
            try:
                groups.commit_transactional_offsets(
                    producer_id, producer_epoch, group_metadata, wanted
                )
            except KafkaException as error:
                with self._lock:
                    raise self._sender.txn_failed(coordinator_error(error)) from error
            with self._lock:
                # The offsets are data of the transaction: commit_transaction's flush
                # fsyncs them (durability "commit") before Prepare* is written.
                self._sender.unsynced.add(partition)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush every batch of the transaction (delivery callbacks run here), then EndTxn
        (commit) and adopt the epoch the coordinator returns (sequences restart at 0).

        A failed delivery fails the commit with that error, abortable (txn_requires_abort()
        true; state ABORTABLE_ERROR: call abort_transaction()); a fencing raises
        ProducerFencedError (FATAL_ERROR). Out of time (`timeout` seconds; None: max.block.ms)
        it raises OperationTimedOutError and stays COMMITTING: the outcome is unknown until
        commit_transaction is called again and returns. KafkaStorageError with retriable()
        true means the commit is decided (durable) but its markers are not all written: the
        state stays COMMITTING, the commit takes effect (at the latest when the directory is
        next opened), and calling commit_transaction again finishes it once the storage
        allows; abort_transaction then raises ProducerStateError. A KafkaStorageError that
        is not retriable came before the decision: abortable. A transaction that added no
        partition completes locally (Kafka sends no EndTxn then, §7.1). Any thread."""
        transactional_id = self._require_transactional("commit_transaction")
        txn = self._txn
        assert txn is not None
        with self._txn_call_lock:
            with self._lock:
                self._check_open()
                txn.check_call("commit_transaction")
                if txn.state is TxnState.IN_TRANSACTION:
                    txn.transition(TxnState.COMMITTING)
            deadline = self._sender.deadline(timeout)
            remaining = self._flush_until(deadline)
            with self._lock:
                if txn.state is not TxnState.COMMITTING:  # a send failed
                    txn.check_call("commit_transaction")  # raises the transaction's error
                if remaining:
                    raise OperationTimedOutError(
                        f"commit_transaction: {remaining} messages not delivered in time"
                    )
            self._sender.end_transaction(transactional_id, deadline, commit=True)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Purge the transaction's queued batches (their delivery callbacks run here with
        MessagePurgedError; a batch already being appended finishes and is aborted by the
        marker), then EndTxn (abort) and adopt the returned epoch. Allowed in
        IN_TRANSACTION and ABORTABLE_ERROR. Timeouts behave as for commit_transaction. If
        the coordinator lost the id's producer-id mapping (INVALID_PRODUCER_ID_MAPPING),
        EndTxn is skipped and the producer re-initializes with its current producer id and
        epoch (KIP-360, §7.2). Any thread."""
        transactional_id = self._require_transactional("abort_transaction")
        txn = self._txn
        assert txn is not None
        with self._txn_call_lock:
            with self._lock:
                self._check_open()
                txn.check_call("abort_transaction")
                if txn.state is not TxnState.ABORTING:
                    txn.transition(TxnState.ABORTING)
            deadline = self._sender.deadline(timeout)
            # Waits for an append in flight to finish.
            self._sender.purge_queued("purged by abort_transaction()")
            self._sender.serve()
            if isinstance(txn.error, InvalidProducerIdMappingError):
                self._reinitialize(transactional_id, deadline)
                return
            try:
                self._sender.end_transaction(transactional_id, deadline, commit=False)
            except InvalidProducerIdMappingError:
                self._reinitialize(transactional_id, deadline)

    def _reinitialize(self, transactional_id: str, deadline: float) -> None:
        with self._lock:
            assert self._txn is not None
            self._txn.transition(TxnState.INITIALIZING)
            expected = (self._batches.producer_id, self._batches.producer_epoch)
        self._sender.initialize(transactional_id, deadline, expected)

    def _require_transactional(self, method: str) -> str:
        transactional_id = self._settings.transactional_id
        if transactional_id is None:
            # librdkafka's answer for a producer not configured for transactions.
            raise ProducerStateError(
                KafkaError(
                    KafkaError._NOT_CONFIGURED,
                    f"{method}: the producer has no transactional.id",
                )
            )
        return transactional_id

    def _check_open(self) -> None:
        if self._sender.closed:
            raise ProducerClosedError("Producer has been closed")

    @property
    def transaction_state(self) -> str | None:
        """The transaction state's name (transaction_manager.TxnState; for inspection and
        tests), or None without a transactional.id."""
        return None if self._txn is None else self._txn.state.name
