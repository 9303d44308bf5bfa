"""The offset index (.index): sparse (offset, .log position) entries of one segment
(docs/format.md §5.4; Kafka's OffsetIndex).

Each 8-byte entry is the offset relative to the segment base (int32) and the byte position in
the .log file (int32) of a batch whose last offset is that offset. Offsets strictly increase.
Files, memory safety and the thread-safety contract are those of eoslog.log.mapped_index.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from eoslog._ext import index as _index
from eoslog.errors import CorruptIndexError, IndexFullError, InvalidOffsetError
from eoslog.log.mapped_index import MappedIndex, clamp_int64

# engine/index.h holds the layout; eoslog._ext.index exports it (tests/record/test_layout.py).
ENTRY_BYTES: Final = _index.OFFSET_ENTRY_BYTES
_OFFSET_KEY: Final = _index.OFFSET_KEY
_POSITION_KEY: Final = _index.POSITION_KEY
_ENTRY_DTYPE: Final = _index.OFFSET_ENTRY_DTYPE


class OffsetIndex(MappedIndex):
    """Offset -> .log position of one segment.

    Writer thread only: append, truncate_to, truncate, reset, resize, trim_to_valid_size,
    flush, close, delete, rename_to. Any thread: lookup, entry, fetch_upper_bound_offset and
    the properties (see eoslog.log.mapped_index).
    """

    ENTRY_BYTES = ENTRY_BYTES

    __slots__ = ("_last_offset",)

    def _refresh_last(self) -> None:
        self._last_offset = self._read_last_offset()

    def _entries_in_use(self, image: bytes) -> int:
        """The leading entries whose positions are above 0 and whose offsets and positions
        strictly increase (no entry is ever written at position 0, docs/format.md §5.4)."""
        entries = np.frombuffer(image, dtype=_ENTRY_DTYPE, count=len(image) // ENTRY_BYTES)
        relative = entries["relative"].astype(np.int64)
        position = entries["position"].astype(np.int64)
        broken = position <= 0
        broken[1:] |= (np.diff(relative) <= 0) | (np.diff(position) <= 0)
        found = np.flatnonzero(broken)
        return int(found[0]) if len(found) else len(entries)

    def _read_last_offset(self) -> int:
        count = self._entries.count
        if count == 0:
            return self._base_offset
        relative, _ = self._entries.entry(count - 1)
        return self._base_offset + relative

    @property
    def last_offset(self) -> int:
        """The offset of the last entry; the base offset when empty."""
        return self._last_offset

    def append(self, offset: int, position: int) -> None:
        """Add the entry (offset, position) after the last one.

        IndexFullError if every slot is used; InvalidOffsetError unless offset is above the
        last entry's; IndexOffsetOverflowError unless 0 <= offset - base <= 2**31 - 1;
        ValueError for a position outside 0 .. 2**31 - 1. Nothing changes on an error."""
        self._require_handle()
        if self.is_full:
            raise IndexFullError(
                f"{self._path} is full: {self.entries} of {self.max_entries} entries"
            )
        if self._entries.count != 0 and offset <= self._last_offset:
            raise InvalidOffsetError(
                f"offset {offset} is not above the last offset {self._last_offset} "
                f"of {self._path} (entry {self.entries})"
            )
        self._dirty = True
        self._entries.append(self._relative(offset), position)
        self._last_offset = offset

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry with offset <= target_offset; (base offset,
        0) when the index is empty or every entry is above the target. An entry no writer
        could have made (a negative relative offset or position: damage in an index not
        checked at open) is answered as no entry, so that callers scan from the segment
        start rather than read at a negative position; callers check any other entry
        against the batch it names."""
        relative_target = clamp_int64(target_offset - self._base_offset)
        found = self._entries.find(_OFFSET_KEY, relative_target)
        if found is None or found[0] < 0 or found[1] < 0:
            return self._base_offset, 0
        return self._base_offset + found[0], found[1]

    def entry(self, n: int) -> tuple[int, int]:
        """(offset, position) of entry n; IndexError unless 0 <= n < entries."""
        relative, position = self._entries.entry(n)
        return self._base_offset + relative, position

    def fetch_upper_bound_offset(
        self, start_position: int, fetch_size: int
    ) -> tuple[int, int] | None:
        """(offset, position) of an entry at or past start_position + fetch_size: an offset
        outside a fetch of fetch_size bytes from start_position, so an exclusive upper bound
        for the aborted transactions it may hold (§6.3). Kafka's search answers the smallest
        such entry, except when the end equals the first entry's position (then the second,
        see eoslog._ext.index.search). None if no entry is that far."""
        target = clamp_int64(start_position + fetch_size)
        found = self._entries.find(_POSITION_KEY, target, True)
        if found is None:
            return None
        return self._base_offset + found[0], found[1]

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset >= offset (an entry at offset goes too); nothing
        changes when offset is past the last entry."""
        self._require_handle()
        self._truncate_to_entries(self._entries_below(_OFFSET_KEY, 0, offset))

    def sanity_check(self) -> None:
        """CorruptIndexError if the last entry is below the base offset (an entry at the base
        is fine) or the file length is not a multiple of 8 (§5.4)."""
        if self.entries != 0 and self._last_offset < self._base_offset:
            raise CorruptIndexError(
                f"corrupt index {self._path}: its last offset {self._last_offset} is below "
                f"the base offset {self._base_offset}"
            )
        if self._length % ENTRY_BYTES != 0:
            raise CorruptIndexError(
                f"corrupt index {self._path}: {self._length} bytes is not a multiple of "
                f"{ENTRY_BYTES}"
            )

    def check_entries(self, log_size: int, next_base_offset: int) -> None:
        """CorruptIndexError unless every entry is in order and in range: offsets and
        positions strictly increase, offsets lie in [base, next_base_offset), positions in
        (0, log_size). One pass over the entries in numpy, for an open after an unclean stop
        (Kafka checks only the last entry; a flipped bit in any other would be believed)."""
        entries = np.frombuffer(self._entries.copy(), dtype=_ENTRY_DTYPE)
        if len(entries) == 0:
            return
        relative = entries["relative"].astype(np.int64)
        position = entries["position"].astype(np.int64)
        if (
            relative[0] < 0
            or self._base_offset + relative[-1] >= next_base_offset
            or position[0] <= 0
            or position[-1] >= log_size
            or np.any(np.diff(relative) <= 0)
            or np.any(np.diff(position) <= 0)
        ):
            raise CorruptIndexError(
                f"corrupt index {self._path}: its entries are out of order or out of range"
            )
