"""One log segment: its .log and the indexes beside it (docs/format.md §5, §9.3).

The cases are Kafka's LogSegmentTest ones that need no producer state (docs/kafka-behaviours.md
23-38), with Kafka's numbers. Segments are real files in tmp_path; recovery is reached the way
a restart reaches it, through eoslog.log.recovery.load with clean_shutdown=False.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog._ext import scan
from eoslog.errors import CorruptRecordError, IndexOffsetOverflowError
from eoslog.fs import PosixFileSystem
from eoslog.log import recovery
from eoslog.log.config import LogConfig
from eoslog.log.segment import LogSegment, first_offset_violation
from tests.support import logtools

RELATIVE_OFFSET_MAX = (1 << 31) - 1
# Trials of the seeded corruption test: each seed is printed and named in its failure message.
CORRUPTION_SEEDS = range(10)


class Segments:
    """Opens segments in one directory and closes whatever is still open at teardown."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.fs = PosixFileSystem()
        self.open_segments: list[LogSegment] = []

    def new(self, base_offset: int, *, created_ms: int = 0, **config: int) -> LogSegment:
        segment = LogSegment(
            self.fs, self.directory, base_offset, LogConfig(**config), created_ms=created_ms
        )
        self.open_segments.append(segment)
        return segment

    def close(self, segment: LogSegment) -> None:
        self.open_segments.remove(segment)
        segment.close()

    def load_unclean(self, recovery_point: int = 0, **config: int) -> recovery.LoadedLog:
        """Load the directory as a restart after a crash does, recovering every segment;
        offsets below recovery_point count as known durable."""
        loaded = recovery.load(
            self.fs,
            self.directory,
            LogConfig(**config),
            clean_shutdown=False,
            recovery_point=recovery_point,
            log_start_offset=None,
            now_ms=0,
            aborted_counts=None,
        )
        self.open_segments.extend(loaded.segments)
        return loaded

    def close_all(self) -> None:
        while self.open_segments:
            self.close(self.open_segments[-1])


@pytest.fixture
def segments(tmp_path: os.PathLike[str]) -> Iterator[Segments]:
    opened = Segments(os.fspath(tmp_path))
    yield opened
    opened.close_all()


def one_record(
    offset: int, timestamp: int = logtools.NO_TIMESTAMP, value: bytes = b"hello"
) -> bytes:
    return logtools.batch([value], base_offset=offset, timestamps=timestamp)


def read_batches(segment: LogSegment, offset: int, max_bytes: int = 1 << 20) -> list[int]:
    """Base offsets of the batches segment.read returns, or [] for None."""
    found = segment.read(offset, max_bytes)
    return [] if found is None else [h.base_offset for h in logtools.headers(found[0])]


# --- append ------------------------------------------------------------------------------------


def test_append_outside_the_relative_offset_range_raises_overflow_and_writes_nothing(
    segments: Segments,
) -> None:
    segment = segments.new(40)
    below_base = one_record(39)
    past_int32 = one_record(40 + RELATIVE_OFFSET_MAX + 1)
    for data in (below_base, past_int32):
        with pytest.raises(IndexOffsetOverflowError):
            logtools.append_to_segment(segment, data)
    assert segment.size == 0
    assert os.path.getsize(segment.path(".log")) == 0
    # The largest offset that fits is accepted.
    last_fitting = one_record(40 + RELATIVE_OFFSET_MAX)
    logtools.append_to_segment(segment, last_fitting)
    assert segment.next_offset() == 40 + RELATIVE_OFFSET_MAX + 1


# --- read --------------------------------------------------------------------------------------


def test_read_of_an_empty_segment_returns_none(segments: Segments) -> None:
    segment = segments.new(40)
    assert segment.read(40, 1024) is None
    assert segment.read(0, 1024) is None


def test_read_past_the_last_offset_returns_none(segments: Segments) -> None:
    segment = segments.new(40)
    logtools.append_to_segment(segment, logtools.batch([b"hello", b"there"], base_offset=40))
    assert segment.read(42, 1024) is None
    assert segment.read(1000, 1024) is None


def test_read_below_the_first_offset_starts_at_the_first_batch(segments: Segments) -> None:
    segment = segments.new(40)
    data = logtools.batch([b"hello", b"there"], base_offset=50)
    logtools.append_to_segment(segment, data)
    assert segment.read(41, 300)[:2] == (data, 0)


def test_read_from_a_gap_starts_at_the_next_batch(segments: Segments) -> None:
    segment = segments.new(40)
    first = logtools.batch([b"hello", b"there"], base_offset=40)
    second = logtools.batch([b"alpha", b"beta"], base_offset=60)
    logtools.append_to_segment(segment, first)
    logtools.append_to_segment(segment, second)
    assert segment.read(55, 200)[:2] == (second, len(first))


