"""`eoslog dump-log FILE...` as kafka-dump-log.sh, driven from the shell on a log directory
with committed and aborted transactions (zstd-compressed), a consumer group's commits and
indexes with entries: batch lines with their CRC checked, records with typed markers, keys and
payloads, the two internal topics decoded, the index, time index, transaction index and
producer snapshot dumped, damage reported with the dump carrying on, and no progress text
when the output is piped."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

import eoslog
import eoslog.dump_log
from eoslog import cli
from eoslog.fs import FileHandle
from eoslog.record import codec
from tests.cli.shell import run

SEGMENT = f"{0:020d}"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Topic t: a committed then an aborted transaction, zstd, key k and header h; then a
    plain batch; an index entry per batch; group g's commit of t-0 at 2."""
    root = tmp_path_factory.mktemp("dump") / "data"
    with eoslog.open(str(root), background=False) as broker:
        broker.create_topic("t", 1, config={"index.interval.bytes": 1})
        for tid, commit in (("committer", True), ("aborter", False)):
            producer = broker.producer(
                {"transactional.id": tid, "linger.ms": 0, "compression.type": "zstd"}
            )
            producer.init_transactions()
            producer.begin_transaction()
            value = b"value-" + tid.encode()
            producer.produce("t", value, key=b"k", partition=0, headers=[("h", b"x")])
            producer.commit_transaction() if commit else producer.abort_transaction()
            producer.close()
        consumer = broker.consumer({"group.id": "g", "enable.auto.commit": False})
        consumer.commit(offsets=[eoslog.TopicPartition("t", 0, 2, metadata="m")])
        consumer.close()
    return root


def _dump(*arguments: str) -> tuple[int, list[str]]:
    done = run("dump-log", *arguments)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout.splitlines()


def test_batches_show_every_header_field_the_codec_and_a_checked_crc(root: Path) -> None:
    status, lines = _dump(str(root / "t-0" / f"{SEGMENT}.log"))
    assert status == 0
    assert lines[:2] == [f"Dumping {root / 't-0' / SEGMENT}.log", "Log starting offset: 0"]
    batches = [line for line in lines if line.startswith("baseOffset:")]
    assert [line.split()[1] for line in batches] == ["0", "1", "2", "3"]
    first = batches[0]
    for field in ("count: 1", "baseSequence: 0", "lastSequence: 0", "producerEpoch: 0"):
        assert field in first
    assert "isTransactional: true isControl: false position: 0 CreateTime:" in first
    assert "magic: 2 compresscodec: zstd crc: " in first and first.endswith("isvalid: true")
    assert "isControl: true position: 97 " in batches[1]
    assert not [line for line in lines if line.startswith("|")]  # no records without -deep


def test_deep_iteration_types_the_markers_and_print_data_log_adds_keys_and_payloads(
    root: Path,
) -> None:
    segment = str(root / "t-0" / f"{SEGMENT}.log")
    _, lines = _dump(segment, "--deep-iteration")
    records = [line for line in lines if line.startswith("| offset:")]
    assert len(records) == 4
    assert "keySize: 1 valueSize: 15 sequence: 0 headerKeys: [h]" in records[0]
    assert "payload" not in records[0]
    assert records[1].endswith("endTxnMarker: COMMIT coordinatorEpoch: 1")
    assert records[3].endswith("endTxnMarker: ABORT coordinatorEpoch: 1")
    _, lines = _dump(segment, "--print-data-log")
    records = [line for line in lines if line.startswith("| offset:")]
    assert records[0].endswith("headerKeys: [h] key: k payload: value-committer")
    assert records[2].endswith("key: k payload: value-aborter")


def test_transaction_state_records_are_decoded_with_their_state_and_partitions(
    root: Path, tmp_path: Path
) -> None:
    segment = root / "__transaction_state-0" / f"{SEGMENT}.log"
    _, lines = _dump(str(segment), "--print-data-log")
    keys = '{"type": "0", "data": {"transactionalId": "committer"}}'
    ongoing = [line for line in lines if keys in line and '"ONGOING"' in line]
    assert (
        ongoing and '"transactionPartitions": [{"topic": "t", "partitionIds": [0]}]' in (ongoing[0])
    )
    # A copy outside its partition directory is decoded when the option names the decoder.
    copy = tmp_path / f"{SEGMENT}.log"
    shutil.copy(segment, copy)
    _, plain = _dump(str(copy), "--print-data-log")
    assert not [line for line in plain if "transactionalId" in line]
    _, decoded = _dump(str(copy), "--transaction-log-decoder")
    assert [line for line in decoded if '"COMPLETE_ABORT"' in line and "aborter" in line]


