"""What `eoslog verify` needs to know about a partition from its log directory before it walks
the partition's segments: the checkpoints' entries for it (recovery point, log start,
aborted-transaction counts), read as an open reads them (eoslog.log.checkpoints' read_believed
functions: an unreadable file has no entries), and whether the clean-shutdown marker is there.

They are read before any segment is opened, as an offline reader reads them
(eoslog.log.partition_view): the owner writes a recovery point only once everything below it
is synced, so a log walked afterwards must reach it, even while the owner appends.

Thread safety: the functions keep no state.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Final

from eoslog.fs import FileSystem
from eoslog.log import checkpoints
from eoslog.log.checkpoints import AbortedCounts, LogStart, PartitionKey
from eoslog.log.meta_file import META_FILE

# A partition directory: `<topic>-<partition>` (docs/format.md §5.1).
PARTITION_DIRECTORY: Final = re.compile(r"(.+)-([0-9]+)")
# recovery's durable_to after a clean shutdown: every offset was durable.
ALL_DURABLE: Final = 1 << 63


def partition_key(directory: str) -> PartitionKey | None:
    """(topic, partition) of a partition directory's path, None for another name."""
    found = PARTITION_DIRECTORY.fullmatch(os.path.basename(os.path.normpath(directory)))
    return None if found is None else (found.group(1), int(found.group(2)))


@dataclass(frozen=True)
class PartitionFacts:
    """One partition's entries in its log directory's checkpoints (None: no readable entry),
    and the clean-shutdown marker's path if it was there when they were read."""

    recovery_point: int | None = None
    log_start: LogStart | None = None
    aborted_counts: AbortedCounts | None = None
    clean_marker: str | None = None

    def durable_to(self, fs: FileSystem) -> int | None:
        """Up to which offset an open knows the log durable (eoslog.log.recovery's
        durable_to): all of it after a clean shutdown, else the recovery point (None: not
        known). The marker is looked for again: an owner takes it when it opens, before it
        appends, so a marker still there means no owner appended while verify read."""
        if self.clean_marker is not None and fs.exists(self.clean_marker):
            return ALL_DURABLE
        return self.recovery_point


@dataclass(frozen=True)
class DirectoryFacts:
    """The checkpoints of a log directory, as an open believes them."""

    root: str
    recovery_points: dict[PartitionKey, int] = field(default_factory=dict)
    log_starts: dict[PartitionKey, LogStart] = field(default_factory=dict)
    aborted_counts: dict[PartitionKey, AbortedCounts] = field(default_factory=dict)
    clean_marker: str | None = None

    def partition(self, directory: str) -> PartitionFacts:
        key = partition_key(directory)
        if key is None:
            return PartitionFacts()
        return PartitionFacts(
            self.recovery_points.get(key),
            self.log_starts.get(key),
            self.aborted_counts.get(key),
            self.clean_marker,
        )


def directory_facts(fs: FileSystem, root: str) -> DirectoryFacts:
    """The checkpoints of the log directory `root` (none from files that are missing or
    unreadable: eoslog.verify.directory reports those), then the clean-shutdown marker."""
    recovery_points, _ = checkpoints.read_believed_offsets(
        fs, os.path.join(root, checkpoints.RECOVERY_POINT_FILE)
    )
    log_starts, _ = checkpoints.read_believed_log_starts(fs, root)
    aborted_counts, _ = checkpoints.read_believed_aborted_counts(fs, root)
    marker = os.path.join(root, checkpoints.CLEAN_SHUTDOWN_FILE)
    return DirectoryFacts(
        root, recovery_points, log_starts, aborted_counts, marker if fs.exists(marker) else None
    )


def partition_facts(fs: FileSystem, directory: str) -> PartitionFacts:
    """The facts of a partition directory verified on its own (or holding a file verified
    on its own): from its parent when that is a log directory (it holds eoslog.meta), none
    otherwise."""
    root = os.path.dirname(os.path.abspath(directory))
    if partition_key(directory) is None or not fs.exists(os.path.join(root, META_FILE)):
        return PartitionFacts()
    return directory_facts(fs, root).partition(directory)
