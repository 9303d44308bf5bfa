"""The fs seam: every file operation eoslog performs goes through a FileSystem (docs/style.md rule
11).

`PosixFileSystem` is the real one. `eoslog.fs_twin.RecordingFileSystem` is its seeded, in-memory
twin for tests: it keeps each file's durable image apart from the writes made since the last
sync, so a test can build the disk states a power loss could leave, and it fails the k-th call
with EIO, ENOSPC or a short write.

Durability model (what both implementations promise, and what the twin simulates):
- `FileHandle.sync()` makes the file's bytes and size durable (fdatasync), not its name.
- `FileSystem.sync_dir(path)` makes the directory's entries durable: files created, renamed or
  unlinked in it since its last sync_dir may otherwise be undone by a crash.
- Mapped regions (`FileHandle.map`) are written like any other write: durable after sync().
- A region stays mapped only while its file is at least as long: callers never truncate a file
  below the end of a live mapping, writable (`map`) or read-only (`map_read`), since touching
  a mapped page wholly past the end of its file kills the process (SIGBUS). A mapped file may
  grow (pwrite past its end); the mapping keeps its length and sees the bytes it covers.

Paths are plain strings. Errors are OSError with the errno set, as the OS raises them, and
eoslog.errors.UnsafePathError (a KafkaStorageError, so an OSError too) for a path refused below.

Symbolic links (docs/reliability.md "Security and bad input"): eoslog never acts through a symlink
inside the log directory, so a link planted there cannot make it read, overwrite, truncate or delete
a file elsewhere. `PosixFileSystem(root)` opens the root as given (it may itself be, or lie under, a
symlink: that is the user's choice) and reaches every path below it one directory at a time,
relative to the parent's descriptor, refusing a symlink at any step (O_NOFOLLOW) and any `..`,
`.` or empty component; a path outside the root is refused too. Only regular files are opened
(a FIFO planted as a segment would otherwise block open forever). unlink and rename act on the
link itself, never on its target (so a stray link can be removed, and removing it harms
nothing); open, lock, listdir, sync_dir and file_size refuse it with UnsafePathError; exists
reports it as present. A rooted one keeps the descriptors of the directories it walked
(DIRECTORY_FDS_MAX), so a path costs one system call; a descriptor keeps naming the directory
it was opened on, so a symlink swapped in later is never followed either. Without a root,
open, lock and file_size still refuse a symlink as the last component, but directories along
a path are followed. Temp files are created exclusively (`create_temporary`), never opened
when they exist.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import mmap
import os
import stat
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final, NoReturn, Protocol

from eoslog._ext.posix_file import PositionalFile
from eoslog.errors import KafkaException, KafkaStorageError, UnsafePathError

if TYPE_CHECKING:
    # Only for annotations: typing_extensions is not a run-time dependency.
    from typing_extensions import Buffer


FILE_MODE = 0o644  # docs/reliability.md: files 0o644 and directories 0o755, under the umask
DIR_MODE = 0o755


class FileHandle(Protocol):
    """An open file. Not thread-safe: one owner, or callers serialize (each segment file
    is written under its partition's lock)."""

    @property
    def path(self) -> str: ...

    def size(self) -> int:
        """The current length in bytes."""

    def pread(self, size: int, offset: int) -> bytes:
        """Up to `size` bytes from `offset`; fewer only at the end of the file."""

    def pwrite(self, data: Buffer, offset: int) -> None:
        """Write all of data at offset (extending the file if needed), or raise OSError.
        After an error some prefix of data may have been written."""

    def truncate(self, size: int) -> None:
        """Set the length (shrinking or zero-extending)."""

    def sync(self) -> None:
        """Make the bytes and length durable (fdatasync)."""

    def map(self, size: int) -> mmap.mmap | memoryview:
        """A writable shared mapping of bytes [0, size); the file must be at least `size`
        long for as long as the mapping is used."""

    def map_read(self, size: int) -> mmap.mmap:
        """A read-only shared mapping of bytes [0, size) (size 0: the whole file; an empty
        file or a size past the end raises ValueError, as mmap.mmap does). Views of it are
        read-only and see later writes to the bytes it covers; close() raises BufferError
        while a view is alive. The file must stay at least `size` long until the mapping is
        closed or garbage (the file may grow meanwhile)."""

    def close(self) -> None: ...


class FileLock(Protocol):
    """An exclusive lock on a file, held until release()."""

    def release(self) -> None: ...


class FileSystem(Protocol):
    """Directory and file operations. Thread-safe."""

    def open(
        self, path: str, *, create: bool = False, read_only: bool = False, exclusive: bool = False
    ) -> FileHandle:
        """Open a regular file; create=True creates it if missing (mode 0o644).
        FileNotFoundError if missing and not create; with create and exclusive, FileExistsError
        if anything (a file, a directory, a symlink) already has the name."""

    def exists(self, path: str) -> bool:
        """Whether anything has the name (a symlink counts, and is not followed)."""

    def file_size(self, path: str) -> int:
        """The length of the file at path, read without opening it."""

    def listdir(self, path: str) -> list[str]:
        """Names in the directory, sorted."""

    def list_directories(self, path: str) -> list[str]:
        """Names of the subdirectories in the directory, sorted (a symlink is not one, even
        to a directory): what tells a stray directory from a file with a file's name."""

    def mkdir(self, path: str) -> None:
        """Create a directory (mode 0o755); FileExistsError if it exists."""

    def rmdir(self, path: str) -> None: ...

    def unlink(self, path: str) -> None:
        """Remove the name; for a symlink, the link itself (never its target)."""

    def rename(self, source: str, target: str) -> None:
        """Atomically replace target by source (POSIX rename; a symlink is moved, not
        followed)."""

    def sync_dir(self, path: str) -> None:
        """Make the directory's entries durable (fsync of the directory)."""

    def lock(self, path: str) -> FileLock:
        """Take an exclusive lock on the file at path (created if missing), without waiting:
        BlockingIOError (EWOULDBLOCK) if another process holds it."""


class _PosixFile(PositionalFile):
    """A file descriptor with positional I/O: `fd` (-1 once closed) and the path. pwrite is
    PositionalFile's, in C (eoslog._ext.posix_file: the same loop over os.pwrite's system
    call), since every append of the log makes one or two."""

    __slots__ = ()

    @property
    def path(self) -> str:
        return self._path

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def pread(self, size: int, offset: int) -> bytes:
        chunks = []
        while size > 0:
            chunk = os.pread(self.fd, size, offset)
            if not chunk:
                break
            chunks.append(chunk)
            size -= len(chunk)
            offset += len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def truncate(self, size: int) -> None:
        os.ftruncate(self.fd, size)

    def sync(self) -> None:
        os.fdatasync(self.fd)

    def map(self, size: int) -> mmap.mmap:
        self._check_open()
        return mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)

    def map_read(self, size: int) -> mmap.mmap:
        self._check_open()
        return mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ)

    def data_extents(self, end: int) -> Iterator[tuple[int, int]]:
        """The (start, stop) ranges below `end` that hold data, holes of a sparse file left
        out (SEEK_DATA / SEEK_HOLE), so that a copy of a file claiming terabytes costs only
        its real bytes (eoslog.fs_overlay). A file system without holes gives one range."""
        position = 0
        while position < end:
            try:
                start = os.lseek(self.fd, position, os.SEEK_DATA)
            except OSError as error:
                if error.errno == errno.ENXIO:  # only a hole from position on
                    return
                raise
            if start >= end:
                return
            stop = min(os.lseek(self.fd, start, os.SEEK_HOLE), end)
            yield start, stop
            position = stop

    def _check_open(self) -> None:
        # mmap.mmap takes fd -1 (a closed handle) as a request for anonymous memory: a read
        # would then see zeros instead of failing.
        if self.fd < 0:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF), self._path)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class _PosixLock:
    __slots__ = ("_fd",)
    _fd: int

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        # A broker dropped without close() must not keep its directory locked forever.
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def descriptor_of(handle: FileHandle) -> int | None:
    """The open file descriptor behind `handle` when it is a local file of PosixFileSystem,
    for native code that reads the file itself (a header walk's preads); None for any other
    handle (object storage, a test's wrapper), which is read through pread only."""
    if isinstance(handle, PositionalFile) and handle.fd >= 0:
        return handle.fd
    return None


