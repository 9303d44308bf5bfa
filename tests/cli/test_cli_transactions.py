"""`eoslog transactions DIR ...` (kafka-transactions.sh, KIP-664) as a user runs it: on a
directory holding a committed, an aborted and a hanging transaction, list and describe them,
find the hanging one and abort it from the shell, after which read_committed readers move
past it. A change to a directory a running process owns is refused with its pid."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

import eoslog
from eoslog import TopicPartition
from tests.cli.shell import FOREIGN_PRODUCER_ID, hang, run, run_json, started_child

HOUR_MS = 3_600_000


def _transaction(broker: eoslog.Broker, tid: str, value: bytes, *, commit: bool) -> None:
    producer = broker.producer({"transactional.id": tid, "linger.ms": 0})
    producer.init_transactions()
    producer.begin_transaction()
    producer.produce("t", value, partition=0)
    if commit:
        producer.commit_transaction()
    else:
        producer.abort_transaction()
    producer.close()


def committed_values(directory: Path) -> list[bytes]:
    """What a read_committed consumer of t-0 reads now."""
    with eoslog.open(str(directory), background=False) as broker:
        consumer = broker.consumer({"group.id": "reader", "auto.offset.reset": "earliest"})
        consumer.assign([TopicPartition("t", 0, 0)])
        values = []
        while batch := consumer.consume(1000, timeout=0):
            values += [m.value() for m in batch if m.error() is None]
        consumer.close()
        return values


@pytest.fixture
def directory(tmp_path: Path) -> tuple[Path, int]:
    """A log directory with topic t: a committed, an aborted, a hanging (its producer last
    wrote an hour ago) and a later committed transaction; the hanging one's start offset."""
    root = tmp_path / "data"
    with eoslog.open(str(root), background=False) as broker:
        broker.create_topic("t", 1)
        _transaction(broker, "committer", b"committed", commit=True)
        _transaction(broker, "aborter", b"aborted", commit=False)
        start = hang(broker, b"hanging", int(time.time() * 1000) - HOUR_MS)
        _transaction(broker, "late", b"after", commit=True)
    return root, start


def test_list_shows_every_transactional_id_with_its_state(directory: tuple[Path, int]) -> None:
    root, _ = directory
    listed = run_json("transactions", str(root), "list")
    states = {row["TransactionalId"]: row["TransactionState"] for row in listed}
    assert states == {
        "committer": "CompleteCommit",
        "aborter": "CompleteAbort",
        "late": "CompleteCommit",
    }
    table = run("transactions", str(root), "list")
    assert table.returncode == 0
    assert "TransactionalId" in table.stdout and "CompleteAbort" in table.stdout


def test_describe_shows_one_id_and_an_unknown_id_is_a_one_line_error(
    directory: tuple[Path, int],
) -> None:
    root, _ = directory
    (row,) = run_json("transactions", str(root), "describe", "--transactional-id", "committer")
    assert row["TransactionState"] == "CompleteCommit"
    assert row["CurrentTransactionStartTimeMs"] is None
    done = run("transactions", str(root), "describe", "--transactional-id", "nobody")
    assert done.returncode == 1
    assert "eoslog transactions: TRANSACTIONAL_ID_NOT_FOUND:" in done.stderr
    assert "nobody" in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_describe_producers_shows_the_open_transaction_start_offset(
    directory: tuple[Path, int],
) -> None:
    root, start = directory
    rows = run_json(
        "transactions", str(root), "describe-producers", "--topic", "t", "--partition", "0"
    )
    foreign = [row for row in rows if row["ProducerId"] == FOREIGN_PRODUCER_ID]
    assert [row["CurrentTransactionStartOffset"] for row in foreign] == [start]
    others = [row for row in rows if row["ProducerId"] != FOREIGN_PRODUCER_ID]
    assert others and all(row["CurrentTransactionStartOffset"] is None for row in others)


def test_find_hanging_lists_the_open_transaction_no_transactional_id_owns(
    directory: tuple[Path, int],
) -> None:
    root, start = directory
    (row,) = run_json("transactions", str(root), "find-hanging")
    assert (row["Topic"], row["Partition"], row["ProducerId"]) == ("t", 0, FOREIGN_PRODUCER_ID)
    assert row["StartOffset"] == start and row["Duration(min)"] >= 59
    table = run("transactions", str(root), "find-hanging", "--topic", "t", "--partition", "0")
    assert table.returncode == 0 and str(FOREIGN_PRODUCER_ID) in table.stdout
    # Its producer wrote an hour ago: within a two-hour timeout it is not hanging yet.
    younger = ("find-hanging", "--max-transaction-timeout", "120")
    assert run_json("transactions", str(root), *younger) == []


