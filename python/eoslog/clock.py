"""The wall clock eoslog reads when it is given none (eoslog.open's clock_ms).

A module of its own, under the broker and the client, so that both can name it: the producer
compares the broker's clock with it to know when it may read the wall clock in C instead
(eoslog._ext.accumulator).
"""

from __future__ import annotations

import time


def wall_clock_ms() -> int:
    """Milliseconds since the epoch. A producer on this clock reads it in C instead
    (eoslog._ext.accumulator), with the same result."""
    return time.time_ns() // 1_000_000
