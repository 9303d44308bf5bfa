"""The native core of a log segment (pyext/segment_core.pyx): the state an append changes, the
roll rule, and the append of a batch through the segment's FileHandle. No pure-Python twin:
eoslog.log.segment.LogSegment subclasses it. Thread safety: the partition's writer calls the
methods, under its lock; any thread may read `size`."""

from collections.abc import Callable
from typing import Any, Final, Protocol

from typing_extensions import Buffer

from eoslog.fs import FileHandle

ROLL_FIRST: Final[int]  # append_stamped wrote nothing: roll, then append to the new segment

class _LogFile(Protocol):
    """What the core writes through: eoslog.log.mapped_log.MappedLog's current handle."""

    handle: FileHandle

class SegmentCore:
    base_offset: int
    # The logical end of the .log: whole batches below it.
    size: int
    created_ms: int
    last_modified_ms: int
    bytes_since_last_index_entry: int
    # The .log's length on disk (>= size, zeros past size), and how far an append that
    # reaches it extends the file ahead (0: not at all).
    allocated: int
    preallocate_bytes: int
    # The .log's MappedLog (eoslog.log.mapped_log); its `handle` is written through.
    _log_file: _LogFile
    # The topic's LogConfig: segment.bytes, segment.ms and index.interval.bytes are read from
    # it when it is set.
    config: Any
    @property
    def max_timestamp(self) -> int: ...
    @property
    def offset_of_max_timestamp(self) -> int: ...
    def set_largest_timestamp(self, timestamp: int, offset: int) -> None: ...
    first_batch_timestamp: int | None
    def watch_indexes(
        self, offset_entries: Any, offset_reserved: int, time_entries: Any, time_reserved: int
    ) -> None: ...
    def should_roll(
        self, batch_size: int, max_timestamp: int, last_offset: int, now_ms: int
    ) -> bool: ...
    def append(
        self,
        data: Buffer | tuple[Buffer, ...],
        *,
        last_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
    ) -> int: ...
    def append_stamped(
        self,
        batch: Buffer,
        base_offset: int,
        last_offset: int,
        max_timestamp: int,
        now_ms: int,
        hook: Callable[[str], object] | None = None,
        may_roll: bool = True,
    ) -> int: ...
    # Supplied by the subclass: the files read on first use.
    def scan_largest_timestamp(self) -> tuple[int, int]: ...
    def _load_first_batch_timestamp(self) -> int | None: ...
