"""The producer's sender (Kafka's Sender): appends the closed batches of each partition to its
log in sequence order, queues their delivery reports for poll() and flush(), and runs the
linger thread, which closes and appends the batches whose linger.ms has passed.

Idempotence. Each batch's bytes are built once. A retriable error from append_batch is retried
with the same bytes, never in the caller's thread with a sleep: the batch stays first in its
partition's queue and retry_due() (poll(), flush(), the linger thread) sends it again after
retry.backoff.ms, within delivery.timeout.ms. If the first attempt did land (the error came
after the write), the log answers the retry with duplicate=True and the original offsets. A base
sequence advances only when its batch is appended; a batch that fails for good leaves its
sequence to the next batch (it is re-stamped), so one bad batch does not open a gap.
OutOfOrderSequenceError, InvalidProducerEpochError, ProducerFencedError, InvalidTxnStateError
and KafkaStorageError are fatal, as librdkafka treats them for an idempotent producer (its
"fatal idempotent producer error"): every queued message is reported failed, and produce() and
flush() raise the error. librdkafka may instead bump the epoch for some of these; eoslog's log
loses producer state only through expiry, after which any sequence is accepted, so a gap here
means a bug or a second writer with our id, and stopping is the safe answer.

Transactions. The sender makes the transaction coordinator's requests, as Kafka's Sender sends
its TransactionManager's: InitProducerId (initialize), EndTxn (end_transaction), both adopting
the producer id and epoch returned, and AddPartitionsToTxn: in a transaction, the first batch to
reach a partition first adds the partition to the coordinator's transaction (the implicit add of
transactions v2, done by the client). A failed send makes the transaction abortable or fatal
(eoslog.client.transaction_manager).

Delivery reports wait in a queue; on_delivery callbacks run only in poll() and flush(), on the
caller's thread, as in confluent-kafka-python. A callback without error is an acknowledgement:
under durability "commit" poll() and flush() first fsync the partitions whose reports they
serve (group commit: one fsync per partition per round; see made_durable).

Threads. Any thread may call send(); it takes the partition's send lock, which keeps appends in
sequence order, and the producer lock only between appends (so an fsync under
durability="always" does not block other partitions). The reports, the fatal error and the
closed flag live under the producer lock. The linger thread starts with the first batch,
closes batches whose linger.ms has passed, appends them, and stops when the producer closes;
it never runs callbacks.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

from eoslog.client.delivery import deliver, made_durable
from eoslog.client.record_accumulator import (
    PartitionState,
    ProducerBatch,
    next_sequence,
    restamp_sequence,
)
from eoslog.client.transaction_manager import (
    TransactionManager,
    TxnState,
    coordinator_error,
    retry_concurrent,
)
from eoslog.errors import (
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaError,
    KafkaException,
    KafkaStorageError,
    MessagePurgedError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    UnknownTopicOrPartitionError,
)
from eoslog.record import accumulator

if TYPE_CHECKING:
    from eoslog.client.producer_config import ProducerSettings
    from eoslog.client.record_accumulator import BatchAccumulator
    from eoslog.coordinator.transaction_coordinator import TransactionCoordinator
    from eoslog.log.meta_file import TopicMetadata
    from eoslog.log.partition import AppendInfo, PartitionLog

_FATAL_ERRORS: Final = (
    OutOfOrderSequenceError,
    InvalidProducerEpochError,
    ProducerFencedError,
    InvalidTxnStateError,
    KafkaStorageError,
)
# Inside a transaction these two are abortable, not fatal (docs/coordinator.md §7.3): the abort
# bumps the epoch and restarts every sequence, so the producer can go on.
_ABORTABLE_IN_TRANSACTION: Final = (OutOfOrderSequenceError, InvalidProducerEpochError)
_REPORT_STRIDE: Final = accumulator.REPORT_STRIDE

# A delivery report waiting for poll()/flush(): topic, partition, batch, and the outcome
# (AppendInfo, or the KafkaException the batch failed with).
Report = tuple[str, PartitionState, ProducerBatch, Any]


class SenderBroker(Protocol):
    """What the sender needs of the Broker."""

    durability: str
    transactions: TransactionCoordinator

    def log(self, topic: str, partition: int) -> PartitionLog: ...

    def topic_metadata(self, name: str, *, auto_create: bool = False) -> TopicMetadata: ...


class Sender:
    """See the module docstring. `attach` completes it with the producer's batches, its
    native accumulator (the counters produce() shares: outstanding, unusable) and its
    transaction state (None without a transactional.id), before any record is produced."""

    def __init__(
        self, broker: SenderBroker, settings: ProducerSettings, lock: threading.Lock
    ) -> None:
        self._broker = broker
        self._settings = settings
        self._lock = lock
        self._sync_on_flush = broker.durability == "commit"
        self.changed = threading.Condition(lock)  # a report arrived, or closed
        self._changed_waiters = 0  # threads in wait_for_change: notified only if any
        # The linger thread's own condition, and until when it sleeps (monotonic s; inf: until
        # woken). A batch opened wakes it only when it would sleep past the batch's linger
        # deadline: waking it for every batch (twice per transaction with the reports) cost
        # a thread switch each, most of a small transaction's latency.
        self._linger_changed = threading.Condition(lock)
        self._linger_sleeps_until = math.inf
        self._batches_opened = 0  # for the linger thread: were batches opened while it napped
        self._linger_s = settings.linger_ms / 1000
        self._linger_thread: threading.Thread | None = None
        self.reports: deque[Report] = deque()
        # (topic, partition) -> (attempts, delivery deadline, next try), all monotonic s, for
        # a partition whose first pending batch failed with a retriable error.
        self.retrying: dict[tuple[str, int], tuple[int, float, float]] = {}
        self.unsynced: set[tuple[str, int]] = set()
        self.fatal: KafkaException | None = None
        self.closed = False
        self._batches: BatchAccumulator
        self._native: accumulator.RecordAccumulator
        self._txn: TransactionManager | None = None

    def attach(
        self,
        batches: BatchAccumulator,
        native: accumulator.RecordAccumulator,
        txn: TransactionManager | None,
    ) -> None:
        self._batches, self._native, self._txn = batches, native, txn

    # --- sending ---------------------------------------------------------------------------

    def send(self, topic: str, state: PartitionState) -> None:
        """Append the partition's closed batches in order. Any thread; takes the partition's
        send lock, and the producer lock only between appends.

        In a transaction, the first batch to reach a partition first adds the partition to
        the coordinator's transaction (the implicit add of transactions v2, done here by the
        client). Once the transaction has failed (ABORTABLE_ERROR) the batches left fail with
        its error unsent, as Kafka's sender aborts undrained batches; while aborting they
        fail with MessagePurgedError."""
        partition = (topic, state.partition)
        with state.send_lock:
            while True:
                with self._lock:
                    if not state.pending:
                        return
                    retry = self.retrying.get(partition) if self.retrying else None
                    if retry is not None and time.monotonic() < retry[2]:
                        return  # backing off: retry_due() (poll, flush, linger) sends it
                    batch = state.pending[0]
                    txn = self._txn
                    failure = self.fatal
                    if failure is None and txn is not None:
                        failure = txn.failure()
                    add = txn is not None and failure is None and partition not in txn.partitions
                    producer = (self._batches.producer_id, self._batches.producer_epoch)
                if add:
                    failure = self.add_to_transaction(partition, *producer)
                outcome: AppendInfo | KafkaException | None = (
                    failure if failure is not None else self._append(topic, state, batch)
                )
                with self._lock:
                    if outcome is None:
                        return  # to be retried after retry.backoff.ms, this batch first
                    self._done(topic, state, batch, outcome, txn)

    def retry_due(self) -> None:
        """Send again the partitions whose first batch failed with a retriable error and
        whose retry.backoff.ms has passed (poll(), flush() and the linger thread call it)."""
        now_s = time.monotonic()
        with self._lock:
            due = [
                (topic, self._batches.partitions[(topic, partition)])
                for (topic, partition), retry in self.retrying.items()
                if retry[2] <= now_s
            ]
        for topic, state in due:
            self.send(topic, state)

    def next_retry_s(self) -> float | None:
        """When the next retry is due (monotonic s), or None (producer lock held)."""
        return min((retry[2] for retry in self.retrying.values()), default=None)

    def wait_for_change(self, timeout_s: float | None) -> None:
        """Wait (producer lock held) until a report arrives, a retry is set up, the producer
        closes, or timeout_s passes (None: no limit)."""
        self._changed_waiters += 1
        try:
            self.changed.wait(timeout_s)
        finally:
            self._changed_waiters -= 1

    def purge_queued(self, why: str) -> int:
        """Fail every batch not yet appended, the open ones closed first, with
        MessagePurgedError (librdkafka's _PURGE_QUEUE); their reports are queued for serve().
        A batch being appended meanwhile (in flight) completes: each partition's send lock is
        taken before its batches go. In a transaction, the transaction can no longer commit
        what it was given, so it moves to ABORTABLE_ERROR. Returns the messages purged."""
        with self._lock:
            self._batches.close_open()
            partitions = [
                (topic, state)
                for (topic, _partition), state in self._batches.partitions.items()
                if state.pending
            ]
        purged = 0
        error = MessagePurgedError(why)
        for topic, state in partitions:
            with state.send_lock, self._lock:
                while state.pending:
                    purged += state.pending[0].count
                    self._done(topic, state, state.pending[0], error, self._txn)
        with self._lock:
            txn = self._txn
            if purged and txn is not None and txn.state is TxnState.IN_TRANSACTION:
                self.txn_failed(error)
        return purged

    def _done(
        self,
        topic: str,
        state: PartitionState,
        batch: ProducerBatch,
        outcome: AppendInfo | KafkaException,
        txn: TransactionManager | None,
    ) -> None:
        """The first pending batch's outcome: report it (producer lock held)."""
        state.pending.popleft()
        if self.retrying:
            self.retrying.pop((topic, state.partition), None)
        failed = isinstance(outcome, KafkaException)  # once: isinstance is a call
        if failed and txn is not None and not isinstance(outcome, MessagePurgedError):
            outcome = self.txn_failed(cast(KafkaException, outcome))
        if failed:
            if self._batches.producer_id >= 0:
                # Its sequences were never used: the batches after it take them.
                state.planned_sequence = next_sequence(state.planned_sequence, -batch.count)
        else:
            self.unsynced.add((topic, state.partition))
        if batch.results is not None:
            batch.results.append(outcome)
        else:
            self.reports.append((topic, state, batch, outcome))
            if self._changed_waiters:
                self.changed.notify_all()

    def _append(
        self, topic: str, state: PartitionState, batch: ProducerBatch
    ) -> AppendInfo | KafkaException | None:
        """Append one batch once; the outcome, or None when it failed with a retriable error
        and is to be tried again, with the same bytes, after retry.backoff.ms (within
        delivery.timeout.ms of its first try and `retries`). The caller's thread never
        sleeps here, so produce() returns at once, as librdkafka's does; the batches after
        it wait behind it, which keeps the partition's order and sequences. Only the thread
        holding the partition's send lock calls it."""
        if self._batches.producer_id >= 0 and batch.base_sequence != state.next_sequence:
            # A batch before this one failed for good: take over its sequence.
            batch.raw = restamp_sequence(batch.raw, state.next_sequence)
            batch.base_sequence = state.next_sequence
        partition = (topic, state.partition)
        try:
            info = self._broker.log(topic, state.partition).append_batch(batch.raw)
        except KafkaException as error:
            if isinstance(error, UnknownTopicOrPartitionError) and not (
                self._batches.partition_exists(topic, state.partition)
            ):
                # Deleted (and not created again): retrying cannot help.
                return error
            if isinstance(error, _FATAL_ERRORS) and not (
                self._txn is not None and isinstance(error, _ABORTABLE_IN_TRANSACTION)
            ):
                return self.set_fatal(error)
            settings = self._settings
            now_s = time.monotonic()
            with self._lock:
                attempts, deadline_s, _ = self.retrying.get(
                    partition, (0, now_s + settings.delivery_timeout_ms / 1000, now_s)
                )
                attempts += 1
                if (
                    not error.error.retriable()
                    or attempts > settings.retries
                    or now_s >= deadline_s
                    or self.closed
                ):
                    return error
                retry_s = now_s + settings.retry_backoff_ms / 1000
                self.retrying[partition] = (attempts, deadline_s, retry_s)
                if retry_s < self._linger_sleeps_until:
                    self._linger_changed.notify()
            return None
        if self._batches.producer_id >= 0:
            state.next_sequence = next_sequence(batch.base_sequence, batch.count)
        return info

    def set_fatal(self, error: KafkaException) -> KafkaException:
        fatal = type(error)(
            KafkaError(
                error.error.code(),
                f"fatal idempotent producer error: {error.error.str()}",
                fatal=True,
            )
        )
        with self._lock:
            if self.fatal is None:
                self.fatal = fatal
                self._native.unusable = True
            if self._txn is not None and self._txn.state is not TxnState.FATAL_ERROR:
                self._txn.transition(TxnState.FATAL_ERROR, self.fatal)
            return self.fatal

    # --- transactions: the coordinator requests and the sends' failures ------------------
    # (Kafka's Sender sends the TransactionManager's requests: AddPartitionsToTxn,
    # InitProducerId, EndTxn.)

    def txn_failed(self, error: KafkaException) -> KafkaException:
        """A send of the transaction failed: the transaction moves to ABORTABLE_ERROR, or to
        FATAL_ERROR (which stops the producer as a fatal idempotent error does). Returns the
        error as delivery reports and the application see it."""
        assert self._txn is not None
        reported = self._txn.fail(error)
        if self._txn.state is TxnState.FATAL_ERROR and self.fatal is None:
            self.fatal = reported
            self._native.unusable = True
        return reported

    def add_to_transaction(
        self,
        partition: tuple[str, int],
        producer_id: int,
        producer_epoch: int,
        timeout: float | None = None,
    ) -> KafkaException | None:
        """AddPartitionsToTxn for one partition (no lock held; the partition's send lock
        is); None once added, else the error (retried while CONCURRENT_TRANSACTIONS, up to
        `timeout` s, by default max.block.ms)."""
        transactional_id = self._settings.transactional_id
        assert transactional_id is not None and self._txn is not None
        deadline = self.deadline(timeout)
        try:
            retry_concurrent(
                deadline,
                "add a partition to the transaction",
                self._is_closed,
                self._broker.transactions.add_partitions,
                (transactional_id, producer_id, producer_epoch, [partition]),
            )
        except KafkaException as error:
            return coordinator_error(error)
        with self._lock:
            self._txn.partitions.add(partition)
        return None

    def initialize(
        self, transactional_id: str, deadline: float, expected: tuple[int, int] | None
    ) -> None:
        """InitProducerId, INITIALIZING -> READY (the producer's transaction-call lock held;
        not the producer lock). `expected`: the producer id and epoch to re-initialize from
        (KIP-360), or None. A fatal error moves to FATAL_ERROR; any other leaves the state
        INITIALIZING, for the call to be made again."""
        try:
            producer_id, producer_epoch = retry_concurrent(
                deadline,
                "init_transactions",
                self._is_closed,
                self._broker.transactions.init_producer_id,
                (transactional_id, self._settings.transaction_timeout_ms, expected),
            )
        except KafkaException as error:
            if error.error.fatal():
                with self._lock:
                    raise self.txn_failed(error) from error
            raise  # the state stays INITIALIZING: the call may be made again
        with self._lock:
            self._adopt(producer_id, producer_epoch)
            assert self._txn is not None
            self._txn.transition(TxnState.READY)

    def end_transaction(self, transactional_id: str, deadline: float, *, commit: bool) -> None:
        """EndTxn, then READY with the new epoch (the producer's transaction-call lock held;
        state COMMITTING or ABORTING). Nothing is sent when no partition joined the
        transaction. A retriable error (OperationTimedOutError, a KafkaStorageError after the
        end was decided) leaves the state as it is; any other fails the transaction."""
        txn = self._txn
        assert txn is not None
        with self._lock:
            producer_id, producer_epoch = self._batches.producer_id, self._batches.producer_epoch
            joined = bool(txn.partitions)
        if joined:
            try:
                producer_id, producer_epoch = retry_concurrent(
                    deadline,
                    "commit_transaction" if commit else "abort_transaction",
                    self._is_closed,
                    self._broker.transactions.end_transaction,
                    (transactional_id, producer_id, producer_epoch, commit),
                )
            except KafkaException as error:
                if error.error.retriable():
                    # Out of time, or a storage error after the end was decided
                    # (docs/coordinator.md §3.6, F6): the outcome is (or may be) the end
                    # asked for, so the state stays COMMITTING / ABORTING and only the
                    # same call may be made again; it finishes the end.
                    raise
                if not commit and isinstance(error, InvalidProducerIdMappingError):
                    raise  # abort_transaction re-initializes
                with self._lock:
                    raise self.txn_failed(coordinator_error(error)) from error
        with self._lock:
            self._adopt(producer_id, producer_epoch)
            txn.transition(TxnState.READY)

    def _adopt(self, producer_id: int, producer_epoch: int) -> None:
        """The producer id and epoch of the next transaction; every sequence restarts at 0
        (producer lock held; nothing queued or in flight)."""
        assert self._txn is not None
        self._batches.adopt(producer_id, producer_epoch)
        self._txn.partitions.clear()

    def _is_closed(self) -> bool:
        """Whether the producer closed (a coordinator call's retries give up then)."""
        return self.closed

    def deadline(self, timeout: float | None) -> float:
        """Monotonic seconds `timeout` from now; None or negative: max.block.ms."""
        if timeout is None or timeout < 0:
            return time.monotonic() + self._settings.max_block_ms / 1000
        return time.monotonic() + timeout

    # --- delivery reports --------------------------------------------------------------------

    def serve(self) -> int:
        """Run the queued reports' callbacks (after made_durable); the messages reported."""
        with self._lock:
            if not self.reports:
                return 0
            reports = list(self.reports)
            self.reports.clear()
        if self._sync_on_flush:
            reports = self.made_durable(reports)
        served = 0
        for index, (topic, state, batch, outcome) in enumerate(reports):
            with self._lock:
                self._native.outstanding -= batch.count
                self._native.outstanding_bytes -= batch.value_bytes
            served += batch.count
            if batch.reports is not None:
                try:
                    deliver(
                        topic,
                        state.partition,
                        batch,
                        outcome,
                        only_errors=self._settings.report_only_errors,
                    )
                except BaseException:
                    # A callback raised: it propagates (as confluent's poll does); reports not
                    # yet served go back to the front of the queue.
                    with self._lock:
                        self.reports.extendleft(reversed(reports[index + 1 :]))
                    raise
        return served

    def made_durable(self, reports: list[Report]) -> list[Report]:
        """The reports to serve, each successful one now covered by an fsync (no lock held);
        see eoslog.client.delivery.made_durable."""
        if not self._sync_on_flush:
            return reports
        return made_durable(self._broker.log, reports, self.set_fatal)

    def sync(self) -> None:
        """fsync every partition appended to since the last sync (durability "commit")."""
        if not self._sync_on_flush:
            return
        with self._lock:
            unsynced, self.unsynced = self.unsynced, set()
        for topic, partition in sorted(unsynced):
            try:
                self._broker.log(topic, partition).flush()
            except UnknownTopicOrPartitionError:
                continue  # deleted since
            except KafkaException as error:
                # Fail-stop: flush() still serves every report (those of this partition
                # fail with the error, see made_durable), then raises the fatal error.
                self.set_fatal(error)

    # --- linger ------------------------------------------------------------------------------

    def batch_opened(self, batch: ProducerBatch) -> None:
        """A batch opened (producer lock held): wake the linger thread if it would sleep past
        the batch's deadline, and start it with the first batch."""
        if self._linger_s == 0:
            return  # no linger thread: produce() closes each batch at once
        self._batches_opened += 1
        if batch.opened_s + self._linger_s < self._linger_sleeps_until:
            self._linger_changed.notify()
        if self._linger_thread is None:
            self._linger_thread = threading.Thread(
                target=self._linger_loop, name="eoslog-producer-linger", daemon=True
            )
            self._linger_thread.start()

    def close_lingering(self, now_s: float) -> list[tuple[str, PartitionState]]:
        """Close batches open for linger.ms or longer and append them."""
        due: list[tuple[str, PartitionState]] = []
        with self._lock:
            for (topic, _partition), state in list(self._batches.lingering.items()):
                assert state.open is not None
                if now_s - state.open.opened_s < self._linger_s:
                    break  # oldest first: the rest are younger
                self._batches.close(topic, state)
                due.append((topic, state))
        for topic, state in due:
            self.send(topic, state)
        return due

    def stop(self) -> None:
        """The producer closed (producer lock held by the caller): wake every waiter and the
        linger thread, which returns."""
        self.closed = True
        self._native.unusable = True
        self.changed.notify_all()
        self._linger_changed.notify()

    def join_linger_thread(self) -> None:
        """Wait for the linger thread to return after stop() (no lock held)."""
        thread = self._linger_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _linger_loop(self) -> None:
        opened_seen = -1
        while True:
            with self._lock:
                if self.closed:
                    return
                now_s = time.monotonic()
                retry_s = self.next_retry_s()
                if retry_s is None or retry_s > now_s:
                    if not self._batches.lingering:
                        # Nothing lingers: nap linger.ms while batches keep opening (a batch
                        # opened during a nap needs no wake-up: its deadline is later, and
                        # the thread looks at it when the nap ends); sleep until woken (or a
                        # retry is due) once a whole nap saw none.
                        busy = opened_seen != self._batches_opened
                        opened_seen = self._batches_opened
                        wait_s = self._linger_s if busy else math.inf
                        if retry_s is not None:
                            wait_s = min(wait_s, retry_s - now_s)
                        self._sleep(now_s, wait_s)
                        continue
                    oldest = next(iter(self._batches.lingering.values())).open
                    assert oldest is not None
                    wait_s = oldest.opened_s + self._linger_s - now_s
                    if retry_s is not None:
                        wait_s = min(wait_s, retry_s - now_s)
                    if wait_s > 0:
                        self._sleep(now_s, wait_s)
                        continue
            try:
                self.retry_due()
                self._sync_sent(self.close_lingering(time.monotonic()))
            except Exception as error:  # a bug: stop the producer rather than lose data
                self.set_fatal(KafkaException(f"linger thread failed: {error!r}"))
                return

    def _sync_sent(self, sent: list[tuple[str, PartitionState]]) -> None:
        """Under durability "commit", fsync the partitions the linger thread just appended to,
        so that the delivery reports of batches closed by linger.ms are durable by the time
        poll() serves them and the producing thread does not wait for that disk. A failed
        fsync is left to the reports: poll() finds the partition failed and reports it.
        Only partitions with a callback waiting are synced: without callbacks nothing is
        acknowledged before flush(), which keeps its one fsync round."""
        if not self._sync_on_flush or not sent:
            return
        with self._lock:
            waiting = {
                (topic, state.partition)
                for topic, state, batch, outcome in self.reports
                if batch.reports is not None and not isinstance(outcome, KafkaException)
            }
        for topic, state in sent:
            if (topic, state.partition) in waiting:
                with contextlib.suppress(KafkaException):
                    self._broker.log(topic, state.partition).flush()

    def _sleep(self, now_s: float, wait_s: float) -> None:
        """The linger thread waits (producer lock held) up to wait_s, or until woken."""
        self._linger_sleeps_until = now_s + wait_s
        try:
            self._linger_changed.wait(None if wait_s == math.inf else wait_s)
        finally:
            self._linger_sleeps_until = -math.inf  # awake: it looks at the batches itself
