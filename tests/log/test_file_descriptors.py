"""File descriptors per segment (docs/design.md "Files and file descriptors"): a cold segment
holds one, its .log's. Its offset and time indexes are opened on first use, and of the cold
.log files read through a mapping at most limits.cold_log_mappings_max stay mapped (a mapping
holds a descriptor of its own). A log of hundreds of segments therefore opens, reads from the
start, looks up by time and appends under a descriptor limit far below three per segment.

Counts are of /proc/self/fd (Linux), never of time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import eoslog
from eoslog import limits
from eoslog.log.partition import PartitionLog
from tests.support import logtools

pytestmark = pytest.mark.skipif(
    not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd"
)

# Small segments: about a dozen 60-byte records each. Index entries every 256 bytes, so the
# indexes of cold segments hold entries and are mapped when opened.
SMALL_SEGMENTS = {
    "segment.bytes": 1024,
    "segment.index.bytes": 4096,
    "index.interval.bytes": 256,
}
SEGMENTS = 300
# Below two descriptors per segment (an open used to take five), above one plus the cold
# mappings and FIXED_MAX.
DESCRIPTOR_LIMIT = 512
# Descriptors a broker holds besides its segments' (lock, checkpoints, the active segment).
FIXED_MAX = 24


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def fill(path: str, segments: int) -> None:
    """A topic t, one partition, of at least `segments` segments, closed cleanly."""
    with eoslog.open(path, background=False) as broker:
        broker.create_topic("t", 1, config=SMALL_SEGMENTS)
        log = broker.log("t", 0)
        index = 0
        while len(log.segments) < segments:
            batch = logtools.values(index, 1, 60)
            log.append_batch(logtools.batch(batch, timestamps=logtools.TS + index))
            index += 1


def read_from_start(log: PartitionLog) -> int:
    offset, count = log.log_start_offset, 0
    while offset < log.log_end_offset:
        batches = logtools.headers(log.read(offset).records)
        offset = batches[-1].last_offset + 1
        count += sum(header.last_offset - header.base_offset + 1 for header in batches)
    return count


def test_a_cold_segment_holds_one_descriptor_after_open_and_after_a_read_from_the_start(
    tmp_path: os.PathLike[str],
) -> None:
    path = os.path.join(tmp_path, "data")
    fill(path, SEGMENTS)
    before = open_fds()
    with eoslog.open(path, background=False) as broker:
        log = broker.log("t", 0)
        segments = len(log.segments)
        assert open_fds() - before <= segments + FIXED_MAX
        assert read_from_start(log) == log.log_end_offset
        assert open_fds() - before <= segments + limits.cold_log_mappings_max + FIXED_MAX
        middle = log.segments[segments // 2].base_offset
        assert log.offset_for_timestamp(logtools.TS + middle) == (middle, logtools.TS + middle)
        # The segments a lookup by time passes get their indexes opened (each index one
        # descriptor, its mapping's: the file is closed once mapped), as Kafka's LazyIndex.
        cold = segments + limits.cold_log_mappings_max + FIXED_MAX
        assert open_fds() - before <= cold + 2 * (segments // 2 + 1)
    assert open_fds() == before


def test_segments_deleted_by_retention_give_their_descriptors_back(
    tmp_path: os.PathLike[str],
) -> None:
    path = os.path.join(tmp_path, "data")
    fill(path, SEGMENTS)
    before = open_fds()
    clock = logtools.Clock()
    with eoslog.open(path, background=False, clock_ms=clock) as broker:
        log = broker.log("t", 0)
        read_from_start(log)
        log.delete_records(log.segments[-2].base_offset)
        broker.run_maintenance()
        assert len(log.segments) <= 2
        # Deleted segments stay open for a grace period (reads that captured them finish).
        clock.advance(limits.retired_segment_grace_ms)
        broker.run_maintenance()
        assert open_fds() - before <= 2 + FIXED_MAX


def test_a_log_of_hundreds_of_segments_works_under_a_descriptor_limit_of_512(
    tmp_path: os.PathLike[str],
) -> None:
    """Before indexes were opened lazily this open failed with EMFILE (five descriptors per
    segment at open: the .log, and each index open and mapped; six once read)."""
    path = os.path.join(tmp_path, "data")
    fill(path, SEGMENTS)
    script = textwrap.dedent(
        f"""
        import resource
        import eoslog
        from tests.support import logtools
        from tests.log.test_file_descriptors import read_from_start
        resource.setrlimit(resource.RLIMIT_NOFILE, ({DESCRIPTOR_LIMIT}, {DESCRIPTOR_LIMIT}))
        with eoslog.open({path!r}, background=False) as broker:
            log = broker.log("t", 0)
            assert len(log.segments) >= {SEGMENTS}
            end = log.log_end_offset
            assert read_from_start(log) == end
            assert log.offset_for_timestamp(logtools.TS) == (0, logtools.TS)
            info = log.append_batch(logtools.batch(logtools.values(end, 1, 60)))
            assert info.base_offset == end
            assert read_from_start(log) == end + 1
        """
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_a_view_of_a_cold_segment_stays_readable_after_later_reads_unmap_its_file(
    tmp_path: os.PathLike[str],
) -> None:
    path = os.path.join(tmp_path, "data")
    fill(path, limits.cold_log_mappings_max * 2)
    with eoslog.open(path, background=False) as broker:
        log = broker.log("t", 0)
        first = log.read(0).records
        kept = bytes(first)
        mapped_with_first = open_fds()
        read_from_start(log)  # maps and unmaps every other cold segment meanwhile
        assert bytes(first) == kept
        assert logtools.records(first)[0].value == logtools.values(0, 1, 60)[0]
        del first
        # The first segment's mapping is unmapped by later reads once its view is gone.
        read_from_start(log)
        assert open_fds() <= mapped_with_first + limits.cold_log_mappings_max


def test_indexes_a_reader_holds_across_a_roll_still_answer_lookups(
    tmp_path: os.PathLike[str],
) -> None:
    """A roll lets go of the rolled segment's index files, while a lookup on another thread
    may have just fetched the index: it answers as before, from a copy of the entries."""
    with eoslog.open(os.path.join(tmp_path, "data"), background=False) as broker:
        broker.create_topic("t", 1, config=SMALL_SEGMENTS)
        log = broker.log("t", 0)
        for index in range(6):
            log.append_batch(logtools.batch(logtools.values(index, 1, 60), timestamps=index))
        segment = log.segments[-1]
        offsets, times = segment.offset_index, segment.time_index
        assert offsets.entries > 0
        before = offsets.lookup(5), times.lookup(5)
        while len(log.segments) == 1:
            log.append_batch(logtools.batch(logtools.values(0, 1, 60), timestamps=9))
        assert (offsets.lookup(5), times.lookup(5)) == before
        assert segment.offset_index is not offsets  # opened again on this use
        assert segment.offset_index.lookup(5) == before[0]
