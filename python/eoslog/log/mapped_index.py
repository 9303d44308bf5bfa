"""What the offset and time indexes share (Kafka's AbstractIndex): a preallocated file of
fixed-size entries, mapped into memory, searched with the warm-section binary search
(docs/format.md §5.6, §5.8).

Files. A new index file is sized to max_index_bytes rounded down to a multiple of the entry
size and starts empty; an existing file is taken to hold length // entry size entries, all of
them valid (§5.6), which is why an index is trimmed to its entries before it counts as durable
(close, roll, end of recovery) and re-expanded when its segment becomes active again. A file
longer than max_index_bytes is not believed at all (_entries_claimed): its size is a lie.

Memory safety (docs/design.md "Ownership, threads, processes"). Only the owner process maps index
files, and a mapping never outlives the file bytes under it, since touching a mapped page past
the end of its file kills the process with SIGBUS. No mapping lives while a file changes size
(which the fs twin enforces): to resize, the index switches its entries to an in-memory copy of
the entries in use, which drops the mapping, then truncates the file, then maps it again and
switches back. Lookups on other threads answer from the copy in between. Mappings are never
closed explicitly: the entries object holds the only reference, and a dropped mapping is
unmapped when that reference goes. An index opened with writable=False reads its file once
with pread into memory and maps nothing, as readers outside the owner process must; it keeps
only the entries before the first slot that breaks the index's order (the zeroed,
preallocated slots of an active segment's file), reading limits.file_read_chunk_bytes at a
time and stopping there, so a preallocated, sparse or lying file costs at most one chunk over
its real entries, never its apparent size.

Thread safety. One writer, the partition's writer thread (under the partition lock), calls
every method that changes the index: append / maybe_append, truncate_to, truncate, reset,
resize, trim_to_valid_size, flush, close, delete and rename_to. Lookups (lookup, entry,
fetch_upper_bound_offset) and the properties may run on any thread at any time: each lookup is
one call into eoslog._ext.index, which reads the mapping and the entry count together, so it
answers from the index as it was before or after any one change of the writer, never from a
mapping that is being replaced. After close() or delete() lookups raise ValueError.
"""

from __future__ import annotations

import io
from types import TracebackType
from typing import TYPE_CHECKING, ClassVar, Final, Self

from eoslog import limits
from eoslog._ext import index as _index
from eoslog.errors import IndexOffsetOverflowError
from eoslog.fs import FileHandle, FileSystem

if TYPE_CHECKING:
    # Only for annotations: typing_extensions is not a run-time dependency.
    from typing_extensions import Buffer

# Kafka's segment.index.bytes / log.index.size.max.bytes default (ServerLogConfigs
# LOG_INDEX_SIZE_MAX_BYTES_DEFAULT, docs/format.md §5.2): the size a new index file is given.
INDEX_BYTES_DEFAULT: Final = 10 * 1024 * 1024
# A relative offset is stored as an int32 (AbstractIndex.toRelative).
RELATIVE_OFFSET_MAX: Final = limits.segment_relative_offset_max
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1


def clamp_int64(value: int) -> int:
    """value limited to int64; search keys are int32 or int64, so order is unchanged."""
    return _INT64_MIN if value < _INT64_MIN else _INT64_MAX if value > _INT64_MAX else value


