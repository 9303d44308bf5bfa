"""The wall clock eoslog reads when it is given none (eoslog.open's clock_ms).

A module of its own, under the broker and the client, so that both can name it: the producer
compares the broker's clock with it to know when it may read the wall clock in C itself
(eoslog._ext.accumulator), without calling it.

wall_clock_ms() is milliseconds since the epoch, as time.time_ns() // 1_000_000. It is read in
C (eoslog._ext.accumulator.wall_clock_ms): the log and the coordinators read it several times
per transaction, and the Python form cost two calls each time.
"""

from __future__ import annotations

from eoslog._ext.accumulator import wall_clock_ms

__all__ = ["wall_clock_ms"]
