"""`eoslog groups DIR delete|reset-offsets` (kafka-consumer-groups.sh) as a user runs them:
reset-offsets prints the new offsets and commits them only with --execute; each target option
moves the offsets where Kafka's tool moves them; delete forgets the group's offsets."""

from __future__ import annotations

from pathlib import Path

import pytest

import eoslog
from eoslog.client.admin_types import ConsumerGroupTopicPartitions
from tests.cli.shell import run, run_json

# Partition 0's records are stamped from this time on, one second apart.
FIRST_MS = 1_700_000_000_000


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    """Topic orders: partition 0 holds offsets 2..9 (0 and 1 deleted), stamped FIRST_MS +
    offset seconds; partition 1 holds 0..4. Group billing committed 5 and 3."""
    root = tmp_path / "data"
    with eoslog.open(str(root), background=False) as broker:
        broker.create_topic("orders", 2, {"retention.ms": "-1"})  # old records kept
        producer = broker.producer({"linger.ms": 0})
        for offset in range(10):
            stamp = FIRST_MS + offset * 1000
            producer.produce("orders", b"v", partition=0, timestamp=stamp)
        for _ in range(5):
            producer.produce("orders", b"w", partition=1)
        producer.flush()
        broker.delete_records("orders", 0, 2)
        _commit(broker, "billing", {0: 5, 1: 3})
    return root


def _commit(broker: eoslog.Broker, group: str, offsets: dict[int, int]) -> None:
    consumer = broker.consumer({"group.id": group, "enable.auto.commit": False})
    consumer.commit(
        offsets=[eoslog.TopicPartition("orders", p, o) for p, o in offsets.items()],
        asynchronous=False,
    )
    consumer.close()


def committed(directory: Path, group: str = "billing") -> dict[int, int]:
    """The group's committed offsets on orders, as the directory's next opener sees them."""
    with eoslog.open(str(directory), background=False) as broker:
        request = [ConsumerGroupTopicPartitions(group)]
        listed = broker.admin().list_consumer_group_offsets(request)[group].result()
        return {tp.partition: tp.offset for tp in listed.topic_partitions or []}


def reset(directory: Path, *options: str) -> dict[int, int]:
    """reset-offsets of billing on orders with options, as JSON: {partition: new offset}."""
    rows = run_json("groups", str(directory), "reset-offsets", "--group", "billing", *options)
    return {row["PARTITION"]: row["NEW-OFFSET"] for row in rows}


def test_reset_offsets_is_a_dry_run_unless_told_to_execute(directory: Path) -> None:
    done = run(
        "groups", str(directory), "reset-offsets", "--group", "billing", "--topic", "orders",
        "--to-earliest",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "NEW-OFFSET" in done.stdout
    assert done.stdout.endswith("Dry run: nothing committed (--execute commits these offsets).\n")
    assert committed(directory) == {0: 5, 1: 3}
    executed = run(
        "groups", str(directory), "reset-offsets", "--group", "billing", "--topic", "orders",
        "--to-earliest", "--execute",
    )  # fmt: skip
    assert executed.returncode == 0, executed.stderr
    assert executed.stdout.endswith("Committed.\n")
    assert committed(directory) == {0: 2, 1: 0}


def test_each_target_moves_offsets_where_kafkas_tool_does(directory: Path) -> None:
    assert reset(directory, "--all-topics", "--to-earliest") == {0: 2, 1: 0}
    assert reset(directory, "--all-topics", "--to-latest") == {0: 10, 1: 5}
    # --to-offset and --shift-by are held between log start and high watermark.
    assert reset(directory, "--all-topics", "--to-offset", "0") == {0: 2, 1: 0}
    assert reset(directory, "--all-topics", "--to-offset", "4") == {0: 4, 1: 4}
    assert reset(directory, "--all-topics", "--shift-by", "-4") == {0: 2, 1: 0}
    assert reset(directory, "--all-topics", "--shift-by", "3") == {0: 8, 1: 5}
    # The first record at or after the time; none: the high watermark.
    assert reset(directory, "--topic", "orders:0", "--to-datetime", "2023-11-14T22:13:26Z") == {
        0: 6
    }
    assert reset(directory, "--topic", "orders:0", "--to-datetime", "2100-01-01T00:00:00Z") == {
        0: 10
    }
    # Every record of partition 0 is years old, so thirty seconds ago is past all of them.
    assert reset(directory, "--topic", "orders:0", "--by-duration", "PT30S") == {0: 10}
    assert reset(directory, "--topic", "orders:0", "--by-duration", "P36500D") == {0: 2}


def test_shift_by_needs_a_committed_offset(directory: Path) -> None:
    done = run(
        "groups", str(directory), "reset-offsets", "--group", "newcomer", "--topic", "orders",
        "--shift-by", "1",
    )  # fmt: skip
    assert done.returncode == 1
    assert "no current committed offset" in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_reset_of_an_unknown_group_creates_its_offsets_as_kafka_does(directory: Path) -> None:
    done = run(
        "groups", str(directory), "reset-offsets", "--group", "newcomer", "--topic", "orders",
        "--to-latest", "--execute",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert committed(directory, "newcomer") == {0: 10, 1: 5}


def test_reset_offsets_refuses_bad_arguments_and_changes_nothing(directory: Path) -> None:
    base = ("groups", str(directory), "reset-offsets", "--group", "billing", "--execute")
    no_target = run(*base, "--all-topics")
    assert no_target.returncode == 2 and "exactly one of" in no_target.stderr
    two = run(*base, "--all-topics", "--to-earliest", "--to-latest")
    assert two.returncode == 2
    no_topic = run(*base, "--to-latest")
    assert no_topic.returncode == 2 and "--topic or --all-topics" in no_topic.stderr
    bad_time = run(*base, "--all-topics", "--to-datetime", "yesterday")
    assert bad_time.returncode == 2 and "ISO 8601" in bad_time.stderr
    bad_duration = run(*base, "--all-topics", "--by-duration", "1h")
    assert bad_duration.returncode == 2 and "PnDTnHnMnS" in bad_duration.stderr
    no_partition = run(*base, "--topic", "orders:7", "--to-latest")
    assert no_partition.returncode == 1 and "UNKNOWN_TOPIC_OR_PART" in no_partition.stderr
    no_topic_there = run(*base, "--topic", "nope", "--to-latest")
    assert no_topic_there.returncode == 1
    assert committed(directory) == {0: 5, 1: 3}


def test_delete_forgets_the_groups_offsets_and_refuses_an_unknown_group(directory: Path) -> None:
    done = run("groups", str(directory), "delete", "--group", "billing")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Deletion of requested consumer groups ('billing') was successful.\n"
    assert committed(directory) == {}
    again = run("groups", str(directory), "delete", "--group", "billing")
    assert again.returncode == 1
    assert "GROUP_ID_NOT_FOUND" in again.stderr and len(again.stderr.splitlines()) == 1
