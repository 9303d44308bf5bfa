"""`eoslog verify PATH...` from the shell on a real log directory (several segments per
partition, transactions committed and aborted, a group's commits), each kind of file damaged
one at a time: every problem names the file and the byte, every error says how to repair it,
and the verdict agrees with what an open does: an error where `eoslog.open` refuses (or would
lose records), a warning where the open mends the file itself."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

import eoslog
from eoslog.errors import CorruptCheckpointError, CorruptRecordError, KafkaStorageError
from eoslog.log.txn_index import ENTRY_BYTES, AbortedTxn
from tests.cli.shell import run

FIRST = f"{0:020d}"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Topic t, 2 partitions of ~2 KB segments with an index entry every 100 bytes: twelve
    transactions of five records, every third aborted (each partition's first transaction
    commits: offsets 0-2 and its COMMIT marker at 3), then 40 plain records; group g's
    commits of both partitions. Closed cleanly."""
    root = tmp_path_factory.mktemp("verify") / "data"
    with eoslog.open(str(root), background=False) as broker:
        broker.create_topic("t", 2, config={"segment.bytes": 2000, "index.interval.bytes": 100})
        producer = broker.producer({"transactional.id": "tx"})
        producer.init_transactions()
        for number in range(12):
            producer.begin_transaction()
            for i in range(5):
                producer.produce("t", b"value-%d-%d" % (number, i), key=b"k", partition=i % 2)
            producer.flush()
            if number % 3 == 1:
                producer.abort_transaction()
            else:
                producer.commit_transaction()
        plain = broker.producer({})
        for i in range(40):
            plain.produce("t", b"plain-%d" % i, partition=i % 2)
        plain.flush()
        consumer = broker.consumer({"group.id": "g", "enable.auto.commit": False})
        consumer.commit(
            offsets=[eoslog.TopicPartition("t", 0, 9), eoslog.TopicPartition("t", 1, 7)],
            asynchronous=False,
        )
        consumer.close()
        producer.close()
        plain.close()
    return root


@pytest.fixture
def root(pristine: Path, tmp_path: Path) -> Path:
    """A copy of the pristine directory to damage."""
    return Path(shutil.copytree(pristine, tmp_path / "data", symlinks=True))


def _verify(*paths: Path) -> tuple[int, list[str]]:
    done = run("verify", *map(str, paths))
    assert done.stderr == "", done.stderr
    return done.returncode, done.stdout.splitlines()


def _problem(lines: list[str], path: Path, kind: str) -> str:
    """The one problem line naming path, of kind error or warning."""
    found = [line for line in lines if line.startswith(f"{path}: {kind} at byte ")]
    assert len(found) == 1, lines
    return found[0]


def _reported(verified: Path, damaged: Path, kind: str) -> str:
    """Verify `verified`: exit status 1 for an error, else 0, and the one line of that kind
    naming `damaged`."""
    status, lines = _verify(verified)
    assert status == (1 if kind == "error" else 0), lines
    return _problem(lines, damaged, kind)


def _flip(path: Path, at: int, mask: int = 0x40) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= mask
    path.write_bytes(bytes(data))


def _opens(root: Path) -> None:
    """An open of the directory (which mends what it may) succeeds."""
    with eoslog.open(str(root), background=False):
        pass


def test_a_clean_directory_and_files_in_it_are_all_valid_with_one_summary_each(
    root: Path,
) -> None:
    partition = root / "t-0"
    assert len(list(partition.glob("*.log"))) >= 2 and list(partition.glob("*.txnindex"))
    files = [partition / f"{FIRST}{suffix}" for suffix in (".log", ".index", ".timeindex")]
    snapshot = sorted(partition.glob("*.snapshot"))[-1]
    status, lines = _verify(root, partition, *files, partition / f"{FIRST}.txnindex", snapshot)
    assert status == 0
    assert len(lines) == 7, lines  # a summary per path, no problem line
    assert lines[0].startswith(f"{root}: ") and lines[0].endswith("all valid")
    assert all(line.endswith("all valid") for line in lines), lines
    assert lines[5] == f"{partition / f'{FIRST}.txnindex'}: all valid"


