"""Opening a log directory after a clean or unclean stop (docs/format.md §9;
docs/kafka-behaviours.md 80; docs/reliability.md invariants 7 and 8).

An unclean stop is made two ways: by a child process that appends and dies with os._exit (what
a crash leaves: no clean-shutdown marker, no checkpoints written at close, indexes still at
their preallocated size), or by closing cleanly and then removing the marker and editing the
checkpoints, when a test needs a precise recovery point. Damage is done with plain file writes.

The rule under test is the table in eoslog.log.recovery: cut only past a trusted recovery point
or, without one, a torn tail; refuse everything else before changing anything; check the
checkpoints against the segments and the tail of a cleanly closed log. Issue 12's cases each
have a test here (log start 400 of 40, recovery point past the end, batch 5 of 40 with the
checkpoint missing or garbled, a base offset flipped after a clean shutdown, the
__consumer_offsets roll-back).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping

import pytest

import eoslog
from eoslog import limits
from eoslog.errors import CorruptCheckpointError
from eoslog.fs import PosixFileSystem
from eoslog.log import checkpoints
from eoslog.log.partition import PartitionLog
from eoslog.record import codec
from tests.support import REPO_ROOT, logtools
from tests.support.logtools import OpenBroker

TS = logtools.TS
MARKER = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
DAMAGE_SEEDS = range(12)
GARBAGE_SEEDS = range(5)


def single(index: int, timestamp: int = TS) -> bytes:
    return logtools.batch(logtools.values(index, 1), timestamps=timestamp)


SINGLE_BYTES = len(single(0))


@pytest.fixture
def open_broker(data_dir: str) -> Iterator[OpenBroker]:
    """open_broker(path=data_dir) with a fixed clock; closed at teardown."""
    with logtools.brokers_opened(data_dir, lambda: {"clock_ms": logtools.Clock(TS)}) as opener:
        yield opener


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
        import eoslog
        from tests.support import logtools
        def single(i, timestamp=logtools.TS):
            return logtools.batch(logtools.values(i, 1), timestamps=timestamp)
        broker = eoslog.open({path!r}, clock_ms=lambda: logtools.TS, background=False)
        """
    ).format(tests=REPO_ROOT, path=data_dir)
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


