"""`eoslog repair` / eoslog.repair_truncate (docs/reliability.md "Security and bad input", family
4): repair takes the log directory's lock and refuses a live directory naming the owner's pid; it
cuts only at a batch boundary it validated by walking valid batches from the segment start,
refusing any other position with the nearest valid boundary below it; after a repair the
directory opens with every record before the cut.

Directories are written by a broker and closed cleanly; damage is done with plain file writes
(logtools). A test that needs the damage refused at open removes the clean-shutdown marker and
sets the recovery point, so that the damage lies below it (known durable, never cut silently).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator

import pytest

import eoslog
from eoslog import cli
from eoslog.errors import LogDirLockedError, NotASegmentFileError, RepairRefusedError
from eoslog.fs import PosixFileSystem
from eoslog.fs_twin import RecordingFileSystem
from eoslog.log import checkpoints
from eoslog.log.recovery import repair_truncate as repair_truncate_from_recovery
from tests.support import logtools
from tests.support.logtools import OpenBroker

TS = logtools.TS
MARKER = ".kafka_cleanshutdown"
# The command an open's refusal names, in backquotes.
REPAIR_COMMAND = re.compile(r"`(eoslog repair [^`]+)`")


def single(index: int) -> bytes:
    return logtools.batch(logtools.values(index, 1), timestamps=TS + index)


SINGLE_BYTES = len(single(0))


@pytest.fixture
def open_broker(data_dir: str) -> Iterator[OpenBroker]:
    """open_broker(path=data_dir) with a fixed clock; closed at teardown."""
    with logtools.brokers_opened(data_dir, lambda: {"clock_ms": logtools.Clock(TS)}) as opener:
        yield opener


def write_topic(open_broker: OpenBroker, count: int, segment_batches: int = 1000) -> str:
    """Topic t, one partition, `count` one-record batches, `segment_batches` to a segment,
    closed cleanly. Returns the partition directory."""
    broker = open_broker()
    broker.create_topic("t", 1, config={"segment.bytes": segment_batches * SINGLE_BYTES})
    log = broker.log("t", 0)
    for i in range(count):
        log.append_batch(single(i))
    broker.close()
    return log.directory


def values_of(broker: eoslog.Broker) -> list[bytes]:
    return [record.value or b"" for record in logtools.read_all(broker.log("t", 0))]


def damage_refused_at_open(data_dir: str, log_path: str, batch: int, recovery_point: int) -> None:
    """Flip a CRC-covered bit of the batch at index `batch` of log_path and make the next
    open rescan it below the recovery point: middle damage an open must refuse."""
    logtools.flip_bit(log_path, batch * SINGLE_BYTES + SINGLE_BYTES - 1, 0)
    os.unlink(os.path.join(data_dir, MARKER))
    checkpoints.write_offsets(
        PosixFileSystem(),
        os.path.join(data_dir, checkpoints.RECOVERY_POINT_FILE),
        {("t", 0): recovery_point},
    )


def snapshot_names(directory: str) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(".snapshot"))


# --- the lock --------------------------------------------------------------------------------


def test_repair_of_a_live_directory_is_refused_naming_the_owner_pid_and_changes_nothing(
    open_broker: OpenBroker, data_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = write_topic(open_broker, 6)
    (log_path,) = logtools.partition_files(directory, ".log")
    before = logtools.file_bytes(log_path)
    # The owner is another process, which maps the segment: a cut under it would kill it
    # with SIGBUS at its next read.
    script = (
        f"import sys, eoslog; broker = eoslog.open({data_dir!r}, background=False); "
        "print('ready', flush=True); sys.stdin.read(); broker.close()"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
        with pytest.raises(LogDirLockedError) as raised:
            eoslog.repair_truncate(log_path, 3 * SINGLE_BYTES)
        assert f"pid {owner.pid}" in str(raised.value), raised.value
        assert cli.main(["repair", log_path, "--truncate-at", str(3 * SINGLE_BYTES)]) == 1
        assert f"pid {owner.pid}" in capsys.readouterr().err
        assert logtools.file_bytes(log_path) == before
        assert owner.poll() is None, "the owner died"
    finally:
        assert owner.stdin is not None
        owner.stdin.close()
        assert owner.wait(timeout=60) == 0
    assert values_of(open_broker()) == logtools.values(0, 6)


def test_repair_through_the_recording_twin_takes_the_same_lock_as_the_owner() -> None:
    twin = RecordingFileSystem(seed=0)
    broker = eoslog.open("/data", fs=twin, clock_ms=logtools.Clock(TS), background=False)
    broker.create_topic("t", 1)
    for i in range(4):
        broker.log("t", 0).append_batch(single(i))
    log_path = "/data/t-0/" + f"{0:020d}.log"
    with pytest.raises(LogDirLockedError, match=f"pid {os.getpid()}"):
        eoslog.repair_truncate(log_path, 2 * SINGLE_BYTES, fs=twin)
    broker.close()
    assert eoslog.repair_truncate(log_path, 2 * SINGLE_BYTES, fs=twin) == 2 * SINGLE_BYTES
    reopened = eoslog.open("/data", fs=twin, clock_ms=logtools.Clock(TS), background=False)
    try:
        assert values_of(reopened) == logtools.values(0, 2)
    finally:
        reopened.close()


# --- validated boundaries ----------------------------------------------------------------------


def test_a_cut_inside_the_first_batch_is_refused_and_the_directory_still_opens_whole(
    open_broker: OpenBroker,
) -> None:
    directory = write_topic(open_broker, 6)
    (log_path,) = logtools.partition_files(directory, ".log")
    before = logtools.file_bytes(log_path)
    for position in (-1, 7):
        with pytest.raises(RepairRefusedError) as raised:
            eoslog.repair_truncate(log_path, position)
        assert raised.value.boundary == 0
    assert "nearest valid boundary at or below it is byte 0" in str(raised.value)
    assert logtools.file_bytes(log_path) == before
    assert values_of(open_broker()) == logtools.values(0, 6)


@pytest.mark.parametrize("inside", [1, 60, SINGLE_BYTES - 1])
def test_a_cut_inside_a_later_batch_is_refused_naming_that_batch_start(
    open_broker: OpenBroker, inside: int
) -> None:
    directory = write_topic(open_broker, 6)
    (log_path,) = logtools.partition_files(directory, ".log")
    with pytest.raises(RepairRefusedError) as raised:
        eoslog.repair_truncate(log_path, 3 * SINGLE_BYTES + inside)
    assert raised.value.boundary == 3 * SINGLE_BYTES
    assert f"byte {3 * SINGLE_BYTES}, where the log would end at offset 3" in str(raised.value)
    assert os.path.getsize(log_path) == 6 * SINGLE_BYTES


def test_a_cut_past_the_damage_or_past_the_end_is_refused_naming_where_valid_batches_end(
    open_broker: OpenBroker,
) -> None:
    directory = write_topic(open_broker, 8)
    (log_path,) = logtools.partition_files(directory, ".log")
    logtools.flip_bit(log_path, 4 * SINGLE_BYTES + SINGLE_BYTES - 1, 0)  # batch 4's records
    before = logtools.file_bytes(log_path)
    for position in (6 * SINGLE_BYTES, 8 * SINGLE_BYTES, 9 * SINGLE_BYTES):
        with pytest.raises(RepairRefusedError) as raised:
            eoslog.repair_truncate(log_path, position)
        assert raised.value.boundary == 4 * SINGLE_BYTES, position
        assert "valid batches end there: CRC-32C mismatch" in str(raised.value)
    assert logtools.file_bytes(log_path) == before


def test_a_cut_after_a_batch_whose_base_offset_breaks_continuity_is_refused(
    open_broker: OpenBroker,
) -> None:
    # The base offset is not covered by the CRC: only continuity shows it is wrong.
    directory = write_topic(open_broker, 8)
    (log_path,) = logtools.partition_files(directory, ".log")
    logtools.flip_bit(log_path, 5 * SINGLE_BYTES + 7, 3)  # batch 5 claims offset 13
    with pytest.raises(RepairRefusedError) as raised:
        eoslog.repair_truncate(log_path, 7 * SINGLE_BYTES)
    assert raised.value.boundary == 5 * SINGLE_BYTES


def test_repair_refuses_a_file_not_named_like_a_segment(
    open_broker: OpenBroker, tmp_path: os.PathLike[str]
) -> None:
    directory = write_topic(open_broker, 2)
    stray = os.path.join(directory, "junk.log")
    with open(stray, "wb") as file:
        file.write(single(0))
    with pytest.raises(NotASegmentFileError):
        eoslog.repair_truncate(stray, 0)
    assert os.path.getsize(stray) == SINGLE_BYTES
    assert cli.main(["repair", directory, "--truncate-at", "0"]) == 2


# --- the whole path: refused at open, repaired by the named command, opened ---------------------


def test_middle_damage_refused_at_open_is_repaired_by_running_exactly_the_named_command(
    open_broker: OpenBroker, data_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = write_topic(open_broker, 12, segment_batches=4)
    first, _, _ = logtools.partition_files(directory, ".log")
    assert snapshot_names(directory)  # the rolls and the clean close wrote snapshots
    # The recovery point (2) makes the first segment rescanned and its offsets 0-1 durable.
    damage_refused_at_open(data_dir, first, batch=1, recovery_point=2)
    with pytest.raises(eoslog.CorruptRecordError) as raised:
        open_broker()
    match = REPAIR_COMMAND.search(str(raised.value))
    assert match is not None, raised.value

    assert cli.main(shlex.split(match.group(1))[1:]) == 0
    assert f"cut {first} at byte {SINGLE_BYTES}" in capsys.readouterr().out
    assert logtools.partition_files(directory, ".log") == [first]
    assert snapshot_names(directory) == []  # every snapshot was past offset 1
    # The recovery point (2) lay past the new log end (1): lowered to it.
    recovery_points = checkpoints.read_offsets(
        PosixFileSystem(), os.path.join(data_dir, checkpoints.RECOVERY_POINT_FILE)
    )
    assert recovery_points[("t", 0)] == 1
    broker = open_broker()
    assert values_of(broker) == logtools.values(0, 1)
    assert broker.log("t", 0).append_batch(single(1)).base_offset == 1


def test_repair_at_a_segment_end_keeps_that_segment_whole_and_drops_the_later_ones(
    open_broker: OpenBroker, data_dir: str
) -> None:
    directory = write_topic(open_broker, 12, segment_batches=4)
    first, second, _ = logtools.partition_files(directory, ".log")
    discarded = repair_truncate_from_recovery(second, 4 * SINGLE_BYTES)
    assert discarded == 4 * SINGLE_BYTES  # the third segment
    assert logtools.partition_files(directory, ".log") == [first, second]
    assert all(int(name[:20]) <= 8 for name in snapshot_names(directory))
    assert values_of(open_broker()) == logtools.values(0, 8)


def test_a_log_start_past_the_cut_is_lowered_to_it_and_never_hides_the_records_kept(
    open_broker: OpenBroker, data_dir: str
) -> None:
    # eoslog moves the log start only by deleting whole segments, so an open ignores (and
    # reports) a log start inside a segment: the records kept by the cut stay readable.
    directory = write_topic(open_broker, 8)
    (log_path,) = logtools.partition_files(directory, ".log")
    path = os.path.join(data_dir, checkpoints.LOG_START_OFFSET_FILE)
    checkpoints.write_offsets(PosixFileSystem(), path, {("t", 0): 6})
    eoslog.repair_truncate(log_path, 3 * SINGLE_BYTES)
    assert checkpoints.read_offsets(PosixFileSystem(), path)[("t", 0)] == 3
    log = open_broker().log("t", 0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 3)
    assert log.recovery_report.checkpoints_ignored


def test_a_segment_cut_to_nothing_goes_so_the_log_ends_where_the_previous_segment_ends(
    open_broker: OpenBroker,
) -> None:
    # The second segment's name disagrees with the first's end (4): kept empty after a cut
    # at byte 0, it would make the log end at 5, with offset 4 never written.
    directory = write_topic(open_broker, 12, segment_batches=4)
    first = logtools.partition_files(directory, ".log")[0]
    for name in os.listdir(directory):
        if name.startswith(f"{4:020d}."):
            suffix = name.split(".", 1)[1]
            os.rename(os.path.join(directory, name), os.path.join(directory, f"{5:020d}.{suffix}"))
    renamed = os.path.join(directory, f"{5:020d}.log")
    assert eoslog.repair_truncate(renamed, 0) == 8 * SINGLE_BYTES
    assert logtools.partition_files(directory, ".log") == [first]
    broker = open_broker()
    assert broker.log("t", 0).log_end_offset == 4
    assert values_of(broker) == logtools.values(0, 4)


def test_a_stray_index_name_in_the_partition_directory_is_left_alone_and_the_cut_completes(
    open_broker: OpenBroker, data_dir: str
) -> None:
    # `junk.index` is no segment's file: repair must not fail on its name after the .log
    # is already cut (leaving a half-repaired partition), nor delete it.
    directory = write_topic(open_broker, 3)
    stray = os.path.join(directory, "junk.index")
    open(stray, "wb").close()
    (log_path,) = logtools.partition_files(directory, ".log")
    assert repair_truncate_from_recovery(log_path, 0) == 3 * SINGLE_BYTES
    assert os.path.getsize(log_path) == 0
    assert os.path.exists(stray)
    broker = open_broker()
    assert values_of(broker) == []
    assert broker.log("t", 0).log_end_offset == 0


def test_a_cut_drops_the_partitions_aborted_txn_counts_so_the_next_open_rebuilds_its_txnindex(
    open_broker: OpenBroker, data_dir: str
) -> None:
    # The counts past the cut no longer hold; kept, the next open would find a segment the
    # cut shortened disagreeing with them. Dropped, the open rebuilds the .txnindex files.
    directory = write_topic(open_broker, 12, segment_batches=4)
    fs = PosixFileSystem()
    before, problem = checkpoints.read_believed_aborted_counts(fs, data_dir)
    assert problem is None and before[("t", 0)].covered_to == 12
    second = logtools.partition_files(directory, ".log")[1]
    eoslog.repair_truncate(second, 2 * SINGLE_BYTES)
    after, problem = checkpoints.read_believed_aborted_counts(fs, data_dir)
    assert problem is None and ("t", 0) not in after
    assert after.keys() == before.keys() - {("t", 0)}  # the other partitions' counts stay
    broker = open_broker()
    assert values_of(broker) == logtools.values(0, 6)
    assert broker.log("t", 0).recovery_report.indexes_rebuilt
