"""RecordingFileSystem: the seeded, in-memory twin of PosixFileSystem (docs/style.md rule 11).

It behaves like `eoslog.fs.PosixFileSystem` (same results, same OSError subclasses and errnos)
and adds what a crash test needs (docs/reliability.md families 3 and 5):

- Durability. Every file keeps its durable image (its bytes as of its last sync()) beside its
  current content, and every directory keeps its durable entries (as of its last sync_dir)
  beside its current ones. `crash_image(rng)` builds one disk state a power loss could leave.
- Faults. Counted calls are numbered from 0; `fail_at(k, kind)` fails call k and
  `fail_after(k, kind)` fails call k and every later one (a dead disk).

Counted calls (a call counts when it is made, whether it then succeeds or fails):
    FileSystem: open, listdir, list_directories, mkdir, rmdir, unlink, rename, sync_dir, lock
    FileHandle: pread, pwrite, truncate, sync, map, map_read
Not counted, and never failed: exists, file_size, FileHandle.path, FileHandle.size,
FileHandle.close, FileLock.release, and the twin's own test helpers (makedirs, crash_image,
unsynced_paths, snapshot_bytes, durable_bytes, recorded_calls). Queries and releases are left
out so that cleanup paths and assertions never trip a fault meant for the engine's I/O.

Where the twin knowingly differs from Linux:
- Relative paths resolve from "/", and paths are normalized with os.path.normpath, so a
  trailing slash or "a/.." does not carry its POSIX meaning. There are no symlinks or modes,
  and no root: PosixFileSystem's refusals (symlinks, paths leaving its root) never arise.
- file_size of a directory is 0 (Linux reports a filesystem-specific size). (A directory
  cannot be opened as a file, even read-only: IsADirectoryError, as PosixFileSystem says.)
- `FileHandle.map` returns a memoryview over the file's bytearray. Python forbids resizing a
  bytearray while a view of it is alive, so any pwrite past the end or truncate that changes the
  size raises BufferError while a mapping is alive. Linux lets a mapped file grow; callers that
  grow a mapped file must release the view and map again (which is also how a real mapping sees
  the new length). Shrinking below a live mapping is forbidden on both (SIGBUS on Linux).
- `FileHandle.map_read` returns a real read-only mmap.mmap, of a private memory file
  (memfd) that holds a copy of the mapped bytes, so it behaves as a read-only mapping on
  Linux does: its views are read-only, close() raises BufferError while a view is alive, the
  file may grow while it is mapped, and later writes to the bytes it covers show through (the
  twin copies them into the memory file). While such a mapping is alive (not closed and not
  garbage), truncating its file below the mapped length raises BufferError before anything
  changes, where Linux would let it happen and kill a later reader with SIGBUS.
- Locks exclude other holders within this twin only; there is no second process to exclude.
- map on a closed handle raises EBADF (Python's mmap would map anonymous memory for fd -1).

Thread safety: every method of the twin, its handles and its locks takes one internal RLock.
Writes through a mapped view bypass it, as writes to a real mapping bypass the kernel.
"""

from __future__ import annotations

import errno
import mmap
import os
import random
import threading
import weakref
from collections import deque
from typing import TYPE_CHECKING, Final, TypeAlias

from eoslog.fs import FileHandle, FileLock, FileSystem

if TYPE_CHECKING:
    # Only for annotations: typing_extensions is not a run-time dependency.
    from typing_extensions import Buffer

FAULT_ERRNOS: Final[dict[str, int]] = {
    "EIO": errno.EIO,
    "ENOSPC": errno.ENOSPC,
    "EFBIG": errno.EFBIG,
    # A short write is a pwrite that stops part way; any other call fails outright with EIO.
    "short": errno.EIO,
}
# A power cut tears writes at the disk's sector (512 B) or the page cache's page (4 KiB).
CRASH_CHUNK_BYTES: Final = (512, 4096)


class _File:
    """A regular file's inode: its current content, its image as of the last sync(), and
    its read-only mappings (map_read), as (mapping, memory file, mapped length)."""

    __slots__ = ("content", "durable", "read_maps")

    def __init__(self, content: bytes = b"") -> None:
        self.content = bytearray(content)
        self.durable = bytes(content)
        self.read_maps: list[tuple[weakref.ref[mmap.mmap], int, int]] = []

    def live_read_maps(self) -> list[tuple[mmap.mmap, int, int]]:
        """The read-only mappings not closed and not garbage (strong references, so none
        goes away, closing its memory file, while the caller uses it); forgets the rest."""
        live = []
        for ref, memory_fd, length in self.read_maps:
            mapping = ref()
            if mapping is not None and not mapping.closed:
                live.append((mapping, memory_fd, length))
        self.read_maps = [(weakref.ref(m), fd, length) for m, fd, length in live]
        return live


