"""The transaction index (.txnindex): the aborted transactions whose ABORT marker is in one
segment (docs/format.md §6; Kafka's TransactionIndex and AbortedTxn).

The file is a plain run of 34-byte entries (§6.1) with no header, not preallocated, and only
created when the first entry is appended (§5.1); eoslog removes it when it drops the last entry
(truncate_to, reset), so an empty .txnindex found at open is damage, not "no aborts". Entries
are appended in increasing last_offset order. A read_committed fetch collects the entries
overlapping its offset range from this index and the ones after it (§6.3).

The entries are also kept in memory, as the bytes of the file's whole entries: every search
reads that copy, never the file, so a reader never meets a half-written entry or a closed file
descriptor, and a fetch costs no system call. A partial entry at the end of the file (a write
cut short by a crash) is left out, and the next append overwrites it.

The index is derived from the log and never trusted over it: entry_disagreement is the one
check of an entry against the batches it names, which the owner runs at open
(check_against_log; recovery rebuilds a disagreeing index) and offline readers run before
believing an entry (eoslog.log.partition_view).

Thread safety. One writer, the partition's writer thread, calls append, truncate_to, reset,
flush, close, delete and rename_to. all_entries, collect_aborted, sanity_check and the
properties may run on any thread: each search is one call into eoslog._ext.index over the
in-memory entries, which the writer changes only by adding or dropping whole entries, in one
step each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, NamedTuple

import numpy as np

from eoslog import limits
from eoslog._ext import index as _index
from eoslog.errors import CorruptIndexError, InvalidOffsetError
from eoslog.fs import FileHandle, FileSystem
from eoslog.record import control

# engine/index.h holds the layout; eoslog._ext.index exports it (tests/record/test_layout.py). The
# entry's fields as numpy reads them, for the checks made while the file is read (docs/format.md
# §6.1: a version int16, then four int64, big-endian, unpadded).
ENTRY_BYTES: Final = _index.TXN_ENTRY_BYTES
_ENTRY_DTYPE: Final = _index.TXN_ENTRY_DTYPE
# Whole entries per read of the file (limits.file_read_chunk_bytes rounded down to entries).
_CHUNK_ENTRIES: Final = limits.file_read_chunk_bytes // ENTRY_BYTES


class AbortedTxn(NamedTuple):
    """One aborted transaction (docs/format.md §6.1): its producer, its first offset, the offset
    of its ABORT marker, and the last stable offset when it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        """The 34-byte entry: version 0 (int16), then the four fields as int64."""
        return _index.encode_aborted_txn(*self)

    @classmethod
    def decode(cls, data: bytes) -> AbortedTxn:
        """The entry in exactly 34 bytes; ValueError for another length, CorruptIndexError for
        a version Kafka refuses (its first byte, signed, above 0)."""
        if len(data) != ENTRY_BYTES:
            raise ValueError(
                f"an aborted transaction entry is {ENTRY_BYTES} bytes, got {len(data)}"
            )
        return _index.decode_aborted_txns(data, cls)[0]


class LoggedBatch(NamedTuple):
    """What the log says about the batch holding an offset, as far as a .txnindex entry or a
    producer snapshot names it: read from the batch header (and, for a control batch, its
    one record's key)."""

    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool
    # CONTROL_ABORT (0) or CONTROL_COMMIT (1) for a control batch; None for a data batch or
    # an empty control batch.
    control_type: int | None


# The batch holding an offset, or None when no batch in the log holds it.
BatchAt = Callable[[int], LoggedBatch | None]


def entry_disagreement(entry: AbortedTxn, batch_at: BatchAt, log_start_offset: int) -> str | None:
    """Why the log contradicts a .txnindex entry, or None when it agrees. The one check every
    user of an entry makes (the owner at open, offline readers before believing it): its last
    offset must hold an ABORT marker of its producer, its first offset the start of a
    transactional data batch of that producer (unless retention removed it), and its last
    stable offset cannot lie past the marker (docs/format.md §6.1). Costs two batch lookups."""
    if entry.first_offset < 0:
        # Checked before the retention rule below, which believes any offset under the log
        # start: no offset is negative.
        return f"its first offset {entry.first_offset} is negative"
    if not entry.first_offset <= entry.last_offset:
        return f"its first offset {entry.first_offset} is past its last {entry.last_offset}"
    if entry.last_stable_offset > entry.last_offset + 1:
        return (
            f"its last stable offset {entry.last_stable_offset} lies past its ABORT marker at "
            f"{entry.last_offset}"
        )
    marker = batch_at(entry.last_offset)
    if (
        marker is None
        or marker.base_offset != entry.last_offset
        or marker.producer_id != entry.producer_id
        or marker.control_type != control.ABORT
    ):
        return f"offset {entry.last_offset} holds no ABORT marker of producer {entry.producer_id}"
    if entry.first_offset < log_start_offset:
        return None  # retention removed the transaction's first batch: nothing to compare
    first = batch_at(entry.first_offset)
    if (
        first is None
        or first.base_offset != entry.first_offset
        or first.producer_id != entry.producer_id
        or first.control_type is not None
        or not first.transactional
    ):
        return (
            f"offset {entry.first_offset} starts no transactional batch of producer "
            f"{entry.producer_id}"
        )
    return None


