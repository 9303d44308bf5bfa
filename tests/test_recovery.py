"""Opening a log directory after a clean or unclean stop (FORMAT.md §9; KAFKA_BEHAVIOURS.md 80;
RELIABILITY.md invariants 7 and 8).

An unclean stop is made two ways: by a child process that appends and dies with os._exit (what
a crash leaves: no clean-shutdown marker, no checkpoints written at close, indexes still at
their preallocated size), or by closing cleanly and then removing the marker and editing the
checkpoints, when a test needs a precise recovery point. Damage is done with plain file writes.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping

import pytest

import eoslog
import logtools
from eoslog.errors import OffsetOutOfRangeError
from eoslog.fs import PosixFileSystem
from eoslog.log import checkpoints
from eoslog.log.partition import PartitionLog
from eoslog.record import codec

TS = logtools.TS
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
MARKER = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
DAMAGE_SEEDS = range(12)
GARBAGE_SEEDS = range(5)
OpenBroker = Callable[..., eoslog.Broker]


def single(index: int, timestamp: int = TS) -> bytes:
    return logtools.batch(logtools.values(index, 1), timestamps=timestamp)


SINGLE_BYTES = len(single(0))


@pytest.fixture
def data_dir(tmp_path: os.PathLike[str]) -> str:
    return os.path.join(tmp_path, "data")


@pytest.fixture
def open_broker(data_dir: str) -> Iterator[OpenBroker]:
    """open_broker(path=data_dir) with a fixed clock; closed at teardown."""
    opened: list[eoslog.Broker] = []

    def _open(path: str = data_dir) -> eoslog.Broker:
        broker = eoslog.open(path, clock_ms=logtools.Clock(TS), background=False)
        opened.append(broker)
        return broker

    yield _open
    for broker in opened:
        broker.close()


def write_topic(
    open_broker: OpenBroker, count: int, config: Mapping[str, object], *, step_ms: int = 10
) -> str:
    """Topic t (one partition) with `count` one-record batches, timestamps TS + step_ms x i,
    closed cleanly. Returns the partition directory."""
    broker = open_broker()
    broker.create_topic("t", 1, config=dict(config))
    log = broker.log("t", 0)
    for i in range(count):
        log.append_batch(single(i, TS + step_ms * i))
    broker.close()
    return log.directory


def crash_after(data_dir: str, body: str) -> None:
    """Run `body` in a child process that has `broker` open on data_dir (clock fixed at TS)
    and `single` at hand, then dies with os._exit: no close, no marker, no checkpoints."""
    script = textwrap.dedent(
        """
        import os, sys
        sys.path.insert(0, {tests!r})
        import eoslog, logtools
        def single(i, timestamp=logtools.TS):
            return logtools.batch(logtools.values(i, 1), timestamps=timestamp)
        broker = eoslog.open({path!r}, clock_ms=lambda: logtools.TS, background=False)
        """
    ).format(tests=TESTS_DIR, path=data_dir)
    script += textwrap.dedent(body) + "\nos._exit(0)\n"
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


def remove_marker(data_dir: str) -> None:
    os.unlink(os.path.join(data_dir, MARKER))


def write_checkpoint(data_dir: str, name: str, offsets: Mapping[tuple[str, int], int]) -> None:
    """A Kafka checkpoint file written by hand: version 0, count, `topic partition offset`."""
    lines = ["0", str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
    with open(os.path.join(data_dir, name), "w") as file:
        file.write("\n".join(lines) + "\n")


def set_recovery_point(data_dir: str, offset: int) -> None:
    points = {(topic, 0): 0 for topic in INTERNAL_TOPICS}
    points[("t", 0)] = offset
    write_checkpoint(data_dir, RECOVERY_POINT_FILE, points)


def index_files(directory: str) -> dict[str, bytes]:
    return {
        os.path.basename(path): logtools.file_bytes(path)
        for suffix in (".index", ".timeindex")
        for path in logtools.partition_files(directory, suffix)
    }


def check_every_lookup(log: PartitionLog, count: int, step_ms: int = 10) -> None:
    """Every offset reads from its own batch and every timestamp finds its record."""
    for i in range(count):
        first = logtools.headers(bytes(log.read(i, 1).records))[0]
        assert first.base_offset == i, f"read({i}) started at {first.base_offset}"
        timestamp = TS + step_ms * i
        assert log.offset_for_timestamp(timestamp) == (i, timestamp), f"timestamp of {i}"


# --- indexes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("clean", [False, True], ids=["unclean", "clean"])
def test_reopen_rebuilds_deleted_index_files_of_every_segment(
    open_broker: OpenBroker, data_dir: str, clean: bool
) -> None:
    # Kafka's testIndexRebuild; Kafka recovers a segment whose offset index is missing even
    # after a clean shutdown (LogLoader: NoSuchFileException -> recoverSegment).
    config = {"segment.bytes": 10 * SINGLE_BYTES, "index.interval.bytes": 2 * SINGLE_BYTES - 1}
    directory = write_topic(open_broker, 30, config)
    written = index_files(directory)
    assert len(written) == 6
    for name in written:
        os.unlink(os.path.join(directory, name))
    if not clean:
        remove_marker(data_dir)

    broker = open_broker()
    log = broker.log("t", 0)
    check_every_lookup(log, 30)
    broker.run_maintenance()
    assert log.log_start_offset == 0, "retention deleted a segment whose index was rebuilt"
    broker.close()
    assert index_files(directory) == written, "rebuilt indexes differ from those appends wrote"


def test_unclean_reopen_rebuilds_garbage_index_files_of_the_active_segment(
    open_broker: OpenBroker, data_dir: str
) -> None:
    rng = logtools.seeded(80)
    config = {"index.interval.bytes": 2 * SINGLE_BYTES - 1}
    directory = write_topic(open_broker, 30, config)
    for suffix in (".index", ".timeindex"):
        (path,) = logtools.partition_files(directory, suffix)
        length = os.path.getsize(path)
        logtools.write_at(path, 5, logtools.nonsense(rng, length - 5))
    remove_marker(data_dir)
    log = open_broker().log("t", 0)
    check_every_lookup(log, 30)


def test_crash_before_any_checkpoint_recovers_every_segment_and_keeps_every_record(
    open_broker: OpenBroker, data_dir: str
) -> None:
    crash_after(
        data_dir,
        f"""
        config = {{"segment.bytes": {5 * SINGLE_BYTES}, "index.interval.bytes": 0}}
        broker.create_topic("t", 1, config=config)
        log = broker.log("t", 0)
        for i in range(18):
            log.append_batch(single(i, logtools.TS + 10 * i))
        """,
    )
    assert not os.path.exists(os.path.join(data_dir, RECOVERY_POINT_FILE))
    log = open_broker().log("t", 0)
    assert not log.recovery_report.clean_shutdown
    assert log.recovery_report.segments_recovered == 4, "each segment is rescanned once"
    assert [r.offset for r in logtools.read_all(log)] == list(range(18))
    check_every_lookup(log, 18)


# --- the .log tail -----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", GARBAGE_SEEDS)
def test_garbage_appended_to_the_active_log_is_cut_with_every_record_intact(
    open_broker: OpenBroker, data_dir: str, seed: int
) -> None:
    # Kafka's testCorruptLog: the report says how many bytes were cut, and from which file.
    rng = logtools.seeded(seed)
    directory = write_topic(open_broker, 20, {})
    (log_path,) = logtools.partition_files(directory, ".log")
    size = os.path.getsize(log_path)
    garbage = logtools.nonsense(rng, rng.randrange(1, 5000))
    logtools.append_bytes(log_path, garbage)
    remove_marker(data_dir)

    log = open_broker().log("t", 0)
    report = log.recovery_report
    assert report.bytes_truncated == len(garbage), seed
    assert report.truncated_file == log_path, seed
    assert report.truncated_at == size, seed
    assert os.path.getsize(log_path) == size, seed
    got = logtools.read_all(log)
    assert [r.value for r in got] == logtools.values(0, 20), seed
    assert log.append_batch(single(20)).base_offset == 20


def test_a_tail_of_zero_bytes_is_cut_with_every_record_intact(
    open_broker: OpenBroker, data_dir: str
) -> None:
    # What a file extended but never written looks like after a power loss.
    directory = write_topic(open_broker, 10, {})
    (log_path,) = logtools.partition_files(directory, ".log")
    logtools.append_bytes(log_path, bytes(4096))
    remove_marker(data_dir)
    log = open_broker().log("t", 0)
    assert log.recovery_report.bytes_truncated == 4096
    assert [r.value for r in logtools.read_all(log)] == logtools.values(0, 10)


def test_a_torn_last_batch_is_cut_at_the_previous_batch(
    open_broker: OpenBroker, data_dir: str
) -> None:
    directory = write_topic(open_broker, 10, {})
    (log_path,) = logtools.partition_files(directory, ".log")
    with open(log_path, "r+b") as file:
        file.truncate(10 * SINGLE_BYTES - 7)
    remove_marker(data_dir)
    log = open_broker().log("t", 0)
    assert log.recovery_report.bytes_truncated == SINGLE_BYTES - 7
    assert log.log_end_offset == 9
    assert [r.offset for r in logtools.read_all(log)] == list(range(9))


@pytest.mark.parametrize("torn", [False, True], ids=["whole", "torn"])
def test_a_batch_larger_than_the_recovery_read_chunk_is_kept_whole_or_cut_whole(
    open_broker: OpenBroker, data_dir: str, torn: bool
) -> None:
    # 9 MiB: more than recovery reads at a time (8 MiB) and than a lookup scans (64 KiB).
    rng = logtools.seeded(9)
    big_value = rng.randbytes(9 << 20)
    builder = codec.BatchBuilder(batch_bytes_max=16 << 20)
    builder.append(TS, None, big_value)
    big = builder.build()
    broker = open_broker()
    broker.create_topic("t", 1, config={"max.message.bytes": 16 << 20})
    log = broker.log("t", 0)
    log.append_batch(single(0))
    log.append_batch(big)
    assert bytes(log.read(1, 1).records) == bytes(log.read(1).records)
    assert logtools.records(bytes(log.read(1, 1).records))[0].value == big_value
    broker.close()
    (log_path,) = logtools.partition_files(log.directory, ".log")
    if torn:
        with open(log_path, "r+b") as file:
            file.truncate(SINGLE_BYTES + len(big) // 2)
    remove_marker(data_dir)

    log = open_broker().log("t", 0)
    values = [r.value for r in logtools.read_all(log)]
    if torn:
        assert values == logtools.values(0, 1)
        assert log.recovery_report.bytes_truncated == len(big) // 2
    else:
        assert values == [*logtools.values(0, 1), big_value]
        assert log.recovery_report.bytes_truncated == 0


# --- clean shutdown, checkpoints -------------------------------------------------------------


def test_clean_shutdown_marker_skips_recovery_and_is_deleted_at_open(
    open_broker: OpenBroker, data_dir: str
) -> None:
    write_topic(open_broker, 10, {})
    assert os.path.exists(os.path.join(data_dir, MARKER))
    log = open_broker().log("t", 0)
    assert not os.path.exists(os.path.join(data_dir, MARKER)), "marker kept while open"
    assert log.recovery_report.clean_shutdown
    assert log.recovery_report.segments_recovered == 0
    assert log.recovery_point == log.log_end_offset == 10


def test_a_crash_while_open_forces_recovery_at_the_next_open(
    open_broker: OpenBroker, data_dir: str
) -> None:
    # The marker is deleted as soon as it is read, so a process that dies before close (or
    # while loading) leaves a directory that the next open recovers.
    write_topic(open_broker, 10, {})
    crash_after(data_dir, "")
    log = open_broker().log("t", 0)
    assert not log.recovery_report.clean_shutdown
    assert log.recovery_report.segments_recovered >= 1
    assert [r.offset for r in logtools.read_all(log)] == list(range(10))


@pytest.mark.parametrize(
    ("recovery_point", "recovered"), [(0, 4), (9, 3), (10, 2), (12, 2), (18, 1)]
)
def test_recovery_starts_at_the_segment_holding_the_checkpointed_recovery_point(
    open_broker: OpenBroker, data_dir: str, recovery_point: int, recovered: int
) -> None:
    write_topic(open_broker, 18, {"segment.bytes": 5 * SINGLE_BYTES})  # bases 0, 5, 10, 15
    remove_marker(data_dir)
    set_recovery_point(data_dir, recovery_point)
    log = open_broker().log("t", 0)
    assert log.recovery_report.segments_recovered == recovered
    # Kafka's testLogRecoversToCorrectOffset: the recovery point stays at the checkpoint
    # until the next flush.
    assert log.recovery_point == recovery_point
    log.flush()
    assert log.recovery_point == 18


def test_log_start_checkpoint_hides_the_records_below_it(
    open_broker: OpenBroker, data_dir: str
) -> None:
    write_topic(open_broker, 10, {})
    write_checkpoint(data_dir, LOG_START_FILE, {("t", 0): 4})
    log = open_broker().log("t", 0)
    assert log.log_start_offset == 4
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3)
    assert [r.offset for r in logtools.read_all(log)] == list(range(4, 10))


@pytest.mark.parametrize("clean", [False, True], ids=["unclean", "clean"])
def test_log_end_below_the_checkpointed_log_start_leaves_one_empty_segment_at_the_log_start(
    open_broker: OpenBroker, data_dir: str, clean: bool
) -> None:
    # Kafka's testLogEndLessThanStartAfterReopen.
    directory = write_topic(open_broker, 5, {"segment.bytes": 2 * SINGLE_BYTES})
    write_checkpoint(data_dir, LOG_START_FILE, {("t", 0): 10})
    if not clean:
        remove_marker(data_dir)
    log = open_broker().log("t", 0)
    assert (log.log_start_offset, log.log_end_offset) == (10, 10)
    assert [segment.base_offset for segment in log.segments] == [10]
    logs = [os.path.basename(p) for p in logtools.partition_files(directory, ".log")]
    assert logs == ["00000000000000000010.log"]
    assert bytes(log.read(10).records) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4)
    assert log.append_batch(single(10)).base_offset == 10


# --- damage in the middle ----------------------------------------------------------------------


def damage_byte(rng: random.Random, size: int) -> int:
    """A byte of a batch that its CRC or framing covers: the length (8-11), the magic (16),
    the CRC field and everything after it. The base offset and the partition leader epoch are
    outside the CRC in Kafka's format, so damage there is not detectable by any reader."""
    return rng.choice([*range(8, 12), *range(16, size)])


