"""Checking a segment's offset and time index against its .log, entry by entry, read-only:
the checks `eoslog dump-log` prints under Kafka's headings and `eoslog verify` reports with
the entry's byte (eoslog.dump_files, eoslog.verify.derived). Both stream: an index is read a
chunk at a time (index_entries), the time index's batches in one forward pass over the .log
(BatchCursor), the offset index's with one header read per entry.

What an entry claims (docs/format.md §5.4, §5.5): an offset-index entry (o, p) that the batch
whose header is at byte p of the .log ends at offset o; a time-index entry (t, o) that the
batch ending at offset o holds the largest timestamp so far, t, and timestamps increase from
entry to entry. The owner checks the entry it uses the same way before believing it
(eoslog.log.segment_reads), so a wrong entry costs a scan, never a wrong answer.

Thread safety: none needed; each function or cursor is used by one thread. They only pread,
so they may run while the owner appends (they see the bytes below the size given).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from eoslog import limits
from eoslog._ext import scan
from eoslog.errors import KafkaException
from eoslog.fs import FileHandle
from eoslog.log.segment_check import SegmentWalk
from eoslog.record import codec, layout


def index_entries(handle: FileHandle, dtype: np.dtype[np.void]) -> Iterator[np.ndarray]:
    """The entries of the index file open as `handle`, a chunk at a time, up to the first
    zero slot past the first (a preallocated index's unused tail: the owner's active segment
    keeps its index at full size, its unused slots zero). A slot is zero when its `relative`
    column is: no entry but the first can have relative offset 0."""
    entry_bytes = dtype.itemsize
    chunk_bytes = limits.file_read_chunk_bytes // entry_bytes * entry_bytes
    size = handle.size() // entry_bytes * entry_bytes
    position = 0
    while position < size:
        want = min(chunk_bytes, size - position)
        chunk = handle.pread(want, position)
        entries = np.frombuffer(chunk, dtype=dtype, count=len(chunk) // entry_bytes)
        unused = np.flatnonzero(entries["relative"] == 0)
        unused = unused[(unused > 0) | (position > 0)]
        if len(unused):
            yield entries[: int(unused[0])]
            return
        yield entries
        if len(chunk) < want:
            return  # the file was cut under the read
        position += want


def last_offset_at(log: FileHandle, position: int) -> int | None:
    """The last offset of the batch whose header is at byte `position` of the .log open as
    `log`, None if no batch header reads there. What an offset-index entry (o, p) is checked
    by: the owner's lookups believe the entry only if this is o."""
    try:
        return codec.read_header(log.pread(layout.HEADER_SIZE, position), 0).last_offset
    except (KafkaException, ValueError):
        return None


class BatchCursor:
    """The valid batches of a .log in offset order, walked forward as sorted offsets ask for
    them (a time index's entries): one pass over the file below `end`, a chunk in memory."""

    def __init__(self, handle: FileHandle, end: int) -> None:
        self._batches = iter(SegmentWalk(handle, end, None))
        self._infos: np.ndarray = np.empty(0, dtype=scan.BATCH_INFO)
        self._index = 0

    def batch_ending_at(self, offset: int) -> tuple[int, int] | None:
        """(last offset, largest timestamp) of the first batch ending at or after offset;
        None when none does (the walk's end, or damage)."""
        while True:
            if self._index < len(self._infos):
                row = self._infos[self._index]
                if int(row["last_offset"]) >= offset:
                    return int(row["last_offset"]), int(row["max_timestamp"])
                self._index += 1
                continue
            walked = next(self._batches, None)
            if walked is None:
                return None
            self._infos, self._index = walked[2], 0


class TimeProblem(enum.Enum):
    """What a time-index entry can get wrong, under the headings Kafka's dump tool prints."""

    NOT_FOUND = "The following indexed offsets are not found in the log."
    MISMATCH = "Found timestamp mismatch in :{path}"
    OUT_OF_ORDER = "Found out of order timestamp in :{path}"


class TimeEntryProblem(NamedTuple):
    """One thing wrong with the entry (timestamp, offset). `found`: for NOT_FOUND the last
    offset of the first batch ending at or past the entry's offset (-1: none), for MISMATCH
    that batch's largest timestamp, for OUT_OF_ORDER the previous entry's timestamp."""

    kind: TimeProblem
    timestamp: int
    offset: int
    found: int

    def describe(self) -> str:
        """The problem in a sentence, for a report naming the entry's byte."""
        if self.kind is TimeProblem.NOT_FOUND:
            where = "no batch" if self.found < 0 else f"the next batch ends at {self.found}"
            return f"says a batch ends at offset {self.offset}, but {where} in the .log"
        if self.kind is TimeProblem.MISMATCH:
            return (
                f"says the batch ending at offset {self.offset} holds timestamp "
                f"{self.timestamp}, but its largest timestamp is {self.found}"
            )
        return (
            f"timestamp {self.timestamp} is not above the previous entry's ({self.found}): "
            f"timestamps increase from entry to entry"
        )


def time_entry_problems(
    offset: int, timestamp: int, batch: tuple[int, int] | None, previous_timestamp: int
) -> list[TimeEntryProblem]:
    """What is wrong with the time-index entry (timestamp, offset), given the batch the log
    holds for its offset (BatchCursor.batch_ending_at) and the previous entry's timestamp
    (time_index.NO_TIMESTAMP before the first): the batch must end at the offset, its
    largest timestamp be the entry's, and timestamps increase (Kafka's dump tool's checks)."""
    if batch is None or batch[0] != offset:
        found = -1 if batch is None else batch[0]
        return [TimeEntryProblem(TimeProblem.NOT_FOUND, timestamp, offset, found)]
    problems = []
    if batch[1] != timestamp:
        problems.append(TimeEntryProblem(TimeProblem.MISMATCH, timestamp, offset, batch[1]))
    if previous_timestamp >= timestamp:
        problems.append(
            TimeEntryProblem(TimeProblem.OUT_OF_ORDER, timestamp, offset, previous_timestamp)
        )
    return problems
