"""OverlayFileSystem: a directory as it is on disk, with every change kept in memory.

It lets the command line open a log directory that a live process owns, or that it must not
change, with the whole engine (recovery, the coordinators' replay, producer state) and without
writing one byte (docs/api.md "Command line", live and offline directories): the files below
the root are only ever opened read-only, and every write, truncation, creation, rename, unlink
and lock happens in this process's memory and is gone when the overlay is.

The view is a fixed one, like eoslog.log.partition_view's: a directory is listed once, when
first asked (without the owner's temporary files, below), and a file's length is captured when
it is first opened. So what the owner
appends later is not seen, and what it deletes after the first open stays readable (the open
descriptor keeps the inode). A file the owner deleted between the listing and the first open
raises FileNotFoundError, as a real one would; the caller opens again.

Memory safety: nothing on disk is mapped (the owner may cut a file under a mapping, and a
touched page past a file's end kills the process with SIGBUS). A file is copied into memory
only when it is mapped or written below its end on disk, into an anonymous mapping whose
untouched pages cost nothing (an index preallocated to 10 MiB holds only its entries); a read
of an unchanged file is a pread of the disk file. Read-only mappings (map_read) are copies in
a memory file, as in eoslog.fs_twin.

Semantics follow eoslog.fs (the FileSystem protocol); where they differ: sync and sync_dir do
nothing (nothing is ever durable); lock always succeeds and excludes nobody; a file cannot
change size while a writable mapping of it is alive (BufferError), as in eoslog.fs_twin; and
a read-only mapping is a copy, which later writes to the bytes it covers do not reach (the
engine never rewrites mapped log bytes: logs are appended to, and cut only with no mapping).

Thread safety: one lock around every operation; writes through a mapped view bypass it.
"""

from __future__ import annotations

import errno
import mmap
import os
import threading
import weakref
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Final

from eoslog.fs import PosixFileSystem, _PosixFile

if TYPE_CHECKING:
    # Only for annotations: typing_extensions is not a run-time dependency.
    from typing_extensions import Buffer


# A file the engine writes whole and then renames over its target (checkpoints, eoslog.meta,
# producer snapshots, a shrunk segment: eoslog.log.checkpoints, mapped_log.TEMP_SUFFIX) has
# this suffix until renamed. On disk it is the owner's write in progress, which may vanish at
# any moment, and which an open after a crash deletes unread: the view never holds one.
_OWNER_TEMPORARY_SUFFIX: Final = ".tmp"
# Linux's flag (0x4000 on x86-64 and arm64); Python's mmap names it only from 3.12 on.
_MAP_NORESERVE: Final[int] = getattr(mmap, "MAP_NORESERVE", 0x4000)
# A copy into memory reads the disk file this much at a time.
_CHUNK_BYTES: Final = 1 << 20


def _error(code: int, path: str) -> OSError:
    return OSError(code, os.strerror(code), path)