def outcome_conflict(entry: AbortedTxn, batch_at: BatchAt, log_start_offset: int) -> bool:
    """Whether the log contradicts the entry only in the transaction's outcome: the batch at
    its last offset is a COMMIT marker of its producer, and everything else checks out.
    Either file may be the forged one (a marker's type is covered by its batch's CRC, which a
    forger recomputes; an entry has no CRC at all), and neither names anything the other
    lacks, so the log alone cannot decide: the owner refuses to open rather than guess."""

    def marker_read_as_abort(offset: int) -> LoggedBatch | None:
        found = batch_at(offset)
        if (
            offset == entry.last_offset
            and found is not None
            and found.control_type == control.COMMIT
        ):
            return found._replace(control_type=control.ABORT)
        return found

    return (
        entry_disagreement(entry, batch_at, log_start_offset) is not None
        and entry_disagreement(entry, marker_read_as_abort, log_start_offset) is None
    )


class LoadedEntries(NamedTuple):
    """What reading a .txnindex found: the bytes of its whole, well-formed entries, and the
    byte position of the first entry that is not (None when every whole entry is)."""

    image: bytearray
    damaged_at: int | None


def _first_malformed(entries: np.ndarray, previous_last: int | None) -> int:
    """The slot of the first entry that cannot be a real one, or len(entries): first_offset
    above last_offset, or last_offset not above the entry before it (entries are appended in
    increasing last_offset order; a run of zeros, what a sparse or preallocated file reads
    as, breaks that order by its second entry at the latest). An unknown version and an entry
    ending below the segment's base are left for the searches and sanity_check to report,
    as Kafka reports them."""
    last = entries["last_offset"]
    bad = entries["first_offset"] > last
    bad[1:] |= last[1:] <= last[:-1]
    if previous_last is not None and len(last):
        bad[0] |= bool(last[0] <= previous_last)
    found = np.flatnonzero(bad)
    return int(found[0]) if len(found) else len(entries)


