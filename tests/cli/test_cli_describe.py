"""`eoslog describe DIR` as a user runs it: one report of a directory's partitions (offsets,
size, segments), topic configs, groups and their lag, transactional ids, producers, and the
hanging transaction flagged."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import eoslog
from tests.cli.shell import FOREIGN_PRODUCER_ID, hang, run, run_json

HOUR_MS = 3_600_000


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    """Topic orders (2 partitions, segments of at most 200 bytes, 4 records in partition 0
    and 2 in 1, then a hanging transaction in partition 0 last written an hour ago and a
    committed one of transactional id copier in partition 1); group billing committed 3
    and 1."""
    root = tmp_path / "data"
    with eoslog.open(str(root), background=False) as broker:
        broker.create_topic("orders", 2, {"segment.bytes": "200"})
        producer = broker.producer({"linger.ms": 0})
        for i in range(6):
            producer.produce("orders", b"value-%d" % i, partition=0 if i < 4 else 1)
            producer.flush()
        hang(broker, b"stuck", int(time.time() * 1000) - HOUR_MS, topic="orders")
        copier = broker.producer({"transactional.id": "copier", "linger.ms": 0})
        copier.init_transactions()
        copier.begin_transaction()
        copier.produce("orders", b"copied", partition=1)
        copier.commit_transaction()
        copier.close()
        consumer = broker.consumer({"group.id": "billing", "enable.auto.commit": False})
        offsets = [eoslog.TopicPartition("orders", 0, 3), eoslog.TopicPartition("orders", 1, 1)]
        consumer.commit(offsets=offsets, asynchronous=False)
        consumer.close()
    return root


def _log_files(directory: Path, partition: int) -> list[str]:
    where = directory / f"orders-{partition}"
    return [name for name in os.listdir(where) if name.endswith(".log")]


def test_describe_reports_partitions_with_their_size_and_segments(directory: Path) -> None:
    report = run_json("describe", str(directory))
    rows = {row["Partition"]: row for row in report["partitions"]}
    assert {p: (r["LogStartOffset"], r["HighWatermark"], r["LastStableOffset"])
            for p, r in rows.items()} == {0: (0, 5, 4), 1: (0, 4, 4)}  # fmt: skip
    for partition, row in rows.items():
        names = _log_files(directory, partition)
        assert row["Segments"] == len(names) > 1
        where = directory / f"orders-{partition}"
        assert row["SizeBytes"] == sum(os.path.getsize(where / name) for name in names)
    assert report["topic_configs"] == [
        {"Topic": "orders", "Config": "segment.bytes", "Value": "200"}
    ]


def test_describe_reports_groups_with_their_lag(directory: Path) -> None:
    report = run_json("describe", str(directory))
    assert report["groups"] == [{"GROUP": "billing", "STATE": "Empty", "MEMBERS": 0}]
    lags = {row["PARTITION"]: row["LAG"] for row in report["group_offsets"]}
    assert lags == {0: 2, 1: 3}


def test_describe_reports_transactions_producers_and_flags_the_hanging_one(
    directory: Path,
) -> None:
    report = run_json("describe", str(directory))
    (copier,) = report["transactions"]
    assert copier["TransactionalId"] == "copier"
    assert copier["TransactionState"] == "CompleteCommit"
    assert copier["TransactionTimeoutMs"] == 60_000
    flagged = {(row["Partition"], row["ProducerId"]): row["Hanging"] for row in report["producers"]}
    assert flagged[(0, FOREIGN_PRODUCER_ID)] is True
    assert [hanging for (_, pid), hanging in flagged.items() if pid != FOREIGN_PRODUCER_ID] == [
        False
    ] * (len(flagged) - 1)
    (hanging,) = report["hanging_transactions"]
    assert (hanging["Partition"], hanging["StartOffset"]) == (0, 4)
    # A timeout longer than the hour it has hung: nothing is flagged.
    patient = run_json("describe", str(directory), "--max-transaction-timeout", "120")
    assert patient["hanging_transactions"] == []
    assert not any(row["Hanging"] for row in patient["producers"])


def test_describe_prints_each_part_as_a_titled_table(directory: Path) -> None:
    done = run("describe", str(directory))
    assert done.returncode == 0, done.stderr
    titles = [
        "Partitions",
        "Topic configs (set on the topic)",
        "Consumer groups",
        "Group offsets",
        "Transactional ids",
        "Producers",
        "Hanging transactions",
    ]
    lines = done.stdout.splitlines()
    assert [line for line in lines if line in titles] == titles
    assert "SizeBytes" in done.stdout and "copier" in done.stdout


def test_describe_of_an_empty_directory_has_empty_parts(tmp_path: Path) -> None:
    eoslog.open(str(tmp_path / "empty"), background=False).close()
    report = run_json("describe", str(tmp_path / "empty"))
    assert all(rows == [] for rows in report.values()), report
    missing = run("describe", str(tmp_path / "nothing"))
    assert missing.returncode == 2 and "is not a directory" in missing.stderr
