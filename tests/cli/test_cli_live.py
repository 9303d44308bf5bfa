"""The read commands on a directory a running process owns, as a user runs them: they take no
lock and write nothing (docs/api.md "Command line", live and offline directories), and they
see what the owner wrote, while it keeps appending, rolling and deleting segments."""

from __future__ import annotations

import hashlib
import os
import signal
import time
from pathlib import Path

import eoslog
from tests.cli.shell import FOREIGN_PRODUCER_ID, run, run_json, started_child

HOUR_MS = 3_600_000

# The owner: topic t (2 partitions), a committed transaction of "writer", group g's offset 1
# on t-0, and a transaction of a foreign producer left open an hour ago on t-0.
_OWNER = f"""
import time
from eoslog.record import codec
b = eoslog.open(sys.argv[1])
b.create_topic("t", 2)
p = b.producer({{"transactional.id": "writer", "linger.ms": 0}})
p.init_transactions()
p.begin_transaction()
p.produce("t", b"committed", partition=0)
p.produce("t", b"committed", partition=1)
p.commit_transaction()
c = b.consumer({{"group.id": "g", "enable.auto.commit": False}})
c.commit(offsets=[eoslog.TopicPartition("t", 0, 1)], asynchronous=False)
c.close()
builder = codec.BatchBuilder(
    is_transactional=True, producer_id={FOREIGN_PRODUCER_ID}, producer_epoch=3, base_sequence=0
)
builder.append(int(time.time() * 1000) - {HOUR_MS}, None, b"hanging")
b.log("t", 0).append_batch(builder.build())
"""

# The owner, appending transactions (one in three aborted) to t until its stdin closes, into
# segments of 4 KiB that retention deletes beyond 32 KiB a partition.
_BUSY_OWNER = """
import threading
b = eoslog.open(sys.argv[1], config={"log.segment.bytes": 4096, "log.retention.bytes": 32768,
                                     "log.retention.check.interval.ms": 10})
b.create_topic("t", 2)
p = b.producer({"transactional.id": "busy", "linger.ms": 0})
p.init_transactions()
stop = threading.Event()
def append():
    n = 0
    while not stop.is_set():
        p.begin_transaction()
        for _ in range(10):
            p.produce("t", b"x" * 100)
        (p.abort_transaction if n % 3 == 0 else p.commit_transaction)()
        n += 1
threading.Thread(target=append, daemon=True).start()
import atexit
atexit.register(stop.set)
"""


def _files(root: Path) -> dict[str, tuple[int, str]]:
    """Every file below root: its size and content hash."""
    found = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory, name)
            found[str(path.relative_to(root))] = (
                path.stat().st_size,
                hashlib.sha256(path.read_bytes()).hexdigest(),
            )
    return found


def test_read_commands_on_a_directory_a_running_process_owns_see_what_it_wrote(
    tmp_path: Path,
) -> None:
    root = tmp_path / "data"
    owner = started_child(_OWNER, root)
    assert owner.stdin is not None
    try:
        partitions = run_json("topics", str(root), "describe", "--topic", "t")
        offsets = run_json("groups", str(root), "describe", "--group", "g")
        transactions = run_json("transactions", str(root), "list")
        hanging = run_json("transactions", str(root), "find-hanging")
        described = run_json("describe", str(root))
        dry_run = run_json(
            "groups", str(root), "reset-offsets", "--group", "g", "--all-topics", "--to-latest"
        )
    finally:
        owner.stdin.close()
        assert owner.wait(timeout=60) == 0
    # t-0: the committed record, its marker, then the open transaction's record.
    assert [(r["Partition"], r["HighWatermark"], r["LastStableOffset"]) for r in partitions] == [
        (0, 3, 2),
        (1, 2, 2),
    ]
    assert [(r["TOPIC"], r["PARTITION"], r["CURRENT-OFFSET"]) for r in offsets] == [("t", 0, 1)]
    assert {r["TransactionalId"]: r["TransactionState"] for r in transactions} == {
        "writer": "CompleteCommit"
    }
    assert [(r["ProducerId"], r["StartOffset"]) for r in hanging] == [(FOREIGN_PRODUCER_ID, 2)]
    assert described["hanging_transactions"] == hanging
    assert [r["NEW-OFFSET"] for r in dry_run] == [3]


