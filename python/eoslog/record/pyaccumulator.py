"""The readable twin of eoslog._ext.accumulator (contract: pyext/accumulator.pyi).
EOSLOG_NO_EXTENSIONS=1 selects it.

The native module's produce() is a fast path in C for the common case, handing every other
case to the producer's Python path, Producer.produce (eoslog.client.producer). That Python path
is the readable twin of the per-record logic, and the whole of it here: a producer over this
module does not bind a produce of the accumulator, so RecordAccumulator below has none (the
state classes and the counters are the twin's part).
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Final

# per record: callback, key, value, headers, timestamp, enqueued_s (time.monotonic())
REPORT_STRIDE: Final = 6
NO_REPORT: Final[tuple[None, ...]] = (None,) * REPORT_STRIDE


class ProducerBatch:
    """A batch of one partition: open (builder filling), then closed (raw bytes), then done."""

    __slots__ = (
        "base_sequence",
        "builder",
        "count",
        "opened_s",
        "raw",
        "reports",
        "results",
        "value_bytes",
    )

    def __init__(self, builder: Any, opened_s: float) -> None:
        self.builder: Any = builder
        self.opened_s = opened_s
        self.count = 0
        self.raw: bytes | bytearray = b""
        self.base_sequence = -1
        # REPORT_STRIDE entries per record, or None while no record of the batch has a
        # callback (the common case: nothing per record at all).
        self.reports: list[Any] | None = None
        # produce_batch() batches collect their outcome here instead of the report queue.
        self.results: list[Any] | None = None
        # Its records' values' bytes, counted against queue.buffering.max.kbytes until the
        # batch is reported.
        self.value_bytes = 0


class PartitionState:
    """One partition of one topic in a producer."""

    __slots__ = ("next_sequence", "open", "partition", "pending", "planned_sequence", "send_lock")

    def __init__(
        self, partition: int, pending: deque[ProducerBatch], send_lock: threading.Lock
    ) -> None:
        self.partition = partition
        self.open: ProducerBatch | None = None
        self.pending = pending  # closed, in sequence order, not yet done
        self.send_lock = send_lock
        self.next_sequence = 0  # of the next batch to append (sender, under send_lock)
        self.planned_sequence = 0  # of the next batch to close (under the producer lock)


class RecordAccumulator:
    """The producer's counters (there is no produce here: see the module docstring)."""

    def __init__(
        self,
        lock: threading.Lock,
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
        outstanding_bytes_max: int = sys.maxsize,
    ) -> None:
        if outstanding_max < 1 or batch_records_max < 1:
            raise ValueError("outstanding_max and batch_records_max must be at least 1")
        self.outstanding_max = outstanding_max
        self.batch_records_max = batch_records_max
        self.close_every_record = close_every_record
        self.transactional = transactional
        self.check_record_bytes = check_record_bytes
        self.record_bytes_max = record_bytes_max
        self.key_hash = key_hash
        self.empty_key_random = empty_key_random
        self.in_transaction = False
        self.unusable = False
        self.outstanding = 0
        self.outstanding_bytes = 0
        self.outstanding_bytes_max = outstanding_bytes_max

    def add_partition(self, topic: str, partitions: int, state: PartitionState) -> None:
        if not 0 <= state.partition < partitions:
            raise ValueError(f"partition {state.partition} outside [0, {partitions})")

    def forget_topic(self, topic: str) -> None:
        """The pure twin has no fast path: every record takes the Python path already."""