class MappedIndex:
    """An index file of ENTRY_BYTES-sized entries, mapped while open (see the module doc)."""

    ENTRY_BYTES: ClassVar[int]
    # Slots kept back from is_full, for the entry a roll or close adds (the time index's one).
    RESERVED_SLOTS: ClassVar[int] = 0

    __slots__ = (
        "_base_offset",
        "_closed",
        "_dirty",
        "_entries",
        "_fs",
        "_handle",
        "_length",
        "_max_index_bytes",
        "_path",
        "_writable",
    )

    def __init__(
        self,
        fs: FileSystem,
        path: str,
        base_offset: int,
        *,
        max_index_bytes: int = INDEX_BYTES_DEFAULT,
        writable: bool = True,
        missing_ok: bool = False,
        hold_handle: bool = True,
    ) -> None:
        """Open the index file at path, creating and preallocating it if it is missing and
        writable. ValueError if a new file could not hold one entry; FileNotFoundError if it
        is missing and not writable, unless missing_ok (then it reads as no entries: index
        files are created lazily, and retention may remove them under an offline reader);
        OSError from the file system.

        hold_handle=False (a writable index of an inactive segment, opened for lookups): the
        file is closed once mapped, since the mapping keeps a descriptor of its own (Python's
        mmap duplicates the one it maps), and opened again by the first change; the caller
        vouches that the file is durable as it is (the first flush syncs nothing)."""
        self._fs = fs
        self._path = path
        self._base_offset = base_offset
        self._max_index_bytes = max_index_bytes
        self._writable = writable
        self._entries = _index.IndexEntries(self.ENTRY_BYTES)
        self._handle: FileHandle | None = None
        self._length = 0
        # Changed since the last flush (unknown at open: the first flush syncs). Set by
        # every change of the entries or the file; flush() syncs only when it is set.
        self._dirty = hold_handle
        self._closed = False
        if writable:
            self._open_writable()
            if not hold_handle and self._handle is not None:
                handle, self._handle = self._handle, None
                handle.close()
        else:
            self._open_read_only(missing_ok)
        self._refresh_last()

    def _refresh_last(self) -> None:
        """Refresh what a subclass caches of the last entry: called once the entries are
        loaded, truncated or remapped."""

    def _open_writable(self) -> None:
        created = not self._fs.exists(self._path)
        if created and self._max_index_bytes < self.ENTRY_BYTES:
            raise ValueError(f"max_index_bytes {self._max_index_bytes} cannot hold one entry")
        handle = self._fs.open(self._path, create=True)
        try:
            if created:
                handle.truncate(self._rounded(self._max_index_bytes))
            length = handle.size()
            count = 0 if created else self._entries_claimed(length)
            self._entries.attach(self._map(handle, length), count)
        except BaseException:
            handle.close()
            raise
        self._handle = handle
        self._length = length

    def _entries_claimed(self, length: int) -> int:
        """The entries an existing file of `length` bytes is taken to hold: all of them, as
        in Kafka (§5.6), unless it is longer than any index this configuration writes. Such a
        size is a lie (a sparse or forged file, or a file of another configuration) and none
        of it is believed: its entries would otherwise be copied or checked whole by a resize
        or a sanity check, costing the gigabytes it claims. Lookups then scan the log, and
        the file is cut back when it is next resized."""
        if length > self._rounded(self._max_index_bytes):
            return 0
        return length // self.ENTRY_BYTES

    def _open_read_only(self, missing_ok: bool) -> None:
        try:
            handle = self._fs.open(self._path, read_only=True)
        except (FileNotFoundError, IsADirectoryError):
            # A directory in the index's place is a stray, no index: missing_ok readers
            # scan the .log instead.
            if not missing_ok:
                raise
            self._entries.attach(b"", 0)
            return
        try:
            length = handle.size()
            image = self._read_entries_in_use(handle, length)
        finally:
            handle.close()
        self._length = length
        self._entries.attach(image, len(image) // self.ENTRY_BYTES)

    def _read_entries_in_use(self, handle: FileHandle, length: int) -> bytes:
        """The entries in use at the start of the file, read a chunk at a time; reading stops
        at the first chunk holding a slot that breaks the order (_entries_in_use), so neither
        the zeroed tail of a preallocated file nor the holes of a sparse one are read whole.
        Each chunk is judged together with the entry before it, so the order is checked
        across chunk boundaries exactly as over the whole file."""
        chunk_bytes = self._rounded(limits.file_read_chunk_bytes)
        end = self._rounded(length)
        image = bytearray()
        position = 0
        while position < end:
            want = min(chunk_bytes, end - position)
            chunk = handle.pread(want, position)
            chunk = chunk[: self._rounded(len(chunk))]  # a file cut under the read
            previous = bytes(image[-self.ENTRY_BYTES :])
            in_use = self._entries_in_use(previous + chunk) - len(previous) // self.ENTRY_BYTES
            image += chunk[: in_use * self.ENTRY_BYTES]
            if in_use * self.ENTRY_BYTES < want:
                break
            position += want
        return bytes(image)

    def _entries_in_use(self, image: bytes) -> int:
        """How many leading entries of a file read by pread are real entries. The owner's
        active segment keeps its index file preallocated, so a reader in another process sees
        zeroed slots after the last entry; each index type knows where its order breaks."""
        return len(image) // self.ENTRY_BYTES

    def _rounded(self, size: int) -> int:
        return size - size % self.ENTRY_BYTES

    @staticmethod
    def _map(handle: FileHandle, size: int) -> Buffer:
        # mmap cannot map an empty region; an empty index needs no bytes to search.
        return handle.map(size) if size > 0 else bytearray()

    def _require_open(self) -> None:
        if not self._writable:
            raise io.UnsupportedOperation(f"index {self._path} was opened read-only")
        if self._closed:
            raise ValueError(f"index {self._path} is closed")

    def _require_handle(self) -> FileHandle:
        """The file's handle, for a change: opened again if hold_handle=False closed it."""
        self._require_open()
        if self._handle is None:
            self._handle = self._fs.open(self._path)
        return self._handle

    def _relative(self, offset: int) -> int:
        """offset - base as stored; IndexOffsetOverflowError outside 0 .. 2**31 - 1."""
        relative = offset - self._base_offset
        if relative < 0 or relative > RELATIVE_OFFSET_MAX:
            raise IndexOffsetOverflowError(
                f"offset {offset} cannot be stored relative to base offset "
                f"{self._base_offset} in {self._path}"
            )
        return relative

    @property
    def path(self) -> str:
        return self._path

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def max_index_bytes(self) -> int:
        """The size reset() and a new file get (segment.index.bytes)."""
        return self._max_index_bytes

    @property
    def entries(self) -> int:
        return self._entries.count

    @property
    def max_entries(self) -> int:
        """Slots in the file as it is now sized: length // entry size."""
        return self._entries.capacity

    @property
    def is_full(self) -> bool:
        """No slot is left but the RESERVED_SLOTS (eoslog._ext.segment_core's roll rule
        reads the same from entry_table)."""
        return self._entries.count >= self._entries.capacity - self.RESERVED_SLOTS

    @property
    def entry_table(self) -> _index.IndexEntries:
        """The entries' table (count, capacity), the same object for the index's lifetime:
        what a segment's roll rule watches (segment_core.SegmentCore.watch_indexes)."""
        return self._entries

    @property
    def length(self) -> int:
        """The file's length in bytes when opened or last resized."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """The bytes the entries use (Kafka's sizeInBytes)."""
        return self._entries.count * self.ENTRY_BYTES

    def _entries_below(self, key: int, column: int, offset: int) -> int:
        """How many entries have their offset column (`column` of an entry, searched as `key`)
        below `offset`: the entries a truncation to `offset` keeps (an entry at it goes)."""
        relative_target = clamp_int64(offset - self._base_offset)
        slot = self._entries.search(key, relative_target)
        if slot < 0:
            return 0
        return slot if self._entries.entry(slot)[column] == relative_target else slot + 1

    def _truncate_to_entries(self, count: int) -> None:
        """Keep the first count entries."""
        self._require_handle()
        self._dirty = True
        self._entries.truncate(count)
        self._refresh_last()

    def truncate(self) -> None:
        """Drop every entry (the file keeps its size)."""
        self._truncate_to_entries(0)

    def resize(self, new_size: int) -> bool:
        """Give the file new_size bytes rounded down to a multiple of the entry size and map
        them; False if that is its length already. Entries and position are kept: ValueError
        if the new size cannot hold them (Kafka fails there too, after changing the file)."""
        self._require_open()
        rounded = self._rounded(new_size)
        if rounded == self._length:
            return False
        handle = self._require_handle()
        if rounded < self.size_in_bytes:
            raise ValueError(
                f"cannot resize {self._path} to {rounded} bytes: it holds "
                f"{self.entries} entries ({self.size_in_bytes} bytes)"
            )
        count = self._entries.count
        self._dirty = True
        # No mapping may live while the file changes size: readers answer from a copy of the
        # entries meanwhile, and the mapping goes (unmapped as its last reference drops).
        self._entries.attach(self._entries.copy(), count)
        try:
            handle.truncate(rounded)
        except BaseException:
            self._entries.attach(self._map(handle, self._length), count)
            raise
        self._length = rounded
        self._entries.attach(self._map(handle, rounded), count)
        self._refresh_last()
        return True

    def reset(self) -> None:
        """Drop every entry and size the file to max_index_bytes (recovery's starting point)."""
        self.truncate()
        self.resize(self._max_index_bytes)

    def trim_to_valid_size(self) -> None:
        """Cut the file to its entries, so that reopening it finds exactly these (§5.6)."""
        if self._writable and not self._closed:
            self.resize(self.size_in_bytes)

    def flush(self) -> None:
        """Make the entries durable: writes through the mapping are synced with the file.
        Nothing to do when nothing changed since the last flush (most appends add no index
        entry). The flag is cleared before the sync, so a change racing with it is synced
        by the next flush."""
        if self._writable and not self._closed and self._dirty:
            handle = self._require_handle()
            self._dirty = False
            try:
                handle.sync()
            except BaseException:
                self._dirty = True
                raise

    def _release(self) -> None:
        self._closed = True
        self._entries.detach()
        if self._handle is not None:
            handle, self._handle = self._handle, None
            handle.close()

    def release_file(self) -> None:
        """Unmap and close the file but keep answering lookups, from an in-memory copy of
        the entries in use: for an index its owner drops (a segment going cold) while
        lookups on other threads may still hold it. Changes are refused from then on, as
        after close; the owner opens the file again for its next use. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._entries.is_attached:
            self._entries.attach(self._entries.copy(), self._entries.count)
        if self._handle is not None:
            handle, self._handle = self._handle, None
            handle.close()

    def close(self) -> None:
        """Trim the file to its entries, then unmap and close it. Idempotent."""
        self.trim_to_valid_size()
        self._release()

    def delete(self) -> bool:
        """Unmap and close without trimming (the bytes are going), then remove the file if it
        exists. True if it removed one (Kafka's deleteIfExists)."""
        self._release()
        if not self._fs.exists(self._path):
            return False
        self._fs.unlink(self._path)
        return True

    def rename_to(self, path: str) -> None:
        """Rename the file (atomically replacing path); the mapping stays valid."""
        self._fs.rename(self._path, path)
        self._path = path

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
