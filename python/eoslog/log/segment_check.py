"""Walking one segment's .log with every check a reader can make from the file alone: each
batch's framing and CRC-32C (eoslog._ext.scan), and its offsets continuing the previous
batch's, from the base offset the file is named after (first_offset_violation, the rule
recovery and index rebuilds apply). Reads are bounded: a chunk at a time, or one batch when a
batch is larger, never more than the largest batch eoslog accepts. `eoslog verify` and
`eoslog repair` (eoslog.verify.log, eoslog.log.repair) walk segments with it, so the boundaries
repair accepts are the ones recovery would reach.

The continuity rule is continuity_problem: every batch starts right after the previous one and
each segment starts where the previous one ends, except in segments the cleaner has cleaned
(below the partition's cleaner-offset-checkpoint entry: `gaps`), where a batch may start past
that; a gap anywhere else is as wrong as an overlap (an open refuses or cuts at either). It is
kept here, small and free of any segment object, so that open-time checks can share it.

Thread safety: a walk is used by one thread; it only preads, so it may run while the owner
appends (it sees the prefix below the size it was given).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import numpy as np

from eoslog import limits
from eoslog._ext import scan
from eoslog.fs import FileHandle
from eoslog.log.segment import first_offset_violation
from eoslog.record import layout
from eoslog.record.status import MESSAGES

# A segment's .log file name: exactly 20 digits and the suffix (docs/format.md §5.1); temporary
# names such as `.log.deleted` are not segments.
SEGMENT_LOG_NAME: Final = re.compile(r"\d{20}\.log")
# A walk reads the .log in pieces of this size (the size recovery reads in, for the same
# reasons: scans run at memory speed, memory stays flat for 1 GiB segments).
CHECK_CHUNK_BYTES: Final = limits.recovery_chunk_bytes


def continuity_problem(expected_offset: int, base_offset: int) -> str | None:
    """What is wrong when a batch (or a segment) starting at base_offset follows data that
    ends just below expected_offset, or None when it continues it exactly. Outside what the
    cleaner cleaned (the one cause of gaps in Kafka's logs) a gap means lost batches or a
    damaged base offset, which the CRC does not cover."""
    if base_offset == expected_offset:
        return None
    if base_offset > expected_offset:
        return (
            f"base offset {base_offset} leaves a gap after offset {expected_offset - 1} "
            f"(expected {expected_offset}; only the cleaner leaves gaps, and not here)"
        )
    return (
        f"base offset {base_offset} goes back: offsets up to {expected_offset - 1} came "
        f"before it (expected {expected_offset})"
    )


@dataclass(frozen=True)
class WalkStop:
    """Where and why a walk stopped before the end of the bytes it was given. `torn`: the
    bytes there are a partial batch (its length runs past the end), what a crash mid-write
    leaves; otherwise the batch there is damaged. `discontinuous`: it is a whole batch with a
    valid CRC whose offsets do not continue the previous batch's (valid data, in recovery's
    terms: no crash leaves it, so an open never cuts it as a torn tail without a recovery
    point below it)."""

    position: int
    description: str
    torn: bool
    discontinuous: bool = False


class SegmentWalk:
    """The valid batches of a .log from `start`, in file order. Iterating yields
    (chunk_position, chunk, infos): the bytes read at chunk_position and the scan.BATCH_INFO
    rows of the whole, valid, continuing batches in it (positions relative to the chunk).
    After the iteration, `position` is where the valid batches end, `next_offset` the offset
    after the last of them, and `stop` why the walk ended there (None: at `end`).

    expected_offset: the base offset the first batch must have (the file name's, from the
    segment start), or None to take the first batch's own (a walk resuming past damage).
    gaps: the segment lies below the cleaner-offset-checkpoint entry, so a batch may start
    past the offset expected (never below it)."""

    def __init__(
        self,
        handle: FileHandle,
        end: int,
        expected_offset: int | None,
        *,
        start: int = 0,
        chunk_bytes: int = CHECK_CHUNK_BYTES,
        gaps: bool = False,
    ) -> None:
        assert 0 <= start <= end, (start, end)
        self.gaps = gaps
        self.handle = handle
        self.end = end
        self.position = start
        self.next_offset = expected_offset
        self.chunk_bytes = chunk_bytes
        self.stop: WalkStop | None = None

    def __iter__(self) -> Iterator[tuple[int, bytes, np.ndarray]]:
        while self.position < self.end and self.stop is None:
            chunk = self._read_batches(self.position)
            if chunk is None:
                return
            infos, stop, status = scan.scan_batches(chunk, verify_crc=True)
            infos, stop = self._continuing(infos, stop)
            if len(infos):
                yield self.position, chunk, infos
                self.next_offset = int(infos["last_offset"][-1]) + 1
            if status != 0 and self.stop is None:
                self.stop = WalkStop(self.position + stop, MESSAGES[status][1], torn=False)
            self.position += stop
            if len(infos) == 0 and self.stop is None:
                self.stop = self._partial_batch(self.position)

    def _read_batches(self, position: int) -> bytes | None:
        """The next piece of the .log: a chunk, or exactly the next batch when it is larger
        than a chunk (None, with `stop` set, when its length field claims more than any batch
        may hold and the file has that many bytes: reading them would allocate what a lie
        asks for)."""
        chunk = self.handle.pread(min(self.chunk_bytes, self.end - position), position)
        if len(chunk) < layout.LOG_OVERHEAD or position + len(chunk) >= self.end:
            return chunk
        claimed = layout.batch_size_at(chunk)
        if claimed <= len(chunk) or claimed > self.end - position:
            return chunk  # whole batches, or a partial one at the end (a torn tail)
        if claimed > limits.batch_bytes_max:
            self.stop = WalkStop(
                position,
                f"batch length {claimed} bytes is larger than any batch eoslog accepts "
                f"({limits.batch_bytes_max})",
                torn=False,
            )
            return None
        return self.handle.pread(claimed, position)

    def _continuing(self, infos: np.ndarray, stop: int) -> tuple[np.ndarray, int]:
        """The rows up to the first whose offsets do not continue the previous batch's
        (setting `stop` there), and where the scan of the chunk stops."""
        if len(infos) == 0:
            return infos, stop
        if self.next_offset is None:
            self.next_offset = int(infos["base_offset"][0])
        bad = first_offset_violation(infos, self.next_offset, self.gaps)
        if bad is None:
            return infos, stop
        expected = self.next_offset if bad == 0 else int(infos["last_offset"][bad - 1]) + 1
        base, last = int(infos["base_offset"][bad]), int(infos["last_offset"][bad])
        position = int(infos["position"][bad])
        problem = continuity_problem(expected, base) or (
            f"last offset {last} is below base offset {base}"
        )
        if self.position + position == 0 and base != expected:
            problem = (
                f"base offset {base} of the first batch disagrees with the file name, which "
                f"says the segment starts at offset {expected}"
            )
        self.stop = WalkStop(self.position + position, problem, torn=False, discontinuous=True)
        return infos[:bad], position

    def _partial_batch(self, position: int) -> WalkStop:
        """Why no whole batch starts at `position` although bytes remain: too few bytes for a
        header, or a length that runs past the end."""
        if self.end - position < layout.RECORDS_OFFSET:
            text = f"{self.end - position} bytes at the end are too few for a batch header"
            return WalkStop(position, text, torn=True)
        return WalkStop(
            position, f"the batch there runs past the end of the file ({self.end})", torn=True
        )


def zero_tail(handle: FileHandle, start: int, end: int) -> bool:
    """Whether the bytes in [start, end) are all zeros, read a chunk at a time: the space an
    owner extended an active segment by ahead of its appends under durability "commit" and
    "always" (eoslog._ext.segment_core's preallocation), where the log ends, as a batch
    length of 0 says."""
    position = start
    while position < end:
        chunk = handle.pread(min(CHECK_CHUNK_BYTES, end - position), position)
        if not chunk or chunk.count(0) != len(chunk):
            return False
        position += len(chunk)
    return True


def written_since(
    handle: FileHandle, end: int, stop: WalkStop, expected_offset: int | None
) -> bool:
    """Whether a whole valid batch now stands where a walk stopped: the file changed under
    the walk. An owner under durability "commit" or "always" appends into zeros it extended
    its active segment by (preallocation), so a reader of a live directory can meet a batch
    length of 0, then, further on, batches written after it read that length; the log it
    captured ends at the stop. A file nobody writes reads the same again, so its damage is
    still damage. expected_offset: the offset the stopped walk expected there, so a batch
    that fails the walk's continuity check is damage again, not a new append."""
    again = SegmentWalk(handle, end, expected_offset, start=stop.position)
    return any(True for _ in again)


def find_resumption(handle: FileHandle, start: int, end: int) -> int | None:
    """The first position in (start, end) where a whole batch with a valid CRC lies, found
    in windows of two chunks that step by one chunk (so every batch up to a chunk long is
    found whole in some window), or None. Memory stays at two chunks however much follows."""
    window_start = start + 1
    while window_start < end:
        window = handle.pread(min(2 * CHECK_CHUNK_BYTES, end - window_start), window_start)
        found = scan.find_valid_batch(window, 0)
        if found < len(window):
            return window_start + found
        window_start += CHECK_CHUNK_BYTES
    return None
