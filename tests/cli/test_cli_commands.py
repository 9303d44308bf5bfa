"""The command line: demo, dump-log and verify on real segment files, and what each does
with paths that are not segments (typed one-line errors and exit statuses, no traceback).
repair has its own file, tests/log/test_repair.py."""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

import eoslog
from eoslog import cli
from eoslog.record import codec

# Bytes of one batch of _segment: ten records.
BATCH_BYTES = 261


def _segment(tmp_path: Path, batches: int = 3) -> Path:
    path = tmp_path / f"{0:020d}.log"
    data = bytearray()
    for index in range(batches):
        builder = codec.BatchBuilder()
        for i in range(10):
            builder.append(1_700_000_000_000 + i, b"k%d" % i, b"value-%d" % i, [("h", b"x")])
        batch = bytearray(builder.build())
        codec.stamp_batch(batch, base_offset=index * 10, partition_leader_epoch=0)
        data += batch
    path.write_bytes(bytes(data))
    return path


def test_demo_runs_the_pipeline_under_kill_9_then_writes_reads_back_and_reports_damage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = ["--records", "5000", "--pipeline-records", "3000", "--kills", "2"]
    assert cli.main(["demo", "--dir", str(tmp_path), *arguments]) == 0
    out = capsys.readouterr().out
    # The main job: the exactly-once pipeline, its copier killed twice and restarted.
    assert out.count("killed (SIGKILL) in its next transaction") == 2
    assert "input 3,000 records, output 3,000 records" in out
    assert "no record lost, none twice" in out
    assert "wrote 5,000 records" in out
    assert "decoded 5,000 data records to Arrow" in out
    assert "a single flipped bit at byte 200 is caught: CorruptRecordError" in out
    # The partition-log part: a writer killed mid-batch, the torn tail cut, all read back.
    assert "then was killed (SIGKILL) halfway through writing one more batch" in out
    assert "unclean shutdown detected" in out and "torn tail of" in out
    assert "read back 60,000 records at offsets 0..59999" in out
    segment = tmp_path / "demo-0" / f"{0:020d}.log"
    assert cli.main(["verify", str(segment)]) == 0
    # Five 1,000-record batches, the third transactional and followed by its COMMIT marker.
    assert "6 batches, 5001 records, all valid" in capsys.readouterr().out


def test_dump_log_prints_one_line_per_batch_and_every_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _segment(tmp_path)
    assert cli.main(["dump-log", str(path), "--records"]) == 0
    lines = capsys.readouterr().out.splitlines()
    batch_lines = [line for line in lines if line.startswith("baseOffset:")]
    record_lines = [line for line in lines if line.startswith("| offset:")]
    assert [line.split()[1] for line in batch_lines] == ["0", "10", "20"]
    assert len(record_lines) == 30
    assert "headerKeys: [h]" in record_lines[0]


def test_verify_accepts_a_good_segment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _segment(tmp_path)
    assert cli.main(["verify", str(path)]) == 0
    assert "3 batches, 30 records, all valid" in capsys.readouterr().out


def test_verify_reports_damage_in_the_middle_with_its_byte_and_where_valid_batches_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _segment(tmp_path)
    data = bytearray(path.read_bytes())
    second = codec.read_header(data).size_in_bytes
    assert second == BATCH_BYTES
    data[second + 70] ^= 0x10  # a bit inside the second batch's records
    path.write_bytes(bytes(data))
    assert cli.main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"error at byte {second}: CRC-32C mismatch" in out
    assert f"valid batches resume at byte {2 * second}: damage in the middle" in out
    assert "2 valid batches, 20 records, 1 problems found" in out


def _set_base_offset(path: Path, batch: int, base_offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[batch * BATCH_BYTES : batch * BATCH_BYTES + 8] = base_offset.to_bytes(8, "big")
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("base_offset", "problem"),
    [(28, "leaves a gap after offset 19"), (0, "goes back: offsets up to 19 came before it")],
    ids=["flipped-bit", "zero"],
)
def test_verify_reports_a_damaged_base_offset_of_the_last_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base_offset: int, problem: str
) -> None:
    # The base offset is outside the CRC: a flipped bit there (20 -> 28) or a zeroed field
    # is found only by offset continuity.
    path = _segment(tmp_path)
    _set_base_offset(path, 2, base_offset)
    assert cli.main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"error at byte {2 * BATCH_BYTES}: base offset {base_offset} {problem}" in out
    assert "all valid" not in out


