"""Group commit: concurrent callers that need their writes durable share one fsync.

Each caller asks for durability up to a point in a monotonically increasing sequence (a log
end offset). One caller at a time runs the sync, for everything written so far; the callers
that arrive meanwhile wait for it and return together if it covered them. A failed sync is
fatal (docs/design.md "Durability": fail-stop): it is remembered and every later call raises.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from eoslog.errors import KafkaStorageError


class GroupSync:
    """Thread-safe. `written` reports how far writes have reached now; `sync` makes all of
    them durable (raising OSError on failure)."""

    def __init__(self, written: Callable[[], int], sync: Callable[[], None], durable: int) -> None:
        self._written = written
        self._sync = sync
        self._durable = durable
        self._syncing = False
        # The failure that stopped it, or None. An attribute, not a property: every append
        # reads it, and a set attribute never goes back to None.
        self.failure: KafkaStorageError | None = None
        self._changed = threading.Condition()

    @property
    def durable(self) -> int:
        """Everything below this point is durable."""
        return self._durable

    def check(self) -> None:
        """Raise the stored failure, if a sync ever failed."""
        if self.failure is not None:
            raise self.failure

    def sync_through(self, target: int) -> None:
        """Return once everything below `target` is durable, running a sync if needed."""
        if self._durable >= target and self.failure is None:
            # Already durable (a marker the data's sync covered, say): no lock. `_durable`
            # only grows while nothing is truncated, and a truncation racing this read could
            # as well have come just after it.
            return
        with self._changed:
            while True:
                self.check()
                if self._durable >= target:
                    return
                if not self._syncing:
                    break
                self._changed.wait()
            self._syncing = True
            reach = self._written()
        try:
            self._sync()
        except OSError as error:
            with self._changed:
                self.failure = KafkaStorageError(f"fsync failed, no further writes: {error}")
                self._syncing = False
                self._changed.notify_all()
            raise self.failure from error
        with self._changed:
            self._durable = max(self._durable, reach)
            self._syncing = False
            self._changed.notify_all()
        if self._durable < target:
            # The target was not yet written when this sync began (a caller may ask for a
            # point its own write has not reached): another round covers it.
            self.sync_through(target)

    def lower(self, point: int) -> None:
        """Forget durability at and after `point` (the log was truncated there)."""
        with self._changed:
            self._durable = min(self._durable, point)

    def fail(self, error: KafkaStorageError) -> None:
        """Record a storage failure seen elsewhere (a failed write): fail-stop from now on."""
        with self._changed:
            if self.failure is None:
                self.failure = error
            self._changed.notify_all()
