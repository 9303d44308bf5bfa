"""The idempotent Producer (docs/api.md "Producer"; docs/design.md "The data path"). Create it with
`broker.producer(config)`; config keys are in eoslog.client.producer_config.

Data path. produce() appends the record to its partition's open batch (a native
BatchBuilder). With the extension built, the per-record work of the common case (arguments,
partition choice, the append, the bookkeeping) runs in C (eoslog._ext.accumulator, bound as
self.produce); it hands every other record to Producer.produce, the same logic in Python.
A batch closes when the next record does not fit in batch.size, when it holds
batch.num.messages records, when linger.ms has passed since it opened, or on flush()/close().
A closed batch gets the producer id, epoch and the partition's next base sequence (as Kafka's
RecordAccumulator stamps them when it drains a batch) and is appended to the partition log,
which validates it as a Kafka leader does. The thread that closed it appends it at once: a
full batch by the producing thread, a lingering one by the producer's linger thread.
Delivery reports wait in a queue; on_delivery callbacks run only in poll() and flush(), on the
caller's thread, as in confluent-kafka-python. A callback without error is an acknowledgement:
under durability "commit" poll() and flush() first fsync the partitions whose reports they
serve (group commit: one fsync per partition per round; see _made_durable).

Idempotence. Each batch's bytes are built once. A retriable error from append_batch is retried
with the same bytes: if the first attempt did land (the error came after the write), the log
answers the retry with duplicate=True and the original offsets. A base sequence advances only
when its batch is appended; a batch that fails for good leaves its sequence to the next batch
(it is re-stamped), so one bad batch does not open a gap. OutOfOrderSequenceError,
InvalidProducerEpochError, ProducerFencedError, InvalidTxnStateError and KafkaStorageError
are fatal, as librdkafka treats them for an idempotent producer (its "fatal idempotent producer
error"): every queued message is reported failed, and produce() and flush() raise the error.
librdkafka may instead bump the epoch for some of these; eoslog's log loses producer state
only through expiry, after which any sequence is accepted, so a gap here means a bug or a
second writer with our id, and stopping is the safe answer.

Transactions (with transactional.id; docs/coordinator.md §7, §9.4). init_transactions() takes a
producer id and epoch from broker.transactions (fencing older producers with the id);
begin_transaction() opens a transaction locally; its batches are flagged transactional, and
before the first of them reaches a partition the sender adds that partition to the
coordinator's transaction (the implicit add of transactions v2, done by the client).
commit_transaction() flushes, then ends the transaction; abort_transaction() purges what is
queued, then ends it. Every end bumps the epoch (returned by the coordinator) and restarts the
sequences at 0, so a late batch of transaction n cannot land in n+1. Inside a transaction a
failed send (InvalidProducerEpochError, OutOfOrderSequenceError, a delivery timeout, any
non-retriable append error) is abortable: the state goes to ABORTABLE_ERROR, the batches left
fail unsent, and only abort_transaction() is allowed. ProducerFencedError, InvalidTxnStateError
and KafkaStorageError are fatal (FATAL_ERROR: only close()). The states, the allowed calls per
state and the errors for the rest are tables in eoslog.client.transaction_manager. Inside a
transaction the native fast path appends records to the batches the Python path opened in it;
outside one it hands every record to the Python path, which raises the state's error.

Threads. Every method may be called from any thread. One producer lock guards the batches,
sequences and the report queue; a send lock per partition keeps appends in sequence order
while the producer lock is free (so an fsync under durability="always" does not block other
partitions). The transaction state lives under the producer lock; init/commit/abort_transaction
also hold a transaction-call lock, so one of them runs at a time, while produce() from other
threads sees the state change atomically (a record produced before commit_transaction() moved
to COMMITTING is in the commit; one after raises ProducerStateError). The linger thread starts
with the first record, closes batches whose linger.ms has passed, appends them, and stops in
close(); it never runs callbacks.
"""

from __future__ import annotations

import contextlib
import functools
import math
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from eoslog import limits
from eoslog.broker import wall_clock_ms
from eoslog.client import partitioner
from eoslog.client.columns_input import ColumnInput, RowsInput, SpansInput, column_input
from eoslog.client.delivery import (
    OFFSET_INVALID,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    DeliveryReport,
    Headers,
)
from eoslog.client.message import TopicPartition
from eoslog.client.producer_config import ProducerSettings, parse
from eoslog.client.transaction_manager import TransactionManager, TxnState
from eoslog.coordinator.group_coordinator import ConsumerGroupMetadata, OffsetToCommit
from eoslog.errors import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaError,
    KafkaException,
    KafkaStorageError,
    MessagePurgedError,
    OperationTimedOutError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    ProducerStateError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from eoslog.record import USING_EXTENSIONS, accumulator, codec, layout

if TYPE_CHECKING:
    from eoslog.broker import Broker
    from eoslog.log.partition import AppendInfo

DeliveryCallback = Callable[[KafkaError | None, DeliveryReport], object]
SEQUENCE_MASK: Final = limits.sequence_max  # sequences wrap at 2**31 - 1 (incrementSequence)
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
# Backoff between retries of a coordinator call answered CONCURRENT_TRANSACTIONS (Kafka's
# retry.backoff.ms is 100 ms; the in-process coordinator finishes a transaction sooner).
_CONCURRENT_BACKOFF_S: Final = 0.01
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
# The accumulator's classes: native (eoslog._ext.accumulator) or the pure twin.
ProducerBatch = accumulator.ProducerBatch
PartitionState = accumulator.PartitionState
_REPORT_STRIDE: Final = accumulator.REPORT_STRIDE
_NO_REPORT: Final = accumulator.NO_REPORT