def create_temporary(fs: FileSystem, path: str) -> FileHandle:
    """A new, empty file at path, created exclusively, for writing then renaming over its
    target. A stale one (left by a crash) is removed first rather than reused: an existing
    file is never opened for writing here, so a temp name can never lead a write elsewhere.
    A symlink at path is refused with UnsafePathError and left in place."""
    if fs.exists(path):
        # Opening it refuses a symlink (O_NOFOLLOW) before the unlink could hide the plant.
        fs.open(path, read_only=True).close()
        fs.unlink(path)
    return fs.open(path, create=True, exclusive=True)


# Opens a directory below the root without following a symlink at its name: Linux then fails
# with ENOTDIR (or ELOOP), and _refuse_symlink tells that apart from a real error.
_DIRECTORY_NO_FOLLOW = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO planted under a file's name must not block; regular files ignore
# it. O_NOFOLLOW: a symlink at the name fails with ELOOP instead of opening its target.
_FILE_NO_FOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


# How many directory descriptors a rooted PosixFileSystem keeps open (the root and the
# partition directories used last): one per directory saves opening every directory along a
# path at each call, which tripled the cost of opening 1,000 segments. Beyond it the least
# recently opened are closed and reopened when needed.
DIRECTORY_FDS_MAX: Final = 64


