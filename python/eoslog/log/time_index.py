"""The time index (.timeindex): sparse (timestamp, offset) entries of one segment
(docs/format.md §5.5; Kafka's TimeIndex).

Each 12-byte entry is a timestamp (int64) and an offset relative to the segment base (int32),
meaning "the largest timestamp seen up to and including the batch ending at this offset".
Timestamps strictly increase and offsets never decrease. The last slot of the file is kept for
the entry written when the segment is rolled or closed, so the index counts as full one entry
early. Files, memory safety and the thread-safety contract are those of
eoslog.log.mapped_index.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from eoslog._ext import index as _index
from eoslog.errors import CorruptIndexError, IndexFullError, InvalidOffsetError
from eoslog.log.mapped_index import MappedIndex

# engine/index.h holds the layout; eoslog._ext.index exports it (tests/record/test_layout.py).
ENTRY_BYTES: Final = _index.TIME_ENTRY_BYTES
# Kafka's RecordBatch.NO_TIMESTAMP: the timestamp of an empty index's last entry.
NO_TIMESTAMP: Final = -1
_TIMESTAMP_KEY: Final = _index.TIMESTAMP_KEY
_TIME_OFFSET_KEY: Final = _index.TIME_OFFSET_KEY
_ENTRY_DTYPE: Final = _index.TIME_ENTRY_DTYPE


class TimeIndex(MappedIndex):
    """Timestamp -> offset of one segment.

    Writer thread only: maybe_append, truncate_to, truncate, reset, resize,
    trim_to_valid_size, flush, close, delete, rename_to. Any thread: lookup, entry and the
    properties (see eoslog.log.mapped_index).
    """

    ENTRY_BYTES = ENTRY_BYTES
    # The last slot is for the roll/close entry: is_full is one slot short of max_entries.
    RESERVED_SLOTS = 1

    __slots__ = ("_last_entry",)

    def _refresh_last(self) -> None:
        self._last_entry = self._read_last_entry()

    def _entries_in_use(self, image: bytes) -> int:
        """The leading entries whose timestamps strictly increase and whose offsets do not
        decrease (a zeroed slot after a real entry breaks the order; docs/format.md §5.5)."""
        entries = np.frombuffer(image, dtype=_ENTRY_DTYPE, count=len(image) // ENTRY_BYTES)
        timestamp = entries["timestamp"].astype(np.int64)
        relative = entries["relative"].astype(np.int64)
        broken = np.zeros(len(entries), dtype=bool)
        broken[1:] = (np.diff(timestamp) <= 0) | (np.diff(relative) < 0)
        found = np.flatnonzero(broken)
        return int(found[0]) if len(found) else len(entries)

    def _read_last_entry(self) -> tuple[int, int]:
        count = self._entries.count
        if count == 0:
            return NO_TIMESTAMP, self._base_offset
        timestamp, relative = self._entries.entry(count - 1)
        return timestamp, self._base_offset + relative

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry; (-1, base offset) when empty."""
        return self._last_entry

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if timestamp is above the last entry's; an equal or (with
        no entries) smaller timestamp is skipped silently.

        Checked in Kafka's order, even for an entry that would be skipped: IndexFullError if
        full and not skip_full_check (roll and close skip it to use the reserved slot);
        InvalidOffsetError if offset is below the last entry's; ValueError if timestamp is
        below the last entry's (Kafka's IllegalStateException); then for an entry that is
        written, IndexOffsetOverflowError unless 0 <= offset - base <= 2**31 - 1, and
        IndexFullError if no slot at all is left. Nothing changes on an error."""
        self._require_handle()
        if not skip_full_check and self.is_full:
            raise IndexFullError(
                f"{self._path} is full: {self.entries} of {self.max_entries} entries"
            )
        last_timestamp, last_offset = self._last_entry
        if self._entries.count != 0 and offset < last_offset:
            raise InvalidOffsetError(
                f"offset {offset} is below the last offset {last_offset} of {self._path} "
                f"(entry {self.entries})"
            )
        if self._entries.count != 0 and timestamp < last_timestamp:
            raise ValueError(
                f"timestamp {timestamp} is below the last timestamp {last_timestamp} of "
                f"{self._path} (entry {self.entries})"
            )
        # Equal timestamps are the roll/close entry repeating the last one, and an index of
        # batches without timestamps (-1) stays empty.
        if timestamp > last_timestamp:
            self._dirty = True
            self._entries.append(timestamp, self._relative(offset))
            self._last_entry = (timestamp, offset)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target_timestamp;
        (-1, base offset) when there is none."""
        found = self._entries.find(_TIMESTAMP_KEY, target_timestamp)
        if found is None:
            return NO_TIMESTAMP, self._base_offset
        return found[0], self._base_offset + found[1]

    def entry(self, n: int) -> tuple[int, int]:
        """(timestamp, offset) of entry n; IndexError unless 0 <= n < entries."""
        timestamp, relative = self._entries.entry(n)
        return timestamp, self._base_offset + relative

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset >= offset, found by a search on the offset column
        (as Kafka; when offsets repeat, which of the equal entries it lands on decides)."""
        self._require_handle()
        self._truncate_to_entries(self._entries_below(_TIME_OFFSET_KEY, 1, offset))

    def sanity_check(self) -> None:
        """CorruptIndexError if the last timestamp is below the first, the last offset is
        below the base offset, or the file length is not a multiple of 12 (§5.5)."""
        last_timestamp, last_offset = self._last_entry
        if self.entries != 0:
            first_timestamp, _ = self._entries.entry(0)
            if last_timestamp < first_timestamp:
                raise CorruptIndexError(
                    f"corrupt time index {self._path}: its last timestamp {last_timestamp} "
                    f"is below its first timestamp {first_timestamp}"
                )
            if last_offset < self._base_offset:
                raise CorruptIndexError(
                    f"corrupt time index {self._path}: its last offset {last_offset} is "
                    f"below the base offset {self._base_offset}"
                )
        if self._length % ENTRY_BYTES != 0:
            raise CorruptIndexError(
                f"corrupt time index {self._path}: {self._length} bytes is not a multiple "
                f"of {ENTRY_BYTES}"
            )

    def check_entries(self, next_base_offset: int) -> None:
        """CorruptIndexError unless timestamps strictly increase and offsets never decrease
        and lie in [base, next_base_offset): one numpy pass over the entries (see
        OffsetIndex.check_entries)."""
        entries = np.frombuffer(self._entries.copy(), dtype=_ENTRY_DTYPE)
        if len(entries) == 0:
            return
        timestamp = entries["timestamp"].astype(np.int64)
        relative = entries["relative"].astype(np.int64)
        if (
            relative[0] < 0
            or self._base_offset + relative[-1] >= next_base_offset
            or np.any(np.diff(timestamp) <= 0)
            or np.any(np.diff(relative) < 0)
        ):
            raise CorruptIndexError(
                f"corrupt time index {self._path}: its entries are out of order or out of range"
            )
