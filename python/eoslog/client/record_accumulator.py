"""The producer's batches (Kafka's RecordAccumulator; docs/design.md "Produce"): per partition,
the open batch and the closed ones waiting for the sender, the producer id and epoch they are
stamped with, and the sticky partitioner; and produce_batch()'s cutting of columns into
batches.

produce() appends a record to its partition's open batch (a native BatchBuilder): the
per-record work is Producer.produce (the Python path) and, with the extension built,
eoslog._ext.accumulator's RecordAccumulator.produce (the native path), which opens and closes
no batch itself. A batch closes when the next record does not fit in batch.size, when it holds
batch.num.messages records, when linger.ms has passed since it opened, or on flush()/close().
A closed batch gets the producer id, epoch and the partition's next base sequence (as Kafka's
RecordAccumulator stamps them when it drains a batch) and its bytes are built once; the sender
(eoslog.client.sender) appends it.

Thread safety: no lock of its own. Every method is called with the producer lock held.
"""

from __future__ import annotations

import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from eoslog import limits
from eoslog.client import partitioner
from eoslog.client.columns_input import ColumnInput, RowsInput, SpansInput
from eoslog.errors import (
    KafkaError,
    KafkaException,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from eoslog.record import accumulator, codec, layout

if TYPE_CHECKING:
    from eoslog.client.producer_config import ProducerSettings
    from eoslog.log.meta_file import TopicMetadata

SEQUENCE_MASK: Final = limits.sequence_max  # sequences wrap at 2**31 - 1 (incrementSequence)
# The accumulator's classes: native (eoslog._ext.accumulator) or the pure twin.
ProducerBatch = accumulator.ProducerBatch
PartitionState = accumulator.PartitionState
_SEQUENCE: Final = struct.Struct(">i")  # a batch's base sequence, int32 big-endian
_CRC: Final = struct.Struct(">I")  # its CRC-32C, uint32 big-endian


def next_sequence(sequence: int, records: int) -> int:
    """The sequence after `records` records from `sequence`, wrapping past 2**31 - 1 to 0
    (Kafka's DefaultRecordBatch.incrementSequence)."""
    return (sequence + records) & SEQUENCE_MASK


def restamp_sequence(raw: bytes | bytearray, base_sequence: int) -> bytearray:
    """The batch with another base sequence and its CRC recomputed (Kafka's
    MemoryRecordsBuilder.reopenAndRewriteProducerState)."""
    batch = bytearray(raw)
    _SEQUENCE.pack_into(batch, layout.BASE_SEQUENCE_OFFSET, base_sequence)
    _CRC.pack_into(batch, layout.CRC_OFFSET, codec.batch_crc(batch))
    return batch


class BatchAccumulator:
    """The partitions a producer has written to and their batches.

    `partitions` maps (topic, partition) to its PartitionState; `lingering` holds the states
    with an open batch, oldest batch first. `opened(batch)` is called for every batch opened
    (the sender's linger thread watches them). `native` is the producer's
    accumulator.RecordAccumulator: every partition added is registered with it, so that its
    native produce() path can reach the partition's open batch."""

    def __init__(
        self,
        settings: ProducerSettings,
        topic_metadata: Callable[[str], TopicMetadata],
        sticky: partitioner.StickyPartitioner,
        native: accumulator.RecordAccumulator,
        opened: Callable[[ProducerBatch], None],
        topics_version: Callable[[], int] = lambda: 0,
        partitioner_name: str = partitioner.NATIVE_DEFAULT,
    ) -> None:
        self._settings = settings
        self._topic_metadata = topic_metadata
        self._topics_version = topics_version
        self._counts_version = topics_version()
        self._transactional = settings.transactional_id is not None
        self._native = native
        self._opened = opened
        self.sticky = sticky
        self.partitioner = partitioner.PARTITIONERS[partitioner_name]
        self.partitions: dict[tuple[str, int], PartitionState] = {}
        self.lingering: dict[tuple[str, int], PartitionState] = {}  # open batches, oldest first
        self._partition_counts: dict[str, int] = {}
        self.producer_id, self.producer_epoch = -1, -1
        self._solo_batch_bytes_max = min(
            settings.message_bytes_max + layout.HEADER_SIZE, limits.batch_bytes_max
        )

    def new_builder(self, batch_bytes_max: int) -> Any:
        return codec.BatchBuilder(
            compression=self._settings.compression,
            compression_level=self._settings.compression_level,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            batch_bytes_max=batch_bytes_max,
            is_transactional=self._transactional,
        )

    def open_batch(self, topic: str, state: PartitionState) -> ProducerBatch:
        batch = ProducerBatch(self.new_builder(self._settings.batch_bytes_max), time.monotonic())
        state.open = batch
        self._opened(batch)
        self.lingering[(topic, state.partition)] = state
        return batch

    def append_first(
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
        own, as librdkafka's and Kafka's accumulators do (produce() has held it to
        message.max.bytes; the topic's max.message.bytes bounds the batch at the append);
        past eoslog's limits.batch_bytes_max it raises RecordTooLargeError and leaves no
        batch open."""
        try:
            try:
                batch.builder.append(timestamp, key, value, headers)
            except RecordTooLargeError:
                batch.builder = self.new_builder(limits.batch_bytes_max)
                batch.builder.append(timestamp, key, value, headers)
        except BaseException:
            state.open = None
            self.lingering.pop((topic, state.partition), None)
            raise

    def close(self, topic: str, state: PartitionState) -> None:
        """Close the open batch: assign its base sequence and build its bytes."""
        batch = state.open
        assert batch is not None, "closing a partition without an open batch"
        state.open = None
        self.lingering.pop((topic, state.partition), None)
        self.sticky.batch_closed(topic, state.partition, self.partition_count(topic))
        if batch.count == 0:
            return
        if self.producer_id >= 0:
            batch.base_sequence = state.planned_sequence
            state.planned_sequence = next_sequence(batch.base_sequence, batch.count)
            batch.builder.set_producer_state(
                self.producer_id, self.producer_epoch, batch.base_sequence
            )
        batch.raw = batch.builder.build()
        batch.builder = None
        state.pending.append(batch)

    def close_open(self) -> None:
        """Close every open batch (flush, abort)."""
        for (topic, _partition), state in list(self.lingering.items()):
            self.close(topic, state)

    def choose_partition(self, topic: str, key: Any) -> int:
        """The record's partition under the producer's partitioner (eoslog.client.partitioner)."""
        count = self.partition_count(topic)
        rule = self.partitioner
        if key is None:
            if rule.null_key_sticky:
                return self.sticky.partition(topic, count)
            return rule.hash_of(b"") % count
        return partitioner.choose(rule, key, count, self.sticky.random)

    def refresh_counts(self) -> None:
        """Forget the cached partition counts once a topic was created or deleted since they
        were asked (the broker's topics_version moved), as a Kafka client refreshes its
        metadata: the next record of each topic asks again, so a producer learns a deleted
        topic, and a re-created one's new partition count, at its next produce(). Producer
        lock held."""
        version = self._topics_version()
        if version == self._counts_version:
            return
        self._counts_version = version
        for topic in self._partition_counts:
            self._native.forget_topic(topic)
            self.sticky.current.pop(topic, None)
        self._partition_counts.clear()

    def partition_count(self, topic: str) -> int:
        """The topic's partition count, asked of the broker once per topic (until
        refresh_counts): its metadata request, which creates an unknown topic when
        allow.auto.create.topics and the broker allow it, and raises
        UnknownTopicOrPartitionError or InvalidTopicError otherwise."""
        try:  # a subscript, not get(): no call on produce()'s path
            return self._partition_counts[topic]
        except KeyError:
            count = self._partition_counts[topic] = self._topic_metadata(topic).num_partitions
            return count

    def partition_exists(self, topic: str, partition: int) -> bool:
        """Whether the broker has the partition now, asking as the producer's metadata
        request would (creating a deleted topic again when auto-creation is allowed, as a
        Kafka producer's next metadata refresh does), past the cached counts. Any thread:
        it reads no state of the accumulator."""
        try:
            metadata = self._topic_metadata(topic)
        except KafkaException:
            return False
        return partition < metadata.num_partitions

    def state_of(self, topic: str, partition: int) -> PartitionState:
        """The partition's state; registered again (its partition checked against the
        topic's count) when the counts were refreshed since. Producer lock held."""
        if topic in self._partition_counts:
            try:  # a subscript, not get(): no call on produce()'s path
                return self.partitions[(topic, partition)]
            except KeyError:
                pass
        return self.add_partition(topic, partition)

    def add_partition(self, topic: str, partition: int) -> PartitionState:
        """The partition's state, made and registered with the native path (again, after
        refresh_counts, for a partition that still exists: its batches and sequences stay)."""
        if not 0 <= partition < self.partition_count(topic):
            raise unknown_partition(topic, partition)
        state = self.partitions.get((topic, partition))
        if state is None:
            state = self.partitions[(topic, partition)] = PartitionState(
                partition, deque(), threading.Lock()
            )
        self._native.add_partition(topic, self.partition_count(topic), state)
        return state

    def adopt(self, producer_id: int, producer_epoch: int) -> None:
        """The producer id and epoch of the next batches; every sequence restarts at 0
        (nothing queued or in flight)."""
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        for state in self.partitions.values():
            assert state.open is None and not state.pending, "adopting with batches queued"
            state.next_sequence = state.planned_sequence = 0

    def column_batch(
        self,
        values: ColumnInput,
        keys: ColumnInput | None,
        first: int,
        timestamp: int,
    ) -> ProducerBatch:
        """A closed-to-be batch of produce_batch()'s records first.. (as many as fit), for
        the caller to queue; no lock needed (it touches nothing shared)."""
        builder = self.new_builder(self._settings.batch_bytes_max)
        records_max = self._settings.batch_records_max
        try:
            appended = _fill(builder, values, keys, first, records_max, timestamp)
        except RecordTooLargeError:
            # The first record alone exceeds batch.size: a batch of its own, as produce(),
            # held to message.max.bytes (and its batch framing).
            builder = self.new_builder(self._solo_batch_bytes_max)
            appended = _fill(builder, values, keys, first, 1, timestamp)
        batch = ProducerBatch(builder, 0.0)
        batch.count = appended
        batch.results = []
        return batch


def record_bytes(key: Any, value: Any, headers: list[tuple[str, Any]] | None) -> int:
    """The record's size as librdkafka weighs it against message.max.bytes: key, value and
    each header's name and value with their varint lengths, plus the largest v2 record
    framing (limits.record_overhead_bytes_max). A key or value that is not a buffer counts
    0 (the builder refuses it with its own TypeError)."""
    if headers is None and type(value) is bytes and key is None:  # the common record
        return limits.record_overhead_bytes_max + len(value)
    size = limits.record_overhead_bytes_max + _buffer_bytes(key) + _buffer_bytes(value)
    for name, header_value in headers or ():
        name_bytes = len(name.encode()) if isinstance(name, str) else _buffer_bytes(name)
        value_bytes = -1 if header_value is None else _buffer_bytes(header_value)
        size += _varint_bytes(name_bytes) + name_bytes
        size += _varint_bytes(value_bytes) + max(value_bytes, 0)
    return size


def _buffer_bytes(data: Any) -> int:
    if data is None:
        return 0
    if type(data) is bytes:
        return len(data)
    try:
        return memoryview(data).nbytes
    except TypeError:
        return 0


def _varint_bytes(number: int) -> int:
    """Bytes of a zigzag varint (docs/format.md §2) holding `number`."""
    zigzag = (number << 1) ^ (number >> 63)
    return max(1, (zigzag.bit_length() + 6) // 7)


def group_by_partition(
    count: int,
    keys: ColumnInput | None,
    records: int,
    rule: partitioner.Partitioner,
    rng: Any,
) -> list[tuple[int, Any]]:
    """produce_batch()'s (partition, record indices) per partition under the partitioner
    `rule`; -1 means null keys (sticky)."""
    if keys is None:
        if rule.null_key_sticky:
            return [(-1, None)]
        return [(rule.hash_of(b"") % count, None)]
    spans = keys.as_spans() if isinstance(keys, RowsInput) else keys
    chosen = partitioner.partitions_for_spans(
        spans.data, spans.starts, spans.lengths, count, rule, rng
    )
    order = np.argsort(chosen, kind="stable")
    bounds = np.flatnonzero(np.diff(chosen[order])) + 1
    return [(int(chosen[group[0]]), group) for group in np.split(order, bounds) if len(group)]


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


def unknown_partition(topic: str, partition: int) -> UnknownTopicOrPartitionError:
    """A partition the topic does not have (or a negative one other than -1, "any"): as
    librdkafka, _UNKNOWN_PARTITION at the call, not retriable; still an
    UnknownTopicOrPartitionError for `except` clauses."""
    return UnknownTopicOrPartitionError(
        KafkaError(KafkaError._UNKNOWN_PARTITION, f"Local: Unknown partition: {topic}-{partition}")
    )
