"""`eoslog topics DIR ...` (kafka-topics.sh) and `eoslog groups DIR ...`
(kafka-consumer-groups.sh) as a user runs them: each partition's log start, high watermark and
last stable offset; each group's state, committed offsets and lag."""

from __future__ import annotations

from pathlib import Path

import pytest

import eoslog
from tests.cli.shell import hang, run, run_json


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    """Topic orders (2 partitions, 5 records each, partition 0's first 2 deleted, and a
    transaction left open after them in partition 0) and group billing, which committed 3
    and 5."""
    root = tmp_path / "data"
    with eoslog.open(str(root), background=False) as broker:
        broker.create_topic("orders", 2)
        producer = broker.producer({"linger.ms": 0})
        for i in range(10):
            producer.produce("orders", b"v%d" % i, partition=i % 2)
        producer.flush()
        broker.delete_records("orders", 0, 2)
        hang(broker, b"open", 1_700_000_000_000, topic="orders")
        consumer = broker.consumer({"group.id": "billing", "enable.auto.commit": False})
        committed = [eoslog.TopicPartition("orders", 0, 3), eoslog.TopicPartition("orders", 1, 5)]
        consumer.commit(offsets=committed)
        consumer.close()
    return root


def test_topics_list_names_every_topic_with_its_partition_count(directory: Path) -> None:
    rows = run_json("topics", str(directory), "list")
    counts = {row["Topic"]: (row["PartitionCount"], row["Internal"]) for row in rows}
    assert counts["orders"] == (2, "false")
    assert counts["__consumer_offsets"][1] == "true"
    table = run("topics", str(directory), "list")
    assert table.returncode == 0 and "orders" in table.stdout


def test_topics_describe_shows_log_start_high_watermark_and_last_stable_offset(
    directory: Path,
) -> None:
    rows = run_json("topics", str(directory), "describe", "--topic", "orders")
    offsets = {
        row["Partition"]: (row["LogStartOffset"], row["HighWatermark"], row["LastStableOffset"])
        for row in rows
    }
    # Partition 0: two records deleted, the open transaction's record at 5 holds the LSO.
    assert offsets == {0: (2, 6, 5), 1: (0, 5, 5)}
    every = run_json("topics", str(directory), "describe")
    assert {row["Topic"] for row in every} == {"orders"}  # internal topics left out


def test_topics_describe_of_an_unknown_topic_is_a_one_line_error(directory: Path) -> None:
    done = run("topics", str(directory), "describe", "--topic", "nope")
    assert done.returncode == 1
    assert "unknown topic 'nope'" in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_groups_list_and_describe_show_state_committed_offsets_and_lag(directory: Path) -> None:
    assert run_json("groups", str(directory), "list") == [{"GROUP": "billing", "STATE": "Empty"}]
    rows = run_json("groups", str(directory), "describe", "--group", "billing")
    lags = {
        row["PARTITION"]: (row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"]) for row in rows
    }
    assert lags == {0: (3, 6, 3), 1: (5, 5, 0)}
    assert all(row["CONSUMER-ID"] is None and row["STATE"] == "Empty" for row in rows)
    table = run("groups", str(directory), "describe", "--group", "billing")
    assert table.returncode == 0
    assert "Consumer group billing: Empty, 0 members" in table.stdout
    assert "CURRENT-OFFSET" in table.stdout


def test_groups_describe_of_an_unknown_group_is_a_one_line_error(directory: Path) -> None:
    done = run("groups", str(directory), "describe", "--group", "nobody")
    assert done.returncode == 1
    assert "GROUP_ID_NOT_FOUND" in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