class _Inode:
    """A file of the overlay: a prefix of a disk file (`base`, its first `base_length` bytes)
    while unchanged below that, else its whole content in `memory` (an anonymous mapping of
    `capacity` bytes, of which the first `size` are the file and the rest zeros)."""

    __slots__ = ("base", "base_length", "capacity", "memory", "size")

    def __init__(self, base: _PosixFile | None) -> None:
        self.base = base
        self.base_length = base.size() if base is not None else 0
        self.size = self.base_length
        self.memory: mmap.mmap | None = None
        self.capacity = 0

    def read(self, size: int, offset: int) -> bytes:
        end = min(self.size, offset + size)
        if end <= offset:
            return b""
        if self.memory is not None:
            return self.memory[offset:end]
        assert self.base is not None  # an inode without memory is a disk file's prefix
        data = self.base.pread(end - offset, offset)
        # The owner cut the disk file below what was captured: the rest reads as zeros, as a
        # hole would, and the engine's own checks (CRC, index order) see the damage.
        return data + bytes(end - offset - len(data))

    def chunks(self, end: int) -> Iterator[tuple[int, bytes]]:
        """The content of [0, end) as (position, bytes) pieces of at most _CHUNK_BYTES, the
        holes of a sparse disk file left out (they read as zeros)."""
        if self.memory is not None or self.base is None:
            extents: Iterable[tuple[int, int]] = [(0, min(end, self.size))]
        else:
            extents = self.base.data_extents(min(end, self.base_length))
        for start, stop in extents:
            for position in range(start, stop, _CHUNK_BYTES):
                yield position, self.read(min(_CHUNK_BYTES, stop - position), position)

    def materialize(self, size: int) -> mmap.mmap:
        """The content in memory, with room for at least `size` bytes; BufferError when a
        larger mapping is needed while a view of the current one is alive."""
        if self.memory is not None and size <= self.capacity:
            return self.memory
        capacity = max(size, 2 * self.capacity, mmap.PAGESIZE)
        memory = _anonymous(capacity)
        for position, chunk in self.chunks(self.size):  # only the file's bytes: the rest is zeros
            memory[position : position + len(chunk)] = chunk
        if self.memory is not None:
            try:
                self.memory.close()
            except BufferError:
                memory.close()
                raise BufferError("cannot resize a file while a mapping of it is alive") from None
        self.memory, self.capacity = memory, capacity
        return memory

    def truncate(self, size: int) -> None:
        if self.memory is None and size <= self.size:
            self.size = size
            self.base_length = min(self.base_length, size)
            return
        if size >= self.size:
            self.materialize(size)  # the new bytes are zeros already: untouched pages
            self.size = size
            return
        self.size = size
        if not self._shrink_capacity():
            self._zero_past_end()

    def _shrink_capacity(self) -> bool:
        """Move the content into a mapping just large enough, unless a view of the current
        one is alive; whether it moved."""
        assert self.memory is not None
        capacity = max(self.size, mmap.PAGESIZE)
        if capacity * 2 > self.capacity:
            return False
        memory = _anonymous(capacity)
        memory[: self.size] = self.memory[: self.size]
        try:
            self.memory.close()
        except BufferError:
            memory.close()
            return False
        self.memory, self.capacity = memory, capacity
        return True

    def _zero_past_end(self) -> None:
        """Bytes past the end read as zeros if the file grows again: the rest of the last
        page written, the whole pages after it given back (a private anonymous page
        reads as zeros after MADV_DONTNEED)."""
        assert self.memory is not None
        page_end = min(self.capacity, -(-self.size // mmap.PAGESIZE) * mmap.PAGESIZE)
        self.memory[self.size : page_end] = bytes(page_end - self.size)
        if page_end < self.capacity:
            self.memory.madvise(mmap.MADV_DONTNEED, page_end, self.capacity - page_end)

    def write(self, data: memoryview, offset: int) -> None:
        end = offset + len(data)
        memory = self.materialize(max(end, self.size))
        memory[offset:end] = data  # a gap before offset reads as zeros already
        self.size = max(self.size, end)


def _anonymous(size: int) -> mmap.mmap:
    """Private anonymous memory of `size` bytes, all zeros, costing only the pages touched."""
    # MAP_NORESERVE: a file claiming more than the machine's memory (a hostile or sparse
    # index) is mapped as the engine maps it on disk, lazily; only its real bytes are copied.
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE
    return mmap.mmap(-1, size, flags=flags)


class _OverlayFile:
    """An open file of the overlay; like a descriptor it names the inode, not the path."""

    __slots__ = ("_closed", "_fs", "_inode", "_path", "_read_only")

    def __init__(self, fs: OverlayFileSystem, inode: _Inode, path: str, read_only: bool) -> None:
        self._fs = fs
        self._inode = inode
        self._path = path
        self._read_only = read_only
        self._closed = False

    @property
    def path(self) -> str:
        return self._path

    def size(self) -> int:
        with self._fs._lock:
            self._check_open()
            return self._inode.size

    def pread(self, size: int, offset: int) -> bytes:
        if size <= 0:
            return b""
        with self._fs._lock:
            self._check_open()
            if offset < 0:
                raise _error(errno.EINVAL, self._path)
            return self._inode.read(size, offset)

    def pwrite(self, data: Buffer, offset: int) -> None:
        view = memoryview(data).cast("B")
        if not view:
            return
        with self._fs._lock:
            self._check_writable(errno.EBADF)
            if offset < 0:
                raise _error(errno.EINVAL, self._path)
            self._inode.write(view, offset)

    def truncate(self, size: int) -> None:
        with self._fs._lock:
            self._check_writable(errno.EINVAL)
            if size < 0:
                raise _error(errno.EINVAL, self._path)
            self._inode.truncate(size)

    def sync(self) -> None:
        with self._fs._lock:
            self._check_open()

    def map(self, size: int) -> memoryview:
        with self._fs._lock:
            self._check_writable(errno.EACCES)
            size = self._map_size(size)
            return memoryview(self._inode.materialize(size))[:size]

    def map_read(self, size: int) -> mmap.mmap:
        with self._fs._lock:
            self._check_open()
            size = self._map_size(size)
            memory_fd = os.memfd_create("eoslog-overlay-map", os.MFD_CLOEXEC)
            try:
                os.ftruncate(memory_fd, size)
                for position, chunk in self._inode.chunks(size):
                    os.pwrite(memory_fd, chunk, position)
                mapping = mmap.mmap(memory_fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
            finally:
                os.close(memory_fd)  # the mapping keeps the memory file alive
            return mapping

    def close(self) -> None:
        with self._fs._lock:
            self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise _error(errno.EBADF, self._path)

    def _check_writable(self, code: int) -> None:
        self._check_open()
        if self._read_only:
            raise _error(code, self._path)

    def _map_size(self, size: int) -> int:
        # As Python's mmap.mmap checks it.
        if size < 0:
            raise OverflowError("memory mapped length must be positive")
        if size == 0:
            if self._inode.size == 0:
                raise ValueError("cannot mmap an empty file")
            size = self._inode.size
        if size > self._inode.size:
            raise ValueError("mmap length is greater than file size")
        return size


class _NoLock:
    def release(self) -> None:
        pass


class OverlayFileSystem:
    """The directory `root` read through a PosixFileSystem rooted there (no symlink followed),
    every change kept in memory (module docstring). close() closes the disk files it opened."""

    def __init__(self, root: str) -> None:
        self._disk = PosixFileSystem(root)
        self._lock = threading.RLock()
        # Each path's state in the overlay: an inode (a file opened or made here), None (a
        # file or directory removed here), or "dir" (a directory made here).
        self._entries: dict[str, _Inode | str | None] = {}
        self._listings: dict[str, set[str]] = {}  # a directory's names, as first listed
        self._disk_directories: dict[str, set[str]] = {}  # which of them were directories
        self._opened: list[_PosixFile] = []
        weakref.finalize(self, _close_all, self._opened, self._disk)

    def close(self) -> None:
        with self._lock:
            _close_all(self._opened, self._disk)

    # -- lookups ---------------------------------------------------------------------------

    def _listing(self, directory: str) -> set[str]:
        """The directory's names now: as first listed on disk, then changed here."""
        directory = os.path.normpath(directory)
        names = self._listings.get(directory)
        if names is None:
            state = self._entries.get(directory, "disk")
            if state is None:
                raise _error(errno.ENOENT, directory)
            if state == "dir":
                names = set()
            else:
                names = {
                    name
                    for name in self._disk.listdir(directory)
                    if not name.endswith(_OWNER_TEMPORARY_SUFFIX)
                }
                self._disk_directories[directory] = set(self._disk.list_directories(directory))
            self._listings[directory] = names
        return names

    def _state(self, path: str) -> _Inode | str | None:
        """An inode, "dir", "file" (on disk, not opened yet), or None (nothing there)."""
        path = os.path.normpath(path)
        if path in self._entries:
            return self._entries[path]
        parent, name = os.path.split(path)
        if parent == path:  # "/"
            return "dir"
        if name not in self._listing(parent):
            return None
        return "dir" if name in self._disk_directories.get(parent, ()) else "file"

    def _inode(self, path: str, create: bool, exclusive: bool) -> _Inode:
        path = os.path.normpath(path)
        state = self._state(path)
        if state == "dir":
            raise _error(errno.EISDIR, path)
        if state is not None and create and exclusive:
            raise _error(errno.EEXIST, path)
        if isinstance(state, _Inode):
            return state
        if state == "file":
            base = self._disk.open(path, read_only=True)
            self._opened.append(base)
            inode = _Inode(base)
        elif create:
            inode = _Inode(None)
        else:
            raise _error(errno.ENOENT, path)
        self._place(path, inode)
        return inode

    def _place(self, path: str, state: _Inode | str | None) -> None:
        parent, name = os.path.split(path)
        names = self._listing(parent)
        if state is None:
            names.discard(name)
        else:
            names.add(name)
        self._entries[path] = state

    # -- the FileSystem protocol -------------------------------------------------------------

    def open(
        self, path: str, *, create: bool = False, read_only: bool = False, exclusive: bool = False
    ) -> _OverlayFile:
        with self._lock:
            return _OverlayFile(self, self._inode(path, create, exclusive), path, read_only)

    def exists(self, path: str) -> bool:
        with self._lock:
            return self._state(path) is not None

    def file_size(self, path: str) -> int:
        with self._lock:
            state = self._state(path)
            if isinstance(state, _Inode):
                return state.size
            if state is None:
                raise _error(errno.ENOENT, path)
            return self._disk.file_size(path) if state == "file" else 0

    def listdir(self, path: str) -> list[str]:
        with self._lock:
            self._check_directory(path)
            return sorted(self._listing(path))

    def list_directories(self, path: str) -> list[str]:
        with self._lock:
            self._check_directory(path)
            names = sorted(self._listing(path))
            return [name for name in names if self._state(os.path.join(path, name)) == "dir"]

    def _check_directory(self, path: str) -> None:
        state = self._state(path)
        if state is None:
            raise _error(errno.ENOENT, path)
        if state != "dir":
            raise _error(errno.ENOTDIR, path)

    def mkdir(self, path: str) -> None:
        with self._lock:
            if self._state(path) is not None:
                raise _error(errno.EEXIST, path)
            self._place(os.path.normpath(path), "dir")
            self._listings[os.path.normpath(path)] = set()

    def rmdir(self, path: str) -> None:
        with self._lock:
            self._check_directory(path)
            if self._listing(path):
                raise _error(errno.ENOTEMPTY, path)
            self._place(os.path.normpath(path), None)

    def unlink(self, path: str) -> None:
        with self._lock:
            state = self._state(path)
            if state is None:
                raise _error(errno.ENOENT, path)
            if state == "dir":
                raise _error(errno.EISDIR, path)
            self._place(os.path.normpath(path), None)

    def rename(self, source: str, target: str) -> None:
        with self._lock:
            state = self._state(source)
            if state is None:
                raise _error(errno.ENOENT, source)
            if state == "dir":
                raise _error(errno.EXDEV, source)  # the engine renames files only
            inode = self._inode(source, False, False)
            self._place(os.path.normpath(source), None)
            self._place(os.path.normpath(target), inode)

    def sync_dir(self, path: str) -> None:
        with self._lock:
            self._check_directory(path)

    def lock(self, path: str) -> _NoLock:
        with self._lock:
            self._inode(path, True, False)
            return _NoLock()


def _close_all(opened: list[_PosixFile], disk: PosixFileSystem) -> None:
    for handle in opened:
        handle.close()
    opened.clear()
    disk.close()