@pytest.mark.parametrize("seed", DAMAGE_SEEDS)
def test_damage_in_an_early_batch_fails_open_naming_file_position_and_repair_command(
    open_broker: OpenBroker, data_dir: str, seed: int
) -> None:
    rng = logtools.seeded(seed)
    directory = write_topic(open_broker, 12, {})
    (log_path,) = logtools.partition_files(directory, ".log")
    damaged = rng.randrange(11)  # never the last batch: a bad last batch is a torn tail
    position = damaged * SINGLE_BYTES
    logtools.flip_bit(log_path, position + damage_byte(rng, SINGLE_BYTES), rng.randrange(8))
    remove_marker(data_dir)
    before = logtools.file_bytes(log_path)

    with pytest.raises(eoslog.CorruptRecordError) as raised:
        open_broker()
    message = str(raised.value)
    assert log_path in message, message
    assert f"byte {position}" in message, message
    assert f"eoslog.repair_truncate({log_path!r}, {position})" in message, message
    assert logtools.file_bytes(log_path) == before, "a refused open changed the file"

    eoslog.repair_truncate(log_path, position)
    log = open_broker().log("t", 0)
    assert [r.value for r in logtools.read_all(log)] == logtools.values(0, damaged), seed
    assert log.append_batch(single(damaged)).base_offset == damaged


