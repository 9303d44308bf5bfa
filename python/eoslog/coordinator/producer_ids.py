"""Producer-id allocation in blocks (docs/coordinator.md §5).

Ids are handed out from a block of PRODUCER_ID_BLOCK_SIZE, and the end of a block is made
durable before any id in it is used: after a crash the unused rest of the block is skipped,
never reused. Kafka's controller does the same with its ProducerIdsRecord; here the durable
counter lives in the broker's CRC-protected metadata file (docs/design.md "Files on disk").
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

from eoslog.errors import KafkaError, KafkaException

PRODUCER_ID_BLOCK_SIZE: Final = 1000
# Kafka refuses a block whose first id is past Long.MAX_VALUE - block size.
_LAST_BLOCK_START: Final = (1 << 63) - 1 - PRODUCER_ID_BLOCK_SIZE


class ProducerIdsExhaustedError(KafkaException):
    """Every producer id has been used (Kafka: "Exhausted all producerIds")."""

    code = KafkaError.UNKNOWN


class ProducerIdManager:
    """Thread-safe. `persist(next_block_start)` must make the value durable or raise."""

    def __init__(self, next_block_start: int, persist: Callable[[int], None]) -> None:
        if next_block_start < 0:
            raise ValueError(f"next producer-id block start {next_block_start} is negative")
        self._persist = persist
        self._lock = threading.Lock()
        self._next_block_start = next_block_start
        self._next_id = next_block_start
        self._block_end = next_block_start  # nothing handed out yet: the first call persists

    @property
    def next_block_start(self) -> int:
        """The first id of the next block: every id below it may have been handed out."""
        return self._next_block_start

    def generate(self) -> int:
        """A producer id never handed out before, in this process or any earlier one."""
        with self._lock:
            if self._next_id >= self._block_end:
                start = self._next_block_start
                if start > _LAST_BLOCK_START:
                    raise ProducerIdsExhaustedError("exhausted all producer ids")
                end = start + PRODUCER_ID_BLOCK_SIZE
                self._persist(end)  # durable before any id of the block is used
                self._next_block_start = end
                self._next_id, self._block_end = start, end
            producer_id = self._next_id
            self._next_id += 1
            return producer_id
