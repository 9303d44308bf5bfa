"""ArrowFileSystem: a log directory in object storage, or on any file system pyarrow opens
(`s3://`, `gs://`, `hdfs://`, `abfs://`), seen read-only through the fs seam, for offline scans
(docs/api.md "Offline scans"). Scans never write: every write, rename, unlink, lock and mapping
raises OSError(EROFS) and changes nothing.

Paths. open_url(url) returns the file system and the log directory's display path: the URL
without its credentials and options (`s3://bucket/logs`). Paths given to the file system are
display paths (`s3://bucket/logs/orders-0/00000000000000000000.log`), so every error names the
object as the user would, and never a secret. A directory is a key prefix on object storage:
it exists while an object lies under it.

Requests. On object storage every call is an HTTP request, so this file system asks as few as
the reads allow:
- A directory is listed with one request (one LIST with a delimiter on S3, a page per 1,000
  names) the first time it is listed, and the listing is kept: listdir and list_directories of
  it, and exists and file_size of names in it, are answered from it. A listing is dropped when a
  file it names is found missing on open, so a caller that lists again (view_open's retry
  after retention) sees the directory as it is.
- A file is opened (a HEAD on S3) on its first read, once for all its handles, and its size
  comes from the listing when there is one; pread is one ranged read (a GET). A read
  smaller than limits.object_read_ahead_bytes is widened to it (the first of an object; a
  later one to limits.object_read_ahead_again_bytes), and reads are kept (at most
  limits.object_read_cache_bytes_max in all, the least recently used dropped first), so the
  many small reads of planning (a batch header, an index lookup, a marker checked against a
  .txnindex entry) mostly cost one request for several, and a large read (the scan's 16 MiB
  chunks, limits.offline_read_chunk_bytes) is one request for many batches.
Objects are taken not to change while a scan reads them, as a closed segment's files never do:
an object replaced under a scan may be read partly old and partly new, which the batch checks
(CRC, offsets continuing each other) then report as damage.

Errors. A missing object is FileNotFoundError, as a missing local file (so a missing topic,
partition or segment gives the same typed errors as on a local disk); any other failure of the
store (access denied, the network, a bad endpoint) is KafkaStorageError naming the path.

Thread safety: every method may be called from any thread (one lock guards the listings and
the kept reads); a handle is used by one thread at a time (eoslog.fs).
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import urllib.parse
from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

import pyarrow.fs as pafs

from eoslog import limits
from eoslog.errors import KafkaStorageError
from eoslog.fs_readonly import RefusesChanges, RefusesWrites

if TYPE_CHECKING:
    import pyarrow as pa


def is_url(path: str) -> bool:
    """Whether `path` names its file system by a scheme (`s3://...`) rather than being a local
    path."""
    scheme, separator, _ = path.partition("://")
    return bool(separator) and scheme.isascii() and scheme.replace("+", "").isalnum()


def open_url(url: str) -> tuple[ArrowFileSystem, str]:
    """(the file system `url` names, the display path of the directory it names). The URL
    carries the options of its file system as pyarrow.fs.FileSystem.from_uri reads them: for S3
    `s3://[access_key:secret_key@]bucket/path?region=...&endpoint_override=host:port&scheme=http`
    (credentials otherwise come from the usual AWS environment variables and files). ValueError
    for a URL pyarrow cannot open (an unknown scheme, an unknown option), without the secret."""
    parts = urllib.parse.urlsplit(url)
    secret = parts.password
    try:
        filesystem, path = pafs.FileSystem.from_uri(url)
    except (ValueError, TypeError) as error:
        message = str(error)
        if secret:
            message = message.replace(secret, "***")
        raise ValueError(f"cannot open {_without_secrets(parts)}: {message}") from None
    path = path.rstrip("/")
    shown = _without_secrets(parts).rstrip("/")
    # The display path ends with the file system's own path (s3://bucket/logs shows the path
    # bucket/logs under the prefix s3://); anything else is shown under the scheme alone.
    prefix = shown[: len(shown) - len(path)] if shown.endswith(path) else f"{parts.scheme}://"
    return ArrowFileSystem(filesystem, prefix), prefix + path


def display_path(url: str) -> str:
    """The URL without credentials and options, as open_url shows the directory (where
    pyarrow's path is the URL's own: S3, GCS)."""
    return _without_secrets(urllib.parse.urlsplit(url)).rstrip("/")


def _without_secrets(parts: urllib.parse.SplitResult) -> str:
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


class _Listing(NamedTuple):
    names: list[str]
    directories: frozenset[str]
    sizes: dict[str, int]


class ArrowFileSystem(RefusesChanges):
    """The read-only FileSystem of a pyarrow.fs.FileSystem (module doc). `prefix` is what a
    display path has before the pyarrow path (`s3://`)."""

    refusal = "offline scans of object storage only read"

    def __init__(self, filesystem: pafs.FileSystem, prefix: str) -> None:
        self.filesystem = filesystem
        self.prefix = prefix
        self._lock = threading.Lock()
        self._listings: dict[str, _Listing] = {}
        # Each object read is opened once (a HEAD on S3) and shared by every handle of it.
        self._natives: dict[str, pa.NativeFile] = {}
        self._kept: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._kept_bytes = 0
        self._read_before: set[str] = set()  # objects read once: later reads widen more

    def _arrow_path(self, path: str) -> str:
        if not path.startswith(self.prefix):
            raise ValueError(f"{path} does not lie under {self.prefix}")
        return path[len(self.prefix) :].rstrip("/")

    @contextlib.contextmanager
    def _named(self, path: str) -> Iterator[None]:
        """pyarrow's errors as eoslog's (module doc), naming the display path."""
        try:
            yield
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as error:
            code = {FileNotFoundError: errno.ENOENT, IsADirectoryError: errno.EISDIR}.get(
                type(error), errno.ENOTDIR
            )
            raise type(error)(code, os.strerror(code), path) from None
        except KafkaStorageError:
            raise
        except OSError as error:
            raise KafkaStorageError(f"{path}: {error}") from None

    # --- listing ------------------------------------------------------------------------

    def _listing(self, path: str) -> _Listing:
        with self._lock:
            found = self._listings.get(path)
        if found is not None:
            return found
        with self._named(path):
            infos = self.filesystem.get_file_info(pafs.FileSelector(self._arrow_path(path)))
        names = sorted(os.path.basename(info.path.rstrip("/")) for info in infos)
        listing = _Listing(
            names,
            frozenset(
                os.path.basename(info.path.rstrip("/"))
                for info in infos
                if info.type == pafs.FileType.Directory
            ),
            {
                os.path.basename(info.path): int(info.size)
                for info in infos
                if info.type == pafs.FileType.File and info.size is not None
            },
        )
        with self._lock:
            self._listings[path] = listing
        return listing

    def _listed_parent(self, path: str) -> _Listing | None:
        with self._lock:
            return self._listings.get(os.path.dirname(path))

    def listdir(self, path: str) -> list[str]:
        return list(self._listing(path).names)

    def forget_listing(self, path: str) -> None:
        """Drop the kept listing of the directory `path`: the next call lists it again (a
        reader that knows an object was added since: eoslog.archive_view)."""
        with self._lock:
            self._listings.pop(path, None)

    def list_directories(self, path: str) -> list[str]:
        return sorted(self._listing(path).directories)

    def exists(self, path: str) -> bool:
        parent = self._listed_parent(path)
        if parent is not None:
            return os.path.basename(path) in parent.names
        with self._named(path):
            info = self.filesystem.get_file_info(self._arrow_path(path))
        return bool(info.type != pafs.FileType.NotFound)

    def file_size(self, path: str) -> int:
        parent = self._listed_parent(path)
        name = os.path.basename(path)
        if parent is not None and name in parent.sizes:
            return parent.sizes[name]
        with self._named(path):
            info = self.filesystem.get_file_info(self._arrow_path(path))
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        if info.type == pafs.FileType.Directory:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        return int(info.size)

    # --- files --------------------------------------------------------------------------

    def open(
        self, path: str, *, create: bool = False, read_only: bool = False, exclusive: bool = False
    ) -> ArrowFile:
        if create or not read_only:
            self._refuse(path)
        parent = self._listed_parent(path)
        name = os.path.basename(path)
        if parent is not None and name in parent.directories:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if parent is not None and name not in parent.names:
            # Not listed: missing, as a segment's optional files (.txnindex) often are.
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        if parent is not None and name in parent.sizes:
            # Listed with its size: opened on its first read that is not kept (several
            # views of one scan open the same files, and most of their reads are kept).
            return ArrowFile(self, path, parent.sizes[name])
        return ArrowFile(self, path, int(self._native(path).size()))

    def _native(self, path: str) -> pa.NativeFile:
        """The open object at path (opened on first use). FileNotFoundError when it is gone,
        after dropping the listing that named it (module doc)."""
        with self._lock:
            native = self._natives.get(path)
        if native is not None:
            return native
        try:
            with self._named(path):
                native = self.filesystem.open_input_file(self._arrow_path(path))
        except FileNotFoundError:
            with self._lock:
                self._listings.pop(os.path.dirname(path), None)
            raise
        with self._lock:
            return self._natives.setdefault(path, native)

    def close(self) -> None:
        """Close the objects opened (later reads open them again)."""
        with self._lock:
            natives, self._natives = self._natives, {}
        for native in natives.values():
            native.close()

    def read(self, path: str, file_size: int, size: int, offset: int) -> bytes:
        """Up to `size` bytes at `offset` of the object at path, `file_size` long (module doc:
        widened, kept). Called by ArrowFile.pread."""
        size = min(size, file_size - offset)
        if size <= 0:
            return b""
        kept = self._kept_read(path, size, offset)
        if kept is not None:
            return kept
        with self._lock:
            again = path in self._read_before
            self._read_before.add(path)
        ahead = limits.object_read_ahead_again_bytes if again else limits.object_read_ahead_bytes
        want = min(max(size, ahead), file_size - offset)
        native = self._native(path)
        with self._named(path):
            data: bytes = native.read_at(want, offset)
        self._keep(path, offset, data)
        return data[:size] if len(data) > size else data

    def _kept_read(self, path: str, size: int, offset: int) -> bytes | None:
        with self._lock:
            for (kept_path, start), data in reversed(self._kept.items()):
                if kept_path == path and start <= offset and offset + size <= start + len(data):
                    self._kept.move_to_end((kept_path, start))
                    at = offset - start
                    return data if at == 0 and size == len(data) else data[at : at + size]
        return None

    def _keep(self, path: str, offset: int, data: bytes) -> None:
        if len(data) > limits.object_read_cache_bytes_max // 2:
            return
        with self._lock:
            previous = self._kept.pop((path, offset), None)
            self._kept_bytes -= 0 if previous is None else len(previous)
            self._kept[path, offset] = data
            self._kept_bytes += len(data)
            while self._kept_bytes > limits.object_read_cache_bytes_max:
                _, dropped = self._kept.popitem(last=False)
                self._kept_bytes -= len(dropped)


class ArrowFile(RefusesWrites):
    """A read-only handle of one object; its size is the object's when it was listed or
    opened."""

    __slots__ = ("_closed", "_fs", "_path", "_size")
    refusal = "offline scans of object storage only read"

    def __init__(self, fs: ArrowFileSystem, path: str, size: int) -> None:
        self._fs = fs
        self._path = path
        self._size = size
        self._closed = False

    @property
    def path(self) -> str:
        return self._path

    def size(self) -> int:
        return self._size

    def pread(self, size: int, offset: int) -> bytes:
        if self._closed:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF), self._path)
        return self._fs.read(self._path, self._size, size, offset)

    # map_read (RefusesWrites): nothing outside the owner maps (partition_view).

    def close(self) -> None:
        # The object stays open in the file system for the next handle of it.
        self._closed = True
