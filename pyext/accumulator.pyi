"""The producer's record accumulator (eoslog._ext.accumulator; the readable twin is
eoslog.record.pyaccumulator). The Producer (eoslog.client.producer; its batches in
eoslog.client.record_accumulator) owns every object here and guards it with its producer lock;
RecordAccumulator.produce is its per-record path in C."""

from collections import deque
from collections.abc import Callable
from threading import Lock
from typing import Any, Final

REPORT_STRIDE: Final[int]
"""Entries per record in ProducerBatch.reports: callback, key, value, headers, timestamp,
and the time.monotonic() of its produce() (for the report's latency())."""
NO_REPORT: Final[tuple[None, ...]]
"""REPORT_STRIDE Nones: the entries of a record without a callback."""

def wall_clock_ms() -> int:
    """Milliseconds since the epoch, as time.time_ns() // 1_000_000, read in C (eoslog.clock's
    wall clock)."""

class ProducerBatch:
    """A batch of one partition: open (builder filling), then closed (raw bytes), then done."""

    builder: Any
    opened_s: float
    count: int
    raw: bytes | bytearray
    base_sequence: int
    reports: list[Any] | None
    """REPORT_STRIDE entries per record, or None while no record has a callback."""
    results: list[Any] | None
    value_bytes: int
    """Its records' values' bytes, counted against queue.buffering.max.kbytes."""
    """produce_batch() batches collect their outcome here instead of the report queue."""

    def __init__(self, builder: Any, opened_s: float) -> None: ...

class PartitionState:
    """One partition of one topic in a producer."""

    partition: int
    open: ProducerBatch | None
    pending: deque[ProducerBatch]
    """Closed, in sequence order, not yet done."""
    send_lock: Lock
    next_sequence: int
    """Of the next batch to append (sender, under send_lock)."""
    planned_sequence: int
    """Of the next batch to close (under the producer lock)."""

    def __init__(self, partition: int, pending: deque[ProducerBatch], send_lock: Lock) -> None: ...

class RecordAccumulator:
    """produce()'s per-record path for one Producer.

    `slow` is the producer's Python produce (called with produce's arguments whenever the
    record needs more than an append to an open batch: headers, a batch to open or close, an
    unknown partition, a closed or failed producer, unusual argument types); `send(topic,
    state)` appends the partition's closed batches. `clock_ms` None reads the wall clock in C
    (time.time_ns() // 1_000_000). `sticky` is the sticky partitioner's topic -> partition
    dict, read as it changes. Everything is read and changed under `lock` only."""

    unusable: bool
    """Closed or failed: produce() takes the Python path, which raises."""
    in_transaction: bool
    """A transactional producer's transaction is open (set by its TransactionManager under
    the lock); otherwise a transactional producer's produce() takes the Python path."""
    outstanding: int
    """Produced and not yet reported to poll()/flush()."""
    outstanding_bytes: int
    """Their values' bytes (librdkafka's measure for queue.buffering.max.kbytes)."""
    @property
    def outstanding_max(self) -> int: ...
    @property
    def outstanding_bytes_max(self) -> int: ...
    @property
    def batch_records_max(self) -> int: ...
    @property
    def close_every_record(self) -> bool: ...
    @property
    def transactional(self) -> bool: ...
    @property
    def key_hash(self) -> int:
        """The partitioner's key hash (eoslog.client.partitioner HASH_*)."""
    @property
    def empty_key_random(self) -> bool:
        """An empty key goes to a random partition (consistent_random)."""
    @property
    def check_record_bytes(self) -> bool:
        """batch.size has room for a record larger than message.max.bytes: each record is
        weighed (against record_bytes_max), and one too large takes the Python path."""
    @property
    def record_bytes_max(self) -> int: ...
    def __init__(
        self,
        lock: Lock,
        sticky: dict[str, int],
        slow: Callable[..., None],
        send: Callable[[str, PartitionState], None],
        clock_ms: Callable[[], int] | None,
        default_report: Callable[[Any, Any], object] | None,
        *,
        outstanding_max: int,
        batch_records_max: int,
        close_every_record: bool,
        transactional: bool,
        check_record_bytes: bool = False,
        record_bytes_max: int = 0,
        key_hash: int = 1,
        empty_key_random: bool = False,
        outstanding_bytes_max: int = ...,
    ) -> None:
        """ValueError if outstanding_max or batch_records_max is below 1."""

    def add_partition(self, topic: str, partitions: int, state: PartitionState) -> None:
        """Make `state` reachable by produce() (producer lock held). ValueError if
        state.partition is outside [0, partitions)."""

    def forget_topic(self, topic: str) -> None:
        """Take the topic off the fast path until add_partition registers it again."""

    def produce(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int = -1,
        on_delivery: Callable[[Any, Any], object] | None = None,
        timestamp: int = 0,
        headers: Any = None,
        *,
        callback: Callable[[Any, Any], object] | None = None,
    ) -> None:
        """Producer.produce: same arguments, results and errors. Native only: the pure twin
        (eoslog.record.pyaccumulator) has no produce, its producer runs Producer.produce."""
