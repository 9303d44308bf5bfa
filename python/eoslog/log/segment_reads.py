"""What every reader of a segment's files shares, in the owner process or outside it:
locating a batch by offset (through the offset index, each entry checked against the batch it
names), scanning batch headers, and finding a record by timestamp (FORMAT.md §5.8, §5.9).

LogSegment (the owner's segment) and SegmentFiles (eoslog.log.segment_files, an offline
reader's read-only view) both build on SegmentReads. Every read here preads and maps nothing.

Thread safety: the methods read only bytes below `size` and published index entries, so they
may run in any thread concurrently with the owner's appends.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np

from eoslog._ext import scan
from eoslog.errors import CorruptRecordError, KafkaStorageError
from eoslog.log.time_index import NO_TIMESTAMP
from eoslog.record import codec, layout
from eoslog.record.status import TRUNCATED_BATCH

if TYPE_CHECKING:
    from eoslog.fs import FileHandle
    from eoslog.log.offset_index import OffsetIndex
    from eoslog.log.time_index import TimeIndex

LOG_SUFFIX: Final = ".log"
INDEX_SUFFIX: Final = ".index"
TIME_INDEX_SUFFIX: Final = ".timeindex"
TXN_INDEX_SUFFIX: Final = ".txnindex"
SNAPSHOT_SUFFIX: Final = ".snapshot"
DELETED_SUFFIX: Final = ".deleted"
# How much of the .log a lookup reads at a time after the offset index narrowed the search:
# index entries are every index.interval.bytes (4 KiB by default), so one read usually holds
# the batch sought.
SCAN_CHUNK_BYTES: Final = 64 * 1024
# A lookup's first read: the offset index points within about index.interval.bytes (4 KiB)
# of the batch sought, so 8 KiB usually holds it or at least its header; a larger batch is
# then read exactly, instead of after a wasted full chunk.
LOOKUP_CHUNK_BYTES: Final = 8 * 1024

# A batch header's base offset (int64, first) and last offset delta (int32), read in one call
# at layout's offsets: a read's hot path reads them, and int.from_bytes costs several times more.
_OFFSET_FIELDS: Final = struct.Struct(
    f">q{layout.LAST_OFFSET_DELTA_OFFSET - layout.BASE_OFFSET_OFFSET - 8}xi"
)


def _base_offset(buffer: bytes | memoryview, at: int) -> int:
    base_offset: int = _OFFSET_FIELDS.unpack_from(buffer, at + layout.BASE_OFFSET_OFFSET)[0]
    return base_offset


def _last_offset(buffer: bytes | memoryview, at: int) -> int:
    base_offset, last_offset_delta = _OFFSET_FIELDS.unpack_from(
        buffer, at + layout.BASE_OFFSET_OFFSET
    )
    return int(base_offset + last_offset_delta)


@dataclass(frozen=True)
class BatchPosition:
    """Where a batch lies in a segment's .log: what a read or truncation needs."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int


def file_name(base_offset: int, suffix: str) -> str:
    """Kafka's file name: the offset as 20 zero-padded digits, then the suffix."""
    return f"{base_offset:020d}{suffix}"


# The suffixes of the files named by a base offset (Kafka's LogFileUtils).
SEGMENT_FILE_SUFFIXES: Final = (
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    SNAPSHOT_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
)
# Exactly 20 decimal digits, then one known suffix: nothing else is a segment file. ASCII only,
# since \d would also match other scripts' digits.
_SEGMENT_FILE_NAME = re.compile(
    r"([0-9]{20})(" + "|".join(re.escape(suffix) for suffix in SEGMENT_FILE_SUFFIXES) + ")"
)
# Offsets are int64 (FORMAT.md): 20 digits can spell values past it.
_OFFSET_MAX: Final = (1 << 63) - 1


def parse_file_name(name: str) -> tuple[int, str] | None:
    """(base offset, suffix) of a segment file's name (`file_name`'s inverse); None for any
    other name: other digit counts, unknown or extra suffixes, signs, offsets past int64."""
    match = _SEGMENT_FILE_NAME.fullmatch(name)
    if match is None:
        return None
    base_offset = int(match.group(1))
    if base_offset > _OFFSET_MAX:
        return None
    return base_offset, match.group(2)