def test_verify_reports_a_partition_leader_epoch_that_goes_down(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The epoch (bytes 12-15) is outside the CRC: a bit flipped up in the middle batch
    # leaves the last batch's epoch below it.
    path = _segment(tmp_path)
    data = bytearray(path.read_bytes())
    data[BATCH_BYTES + 15] ^= 0x04
    path.write_bytes(bytes(data))
    assert cli.main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert (
        f"error at byte {2 * BATCH_BYTES}: partition leader epoch 0 is below the previous "
        f"batch's (4, at byte {BATCH_BYTES})"
    ) in out


def test_verify_checks_the_first_batch_against_the_offset_in_the_file_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _segment(tmp_path)
    renamed = path.with_name(f"{5:020d}.log")
    path.rename(renamed)
    assert cli.main(["verify", str(renamed)]) == 1
    assert (
        "error at byte 0: base offset 0 of the first batch disagrees with the file name, "
        "which says the segment starts at offset 5"
    ) in capsys.readouterr().out


def test_verify_reports_a_torn_tail_without_failing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _segment(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    assert cli.main(["verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2 batches, 20 records, all valid" in out
    assert "trailing bytes do not form a whole batch" in out


def test_dump_log_decodes_consumer_offsets_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with eoslog.open(str(tmp_path / "data"), background=False) as broker:
        broker.create_topic("in", 1)
        consumer = broker.consumer({"group.id": "g", "enable.auto.commit": False})
        consumer.commit(offsets=[eoslog.TopicPartition("in", 0, 5, metadata="hi")])
        consumer.close()
        broker.groups.delete_group("g")  # the offset's and the group's tombstones
    segment = tmp_path / "data" / "__consumer_offsets-0" / f"{0:020d}.log"
    assert cli.main(["dump-log", str(segment), "--records"]) == 0
    out = capsys.readouterr().out
    assert 'key: {"type": "1", "data": {"group": "g", "topic": "in", "partition": 0}}' in out
    assert 'payload: {"version": "3", "data": {"offset": 5, "metadata": "hi"' in out
    assert 'key: {"type": "2", "data": {"group": "g"}} payload: <DELETE>' in out


def test_verify_refuses_paths_that_are_not_segment_files_with_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _segment(tmp_path).read_bytes()
    (tmp_path / "junk.log").write_bytes(good)
    (tmp_path / "00000000000000000000.log.bak").write_bytes(good)
    os.mkfifo(tmp_path / f"{1:020d}.log")  # opening a FIFO would block: refused before
    cases = {
        "junk.log": "is not a segment file",
        "00000000000000000000.log.bak": "is not a segment file",
        f"{1:020d}.log": "is not a regular file",
        "missing.log": "No such file or directory",
    }
    for name, text in cases.items():
        assert cli.main(["verify", str(tmp_path / name)]) == 2, name
        err = capsys.readouterr().err
        assert text in err and "Traceback" not in err, (name, err)
        assert len(err.splitlines()) == 1, err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["verify", str(empty)]) == 2
    assert "holds neither segment .log files nor partition directories" in capsys.readouterr().err


def test_dump_log_of_a_missing_file_or_a_directory_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["dump-log", str(tmp_path / "missing.log")]) == 2
    assert "No such file or directory" in capsys.readouterr().err
    assert cli.main(["dump-log", str(tmp_path)]) == 2
    assert "is not a regular file" in capsys.readouterr().err


def test_dump_log_into_a_pipe_closed_early_stops_quietly(tmp_path: Path) -> None:
    # Enough records that the output overflows the pipe buffer after `head` has left.
    path = _segment(tmp_path, batches=300)
    command = [sys.executable, "-m", "eoslog", "dump-log", str(path), "--records"]
    dump = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert dump.stdout is not None and dump.stderr is not None
    assert dump.stdout.readline().startswith(b"Dumping ")
    dump.stdout.close()
    err = dump.stderr.read().decode()
    assert dump.wait(timeout=60) == 141
    assert err == "", err


def test_verify_reads_a_multi_gib_segment_in_bounded_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Three batches, the second claiming a length of 2 GiB (the length is outside the CRC),
    # then a 2 GiB hole (sparse: no disk used), then one more valid batch. verify refuses to
    # read the lying batch, searches past both damages and resumes, holding a few chunks.
    path = _segment(tmp_path)
    data = path.read_bytes()
    hole = 2 << 30
    with open(path, "r+b") as file:
        file.seek(BATCH_BYTES + 8)
        file.write((hole - 12).to_bytes(4, "big"))
        file.seek(len(data) + hole)
        file.write(data[:BATCH_BYTES])
    tracemalloc.start()
    try:
        assert cli.main(["verify", str(path)]) == 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    out = capsys.readouterr().out
    assert f"error at byte {BATCH_BYTES}: batch length {hole} bytes is larger than any" in out
    assert f"valid batches resume at byte {2 * BATCH_BYTES}" in out
    assert f"error at byte {len(data)}: batch length field is below" in out
    assert f"valid batches resume at byte {len(data) + hole}" in out
    assert f"error at byte {len(data) + hole}: base offset 0 goes back" in out
    assert peak < 64 << 20, peak


def test_verify_of_a_log_directory_checks_every_partition_and_segment_continuity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "data"
    with eoslog.open(str(root), background=False) as broker:
        broker.create_topic("t", 2, config={"segment.bytes": 3 * BATCH_BYTES})
        for partition in (0, 1):
            producer_log = broker.log("t", partition)
            for _ in range(9):
                builder = codec.BatchBuilder()
                for i in range(10):
                    builder.append(1_700_000_000_000 + i, None, b"value-%d" % i, [("h", b"x")])
                producer_log.append_batch(builder.build())
    assert cli.main(["verify", str(root)]) == 0
    out = capsys.readouterr().out
    assert "all valid" in out and "t-0" not in out  # no problem lines

    partition = root / "t-1"
    segments = sorted(partition.glob("*.log"))
    assert len(segments) >= 3
    segments[1].unlink()  # a whole segment lost: the next one starts after a gap
    (partition / "-5.log").write_bytes(b"")
    assert cli.main(["verify", str(root)]) == 1
    out = capsys.readouterr().out
    assert f"{segments[2]}: error at byte 0: the segment's base offset" in out
    assert "leaves a gap" in out
    assert f"{partition / '-5.log'}: warning at byte 0: not a segment name" in out
    assert cli.main(["verify", str(root / "t-0")]) == 0
