"""A segment's .log in the owner process: its open handle, and the read-only shared mappings
of it that reads return views into, so a read copies nothing (Kafka serves a fetch with
sendfile for the same reason; docs/bench.md, the random-offset read target).

Memory safety (docs/design.md "Ownership, threads, processes"). Touching a mapped page that lies
wholly past the end of its file kills the process with SIGBUS, and a view a read returned
lives as long as its caller keeps it. So no file is ever cut below a mapping a view may use:
- The file is mapped lazily, by the first read, up to the end of the log that read saw (never
  past the end of the file: Python's mmap refuses that). A read that needs bytes past the
  mapped length maps the file again to its end (the active segment grows; growing under a
  mapping is harmless). The older mapping is closed if no view of it is alive, else kept and
  tried again at the next remap.
- A mapping is never closed while a view of it lives: mmap.close() refuses then
  (BufferError), and every close here is such an attempt.
- eoslog shrinks a .log in four places only: recovery at open (before any read, so nothing
  is mapped), repair_truncate (offline), LogSegment.cut_preallocation (roll and close), which
  cuts only the zeros past the log end, where no mapping reaches, and truncate_to, which
  calls shrink(). shrink
  first closes every mapping it can. If all closed, no view exists and none can be made
  meanwhile (mapping waits on the same lock), so the file is cut in place. If a view is alive,
  that file (inode) is never shrunk: the kept prefix goes to a temp file, which is synced,
  renamed over the .log, and the directory synced; the handle then names the new file, and
  the old inode, unlinked, lives on unchanged for the views. A crash midway leaves either file
  whole under the .log name (the rename is atomic) and at most a stray temp file, which open
  deletes (recovery._clean_directory).
- Retention and segment deletion only unlink: mappings stay valid on the unlinked inode, and
  closing the handle does not unmap. Mappings nobody can use any more (no view, no segment)
  are unmapped when they become garbage.
- Only the owner maps. Readers in other processes pread, and never see a mapping.

Thread safety. One writer (the partition's writer thread, under the partition lock) calls
shrink and close and uses the handle for writes. view() may run on any thread at any time:
it answers lock-free from the current mapping when that is long enough, and otherwise maps
under a lock that shrink holds while it closes mappings and cuts the file. The handle may be
replaced by shrink; a replaced handle stays open until close(), so a reader that fetched it
just before can still pread it.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import threading
from typing import Final

from eoslog import limits
from eoslog.fs import FileHandle, FileSystem, create_temporary

# The suffix of the file a shrink under live views builds before renaming it over the .log;
# open deletes leftovers with it (recovery._clean_directory).
TEMP_SUFFIX: Final = ".tmp"


def _closed_now(mapping: mmap.mmap) -> bool:
    """Close the mapping unless a view of it is alive; whether it is closed."""
    try:
        mapping.close()
    except BufferError:
        return False  # a view is alive: the mapping, and the file under it, must stay
    return True


class MappedLog:
    """A .log file's handle and its read-only mappings (see the module doc)."""

    __slots__ = ("_closed", "_current", "_fs", "_lock", "_older", "_path", "_replaced", "handle")

    def __init__(self, fs: FileSystem, path: str) -> None:
        self._fs = fs
        self._path = path
        self.handle: FileHandle = fs.open(path, create=True)
        # The newest mapping of the file the handle names, with its length: one attribute,
        # so a lock-free reader sees the mapping and its length together.
        self._current: tuple[mmap.mmap, int] | None = None
        # Earlier mappings of the same file that a view still used when last tried.
        self._older: list[mmap.mmap] = []
        # Handles of files a shrink replaced, closed with this one.
        self._replaced: list[FileHandle] = []
        self._lock = threading.Lock()
        self._closed = False

    def view(self, end: int) -> memoryview | None:
        """A read-only view of the file as mapped, at least `end` (> 0) bytes long, or
        None if the file is shorter than `end` now (a truncation cut it under a read, or
        damage). The view, and every slice of it, stays readable for as long as the caller
        keeps it, through later truncation, retention, roll and close. Any thread.

        Raises OSError (a closed handle: EBADF; a failed mmap) and ValueError for end <= 0."""
        current = self._current
        if current is not None and current[1] >= end:
            try:
                return memoryview(current[0])
            except ValueError:
                pass  # closed since it was read (a remap or a shrink): map under the lock
        return self._map(end)

    def view_unless_tail(self, end: int) -> memoryview | None:
        """view(end), or None when the caller should pread instead: when the file is mapped
        but less than limits.remap_tail_bytes_min short of `end` (the growing end of the active
        segment, where a copy costs less than a new mapping), and when the file is shorter
        than `end` (the pread path reports that). Any thread."""
        current = self._current
        if current is not None and current[1] < end < current[1] + limits.remap_tail_bytes_min:
            return None
        return self.view(end)

    def _map(self, end: int) -> memoryview | None:
        if end <= 0:
            raise ValueError(f"a view must cover at least one byte, not {end}")
        with self._lock:
            current = self._current
            if current is not None and current[1] >= end:
                return memoryview(current[0])  # mapped by another reader meanwhile
            if self._closed:
                raise OSError(errno.EBADF, os.strerror(errno.EBADF), self._path)  # as pread would
            try:
                # Exactly `end` bytes: mmap checks the file's length itself (a separate fstat
                # would cost one more system call on every remap of a growing segment).
                mapping = self.handle.map_read(end)
            except ValueError:
                return None  # the file is shorter than `end`
            if current is not None:
                self._older.append(current[0])
            self._older = [older for older in self._older if not _closed_now(older)]
            self._current = (mapping, end)
            return memoryview(mapping)

    def _drop_mappings(self) -> None:
        """Close every mapping no view uses and keep the others in _older (under the lock:
        the next view() maps again)."""
        mappings = [*self._older, *([self._current[0]] if self._current else [])]
        self._current = None
        self._older = [mapping for mapping in mappings if not _closed_now(mapping)]

    def unmap(self) -> None:
        """Unmap the file where no view uses it, so its mappings' descriptors close (a
        cold segment read long ago); the next read maps it again. Any thread."""
        with self._lock:
            self._drop_mappings()

    def shrink(self, size: int) -> None:
        """Cut the file to `size` bytes without cutting under a live view (module doc):
        in place if no view of any mapping is alive, else by replacing the file with a copy
        of its first `size` bytes. Writer only. On OSError the file is unchanged or already
        replaced (a temp file may be left, which open deletes)."""
        with self._lock:
            self._drop_mappings()
            if not self._older:
                # No view exists and none can appear before the cut: mapping waits on this lock.
                self.handle.truncate(size)
                return
        # A view is alive: this inode keeps its length for good. Readers may map it again
        # meanwhile, which is as safe, since nothing shrinks it.
        replacement = self._copy_prefix(size)
        with self._lock:
            try:
                self._fs.rename(self._path + TEMP_SUFFIX, self._path)
            except BaseException:
                replacement.close()
                raise
            self._replaced.append(self.handle)
            self.handle = replacement
            # Mappings made so far map the old inode; the next read maps the new file.
            self._current = None
            self._older = []
        self._fs.sync_dir(os.path.dirname(self._path))

    def _copy_prefix(self, size: int) -> FileHandle:
        """A synced temp file beside the .log holding the .log's first `size` bytes."""
        temp_path = self._path + TEMP_SUFFIX
        replacement = create_temporary(self._fs, temp_path)
        try:
            position = 0
            while position < size:
                chunk = self.handle.pread(
                    min(limits.shrink_copy_chunk_bytes, size - position), position
                )
                if not chunk:
                    raise OSError(errno.EIO, "the .log ended while copying its prefix", self._path)
                replacement.pwrite(chunk, position)
                position += len(chunk)
            replacement.sync()
        except BaseException:
            replacement.close()
            with contextlib.suppress(OSError):
                self._fs.unlink(temp_path)
            raise
        return replacement

    def close(self) -> None:
        """Close the handles and the mappings no view uses; views stay readable (their
        mappings are unmapped when they become garbage). Later view() calls raise OSError."""
        with self._lock:
            self._closed = True
            mappings = [*self._older, *([self._current[0]] if self._current else [])]
            self._current = None
            self._older = []
            for mapping in mappings:
                _closed_now(mapping)
            for handle in (*self._replaced, self.handle):
                handle.close()
            self._replaced = []