def offset_from_file_name(name: str) -> int:
    """The base offset in a segment file's name; KafkaStorageError for a name that is not one
    (callers that list a directory filter with parse_file_name first)."""
    parsed = parse_file_name(name)
    if parsed is None:
        raise KafkaStorageError(
            f"{name!r} is not a segment file name (20 decimal digits, at most 2^63-1, "
            f"then one of {', '.join(SEGMENT_FILE_SUFFIXES)})"
        )
    return parsed[0]


class SegmentReads:
    """Lookups over one segment's .log and indexes. A subclass sets the attributes below and
    provides `log` (the .log's open handle)."""

    base_offset: int
    directory: str
    # The logical end of the .log: everything below it is whole batches.
    size: int
    offset_index: OffsetIndex
    time_index: TimeIndex
    # Set when a lookup found an index entry that its batch contradicts; lookups then scan
    # from the segment start.
    index_suspect: bool

    @property
    def log(self) -> FileHandle:
        raise NotImplementedError

    def path(self, suffix: str) -> str:
        return os.path.join(self.directory, file_name(self.base_offset, suffix))

    def read_bytes(self, position: int, size: int) -> bytes:
        return self.log.pread(size, position)

    def _batches_at(
        self, position: int, end: int, chunk_bytes: int = SCAN_CHUNK_BYTES
    ) -> tuple[np.ndarray, bytes]:
        """The whole batches found by one read at `position` (positions relative to it), and
        the bytes read. Reads a chunk; when the next batch is larger than a chunk, reads
        exactly that batch instead. Empty at the end, at a torn tail or at damage."""
        chunk = self.log.pread(min(chunk_bytes, end - position), position)
        infos, _, status = scan.scan_batches(chunk, verify_crc=False)
        if len(infos) == 0 and status == 0 and len(chunk) >= 12:
            claimed = 12 + int.from_bytes(chunk[8:12], "big", signed=True)
            if len(chunk) < claimed <= end - position:
                chunk = self.log.pread(claimed, position)
                infos, _, status = scan.scan_batches(chunk, verify_crc=False)
        return infos, chunk

    def scan_from(
        self, position: int, end: int | None = None, chunk_bytes: int = SCAN_CHUNK_BYTES
    ) -> np.ndarray:
        """The batches (scan.BATCH_INFO rows, positions relative to this segment) whole in
        [position, end) of the .log, read chunk_bytes at a time (a walk over a whole segment
        wants large chunks: with the default, every batch larger than a chunk is read twice).
        Stops quietly at damage or a torn tail: recovery, not reading, judges those."""
        end = self.size if end is None else end
        rows = []
        while position < end:
            infos, _ = self._batches_at(position, end, chunk_bytes)
            if len(infos) == 0:
                break
            infos["position"] += position
            rows.append(infos)
            position = int(infos["position"][-1]) + int(infos["size"][-1])
        return np.concatenate(rows) if rows else np.empty(0, dtype=scan.BATCH_INFO)

    def _indexed_position(self, offset: int, end: int) -> tuple[int, bytes | None]:
        """Where a scan for `offset` may start, by the offset index, and the first chunk read
        there. An entry (o, p) says the batch at p ends at offset o; it is checked against that
        batch's header, which the chunk holds anyway, before it is believed. The indexes of
        segments below the recovery point are not rebuilt at open, and a damaged entry would
        otherwise send the scan into the middle of a batch or past the offset sought."""
        entry_offset, position = self.offset_index.lookup(offset)
        if position == 0:
            return 0, None
        chunk = self.log.pread(min(LOOKUP_CHUNK_BYTES, max(end - position, 0)), position)
        if len(chunk) >= layout.HEADER_SIZE and _last_offset(chunk, 0) == entry_offset:
            return position, chunk
        self.index_suspect = True
        return 0, None  # a wrong entry: scan the segment from its start instead

    def scan_position(self, offset: int) -> int:
        """A batch boundary at or below the batch holding `offset`, by the checked index."""
        return self._indexed_position(offset, self.size)[0]

    def _checked_time_entry(self, entry: tuple[int, int]) -> tuple[int, int]:
        """A time-index entry (t, o), believed only if the batch ending at offset o has max
        timestamp t, as the entry claims; otherwise the "no entry" answer, from which
        searches scan the whole segment."""
        timestamp, offset = entry
        if timestamp == NO_TIMESTAMP:
            return entry
        found = self.translate_offset(offset)
        if found is not None and found.last_offset == offset and found.max_timestamp == timestamp:
            return entry
        self.index_suspect = True
        return NO_TIMESTAMP, self.base_offset

    def _locate(self, offset: int, end: int) -> tuple[int, bytes, int, int] | None:
        """The first batch whose last offset is >= offset (FORMAT.md §5.9): (its position,
        a buffer holding it, where it starts in that buffer, its size), or None if no batch
        below `end` holds such an offset. Batches below the target are skipped by their
        headers, so a lookup reads little besides the batch it returns. Bytes below `end`
        that cannot be whole batches raise CorruptRecordError: everything there was written
        (or recovered) as whole batches."""
        position, chunk = self._indexed_position(offset, end)
        while position < end:
            if chunk is None or position + len(chunk) > end:
                chunk = self.log.pread(min(LOOKUP_CHUNK_BYTES, end - position), position)
            status, at, size = scan.find_batch(chunk, offset)
            if status == TRUNCATED_BATCH and at > 0:
                position += at  # the headers in this read were all below the target
                chunk = None
                continue
            if status != 0 or position + at + size > end:
                raise self.corruption(position + at, "no whole batch starts there")
            if at + size <= len(chunk):
                return position + at, chunk, at, size
            batch = self.log.pread(size, position + at)
            if len(batch) < size:  # the file is shorter than the log's end: cut under us
                raise self.corruption(position + at + len(batch), "the file ends in a batch")
            return position + at, batch, 0, size
        return None

    def corruption(self, position: int, what: str) -> CorruptRecordError:
        path = self.path(LOG_SUFFIX)
        return CorruptRecordError(
            f"{path} is damaged at byte {position} ({what}). To discard everything from there "
            f"on, close the log and run: eoslog.repair_truncate({path!r}, {position})"
        )

    def translate_offset(self, offset: int, end: int | None = None) -> BatchPosition | None:
        """The first batch whose last offset is >= offset (FORMAT.md §5.9), or None."""
        found = self._locate(offset, self.size if end is None else end)
        if found is None:
            return None
        position, buffer, at, size = found
        header = codec.read_header(buffer, at)
        return BatchPosition(
            position=position,
            size=size,
            base_offset=header.base_offset,
            last_offset=header.last_offset,
            max_timestamp=header.max_timestamp,
        )

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """The first record with timestamp >= timestamp and offset >= starting_offset:
        (offset, its timestamp), or None (FORMAT.md §5.9)."""
        _, indexed_offset = self._checked_time_entry(self.time_index.lookup(timestamp))
        for row in self.scan_from(self.scan_position(max(indexed_offset, starting_offset))):
            if int(row["max_timestamp"]) < timestamp:
                continue
            batch = self.log.pread(int(row["size"]), int(row["position"]))
            for record in codec.batch_records(batch):
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return record.offset, record.timestamp
        return None

    def next_offset(self) -> int:
        """One past the last offset stored here; the base offset when empty."""
        infos = self.scan_from(self.scan_position(1 << 62))
        return int(infos["last_offset"][-1]) + 1 if len(infos) else self.base_offset

    def scan_largest_timestamp(self) -> tuple[int, int]:
        """The time index's last entry, then the batches after it (Kafka's
        loadLargestTimestamp): entries are sparse, so later batches may hold a larger one."""
        timestamp, offset = self._checked_time_entry(self.time_index.last_entry)
        for row in self.scan_from(self.scan_position(offset)):
            if int(row["max_timestamp"]) > timestamp:
                timestamp, offset = int(row["max_timestamp"]), int(row["last_offset"])
        return timestamp, offset