def test_read_from_inside_a_batch_starts_at_that_batch(segments: Segments) -> None:
    segment = segments.new(40)
    first = logtools.batch([b"a", b"b", b"c"], base_offset=40)
    second = logtools.batch([b"d", b"e"], base_offset=43)
    logtools.append_to_segment(segment, first)
    logtools.append_to_segment(segment, second)
    assert read_batches(segment, 41) == [40, 43]
    assert read_batches(segment, 44) == [43]


# --- truncation --------------------------------------------------------------------------------


def test_truncate_keeps_the_batch_below_the_cut_and_removes_the_rest(segments: Segments) -> None:
    segment = segments.new(40)
    batches = [one_record(offset) for offset in range(40, 45)]
    for data in batches:
        logtools.append_to_segment(segment, data)
    removed = segment.truncate_to(43)
    assert removed == 2 * len(batches[0])
    assert read_batches(segment, 40) == [40, 41, 42]
    assert segment.read(43, 1024) is None
    assert segment.next_offset() == 43
    assert os.path.getsize(segment.path(".log")) == 3 * len(batches[0])


def test_truncating_an_empty_reopened_segment_re_expands_its_indexes_so_it_does_not_roll(
    segments: Segments,
) -> None:
    # Kafka's testTruncateEmptySegment: closing trims both indexes to their zero entries; a
    # truncation must give them room again, or the segment would look full and roll.
    segment_ms = 300_000
    closed = segments.new(0, segment_ms=segment_ms)
    segments.close(closed)
    assert os.path.getsize(closed.path(".index")) == 0
    assert os.path.getsize(closed.path(".timeindex")) == 0

    reopened = segments.new(0, created_ms=500, segment_ms=segment_ms)
    reopened.truncate_to(57)
    assert not reopened.offset_index.is_full
    assert not reopened.time_index.is_full
    no_timestamp = logtools.NO_TIMESTAMP
    assert not reopened.should_roll(1024, no_timestamp, 100, now_ms=500)
    # An empty segment does not roll on time, however long it waited...
    assert not reopened.should_roll(1024, no_timestamp, 100, now_ms=500 + segment_ms + 1)
    # ...but does roll when the next offset cannot be stored relative to its base.
    too_far = RELATIVE_OFFSET_MAX + 200
    assert reopened.should_roll(1024, no_timestamp, too_far, now_ms=500 + segment_ms + 1)


def test_truncation_reloads_the_largest_timestamp_and_next_offset_from_the_remaining_data(
    segments: Segments,
) -> None:
    # Kafka's testReloadLargestTimestampAndNextOffsetAfterTruncation: 30 one-record batches at
    # offsets 40..69 with timestamps 10 x offset, a time-index entry every second batch.
    size = len(one_record(40, 400))
    segment = segments.new(40, index_interval_bytes=2 * size - 1)
    for offset in range(40, 70):
        logtools.append_to_segment(segment, one_record(offset, offset * 10))
    assert segment.next_offset() == 70
    assert segment.time_index.entries == 30 // 2 - 1
    segment.truncate_to(41)
    assert segment.time_index.entries == 0
    assert segment.max_timestamp == 400, "the record left at offset 40 has timestamp 400"
    assert segment.next_offset() == 41


def test_truncating_below_the_base_empties_the_segment_and_its_offsets_can_be_appended_again(
    segments: Segments,
) -> None:
    # Kafka's testTruncateFull, with batches that carry no timestamp, so that segment.ms
    # counts from the segment's creation time, which emptying it resets.
    segment_ms = 1000
    segment = segments.new(40, created_ms=0, segment_ms=segment_ms)
    data = logtools.batch([b"hello", b"there"], base_offset=40)
    logtools.append_to_segment(segment, data)
    segment.truncate_to(0, now_ms=500)
    assert segment.size == 0
    assert os.path.getsize(segment.path(".log")) == 0
    assert segment.read(40, 1024) is None
    assert segment.next_offset() == 40
    assert not segment.offset_index.is_full
    assert not segment.time_index.is_full
    logtools.append_to_segment(segment, data)
    assert segment.read(40, 1024)[:2] == (data, 0)
    no_timestamp = logtools.NO_TIMESTAMP
    assert not segment.should_roll(len(data), no_timestamp, 43, now_ms=500 + segment_ms)
    assert segment.should_roll(len(data), no_timestamp, 43, now_ms=500 + segment_ms + 1)