def test_offsets_decoder_prints_a_group_commit_as_kafka_json(root: Path, tmp_path: Path) -> None:
    copy = tmp_path / f"{SEGMENT}.log"
    shutil.copy(root / "__consumer_offsets-0" / f"{SEGMENT}.log", copy)
    status, lines = _dump(str(copy), "--offsets-decoder")
    assert status == 0
    (commit,) = [line for line in lines if line.startswith("| offset:")]
    assert 'key: {"type": "1", "data": {"group": "g", "topic": "t", "partition": 0}}' in commit
    assert 'payload: {"version": "3", "data": {"offset": 2, "metadata": "m", ' in commit
    assert '"leaderEpoch": -1, "expireTimestamp": -1}}' in commit


def test_index_time_index_transaction_index_and_snapshot_are_dumped_entry_by_entry(
    root: Path,
) -> None:
    partition = root / "t-0"
    (snapshot,) = partition.glob("*.snapshot")
    names = [f"{SEGMENT}.index", f"{SEGMENT}.timeindex", f"{SEGMENT}.txnindex", snapshot.name]
    status, lines = _dump(*(str(partition / name) for name in names))
    assert status == 0
    assert [line for line in lines if line.startswith("Dumping")] == [
        f"Dumping {partition / name}" for name in names
    ]
    assert "offset: 0 position: 0" not in lines  # eoslog never indexes position 0
    assert "offset: 1 position: 97" in lines
    assert [line for line in lines if line.startswith("timestamp: ")]
    assert "version: 0 producerId: 1 firstOffset: 2 lastOffset: 3 lastStableOffset: 4" in lines
    producers = [line for line in lines if line.startswith("producerId: ")]
    assert [line.split()[1] for line in producers] == ["0", "1"]
    assert "producerEpoch: 1 coordinatorEpoch: 1 currentTxnFirstOffset: -1" in producers[1]


def _index_beside_its_log(root: Path, tmp_path: Path, suffix: str) -> Path:
    """A copy of t-0's first segment and its index of that suffix in tmp_path: the index."""
    for name in (f"{SEGMENT}.log", f"{SEGMENT}{suffix}"):
        shutil.copy(root / "t-0" / name, tmp_path / name)
    return tmp_path / f"{SEGMENT}{suffix}"


def test_an_index_entry_that_does_not_point_at_its_batch_is_reported_on_stderr(
    root: Path, tmp_path: Path
) -> None:
    index = _index_beside_its_log(root, tmp_path, ".index")
    data = bytearray(index.read_bytes())
    data[7] = 98  # the first entry's position, 97, now one byte into its batch
    index.write_bytes(bytes(data))
    done = run("dump-log", str(index))
    assert done.returncode == 1
    assert "offset: 1 position: 98" in done.stdout.splitlines()
    assert done.stderr.splitlines() == [
        f"Mismatches in :{index}",
        "  Index offset: 1, log offset: no batch there",
    ]


def test_a_time_index_entry_the_log_disagrees_with_is_reported_on_stderr(
    root: Path, tmp_path: Path
) -> None:
    index = _index_beside_its_log(root, tmp_path, ".timeindex")
    status, lines = _dump(str(index))
    assert status == 0
    first = lines[1]
    timestamp = int(first.split()[1])
    data = bytearray(index.read_bytes())
    data[:8] = (timestamp - 1000).to_bytes(8, "big")
    index.write_bytes(bytes(data))
    done = run("dump-log", str(index))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"Found timestamp mismatch in :{index}",
        f"  Index timestamp: {timestamp - 1000}, log timestamp: {timestamp}",
    ]


def test_an_idempotent_producers_snapshot_line_ends_with_its_last_batch(tmp_path: Path) -> None:
    root = tmp_path / "data"
    with eoslog.open(str(root), background=False) as broker:
        broker.create_topic("t", 1)
        producer = broker.producer({"enable.idempotence": True, "linger.ms": 0})
        for value in (b"a", b"b", b"c"):
            producer.produce("t", value, partition=0)
            producer.flush()
        producer.close()
    (snapshot,) = (root / "t-0").glob("*.snapshot")
    status, lines = _dump(str(snapshot))
    assert status == 0
    assert lines[1].startswith("producerId: 0 producerEpoch: 0 coordinatorEpoch: -1 ")
    assert "firstSequence: 2 lastSequence: 2 lastOffset: 2 offsetDelta: 0 timestamp: " in lines[1]


