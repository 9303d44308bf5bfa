"""Named crash points (docs/reliability.md family 2): `EOSLOG_CRASH_AT=<point>:<n>` makes the n-th
hit of the named point kill the process with SIGKILL on the spot, as a power cut or kill -9
would stop it there (the page cache survives, so this tests process crashes; the fs twin tests
power loss). Without the variable a hit costs one dictionary lookup.

The points, in the order a transaction meets them: append.before (a batch is about to be
written), append.after (written, not yet acknowledged), fsync.before, fsync.after,
roll.after (a new segment made, the old one's indexes trimmed), snapshot.after (a producer
snapshot written), retention.after (a segment unlinked), coordinator.prepare.after (a
Prepare{Commit,Abort} record persisted), marker.before / marker.after (each COMMIT/ABORT
marker; also those recovery writes at open), coordinator.complete.after (Complete{Commit,Abort}
applied, its record queued for the state partition's next append), offsets.commit.after (an
offset commit appended to `__consumer_offsets`, plain or transactional, before it is
acknowledged).

Topic changes have their own points (TOPIC_CHANGE_POINTS), met only when a topic is changed:
partitions.made (new partition directories made, eoslog.meta not yet renamed),
partitions.committed (eoslog.meta names the new count, recovery points not yet written),
records.deleted (delete_records' log start durable, the segments below it not yet deleted).
`eoslog archive` has one (ARCHIVE_POINTS): archive.copy, before each chunk of a file it copies
to the archive is written (eoslog.archive).
The log cleaner has its own (CLEANER_POINTS, docs/design.md "Compaction"), met per segment it
swaps: cleaner.checkpoint.after (cleaner-offset-checkpoint durable, nothing swapped yet),
cleaner.cleaned.after (the `.log.cleaned` file written and synced), cleaner.unindexed.after
(the old segment's index files removed), cleaner.swapped.after (the cleaned file renamed over
the `.log`), cleaner.indexed.after (its indexes rebuilt and synced).
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Final

POINTS: Final = (
    "append.before",
    "append.after",
    "fsync.before",
    "fsync.after",
    "roll.after",
    "snapshot.after",
    "retention.after",
    "coordinator.prepare.after",
    "marker.before",
    "marker.after",
    "coordinator.complete.after",
    "offsets.commit.after",
)
TOPIC_CHANGE_POINTS: Final = ("partitions.made", "partitions.committed", "records.deleted")
ARCHIVE_POINTS: Final = ("archive.copy",)
CLEANER_POINTS: Final = (
    "cleaner.checkpoint.after",
    "cleaner.cleaned.after",
    "cleaner.unindexed.after",
    "cleaner.swapped.after",
    "cleaner.indexed.after",
)
ENV: Final = "EOSLOG_CRASH_AT"


def _parse(setting: str | None) -> tuple[str, int] | None:
    if not setting:
        return None
    name, _, count = setting.rpartition(":")
    known = (*POINTS, *TOPIC_CHANGE_POINTS, *ARCHIVE_POINTS, *CLEANER_POINTS)
    if name not in known or not count.isdigit() or int(count) < 1:
        raise ValueError(f"{ENV}={setting!r}: expected <point>:<n> with a point of {known}")
    return name, int(count)


_TARGET: Final = _parse(os.environ.get(ENV))
_hits: dict[str, int] = {}
_lock = threading.Lock()
# Whether a point is armed in this process.
ARMED: Final = _TARGET is not None


def hit(point: str) -> None:
    """Count a pass through `point`; SIGKILL the process on the configured n-th one."""
    if _TARGET is None or _TARGET[0] != point:
        return
    with _lock:
        _hits[point] = _hits.get(point, 0) + 1
        if _hits[point] == _TARGET[1]:
            os.kill(os.getpid(), signal.SIGKILL)


# What a hot path hands to native code instead of calling hit() itself, so as not to pay a
# call per point: hit while a point is armed, which the native code calls at the same points;
# else None, and it calls nothing.
HOOK: Final = hit if ARMED else None
