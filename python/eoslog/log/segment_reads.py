"""What every reader of a segment's files shares, in the owner process or outside it:
locating a batch by offset (through the offset index, each entry checked against the batch it
names), scanning batch headers, and finding a record by timestamp (docs/format.md §5.8, §5.9).

LogSegment (the owner's segment) and SegmentFiles (eoslog.log.partition_view, an offline
reader's read-only view) both build on SegmentReads. Every read here preads and maps nothing.

Thread safety: the methods read only bytes below `size` and published index entries, so they
may run in any thread concurrently with the owner's appends.
"""

from __future__ import annotations

import bisect
import functools
import os
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np

from eoslog import limits
from eoslog._ext import scan
from eoslog.errors import CorruptRecordError, KafkaStorageError
from eoslog.fs import descriptor_of
from eoslog.log.time_index import NO_TIMESTAMP
from eoslog.log.txn_index import BatchAt, LoggedBatch
from eoslog.record import codec, control, layout, primitives
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
# The cleaner writes a cleaned segment beside the original under this suffix, then renames it
# over the .log (eoslog.log.compactor); an open deletes one a crash left.
CLEANED_SUFFIX: Final = ".cleaned"

# A batch header's base offset (int64, first) and last offset delta (int32), read in one call
# at layout's offsets: a read's hot path reads them, and int.from_bytes costs several times more.
_OFFSET_FIELDS: Final = struct.Struct(
    f">q{layout.LAST_OFFSET_DELTA_OFFSET - layout.BASE_OFFSET_OFFSET - 8}xi"
)


def _batches_running_past(chunk: bytes, remaining: int) -> list[int]:
    """The positions in `chunk` whose header (whole in the chunk) has magic 2 and claims a
    batch that runs past the chunk but fits in the `remaining` bytes from the chunk's start
    and within limits.batch_bytes_max: the candidates find_valid_batch cannot judge from the
    chunk alone."""
    data = np.frombuffer(chunk, dtype=np.uint8)
    magic = data[layout.MAGIC_OFFSET : len(data) - layout.HEADER_SIZE + 1 + layout.MAGIC_OFFSET]
    starts = np.flatnonzero(magic == layout.MAGIC_V2)
    at = starts + layout.BATCH_LENGTH_OFFSET
    length = (
        (data[at].astype(np.int64) << 24)
        | (data[at + 1].astype(np.int64) << 16)
        | (data[at + 2].astype(np.int64) << 8)
        | data[at + 3].astype(np.int64)
    )
    size = layout.LOG_OVERHEAD + length
    fits = (
        (length >= layout.BATCH_LENGTH_MIN)
        & (length <= limits.batch_bytes_max)
        & (starts + size > len(data))
        & (starts + size <= remaining)
    )
    return [int(at) for at in starts[fits]]


def _base_offset(buffer: bytes | memoryview, at: int) -> int:
    base_offset: int = _OFFSET_FIELDS.unpack_from(buffer, at + layout.BASE_OFFSET_OFFSET)[0]
    return base_offset