def next_sequence(sequence: int, records: int) -> int:
    """The sequence after `records` records from `sequence`, wrapping past 2**31 - 1 to 0
    (Kafka's DefaultRecordBatch.incrementSequence)."""
    return (sequence + records) & SEQUENCE_MASK


class Producer:
    """confluent_kafka.Producer's surface over this process's Broker (docs/api.md "Producer").

    Thread-safe (see the module docstring). Differences from confluent-kafka-python, where
    docs/api.md is silent: produce() raises UnknownTopicOrPartitionError at once for an unknown
    topic or partition (librdkafka reports an unknown topic later, in the delivery report);
    keys `bootstrap.servers`, `socket.timeout.ms`, `request.timeout.ms` and
    `metadata.max.age.ms` are accepted and ignored; `acks` other than all/-1 is accepted only
    without idempotence and changes nothing (one node: an append is acknowledged when it is in
    the log). Transactions: see "Transactions" below and
    eoslog.client.transaction_manager for the states and the errors of each call."""

    def __init__(
        self, broker: Broker, config: Mapping[str, object] | None = None, *, seed: int | None = None
    ) -> None:
        settings = parse(config or {})
        self._settings: ProducerSettings = settings
        self._broker = broker
        self._clock_ms = broker.clock_ms
        self._sync_on_flush = broker.durability == "commit"
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a report arrived, or closed
        # The linger thread's own condition, and until when it sleeps (monotonic s; inf: until
        # woken). A batch opened wakes it only when it would sleep past the batch's linger
        # deadline: waking it for every batch (twice per transaction with the reports) cost
        # a thread switch each, most of a small transaction's latency.
        self._linger_changed = threading.Condition(self._lock)
        self._linger_sleeps_until = math.inf
        self._batches_opened = 0  # for the linger thread: were batches opened while it napped
        self._partitions: dict[tuple[str, int], PartitionState] = {}
        self._lingering: dict[tuple[str, int], PartitionState] = {}  # open batches, oldest first
        self._partition_counts: dict[str, int] = {}
        self._sticky = partitioner.StickyPartitioner(seed)
        self._reports: deque[tuple[str, PartitionState, ProducerBatch, Any]] = deque()
        self._unsynced: set[tuple[str, int]] = set()
        self._fatal: KafkaException | None = None
        self._closed = False
        self._linger_s = settings.linger_ms / 1000
        self._transactional = settings.transactional_id is not None
        self._default_report = settings.on_delivery
        self._queue_messages_max = settings.queue_messages_max
        self._batch_records_max = settings.batch_records_max
        self._linger_thread: threading.Thread | None = None
        self._producer_id, self._producer_epoch = -1, -1
        # Serializes init/commit/abort_transaction (reentrant: a delivery callback run by
        # commit's flush that calls a transaction method gets the state's error, not a hang).
        self._txn_call_lock = threading.RLock()
        # Holds the counters produce() shares with the rest (outstanding; unusable: closed
        # or failed, so produce() asks _check_usable), under self._lock. With the extension
        # built, self.produce is its native per-record path, which hands every case it does
        # not take (a batch to open or close, headers, errors) to Producer.produce below.
        self._accumulator = accumulator.RecordAccumulator(
            self._lock,
            self._sticky.current,
            functools.partial(Producer.produce, self),
            self._send,
            None if broker.clock_ms is wall_clock_ms else broker.clock_ms,
            settings.on_delivery,
            outstanding_max=settings.queue_messages_max,
            batch_records_max=settings.batch_records_max,
            close_every_record=settings.linger_ms == 0,
            transactional=self._transactional,
        )
        # The transaction state (under self._lock); None without a transactional.id. It opens
        # and closes the accumulator's native path with the transaction (in_transaction).
        self._txn = TransactionManager(self._accumulator) if self._transactional else None
        if USING_EXTENSIONS:
            self.produce = self._accumulator.produce  # type: ignore[method-assign]
        if settings.idempotent and settings.transactional_id is None:
            # A transactional producer gets its id from init_transactions.
            self._producer_id, self._producer_epoch = broker.init_producer_id()

    # --- producing -------------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        partition: int = -1,
        on_delivery: DeliveryCallback | None = None,
        timestamp: int = 0,
        headers: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None,
        *,
        callback: DeliveryCallback | None = None,
    ) -> None:
        """Queue one record (confluent's produce; `callback` is its alias of on_delivery).
        timestamp 0 means now (CreateTime). str keys and values are sent as UTF-8. Raises
        BufferError when queue.buffering.max.messages are outstanding (call poll()),
        UnknownTopicOrPartitionError, RecordTooLargeError (nothing queued then), and the
        producer's fatal error once it has one.

        This is the Python path; with the extension built, producer.produce is the native
        RecordAccumulator.produce, which takes the common case itself and calls this for the
        rest, before it has changed anything."""
        # The hot path: settings are read from attributes set in __init__, and the common
        # cases (a null key sticking to its partition, an open batch with room) take no call.
        if type(value) is str:
            value = value.encode()
        if type(key) is str:
            key = key.encode()
        if headers is not None:
            headers = _headers_list(headers)
        report = on_delivery or callback or self._default_report
        if timestamp == 0:
            timestamp = self._clock_ms()
        with self._lock:
            if self._accumulator.unusable:
                self._check_usable()
            if self._txn is not None and self._txn.state is not TxnState.IN_TRANSACTION:
                self._txn.check_call("produce")  # raises: only inside a transaction
            if self._accumulator.outstanding >= self._queue_messages_max:
                raise BufferError("Local: Queue full")
            if partition < 0:
                sticky = self._sticky.current.get(topic) if key is None else None
                partition = self._choose_partition(topic, key) if sticky is None else sticky
            state = self._partitions.get((topic, partition)) or self._add_partition(
                topic, partition
            )
            batch = state.open
            if batch is None or not batch.builder.append(timestamp, key, value, headers):
                if batch is not None:
                    self._close(topic, state)
                batch = self._open_batch(topic, state)
                self._append_first(topic, state, batch, timestamp, key, value, headers)
            if report is not None:
                if batch.reports is None:
                    batch.reports = [None] * (_REPORT_STRIDE * batch.count)
                batch.reports += (report, key, value, headers, timestamp)
            elif batch.reports is not None:
                batch.reports += _NO_REPORT
            batch.count += 1
            self._accumulator.outstanding += 1
            if batch.count >= self._batch_records_max or self._linger_s == 0:
                self._close(topic, state)
            send = bool(state.pending)
        if send:
            self._send(topic, state)

    def produce_batch(
        self,
        topic: str,
        values: Any,
        keys: Any = None,
        partition: int = 0,
        *,
        timestamp: int = 0,
    ) -> None:
        """Append many records at once, vectorized (an eoslog addition; docs/api.md): values and
        keys as lists of bytes/None, numpy arrays (dtype S, U or object) or pyarrow
        binary/string arrays; no Python object is made per record for numpy and Arrow input.
        All records get one CreateTime (timestamp 0: now). partition -1 uses the default
        partitioner (murmur2 of each key in one native call; null keys sticky per batch).

        Synchronous: batches are cut at batch.size / batch.num.messages, appended in order
        after any batch produce() left open on the same partition, and this returns once all
        are in the log (durable per the broker's durability at the next flush()). Its records
        never enter len() or the delivery-report queue, so no callback runs for them; the
        first error raises here (batches before it stay appended)."""
        value_input = column_input(values, "values")
        key_input = None if keys is None else column_input(keys, "keys")
        if key_input is not None and len(key_input) != len(value_input):
            raise ValueError(
                f"keys and values must have the same length, got {len(key_input)} and "
                f"{len(value_input)}"
            )
        if timestamp == 0:
            timestamp = self._clock_ms()
        with self._lock:
            self._check_usable()
            if self._txn is not None:
                self._txn.check_call("produce_batch")
            count = self._partition_count(topic)
            if partition >= count:
                raise UnknownTopicOrPartitionError(f"unknown partition {topic}-{partition}")
        if len(value_input) == 0:
            return
        if partition >= 0:
            groups: list[tuple[int, Any]] = [(partition, None)]
        else:
            groups = self._group_by_partition(topic, count, key_input, len(value_input))
        for chosen, indices in groups:
            part_values = value_input if indices is None else value_input.take(indices)
            part_keys = key_input
            if key_input is not None and indices is not None:
                part_keys = key_input.take(indices)
            self._produce_columns(topic, chosen, part_values, part_keys, timestamp)

    def _group_by_partition(
        self, topic: str, count: int, keys: ColumnInput | None, records: int
    ) -> list[tuple[int, Any]]:
        """(partition, record indices) per partition; -1 means null keys (sticky)."""
        if keys is None:
            return [(-1, None)]
        spans = keys.as_spans() if isinstance(keys, RowsInput) else keys
        chosen = partitioner.partitions_for_spans(spans.data, spans.starts, spans.lengths, count)
        order = np.argsort(chosen, kind="stable")
        bounds = np.flatnonzero(np.diff(chosen[order])) + 1
        return [(int(chosen[group[0]]), group) for group in np.split(order, bounds) if len(group)]

    def _produce_columns(
        self,
        topic: str,
        partition: int,
        values: ColumnInput,
        keys: ColumnInput | None,
        timestamp: int,
    ) -> None:
        """Cut the records into batches and append them; partition -1: sticky per batch."""
        total = len(values)
        done = 0
        while done < total:
            builder = self._new_builder(self._settings.batch_bytes_max)
            try:
                appended = _fill(builder, values, keys, done, self._batch_records_max, timestamp)
            except RecordTooLargeError:
                # The first record alone exceeds batch.size: a batch of its own, as produce().
                builder = self._new_builder(limits.message_bytes_default)
                appended = _fill(builder, values, keys, done, 1, timestamp)
            batch = ProducerBatch(builder, 0.0)
            batch.count = appended
            batch.results = []
            with self._lock:
                self._check_usable()
                if self._txn is not None:
                    self._txn.check_call("produce_batch")
                chosen = partition
                if chosen < 0:
                    chosen = self._sticky.partition(topic, self._partition_count(topic))
                state = self._partitions.get((topic, chosen)) or self._add_partition(topic, chosen)
                if state.open is not None:  # produce()'s records first, in their order
                    self._close(topic, state)
                state.open = batch
                self._close(topic, state)
            self._send(topic, state)
            outcome = batch.results[0]
            if isinstance(outcome, KafkaException):
                raise outcome
            done += appended

    # --- batches (producer lock held) ----------------------------------------------------

    def _new_builder(self, batch_bytes_max: int) -> Any:
        return codec.BatchBuilder(
            compression=self._settings.compression,
            producer_id=self._producer_id,
            producer_epoch=self._producer_epoch,
            batch_bytes_max=batch_bytes_max,
            is_transactional=self._transactional,
        )

    def _open_batch(self, topic: str, state: PartitionState) -> ProducerBatch:
        batch = ProducerBatch(self._new_builder(self._settings.batch_bytes_max), time.monotonic())
        state.open = batch
        self._batches_opened += 1
        if batch.opened_s + self._linger_s < self._linger_sleeps_until:
            self._linger_changed.notify()
        self._lingering[(topic, state.partition)] = state
        if self._linger_thread is None and self._linger_s > 0:
            self._linger_thread = threading.Thread(
                target=self._linger_loop, name="eoslog-producer-linger", daemon=True
            )
            self._linger_thread.start()
        return batch

    def _append_first(
        self,
        topic: str,
        state: PartitionState,
        batch: ProducerBatch,
        timestamp: int,
        key: Any,
        value: Any,
        headers: Any,
    ) -> None:
        """The first record of a new batch. One larger than batch.size gets a batch of its
        own up to Kafka's message.max.bytes default, as Kafka's accumulator does; larger still
        raises RecordTooLargeError and leaves no batch open."""
        try:
            try:
                batch.builder.append(timestamp, key, value, headers)
            except RecordTooLargeError:
                batch.builder = self._new_builder(limits.message_bytes_default)
                batch.builder.append(timestamp, key, value, headers)
        except BaseException:
            state.open = None
            self._lingering.pop((topic, state.partition), None)
            raise

    def _close(self, topic: str, state: PartitionState) -> None:
        """Close the open batch: assign its base sequence and build its bytes."""
        batch = state.open
        assert batch is not None, "closing a partition without an open batch"
        state.open = None
        self._lingering.pop((topic, state.partition), None)
        self._sticky.batch_closed(topic, state.partition, self._partition_count(topic))
        if batch.count == 0:
            return
        if self._producer_id >= 0:
            batch.base_sequence = state.planned_sequence
            state.planned_sequence = next_sequence(batch.base_sequence, batch.count)
            batch.builder.set_producer_state(
                self._producer_id, self._producer_epoch, batch.base_sequence
            )
        batch.raw = batch.builder.build()
        batch.builder = None
        state.pending.append(batch)

    def _choose_partition(self, topic: str, key: Any) -> int:
        count = self._partition_count(topic)
        if key is None:
            return self._sticky.partition(topic, count)
        return partitioner.partition_for_key(key, count)

    def _partition_count(self, topic: str) -> int:
        count = self._partition_counts.get(topic)
        if count is None:
            metadata = self._broker.list_topics().get(topic)
            if metadata is None:
                raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")
            count = self._partition_counts[topic] = metadata.num_partitions
        return count

    def _add_partition(self, topic: str, partition: int) -> PartitionState:
        if partition >= self._partition_count(topic):
            raise UnknownTopicOrPartitionError(f"unknown partition {topic}-{partition}")
        state = self._partitions[(topic, partition)] = PartitionState(
            partition, deque(), threading.Lock()
        )
        self._accumulator.add_partition(topic, self._partition_count(topic), state)
        return state

    def _check_usable(self) -> None:
        if self._closed:
            raise ProducerStateError("the producer is closed")
        if self._fatal is not None:
            raise type(self._fatal)(self._fatal.error)

    # --- sending ---------------------------------------------------------------------------

    def _send(self, topic: str, state: PartitionState) -> None:
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
                    batch = state.pending[0]
                    failure = self._fatal if self._fatal is not None else self._txn_failure()
                    txn = self._txn
                    add = txn is not None and failure is None and partition not in txn.partitions
                    producer = (self._producer_id, self._producer_epoch)
                if add:
                    failure = self._add_to_transaction(partition, *producer)
                outcome: AppendInfo | KafkaException = (
                    failure if failure is not None else self._append(topic, state, batch)
                )
                with self._lock:
                    state.pending.popleft()
                    if (
                        isinstance(outcome, KafkaException)
                        and txn is not None
                        and not isinstance(outcome, MessagePurgedError)
                    ):
                        outcome = self._txn_failed(outcome)
                    if isinstance(outcome, KafkaException):
                        if self._producer_id >= 0:
                            # Its sequences were never used: the batches after it take them.
                            state.planned_sequence = next_sequence(
                                state.planned_sequence, -batch.count
                            )
                    else:
                        self._unsynced.add((topic, state.partition))
                    if batch.results is not None:
                        batch.results.append(outcome)
                    else:
                        self._reports.append((topic, state, batch, outcome))
                        self._changed.notify_all()

    def _append(
        self, topic: str, state: PartitionState, batch: ProducerBatch
    ) -> AppendInfo | KafkaException:
        """Append one batch, retrying retriable errors with the same bytes; the outcome.
        Only the thread holding the partition's send lock calls it."""
        if self._producer_id >= 0 and batch.base_sequence != state.next_sequence:
            # A batch before this one failed for good: take over its sequence.
            batch.raw = _restamp_sequence(batch.raw, state.next_sequence)
            batch.base_sequence = state.next_sequence
        settings = self._settings
        deadline = time.monotonic() + settings.delivery_timeout_ms / 1000
        attempts = 0
        while True:
            try:
                info = self._broker.log(topic, state.partition).append_batch(batch.raw)
            except KafkaException as error:
                if isinstance(error, _FATAL_ERRORS) and not (
                    self._txn is not None and isinstance(error, _ABORTABLE_IN_TRANSACTION)
                ):
                    return self._set_fatal(error)
                attempts += 1
                if (
                    not error.error.retriable()
                    or attempts > settings.retries
                    or time.monotonic() >= deadline
                    or self._closed
                ):
                    return error
                time.sleep(settings.retry_backoff_ms / 1000)
                continue
            if self._producer_id >= 0:
                state.next_sequence = next_sequence(batch.base_sequence, batch.count)
            return info

    def _set_fatal(self, error: KafkaException) -> KafkaException:
        fatal = type(error)(
            KafkaError(
                error.error.code(),
                error.error.name(),
                f"fatal idempotent producer error: {error.error.str()}",
                fatal=True,
            )
        )
        with self._lock:
            if self._fatal is None:
                self._fatal = fatal
                self._accumulator.unusable = True
            if self._txn is not None and self._txn.state is not TxnState.FATAL_ERROR:
                self._txn.transition(TxnState.FATAL_ERROR, self._fatal)
            return self._fatal

    # --- transactions: the sender's side (producer lock held unless said) ------------------

    def _txn_failure(self) -> KafkaException | None:
        """The error a batch fails with, unsent, in the transaction's state; None to send."""
        txn = self._txn
        if txn is None:
            return None
        if txn.state is TxnState.ABORTING:
            return MessagePurgedError("purged by abort_transaction()")
        if txn.state is TxnState.ABORTABLE_ERROR:
            assert txn.error is not None
            return type(txn.error)(txn.error.error)
        return None

    def _txn_failed(self, error: KafkaException) -> KafkaException:
        """A send of the transaction failed: the transaction moves to ABORTABLE_ERROR, or to
        FATAL_ERROR (which stops the producer as a fatal idempotent error does). Returns the
        error as delivery reports and the application see it."""
        assert self._txn is not None
        reported = self._txn.fail(error)
        if self._txn.state is TxnState.FATAL_ERROR and self._fatal is None:
            self._fatal = reported
            self._accumulator.unusable = True
        return reported

    def _add_to_transaction(
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
        deadline = self._deadline(timeout)
        try:
            self._retry_concurrent(
                lambda: self._broker.transactions.add_partitions(
                    transactional_id, producer_id, producer_epoch, [partition]
                ),
                deadline,
                "add a partition to the transaction",
            )
        except KafkaException as error:
            return _coordinator_error(error)
        with self._lock:
            self._txn.partitions.add(partition)
        return None

    # --- delivery reports --------------------------------------------------------------------

    def poll(self, timeout: float | None = 0) -> int:
        """Serve queued delivery reports (on_delivery callbacks run here, on this thread,
        after the fsync that covers them under durability "commit"); the number of messages
        reported. Waits up to `timeout` seconds (None: no limit) for a
        first report while messages are outstanding; returns 0 at once when none are."""
        self._close_lingering(time.monotonic())
        served = self._serve()
        if served or timeout == 0:
            return served
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        with self._lock:
            while not self._reports and self._accumulator.outstanding:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self._changed.wait(remaining)
        return self._serve()

    def _serve(self) -> int:
        with self._lock:
            if not self._reports:
                return 0
            reports = list(self._reports)
            self._reports.clear()
        reports = self._made_durable(reports)
        served = 0
        for index, (topic, state, batch, outcome) in enumerate(reports):
            with self._lock:
                self._accumulator.outstanding -= batch.count
            served += batch.count
            if batch.reports is not None:
                try:
                    _deliver(topic, state.partition, batch, outcome)
                except BaseException:
                    # A callback raised: it propagates (as confluent's poll does); reports not
                    # yet served go back to the front of the queue.
                    with self._lock:
                        self._reports.extendleft(reversed(reports[index + 1 :]))
                    raise
        return served

    def _made_durable(
        self, reports: list[tuple[str, PartitionState, ProducerBatch, Any]]
    ) -> list[tuple[str, PartitionState, ProducerBatch, Any]]:
        """The reports to serve, each successful one now covered by an fsync (no lock held).

        A delivery callback without error is an acknowledgement (docs/reliability.md), so under
        durability "commit" it may run only after the fsync that covers its record. Group
        commit keeps that cheap: one flush_through per partition covers every report of this
        round (and every append made so far), and a partition already durable that far costs
        nothing. The fsync runs here, on the thread that serves the reports, rather than in
        the sender: appends (produce() with linger.ms 0, a full batch) never wait for a
        disk, and a poll() loop pays one fsync per round however many batches it serves
        (the linger thread syncs what it appends ahead of poll(), _sync_sent). Measured
        roughly on a produce()+poll(0) loop of 100-byte records with a callback on a shared
        2-core box: linger.ms 5 went from ~560k to ~150-240k records/s (one fsync per full
        16 KiB batch), linger.ms 0 from ~56k to ~3-4k (one fsync per record, the price of
        acknowledging each record durably). Waiting for a later fsync instead would need a
        background syncer woken per batch; flush() and commit_transaction() pay one round.
        Reports without a callback need no fsync here (nothing is acknowledged to anyone;
        flush() fsyncs them). Under "always" every append was durable when it returned.
        A failed fsync turns the partition's successes into that error (the producer is now
        fatal, as after any storage error), so no callback reports a record that may be lost.
        """
        if not self._sync_on_flush:
            return reports
        through: dict[tuple[str, int], int] = {}
        for topic, state, batch, outcome in reports:
            if batch.reports is not None and not isinstance(outcome, KafkaException):
                key = (topic, state.partition)
                through[key] = max(through.get(key, 0), outcome.last_offset + 1)
        failed: dict[tuple[str, int], KafkaException] = {}
        for (topic, partition), offset in sorted(through.items()):
            try:
                self._broker.log(topic, partition).flush_through(offset)
            except UnknownTopicOrPartitionError:
                continue  # deleted since: nothing of it can be read back, lost or not
            except KafkaException as error:
                failed[(topic, partition)] = self._set_fatal(error)
        if not failed:
            return reports
        return [
            (topic, state, batch, failed.get((topic, state.partition), outcome))
            if not isinstance(outcome, KafkaException)
            else (topic, state, batch, outcome)
            for topic, state, batch, outcome in reports
        ]

    def flush(self, timeout: float | None = None) -> int:
        """Close every open batch, append it, fsync what was appended (broker durability
        "commit"; under "always" each append was durable already), then serve every delivery
        report: a return, like a callback without error, means durable. The number of
        messages still
        outstanding (0 when done; another thread may have produced meanwhile). Raises the
        fatal error if the producer has one, after reporting every message."""
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        with self._lock:
            to_send = []
            for (topic, _partition), state in list(self._lingering.items()):
                self._close(topic, state)
            for (topic, _partition), state in self._partitions.items():
                if state.pending:
                    to_send.append((topic, state))
        for topic, state in to_send:
            if deadline is not None and time.monotonic() >= deadline:
                break
            self._send(topic, state)
        # fsync before serving: the reports' callbacks are acknowledgements, and one round
        # of fsyncs here covers them all (_serve then finds them durable and syncs nothing).
        self._sync()
        self._serve()
        with self._lock:
            fatal = self._fatal
            remaining = self._accumulator.outstanding
        if fatal is not None:
            raise type(fatal)(fatal.error)
        return remaining

    def _sync(self) -> None:
        if not self._sync_on_flush:
            return
        with self._lock:
            unsynced, self._unsynced = self._unsynced, set()
        for topic, partition in sorted(unsynced):
            try:
                self._broker.log(topic, partition).flush()
            except UnknownTopicOrPartitionError:
                continue  # deleted since
            except KafkaException as error:
                # Fail-stop: flush() still serves every report (those of this partition
                # fail with the error, see _made_durable), then raises the fatal error.
                self._set_fatal(error)

    def __len__(self) -> int:
        """Messages produced whose delivery report poll()/flush() has not served yet
        (confluent's len(producer))."""
        return self._accumulator.outstanding

    def close(self, timeout: float | None = None) -> int:
        """flush(), then stop the linger thread; later calls raise ProducerStateError.
        Returns what flush() returned. Idempotent.

        A transactional producer first aborts a transaction still open (IN_TRANSACTION or
        ABORTABLE_ERROR), as Kafka's graceful close does; if that abort fails, the
        coordinator aborts the transaction at its timeout or at the next init_transactions
        with the id. In FATAL_ERROR close does not raise (it is the one call left)."""
        if self._closed:
            return self._accumulator.outstanding
        try:
            if self._txn is not None:
                return self._close_transactional(timeout)
            return self.flush(timeout)
        finally:
            with self._lock:
                self._closed = True
                self._accumulator.unusable = True
                self._changed.notify_all()
                self._linger_changed.notify()
            thread = self._linger_thread
            if thread is not None and thread is not threading.current_thread():
                thread.join()

    def _close_transactional(self, timeout: float | None) -> int:
        assert self._txn is not None
        if self._txn.state in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR):
            with contextlib.suppress(KafkaException):
                self.abort_transaction(timeout)
        try:
            return self.flush(timeout)
        except KafkaException:
            if self._txn.state is not TxnState.FATAL_ERROR:
                raise
            return self._accumulator.outstanding

    # --- linger ------------------------------------------------------------------------------

    def _close_lingering(self, now_s: float) -> list[tuple[str, PartitionState]]:
        """Close batches open for linger.ms or longer and append them."""
        due: list[tuple[str, PartitionState]] = []
        with self._lock:
            for (topic, _partition), state in list(self._lingering.items()):
                assert state.open is not None
                if now_s - state.open.opened_s < self._linger_s:
                    break  # oldest first: the rest are younger
                self._close(topic, state)
                due.append((topic, state))
        for topic, state in due:
            self._send(topic, state)
        return due

    def _linger_loop(self) -> None:
        opened_seen = -1
        while True:
            with self._lock:
                if self._closed:
                    return
                now_s = time.monotonic()
                if not self._lingering:
                    # Nothing lingers: nap linger.ms while batches keep opening (a batch
                    # opened during a nap needs no wake-up: its deadline is later, and the
                    # thread looks at it when the nap ends); sleep until woken once a whole
                    # nap saw none.
                    busy = opened_seen != self._batches_opened
                    opened_seen = self._batches_opened
                    self._sleep(now_s, self._linger_s if busy else math.inf)
                    continue
                oldest = next(iter(self._lingering.values())).open
                assert oldest is not None
                wait_s = oldest.opened_s + self._linger_s - now_s
                if wait_s > 0:
                    self._sleep(now_s, wait_s)
                    continue
            try:
                self._sync_sent(self._close_lingering(time.monotonic()))
            except Exception as error:  # a bug: stop the producer rather than lose data
                self._set_fatal(KafkaException(f"linger thread failed: {error!r}"))
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
                for topic, state, batch, outcome in self._reports
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

    # --- transactions (docs/coordinator.md §7.2; states in eoslog.client.transaction_manager) ----

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
            self._initialize(transactional_id, self._deadline(timeout), None)

    def _initialize(
        self, transactional_id: str, deadline: float, expected: tuple[int, int] | None
    ) -> None:
        """INITIALIZING -> READY through InitProducerId (txn call lock held)."""
        try:
            producer_id, producer_epoch = self._retry_concurrent(
                lambda: self._broker.transactions.init_producer_id(
                    transactional_id, self._settings.transaction_timeout_ms, expected
                ),
                deadline,
                "init_transactions",
            )
        except KafkaException as error:
            if error.error.fatal():
                with self._lock:
                    raise self._txn_failed(error) from error
            raise  # the state stays INITIALIZING: the call may be made again
        with self._lock:
            self._adopt(producer_id, producer_epoch)
            assert self._txn is not None
            self._txn.transition(TxnState.READY)

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
        zombie must). TypeError / ValueError for bad arguments, changing nothing.
        InvalidGroupIdError for an empty group id. `timeout` bounds the partition add (None:
        max.block.ms). Any thread; one transaction call runs at a time."""
        self._require_transactional("send_offsets_to_transaction")
        txn = self._txn
        assert txn is not None
        if not isinstance(group_metadata, ConsumerGroupMetadata):
            raise TypeError("group_metadata must come from Consumer.consumer_group_metadata()")
        wanted = [_offset_to_commit(tp) for tp in offsets]
        groups = self._broker.groups
        with self._txn_call_lock:
            with self._lock:
                self._check_open()
                txn.check_call("send_offsets_to_transaction")
                producer_id, producer_epoch = self._producer_id, self._producer_epoch
            if not wanted:
                return
            partition = groups.offsets_partition(group_metadata.group_id)
            if partition not in txn.partitions:
                error = self._add_to_transaction(partition, producer_id, producer_epoch, timeout)
                if error is not None:
                    with self._lock:
                        raise self._txn_failed(error) from error
            try:
                groups.commit_transactional_offsets(
                    producer_id, producer_epoch, group_metadata, wanted
                )
            except KafkaException as error:
                with self._lock:
                    raise self._txn_failed(_coordinator_error(error)) from error
            with self._lock:
                # The offsets are data of the transaction: commit_transaction's flush
                # fsyncs them (durability "commit") before Prepare* is written.
                self._unsynced.add(partition)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush every batch of the transaction (delivery callbacks run here), then EndTxn
        (commit) and adopt the epoch the coordinator returns (sequences restart at 0).

        A failed delivery fails the commit with that error, abortable (txn_requires_abort()
        true; state ABORTABLE_ERROR: call abort_transaction()); a fencing raises
        ProducerFencedError (FATAL_ERROR). Out of time (`timeout` seconds; None: max.block.ms)
        it raises OperationTimedOutError and stays COMMITTING: the outcome is unknown until
        commit_transaction is called again and returns. A transaction that added no
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
            deadline = self._deadline(timeout)
            remaining = self.flush(max(0.0, deadline - time.monotonic()))
            with self._lock:
                if txn.state is not TxnState.COMMITTING:  # a send failed
                    txn.check_call("commit_transaction")  # raises the transaction's error
                if remaining:
                    raise OperationTimedOutError(
                        f"commit_transaction: {remaining} messages not delivered in time"
                    )
            self._end(transactional_id, deadline, commit=True)

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
            deadline = self._deadline(timeout)
            self._purge()
            self._serve()
            if isinstance(txn.error, InvalidProducerIdMappingError):
                self._reinitialize(transactional_id, deadline)
                return
            try:
                self._end(transactional_id, deadline, commit=False)
            except InvalidProducerIdMappingError:
                self._reinitialize(transactional_id, deadline)

    def _reinitialize(self, transactional_id: str, deadline: float) -> None:
        with self._lock:
            assert self._txn is not None
            self._txn.transition(TxnState.INITIALIZING)
            expected = (self._producer_id, self._producer_epoch)
        self._initialize(transactional_id, deadline, expected)

    def _end(self, transactional_id: str, deadline: float, *, commit: bool) -> None:
        """EndTxn, then READY with the new epoch (txn call lock held; state COMMITTING or
        ABORTING). Nothing is sent when no partition joined the transaction."""
        txn = self._txn
        assert txn is not None
        with self._lock:
            producer_id, producer_epoch = self._producer_id, self._producer_epoch
            joined = bool(txn.partitions)
        if joined:
            try:
                producer_id, producer_epoch = self._retry_concurrent(
                    lambda: self._broker.transactions.end_transaction(
                        transactional_id, producer_id, producer_epoch, commit
                    ),
                    deadline,
                    "commit_transaction" if commit else "abort_transaction",
                )
            except OperationTimedOutError:
                raise  # the state stays COMMITTING / ABORTING: retry the same call
            except KafkaException as error:
                if not commit and isinstance(error, InvalidProducerIdMappingError):
                    raise  # abort_transaction re-initializes
                with self._lock:
                    raise self._txn_failed(_coordinator_error(error)) from error
        with self._lock:
            self._adopt(producer_id, producer_epoch)
            txn.transition(TxnState.READY)

    def _purge(self) -> None:
        """Close every open batch and fail every queued one with MessagePurgedError (state
        ABORTING: _send fails them unsent). Waits for an append in flight to finish."""
        with self._lock:
            for (topic, _partition), state in list(self._lingering.items()):
                self._close(topic, state)
            queued = [(topic, state) for (topic, _), state in self._partitions.items()]
        for topic, state in queued:
            self._send(topic, state)

    def _adopt(self, producer_id: int, producer_epoch: int) -> None:
        """The producer id and epoch of the next transaction; every sequence restarts at 0
        (producer lock held; nothing queued or in flight)."""
        assert self._txn is not None
        self._producer_id, self._producer_epoch = producer_id, producer_epoch
        for state in self._partitions.values():
            assert state.open is None and not state.pending, "adopting with batches queued"
            state.next_sequence = state.planned_sequence = 0
        self._txn.partitions.clear()

    def _retry_concurrent(self, call: Callable[[], Any], deadline: float, what: str) -> Any:
        """call(), retried while the coordinator answers CONCURRENT_TRANSACTIONS (a
        transaction of this id still completing, §7.3), until `deadline` (monotonic s)."""
        while True:
            try:
                return call()
            except ConcurrentTransactionsError as error:
                if time.monotonic() >= deadline or self._closed:
                    raise OperationTimedOutError(f"{what}: timed out ({error})") from error
                time.sleep(_CONCURRENT_BACKOFF_S)

    def _deadline(self, timeout: float | None) -> float:
        if timeout is None or timeout < 0:
            return time.monotonic() + self._settings.max_block_ms / 1000
        return time.monotonic() + timeout

    def _require_transactional(self, method: str) -> str:
        transactional_id = self._settings.transactional_id
        if transactional_id is None:
            raise ProducerStateError(f"{method}: the producer has no transactional.id")
        return transactional_id

    def _check_open(self) -> None:
        if self._closed:
            raise ProducerStateError("the producer is closed")

    @property
    def transaction_state(self) -> str | None:
        """The transaction state's name (transaction_manager.TxnState; for inspection and
        tests), or None without a transactional.id."""
        return None if self._txn is None else self._txn.state.name

    # --- introspection ---------------------------------------------------------------------

    @property
    def producer_id(self) -> int:
        """The producer id its batches carry (-1 without idempotence)."""
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer_epoch

    @property
    def settings(self) -> ProducerSettings:
        return self._settings


# --- helpers ---------------------------------------------------------------------------------


def _coordinator_error(error: KafkaException) -> KafkaException:
    """A coordinator call's error as the client raises it: INVALID_PRODUCER_EPOCH from a
    coordinator API means fenced (docs/coordinator.md §7.3), so ProducerFencedError."""
    if isinstance(error, InvalidProducerEpochError):
        return ProducerFencedError(f"fenced: {error.error.str()}")
    return error


def _offset_to_commit(tp: TopicPartition) -> OffsetToCommit:
    if not isinstance(tp, TopicPartition):
        raise TypeError(f"offsets must be TopicPartitions, not {type(tp).__name__}")
    if tp.offset < 0:
        raise ValueError(f"{tp.topic}-{tp.partition}: offset {tp.offset} is not an offset")
    return OffsetToCommit(tp.topic, tp.partition, tp.offset, tp.metadata or "")


def _fill(
    builder: Any,
    values: ColumnInput,
    keys: ColumnInput | None,
    first: int,
    records_max: int,
    timestamp: int,
) -> int:
    """Append records first.. (at most records_max) to an empty builder; how many fit."""
    end = min(len(values), first + records_max)
    if isinstance(values, SpansInput) and (keys is None or isinstance(keys, SpansInput)):
        return int(
            builder.append_spans(
                values.data,
                values.starts[first:end],
                values.lengths[first:end],
                None if keys is None else keys.data,
                None if keys is None else keys.starts[first:end],
                None if keys is None else keys.lengths[first:end],
                timestamp,
            )
        )
    value_rows = values.rows[first:end] if isinstance(values, RowsInput) else None
    if value_rows is None:  # mixed forms: spans as rows
        assert isinstance(values, SpansInput)
        value_rows = _rows_of(values, first, end)
    key_rows = None
    if keys is not None:
        key_rows = (
            keys.rows[first:end] if isinstance(keys, RowsInput) else _rows_of(keys, first, end)
        )
    return int(builder.append_values(value_rows, key_rows, timestamp))


def _rows_of(spans: SpansInput, first: int, end: int) -> list[bytes | None]:
    view = memoryview(spans.data).cast("B")
    return [
        None if length < 0 else view[start : start + length].tobytes()
        for start, length in zip(
            spans.starts[first:end].tolist(), spans.lengths[first:end].tolist(), strict=True
        )
    ]


def _restamp_sequence(raw: bytes | bytearray, base_sequence: int) -> bytearray:
    """The batch with another base sequence and its CRC recomputed (Kafka's
    MemoryRecordsBuilder.reopenAndRewriteProducerState)."""
    batch = bytearray(raw)
    _INT32.pack_into(batch, layout.BASE_SEQUENCE_OFFSET, base_sequence)
    _UINT32.pack_into(batch, layout.CRC_OFFSET, codec.batch_crc(batch))
    return batch


def _headers_list(headers: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> Headers:
    """confluent takes a dict or a list of (str, bytes|str|None); str values go as UTF-8."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    return [(name, value.encode() if isinstance(value, str) else value) for name, value in pairs]


def _deliver(topic: str, partition: int, batch: ProducerBatch, outcome: Any) -> None:
    """Run the batch's per-record callbacks with their DeliveryReports."""
    assert batch.reports is not None
    failed = isinstance(outcome, KafkaException)
    error = outcome.error if failed else None
    base_offset = OFFSET_INVALID if failed else outcome.base_offset
    append_time = -1 if failed else outcome.log_append_time_ms
    reports = batch.reports
    for index in range(len(reports) // _REPORT_STRIDE):
        callback, key, value, headers, timestamp = reports[
            index * _REPORT_STRIDE : (index + 1) * _REPORT_STRIDE
        ]
        if callback is None:
            continue
        stamp = (
            (TIMESTAMP_LOG_APPEND_TIME, append_time)
            if append_time >= 0
            else (TIMESTAMP_CREATE_TIME, timestamp)
        )
        offset = OFFSET_INVALID if failed else base_offset + index
        callback(error, DeliveryReport(topic, partition, offset, key, value, headers, stamp, error))