def test_damage_in_a_segment_with_later_segments_fails_open_and_repair_drops_them(
    open_broker: OpenBroker, data_dir: str
) -> None:
    directory = write_topic(open_broker, 12, {"segment.bytes": 4 * SINGLE_BYTES})
    first, second, third = logtools.partition_files(directory, ".log")
    remove_marker(data_dir)
    # A recovery point inside the first segment: it is rescanned, and offsets below 2 are
    # known durable, so damage there (with valid data after it) is refused, never cut.
    checkpoints.write_offsets(
        PosixFileSystem(), os.path.join(data_dir, RECOVERY_POINT_FILE), {("t", 0): 2}
    )
    position = SINGLE_BYTES  # the batch holding offset 1
    logtools.flip_bit(first, position + SINGLE_BYTES - 1, 0)

    with pytest.raises(eoslog.CorruptRecordError) as raised:
        open_broker()
    message = str(raised.value)
    assert first in message and f"byte {position}" in message, message
    assert "eoslog.repair_truncate(" in message, message
    assert os.path.getsize(second) == os.path.getsize(third) == 4 * SINGLE_BYTES

    discarded = eoslog.repair_truncate(first, position)
    assert discarded == 11 * SINGLE_BYTES
    log = open_broker().log("t", 0)
    assert [r.offset for r in logtools.read_all(log)] == [0]
    assert logtools.partition_files(directory, ".log") == [first]


