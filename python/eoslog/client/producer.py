"""The idempotent Producer (docs/api.md "Producer"; docs/design.md "The data path"). Create it with
`broker.producer(config)`; config keys are in eoslog.client.producer_config.

The Producer is the API; the work is done by its parts, each a module, along the seams of
Kafka's Java producer:

- eoslog.client.record_accumulator: the batches of each partition, opened and closed, stamped
  with the producer id, epoch and sequence. produce() appends the record to its partition's
  open batch. With the extension built, the per-record work of the common case (arguments,
  partition choice, the append, the bookkeeping) runs in C (eoslog._ext.accumulator, bound as
  self.produce); it hands every other record to Producer.produce, the same logic in Python,
  which is also the whole path of the pure twin (EOSLOG_NO_EXTENSIONS=1).
- eoslog.client.sender: appends closed batches in sequence order, retries, the fatal errors of
  an idempotent producer, the delivery-report queue, the linger thread, and the transaction
  coordinator's requests. The thread that closed a batch appends it at once: a full batch by
  the producing thread, a lingering one by the linger thread.
- eoslog.client.transaction_manager: the transaction states (tables), the errors of each call,
  and the coordinator calls' retries.
- eoslog.client.producer_config: the configuration keys.
- eoslog.client.producer_transactions: the transactional calls, which Producer inherits.

Threads. Every method may be called from any thread. One producer lock guards the batches,
sequences and the report queue (each part's state); a send lock per partition keeps appends
in sequence order while the producer lock is free. The transaction state lives under the
producer lock; init/commit/abort_transaction also hold a transaction-call lock, so one of them
runs at a time, while produce() from other threads sees the state change atomically (a record
produced before commit_transaction() moved to COMMITTING is in the commit; one after raises
ProducerStateError).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from eoslog import arguments
from eoslog.client import partitioner
from eoslog.client.columns_input import ColumnInput, column_input
from eoslog.client.delivery import DeliveryReport, Headers
from eoslog.client.producer_config import ProducerSettings, parse
from eoslog.client.producer_transactions import TransactionalCalls
from eoslog.client.record_accumulator import (
    BatchAccumulator,
    group_by_partition,
    next_sequence,
    record_bytes,
    unknown_partition,
)
from eoslog.client.sender import Sender, SenderBroker
from eoslog.client.transaction_manager import (
    TransactionManager,
    TxnState,
)
from eoslog.clock import wall_clock_ms
from eoslog.errors import (
    KafkaError,
    KafkaException,
    ProducerClosedError,
    RecordTooLargeError,
)
from eoslog.record import USING_EXTENSIONS, accumulator, layout

if TYPE_CHECKING:
    from eoslog.coordinator.group_coordinator import GroupCoordinator
    from eoslog.log.meta_file import TopicMetadata

__all__ = ["DeliveryCallback", "Producer", "ProducerBroker", "next_sequence"]

DeliveryCallback = Callable[[KafkaError | None, DeliveryReport], object]
_REPORT_STRIDE: Final = accumulator.REPORT_STRIDE
_NO_REPORT: Final = accumulator.NO_REPORT
# confluent-kafka's reason when produce() refuses a record larger than message.max.bytes.
# librdkafka's RD_KAFKA_PARTITION_UA: the producer's partitioner chooses.
PARTITION_ANY: Final = -1
_TOO_LARGE: Final = "Unable to produce message: Broker: Message size too large"


class ProducerBroker(SenderBroker, Protocol):
    """What the producer needs of the Broker (which imports the producer, never the other
    way round)."""

    groups: GroupCoordinator
    topics_version: int

    def clock_ms(self) -> int: ...

    def init_producer_id(self) -> tuple[int, int]: ...

    def topic_metadata(self, name: str, *, auto_create: bool = False) -> TopicMetadata: ...


class Producer(TransactionalCalls):
    """confluent_kafka.Producer's surface over this process's Broker (docs/api.md "Producer").

    Thread-safe (see the module docstring). A topic produced to before it exists is created
    with the broker's num.partitions, as Kafka's broker does for a producer's metadata request,
    unless `allow.auto.create.topics` (Java's producer key, default true) or the broker's
    `auto.create.topics.enable` is false. Differences from confluent-kafka-python, where
    docs/api.md is silent: produce() raises UnknownTopicOrPartitionError at once for an unknown
    topic not created (librdkafka reports it later, in the delivery report), and
    InvalidTopicError for an invalid topic name. A partition the topic does not have, or a
    negative one other than -1 (any), is UnknownTopicOrPartitionError with librdkafka's code
    _UNKNOWN_PARTITION at the call, as confluent-kafka raises it for a topic it knows;
    every librdkafka key is accepted, and those eoslog.client.producer_config does not apply
    (network, security, ...) are ignored (docs/api.md "librdkafka keys"); `acks` other than
    all/-1 is accepted only
    without idempotence and changes nothing (one node: an append is acknowledged when it is in
    the log). Transactions: eoslog.client.transaction_manager has how they run, their states
    and the errors of each call."""

    def __init__(
        self,
        broker: ProducerBroker,
        config: Mapping[str, object] | None = None,
        *,
        seed: int | None = None,
        default_partitioner: str = partitioner.NATIVE_DEFAULT,
    ) -> None:
        """`default_partitioner`: the partitioner when the config names none
        (eoslog.confluent.Producer passes librdkafka's, consistent_random)."""
        arguments.refuse_config_as_broker("Producer", broker)
        settings = parse(config or {})
        self._settings: ProducerSettings = settings
        self._broker = broker
        self._clock_ms = broker.clock_ms
        self._lock = threading.Lock()
        self._linger_s = settings.linger_ms / 1000
        self._transactional = settings.transactional_id is not None
        self._default_report = settings.on_delivery
        self._queue_messages_max = settings.queue_messages_max
        self._batch_records_max = settings.batch_records_max
        self._message_bytes_max = settings.message_bytes_max
        # Serializes init/commit/abort_transaction (reentrant: a delivery callback run by
        # commit's flush that calls a transaction method gets the state's error, not a hang).
        self._txn_call_lock = threading.RLock()
        self._sender = Sender(broker, settings, self._lock)
        sticky = partitioner.StickyPartitioner(seed, sticky=settings.sticky_linger_ms > 0)
        rule = partitioner.PARTITIONERS[settings.partitioner or default_partitioner]
        # Holds the counters produce() shares with the rest (outstanding; unusable: closed
        # or failed, so produce() asks _check_usable), under self._lock. With the extension
        # built, self.produce is its native per-record path, which hands every case it does
        # not take (a batch to open or close, headers, errors) to Producer.produce below.
        self._accumulator = accumulator.RecordAccumulator(
            self._lock,
            sticky.current,
            functools.partial(Producer.produce, self),
            self._sender.send,
            None if broker.clock_ms is wall_clock_ms else broker.clock_ms,
            settings.on_delivery,
            outstanding_max=settings.queue_messages_max,
            batch_records_max=settings.batch_records_max,
            close_every_record=settings.linger_ms == 0,
            transactional=self._transactional,
            # A record the open batch has room for may still be larger than
            # message.max.bytes: the native path weighs each record then.
            check_record_bytes=settings.batch_bytes_max - layout.HEADER_SIZE
            > settings.message_bytes_max,
            record_bytes_max=settings.message_bytes_max,
            key_hash=rule.key_hash,
            empty_key_random=rule.empty_key_random,
            outstanding_bytes_max=settings.queue_kbytes_max * 1024,
        )
        self._batches = BatchAccumulator(
            settings,
            functools.partial(broker.topic_metadata, auto_create=settings.auto_create_topics),
            sticky,
            self._accumulator,
            self._sender.batch_opened,
            lambda: broker.topics_version,
            rule.name,
        )
        # The transaction state (under self._lock); None without a transactional.id. It opens
        # and closes the accumulator's native path with the transaction (in_transaction).
        self._txn = TransactionManager(self._accumulator) if self._transactional else None
        self._sender.attach(self._batches, self._accumulator, self._txn)
        if USING_EXTENSIONS:
            # Only the native accumulator has a produce (pyext/accumulator.pyi); with the pure
            # twin, Producer.produce below is the whole per-record path.
            self.produce = self._accumulator.produce  # type: ignore[attr-defined, method-assign]
        if settings.idempotent and settings.transactional_id is None:
            # A transactional producer gets its id from init_transactions.
            self._batches.adopt(*broker.init_producer_id())

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
        BufferError when queue.buffering.max.messages are outstanding, or their values
        would pass queue.buffering.max.kbytes (call poll()),
        UnknownTopicOrPartitionError, RecordTooLargeError (KafkaError MSG_SIZE_TOO_LARGE)
        for a record larger than message.max.bytes as librdkafka weighs it (record_bytes),
        or than eoslog's limits.batch_bytes_max (nothing queued then), and the producer's
        fatal error once it has one.

        This is the Python path; with the extension built, producer.produce is the native
        RecordAccumulator.produce, which takes the common case itself and calls this for the
        rest, before it has changed anything."""
        # Wrong types raise here, before anything changes (confluent checks them at the call);
        # the common types pass without a call.
        if type(topic) is not str:
            arguments.text("topic", topic)
        if type(partition) is not int:
            partition = arguments.integer("partition", partition)
        if type(timestamp) is not int:
            timestamp = arguments.integer("timestamp", timestamp)
        if on_delivery is not None:
            arguments.callable_or_none("on_delivery", on_delivery)
        if callback is not None:
            arguments.callable_or_none("callback", callback)
        # The hot path: settings are read from attributes set in __init__, and the common
        # cases (a null key sticking to its partition, an open batch with room) take no call.
        if type(value) is str:
            value = value.encode()
        if type(key) is str:
            key = key.encode()
        if headers is not None:
            headers = _headers_list(arguments.headers(headers))
        if record_bytes(key, value, headers) > self._message_bytes_max:
            raise RecordTooLargeError(_TOO_LARGE)
        report = on_delivery or callback or self._default_report
        if timestamp == 0:
            timestamp = self._clock_ms()
        batches = self._batches
        with self._lock:
            if self._accumulator.unusable:
                self._check_usable()
            if self._txn is not None and self._txn.state is not TxnState.IN_TRANSACTION:
                self._txn.check_call("produce")  # raises: only inside a transaction
            native = self._accumulator
            value_bytes = 0 if value is None else len(value)
            if (
                native.outstanding >= self._queue_messages_max
                or native.outstanding_bytes + value_bytes > native.outstanding_bytes_max
            ):
                raise BufferError("Local: Queue full")
            batches.refresh_counts()
            if partition == PARTITION_ANY:
                sticky = batches.sticky.current.get(topic) if key is None else None
                partition = batches.choose_partition(topic, key) if sticky is None else sticky
            state = batches.state_of(topic, partition)
            batch = state.open
            if batch is None or not batch.builder.append(timestamp, key, value, headers):
                if batch is not None:
                    batches.close(topic, state)
                batch = batches.open_batch(topic, state)
                batches.append_first(topic, state, batch, timestamp, key, value, headers)
            if report is not None:
                if batch.reports is None:
                    batch.reports = [None] * (_REPORT_STRIDE * batch.count)
                batch.reports += (report, key, value, headers, timestamp, time.monotonic())
            elif batch.reports is not None:
                batch.reports += _NO_REPORT
            batch.count += 1
            batch.value_bytes += value_bytes
            native.outstanding += 1
            native.outstanding_bytes += value_bytes
            if batch.count >= self._batch_records_max or self._linger_s == 0:
                batches.close(topic, state)
            send = bool(state.pending)
        if send:
            self._sender.send(topic, state)

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
        partitioner (murmur2 of each key in one native call, the other hashes key by key;
        null keys sticky per batch).

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
            self._batches.refresh_counts()
            count = self._batches.partition_count(topic)
            if partition >= count or partition < PARTITION_ANY:
                raise unknown_partition(topic, partition)
        if len(value_input) == 0:
            return
        if partition >= 0:
            groups: list[tuple[int, Any]] = [(partition, None)]
        else:
            groups = group_by_partition(
                count,
                key_input,
                len(value_input),
                self._batches.partitioner,
                self._batches.sticky.random,
            )
        for chosen, indices in groups:
            part_values = value_input if indices is None else value_input.take(indices)
            part_keys = key_input
            if key_input is not None and indices is not None:
                part_keys = key_input.take(indices)
            self._produce_columns(topic, chosen, part_values, part_keys, timestamp)

    def _produce_columns(
        self,
        topic: str,
        partition: int,
        values: ColumnInput,
        keys: ColumnInput | None,
        timestamp: int,
    ) -> None:
        """Cut the records into batches and append them; partition -1: sticky per batch."""
        batches = self._batches
        total = len(values)
        done = 0
        while done < total:
            batch = batches.column_batch(values, keys, done, timestamp)
            with self._lock:
                self._check_usable()
                if self._txn is not None:
                    self._txn.check_call("produce_batch")
                chosen = partition
                if chosen < 0:
                    chosen = batches.sticky.partition(topic, batches.partition_count(topic))
                state = batches.state_of(topic, chosen)
                if state.open is not None:  # produce()'s records first, in their order
                    batches.close(topic, state)
                state.open = batch
                batches.close(topic, state)
            self._sender.send(topic, state)
            assert batch.results is not None, "column_batch gives its batches a results list"
            if not batch.results:  # retriable failures: produce_batch() is synchronous
                while not batch.results and not self._sender.closed:
                    self._wait_for_retries(
                        time.monotonic() + self._settings.retry_backoff_ms / 1000
                    )
                    self._sender.send(topic, state)
                if not batch.results:
                    self._check_usable()  # closed meanwhile: raises
            outcome = batch.results[0]
            if isinstance(outcome, KafkaException):
                raise outcome
            done += batch.count

    def _check_usable(self) -> None:
        if self._sender.closed:
            raise ProducerClosedError("Producer has been closed")
        fatal = self._sender.fatal
        if fatal is not None:
            raise type(fatal)(fatal.error)

    # --- delivery reports --------------------------------------------------------------------

    def poll(self, timeout: float | None = 0) -> int:
        """Serve queued delivery reports (on_delivery callbacks run here, on this thread,
        after the fsync that covers them under durability "commit"); the number of messages
        reported. Waits up to `timeout` seconds (None: no limit) for a
        first report while messages are outstanding; returns 0 at once when none are."""
        timeout = arguments.optional_real("timeout", timeout)
        sender = self._sender
        sender.retry_due()
        sender.close_lingering(time.monotonic())
        served = sender.serve()
        if served or timeout == 0:
            return served
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        with self._lock:
            while not sender.reports and self._accumulator.outstanding:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                sender.wait_for_change(remaining)
        return sender.serve()

    def flush(self, timeout: float | None = None) -> int:
        """Close every open batch, append it, fsync what was appended (broker durability
        "commit"; under "always" each append was durable already), then serve every delivery
        report: a return, like a callback without error, means durable. The number of
        messages still outstanding (0 when done; another thread may have produced meanwhile).
        Raises the fatal error if the producer has one, after reporting every message."""
        timeout = arguments.optional_real("timeout", timeout)
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        return self._flush_until(deadline)

    def _flush_until(self, deadline: float | None) -> int:
        """flush() until `deadline` (monotonic s; None: no limit): commit_transaction's,
        with its deadline already made."""
        with self._lock:
            if self._batches.lingering:
                self._batches.close_open()
            to_send = []  # a loop, not a comprehension: no call
            for (topic, _partition), state in self._batches.partitions.items():
                if state.pending:
                    to_send.append((topic, state))
        for topic, state in to_send:
            if deadline is not None and time.monotonic() >= deadline:
                break
            self._sender.send(topic, state)
        if self._sender.retrying:
            self._wait_for_retries(deadline)
        # fsync before serving: the reports' callbacks are acknowledgements, and one round
        # of fsyncs here covers them all (serve then finds them durable and syncs nothing).
        self._sender.sync()
        self._sender.serve()
        with self._lock:
            fatal = self._sender.fatal
            remaining = self._accumulator.outstanding
        if fatal is not None:
            raise type(fatal)(fatal.error)
        return remaining

    def _wait_for_retries(self, deadline: float | None) -> None:
        """Retry the batches that failed with a retriable error as their retry.backoff.ms
        passes, until none is left or the deadline (flush() may block; produce() never
        does). Each gives up by itself past delivery.timeout.ms."""
        sender = self._sender
        while True:
            with self._lock:
                retry_s = sender.next_retry_s()
                if retry_s is None or sender.closed:
                    return
                now_s = time.monotonic()
                if deadline is not None and now_s >= deadline:
                    return
                wait_s = retry_s - now_s
                if deadline is not None:
                    wait_s = min(wait_s, deadline - now_s)
                if wait_s > 0:
                    sender.wait_for_change(wait_s)
            sender.retry_due()

    def __len__(self) -> int:
        """Messages produced whose delivery report poll()/flush() has not served yet
        (confluent's len(producer))."""
        return self._accumulator.outstanding

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """confluent-kafka's purge: with in_queue, every message not yet appended fails with
        KafkaError._PURGE_QUEUE (MessagePurgedError), reported by the next poll() or flush().
        An append already under way completes (there is no network request to abandon, so
        in_flight purges nothing more); blocking is accepted for confluent's signature. In a
        transaction with messages purged, the transaction can only be aborted (its commit
        would lose them): it moves to the abortable state. TypeError for a non-bool flag."""
        for name, flag in (
            ("in_queue", in_queue),
            ("in_flight", in_flight),
            ("blocking", blocking),
        ):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool, not {type(flag).__name__}")
        self._check_open()
        if in_queue:
            self._sender.purge_queued("purged by purge()")

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Leaving a `with` block closes the producer: flush() first, as confluent-kafka's
        does (what cannot be written is reported, never dropped)."""
        self.close()

    def close(self, timeout: float | None = None) -> int:
        """flush(), then stop the linger thread; later calls raise ProducerStateError.
        Idempotent. What the flush could not write within `timeout` is purged and reported
        (KafkaError._PURGE_QUEUE) before close returns, so no message is dropped without a
        delivery report; returns the messages still unreported (0 unless another thread is
        appending one of them).

        A transactional producer first aborts a transaction still open (IN_TRANSACTION or
        ABORTABLE_ERROR), as Kafka's graceful close does; if that abort fails, the
        coordinator aborts the transaction at its timeout or at the next init_transactions
        with the id. In FATAL_ERROR close does not raise (it is the one call left)."""
        if self._sender.closed:
            return self._accumulator.outstanding
        try:
            if self._txn is not None:
                remaining = self._close_transactional(timeout)
            else:
                remaining = self.flush(timeout)
            if remaining:
                self._sender.purge_queued("not written before close()'s timeout")
                self._sender.serve()
                remaining = self._accumulator.outstanding
            return remaining
        finally:
            with self._lock:
                self._sender.stop()
            self._sender.join_linger_thread()

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

    # --- introspection ---------------------------------------------------------------------

    @property
    def producer_id(self) -> int:
        """The producer id its batches carry (-1 without idempotence)."""
        return self._batches.producer_id

    @property
    def producer_epoch(self) -> int:
        return self._batches.producer_epoch

    @property
    def settings(self) -> ProducerSettings:
        return self._settings


def _headers_list(headers: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> Headers:
    """confluent takes a dict or a list of (str, bytes|str|None); str values go as UTF-8."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    return [(name, value.encode() if isinstance(value, str) else value) for name, value in pairs]
