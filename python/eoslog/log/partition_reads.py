"""A partition log's reads (docs/design.md "Fetch"; docs/format.md §6.3): what PartitionLog.read
returns, and the read itself over the state a partition published, without its lock.

Appends publish in an order readers rely on: a segment and its size first, the log end after
(PartitionLog). A read captures the log start, the last stable offset and the log end, then
the segment list (Published), so every batch below the captured end lies in the segments
captured; read_published works from that capture alone, apart from the partition's writers.
"""

from __future__ import annotations

import bisect
import re
from typing import TYPE_CHECKING, Final, NamedTuple

from eoslog.errors import KafkaException
from eoslog.log.segment_reads import last_offset_at

if TYPE_CHECKING:
    import numpy as np

    from eoslog.log.segment import LogSegment

# Kafka's fetch isolation levels (FetchRequest IsolationLevel), defined here once: the
# consumer's configuration and eoslog.scan check theirs against it too.
ISOLATION_LEVELS: Final = ("read_committed", "read_uncommitted")

# How a decoder's error names the batch it is about, by its byte in the buffer decoded: a
# suffix (eoslog.errors.error_for_status, and the few messages written by hand in pyext/), or
# the plan's "the batch at byte N of a fetch ..." (pyext/readcommitted.pyx offsets_break).
_BATCH_AT = re.compile(r" \((?:next )?batch at (?:byte )?(\d+)\)$|^the batch at byte (\d+) ")


class FetchResult(NamedTuple):
    # Whole v2 batches: a read-only view into the segment's mapped .log (valid as long as kept).
    records: memoryview
    aborted_transactions: list[tuple[int, int]] | None  # (producer id, first offset)
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    # Where `records` came from: the segment's .log and the byte of it where they begin, so
    # an error found decoding them can name the file and byte (in_file). "" for no records.
    file: str = ""
    position: int = 0
    # The scan.BATCH_INFO rows of `records` when the read scanned their headers (a read of
    # more than one batch), handed to plan_fetch so that a fetch scans them once; else None.
    batches: np.ndarray | None = None

    def in_file(self, error: KafkaException, offset_in_records: int = 0) -> KafkaException:
        """`error`, raised decoding these records, as the same class naming the .log and the
        byte of it the damage is at: "<file> at byte <position>: <reason>". A decoder knows
        only the byte in the buffer it was given (a fetch's records, or a slice of them at
        `offset_in_records`), which alone would send a reader to the wrong place."""
        return error_in_file(error, self.file, self.position + offset_in_records)


def error_in_file(error: KafkaException, file: str, position: int) -> KafkaException:
    """`error`, found decoding bytes read from `position` of `file`, as the same class
    naming that file and the byte of it the damage is at (module _BATCH_AT)."""
    reason = str(error)
    if not file or file in reason:
        return type(error)(reason)  # a new one: callers raise it `from error`
    found = _BATCH_AT.search(reason)
    if found is None:
        return type(error)(f"{file}, in the batches read from byte {position}: {reason}")
    at = position + int(found.group(1) or found.group(2))
    kept = "the batch " if found.group(2) else ""  # the prefix form: keep its subject
    rest = reason[: found.start()] + kept + reason[found.end() :]
    return type(error)(f"{file} at byte {at}: {rest}")


def aborted_in(
    segments: list[LogSegment],
    number: int,
    fetch_offset: int,
    position: int,
    fetch_size: int,
    fetched_last_offset: int,
    log_end_offset: int,
) -> list[tuple[int, int]]:
    """The aborted transactions a read_committed fetch must be told about (docs/format.md §6.3):
    those overlapping [fetch_offset, upper bound) from the segment it was served from on,
    where the upper bound is the offset of the first index entry past the fetched bytes,
    else the next segment's base, else the log end.

    The index after a clean shutdown is not checked at open (Kafka's rule), so the entry is
    checked here against the fetch: one whose offset is not past the last offset fetched
    (a damaged position) would hide aborted transactions inside the fetch. Such an entry
    marks the segment's index suspect and is not used. The bound is found only when a
    transaction index has entries to filter by it: a fetch from a log without aborts opens
    no offset index (the owner opens indexes on first use)."""
    found: list[tuple[int, int]] = []
    upper_bound: int | None = None
    for later in segments[number:]:
        if later.txn_index.is_empty:
            continue
        if upper_bound is None:
            upper_bound = _fetch_upper_bound(
                segments, number, position, fetch_size, fetched_last_offset, log_end_offset
            )
        entries, complete = later.txn_index.collect_aborted(fetch_offset, upper_bound)
        found.extend((entry.producer_id, entry.first_offset) for entry in entries)
        if complete:
            break
    return found


def _fetch_upper_bound(
    segments: list[LogSegment],
    number: int,
    position: int,
    fetch_size: int,
    fetched_last_offset: int,
    log_end_offset: int,
) -> int:
    """aborted_in's upper bound: the first checked index entry past the fetched bytes, else
    the next segment's base, else the log end."""
    segment = segments[number]
    upper = segment.offset_index.fetch_upper_bound_offset(position, fetch_size)
    if upper is not None and upper[0] <= fetched_last_offset:
        segment.index_suspect = True
        upper = None
    if upper is not None:
        return upper[0]
    if number + 1 < len(segments):
        return segments[number + 1].base_offset
    return log_end_offset


class Published(NamedTuple):
    """What a read captured of a partition, in this order: log start, last stable offset,
    log end, then the segments and their base offsets."""

    log_start_offset: int
    last_stable_offset: int
    log_end_offset: int
    segments: list[LogSegment]
    bases: list[int]


def read_published(
    published: Published, offset: int, max_bytes: int, committed: bool
) -> FetchResult:
    """PartitionLog.read from a capture whose range holds `offset`: whole batches from the
    one holding it, below the LSO (committed) or the log end, with the aborted transactions
    a read_committed fetch is told about. CorruptRecordError where the segment bytes cannot
    be the batches they must be."""
    start, stable, end, segments, bases = published
    bound = min(stable, end) if committed else end
    aborted: list[tuple[int, int]] | None = [] if committed else None
    if offset < bound:
        index = max(bisect.bisect_right(bases, offset) - 1, 0)
        for number, segment in enumerate(segments[index:], start=index):
            # Cut at the bound, not only when a transaction is open: the segment's size may
            # already cover a batch the log end captured does not (append publishes the
            # size first), an open transaction's first batch included.
            # A segment the cleaner cleaned may leave gaps: its batches are checked for order
            # only, and a read in a gap gets the next batch after it (Kafka's rule).
            contiguous = not segment.compacted
            found = segment.read(
                offset, max_bytes, segment.size, contiguous=contiguous, offset_end=bound
            )
            if found is not None:
                records, position, batches = found
                if aborted is not None:
                    last = (
                        int(batches["last_offset"][-1])
                        if batches is not None
                        else last_offset_at(records, 0)
                    )
                    aborted = aborted_in(
                        segments, number, offset, position, len(records), last, end
                    )
                path = segment.log_path
                return FetchResult(records, aborted, end, stable, start, path, position, batches)
            if segment.size > 0 and contiguous:
                # The log is contiguous: the segment whose range holds `offset` must hold a
                # batch with it. None means its batches skip the offset.
                raise segment.corruption(0, f"no batch holds offset {offset}")
    return FetchResult(memoryview(b""), aborted, end, stable, start)
