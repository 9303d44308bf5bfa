"""The partition log (docs/api.md "Partition log"; docs/format.md §5.9-§5.11, §10): appends with
offset assignment and validation, reads of whole batches, rolls, lookups by time, retention,
truncation and the three durability modes.

Every broker runs with background=False and a driven clock, so time-based behaviour (segment.ms,
retention.ms, LogAppendTime) is exact. Sync counts come from a FileSystem wrapper around the
real one that records what each fsync covered.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping

import pytest

import eoslog
from eoslog._ext import scan
from eoslog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from eoslog.log.partition import AppendInfo, PartitionLog
from eoslog.record import codec
from tests.support import logtools
from tests.support.logtools import OpenBroker

TS = logtools.TS
HOUR_MS = 3_600_000


def new_topic(
    broker: eoslog.Broker, config: Mapping[str, object] | None = None, name: str = "t"
) -> PartitionLog:
    broker.create_topic(name, 1, config=dict(config or {}))
    return broker.log(name, 0)


def single(index: int, timestamp: int = TS) -> bytes:
    """A client batch of one 8-byte record; all such batches have the same size."""
    return logtools.batch(logtools.values(index, 1), timestamps=timestamp)


SINGLE_BYTES = len(single(0))
# Small index files keep the byte-for-byte "nothing changed" comparisons cheap (a default index
# file is preallocated to 10 MiB).
SMALL_INDEXES = {"segment.index.bytes": 4096}


def bases(log: PartitionLog) -> list[int]:
    return [segment.base_offset for segment in log.segments]


def offsets(log: PartitionLog) -> list[int]:
    return [record.offset for record in logtools.read_all(log)]


# --- append ------------------------------------------------------------------------------------


def test_append_assigns_consecutive_offsets_from_the_log_end(open_broker: OpenBroker) -> None:
    broker = open_broker()
    log = new_topic(broker)
    infos = [log.append_batch(logtools.batch(logtools.values(0, n))) for n in (1, 3, 5)]
    assert infos == [
        AppendInfo(0, 0, -1, False),
        AppendInfo(1, 3, -1, False),
        AppendInfo(4, 8, -1, False),
    ]
    assert log.log_end_offset == 9
    got = logtools.read_all(log)
    assert [r.offset for r in got] == list(range(9))
    expected_values = logtools.values(0, 1) + logtools.values(0, 3) + logtools.values(0, 5)
    assert [r.value for r in got] == expected_values
    broker.close()
    reopened = open_broker().log("t", 0)
    assert reopened.append_batch(single(9)) == AppendInfo(9, 9, -1, False)


def test_log_append_time_topic_stamps_the_clock_time_on_the_batch_and_its_records(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    log = new_topic(open_broker(), {"message.timestamp.type": "LogAppendTime"})
    clock.now_ms = TS + 12_345
    info = log.append_batch(logtools.batch(logtools.values(0, 3), timestamps=TS))
    assert info.log_append_time_ms == TS + 12_345
    data = bytes(log.read(0).records)
    stored = logtools.header(data)
    assert stored.timestamp_type == 1
    assert stored.max_timestamp == TS + 12_345
    assert [r.timestamp for r in logtools.records(data)] == [TS + 12_345] * 3


def test_create_time_topic_keeps_the_producer_timestamps(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    log = new_topic(open_broker())
    clock.now_ms = TS + 12_345
    info = log.append_batch(logtools.batch(logtools.values(0, 3), timestamps=[TS, TS + 7, TS + 3]))
    assert info.log_append_time_ms == -1
    data = bytes(log.read(0).records)
    assert logtools.header(data).timestamp_type == 0
    assert [r.timestamp for r in logtools.records(data)] == [TS, TS + 7, TS + 3]


def test_batch_over_max_message_bytes_raises_record_too_large_and_writes_nothing(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    data = logtools.batch(logtools.values(0, 4))
    log = new_topic(broker, {"max.message.bytes": len(data) - 1, **SMALL_INDEXES})
    before = logtools.contents(log.directory)
    with pytest.raises(RecordTooLargeError):
        log.append_batch(data)
    assert log.log_end_offset == 0
    assert logtools.contents(log.directory) == before
    # Exactly max.message.bytes is allowed (Kafka rejects only a larger batch).
    at_limit = new_topic(broker, {"max.message.bytes": len(data)}, name="u")
    assert at_limit.append_batch(data).last_offset == 3


def test_batch_over_segment_bytes_raises_record_batch_too_large_and_writes_nothing(
    open_broker: OpenBroker,
) -> None:
    data = logtools.batch(logtools.values(0, 4))
    log = new_topic(open_broker(), {"segment.bytes": len(data) - 1, **SMALL_INDEXES})
    before = logtools.contents(log.directory)
    with pytest.raises(RecordBatchTooLargeError):
        log.append_batch(data)
    assert log.log_end_offset == 0
    assert logtools.contents(log.directory) == before


def _bad_crc() -> bytes:
    data = bytearray(logtools.batch(logtools.values(0, 2), timestamps=TS))
    data[-1] ^= 0x01
    return bytes(data)


BAD_BATCHES: dict[str, tuple[Callable[[], bytes], type[Exception]]] = {
    "base offset not 0": (
        lambda: logtools.batch(logtools.values(0, 2), base_offset=5),
        InvalidRecordError,
    ),
    "control batch": (
        lambda: codec.build_control_batch(
            1, producer_id=7, producer_epoch=0, coordinator_epoch=0, timestamp=TS
        ),
        InvalidRecordError,
    ),
    "bad crc": (_bad_crc, CorruptRecordError),
    "truncated": (lambda: logtools.batch(logtools.values(0, 2))[:-1], CorruptRecordError),
    "two batches": (lambda: single(0) + single(1), InvalidRecordError),
    "empty": (lambda: b"", CorruptRecordError),
}


@pytest.mark.parametrize("case", sorted(BAD_BATCHES))
def test_bad_client_batch_raises_a_typed_error_and_leaves_the_log_unchanged(
    open_broker: OpenBroker, case: str
) -> None:
    make, error = BAD_BATCHES[case]
    log = new_topic(open_broker(), SMALL_INDEXES)
    log.append_batch(single(0))
    before = logtools.contents(log.directory)
    with pytest.raises(error):
        log.append_batch(make())
    assert log.log_end_offset == 1
    assert logtools.contents(log.directory) == before
    assert log.append_batch(single(1)).base_offset == 1, "a rejected batch consumed offsets"


# --- read --------------------------------------------------------------------------------------


def test_read_returns_whole_batches_starting_at_the_batch_holding_the_offset(
    open_broker: OpenBroker,
) -> None:
    log = new_topic(open_broker())
    for first in (0, 3, 6):
        log.append_batch(logtools.batch(logtools.values(first, 3)))
    data = bytes(log.read(4).records)
    assert [h.base_offset for h in logtools.headers(data)] == [3, 6]
    assert [r.offset for r in logtools.records(data)] == [3, 4, 5, 6, 7, 8]
    assert len(data) == sum(h.size_in_bytes for h in logtools.headers(data))


def test_read_respects_max_bytes_but_returns_at_least_one_batch(open_broker: OpenBroker) -> None:
    log = new_topic(open_broker())
    for i in range(5):
        log.append_batch(single(i))
    cases = {1: 1, SINGLE_BYTES: 1, 2 * SINGLE_BYTES + SINGLE_BYTES // 2: 2, 5 * SINGLE_BYTES: 5}
    for max_bytes, batches in cases.items():
        data = bytes(log.read(0, max_bytes=max_bytes).records)
        assert len(logtools.headers(data)) == batches, max_bytes
        assert len(data) == batches * SINGLE_BYTES, max_bytes


def test_a_read_of_several_batches_carries_their_scanned_rows(open_broker: OpenBroker) -> None:
    """The rows the read scanned go with the fetch (FetchResult.batches), so that plan_fetch
    does not scan the headers again: they must be exactly the records' batches."""
    log = new_topic(open_broker())
    for i in range(5):
        log.append_batch(single(i))
    result = log.read(1, max_bytes=3 * SINGLE_BYTES)
    assert result.batches is not None
    rescanned, stop, status = scan.scan_batches(result.records, verify_crc=True)
    assert (stop, status) == (len(result.records), 0)
    assert result.batches.tobytes() == rescanned.tobytes()
    assert list(result.batches["base_offset"]) == [1, 2, 3]
    # One batch is returned without a scan; the plan scans it itself.
    assert log.read(4).batches is None