def last_offset_at(buffer: bytes | memoryview, at: int) -> int:
    """The last offset of the batch whose header starts at byte `at` of `buffer`."""
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
# Offsets are int64 (docs/format.md): 20 digits can spell values past it.
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
    provides `log` (the .log's open handle), `offset_index` and `time_index` (the owner's
    open on first use)."""

    base_offset: int
    directory: str
    # The logical end of the .log: everything below it is whole batches.
    size: int
    # Set when a lookup found an index entry that its batch contradicts; lookups then scan
    # from the segment start.
    index_suspect: bool

    @property
    def log(self) -> FileHandle:
        raise NotImplementedError

    @property
    def offset_index(self) -> OffsetIndex:
        raise NotImplementedError

    @property
    def time_index(self) -> TimeIndex:
        raise NotImplementedError

    def path(self, suffix: str) -> str:
        if suffix == LOG_SUFFIX:
            return self.log_path
        return os.path.join(self.directory, file_name(self.base_offset, suffix))

    @functools.cached_property
    def log_path(self) -> str:
        """The .log's path, which every read names (FetchResult.file): built once, since a
        segment's directory and base offset never change."""
        return os.path.join(self.directory, file_name(self.base_offset, LOG_SUFFIX))

    def read_bytes(self, position: int, size: int) -> bytes:
        return self.log.pread(size, position)

    def claimed_batch_bytes(self, chunk: bytes, position: int, end: int) -> int | None:
        """The size the batch header at the start of `chunk` (read at `position`) claims, if
        that many bytes may be read at once: the claim must fit below `end` and within
        limits.batch_bytes_max, and a claim larger than limits.file_read_chunk_bytes must
        carry a matching CRC, computed a chunk at a time before the batch is read whole. A
        length field is never trusted for an allocation before these checks: a forged one over
        a sparse or zero-filled region would otherwise cost its full size. None otherwise
        (the caller treats the bytes as a batch it cannot read: damage or a torn tail)."""
        if len(chunk) < layout.LOG_OVERHEAD:
            return None
        claimed = layout.batch_size_at(chunk)
        if not layout.HEADER_SIZE <= claimed <= end - position:
            return None
        if claimed > layout.LOG_OVERHEAD + limits.batch_bytes_max:
            return None
        if claimed > limits.file_read_chunk_bytes and not self.batch_crc_matches(position, claimed):
            return None
        return claimed

    def batch_crc_matches(self, position: int, size: int) -> bool:
        """Whether the `size` bytes at `position` hold a batch whose CRC-32C matches its
        header, computed over reads of limits.file_read_chunk_bytes (memory stays one chunk,
        whatever the size)."""
        header = self.log.pread(layout.ATTRIBUTES_OFFSET, position)
        if len(header) < layout.ATTRIBUTES_OFFSET:
            return False
        expected = int.from_bytes(header[layout.CRC_OFFSET : layout.ATTRIBUTES_OFFSET], "big")
        crc = 0
        at = position + layout.ATTRIBUTES_OFFSET
        while at < position + size:
            piece = self.log.pread(min(limits.file_read_chunk_bytes, position + size - at), at)
            if not piece:
                return False  # the file ends inside the batch
            crc = primitives.crc32c(piece, crc)
            at += len(piece)
        return crc == expected

    def valid_batch_after(self, position: int, end: int) -> bool:
        """Whether a whole batch with a valid CRC starts anywhere in (position, end): what
        scan.find_valid_batch answers over those bytes, read limits.file_read_chunk_bytes at
        a time (consecutive reads overlap by a header, so no start is missed); a candidate
        batch running past its read is checked by batch_crc_matches, never read whole."""
        start = position + 1
        while end - start >= layout.HEADER_SIZE:
            chunk = self.log.pread(min(limits.file_read_chunk_bytes, end - start), start)
            if len(chunk) < layout.HEADER_SIZE:
                return False  # the file was cut under the read
            if scan.find_valid_batch(chunk, 0) < len(chunk):
                return True
            for at in _batches_running_past(chunk, end - start):
                if self.batch_crc_matches(start + at, layout.batch_size_at(chunk, at)):
                    return True
            start += len(chunk) - layout.HEADER_SIZE + 1
        return False

    def scan_chunk(
        self, position: int, end: int, chunk_bytes: int, *, verify_crc: bool
    ) -> tuple[np.ndarray, int, int, bytes]:
        """scan.scan_batches over one read at `position` (below `end`): a chunk of
        chunk_bytes, or, when the next batch is larger than a chunk, exactly that batch. The
        larger read happens only once claimed_batch_bytes has checked the batch's length
        field; otherwise the chunk is scanned as it is, a batch running past it (damage or a
        torn tail, for the caller to judge). Returns (the batches' rows, positions relative
        to `position`; where the scan stopped; its status; the bytes read)."""
        chunk = self.read_bytes(position, min(chunk_bytes, end - position))
        infos, stop, status = scan.scan_batches(chunk, verify_crc=verify_crc)
        if len(infos) == 0 and status == 0:
            claimed = self.claimed_batch_bytes(chunk, position, end)
            if claimed is not None and len(chunk) < claimed:
                chunk = self.read_bytes(position, claimed)
                infos, stop, status = scan.scan_batches(chunk, verify_crc=verify_crc)
        return infos, stop, status, chunk

    def scan_from(
        self,
        position: int,
        end: int | None = None,
        chunk_bytes: int = limits.lookup_scan_chunk_bytes,
    ) -> np.ndarray:
        """The batches (scan.BATCH_INFO rows, positions relative to this segment) whole in
        [position, end) of the .log, read chunk_bytes at a time (a walk over a whole segment
        wants large chunks: with the default, every batch larger than a chunk is read twice).
        Stops quietly at damage or a torn tail: recovery, not reading, judges those."""
        end = self.size if end is None else end
        rows = []
        while position < end:
            infos, _, _, _ = self.scan_chunk(position, end, chunk_bytes, verify_crc=False)
            if len(infos) == 0:
                break
            infos["position"] += position
            rows.append(infos)
            position = int(infos["position"][-1]) + int(infos["size"][-1])
        return np.concatenate(rows) if rows else np.empty(0, dtype=scan.BATCH_INFO)

    def scan_headers_from(
        self,
        position: int,
        end: int | None = None,
        chunk_bytes: int = limits.lookup_scan_chunk_bytes,
    ) -> np.ndarray:
        """scan_from's rows, read from the batch headers alone when the .log is a local file:
        61 bytes a batch, the records skipped by the batch length (scan.scan_headers), so a
        walk of a segment's headers (read_committed's replay) costs its batch count, not its
        size. Any other handle is read as scan_from reads it (on object storage every read is
        a request: whole chunks cost fewer than a request per header)."""
        end = self.size if end is None else end
        fd = descriptor_of(self.log)
        if fd is None:
            return self.scan_from(position, end, chunk_bytes)
        rows = []
        while position < end:
            infos, position, _ = scan.scan_headers(fd, position, end)
            if len(infos) == 0:
                break  # damage or a torn tail: recovery, not reading, judges those
            rows.append(infos)
        return np.concatenate(rows) if rows else np.empty(0, dtype=scan.BATCH_INFO)

    def index_lookup(self, offset: int) -> tuple[int, int]:
        """The offset index's (offset, position) to start a search for `offset` at; a search
        from the segment's start (a consumer reading from the beginning) needs no index, so
        it does not open one (the owner opens indexes on first use)."""
        if offset <= self.base_offset:
            return self.base_offset, 0
        return self.offset_index.lookup(offset)

    def _indexed_position(self, offset: int, end: int) -> tuple[int, bytes | None]:
        """Where a scan for `offset` may start, by the offset index, and the first chunk read
        there. An entry (o, p) says the batch at p ends at offset o; it is checked against that
        batch's header, which the chunk holds anyway, before it is believed. The indexes of
        segments below the recovery point are not rebuilt at open, and a damaged entry would
        otherwise send the scan into the middle of a batch or past the offset sought."""
        entry_offset, position = self.index_lookup(offset)
        if position == 0:
            return 0, None
        chunk = self.log.pread(
            min(limits.lookup_first_read_bytes, max(end - position, 0)), position
        )
        if len(chunk) >= layout.HEADER_SIZE and last_offset_at(chunk, 0) == entry_offset:
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
        """The first batch whose last offset is >= offset (docs/format.md §5.9): (its position,
        a buffer holding it, where it starts in that buffer, its size), or None if no batch
        below `end` holds such an offset. Batches below the target are skipped by their
        headers, so a lookup reads little besides the batch it returns. Bytes below `end`
        that cannot be whole batches raise CorruptRecordError: everything there was written
        (or recovered) as whole batches."""
        position, chunk = self._indexed_position(offset, end)
        while position < end:
            if chunk is None or position + len(chunk) > end:
                chunk = self.log.pread(
                    min(limits.lookup_first_read_bytes, end - position), position
                )
            status, at, size = scan.find_batch(chunk, offset)
            if status == TRUNCATED_BATCH and at > 0:
                position += at  # the headers in this read were all below the target
                chunk = None
                continue
            if status != 0 or position + at + size > end:
                raise self.corruption(position + at, "no whole batch starts there")
            if at + size <= len(chunk):
                return position + at, chunk, at, size
            if self.claimed_batch_bytes(chunk[at:], position + at, end) != size:
                raise self.corruption(position + at, "the batch there cannot be read whole")
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
        """The first batch whose last offset is >= offset (docs/format.md §5.9), or None."""
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

    def logged_batch(self, offset: int) -> LoggedBatch | None:
        """The header facts of the batch holding `offset` (None when no batch here does), for
        checking a derived file against the log: one checked index lookup and one read.
        CorruptRecordError as _locate."""
        found = self._locate(offset, self.size)
        if found is None:
            return None
        _, buffer, at, _ = found
        header = codec.read_header(buffer, at)
        if header.base_offset > offset:
            return None
        control_type = None
        if header.is_control:
            records = codec.batch_records(buffer, at)
            control_type = control.read_type(records[0].key) if records else None
        return LoggedBatch(
            base_offset=header.base_offset,
            last_offset=header.last_offset,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            transactional=header.is_transactional,
            control_type=control_type,
        )

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """The first record with timestamp >= timestamp and offset >= starting_offset:
        (offset, its timestamp), or None (docs/format.md §5.9)."""
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


def batch_lookup(segments: Sequence[SegmentReads]) -> BatchAt:
    """logged_batch over a partition's segments (oldest first): the batch holding an offset
    in whichever segment's range holds it. Free until first called (an open makes one per
    segment, and most segments have no entry to check)."""
    bases: list[int] = []

    def batch_at(offset: int) -> LoggedBatch | None:
        if not bases:
            bases.extend(segment.base_offset for segment in segments)
        number = bisect.bisect_right(bases, offset) - 1
        return segments[number].logged_batch(offset) if number >= 0 else None

    return batch_at