def test_truncating_to_an_offset_in_a_gap_removes_the_batch_after_the_gap(
    segments: Segments,
) -> None:
    # Kafka's shouldTruncateEvenIfOffsetPointsToAGapInTheLog.
    segment = segments.new(40)
    first = logtools.batch([b"a", b"b"], base_offset=40)
    after_gap = logtools.batch([b"c", b"d"], base_offset=50)
    logtools.append_to_segment(segment, first)
    logtools.append_to_segment(segment, after_gap)
    segment.truncate_to(45)
    assert read_batches(segment, 40) == [40]
    assert segment.read(45, 1024) is None
    assert segment.next_offset() == 42
    assert segment.size == len(first)


# --- lookups by timestamp and the next offset -------------------------------------------------


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (420, (42, 420)),  # an indexed timestamp
        (421, (43, 430)),
        (430, (43, 430)),  # an un-indexed timestamp
        (431, (44, 440)),
        (401, (41, 410)),  # before the first indexed timestamp
        (399, (40, 400)),  # before the first timestamp
        (491, None),  # after the largest timestamp, 490
    ],
)
def test_find_offset_by_timestamp_returns_the_first_record_at_or_after_the_target(
    segments: Segments, target: int, expected: tuple[int, int] | None
) -> None:
    # Kafka's testFindOffsetByTimestamp: offsets 40..49, timestamps 10 x offset, an index
    # entry every second batch.
    size = len(one_record(40, 400))
    segment = segments.new(40, index_interval_bytes=2 * size - 1)
    for offset in range(40, 50):
        logtools.append_to_segment(segment, one_record(offset, offset * 10))
    assert segment.max_timestamp == 490
    assert segment.find_offset_by_timestamp(target, 0) == expected


def test_find_offset_by_timestamp_skips_records_below_the_starting_offset(
    segments: Segments,
) -> None:
    segment = segments.new(40)
    logtools.append_to_segment(
        segment, logtools.batch([b"a", b"b", b"c"], base_offset=40, timestamps=[500, 400, 600])
    )
    assert segment.find_offset_by_timestamp(450, 0) == (40, 500)
    assert segment.find_offset_by_timestamp(450, 41) == (42, 600)


def test_next_offset_is_the_base_when_empty_and_one_past_the_last_record(
    segments: Segments,
) -> None:
    segment = segments.new(40)
    assert segment.next_offset() == 40
    logtools.append_to_segment(segment, logtools.batch([b"a", b"b"], base_offset=40))
    logtools.append_to_segment(segment, logtools.batch([b"c"], base_offset=45))
    logtools.append_to_segment(segment, logtools.batch([b"d", b"e"], base_offset=51))
    assert segment.next_offset() == 53


# --- recovery of one segment ------------------------------------------------------------------


def write_hundred_indexed_batches(segments: Segments) -> LogSegment:
    """Kafka's recovery-test segment: offsets 0..99, one record per batch, timestamp 10 x
    offset, an index entry after nearly every batch (index.interval.bytes 10). Closed."""
    segment = segments.new(0, index_interval_bytes=10)
    for offset in range(100):
        logtools.append_to_segment(segment, one_record(offset, offset * 10))
    segments.close(segment)
    return segment


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_recovery_rebuilds_a_garbage_index_so_that_every_lookup_succeeds(
    segments: Segments, suffix: str
) -> None:
    # Kafka's testRecoveryFixesCorruptIndex / testRecoveryFixesCorruptTimeIndex.
    rng = logtools.seeded(34)
    closed = write_hundred_indexed_batches(segments)
    index_path = closed.path(suffix)
    length = os.path.getsize(index_path)
    assert length > 5
    logtools.write_at(index_path, 5, logtools.nonsense(rng, length - 5))

    (segment,) = segments.load_unclean(index_interval_bytes=10).segments
    for offset in range(100):
        assert read_batches(segment, offset, 1)[:1] == [offset]
        assert segment.find_offset_by_timestamp(offset * 10, 0) == (offset, offset * 10)
        expected = (offset + 1, offset * 10 + 10) if offset < 99 else None
        assert segment.find_offset_by_timestamp(offset * 10 + 1, 0) == expected


@pytest.mark.parametrize("seed", CORRUPTION_SEEDS)
def test_garbage_from_inside_a_batch_to_the_end_is_cut_exactly_at_that_batch(
    segments: Segments, seed: int
) -> None:
    # Kafka's testRecoveryWithCorruptMessage: nonsense from a random byte (0-14) of a random
    # batch to the end of the file; recovery keeps exactly the batches before it.
    rng = logtools.seeded(seed)
    segment = segments.new(0)
    positions = [
        logtools.append_to_segment(segment, one_record(offset, value=b"%d" % offset))
        for offset in range(20)
    ]
    segments.close(segment)
    damaged = rng.randrange(20)
    start = positions[damaged] + rng.randrange(15)
    log_path = segment.path(".log")
    file_size = os.path.getsize(log_path)
    logtools.write_at(log_path, start, logtools.nonsense(rng, file_size - start))

    loaded = segments.load_unclean()
    assert len(loaded.segments) == 1
    kept = logtools.file_bytes(log_path)
    assert [h.last_offset for h in logtools.headers(kept)] == list(range(damaged)), seed
    assert len(kept) == positions[damaged], seed
    assert loaded.log_end_offset == damaged, seed
    assert loaded.report.bytes_truncated == file_size - positions[damaged], seed
    assert loaded.report.truncated_at == positions[damaged], seed


