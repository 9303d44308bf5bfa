"""ArchivedLogFileSystem: a log directory whose history is split between an archive (what
`eoslog archive` copied: eoslog.archive) and the live directory, seen read-only as one log
directory, for offline scans (`eoslog.scan(dir, archive=url)`, the Spark option `archive`;
docs/design.md "Tiered storage").

Paths are the live directory's (`root`); the same relative path names the archive's copy. What
a reader sees:
- A partition directory lists the live files and, for each segment whose `.log` the archive
  holds, that segment's archived files, and the archived producer snapshots. The archive's
  side is listed again at every listing (after the live side), so a segment archived and
  deleted locally since an earlier listing is not missed. A segment the archive holds without
  its `.log` (an archiver stopped mid-copy) is not there.
- A file is read from the live directory while it holds the file's segment, else from the
  archive: the two copies of a closed segment are the same bytes, so a segment that local
  retention deletes between the listing and the open is read from the archive instead, and
  never missed. The log
  is then one run of segments by base offset: no duplicate and no gap at the seam, and the
  aborted transactions are collected from the .txnindex files of both sides (a transaction's
  ABORT marker may lie past the seam from its data).
- The root's files are the live directory's (the recovery point, the clean-shutdown marker),
  but for two derived here:
  - The log start (both log-start checkpoints): local retention moves the live directory's log
    start to its first segment's base, which the archive may hold records below; so a live log
    start at or below the first live segment's base is not taken (the log starts at the
    earliest segment either side holds, or where the archive's checkpoint says delete_records
    had moved it when it was archived), and one above it (delete_records inside the live
    segments) is. delete_records at exactly a segment's base after that segment was archived
    is then not seen: the archived records below it stay readable here.
  - The aborted-transaction counts (eoslog-aborted-txn-checkpoint): the owner's count for the
    live segments and the archive's for the segments only the archive holds, so that the
    archived .txnindex files are believed; where the archive's count does not reach the live
    segments, the partition has none (the reader derives the aborted transactions from the
    batch headers).
Every write raises OSError(EROFS).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from eoslog.fs import FileHandle, FileSystem
from eoslog.fs_readonly import RefusesChanges, RefusesWrites
from eoslog.log import checkpoints
from eoslog.log.segment_reads import LOG_SUFFIX, SNAPSHOT_SUFFIX, file_name, parse_file_name

if TYPE_CHECKING:
    pass

# A segment file below a partition directory, as an error message names it.
_FILE_BELOW = r"/[^/\s'\"]+/[0-9]{20}\.[a-z]+"
_DERIVED = (
    checkpoints.LOG_START_OFFSET_FILE,
    checkpoints.CONFIRMED_LOG_START_FILE,
    checkpoints.ABORTED_TXNS_FILE,
)


class ArchivedLogFileSystem(RefusesChanges):
    """The live directory `root` (in `live`) over the archive `archive_root` (in `archive`),
    read-only (module doc)."""

    refusal = "a scan of an archived log only reads"

    def __init__(self, live: FileSystem, root: str, archive: FileSystem, archive_root: str) -> None:
        self.live = live
        self.root = root.rstrip("/") or "/"
        self.archive = archive
        self.archive_root = archive_root.rstrip("/")
        self._derived: dict[str, bytes] | None = None

    # --- where a path lies ----------------------------------------------------------------

    def _depth(self, path: str) -> int:
        """0 for the root, 1 for a name in it, 2 for a file in a partition directory; -1
        outside."""
        if path.rstrip("/") == self.root:
            return 0
        if not path.startswith(self.root + "/"):
            return -1
        return path[len(self.root) + 1 :].rstrip("/").count("/") + 1

    def _archived(self, path: str) -> str:
        return self.archive_root + path.rstrip("/")[len(self.root) :]

    def _archived_state(self, path: str) -> tuple[bool, bool]:
        """(whether the archive shows the segment of the partition file `path`, whether it
        shows the file): a segment's files only with its `.log` (module doc); a snapshot is
        its own."""
        parsed = parse_file_name(os.path.basename(path))
        if parsed is None:
            return False, False
        base, suffix = parsed
        shown = (
            path
            if suffix == SNAPSHOT_SUFFIX
            else os.path.join(os.path.dirname(path), file_name(base, LOG_SUFFIX))
        )
        try:
            segment = self.archive.exists(self._archived(shown))
            return segment, segment and self.archive.exists(self._archived(path))
        except FileNotFoundError:
            return False, False

    def _live_segment_holds(self, path: str) -> bool:
        """Whether the live directory still holds the segment of the segment file `path`
        (its `.log`): then that file set is the live one, and a file missing from it (a
        segment with no .txnindex) is missing."""
        parsed = parse_file_name(os.path.basename(path))
        if parsed is None or parsed[1] == SNAPSHOT_SUFFIX:
            return False
        return self.live.exists(
            os.path.join(os.path.dirname(path), file_name(parsed[0], LOG_SUFFIX))
        )

    def _archive_holds(self, path: str) -> bool:
        return self._archived_state(path)[1]

    def _either(self, path: str, call: Callable[[FileSystem, str], object]) -> object:
        """call on the live file, else (a partition file the archive holds) on the archived
        one; the live FileNotFoundError when neither has it. The archive is asked only when
        the live directory no longer holds the segment, and listed again only when its listing
        lacks the segment (archived since it was listed?), never for a file the segment has
        not (a segment with no .txnindex)."""
        try:
            return call(self.live, path)
        except FileNotFoundError:
            if self._depth(path) != 2 or self._live_segment_holds(path):
                raise
            segment, held = self._archived_state(path)
            if not held:
                if segment:
                    raise
                self._forget_archived_listing(os.path.dirname(path))
                if not self._archive_holds(path):
                    raise
            return call(self.archive, self._archived(path))

    def _forget_archived_listing(self, directory: str) -> None:
        """Drop what the archive's file system keeps of the directory's listing (eoslog.
        fs_arrow keeps listings; a local one keeps none)."""
        forget = getattr(self.archive, "forget_listing", None)
        if forget is not None:
            forget(self._archived(directory))

    # --- listing ---------------------------------------------------------------------------

    def _live_names(self, path: str, lister: Callable[[str], list[str]]) -> list[str]:
        try:
            return lister(path)
        except FileNotFoundError:
            if self._depth(path) != 1:
                raise
            return []  # a partition the archive alone holds

    def _archive_names(self, path: str, lister: Callable[[str], list[str]]) -> list[str]:
        try:
            return lister(self._archived(path))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def listdir(self, path: str) -> list[str]:
        depth = self._depth(path)
        live = self.live.listdir(path) if depth == 0 else self._live_names(path, self.live.listdir)
        if depth == 0:
            return sorted(set(live) | set(self.list_directories(path)))
        if depth != 1:
            return live
        # Listed again at every open of a view, after the live directory: a segment retention
        # deleted there since the last listing was archived before, and shows here.
        self._forget_archived_listing(path)
        archived = self._archive_names(path, self.archive.listdir)
        segments = {
            parsed[0]
            for parsed in map(parse_file_name, archived)
            if parsed is not None and parsed[1] == LOG_SUFFIX
        }
        shown = {
            name
            for name in archived
            if (parsed := parse_file_name(name)) is not None
            and (parsed[0] in segments or parsed[1] == SNAPSHOT_SUFFIX)
        }
        return sorted(set(live) | shown)

    def list_directories(self, path: str) -> list[str]:
        depth = self._depth(path)
        if depth == 0:
            live = self.live.list_directories(path)
            return sorted(set(live) | set(self._archive_names(path, self.archive.list_directories)))
        if depth == 1:
            return self._live_names(path, self.live.list_directories)
        return self.live.list_directories(path)

    def exists(self, path: str) -> bool:
        if self._depth(path) == 1 and os.path.basename(path) in _DERIVED:
            return True
        return self.live.exists(path) or (self._depth(path) == 2 and self._archive_holds(path))

    def file_size(self, path: str) -> int:
        if self._depth(path) == 1 and os.path.basename(path) in _DERIVED:
            return len(self._derived_files()[os.path.basename(path)])
        size = self._either(path, lambda fs, at: fs.file_size(at))
        assert isinstance(size, int)
        return size

    def open(
        self, path: str, *, create: bool = False, read_only: bool = False, exclusive: bool = False
    ) -> FileHandle:
        if create or not read_only:
            self._refuse(path)
        name = os.path.basename(path)
        if self._depth(path) == 1 and name in _DERIVED:
            return MemoryFile(path, self._derived_files()[name])
        handle = self._either(path, lambda fs, at: fs.open(at, read_only=True))
        return handle  # type: ignore[return-value]

    def naming_archived(self, text: str) -> str:
        """`text` (an error's message) with a note after it for each partition file it names
        by its path in the live directory that only the archive holds: the file read, and
        damaged or missing, is the archive's copy, which a repair of the live directory does
        not reach."""
        notes = []
        for path in sorted(set(re.findall(re.escape(self.root) + _FILE_BELOW, text))):
            if self._depth(path) == 2 and not self.live.exists(path):
                notes.append(f"{path} was read from the archive: {self._archived(path)}")
        if not notes:
            return text
        return (
            f"{text} [{'; '.join(notes)}; restore the archived object (archive again from a "
            "directory that still holds the segment) or remove it]"
        )

    # --- the derived root files -------------------------------------------------------------

    def _derived_files(self) -> dict[str, bytes]:
        if self._derived is None:
            starts, confirmed = self._log_starts()
            self._derived = {
                checkpoints.LOG_START_OFFSET_FILE: checkpoints.encode_offsets(starts),
                checkpoints.CONFIRMED_LOG_START_FILE: checkpoints.encode_confirmed_log_starts(
                    confirmed
                ),
                checkpoints.ABORTED_TXNS_FILE: checkpoints.encode_aborted_counts(
                    self._aborted_counts()
                ),
            }
        return self._derived

    def _first_live_base(self, key: checkpoints.PartitionKey) -> int | None:
        directory = os.path.join(self.root, f"{key[0]}-{key[1]}")
        try:
            names = self.live.listdir(directory)
        except (FileNotFoundError, NotADirectoryError):
            return None
        bases = [
            parsed[0]
            for parsed in map(parse_file_name, names)
            if parsed is not None and parsed[1] == LOG_SUFFIX
        ]
        return min(bases, default=None)

    def _archived_bases(self, key: checkpoints.PartitionKey) -> list[int]:
        directory = os.path.join(self.archive_root, f"{key[0]}-{key[1]}")
        try:
            names = self.archive.listdir(directory)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(
            parsed[0]
            for parsed in map(parse_file_name, names)
            if parsed is not None and parsed[1] == LOG_SUFFIX
        )

    def _log_starts(
        self,
    ) -> tuple[dict[checkpoints.PartitionKey, int], dict[checkpoints.PartitionKey, int]]:
        """(Kafka's log-start entries, eoslog's confirmed ones) of the split log (module doc)."""
        archived, _ = checkpoints.read_believed_log_starts(self.archive, self.archive_root)
        live, _ = checkpoints.read_believed_log_starts(self.live, self.root)
        starts = {key: start.offset for key, start in archived.items()}
        confirmed = {key: start.offset for key, start in archived.items() if start.confirmed}
        for key, start in live.items():
            first = self._first_live_base(key)
            if first is not None and start.offset <= first:
                continue  # retention's (or nothing deleted): the archive may hold records below
            if start.offset >= starts.get(key, -1):
                starts[key] = start.offset
                if start.confirmed:
                    confirmed[key] = start.offset
                else:
                    confirmed.pop(key, None)
        return starts, confirmed

    def _aborted_counts(self) -> dict[checkpoints.PartitionKey, checkpoints.AbortedCounts]:
        """The owner's counts for the live segments with the archive's for those only the
        archive holds (module doc)."""
        archived, _ = checkpoints.read_believed_aborted_counts(self.archive, self.archive_root)
        live, _ = checkpoints.read_believed_aborted_counts(self.live, self.root)
        held = set(self._archive_names(self.root, self.archive.list_directories))
        merged = {}
        for key, counts in live.items():
            if f"{key[0]}-{key[1]}" not in held:
                merged[key] = counts  # nothing archived: not a partition directory listed
                continue
            first = self._first_live_base(key)
            below = [base for base in self._archived_bases(key) if first is None or base < first]
            if not below:
                merged[key] = counts
                continue
            older = archived.get(key)
            reach = counts.covered_to if first is None else min(first, counts.covered_to)
            if older is None or older.covered_to < reach:
                continue  # archived segments nobody counted: derived from the batch headers
            by_segment = {base: n for base, n in older.by_segment.items() if base < reach} | {
                base: n for base, n in counts.by_segment.items() if base >= reach
            }
            merged[key] = checkpoints.AbortedCounts(counts.covered_to, by_segment)
        return merged

    def close(self) -> None:
        """Close what the two file systems keep open (eoslog.fs_arrow)."""
        for each in (self.live, self.archive):
            close = getattr(each, "close", None)
            if close is not None:
                with contextlib.suppress(OSError):
                    close()


class MemoryFile(RefusesWrites):
    """A read-only file held in memory (a derived root file)."""

    __slots__ = ("_data", "_path")
    refusal = "a scan of an archived log only reads"

    def __init__(self, path: str, data: bytes) -> None:
        self._path = path
        self._data = data

    @property
    def path(self) -> str:
        return self._path

    def size(self) -> int:
        return len(self._data)

    def pread(self, size: int, offset: int) -> bytes:
        return self._data[offset : offset + size]

    def close(self) -> None:
        pass