def test_fetch_result_reports_high_watermark_last_stable_offset_and_log_start(
    open_broker: OpenBroker,
) -> None:
    log = new_topic(open_broker())
    for i in range(3):
        log.append_batch(single(i))
    result = log.read(1)
    assert (result.high_watermark, result.last_stable_offset, result.log_start_offset) == (3, 3, 0)
    assert result.aborted_transactions == []
    assert (log.high_watermark, log.last_stable_offset) == (3, 3)


def test_read_at_the_log_end_returns_no_records(open_broker: OpenBroker) -> None:
    log = new_topic(open_broker())
    assert bytes(log.read(0).records) == b""
    for i in range(3):
        log.append_batch(single(i))
    result = log.read(3)
    assert bytes(result.records) == b""
    assert result.high_watermark == 3


@pytest.mark.parametrize("offset", [-1, 4, 1 << 40])
def test_read_outside_log_start_to_log_end_raises_offset_out_of_range(
    open_broker: OpenBroker, offset: int
) -> None:
    log = new_topic(open_broker())
    for i in range(3):
        log.append_batch(single(i))
    with pytest.raises(OffsetOutOfRangeError):
        log.read(offset)


# --- roll --------------------------------------------------------------------------------------


def test_rolls_when_the_next_batch_would_pass_segment_bytes(open_broker: OpenBroker) -> None:
    log = new_topic(open_broker(), {"segment.bytes": 3 * SINGLE_BYTES})
    for i in range(7):
        log.append_batch(single(i))
    assert bases(log) == [0, 3, 6]
    assert [segment.size for segment in log.segments] == [
        3 * SINGLE_BYTES,
        3 * SINGLE_BYTES,
        SINGLE_BYTES,
    ]
    # The rolled segments' files end where their logs do (the active one may run ahead).
    rolled = [os.path.getsize(segment.path(".log")) for segment in log.segments[:-1]]
    assert rolled == [3 * SINGLE_BYTES, 3 * SINGLE_BYTES]
    assert offsets(log) == list(range(7))