def test_reading_a_directory_left_by_a_killed_owner_changes_no_byte_of_it(
    tmp_path: Path,
) -> None:
    # The owner is killed mid-life: no clean-shutdown marker, checkpoints behind the log, and
    # a torn batch at the end of t-1. Reading recovers all that in memory only; the open that
    # follows recovers it on disk, as if no command had run.
    root = tmp_path / "data"
    owner = started_child(_OWNER, root)
    owner.send_signal(signal.SIGKILL)
    owner.wait(timeout=60)
    segment = root / "t-1" / "00000000000000000000.log"
    with segment.open("ab") as torn:
        torn.write(b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x01\x00\x00")
    before = _files(root)
    for command in (
        ("topics", "list"),
        ("topics", "describe"),
        ("groups", "list"),
        ("groups", "describe", "--group", "g"),
        ("transactions", "list"),
        ("transactions", "describe", "--transactional-id", "writer"),
        ("transactions", "describe-producers", "--topic", "t", "--partition", "0"),
        ("transactions", "find-hanging"),
        ("describe",),
    ):
        done = run(command[0], str(root), *command[1:])
        assert done.returncode == 0, (command, done.stderr)
    assert _files(root) == before
    with eoslog.open(str(root), background=False) as broker:
        consumer = broker.consumer({"group.id": "check", "auto.offset.reset": "earliest"})
        consumer.assign([eoslog.TopicPartition("t", 1, 0)])
        assert [m.value() for m in consumer.consume(10, timeout=0)] == [b"committed"]
    verified = run("verify", str(root))
    assert verified.returncode == 0 and "torn" not in verified.stdout, verified.stdout


def test_reads_of_a_directory_whose_owner_appends_rolls_and_deletes_segments_all_succeed(
    tmp_path: Path,
) -> None:
    root = tmp_path / "data"
    owner = started_child(_BUSY_OWNER, root)
    assert owner.stdin is not None
    seen: list[list[dict[str, object]]] = []
    try:
        deadline = time.monotonic() + 60
        # Until retention has deleted segments under two of the reads, and at least 8 reads.
        while len(seen) < 8 or seen[-1][0]["LogStartOffset"] == seen[-2][0]["LogStartOffset"]:
            assert time.monotonic() < deadline, seen
            seen.append(run_json("topics", str(root), "describe", "--topic", "t"))
    finally:
        owner.stdin.close()
        assert owner.wait(timeout=60) == 0
    for partition in (0, 1):
        rows = [read[partition] for read in seen]
        for row in rows:
            assert row["LogStartOffset"] <= row["LastStableOffset"] <= row["HighWatermark"]
        ends = [row["HighWatermark"] for row in rows]
        assert ends == sorted(ends), ends  # each read sees a later prefix of the log
    assert seen[-1][0]["LogStartOffset"] > 0


def test_a_group_offset_a_running_process_commits_in_a_transaction_is_read_committed(
    tmp_path: Path,
) -> None:
    # The owner leaves a transactional offset commit pending: describe reports the group's
    # committed offset as Kafka does, without the pending one.
    root = tmp_path / "data"
    script = """
b = eoslog.open(sys.argv[1])
b.create_topic("t", 1)
p = b.producer({"transactional.id": "copier", "linger.ms": 0})
p.init_transactions()
c = b.consumer({"group.id": "g", "enable.auto.commit": False})
c.commit(offsets=[eoslog.TopicPartition("t", 0, 0)], asynchronous=False)
p.begin_transaction()
p.produce("t", b"out", partition=0)
p.send_offsets_to_transaction([eoslog.TopicPartition("t", 0, 1)], c.consumer_group_metadata())
p.flush()
"""
    owner = started_child(script, root)
    assert owner.stdin is not None
    try:
        offsets = run_json("groups", str(root), "describe", "--group", "g")
    finally:
        owner.stdin.close()
        owner.wait(timeout=60)
    assert [(r["PARTITION"], r["CURRENT-OFFSET"]) for r in offsets] == [(0, 0)]
