"""The fs seam: every file operation eoslog performs goes through a FileSystem (STYLE.md rule 11).

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

Paths are plain strings. Errors are OSError with the errno set, as the OS raises them.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    # Only for annotations: typing_extensions is not a run-time dependency.
    from typing_extensions import Buffer


FILE_MODE = 0o644  # RELIABILITY.md: files 0o644 and directories 0o755, under the umask
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

    def open(self, path: str, *, create: bool = False, read_only: bool = False) -> FileHandle:
        """Open a file; create=True creates it if missing (mode 0o644). FileNotFoundError if
        missing and not create."""

    def exists(self, path: str) -> bool: ...

    def file_size(self, path: str) -> int: ...

    def listdir(self, path: str) -> list[str]:
        """Names in the directory, sorted."""

    def mkdir(self, path: str) -> None:
        """Create a directory (mode 0o755); FileExistsError if it exists."""

    def rmdir(self, path: str) -> None: ...

    def unlink(self, path: str) -> None: ...

    def rename(self, source: str, target: str) -> None:
        """Atomically replace target by source (POSIX rename)."""

    def sync_dir(self, path: str) -> None:
        """Make the directory's entries durable (fsync of the directory)."""

    def lock(self, path: str) -> FileLock:
        """Take an exclusive lock on the file at path (created if missing), without waiting:
        BlockingIOError (EWOULDBLOCK) if another process holds it."""


class _PosixFile:
    """A file descriptor with positional I/O."""

    __slots__ = ("_fd", "_path")

    def __init__(self, path: str, fd: int) -> None:
        self._path = path
        self._fd = fd

    @property
    def path(self) -> str:
        return self._path

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def pread(self, size: int, offset: int) -> bytes:
        chunks = []
        while size > 0:
            chunk = os.pread(self._fd, size, offset)
            if not chunk:
                break
            chunks.append(chunk)
            size -= len(chunk)
            offset += len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def pwrite(self, data: Buffer, offset: int) -> None:
        view = memoryview(data).cast("B")
        while view:
            # The OS may write less than asked (a signal, a nearly full disk): continue from
            # where it stopped; a real failure raises OSError from os.pwrite.
            written = os.pwrite(self._fd, view, offset)
            if written == 0:
                raise OSError(errno.EIO, "pwrite wrote nothing", self._path)
            view = view[written:]
            offset += written

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)

    def sync(self) -> None:
        os.fdatasync(self._fd)

    def map(self, size: int) -> mmap.mmap:
        self._check_open()
        return mmap.mmap(self._fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)

    def map_read(self, size: int) -> mmap.mmap:
        self._check_open()
        return mmap.mmap(self._fd, size, mmap.MAP_SHARED, mmap.PROT_READ)

    def _check_open(self) -> None:
        # mmap.mmap takes fd -1 (a closed handle) as a request for anonymous memory: a read
        # would then see zeros instead of failing.
        if self._fd < 0:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF), self._path)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


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


class PosixFileSystem:
    """The operating system's files."""

    def open(self, path: str, *, create: bool = False, read_only: bool = False) -> _PosixFile:
        flags = os.O_RDONLY if read_only else os.O_RDWR
        if create:
            flags |= os.O_CREAT
        return _PosixFile(path, os.open(path, flags | os.O_CLOEXEC, FILE_MODE))

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def file_size(self, path: str) -> int:
        return os.stat(path).st_size

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def mkdir(self, path: str) -> None:
        os.mkdir(path, DIR_MODE)

    def rmdir(self, path: str) -> None:
        os.rmdir(path)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def rename(self, source: str, target: str) -> None:
        os.replace(source, target)

    def sync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def lock(self, path: str) -> _PosixLock:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            os.close(fd)
            raise
        return _PosixLock(fd)