# How deep remove_tree goes: eoslog makes no subdirectories in a partition, so anything
# deeper is a plant.
_REMOVE_DEPTH_MAX: Final = 8


def remove_tree(fs: FileSystem, directory: str, depth: int = 0) -> None:
    """Remove a directory (a partition's), its files and (stray) subdirectories, and its entry.
    A symlink inside is removed itself, never followed (fs.unlink); a symlink at `directory`
    is refused by listdir (UnsafePathError)."""
    subdirectories = set(fs.list_directories(directory))
    for name in fs.listdir(directory):
        path = os.path.join(directory, name)
        if name not in subdirectories:
            fs.unlink(path)
        elif depth < _REMOVE_DEPTH_MAX:
            remove_tree(fs, path, depth + 1)
        else:
            raise KafkaStorageError(f"{path} lies more than {_REMOVE_DEPTH_MAX} directories deep")
    fs.rmdir(directory)


def make_directories(fs: FileSystem, path: str) -> None:
    """Create `path` and its missing parents, each made durable in its parent (sync_dir)."""
    missing = []
    while not fs.exists(path):
        missing.append(path)
        path = os.path.dirname(path)
    for directory in reversed(missing):
        fs.mkdir(directory)
        fs.sync_dir(os.path.dirname(directory))


class _Directories:
    """Open descriptors of the root and of directories below it, each reached without
    following a symlink. A descriptor keeps naming its directory even if a symlink is swapped
    in for the name later, so a cached one is as safe as a fresh walk. Callers use a
    descriptor only inside `using()`, which holds the lock; the oldest descriptors are closed
    only on entering the outermost `using()`, so none a caller holds (rename holds two) is
    closed under it."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.lock = threading.RLock()
        self._fds: dict[tuple[str, ...], int] = {}
        self._depth = 0  # nesting of using(), under the lock

    @contextlib.contextmanager
    def using(self) -> Iterator[None]:
        with self.lock:
            if self._depth == 0:
                while len(self._fds) >= DIRECTORY_FDS_MAX:
                    os.close(self._fds.pop(next(iter(self._fds))))
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1

    def fd(self, names: tuple[str, ...], path: str) -> int:
        """The directory at root/names (opened and walked if not cached); errors name path.
        Only inside using()."""
        fd = self._fds.get(names)
        if fd is not None:
            return fd
        if not names:
            with _named(self.root):
                fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        else:
            parent = self.fd(names[:-1], path)
            fd = _open_directory(parent, names[-1], os.path.join(self.root, *names), path)
        self._fds[names] = fd
        return fd

    def forget(self, names: tuple[str, ...]) -> None:
        """Close the descriptors of root/names and of everything below it: the name now
        means another directory (or none) after a rename, rmdir or mkdir. Called after the
        operation, when the caller no longer uses its descriptors."""
        for key in [key for key in self._fds if key[: len(names)] == names]:
            os.close(self._fds.pop(key))

    def close(self) -> None:
        with self.lock:
            self.forget(())


class PosixFileSystem:
    """The operating system's files. With a root, every path below it is reached without
    following a symlink, and paths outside it are refused (module docstring); the broker
    makes one rooted at its log directory. Thread-safe. A rooted one keeps up to
    DIRECTORY_FDS_MAX directory descriptors open until close() or garbage collection."""

    # Class defaults too, so that a subclass (a test's failing file system) that does not
    # call __init__ is an unrooted one.
    root: str | None = None
    _directories: _Directories | None = None

    def __init__(self, root: str | None = None) -> None:
        self.root = None if root is None else os.path.abspath(root)
        self._directories = None if self.root is None else _Directories(self.root)

    def close(self) -> None:
        """Close the directory descriptors kept open (later calls reopen them)."""
        if self._directories is not None:
            self._directories.close()

    def __del__(self) -> None:
        # Garbage or interpreter exit: the descriptors are released by the OS at worst.
        with contextlib.suppress(Exception):
            self.close()

    def open(
        self, path: str, *, create: bool = False, read_only: bool = False, exclusive: bool = False
    ) -> _PosixFile:
        flags = os.O_RDONLY if read_only else os.O_RDWR
        if create:
            flags |= os.O_CREAT | (os.O_EXCL if exclusive else 0)
        return _PosixFile(path, self._open_regular(path, flags))

    def exists(self, path: str) -> bool:
        try:
            with self._located(path) as (directory_fd, name):
                os.stat(name, dir_fd=directory_fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    def file_size(self, path: str) -> int:
        with self._located(path) as (directory_fd, name), _named(path):
            status = os.stat(name, dir_fd=directory_fd, follow_symlinks=False)
        if stat.S_ISLNK(status.st_mode):
            raise UnsafePathError(f"refusing to follow the symbolic link {path}")
        return status.st_size

    def listdir(self, path: str) -> list[str]:
        with self._located(path) as (directory_fd, name):
            if directory_fd is None:
                return sorted(os.listdir(name))  # the root or above: the user's own path
            fd = _open_directory(directory_fd, name, path)
        try:
            return sorted(os.listdir(fd))
        finally:
            os.close(fd)

    def list_directories(self, path: str) -> list[str]:
        fd = self._directory_descriptor(path)
        try:
            # The directory entry's type (d_type) answers without a stat per name.
            with os.scandir(fd) as entries:
                return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
        finally:
            os.close(fd)

    def mkdir(self, path: str) -> None:
        with self._located(path) as (directory_fd, name), _named(path):
            try:
                os.mkdir(name, DIR_MODE, dir_fd=directory_fd)
            finally:
                self._forget(path)

    def rmdir(self, path: str) -> None:
        with self._located(path) as (directory_fd, name), _named(path):
            try:
                os.rmdir(name, dir_fd=directory_fd)
            finally:
                self._forget(path)

    def unlink(self, path: str) -> None:
        with self._located(path) as (directory_fd, name), _named(path):
            os.unlink(name, dir_fd=directory_fd)

    def rename(self, source: str, target: str) -> None:
        with (
            self._located(source) as (source_fd, source_name),
            self._located(target) as (target_fd, target_name),
            _named(source, target),
        ):
            try:
                os.replace(source_name, target_name, src_dir_fd=source_fd, dst_dir_fd=target_fd)
            finally:
                self._forget(source)
                self._forget(target)

    def sync_dir(self, path: str) -> None:
        fd = self._directory_descriptor(path)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _directory_descriptor(self, path: str) -> int:
        """A new descriptor of the directory at path (the caller closes it), reached as every
        path is (_located): a symlink below the root is refused, the root or above is the
        user's own path and opened as given."""
        with self._located(path) as (directory_fd, name):
            if directory_fd is None:
                with _named(path):
                    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            return _open_directory(directory_fd, name, path)

    def lock(self, path: str) -> _PosixLock:
        fd = self._open_regular(path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            os.close(fd)
            raise
        return _PosixLock(fd)

    # -- reaching a path without following symlinks -----------------------------------------

    def _open_regular(self, path: str, flags: int) -> int:
        """A descriptor of the regular file at path, opened without following a symlink."""
        with self._located(path) as (directory_fd, name):
            try:
                fd = os.open(name, flags | _FILE_NO_FOLLOW, FILE_MODE, dir_fd=directory_fd)
            except OSError as error:
                _refuse_symlink(error, directory_fd, name, path)
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                # What Linux says when a directory is opened for writing; said for reading
                # too, as the twin does, since no caller reads a directory as a file.
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
            if not stat.S_ISREG(mode):
                raise UnsafePathError(f"refusing to open {path}: it is not a regular file")
            # The file's reads and writes should block as usual (O_NONBLOCK was for the open).
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextlib.contextmanager
    def _located(self, path: str) -> Iterator[tuple[int | None, str]]:
        """(descriptor of the parent directory, name in it) for a path strictly below the
        root, reached without following a symlink; (None, path) without a root and for the
        root itself or a directory above it (the user chose those paths, links and all). The
        descriptor may be used only inside the with-block (the directory lock is held)."""
        names = self._names_below_root(path)
        if names is None:
            yield None, path
            return
        assert self._directories is not None
        with self._directories.using():
            yield self._directories.fd(tuple(names[:-1]), path), names[-1]

    def _forget(self, path: str) -> None:
        """Drop the cached descriptors at path and below (a caller inside _located)."""
        names = self._names_below_root(path)
        if names is not None and self._directories is not None:
            self._directories.forget(tuple(names))

    def _names_below_root(self, path: str) -> list[str] | None:
        """The components of path below the root, or None (see _located); UnsafePathError for
        a path that leaves the root or names nothing inside it."""
        if self.root is None:
            return None
        prefix = self.root.rstrip("/") + "/"
        if not path.startswith(prefix):
            if path.rstrip("/") == self.root.rstrip("/") or prefix.startswith(
                path.rstrip("/") + "/"
            ):
                return None
            raise UnsafePathError(f"refusing {path}: it lies outside the log directory {self.root}")
        names = path[len(prefix) :].split("/")
        if any(name in ("", ".", "..") for name in names):
            raise UnsafePathError(f"refusing {path}: it does not name a file inside {self.root}")
        return names


def _open_directory(directory_fd: int, name: str, path: str, whole_path: str | None = None) -> int:
    """The directory `name` (at `path`) in directory_fd, not followed if it is a symlink; an
    error other than a refusal names `whole_path` (the path asked for), as the OS would."""
    try:
        return os.open(name, _DIRECTORY_NO_FOLLOW, dir_fd=directory_fd)
    except OSError as error:
        _refuse_symlink(error, directory_fd, name, path, whole_path)


def _refuse_symlink(
    error: OSError,
    directory_fd: int | None,
    name: str,
    path: str,
    whole_path: str | None = None,
) -> NoReturn:
    """Raise UnsafePathError naming `path` if `error` came from refusing to follow a symlink
    at name, else `error` itself, naming `whole_path` (default `path`)."""
    if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EEXIST) and _is_symlink(
        directory_fd, name
    ):
        raise UnsafePathError(f"refusing to follow the symbolic link {path}") from error
    raise OSError(error.errno, error.strerror, whole_path or path) from None


def _is_symlink(directory_fd: int | None, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=directory_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def _named(path: str, other_path: str | None = None) -> Iterator[None]:
    """Re-raise an OSError of a call made relative to a directory descriptor with the whole
    path in it (the OS names only the last component then)."""
    try:
        yield
    except KafkaException:
        raise
    except OSError as error:
        if other_path is None:
            raise OSError(error.errno, error.strerror, path) from None
        raise OSError(error.errno, error.strerror, path, None, other_path) from None