def test_abort_from_the_shell_clears_the_hanging_transaction_and_readers_move_past_it(
    directory: tuple[Path, int],
) -> None:
    root, start = directory
    assert committed_values(root) == [b"committed"]  # held at the hanging one's start
    where = ("--topic", "t", "--partition", "0")
    done = run("transactions", str(root), "abort", *where, "--start-offset", str(start))
    assert done.returncode == 0, done.stderr
    assert f"aborted the transaction of producer {FOREIGN_PRODUCER_ID}" in done.stdout
    assert run_json("transactions", str(root), "find-hanging") == []
    assert committed_values(root) == [b"committed", b"after"]


def test_abort_of_an_offset_where_no_transaction_starts_changes_nothing(
    directory: tuple[Path, int],
) -> None:
    root, start = directory
    where = ("--topic", "t", "--partition", "0")
    done = run("transactions", str(root), "abort", *where, "--start-offset", str(start + 1))
    assert done.returncode == 1
    assert f"no transaction open on t-0 starts at offset {start + 1}" in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert len(run_json("transactions", str(root), "find-hanging")) == 1


def test_a_path_that_is_not_a_log_directory_is_status_2_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    done = run("transactions", str(missing), "list")
    assert done.returncode == 2
    assert "is not a directory" in done.stderr and not missing.exists()
    done = run("transactions", str(tmp_path), "list")
    assert done.returncode == 2
    assert "is not an eoslog log directory" in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [
        ("transactions", "abort", "--topic", "t", "--partition", "0", "--start-offset", "{start}"),
        ("topics", "create", "--topic", "new", "--partitions", "1"),
        ("groups", "delete", "--group", "reader"),
    ],
    ids=["transactions-abort", "topics-create", "groups-delete"],
)
def test_a_change_to_a_directory_a_running_process_owns_is_refused_naming_its_pid(
    directory: tuple[Path, int], command: tuple[str, ...]
) -> None:
    root, start = directory
    owner = started_child("b = eoslog.open(sys.argv[1])\n", root)
    assert owner.stdin is not None
    try:
        arguments = [part.format(start=start) for part in command]
        done = run(arguments[0], str(root), *arguments[1:])
        # A read of the same directory is not refused: it takes no lock.
        hanging = run_json("transactions", str(root), "find-hanging")
    finally:
        owner.stdin.close()
        owner.wait(timeout=60)
    assert done.returncode == 1
    assert f"pid {owner.pid}" in done.stderr
    assert "needs it offline: stop that process first" in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert [row["StartOffset"] for row in hanging] == [start]
    assert [row["Topic"] for row in run_json("topics", str(root), "list")][-1] == "t"


def test_a_transaction_its_coordinator_tracks_is_not_hanging_after_its_producer_is_killed(
    tmp_path: Path,
) -> None:
    # A child process begins a transaction, produces, flushes and is SIGKILLed: the
    # coordinator lists t-0 in the id's Ongoing transaction and its timeout will end it, so
    # Kafka's rule does not call it hanging, however old.
    root = tmp_path / "data"
    with eoslog.open(str(root), background=False) as broker:
        broker.create_topic("t", 1)
    script = (
        "b = eoslog.open(sys.argv[1])\n"
        "p = b.producer({'transactional.id': 'killed', 'linger.ms': 0})\n"
        "p.init_transactions(); p.begin_transaction()\n"
        "p.produce('t', b'unfinished', partition=0); p.flush()\n"
    )
    child = started_child(script, root)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    producers = run_json(
        "transactions", str(root), "describe-producers", "--topic", "t", "--partition", "0"
    )
    assert [row["CurrentTransactionStartOffset"] for row in producers] == [0]
    (described,) = run_json("transactions", str(root), "describe", "--transactional-id", "killed")
    assert (described["TransactionState"], described["TopicPartitions"]) == ("Ongoing", "t-0")
    hanging = run_json("transactions", str(root), "find-hanging", "--max-transaction-timeout", "0")
    assert hanging == []