def log_files(directory: str) -> dict[str, bytes]:
    """The .log files of a partition (its data; index files are derived, and rebuilt at will)."""
    return {
        os.path.basename(path): logtools.file_bytes(path)
        for path in logtools.partition_files(directory, ".log")
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


def test_crash_before_the_first_maintenance_pass_recovers_every_segment_and_keeps_every_record(
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
    # create_topic wrote the partition's recovery point, 0: a trusted "nothing durable yet".
    recovery_points = checkpoints.read_offsets(
        PosixFileSystem(), os.path.join(data_dir, RECOVERY_POINT_FILE)
    )
    assert recovery_points[("t", 0)] == 0
    log = open_broker().log("t", 0)
    assert log.recovery_report.recovery_point_trusted
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
    # A crash tears only a write made after the last fsync, so past the recovery point.
    directory = write_topic(open_broker, 10, {})
    (log_path,) = logtools.partition_files(directory, ".log")
    with open(log_path, "r+b") as file:
        file.truncate(10 * SINGLE_BYTES - 7)
    remove_marker(data_dir)
    set_recovery_point(data_dir, 9)
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
    set_recovery_point(data_dir, 1)  # the big batch was written after the last fsync

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


def test_a_log_start_checkpoint_inside_a_segment_is_ignored_and_reported_never_hiding_records(
    open_broker: OpenBroker, data_dir: str
) -> None:
    # eoslog moves the log start only by deleting whole segments: 4 is not a segment base,
    # so the segments do not explain it. (Kafka would hide offsets 0-3.)
    write_topic(open_broker, 10, {})
    write_checkpoint(data_dir, LOG_START_FILE, {("t", 0): 4})
    log = open_broker().log("t", 0)
    assert log.log_start_offset == 0
    assert [r.offset for r in logtools.read_all(log)] == list(range(10))
    (note,) = log.recovery_report.checkpoints_ignored
    assert LOG_START_FILE in note and "log start 4" in note, note


@pytest.mark.parametrize("clean", [False, True], ids=["unclean", "clean"])
def test_log_start_checkpoint_past_the_log_end_is_an_error_and_deletes_nothing(
    open_broker: OpenBroker, data_dir: str, clean: bool
) -> None:
    # The case of issue 12: Kafka (and eoslog before) deleted every segment for an empty
    # one at the checkpointed log start.
    directory = write_topic(open_broker, 40, {"segment.bytes": 8 * SINGLE_BYTES})
    write_checkpoint(data_dir, LOG_START_FILE, {("t", 0): 400})
    if not clean:
        remove_marker(data_dir)
    before = log_files(directory)
    with pytest.raises(CorruptCheckpointError) as raised:
        open_broker()
    message = str(raised.value)
    checkpoint = os.path.join(data_dir, LOG_START_FILE)
    assert checkpoint in message and "400" in message and "40" in message, message
    assert "'t 0 400'" in message, message
    assert log_files(directory) == before, "a refused open changed the partition"
    # The remedy the message names: remove the line.
    write_checkpoint(data_dir, LOG_START_FILE, {})
    log = open_broker().log("t", 0)
    assert [r.offset for r in logtools.read_all(log)] == list(range(40))


@pytest.mark.parametrize("clean", [False, True], ids=["unclean", "clean"])
def test_recovery_point_past_the_log_end_is_an_error_and_changes_nothing(
    open_broker: OpenBroker, data_dir: str, clean: bool
) -> None:
    # The checkpoint is written only after an fsync of everything below it: a log that ends
    # before it has lost durable records (or the checkpoint lies). Either way: refuse.
    directory = write_topic(open_broker, 40, {"segment.bytes": 8 * SINGLE_BYTES})
    set_recovery_point(data_dir, 400)
    if not clean:
        remove_marker(data_dir)
    before = log_files(directory)
    with pytest.raises(CorruptCheckpointError) as raised:
        open_broker()
    message = str(raised.value)
    assert os.path.join(data_dir, RECOVERY_POINT_FILE) in message, message
    assert "400" in message and "ends at offset 40" in message, message
    assert log_files(directory) == before


def test_a_lost_last_segment_below_the_recovery_point_is_an_error_not_a_shorter_log(
    open_broker: OpenBroker, data_dir: str
) -> None:
    directory = write_topic(open_broker, 40, {"segment.bytes": 8 * SINGLE_BYTES})
    last = logtools.partition_files(directory, ".log")[-1]
    for path in (last, last[: -len(".log")] + ".index", last[: -len(".log")] + ".timeindex"):
        os.unlink(path)
    remove_marker(data_dir)
    with pytest.raises(CorruptCheckpointError, match="durable records are missing"):
        open_broker()


@pytest.mark.parametrize("checkpoint", ["missing", "garbled", "entry absent"])
def test_damage_in_batch_5_of_40_without_a_trusted_recovery_point_is_refused_not_cut(
    open_broker: OpenBroker, data_dir: str, checkpoint: str
) -> None:
    # Without a readable recovery point nothing is known durable, but nothing is known
    # lost either: only a torn tail (no valid batch after the damage) may be cut.
    directory = write_topic(open_broker, 40, {})
    (log_path,) = logtools.partition_files(directory, ".log")
    position = 5 * SINGLE_BYTES
    logtools.flip_bit(log_path, position + SINGLE_BYTES - 1, 0)
    remove_marker(data_dir)
    path = os.path.join(data_dir, RECOVERY_POINT_FILE)
    if checkpoint == "missing":
        os.unlink(path)
    elif checkpoint == "garbled":
        logtools.write_at(path, 0, b"x")
    else:
        write_checkpoint(data_dir, RECOVERY_POINT_FILE, {(t, 0): 0 for t in INTERNAL_TOPICS})
    before = log_files(directory)
    with pytest.raises(eoslog.CorruptRecordError) as raised:
        open_broker()
    message = str(raised.value)
    assert log_path in message and f"byte {position}" in message, message
    assert f"eoslog.repair_truncate({log_path!r}, {position})" in message, message
    assert log_files(directory) == before
    eoslog.repair_truncate(log_path, position)
    log = open_broker().log("t", 0)
    assert [r.offset for r in logtools.read_all(log)] == list(range(5))


def test_a_torn_tail_without_a_trusted_recovery_point_is_still_cut(
    open_broker: OpenBroker, data_dir: str
) -> None:
    directory = write_topic(open_broker, 10, {})
    (log_path,) = logtools.partition_files(directory, ".log")
    with open(log_path, "r+b") as file:
        file.truncate(10 * SINGLE_BYTES - 7)
    remove_marker(data_dir)
    os.unlink(os.path.join(data_dir, RECOVERY_POINT_FILE))
    log = open_broker().log("t", 0)
    assert not log.recovery_report.recovery_point_trusted
    assert log.recovery_report.bytes_truncated == SINGLE_BYTES - 7
    assert [r.offset for r in logtools.read_all(log)] == list(range(9))


def test_a_torn_last_batch_below_the_recovery_point_is_refused_not_cut(
    open_broker: OpenBroker, data_dir: str
) -> None:
    # The last batch was fsynced before the recovery point 10 was written: it cannot have
    # been torn by a crash, and cutting it would lose a durably acknowledged record.
    directory = write_topic(open_broker, 10, {})
    (log_path,) = logtools.partition_files(directory, ".log")
    with open(log_path, "r+b") as file:
        file.truncate(10 * SINGLE_BYTES - 7)
    remove_marker(data_dir)
    with pytest.raises(eoslog.CorruptRecordError) as raised:
        open_broker()
    assert f"repair_truncate({log_path!r}, {9 * SINGLE_BYTES})" in str(raised.value)
    assert os.path.getsize(log_path) == 10 * SINGLE_BYTES - 7


@pytest.mark.parametrize("name", [RECOVERY_POINT_FILE, LOG_START_FILE])
def test_a_garbled_checkpoint_is_reported_and_believes_no_entry(
    open_broker: OpenBroker, data_dir: str, name: str
) -> None:
    write_topic(open_broker, 10, {})
    write_checkpoint(data_dir, LOG_START_FILE, {("t", 0): 0})
    logtools.write_at(os.path.join(data_dir, name), 2, b"?")  # the count line
    remove_marker(data_dir)
    log = open_broker().log("t", 0)
    (note,) = log.recovery_report.checkpoints_ignored
    assert os.path.join(data_dir, name) in note and "byte 2" in note, note
    assert log.recovery_report.recovery_point_trusted == (name != RECOVERY_POINT_FILE)
    assert [r.offset for r in logtools.read_all(log)] == list(range(10))


def test_create_topic_writes_each_new_partition_a_recovery_point_of_0(
    open_broker: OpenBroker, data_dir: str
) -> None:
    # So that a missing entry at a later open means damage, not a partition too young to
    # have been checkpointed.
    broker = open_broker()
    broker.create_topic("u", 3)
    points = checkpoints.read_offsets(
        PosixFileSystem(), os.path.join(data_dir, RECOVERY_POINT_FILE)
    )
    assert {(topic, p): points[(topic, p)] for topic, p in points if topic == "u"} == {
        ("u", 0): 0,
        ("u", 1): 0,
        ("u", 2): 0,
    }


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


# --- determinism (docs/reliability.md invariant 8) ------------------------------------------------


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


# --- the tail and segment starts after a clean shutdown ------------------------------------------


def set_base_offset(path: str, position: int, base_offset: int) -> None:
    """Overwrite the base offset of the batch at `position`: outside the CRC, so only
    continuity checks can notice."""
    logtools.write_at(path, position, base_offset.to_bytes(8, "big", signed=True))


@pytest.mark.parametrize("interval", [0, 4096], ids=["entry-per-batch", "no-entries"])
@pytest.mark.parametrize("damage", ["flip-bit-5", "zero"])
def test_a_damaged_base_offset_in_the_last_batch_after_a_clean_shutdown_is_refused(
    open_broker: OpenBroker, data_dir: str, damage: str, interval: int
) -> None:
    # Issue 12: a flip of bit 5 of the last batch's base offset (39 -> 7) moved the log end to
    # 8, and new appends reused offsets 8-12; with 0 a consumer re-delivered 0, 1, 2 forever.
    directory = write_topic(open_broker, 40, {"index.interval.bytes": interval})
    (log_path,) = logtools.partition_files(directory, ".log")
    position = 39 * SINGLE_BYTES
    if damage == "zero":
        set_base_offset(log_path, position, 0)
    else:
        logtools.flip_bit(log_path, position + 7, 5)
    before = log_files(directory)
    with pytest.raises(eoslog.CorruptRecordError) as raised:
        open_broker()
    message = str(raised.value)
    assert log_path in message and f"byte {position}" in message, message
    assert "closed cleanly" in message, message
    assert f"eoslog.repair_truncate({log_path!r}, {position})" in message, message
    assert log_files(directory) == before
    eoslog.repair_truncate(log_path, position)
    log = open_broker().log("t", 0)
    assert [r.offset for r in logtools.read_all(log)] == list(range(39))
    assert log.append_batch(single(39)).base_offset == 39


@pytest.mark.parametrize("clean", [False, True], ids=["unclean", "clean"])
def test_a_segment_whose_first_batch_is_not_at_its_base_offset_is_refused_at_every_open(
    open_broker: OpenBroker, data_dir: str, clean: bool
) -> None:
    # One header read per segment: the first batch must start at the offset in the file
    # name (where the previous segment ended). Unclean, the segment lies below the recovery
    # point and is not rescanned, so only this check sees it at open.
    directory = write_topic(open_broker, 40, {"segment.bytes": 8 * SINGLE_BYTES})
    third = logtools.partition_files(directory, ".log")[2]
    assert os.path.basename(third) == "00000000000000000016.log"
    set_base_offset(third, 0, 15)
    if not clean:
        remove_marker(data_dir)
    with pytest.raises(eoslog.CorruptRecordError) as raised:
        open_broker()
    message = str(raised.value)
    assert third in message and "byte 0" in message and "offset 16" in message, message


def test_a_wrong_last_index_entry_after_a_clean_shutdown_is_not_believed_and_opens(
    open_broker: OpenBroker, data_dir: str
) -> None:
    # The tail check starts at the last offset-index entry: a damaged entry (a derived file)
    # must not make the open refuse a log that is whole.
    directory = write_topic(open_broker, 20, {"index.interval.bytes": 0})
    (index_path,) = logtools.partition_files(directory, ".index")
    size = os.path.getsize(index_path)
    logtools.flip_bit(index_path, size - 1, 0)  # the last entry's position, off by one
    log = open_broker().log("t", 0)
    assert log.log_end_offset == 20
    check_every_lookup(log, 20)


def test_a_damaged_base_offset_of_the_last_consumer_offsets_batch_is_refused_at_open(
    tmp_path: os.PathLike[str],
) -> None:
    # Issue 12: after a clean shutdown, the last __consumer_offsets batch's base offset set
    # to the previous batch's rolled the committed offset back from 30 to 20.
    from eoslog import TopicPartition

    path = os.path.join(tmp_path, "data")
    broker = eoslog.open(path, background=False)
    broker.create_topic("in", 1)
    consumer = broker.consumer({"group.id": "g", "enable.auto.commit": False})
    for offset in (10, 20, 30):
        consumer.commit(offsets=[TopicPartition("in", 0, offset)])
    consumer.close()
    broker.close()
    (log_path,) = logtools.partition_files(os.path.join(path, "__consumer_offsets-0"), ".log")
    found = list(codec.iter_headers(logtools.file_bytes(log_path)))
    (_, previous_header), (last, _) = found[-2], found[-1]
    set_base_offset(log_path, last, previous_header.base_offset)
    with pytest.raises(eoslog.CorruptRecordError) as raised:
        eoslog.open(path, background=False)
    assert log_path in str(raised.value) and f"byte {last}" in str(raised.value)


def test_a_batch_longer_than_a_recovery_chunk_after_damage_is_seen_without_a_recovery_point(
    open_broker: OpenBroker, data_dir: str
) -> None:
    # Without a trusted recovery point only a torn tail may be cut: the search for a valid
    # batch after the damage reads bounded windows, and must still find a 9 MiB batch (more
    # than a window's stride) by its header.
    builder = codec.BatchBuilder(batch_bytes_max=16 << 20)
    builder.append(TS, None, logtools.seeded(3).randbytes(9 << 20))
    big = builder.build()
    broker = open_broker()
    broker.create_topic("t", 1, config={"max.message.bytes": 16 << 20})
    log = broker.log("t", 0)
    log.append_batch(single(0))
    log.append_batch(single(1))
    log.append_batch(big)
    broker.close()
    (log_path,) = logtools.partition_files(log.directory, ".log")
    logtools.flip_bit(log_path, 2 * SINGLE_BYTES - 1, 0)  # the batch of offset 1
    remove_marker(data_dir)
    os.unlink(os.path.join(data_dir, RECOVERY_POINT_FILE))
    with pytest.raises(eoslog.CorruptRecordError, match=f"byte {SINGLE_BYTES}"):
        open_broker()
    assert os.path.getsize(log_path) == 2 * SINGLE_BYTES + len(big)


@pytest.mark.parametrize("trusted", [True, False], ids=["recovery-point", "no-recovery-point"])
def test_a_sparse_tail_claiming_a_huge_batch_is_cut_without_allocating_the_claim(
    open_broker: OpenBroker, data_dir: str, trusted: bool
) -> None:
    # A header claiming 1 GiB, then a hole up to 1.5 GiB: a length past
    # limits.batch_bytes_max is bad bytes at once, never a read of the claim, and the search
    # for valid data after bad bytes reads bounded windows.
    import tracemalloc

    directory = write_topic(open_broker, 10, {})
    (log_path,) = logtools.partition_files(directory, ".log")
    size = os.path.getsize(log_path)
    claim = bytearray(61)
    claim[8:12] = (1 << 30).to_bytes(4, "big")
    claim[16] = 2  # magic
    logtools.append_bytes(log_path, bytes(claim))
    os.truncate(log_path, 3 << 29)
    remove_marker(data_dir)
    set_recovery_point(data_dir, 10)
    if not trusted:
        os.unlink(os.path.join(data_dir, RECOVERY_POINT_FILE))
    tracemalloc.start()
    try:
        log = open_broker().log("t", 0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert log.recovery_report.bytes_truncated == (3 << 29) - size
    assert [r.offset for r in logtools.read_all(log)] == list(range(10))
    assert peak < 128 << 20, f"peak {peak >> 20} MiB while opening"


def test_an_open_without_a_trusted_recovery_point_syncs_the_log_and_checkpoints_its_end(
    open_broker: OpenBroker, data_dir: str
) -> None:
    # After a full rescan the log is made durable and its end becomes the recovery point,
    # so the next open trusts it: not 0, under which later damage anywhere would be cut.
    write_topic(open_broker, 10, {})
    remove_marker(data_dir)
    os.unlink(os.path.join(data_dir, RECOVERY_POINT_FILE))
    log = open_broker().log("t", 0)
    assert not log.recovery_report.recovery_point_trusted
    assert log.recovery_point == 10
    points = checkpoints.read_offsets(
        PosixFileSystem(), os.path.join(data_dir, RECOVERY_POINT_FILE)
    )
    assert points[("t", 0)] == 10


# --- the checkpoint reader -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "byte"),
    [
        (b"0\n1\nt 0 5", 9),  # no final newline
        (b"1\n0\n", 0),  # unknown version
        (b"0\n2\nt 0 5\n", 2),  # the count disagrees
        (b"0\n1\nt 0  5\n", 4),  # two spaces
        (b"0\n1\nt 0 +5\n", 4),  # int() would take a sign...
        (b"0\n1\nt 0 -5\n", 4),
        (b"0\n1\nt 0 5_0\n", 4),  # ...an underscore...
        (b"0\n1\nt 0 \xd9\xa5\n", 4),  # ...and a non-ASCII digit
        (b"0\n1\nt 0 9223372036854775808\n", 4),  # past int64
        (b"0\n2\nt 0 5\nt 0 6\n", 10),  # the same partition twice
    ],
)
def test_a_malformed_checkpoint_is_a_typed_error_naming_the_file_and_byte(
    data: bytes, byte: int
) -> None:
    with pytest.raises(CorruptCheckpointError, match=f"^x/cp is malformed at byte {byte}: "):
        checkpoints.decode_offsets(data, "x/cp")


def test_random_damage_to_a_checkpoint_decodes_or_raises_only_the_typed_error() -> None:
    seed = 12
    rng = logtools.seeded(seed)
    good = checkpoints.encode_offsets({("t", 0): 40, ("__consumer_offsets", 0): 7, ("u", 3): 0})
    for _ in range(3000):
        data = bytearray(good)
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            offsets = checkpoints.decode_offsets(bytes(data), "cp")
        except CorruptCheckpointError:
            continue
        assert all(0 <= offset < 1 << 63 for offset in offsets.values()), (seed, data)


def test_a_checkpoint_larger_than_the_limit_is_refused_before_it_is_read(
    tmp_path: os.PathLike[str],
) -> None:
    path = os.path.join(tmp_path, RECOVERY_POINT_FILE)
    with open(path, "wb") as file:
        file.write(b"0\n0\n")
    os.truncate(path, limits.checkpoint_file_bytes_max + 1)  # sparse: costs nothing on disk
    with pytest.raises(CorruptCheckpointError, match="over the limit"):
        checkpoints.read_offsets(PosixFileSystem(), path)


def test_a_segment_whose_batches_run_into_the_next_segment_is_refused(
    open_broker: OpenBroker, data_dir: str
) -> None:
    # Segments hold [0, 8), [8, 16), [16, 24); the middle one gains a copy of the batches of
    # offsets 16 and 17 (valid CRCs, continuing its own offsets): two copies of each offset.
    # Without a trusted recovery point every segment is rescanned: an offset at or past the
    # next segment's base is a continuity break there, refused like any other.
    directory = write_topic(open_broker, 24, {"segment.bytes": 8 * SINGLE_BYTES})
    _, middle, last = logtools.partition_files(directory, ".log")
    logtools.append_bytes(middle, logtools.file_bytes(last)[: 2 * SINGLE_BYTES])
    remove_marker(data_dir)
    os.unlink(os.path.join(data_dir, RECOVERY_POINT_FILE))
    with pytest.raises(eoslog.CorruptRecordError) as raised:
        open_broker()
    assert middle in str(raised.value) and f"byte {8 * SINGLE_BYTES}" in str(raised.value)


@pytest.mark.parametrize("clean", [False, True], ids=["unclean", "clean"])
def test_an_emptied_segment_below_the_recovery_point_is_refused_at_open(
    open_broker: OpenBroker, data_dir: str, clean: bool
) -> None:
    # Offsets 8-15 were durable; eoslog never leaves an empty segment before another.
    directory = write_topic(open_broker, 24, {"segment.bytes": 8 * SINGLE_BYTES})
    middle = logtools.partition_files(directory, ".log")[1]
    os.truncate(middle, 0)
    if not clean:
        remove_marker(data_dir)
    with pytest.raises(eoslog.CorruptRecordError) as raised:
        open_broker()
    assert middle in str(raised.value) and "next segment starts at 16" in str(raised.value)


def test_a_segment_whose_first_batch_has_a_wrong_magic_is_refused_at_its_start(
    open_broker: OpenBroker, data_dir: str
) -> None:
    directory = write_topic(open_broker, 24, {"segment.bytes": 8 * SINGLE_BYTES})
    middle = logtools.partition_files(directory, ".log")[1]
    logtools.write_at(middle, 16, b"\x01")  # the magic byte of its first batch
    with pytest.raises(eoslog.CorruptRecordError) as raised:
        open_broker()
    assert f"repair_truncate({middle!r}, 0)" in str(raised.value), raised.value


def test_a_refused_open_leaves_the_transaction_index_as_it_was(
    open_broker: OpenBroker, data_dir: str
) -> None:
    # The .txnindex is rebuilt by the producer-state replay after a load that succeeds; a
    # refused one must not have emptied it, since the next open need not rescan the segment.
    broker = open_broker()
    broker.create_topic("t", 1)
    log = broker.log("t", 0)
    builder = codec.BatchBuilder(
        producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    builder.append(TS, None, b"aborted")
    log.append_batch(builder.build())
    log.append_marker(7, 1, 0, False)  # ABORT: one .txnindex entry
    for i in range(5):
        log.append_batch(single(i))
    broker.close()
    (log_path,) = logtools.partition_files(log.directory, ".log")
    (txn_path,) = logtools.partition_files(log.directory, ".txnindex")
    entries = logtools.file_bytes(txn_path)
    assert entries
    size = os.path.getsize(log_path)
    logtools.flip_bit(log_path, size - 2 * SINGLE_BYTES - 1, 0)  # the batch before the last
    remove_marker(data_dir)
    with pytest.raises(eoslog.CorruptRecordError):
        open_broker()
    assert logtools.file_bytes(txn_path) == entries


def test_a_clean_open_that_rebuilds_one_segment_keeps_each_abort_entry_once(
    open_broker: OpenBroker, data_dir: str
) -> None:
    # A missing .index rescans that one segment; the producer-state replay then rewrites the
    # ABORT entries of every segment from it on, so all of those must start empty (they
    # used to keep their entries and get each one twice).
    broker = open_broker()
    broker.create_topic("t", 1, config={"segment.bytes": 300})
    log = broker.log("t", 0)
    for epoch in range(4):
        builder = codec.BatchBuilder(
            producer_id=7, producer_epoch=epoch, base_sequence=0, is_transactional=True
        )
        builder.append(TS, None, b"x" * 50)
        log.append_batch(builder.build())
        log.append_marker(7, epoch + 1, 0, False)
    expected = [segment.txn_index.all_entries() for segment in log.segments]
    assert sum(map(len, expected)) == 4 and len(expected) > 2
    broker.close()
    os.unlink(logtools.partition_files(log.directory, ".index")[0])
    again = open_broker().log("t", 0)
    assert [segment.txn_index.all_entries() for segment in again.segments] == expected
