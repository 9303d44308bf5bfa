"""Where `eoslog archive` writes (eoslog.archive): a local directory, or any store pyarrow opens
(`s3://`, `gs://`, `hdfs://`, eoslog.fs_arrow's URLs), written one whole object at a time.

Publishing is atomic, so a reader never sees part of an object under its final name: each
object is written under a temporary name (the final one with `.tmp`, which no reader takes for
a segment or checkpoint file), its length checked against the bytes written, then moved to its
name: a rename on a local directory (after fsync, and the directory synced after it), and on S3
a server-side copy (CopyObject, which makes the object visible whole) and the delete of the
temporary object. A writer killed while writing leaves at most a temporary object (on S3 an
unfinished multipart upload, which the bucket's AbortIncompleteMultipartUpload rule removes),
which the next write of the same name replaces. The length check matters because pyarrow
completes an upload when its stream is closed, even after a failed write: a short temporary
object is never moved into place.
"""

from __future__ import annotations

import contextlib
import errno
import os
import urllib.parse
from collections.abc import Iterable, Iterator
from typing import Final, Protocol

import pyarrow.fs as pafs

from eoslog import fs_arrow
from eoslog.errors import KafkaStorageError
from eoslog.fs import FileSystem, PosixFileSystem

# A temporary object's suffix: no reader takes `<name>.tmp` for a segment or checkpoint file
# (segment_reads.parse_file_name; eoslog.fs_overlay leaves the owner's out the same way).
TEMPORARY_SUFFIX: Final = ".tmp"


class Store(Protocol):
    """A writable archive: a directory tree of whole objects."""

    root: str

    def sizes(self, directory: str) -> dict[str, int]:
        """The objects directly in `directory` by name, with their lengths; {} when it holds
        none (or does not exist)."""

    def put(self, path: str, chunks: Iterable[bytes]) -> int:
        """Publish the concatenated chunks as the object `path`, atomically (module doc);
        returns its length."""


class LocalStore:
    """A local directory (a path, or a `file://` URL), written through the fs seam."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._fs: FileSystem = PosixFileSystem()

    def sizes(self, directory: str) -> dict[str, int]:
        try:
            names = self._fs.listdir(directory)
            subdirectories = set(self._fs.list_directories(directory))
        except (FileNotFoundError, NotADirectoryError):
            return {}
        found = {}
        for name in names:
            if name in subdirectories:
                continue
            with contextlib.suppress(FileNotFoundError):
                found[name] = self._fs.file_size(os.path.join(directory, name))
        return found

    def _make_directories(self, directory: str) -> None:
        missing = []
        while not self._fs.exists(directory):
            missing.append(directory)
            directory = os.path.dirname(directory)
        for each in reversed(missing):
            with contextlib.suppress(FileExistsError):
                self._fs.mkdir(each)
            self._fs.sync_dir(os.path.dirname(each))

    def put(self, path: str, chunks: Iterable[bytes]) -> int:
        directory = os.path.dirname(path)
        self._make_directories(directory)
        temporary = path + TEMPORARY_SUFFIX
        with contextlib.suppress(FileNotFoundError):
            self._fs.unlink(temporary)  # left by a writer that was killed
        handle = self._fs.open(temporary, create=True, exclusive=True)
        written = 0
        try:
            for chunk in chunks:
                handle.pwrite(chunk, written)
                written += len(chunk)
            handle.sync()
        finally:
            handle.close()
        self._fs.rename(temporary, path)
        self._fs.sync_dir(directory)
        return written


class ArrowStore:
    """A store pyarrow opens (eoslog.fs_arrow.open_url's URLs), the archive at `url`."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        try:
            self._fs, path = pafs.FileSystem.from_uri(url)
        except (ValueError, TypeError) as error:
            shown = fs_arrow.display_path(url)
            message = str(error)
            if parts.password:
                message = message.replace(parts.password, "***")
            raise ValueError(f"cannot open {shown}: {message}") from None
        self.root = path.rstrip("/")
        self._shown = fs_arrow.display_path(url)
        self._made: set[str] = set()  # directories made (on S3 a request each, else none)

    @contextlib.contextmanager
    def _named(self, path: str) -> Iterator[None]:
        """Store failures as KafkaStorageError naming the object (never a credential)."""
        try:
            yield
        except OSError as error:
            shown = self._shown + path[len(self.root) :]
            raise KafkaStorageError(f"{shown}: {error}") from None

    def sizes(self, directory: str) -> dict[str, int]:
        with self._named(directory):
            infos = self._fs.get_file_info(pafs.FileSelector(directory, allow_not_found=True))
        return {
            os.path.basename(info.path): int(info.size)
            for info in infos
            if info.type == pafs.FileType.File and info.size is not None
        }

    def put(self, path: str, chunks: Iterable[bytes]) -> int:
        temporary = path + TEMPORARY_SUFFIX
        written = 0
        with self._named(path):
            directory = os.path.dirname(path)
            if directory not in self._made:
                self._fs.create_dir(directory, recursive=True)
                self._made.add(directory)
            with self._fs.open_output_stream(temporary) as stream:
                for chunk in chunks:
                    stream.write(chunk)
                    written += len(chunk)
            stored = self._fs.get_file_info(temporary)
            if stored.size != written:
                raise OSError(
                    errno.EIO, f"{stored.size} bytes stored of the {written} written", temporary
                )
            self._fs.move(temporary, path)
        return written


def open_store(url: str) -> Store:
    """The store a local path or URL names (module doc). ValueError for a URL pyarrow cannot
    open, or a `file://` URL naming another host."""
    if not fs_arrow.is_url(url):
        return LocalStore(os.path.abspath(url))
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"{url} names a file on another host ({parts.netloc})")
        return LocalStore(urllib.parse.unquote(parts.path))
    return ArrowStore(url)