def read_entries(handle: FileHandle) -> LoadedEntries:
    """The whole entries of the open .txnindex `handle`, read limits.file_read_chunk_bytes at
    a time and checked as they are read (_first_malformed); reading stops at the first
    malformed entry, so a sparse or lying file costs at most one chunk over its real entries,
    whatever size it claims. A partial entry at the end (a write cut short) is left out and
    is no damage. OSError from the file system."""
    size = handle.size()
    image = bytearray()
    previous_last: int | None = None
    position = 0
    while position + ENTRY_BYTES <= size:
        want = min(_CHUNK_ENTRIES, (size - position) // ENTRY_BYTES) * ENTRY_BYTES
        chunk = handle.pread(want, position)
        whole = len(chunk) - len(chunk) % ENTRY_BYTES  # a file cut under the read
        entries = np.frombuffer(chunk, dtype=_ENTRY_DTYPE, count=whole // ENTRY_BYTES)
        good = _first_malformed(entries, previous_last)
        image += chunk[: good * ENTRY_BYTES]
        if good < len(entries):
            return LoadedEntries(image, position + good * ENTRY_BYTES)
        if whole < want:
            break
        if good:
            previous_last = int(entries["last_offset"][good - 1])
        position += whole
    return LoadedEntries(image, None)


class TransactionIndex:
    """The aborted transactions of one segment; see the module doc for the contract."""

    __slots__ = (
        "_base_offset",
        "_damaged_at",
        "_dirty",
        "_emptied",
        "_fs",
        "_handle",
        "_image",
        "_last_offset",
        "_partial_at",
        "_path",
    )

    def __init__(self, fs: FileSystem, path: str, base_offset: int) -> None:
        """Open the index at path if the file exists (appends go after its whole entries);
        otherwise it stays a missing file until the first append. The file is read in
        bounded chunks up to its first malformed entry (read_entries), which sanity_check
        then reports, so that recovery rebuilds the index from the log."""
        self._fs = fs
        self._path = path
        self._base_offset = base_offset
        self._handle: FileHandle | None = None
        # Changed since the last flush (unknown at open: the first flush syncs); flush()
        # syncs only when it is set.
        self._dirty = True
        self._image = bytearray()
        self._last_offset: int | None = None
        self._damaged_at: int | None = None
        # Where a partial entry ends the file, if one does (only known at open).
        self._partial_at: int | None = None
        # Whether the file exists but is empty, which eoslog never leaves (it creates the file
        # with its first entry and removes it when dropping its last).
        self._emptied = False
        if fs.exists(path):
            handle = self._open()
            self._emptied = handle.size() == 0
            self._image, self._damaged_at = read_entries(handle)
            if self._damaged_at is None and handle.size() > len(self._image):
                self._partial_at = len(self._image)
        # As in Kafka, the order check starts afresh on open: it covers the entries appended
        # since (recovery resets the index before it rebuilds it, and truncate_to restores it).

    def _open(self) -> FileHandle:
        if self._handle is None:
            self._handle = self._fs.open(self._path, create=True)
        return self._handle

    def _entry(self, slot: int) -> AbortedTxn:
        """Entry slot, which a search has already read (and so checked)."""
        start = slot * ENTRY_BYTES
        return AbortedTxn.decode(bytes(self._image[start : start + ENTRY_BYTES]))

    def _corrupt(self, error: CorruptIndexError) -> CorruptIndexError:
        return CorruptIndexError(f"transaction index {self._path}: {error}")

    @property
    def path(self) -> str:
        return self._path

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def entries(self) -> int:
        return len(self._image) // ENTRY_BYTES

    @property
    def is_empty(self) -> bool:
        return not self._image

    def entries_ending_below(self, offset: int) -> int:
        """How many entries have last_offset < offset (the aborted-transaction checkpoint's
        count, eoslog.log.checkpoints). CorruptIndexError for an entry of an unknown version."""
        try:
            return int(_index.count_aborted_txns_ending_below(self._image, offset))
        except CorruptIndexError as error:
            raise self._corrupt(error) from None

    def append(self, txn: AbortedTxn) -> None:
        """Write the entry at the end of the file (creating it on the first append).

        InvalidOffsetError unless txn.last_offset is above the previous entry's (Kafka's
        IllegalArgumentException); OSError from the file system. On any error the index in
        memory is unchanged; a write cut short leaves bytes the next append overwrites."""
        if self._last_offset is not None and txn.last_offset <= self._last_offset:
            raise InvalidOffsetError(
                f"aborted transactions must be appended in increasing last offset order: "
                f"{txn.last_offset} is not above {self._last_offset} in {self._path}"
            )
        entry = txn.encode()
        self._dirty = True
        self._open().pwrite(entry, len(self._image))
        self._image += entry
        self._last_offset = txn.last_offset

    def all_entries(self) -> list[AbortedTxn]:
        """Every entry in file order. CorruptIndexError for an entry of an unknown version."""
        try:
            return _index.decode_aborted_txns(self._image, AbortedTxn)
        except CorruptIndexError as error:
            raise self._corrupt(error) from None

    def collect_aborted(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset), in file
        order, and whether the search is complete (docs/format.md §6.3): an entry is kept if
        last_offset >= fetch_offset and first_offset < upper_bound_offset, and the walk stops
        after the first entry whose last_stable_offset >= upper_bound_offset. When it did not
        stop, the caller goes on to the next segment's index. CorruptIndexError for an entry
        of an unknown version reached on the way."""
        try:
            return _index.collect_aborted_txns(
                self._image, fetch_offset, upper_bound_offset, AbortedTxn
            )
        except CorruptIndexError as error:
            raise self._corrupt(error) from None

    def truncate_to(self, offset: int) -> None:
        """Drop the first entry whose last_offset >= offset and every entry after it."""
        keep = self.entries_ending_below(offset)
        if keep == self.entries:
            return
        if keep == 0:
            self.reset()
            return
        # The file exists: it holds at least the entry being dropped.
        self._dirty = True
        self._open().truncate(keep * ENTRY_BYTES)
        del self._image[keep * ENTRY_BYTES :]
        self._last_offset = self._entry(keep - 1).last_offset if keep else None

    def reset(self) -> None:
        """Drop every entry (recovery rebuilds the index) by removing the file: an empty
        .txnindex is never left behind, so that one found at open (a file truncated to
        nothing) is known damage (sanity_check), not a segment without aborts."""
        self.close()
        if self._fs.exists(self._path):
            self._fs.unlink(self._path)
        self._dirty = True
        self._image = bytearray()
        self._last_offset = None
        self._damaged_at = None
        self._partial_at = None
        self._emptied = False

    def sanity_check(self) -> None:
        """CorruptIndexError if an entry ends below the segment's base offset (or has an
        unknown version), if the file held a malformed entry when it was read, or if it ended
        in a partial entry. The owner checks only segments whose data is durable (the others
        are rescanned), and their index was synced with them: a partial entry there is not an
        append cut short but lost bytes, and the whole entry it was may have named an abort."""
        try:
            slot = _index.first_aborted_txn_ending_below(self._image, self._base_offset)
        except CorruptIndexError as error:
            raise self._corrupt(error) from None
        if slot >= 0:
            raise CorruptIndexError(
                f"corrupt transaction index {self._path}: entry {slot} ends at offset "
                f"{self._entry(slot).last_offset}, below the base offset {self._base_offset}"
            )
        if self._damaged_at is not None:
            raise CorruptIndexError(
                f"corrupt transaction index {self._path}: the entry at byte "
                f"{self._damaged_at} is malformed or out of order"
            )
        if self._emptied:
            raise CorruptIndexError(
                f"corrupt transaction index {self._path}: the file is empty, which eoslog never "
                f"leaves (a segment without aborted transactions has no .txnindex)"
            )
        if self._partial_at is not None:
            raise CorruptIndexError(
                f"corrupt transaction index {self._path}: it ends in a partial entry at byte "
                f"{self._partial_at}"
            )

    def check_against_log(self, batch_at: BatchAt, log_start_offset: int) -> None:
        """CorruptIndexError naming the entry and its byte position when the log contradicts
        any entry (entry_disagreement), or for the sanity_check failures. The owner calls it
        at open and rebuilds the index from the log when it fails."""
        self.sanity_check()
        for slot, entry in enumerate(self.all_entries()):
            why = entry_disagreement(entry, batch_at, log_start_offset)
            if why is not None:
                raise CorruptIndexError(
                    f"corrupt transaction index {self._path}: entry {slot} (byte "
                    f"{slot * ENTRY_BYTES}) {entry} disagrees with the log: {why}"
                )

    def first_outcome_conflict(
        self, batch_at: BatchAt, log_start_offset: int, below: int = 1 << 63
    ) -> int | None:
        """The slot of the first entry ending below `below` that the log contradicts only in
        its outcome (outcome_conflict), or None. CorruptIndexError for an entry of an unknown
        version."""
        for slot, entry in enumerate(self.all_entries()):
            if entry.last_offset < below and outcome_conflict(entry, batch_at, log_start_offset):
                return slot
        return None

    def append_replayed(self, txn: AbortedTxn) -> None:
        """append, for a replay that may pass markers this index already holds (a rebuild
        starting below a segment whose index was kept): those are skipped, so a kept index
        never gets an entry twice."""
        if self.entries and self._entry(self.entries - 1).last_offset >= txn.last_offset:
            return
        self.append(txn)

    def flush(self) -> None:
        """Make the entries durable; nothing to do for a file never created, or unchanged
        since the last flush (the flag is cleared before the sync: a change racing with it
        is synced by the next flush)."""
        if self._handle is not None and self._dirty:
            self._dirty = False
            try:
                self._handle.sync()
            except BaseException:
                self._dirty = True
                raise

    def close(self) -> None:
        """Close the file. The entries stay readable, and an append opens it again."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            handle.close()

    def delete(self) -> bool:
        """Close and remove the file; True if there was one. The index is then empty."""
        self.close()
        self._image = bytearray()
        self._last_offset = None
        self._damaged_at = None
        self._partial_at = None
        self._emptied = False
        if not self._fs.exists(self._path):
            return False
        self._fs.unlink(self._path)
        return True

    def rename_to(self, path: str) -> None:
        """Rename the file if it exists (atomically replacing path); appends follow it."""
        if self._fs.exists(self._path):
            self._fs.rename(self._path, path)
        self._path = path
