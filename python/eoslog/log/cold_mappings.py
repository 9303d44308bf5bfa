"""The inactive segments whose .log stays mapped for reads, at most
limits.cold_log_mappings_max per process, least recently read unmapped first.

A mapping keeps a file descriptor of its own (Python's mmap duplicates the one it maps), so
a read from the start of a log of thousands of segments would otherwise hold two descriptors
per segment for good (docs/design.md "Files and file descriptors"). Unmapping is safe at any
time: MappedLog.unmap closes only mappings no view uses, and a later read maps again.

Thread safety: touched may run on any reader thread; one lock guards the order, and victims
are unmapped outside it (each under its own MappedLog lock).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from eoslog import limits
from eoslog.log.mapped_log import MappedLog

_lock = threading.Lock()
# id(log) -> log, least recently read first.
_mapped: OrderedDict[int, MappedLog] = OrderedDict()


def touched(log: MappedLog, limit: int | None = None) -> None:
    """log (an inactive segment's) was just read through a mapping: it becomes the most
    recent, and the least recent beyond `limit` (limits.cold_log_mappings_max) are unmapped."""
    keep = limits.cold_log_mappings_max if limit is None else limit
    victims: list[MappedLog] = []
    with _lock:
        key = id(log)
        if key in _mapped:
            _mapped.move_to_end(key)
        else:
            _mapped[key] = log
        while len(_mapped) > keep:
            victims.append(_mapped.popitem(last=False)[1])
    for victim in victims:
        victim.unmap()


def forget(log: MappedLog) -> None:
    """log is closed: drop it from the order (its id may be reused)."""
    with _lock:
        if _mapped.get(id(log)) is log:
            del _mapped[id(log)]