class _Directory:
    """A directory's inode: its current entries and its entries as of the last sync_dir."""

    __slots__ = ("durable_entries", "entries")

    def __init__(self) -> None:
        self.entries: dict[str, _Node] = {}
        self.durable_entries: dict[str, _Node] = {}


_Node: TypeAlias = "_File | _Directory"


def _error(code: int, path: str, other_path: str | None = None) -> OSError:
    # OSError picks the subclass from the errno (ENOENT -> FileNotFoundError and so on).
    if other_path is None:
        return OSError(code, os.strerror(code), path)
    return OSError(code, os.strerror(code), path, None, other_path)


def _components(path: str) -> list[str]:
    """The names along path from "/"; the root is []."""
    if "\0" in path:
        raise ValueError("embedded null byte")
    if not path:
        raise _error(errno.ENOENT, path)
    normal = os.path.normpath(os.path.join("/", path))
    return [name for name in normal.split("/") if name]


class _TwinFile:
    """An open file of the twin. Like a file descriptor it names the inode, not the path:
    it keeps reading and writing the file after an unlink or a rename."""

    __slots__ = ("_closed", "_fs", "_inode", "_path", "_read_only")

    def __init__(self, fs: RecordingFileSystem, inode: _File, path: str, read_only: bool) -> None:
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
            return len(self._inode.content)

    def pread(self, size: int, offset: int) -> bytes:
        with self._fs._lock:
            self._fs._count("pread", self._path)
            # PosixFileSystem asks the OS nothing for size <= 0, so nothing is checked either.
            if size <= 0:
                return b""
            self._check_open()
            if offset < 0:
                raise _error(errno.EINVAL, self._path)
            return bytes(self._inode.content[offset : offset + size])

    def pwrite(self, data: Buffer, offset: int) -> None:
        view = memoryview(data).cast("B")
        with self._fs._lock:
            fault = self._fs._count("pwrite", self._path)
            if fault == "short":
                # A strict, non-empty prefix lands before the disk fills up; data shorter than
                # two bytes has no such prefix, so nothing lands.
                landed = self._fs._rng.randrange(1, len(view)) if len(view) > 1 else 0
                self._write(bytes(view[:landed]), offset)
                raise _error(errno.ENOSPC, self._path)
            # PosixFileSystem's write loop makes no system call for empty data.
            if not view:
                return
            self._write(bytes(view), offset)

    def truncate(self, size: int) -> None:
        with self._fs._lock:
            self._fs._count("truncate", self._path)
            self._check_open()
            # ftruncate on a descriptor not open for writing is EINVAL on Linux.
            if self._read_only or size < 0:
                raise _error(errno.EINVAL, self._path)
            content = self._inode.content
            # Resizing raises BufferError while a map is alive (module docstring).
            mapped = max((length for _, _, length in self._inode.live_read_maps()), default=0)
            if size < mapped:
                raise BufferError(
                    f"cannot shrink {self._path} to {size} bytes under a live read-only "
                    f"mapping of {mapped} bytes (SIGBUS on Linux)"
                )
            if size < len(content):
                del content[size:]
            elif size > len(content):
                content.extend(bytes(size - len(content)))

    def sync(self) -> None:
        with self._fs._lock:
            # A failed sync raises here, before the durable image is touched.
            self._fs._count("sync", self._path)
            if self._closed:
                # os.fdatasync refuses the closed descriptor (-1) before asking the OS.
                raise ValueError("file descriptor cannot be a negative integer (-1)")
            self._inode.durable = bytes(self._inode.content)

    def map(self, size: int) -> memoryview:
        """A writable view of bytes [0, size) (size 0: the whole file), valid until released
        or garbage; the file cannot change size while it lives (module docstring)."""
        with self._fs._lock:
            self._fs._count("map", self._path)
            self._check_open()
            size = self._map_size(size)
            if self._read_only:
                raise _error(errno.EACCES, self._path)
            return memoryview(self._inode.content)[:size]

    def map_read(self, size: int) -> mmap.mmap:
        """A read-only mapping of bytes [0, size) (size 0: the whole file): a real mmap of a
        memory file holding a copy of them, kept current by later writes; the file may grow
        but not shrink below it while it lives (module docstring)."""
        with self._fs._lock:
            self._fs._count("map_read", self._path)
            self._check_open()
            size = self._map_size(size)
            memory_fd = os.memfd_create("eoslog-twin-map", os.MFD_CLOEXEC)
            try:
                os.ftruncate(memory_fd, size)
                view = memoryview(self._inode.content)[:size]
                try:
                    _pwrite_all(memory_fd, view, 0)
                finally:
                    view.release()  # the content must stay resizable
                mapping = mmap.mmap(memory_fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
            except BaseException:
                os.close(memory_fd)
                raise
            # The memory file is closed with the mapping: when it is garbage, or when the
            # twin forgets it after close() (it is then never written again).
            weakref.finalize(mapping, os.close, memory_fd)
            self._inode.read_maps.append((weakref.ref(mapping), memory_fd, size))
            return mapping

    def close(self) -> None:
        with self._fs._lock:
            self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise _error(errno.EBADF, self._path)

    def _map_size(self, size: int) -> int:
        """The length a map of `size` covers, checked as Python's mmap.mmap checks it (the
        same checks, in the same order and words)."""
        length = len(self._inode.content)
        if size < 0:
            raise OverflowError("memory mapped length must be positive")
        if size == 0:
            if length == 0:
                raise ValueError("cannot mmap an empty file")
            size = length
        if size > length:
            raise ValueError("mmap length is greater than file size")
        return size

    def _write(self, payload: bytes, offset: int) -> None:
        self._check_open()
        if self._read_only:
            raise _error(errno.EBADF, self._path)
        if offset < 0:
            raise _error(errno.EINVAL, self._path)
        if not payload:
            return
        content = self._inode.content
        end = offset + len(payload)
        if end > len(content):
            # A write past the end zero-fills the gap; growing raises BufferError while a map
            # is alive, before anything changes.
            content.extend(bytes(end - len(content)))
        content[offset:end] = payload
        # A shared mapping sees writes to the bytes it covers.
        for _, memory_fd, length in self._inode.live_read_maps():
            if offset < length:
                _pwrite_all(memory_fd, payload[: length - offset], offset)


class _TwinLock:
    __slots__ = ("_fs", "_inode")

    def __init__(self, fs: RecordingFileSystem, inode: _File) -> None:
        self._fs = fs
        self._inode: _File | None = inode

    def release(self) -> None:
        with self._fs._lock:
            if self._inode is not None:
                self._fs._locked.discard(self._inode)
                self._inode = None


class RecordingFileSystem:
    """The in-memory twin of PosixFileSystem (module docstring). It starts with "/" only.

    `seed` drives the twin's own random choices (how much of a short write lands); crash images
    take their randomness from the rng passed to `crash_image`.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self._lock = threading.RLock()
        self._root = _Directory()
        self._locked: set[_File] = set()
        self._calls = 0
        self._call_log: list[tuple[str, str]] = []
        self._faults_at: dict[int, str] = {}
        self._fail_after: tuple[int, str] | None = None

    # -- FileSystem ------------------------------------------------------------------------

    def open(
        self, path: str, *, create: bool = False, read_only: bool = False, exclusive: bool = False
    ) -> _TwinFile:
        with self._lock:
            self._count("open", path)
            inode = self._file_for_open(path, create, exclusive=create and exclusive)
            return _TwinFile(self, inode, path, read_only)

    def exists(self, path: str) -> bool:
        with self._lock:
            try:
                self._node(path)
            except (OSError, ValueError):
                return False
            return True

    def file_size(self, path: str) -> int:
        with self._lock:
            node = self._node(path)
            return len(node.content) if isinstance(node, _File) else 0

    def listdir(self, path: str) -> list[str]:
        with self._lock:
            self._count("listdir", path)
            return sorted(self._directory(path).entries)

    def list_directories(self, path: str) -> list[str]:
        with self._lock:
            self._count("list_directories", path)
            entries = self._directory(path).entries
            return sorted(name for name, node in entries.items() if isinstance(node, _Directory))

    def mkdir(self, path: str) -> None:
        with self._lock:
            self._count("mkdir", path)
            parent, name = self._split(path, errno.EEXIST)
            if name in parent.entries:
                raise _error(errno.EEXIST, path)
            parent.entries[name] = _Directory()

    def rmdir(self, path: str) -> None:
        with self._lock:
            self._count("rmdir", path)
            parent, name = self._split(path, errno.EBUSY)
            node = self._entry(parent, name, path)
            if not isinstance(node, _Directory):
                raise _error(errno.ENOTDIR, path)
            if node.entries:
                raise _error(errno.ENOTEMPTY, path)
            del parent.entries[name]

    def unlink(self, path: str) -> None:
        with self._lock:
            self._count("unlink", path)
            parent, name = self._split(path, errno.EISDIR)
            if isinstance(self._entry(parent, name, path), _Directory):
                raise _error(errno.EISDIR, path)
            del parent.entries[name]

    def rename(self, source: str, target: str) -> None:
        with self._lock:
            self._count("rename", source)
            source_parent, source_name = self._split(source, errno.EBUSY, target)
            target_parent, target_name = self._split(target, errno.EBUSY, source)
            node = source_parent.entries.get(source_name)
            if node is None:
                raise _error(errno.ENOENT, source, target)
            replaced = target_parent.entries.get(target_name)
            if replaced is node:
                return  # POSIX: renaming a file onto itself does nothing.
            if isinstance(node, _Directory):
                if _is_within(target_parent, node):
                    raise _error(errno.EINVAL, source, target)
                if isinstance(replaced, _File):
                    raise _error(errno.ENOTDIR, source, target)
                if isinstance(replaced, _Directory) and replaced.entries:
                    raise _error(errno.ENOTEMPTY, source, target)
            elif isinstance(replaced, _Directory):
                raise _error(errno.EISDIR, source, target)
            del source_parent.entries[source_name]
            target_parent.entries[target_name] = node

    def sync_dir(self, path: str) -> None:
        with self._lock:
            self._count("sync_dir", path)
            directory = self._directory(path)
            directory.durable_entries = dict(directory.entries)

    def lock(self, path: str) -> _TwinLock:
        with self._lock:
            self._count("lock", path)
            inode = self._file_for_open(path, create=True)
            if inode in self._locked:
                raise _error(errno.EWOULDBLOCK, path)
            self._locked.add(inode)
            return _TwinLock(self, inode)

    # -- faults ----------------------------------------------------------------------------

    @property
    def calls(self) -> int:
        """How many counted calls were made so far; the next one has this number."""
        with self._lock:
            return self._calls

    def recorded_calls(self) -> list[tuple[str, str]]:
        """(operation, path) of every counted call so far, indexed by call number: a test runs
        a workload once, then fails each call in turn."""
        with self._lock:
            return list(self._call_log)

    def fail_at(self, call_index: int, kind: str) -> None:
        """Make counted call number `call_index` raise OSError with errno `kind` (EIO, ENOSPC,
        EFBIG), or for kind "short" make that pwrite write a strict prefix and raise ENOSPC
        (another call fails with EIO). The call changes nothing else."""
        with self._lock:
            self._faults_at[self._check_fault(call_index, kind)] = kind

    def fail_after(self, call_index: int, kind: str) -> None:
        """Fail counted call `call_index` and every later one, as fail_at does (a dead disk)."""
        with self._lock:
            self._fail_after = (self._check_fault(call_index, kind), kind)

    # -- test helpers ----------------------------------------------------------------------

    def makedirs(self, path: str, *, durable: bool = False) -> None:
        """Create every missing directory along path (existing ones are fine). With durable,
        each created directory's entry is synced into its parent, so no crash image loses it.
        Not a counted call."""
        with self._lock:
            names = _components(path)
            directory = self._root
            for depth, name in enumerate(names, start=1):
                child = directory.entries.get(name)
                if child is None:
                    child = directory.entries[name] = _Directory()
                    if durable:
                        directory.durable_entries[name] = child
                elif isinstance(child, _File):
                    # As os.makedirs: the path itself is a file, or a file blocks the way.
                    raise _error(errno.EEXIST if depth == len(names) else errno.ENOTDIR, path)
                directory = child

    def snapshot_bytes(self, path: str) -> bytes:
        """The file's current content."""
        with self._lock:
            return bytes(self._file(path).content)

    def durable_bytes(self, path: str) -> bytes:
        """The file's content as of its last sync()."""
        with self._lock:
            return self._file(path).durable

    def unsynced_paths(self) -> list[str]:
        """Sorted paths of files whose content differs from their durable image and of
        directories whose entries differ from their durable entries."""
        found: list[str] = []
        with self._lock:
            pending: deque[tuple[str, _Directory]] = deque([("/", self._root)])
            while pending:
                path, directory = pending.popleft()
                if directory.entries != directory.durable_entries:
                    found.append(path)
                for name, node in directory.entries.items():
                    child_path = os.path.join(path, name)
                    if isinstance(node, _Directory):
                        pending.append((child_path, node))
                    elif node.content != node.durable:
                        found.append(child_path)
        return sorted(found)

    def crash_image(self, rng: random.Random, *, chunk: int | None = None) -> RecordingFileSystem:
        """A new twin holding one disk state a power loss now could leave; everything in it is
        durable, and it has no locks, open files or faults. The same twin state and the same
        rng state give the same image.

        Each directory entry whose current and durable states differ is kept as either, at
        random (so created files may vanish, unlinked ones reappear, and each half of a rename
        lands or not). Names that end up on one file share its inode, so a file never has two
        contents. A directory is never given two names: a choice that would do so takes the
        entry's other state instead, or drops the entry if that is a claimed directory too.
        Each surviving file whose content differs from its durable image gets the durable or
        the current size, and each `chunk`-byte block (512 or 4096, drawn per image unless
        given) that differs is applied, dropped (durable bytes, zeros past the durable size) or
        torn (a strict prefix from the current content, the rest dropped).
        """
        with self._lock:
            chunk_bytes = rng.choice(CRASH_CHUNK_BYTES) if chunk is None else chunk
            if chunk_bytes <= 0:
                raise ValueError(f"chunk must be positive, got {chunk_bytes}")
            image = RecordingFileSystem(rng.getrandbits(64))
            chosen = self._choose_entries(rng)
            copies: dict[_File, _File] = {}
            copied: set[_Directory] = set()
            pending = deque([(self._root, image._root)])
            while pending:
                original, copy = pending.popleft()
                # _choose_entries gives every directory at most one name; a second visit would
                # be our bug, and a cycle would make this loop run forever.
                if original in copied:
                    raise AssertionError("crash image reached a directory twice")
                copied.add(original)
                for name, node in chosen[original].items():
                    if isinstance(node, _Directory):
                        child = _Directory()
                        pending.append((node, child))
                        copy.entries[name] = child
                    else:
                        if node not in copies:
                            copies[node] = _File(_crash_content(node, rng, chunk_bytes))
                        copy.entries[name] = copies[node]
                copy.durable_entries = dict(copy.entries)
            return image

    # -- internals -------------------------------------------------------------------------

    def _count(self, operation: str, path: str) -> str | None:
        """Number this call and raise its injected fault, if any. Returns "short" for a pwrite
        that must write a prefix and fail, None when the call proceeds."""
        index = self._calls
        self._calls += 1
        self._call_log.append((operation, path))
        kind = self._faults_at.pop(index, None)
        if kind is None and self._fail_after is not None and index >= self._fail_after[0]:
            kind = self._fail_after[1]
        if kind is None or (kind == "short" and operation == "pwrite"):
            return kind
        raise _error(FAULT_ERRNOS[kind], path)

    def _check_fault(self, call_index: int, kind: str) -> int:
        if kind not in FAULT_ERRNOS:
            raise ValueError(f"fault kind {kind!r} is not one of {sorted(FAULT_ERRNOS)}")
        if call_index < self._calls:
            raise ValueError(f"call {call_index} has already been made ({self._calls} so far)")
        return call_index

    def _walk(self, names: list[str], path: str, other_path: str | None = None) -> _Directory:
        directory = self._root
        for name in names:
            child = directory.entries.get(name)
            if child is None:
                raise _error(errno.ENOENT, path, other_path)
            if isinstance(child, _File):
                raise _error(errno.ENOTDIR, path, other_path)
            directory = child
        return directory

    def _split(
        self, path: str, root_errno: int, other_path: str | None = None
    ) -> tuple[_Directory, str]:
        """The parent directory of path and the last name; `root_errno` if path is "/"."""
        names = _components(path)
        if not names:
            raise _error(root_errno, path, other_path)
        return self._walk(names[:-1], path, other_path), names[-1]

    @staticmethod
    def _entry(parent: _Directory, name: str, path: str) -> _Node:
        node = parent.entries.get(name)
        if node is None:
            raise _error(errno.ENOENT, path)
        return node

    def _node(self, path: str) -> _Node:
        names = _components(path)
        if not names:
            return self._root
        return self._entry(self._walk(names[:-1], path), names[-1], path)

    def _directory(self, path: str) -> _Directory:
        node = self._node(path)
        if isinstance(node, _File):
            raise _error(errno.ENOTDIR, path)
        return node

    def _file(self, path: str) -> _File:
        node = self._node(path)
        if isinstance(node, _Directory):
            raise _error(errno.EISDIR, path)
        return node

    def _file_for_open(self, path: str, create: bool, *, exclusive: bool = False) -> _File:
        parent, name = self._split(path, errno.EISDIR)
        node = parent.entries.get(name)
        if node is not None and exclusive:
            raise _error(errno.EEXIST, path)  # O_CREAT | O_EXCL: a file or a directory
        if node is None:
            if not create:
                raise _error(errno.ENOENT, path)
            node = parent.entries[name] = _File()
        if isinstance(node, _Directory):
            raise _error(errno.EISDIR, path)
        return node

    def _directories(self) -> list[_Directory]:
        """Every directory a crash could leave reachable (through current or durable entries),
        breadth first by name, so that crash images draw their choices in a fixed order."""
        seen: dict[_Directory, None] = {}  # an insertion-ordered set
        pending = deque([self._root])
        while pending:
            directory = pending.popleft()
            if directory in seen:
                continue
            seen[directory] = None
            for name in sorted(directory.entries.keys() | directory.durable_entries.keys()):
                for node in (directory.entries.get(name), directory.durable_entries.get(name)):
                    if isinstance(node, _Directory) and node not in seen:
                        pending.append(node)
        return list(seen)

    def _choose_entries(self, rng: random.Random) -> dict[_Directory, dict[str, _Node]]:
        """Each directory's entries after the crash (crash_image's docstring)."""
        directories = self._directories()
        # An entry that is both current and durable always survives, so the directory it names
        # is claimed before any random choice can give that directory a second name.
        claimed = {
            node
            for directory in directories
            for name, node in directory.entries.items()
            if isinstance(node, _Directory) and directory.durable_entries.get(name) is node
        }
        chosen: dict[_Directory, dict[str, _Node]] = {}
        for directory in directories:
            entries: dict[str, _Node] = {}
            for name in sorted(directory.entries.keys() | directory.durable_entries.keys()):
                current = directory.entries.get(name)
                durable = directory.durable_entries.get(name)
                node = current
                if current is not durable:
                    node, other = (current, durable) if rng.random() < 0.5 else (durable, current)
                    if node in claimed:
                        node = None if other in claimed else other
                    if isinstance(node, _Directory):
                        claimed.add(node)
                if node is not None:
                    entries[name] = node
            chosen[directory] = entries
        return chosen


def _pwrite_all(fd: int, data: Buffer, offset: int) -> None:
    view = memoryview(data).cast("B")
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def _is_within(directory: _Directory, ancestor: _Directory) -> bool:
    """Whether directory is ancestor or lies below it (through current entries)."""
    pending = [ancestor]
    while pending:
        candidate = pending.pop()
        if candidate is directory:
            return True
        pending.extend(node for node in candidate.entries.values() if isinstance(node, _Directory))
    return False


def _crash_content(inode: _File, rng: random.Random, chunk_bytes: int) -> bytes:
    """The file's bytes after a power loss (crash_image's docstring)."""
    current = bytes(inode.content)
    durable = inode.durable
    if current == durable:
        return durable
    size = rng.choice((len(durable), len(current)))
    span = max(len(current), len(durable))
    # Past its own length each image reads as zeros: a dropped block beyond the durable size
    # is a hole, and a block beyond the current size was cut by a truncate.
    current = current.ljust(span, b"\0")
    result = bytearray(durable.ljust(span, b"\0"))
    for start in range(0, min(span, size), chunk_bytes):
        end = min(start + chunk_bytes, span)
        if current[start:end] == result[start:end]:
            continue
        fate = rng.choice(("applied", "dropped", "torn"))
        if fate == "applied":
            result[start:end] = current[start:end]
        elif fate == "torn" and end - start > 1:
            # A one-byte block has no strict prefix to tear at, so it stays dropped.
            torn_end = start + rng.randrange(1, end - start)
            result[start:torn_end] = current[start:torn_end]
    return bytes(result[:size])


def _conforms(twin: RecordingFileSystem, handle: _TwinFile, lock: _TwinLock) -> None:
    """Never called: mypy checks here that the twin satisfies the fs Protocols."""
    file_system: FileSystem = twin
    file_handle: FileHandle = handle
    file_lock: FileLock = lock
    del file_system, file_handle, file_lock