def test_segment_files_are_named_by_base_offset_in_twenty_digits(open_broker: OpenBroker) -> None:
    broker = open_broker()
    log = new_topic(broker, {"segment.bytes": 3 * SINGLE_BYTES})
    for i in range(7):
        log.append_batch(single(i))
    broker.close()
    names = os.listdir(log.directory)
    pattern = re.compile(r"(\d{20})\.(log|index|timeindex|snapshot)")
    assert all(pattern.fullmatch(name) for name in names), names
    assert sorted(name for name in names if name.endswith(".log")) == [
        "00000000000000000000.log",
        "00000000000000000003.log",
        "00000000000000000006.log",
    ]


def test_rolls_on_segment_ms_measured_between_batch_timestamps(open_broker: OpenBroker) -> None:
    log = new_topic(open_broker(), {"segment.ms": 1000})
    log.append_batch(single(0, TS))
    log.append_batch(single(1, TS + 1000))  # waited exactly segment.ms: no roll
    assert bases(log) == [0]
    log.append_batch(single(2, TS + 1001))
    assert bases(log) == [0, 2]


def test_rolls_on_segment_ms_by_the_clock_when_batches_have_no_timestamp(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    log = new_topic(open_broker(), {"segment.ms": 1000})  # created at TS
    clock.now_ms = TS + 500
    log.append_batch(single(0, -1))
    clock.now_ms = TS + 1000
    log.append_batch(single(1, -1))
    assert bases(log) == [0]
    clock.now_ms = TS + 1001
    log.append_batch(single(2, -1))
    assert bases(log) == [0, 2]


def test_segment_ms_counts_from_the_first_batch_timestamp_across_a_reopen(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    # Kafka reads the first batch's timestamp back from the .log (LogSegment
    # loadFirstBatchTimestamp), so a restart does not restart the segment's age.
    broker = open_broker()
    new_topic(broker, {"segment.ms": 1000}).append_batch(single(0, TS))
    broker.close()
    clock.now_ms = TS + 1001
    log = open_broker().log("t", 0)
    log.append_batch(single(1, TS + 1001))
    assert bases(log) == [0, 1]


def test_rolls_when_the_time_index_is_full(open_broker: OpenBroker) -> None:
    # 48-byte indexes: 4 time-index slots, the last kept for the roll entry, so full after 3
    # entries; with index.interval.bytes 0 every batch after the first adds one.
    log = new_topic(open_broker(), {"segment.index.bytes": 48, "index.interval.bytes": 0})
    for i in range(12):
        log.append_batch(single(i, TS + i))
    assert bases(log) == [0, 4, 8]
    assert offsets(log) == list(range(12))


def test_rolls_when_the_offset_index_is_full(open_broker: OpenBroker) -> None:
    # Equal timestamps add only one time-index entry, so the 6-entry offset index fills first:
    # after the 7th batch of each segment.
    log = new_topic(open_broker(), {"segment.index.bytes": 48, "index.interval.bytes": 0})
    for i in range(16):
        log.append_batch(single(i, TS))
    assert bases(log) == [0, 7, 14]
    assert offsets(log) == list(range(16))


# --- lookups by timestamp ----------------------------------------------------------------------


def test_offset_for_timestamp_finds_the_first_record_at_or_after_the_target_across_segments(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    log = new_topic(broker, {"segment.bytes": 3 * SINGLE_BYTES})
    for i in range(9):
        log.append_batch(single(i, TS + 10 * i))
    assert len(log.segments) == 3

    def check(log: PartitionLog) -> None:
        assert log.offset_for_timestamp(TS - 5) == (0, TS)
        for i in range(9):
            assert log.offset_for_timestamp(TS + 10 * i) == (i, TS + 10 * i)
            after = (i + 1, TS + 10 * i + 10) if i < 8 else None
            assert log.offset_for_timestamp(TS + 10 * i + 1) == after

    check(log)
    broker.close()
    check(open_broker().log("t", 0))


# --- retention ---------------------------------------------------------------------------------


def test_retention_ms_deletes_whole_expired_segments_and_moves_the_log_start(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    log = new_topic(broker, {"segment.bytes": 3 * SINGLE_BYTES, "retention.ms": HOUR_MS})
    for i, timestamp in enumerate([TS] * 3 + [TS + 2 * HOUR_MS] * 3 + [TS + 4 * HOUR_MS] * 2):
        log.append_batch(single(i, timestamp))
    assert bases(log) == [0, 3, 6]
    clock.now_ms = TS + 4 * HOUR_MS
    broker.run_maintenance()
    assert bases(log) == [6]
    assert log.log_start_offset == 6
    assert logtools.partition_files(log.directory, ".log") == [
        os.path.join(log.directory, "00000000000000000006.log")
    ]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5)
    assert offsets(log) == [6, 7]


def test_expired_active_segment_is_rolled_away_and_the_log_continues_at_its_end(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    log = new_topic(broker, {"retention.ms": HOUR_MS})
    for i in range(3):
        log.append_batch(single(i, TS))
    clock.now_ms = TS + 2 * HOUR_MS
    broker.run_maintenance()
    assert (log.log_start_offset, log.log_end_offset) == (3, 3)
    assert bases(log) == [3]
    assert [os.path.basename(p) for p in logtools.partition_files(log.directory, ".log")] == [
        "00000000000000000003.log"
    ]
    assert bytes(log.read(3).records) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0)
    assert log.append_batch(single(3, clock.now_ms)).base_offset == 3
    broker.close()
    reopened = open_broker().log("t", 0)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (3, 4)


@pytest.mark.parametrize(
    ("retention_bytes", "remaining_bases"),
    [(2 * SINGLE_BYTES + 1, [2, 3, 4]), (2 * SINGLE_BYTES, [3, 4])],
)
def test_retention_bytes_deletes_the_oldest_segments_while_the_rest_stays_at_or_above_the_limit(
    open_broker: OpenBroker, retention_bytes: int, remaining_bases: list[int]
) -> None:
    broker = open_broker()
    config = {"segment.bytes": SINGLE_BYTES, "retention.bytes": retention_bytes}
    log = new_topic(broker, config)
    for i in range(5):
        log.append_batch(single(i))
    assert bases(log) == [0, 1, 2, 3, 4]
    broker.run_maintenance()
    assert bases(log) == remaining_bases
    assert log.log_start_offset == remaining_bases[0]
    assert offsets(log) == list(range(remaining_bases[0], 5))


def test_records_left_by_a_truncation_keep_their_timestamp_and_survive_retention(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    log = new_topic(broker, {"retention.ms": HOUR_MS})
    for i in range(3):
        log.append_batch(single(i, TS))
    log.truncate_to(2)
    clock.now_ms = TS + 60_000
    broker.run_maintenance()
    assert log.log_start_offset == 0, "retention deleted records one minute old"
    assert offsets(log) == [0, 1]


def test_batches_without_timestamps_are_not_deleted_by_retention_as_soon_as_written(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    # Kafka falls back to the segment file's modification time when a segment has no
    # timestamps (LogSegment.largestTimestamp), so such records still live retention.ms.
    broker = open_broker()
    log = new_topic(broker, {"retention.ms": HOUR_MS})
    for i in range(3):
        log.append_batch(single(i, -1))
    clock.advance(60_000)
    broker.run_maintenance()
    assert log.log_start_offset == 0, "retention deleted records written one minute ago"
    assert offsets(log) == [0, 1, 2]


# --- truncation --------------------------------------------------------------------------------


def test_truncate_to_removes_records_at_and_after_the_offset_across_segments(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    log = new_topic(broker, {"segment.bytes": 3 * SINGLE_BYTES})
    for i in range(8):
        log.append_batch(single(i))
    assert bases(log) == [0, 3, 6]
    log.truncate_to(4)
    assert log.log_end_offset == 4
    assert bases(log) == [0, 3]
    assert [os.path.basename(p) for p in logtools.partition_files(log.directory, ".log")] == [
        "00000000000000000000.log",
        "00000000000000000003.log",
    ]
    assert offsets(log) == [0, 1, 2, 3]
    assert log.append_batch(single(4)).base_offset == 4
    broker.close()
    assert offsets(open_broker().log("t", 0)) == [0, 1, 2, 3, 4]


def test_a_segment_truncated_to_empty_counts_segment_ms_from_the_truncation(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    # Kafka's testTruncateFull: emptying a segment resets its creation time, so batches
    # without timestamps appended later do not inherit its age.
    log = new_topic(open_broker(), {"segment.ms": 1000})  # created at TS
    log.append_batch(single(0, -1))
    clock.now_ms = TS + 900
    log.truncate_to(0)
    clock.now_ms = TS + 1500
    log.append_batch(single(0, -1))
    clock.now_ms = TS + 1800  # 900 ms after the truncation
    log.append_batch(single(1, -1))
    assert bases(log) == [0]


# --- durability --------------------------------------------------------------------------------


def active_log_path(log: PartitionLog) -> str:
    return log.segments[-1].path(".log")


def topic_log_syncs(fs: logtools.CountingFileSystem, log: PartitionLog) -> int:
    return sum(n for path, n in fs.syncs.items() if path.startswith(log.directory + os.sep))


def test_always_durability_makes_each_append_durable_before_it_returns(
    open_broker: OpenBroker,
) -> None:
    fs = logtools.CountingFileSystem()
    log = new_topic(open_broker("always", fs), {"segment.bytes": 4 * SINGLE_BYTES})
    for i in range(10):
        log.append_batch(single(i))
        path = active_log_path(log)
        assert fs.durable_size.get(path) == os.path.getsize(path), f"append {i} not synced"
    assert len(log.segments) == 3
    for segment in log.segments:
        path = segment.path(".log")
        assert fs.durable_size[path] == os.path.getsize(path), path
    assert sum(fs.syncs[s.path(".log")] for s in log.segments) >= 10


def test_always_durability_lets_concurrent_appenders_share_syncs(open_broker: OpenBroker) -> None:
    # A slow fsync (2 ms, like a disk) gives the threads something to share.
    fs = logtools.CountingFileSystem(sync_delay_s=0.002)
    log = new_topic(open_broker("always", fs))
    threads_count, appends_per_thread = 8, 25
    start = threading.Barrier(threads_count)
    acknowledged: dict[int, list[AppendInfo]] = {}

    def appender(thread: int) -> None:
        start.wait()
        acknowledged[thread] = [
            log.append_batch(single(thread * 1000 + i)) for i in range(appends_per_thread)
        ]

    threads = [threading.Thread(target=appender, args=(t,)) for t in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = threads_count * appends_per_thread
    assigned = sorted(info.base_offset for infos in acknowledged.values() for info in infos)
    assert assigned == list(range(total))
    syncs = fs.syncs[active_log_path(log)]
    assert syncs < total, f"{syncs} syncs for {total} appends: no group commit"
    assert fs.durable_size[active_log_path(log)] == os.path.getsize(active_log_path(log))
    by_offset = {r.offset: r.value for r in logtools.read_all(log)}
    for thread, infos in acknowledged.items():
        values = [by_offset[info.base_offset] for info in infos]
        assert values == logtools.values(thread * 1000, appends_per_thread)


def test_always_durability_syncs_an_append_made_after_a_truncation(
    open_broker: OpenBroker,
) -> None:
    fs = logtools.CountingFileSystem()
    log = new_topic(open_broker("always", fs))
    for i in range(10):
        log.append_batch(single(i))
    log.truncate_to(5)
    log.append_batch(single(5))
    path = active_log_path(log)
    assert fs.durable_size[path] == os.path.getsize(path), "acknowledged append is not durable"
    assert log.recovery_point == 6


def test_commit_durability_flush_makes_appends_durable_and_advances_the_recovery_point(
    open_broker: OpenBroker,
) -> None:
    fs = logtools.CountingFileSystem()
    log = new_topic(open_broker("commit", fs))
    for i in range(5):
        log.append_batch(single(i))
    assert topic_log_syncs(fs, log) == 0, "commit durability synced a plain append"
    assert log.recovery_point == 0
    log.flush()
    path = active_log_path(log)
    assert fs.durable_size[path] == os.path.getsize(path)
    assert log.recovery_point == 5


def test_none_durability_syncs_segment_data_only_at_close(open_broker: OpenBroker) -> None:
    fs = logtools.CountingFileSystem()
    broker = open_broker("none", fs)
    log = new_topic(broker, {"segment.bytes": 4 * SINGLE_BYTES})
    for i in range(10):
        log.append_batch(single(i))
    broker.run_maintenance()
    assert topic_log_syncs(fs, log) == 0
    segments = log.segments
    broker.close()
    for segment in segments:
        path = segment.path(".log")
        assert fs.durable_size.get(path) == os.path.getsize(path), path