def test_a_file_of_unknown_kind_is_skipped_with_a_line_on_stderr_and_status_2(
    root: Path,
) -> None:
    done = run("dump-log", str(root / "eoslog.meta"), str(root / "t-0" / f"{SEGMENT}.log"))
    assert done.returncode == 2
    assert done.stderr == f"Ignoring unknown file {root / 'eoslog.meta'}\n"
    assert "baseOffset: 3" in done.stdout  # the other file is still dumped


def test_a_missing_file_among_several_prints_nothing_and_is_status_2(root: Path) -> None:
    done = run("dump-log", str(root / "t-0" / f"{SEGMENT}.log"), str(root / "missing.log"))
    assert (done.returncode, done.stdout) == (2, "")
    assert "No such file or directory" in done.stderr and len(done.stderr.splitlines()) == 1


def _batch(offset: int, value_bytes: int = 10) -> bytes:
    """A batch of one record at offset."""
    builder = codec.BatchBuilder()
    builder.append(1_700_000_000_000, None, b"v" * value_bytes)
    batch = bytearray(builder.build())
    codec.stamp_batch(batch, base_offset=offset, partition_leader_epoch=0)
    return bytes(batch)


def _segment(path: Path, batches: int, value_bytes: int = 10) -> list[int]:
    """Batches of one record each at offsets 0, 1, ...; returns their positions."""
    data = bytearray()
    positions = []
    for index in range(batches):
        positions.append(len(data))
        data += _batch(index, value_bytes)
    path.write_bytes(bytes(data))
    return positions


def test_a_batch_whose_crc_fails_is_shown_invalid_and_the_dump_carries_on(tmp_path: Path) -> None:
    path = tmp_path / f"{SEGMENT}.log"
    positions = _segment(path, 3)
    data = bytearray(path.read_bytes())
    data[positions[2] - 3] ^= 0x01  # inside the second batch's record
    path.write_bytes(bytes(data))
    status, lines = _dump(str(path))
    assert status == 1
    batches = [line for line in lines if line.startswith("baseOffset:")]
    assert [line.split()[1] for line in batches] == ["0", "1", "2"]
    assert batches[1].endswith("isvalid: false")
    assert batches[0].endswith("isvalid: true") and batches[2].endswith("isvalid: true")
    assert f"Damage at byte {positions[1]}: " in "\n".join(lines)
    assert f"valid batches resume at byte {positions[2]}" in "\n".join(lines)


def test_zeros_after_the_last_batch_are_where_the_log_ends_not_damage(tmp_path: Path) -> None:
    """An open log under durability "commit" extends its active segment ahead with zeros."""
    path = tmp_path / f"{SEGMENT}.log"
    _segment(path, 2)
    end = path.stat().st_size
    path.write_bytes(path.read_bytes() + bytes(4096))
    status, lines = _dump(str(path))
    assert status == 0
    assert [line.split()[1] for line in lines if line.startswith("baseOffset:")] == ["0", "1"]
    ending = [line for line in lines if line.startswith(f"The log ends at byte {end} of ")]
    assert len(ending) == 1 and ": 4096 zero bytes follow" in ending[0]


def test_zeros_followed_by_anything_else_are_damage(tmp_path: Path) -> None:
    path = tmp_path / f"{SEGMENT}.log"
    _segment(path, 2)
    end = path.stat().st_size
    path.write_bytes(path.read_bytes() + bytes(4096) + b"\x01")
    status, lines = _dump(str(path))
    assert status == 1
    assert f"Damage at byte {end}: " in "\n".join(lines)