def test_damage_past_the_recovery_point_is_cut_with_the_later_segments_and_reported(
    open_broker: OpenBroker, data_dir: str
) -> None:
    # Past the recovery point nothing was known durable: a power loss may leave a hole with
    # unsynced batches after it, so recovery cuts there (as Kafka does) and reports it.
    directory = write_topic(open_broker, 12, {"segment.bytes": 4 * SINGLE_BYTES})
    first = logtools.partition_files(directory, ".log")[0]
    remove_marker(data_dir)
    checkpoints.write_offsets(
        PosixFileSystem(), os.path.join(data_dir, RECOVERY_POINT_FILE), {("t", 0): 2}
    )
    logtools.flip_bit(first, 2 * SINGLE_BYTES + SINGLE_BYTES - 1, 0)  # the batch of offset 2
    log = open_broker().log("t", 0)
    assert [r.offset for r in logtools.read_all(log)] == [0, 1]
    assert log.recovery_report.truncated_file == first
    assert log.recovery_report.truncated_at == 2 * SINGLE_BYTES
    assert logtools.partition_files(directory, ".log") == [first]


# --- determinism (RELIABILITY.md invariant 8) --------------------------------------------------


def test_opening_two_copies_of_the_same_damaged_files_gives_identical_results(
    open_broker: OpenBroker, data_dir: str, tmp_path: os.PathLike[str]
) -> None:
    rng = logtools.seeded(8)
    config = {"segment.bytes": 10 * SINGLE_BYTES, "index.interval.bytes": 2 * SINGLE_BYTES - 1}
    directory = write_topic(open_broker, 26, config)
    for path in logtools.partition_files(directory, ".index"):
        os.unlink(path)
    logtools.append_bytes(logtools.partition_files(directory, ".log")[-1], rng.randbytes(777))
    remove_marker(data_dir)
    copies = [os.path.join(tmp_path, name) for name in ("copy-a", "copy-b")]
    for copy in copies:
        shutil.copytree(data_dir, copy)

    results = []
    for copy in copies:
        broker = open_broker(copy)
        log = broker.log("t", 0)
        report = log.recovery_report
        results.append(
            (
                log.log_start_offset,
                log.log_end_offset,
                report.segments_recovered,
                report.bytes_truncated,
                os.path.relpath(report.truncated_file or "", copy),
                report.truncated_at,
                logtools.read_all(log),
            )
        )
        broker.close()
    assert results[0] == results[1]
    assert logtools.contents(copies[0]) == logtools.contents(copies[1])
    assert results[0][1] == 26 and results[0][3] == 777


def test_recovering_an_already_recovered_log_changes_nothing(
    open_broker: OpenBroker, data_dir: str
) -> None:
    rng = logtools.seeded(88)
    directory = write_topic(open_broker, 15, {"segment.bytes": 6 * SINGLE_BYTES})
    logtools.append_bytes(logtools.partition_files(directory, ".log")[-1], rng.randbytes(100))
    remove_marker(data_dir)
    open_broker().close()
    after_first = logtools.contents(directory)
    remove_marker(data_dir)
    broker = open_broker()
    assert broker.log("t", 0).recovery_report.bytes_truncated == 0
    broker.close()
    assert logtools.contents(directory) == after_first
