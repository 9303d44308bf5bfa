"""Offset, time and transaction index entries (docs/format.md §5.4-§5.8, §6.1-§6.3).

Implemented by eoslog._ext.index (Cython over engine/index.c); there is no pure-Python twin:
eoslog.log.offset_index, time_index and txn_index use it directly.

Buffers: every function takes any object with the buffer protocol (mmap, memoryview, bytes,
bytearray) and reads it in place, without copying, only for the duration of the call. Offsets
in offset and time index entries are stored relative to the segment base offset: callers
subtract the base before a search and add it back to what they read.

Thread safety: any function may be called from any thread. None releases the GIL or runs
Python code while it reads a buffer, so each call sees a buffer, and an IndexEntries, as it
was before or after another thread's call, never in between.
"""

from typing import Final, TypeVar, final

import numpy as np
from typing_extensions import Buffer

OFFSET_ENTRY_BYTES: Final[int]  # 8: relative offset int32, position int32
TIME_ENTRY_BYTES: Final[int]  # 12: timestamp int64, relative offset int32
TXN_ENTRY_BYTES: Final[int]  # 34: version int16, pid, first, last, last stable offset int64
WARM_BYTES: Final[int]  # 8192: the tail every lookup near the end touches
# The entries as numpy structured dtypes, fields at engine/index.h's offsets, big-endian.
OFFSET_ENTRY_DTYPE: Final[np.dtype[np.void]]  # relative (int32), position (int32)
TIME_ENTRY_DTYPE: Final[np.dtype[np.void]]  # timestamp (int64), relative (int32)
# version (int16), producer_id, first_offset, last_offset, last_stable_offset (int64)
TXN_ENTRY_DTYPE: Final[np.dtype[np.void]]

# Key columns a search compares (the `kind` arguments).
OFFSET_KEY: Final[int]  # offset index: relative offset
POSITION_KEY: Final[int]  # offset index: .log position
TIMESTAMP_KEY: Final[int]  # time index: timestamp
TIME_OFFSET_KEY: Final[int]  # time index: relative offset

_Txn = TypeVar("_Txn", bound=tuple[int, int, int, int])

def search(data: Buffer, count: int, kind: int, target: int, upper: bool = False) -> int:
    """Kafka's warm-section binary search (AbstractIndex.indexSlotRangeFor) over the first
    `count` entries of `data`, on the key column `kind`, keys sorted ascending.

    upper=False: the slot of the largest entry with key <= target, or -1 if none.
    upper=True: the slot of the smallest entry with key >= target, or -1 if none; except
    that, as in Kafka, a target equal to the key of slot 0 answers slot 1 (-1 if there is no
    slot 1): still an upper bound, not the smallest. ValueError for an unknown kind or a count
    that does not fit in data."""

@final
class IndexEntries:
    """The entries of one offset (entry_bytes=8) or time (entry_bytes=12) index, in a buffer
    it borrows (an mmap of the index file) until detach() or attach() of another.

    `count` entries are in use out of `capacity` slots (the buffer's length // entry_bytes).
    Entries are (first, second) column pairs as stored: (relative offset, position) or
    (timestamp, relative offset). Searches and reads raise ValueError while detached."""

    def __init__(self, entry_bytes: int) -> None: ...
    @property
    def count(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def writable(self) -> bool:
        """Attached to a buffer that accepts writes."""

    @property
    def is_attached(self) -> bool: ...
    def attach(self, buffer: Buffer, count: int) -> None:
        """Borrow `buffer` holding `count` entries, writable if it allows, and let go of the
        previous buffer. ValueError if count is negative or above the capacity; then nothing
        changes."""

    def detach(self) -> None:
        """Let go of the buffer. The count stays; searches and reads raise until attach()."""

    def search(self, kind: int, target: int, upper: bool = False) -> int:
        """search() over this index's entries; the kind must match the entry size."""

    def find(self, kind: int, target: int, upper: bool = False) -> tuple[int, int] | None:
        """The entry search() answers, read in the same call, or None for -1."""

    def entry(self, slot: int) -> tuple[int, int]:
        """Entry `slot`; IndexError unless 0 <= slot < count."""

    def append(self, first: int, second: int) -> None:
        """Write an entry in slot `count` and count it. IndexFullError if every slot is used;
        ValueError when read-only or a stored int32 would not fit (positions and relative
        offsets are 0 .. 2**31 - 1); AssertionError if it would break the sort order
        (offset index: relative offsets increase; time index: timestamps increase and
        relative offsets do not decrease), which the callers check first."""

    def copy(self) -> bytes:
        """The bytes of the `count` entries in use, copied out of the buffer (to keep serving
        searches from while the buffer is replaced)."""

    def truncate(self, count: int) -> None:
        """Keep the first `count` entries; ValueError unless 0 <= count <= the current count.
        The bytes of dropped entries stay as they are, as in Kafka."""

def encode_aborted_txn(
    producer_id: int, first_offset: int, last_offset: int, last_stable_offset: int
) -> bytes:
    """The 34-byte transaction index entry, version 0 (docs/format.md §6.1)."""

def decode_aborted_txns(data: Buffer, entry_type: type[_Txn]) -> list[_Txn]:
    """Every whole entry of `data` in order (a partial trailing entry is ignored), each built
    as entry_type(producer_id, first_offset, last_offset, last_stable_offset).
    CorruptIndexError for an entry whose version Kafka refuses: its first byte, read as a
    signed byte, above 0 (the second byte is not looked at)."""

def collect_aborted_txns(
    data: Buffer, fetch_offset: int, upper_bound_offset: int, entry_type: type[_Txn]
) -> tuple[list[_Txn], bool]:
    """Kafka's TransactionIndex.collectAbortedTxns (docs/format.md §6.3): walking the entries in
    order, keep each with last_offset >= fetch_offset and first_offset < upper_bound_offset;
    stop after the first entry with last_stable_offset >= upper_bound_offset. Returns the kept
    entries and whether it stopped there (the search is complete: later segments need not be
    read). CorruptIndexError as decode_aborted_txns, for the entries reached."""

def count_aborted_txns_ending_below(data: Buffer, offset: int) -> int:
    """The number of entries before the first whose last_offset >= offset (all of them if
    none): what truncateTo(offset) keeps. CorruptIndexError for a bad version reached."""

def first_aborted_txn_ending_below(data: Buffer, offset: int) -> int:
    """The first slot whose last_offset < offset, or -1: the sanity check's finding.
    CorruptIndexError for a bad version reached."""