def _dump_while_the_owner_appends(
    path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], first: int
) -> tuple[int, list[str]]:
    """dump_log over two batches and preallocated zeros, where the owner appends batches at
    offsets first, first + 1 into the zeros right after the walk read a batch length of 0
    there (the interleaving a live segment under "commit" allows)."""
    end = _segment(path, 2)[-1] + len(_batch(1))
    path.write_bytes(path.read_bytes() + bytes(4096))
    zero_tail = eoslog.dump_log.zero_tail

    def owner_appends_then_look(handle: FileHandle, start: int, size: int) -> bool:
        with open(path, "r+b") as file:
            file.seek(end)
            file.write(_batch(first) + _batch(first + 1))
        return zero_tail(handle, start, size)

    monkeypatch.setattr(eoslog.dump_log, "zero_tail", owner_appends_then_look)
    status = eoslog.dump_log.dump_log(str(path), eoslog.dump_log.DumpOptions.of())
    return status, capsys.readouterr().out.splitlines()


def test_batches_appended_while_dump_log_reads_end_the_dump_not_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / f"{SEGMENT}.log"
    status, lines = _dump_while_the_owner_appends(path, monkeypatch, capsys, first=2)
    assert status == 0, lines
    assert [line.split()[1] for line in lines if line.startswith("baseOffset:")] == ["0", "1"]
    assert not [line for line in lines if line.startswith("Damage")], lines
    assert lines[-1].endswith("batches were appended there while dump-log read it (a live segment)")


def test_a_batch_in_the_zeros_that_does_not_continue_the_offsets_is_still_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / f"{SEGMENT}.log"
    status, lines = _dump_while_the_owner_appends(path, monkeypatch, capsys, first=7)
    assert status == 1
    assert [line for line in lines if line.startswith("Damage at byte ")], lines


# Over eoslog.progress.PROGRESS_BYTES_MIN (16 MiB): 20 one-MiB batches.
_LARGE_BATCHES = 20


@pytest.mark.parametrize("command", ["dump-log", "verify"])
def test_large_files_show_no_progress_text_when_piped(tmp_path: Path, command: str) -> None:
    path = tmp_path / f"{SEGMENT}.log"
    _segment(path, _LARGE_BATCHES, value_bytes=1 << 20)
    done = run(command, str(path))
    assert done.returncode == 0
    assert done.stderr == ""
    assert "\x1b" not in done.stdout


@pytest.mark.parametrize("command", ["dump-log", "verify"])
def test_large_files_show_a_progress_bar_on_a_terminal(tmp_path: Path, command: str) -> None:
    path = tmp_path / f"{SEGMENT}.log"
    _segment(path, _LARGE_BATCHES, value_bytes=1 << 20)
    main, terminal = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "eoslog", command, str(path)],
        stdout=subprocess.PIPE,
        stderr=terminal,
        env={**os.environ, "TERM": "xterm", "COLUMNS": "100"},
    )
    os.close(terminal)
    shown = bytearray()
    while True:
        try:
            piece = os.read(main, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not piece:
            break
        shown += piece
    out, _ = child.communicate(timeout=120)
    os.close(main)
    assert child.returncode == 0
    assert f"{command} {SEGMENT}.log".encode() in shown
    assert b"MB" in shown  # the bytes read so far, as the bar counts them
    assert b"MB" not in out and b"\x1b" not in out


def test_a_batch_claiming_2_gib_and_a_2_gib_hole_are_dumped_past_in_bounded_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Three batches, the second's length field (outside the CRC) claiming 2 GiB, then a
    # 2 GiB hole (sparse: no disk used), then one more batch. The dump reads neither whole:
    # it reports both, goes on from the batches after them and holds a few chunks at most.
    path = tmp_path / f"{SEGMENT}.log"
    positions = _segment(path, 3)
    size = path.stat().st_size
    hole = 2 << 30
    with open(path, "r+b") as file:
        file.seek(positions[1] + 8)
        file.write((hole - 12).to_bytes(4, "big"))
        file.seek(size + hole)
        file.write(path.read_bytes()[: positions[1]])
    tracemalloc.start()
    try:
        assert cli.main(["dump-log", str(path), "--deep-iteration"]) == 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    lines = capsys.readouterr().out.splitlines()
    batches = [line.split()[1] for line in lines if line.startswith("baseOffset:")]
    assert batches == ["0", "2", "0"]  # the lying batch's header is not printed as a batch
    damage = [line for line in lines if line.startswith("Damage at byte")]
    assert damage[0].startswith(f"Damage at byte {positions[1]}: batch length {hole} bytes")
    assert damage[0].endswith(f"valid batches resume at byte {positions[2]}")
    assert damage[1].endswith(f"valid batches resume at byte {size + hole}")
    assert peak < 64 << 20, peak