def test_damage_with_valid_batches_after_it_is_refused_and_the_file_is_left_untouched(
    segments: Segments,
) -> None:
    # Unlike Kafka, eoslog does not cut a log whose damage has valid data after it: that is
    # not a torn tail, and cutting would silently drop acknowledged records.
    segment = segments.new(0)
    positions = [logtools.append_to_segment(segment, one_record(o)) for o in range(20)]
    segments.close(segment)
    log_path = segment.path(".log")
    logtools.flip_bit(log_path, positions[7] + 70, 3)
    before = logtools.file_bytes(log_path)
    with pytest.raises(CorruptRecordError) as raised:
        segments.load_unclean(recovery_point=20)  # all 20 records known durable
    assert f"byte {positions[7]}" in str(raised.value)
    assert logtools.file_bytes(log_path) == before


# --- offset continuity of scanned batches (the native check every read runs) -----------------

INT64 = st.integers(-(1 << 63), (1 << 63) - 1)


def _infos(rows: list[tuple[int, int]]) -> np.ndarray:
    infos = np.zeros(len(rows), dtype=scan.BATCH_INFO)
    for i, (base, last) in enumerate(rows):
        infos[i]["base_offset"], infos[i]["last_offset"] = base, last
    return infos


def _violation_by_definition(rows: list[tuple[int, int]], next_offset: int) -> int | None:
    expected = next_offset
    for i, (base, last) in enumerate(rows):
        if base != expected or last < base:
            return i
        expected = (last + 1 + (1 << 63)) % (1 << 64) - (1 << 63)  # Java's long wraps
    return None


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(-1, 3)), max_size=8),
    st.integers(0, 3),
    st.one_of(st.none(), st.integers(0, 7)),
)
def test_first_offset_violation_finds_the_first_batch_not_continuing_the_previous(
    shape: list[tuple[int, int]], next_offset: int, jump_at: int | None
) -> None:
    # Mostly contiguous runs (each batch starting right after the previous), with one jump.
    rows, expected = [], next_offset
    for i, (gap, span) in enumerate(shape):
        base = expected + (gap if i == jump_at else 0)
        rows.append((base, base + span))
        expected = base + span + 1
    assert first_offset_violation(_infos(rows), next_offset) == _violation_by_definition(
        rows, next_offset
    )


@given(st.lists(st.tuples(INT64, INT64), max_size=4), INT64)
def test_first_offset_violation_wraps_as_javas_long(
    rows: list[tuple[int, int]], next_offset: int
) -> None:
    assert first_offset_violation(_infos(rows), next_offset) == _violation_by_definition(
        rows, next_offset
    )


def test_first_starting_at_or_past_names_the_first_batch_from_the_offset() -> None:
    infos = _infos([(0, 4), (5, 9), (10, 14)])
    assert [scan.first_starting_at_or_past(infos, o) for o in (0, 3, 5, 10, 14)] == [0, 1, 1, 2, -1]
    assert scan.first_starting_at_or_past(infos[:0], 0) == -1
    assert scan.first_offset_violation(infos[:0], 0) == -1


@pytest.mark.parametrize("ahead", ["offset", "timestamp"])
def test_a_time_index_entry_past_the_segment_is_rebuilt_before_the_final_entry(
    segments: Segments, ahead: str
) -> None:
    # Regression (a CI fuzz run of partition_directory: a clean-shutdown directory whose time
    # index named an offset past the log, then close()): the final time-index entry of a roll
    # or close landed below the wrong entry and raised InvalidOffsetError, a bare ValueError,
    # so the broker closed without its clean-shutdown marker.
    segment = segments.new(0)
    for offset in range(3):
        logtools.append_to_segment(segment, one_record(offset, logtools.TS + offset))
    largest = segment.max_timestamp, segment.offset_of_max_timestamp
    assert largest == (logtools.TS + 2, 2)
    forged = (largest[0], 50) if ahead == "offset" else (largest[0] + 1_000, 2)
    segment.time_index.maybe_append(*forged, skip_full_check=True)
    segments.close(segment)  # raised before
    reopened = segments.new(0)
    assert reopened.time_index.last_entry == largest
