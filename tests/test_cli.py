"""The command line: demo, dump-log and verify on real segment files."""

from __future__ import annotations

from pathlib import Path

import pytest

import eoslog
from eoslog import cli
from eoslog.record import codec


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


def test_verify_names_the_position_of_a_corrupt_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _segment(tmp_path)
    data = bytearray(path.read_bytes())
    second = codec.read_header(data).size_in_bytes
    data[second + 70] ^= 0x10  # a bit inside the second batch's records
    path.write_bytes(bytes(data))
    assert cli.main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"CorruptRecordError in the batch at byte {second} (after 1 good batches)" in out


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
    segment = tmp_path / "data" / "__consumer_offsets-0" / f"{0:020d}.log"
    assert cli.main(["dump-log", str(segment), "--records"]) == 0
    out = capsys.readouterr().out
    assert 'key: {"type": "1", "data": {"group": "g", "topic": "in", "partition": 0}}' in out
    assert 'payload: {"version": "3", "data": {"offset": 5, "metadata": "hi"' in out
