"""How a reader in the owning process waits for new data without sleep-polling (docs/design.md
"Fetch"): every partition log of a broker bumps one shared AppendSignal when it publishes a
new log end or last stable offset, and a waiting consumer sleeps on it until it changes.

The bump is an integer increment and a check for waiters, so an append with nobody waiting
pays well under a microsecond; a notification takes the lock only when someone waits. No
wake-up is lost: a waiter registers under the lock before it compares the generation, and
a writer changes the generation before it looks for waiters, so either the waiter sees the
new generation or the writer sees the waiter.

The generation says "something changed somewhere", not what: a woken reader fetches again
and may find nothing for itself (another partition grew). It only ever changes, never
repeats a value a reader holds (a lost increment between two racing writers still leaves a
new value), which is all a reader compares.
"""

from __future__ import annotations

import threading


class AppendSignal:
    """One broker's wake-up for readers waiting on its partition logs. Any thread."""

    __slots__ = ("_changed", "_generation", "_waiters")

    def __init__(self) -> None:
        self._changed = threading.Condition(threading.Lock())
        self._generation = 0
        self._waiters = 0

    @property
    def generation(self) -> int:
        """Take this before looking for data; wait_for_change(it) returns once it moves."""
        return self._generation

    def bump(self) -> None:
        """Called by a writer after it has published new data (a log end, an LSO)."""
        self._generation += 1
        if self._waiters:
            with self._changed:
                self._changed.notify_all()

    def wait_for_change(self, generation: int, timeout_s: float) -> bool:
        """Block until the generation is no longer `generation`, or timeout_s passes;
        whether it changed."""
        with self._changed:
            self._waiters += 1
            try:
                if self._generation == generation:
                    self._changed.wait(timeout_s)
            finally:
                self._waiters -= 1
            return self._generation != generation