def test_damage_in_the_middle_of_a_log_names_the_exact_repair_which_then_leaves_it_valid(
    root: Path,
) -> None:
    log = root / "t-0" / f"{FIRST}.log"
    data = log.read_bytes()
    second = int.from_bytes(data[8:12], "big") + 12  # the second batch's byte
    _flip(log, second + 70)
    line = _reported(root, log, "error")
    assert line.startswith(f"{log}: error at byte {second}: CRC-32C mismatch")
    assert "damage in the middle of the log: reads there raise CorruptRecordError" in line
    assert f"To discard everything from there on (offsets 3 on: {len(data) - second} bytes" in line
    command = f"eoslog repair {log} --truncate-at {second}"
    assert line.endswith(command)
    with eoslog.open(str(root), background=False) as broker, pytest.raises(CorruptRecordError):
        consumer = broker.consumer({"group.id": "reader", "auto.offset.reset": "earliest"})
        consumer.assign([eoslog.TopicPartition("t", 0, 0)])
        for _ in range(10):
            consumer.consume(100, timeout=1.0)
    assert run(*command.split()[1:]).returncode == 0
    status, lines = _verify(root)
    assert status == 0 and lines[-1].endswith("all valid"), lines


def test_a_torn_tail_is_an_error_after_a_clean_shutdown_and_a_warning_after_a_crash(
    root: Path,
) -> None:
    segments = sorted((root / "t-1").glob("*.log"))
    size = segments[-1].stat().st_size
    with open(segments[-1], "ab") as log:
        log.write(b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00")  # a batch cut short
    line = _reported(root, segments[-1], "error")
    assert "the directory was closed cleanly, so everything in it was durable" in line
    assert line.endswith(f"eoslog repair {segments[-1]} --truncate-at {size}")
    with pytest.raises(CorruptRecordError):
        _opens(root)
    # The refused open took the clean-shutdown marker, as an open does: now the directory
    # reads as one a crash stopped.
    assert not (root / ".kafka_cleanshutdown").exists()
    line = _reported(root, segments[-1], "warning")
    assert "a torn tail, which the next unclean open cuts" in line
    _opens(root)


def test_zeros_ending_the_log_are_an_error_after_a_clean_shutdown_and_nothing_after_a_crash(
    root: Path,
) -> None:
    """An open log under "commit" or "always" runs its active segment ahead in zeros, which
    a clean close cuts and the next unclean open cuts."""
    segments = sorted((root / "t-1").glob("*.log"))
    size = segments[-1].stat().st_size
    with open(segments[-1], "ab") as log:
        log.write(bytes(4096))
    line = _reported(root, segments[-1], "error")
    assert line.endswith(f"eoslog repair {segments[-1]} --truncate-at {size}")
    (root / ".kafka_cleanshutdown").unlink()  # as a kill -9 leaves it
    status, lines = _verify(root)
    assert status == 0
    assert not [line for line in lines if str(segments[-1]) in line and "warning" in line]
    _opens(root)
    assert segments[-1].stat().st_size == size


def test_a_wrong_offset_index_entry_is_damage_naming_its_byte_and_how_to_rebuild(
    root: Path,
) -> None:
    index = root / "t-0" / f"{FIRST}.index"
    _flip(index, 8 + 4, 0x01)  # entry 1's position, 1 << 24 bytes further
    for path in (root, index):
        line = _reported(path, index, "error")
        assert line.startswith(f"{index}: error at byte 8: entry 1 (offset ")
        assert "past its end" in line
        assert f"delete {index} while no process has the directory open" in line
        assert line.endswith("the next open rebuilds it from the log")
    _opens(root)


def test_a_wrong_time_index_entry_is_damage_naming_its_byte(root: Path) -> None:
    index = root / "t-1" / f"{FIRST}.timeindex"
    _flip(index, 12 + 7, 0x01)  # entry 1's timestamp, 1 ms off
    line = _reported(root, index, "error")
    assert line.startswith(f"{index}: error at byte 12: entry 1 says the batch ending at offset")
    assert "but its largest timestamp is" in line and "rebuilds the index" in line


def test_a_txnindex_entry_the_log_contradicts_is_damage_the_next_open_rebuilds(
    root: Path,
) -> None:
    txnindex = root / "t-0" / f"{FIRST}.txnindex"
    _flip(txnindex, 9)  # entry 0's producer id
    line = _reported(txnindex, txnindex, "error")
    assert line.startswith(f"{txnindex}: error at byte 0: entry 0 ")
    assert "holds no ABORT marker of producer" in line
    assert line.endswith("the next open finds it wrong and rebuilds it from the log")
    _opens(root)
    assert _verify(txnindex) == (0, [f"{txnindex}: all valid"])


def test_a_txnindex_lost_while_the_checkpoint_counted_its_entries_is_damage(
    root: Path,
) -> None:
    txnindex = root / "t-1" / f"{FIRST}.txnindex"
    entries = txnindex.stat().st_size // ENTRY_BYTES
    txnindex.unlink()
    line = _reported(root, txnindex, "error")
    assert "it holds 0 entries ending below offset" in line
    assert f"eoslog-aborted-txn-checkpoint counted {entries}" in line
    _opens(root)
    assert txnindex.stat().st_size == entries * ENTRY_BYTES  # rebuilt by the open


@pytest.mark.parametrize("kind", [".index", ".timeindex", ".snapshot"])
def test_a_derived_file_wrong_after_a_crash_is_a_warning_the_next_open_mends(
    root: Path, kind: str
) -> None:
    # Without the clean-shutdown marker the derived files may lag the log legitimately (the
    # owner syncs them at close): what is wrong is mended by the next open, not damage.
    (root / ".kafka_cleanshutdown").unlink()
    damaged = sorted((root / "t-0").glob(f"*{kind}"))[0]
    _flip(damaged, 20 if kind == ".snapshot" else 12 + 4, 0x01)
    line = _reported(root, damaged, "warning")
    assert line.startswith(f"{damaged}: warning at byte ")
    _opens(root)


def test_a_txnindex_entry_naming_a_commit_marker_is_an_error_as_the_open_refuses_it(
    root: Path,
) -> None:
    # Entry 0 rewritten to say the committed transaction at offsets 0-2, ended by the COMMIT
    # marker at 3, was aborted: the log alone cannot tell which file lies.
    txnindex = root / "t-0" / f"{FIRST}.txnindex"
    data = bytearray(txnindex.read_bytes())
    entry = AbortedTxn.decode(bytes(data[:ENTRY_BYTES]))
    data[:ENTRY_BYTES] = AbortedTxn(entry.producer_id, 0, 3, 0).encode()
    txnindex.write_bytes(bytes(data))
    line = _reported(root, txnindex, "error")
    assert line.startswith(f"{txnindex}: error at byte 0: entry 0 says producer")
    assert f"{root / 't-0' / f'{FIRST}.log'} holds a COMMIT marker" in line
    assert "Check the transaction's outcome in __transaction_state" in line
    with pytest.raises(CorruptRecordError, match="COMMIT marker"):
        _opens(root)


def test_a_damaged_snapshot_is_damage_the_next_open_discards(root: Path) -> None:
    snapshot = sorted((root / "t-0").glob("*.snapshot"))[-1]
    _flip(snapshot, 20)
    for path in (root, snapshot):
        line = _reported(path, snapshot, "error")
        assert "fails its CRC-32C check" in line
        assert line.endswith("rebuilds the producer state from an older snapshot or the log")
    _opens(root)


def test_a_recovery_point_past_the_log_end_is_an_error_naming_its_line(root: Path) -> None:
    checkpoint = root / "recovery-point-offset-checkpoint"
    text = checkpoint.read_text()
    line_start = text.index("\nt 0 ") + 1
    end = int(text[line_start:].split("\n")[0].split()[2])
    checkpoint.write_text(text.replace(f"\nt 0 {end}\n", f"\nt 0 {end + 900}\n"))
    line = _reported(root, checkpoint, "error")
    assert line.startswith(f"{checkpoint}: error at byte {line_start}: says ")
    assert f"durable up to offset {end + 900}, but its log ends at offset {end}" in line
    assert f"remove the line 't 0 {end + 900}' from {checkpoint}" in line
    with pytest.raises(CorruptCheckpointError):
        _opens(root)


@pytest.mark.parametrize(
    ("checkpoint", "kind", "consequence"),
    [
        ("recovery-point-offset-checkpoint", "error", "so it knows no offset durable"),
        ("eoslog-log-start-checkpoint", "error", "the records below it can be read again"),
        ("log-start-offset-checkpoint", "warning", "takes the log starts from eoslog-log-start"),
        ("eoslog-aborted-txn-checkpoint", "warning", "rebuilds every .txnindex from the log"),
    ],
    ids=["recovery-point", "eoslog-log-start", "kafka-log-start", "aborted-txn"],
)
def test_a_malformed_checkpoint_is_an_error_only_where_an_open_would_lose_what_it_held(
    root: Path, checkpoint: str, kind: str, consequence: str
) -> None:
    # The count line (byte 2) no longer matches the entries; in eoslog's checksummed file
    # the CRC no longer matches first.
    path = root / checkpoint
    lines = path.read_text().split("\n")
    path.write_text("\n".join([lines[0], str(int(lines[1]) + 1), *lines[2:]]))
    line = _reported(root, path, kind)
    assert f"{path}: {kind} at byte " in line and ": malformed: " in line
    assert "an open believes none of its " in line and consequence in line
    _opens(root)


def test_a_log_start_inside_a_segment_that_eoslog_did_not_confirm_is_ignored_with_a_warning(
    root: Path,
) -> None:
    # Kafka's file alone names a log start of 2 for t-0: delete_records writes eoslog's
    # checksummed copy first, so this is damage, and an open leaves the records below it.
    path = root / "log-start-offset-checkpoint"
    path.write_text("0\n1\nt 0 2\n")
    line = _reported(root, path, "warning")
    assert line.startswith(f"{path}: warning at byte 4: log start 2 of {root / 't-0'} ignored")
    assert "eoslog-log-start-checkpoint does not confirm it" in line
    with eoslog.open(str(root), background=False) as broker:
        assert broker.log("t", 0).log_start_offset == 0


def test_a_damaged_eoslog_meta_is_an_error_as_the_open_refuses_it(root: Path) -> None:
    meta = root / "eoslog.meta"
    _flip(meta, 30)
    line = _reported(root, meta, "error")
    assert "fails its CRC-32C check: an open refuses the directory" in line
    assert "restore eoslog.meta from a backup" in line
    with pytest.raises(KafkaStorageError):
        _opens(root)


def test_a_partition_directory_lost_is_an_error_and_one_no_topic_names_a_warning(
    root: Path,
) -> None:
    shutil.rmtree(root / "t-1")
    shutil.copytree(root / "t-0", root / "t-7")
    status, lines = _verify(root)
    assert status == 1
    lost = _problem(lines, root / "t-1", "error")
    assert "names the partition: it existed, and its records are lost" in lost
    stray = _problem(lines, root / "t-7", "warning")
    assert "eoslog.meta names no such partition (t has 2 partitions)" in stray
    assert "an open ignores the directory, and the" in stray


def test_the_status_of_several_paths_is_the_worst_and_each_has_its_summary(root: Path) -> None:
    log = root / "t-1" / f"{FIRST}.log"
    _flip(log, 100)
    status, lines = _verify(root / "t-0", root / "t-1")
    assert status == 1
    summaries = [line for line in lines if " at byte " not in line]
    assert summaries[0].startswith(f"{root / 't-0'}: ") and summaries[0].endswith("all valid")
    assert summaries[1].startswith(f"{root / 't-1'}: ") and summaries[1].endswith(
        "1 problems found"
    )


def test_a_live_directory_verifies_while_its_owner_appends(tmp_path: Path) -> None:
    root = tmp_path / "live"
    stop = threading.Event()
    written = threading.Event()
    failures: list[BaseException] = []
    with eoslog.open(str(root)) as broker:
        broker.create_topic("t", 1, config={"segment.bytes": 3000, "index.interval.bytes": 100})

        def append() -> None:
            try:
                producer = broker.producer({"transactional.id": "live"})
                producer.init_transactions()
                consumer = broker.consumer({"group.id": "g", "enable.auto.commit": False})
                number = 0
                while not stop.is_set():
                    producer.begin_transaction()
                    for i in range(3):
                        producer.produce("t", b"value-%d-%d" % (number, i))
                    producer.flush()
                    if number % 2:
                        producer.abort_transaction()
                    else:
                        producer.commit_transaction()
                    tp = eoslog.TopicPartition("t", 0, number)
                    consumer.commit(offsets=[tp], asynchronous=False)
                    number += 1
                    if number == 40:
                        written.set()  # several segments, with .txnindex files and snapshots
                producer.close()
                consumer.close()
            except BaseException as error:
                failures.append(error)
                written.set()

        appender = threading.Thread(target=append)
        appender.start()
        try:
            assert written.wait(120)
            for _ in range(3):
                status, lines = _verify(root, root / "t-0")
                assert status == 0, lines
                assert not [line for line in lines if ": error at byte " in line], lines
        finally:
            stop.set()
            appender.join()
    assert not failures
    assert len(list((root / "t-0").glob("*.txnindex"))) >= 2
