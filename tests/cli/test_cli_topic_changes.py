"""`eoslog topics DIR create|delete|alter` (kafka-topics.sh, kafka-configs.sh) as a user runs
them: each change is seen by the directory's next opener, and a refusal is one line with
Kafka's error name, exit status 1, and changes nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import eoslog
from eoslog.client.admin_types import ConfigResource, ResourceType
from tests.cli.shell import run


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    """An empty log directory."""
    root = tmp_path / "data"
    eoslog.open(str(root), background=False).close()
    return root


def _partition_count(directory: Path, topic: str) -> int | None:
    with eoslog.open(str(directory), background=False) as broker:
        found = broker.list_topics().get(topic)
        return None if found is None else found.num_partitions


def _topic_configs(directory: Path, topic: str) -> dict[str, str]:
    """The configs set on the topic itself (not the directory's defaults)."""
    with eoslog.open(str(directory), background=False) as broker:
        resource = ConfigResource(ResourceType.TOPIC, topic)
        entries = broker.admin().describe_configs([resource])[resource].result()
        return {name: str(entry.value) for name, entry in entries.items() if not entry.is_default}


def _refused(done: subprocess.CompletedProcess[str], name: str) -> None:
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert f": {name}: " in done.stderr, done.stderr


def test_create_makes_the_topic_with_its_partitions_and_configs(directory: Path) -> None:
    done = run(
        "topics", str(directory), "create", "--topic", "orders", "--partitions", "3",
        "--config", "retention.ms=60000", "--config", "segment.bytes=1048576",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Created topic orders.\n"
    assert _partition_count(directory, "orders") == 3
    assert _topic_configs(directory, "orders") == {
        "retention.ms": "60000",
        "segment.bytes": "1048576",
    }


def test_create_refuses_an_existing_topic_a_bad_count_and_a_bad_config(directory: Path) -> None:
    assert run("topics", str(directory), "create", "--topic", "t").returncode == 0
    _refused(run("topics", str(directory), "create", "--topic", "t"), "TOPIC_ALREADY_EXISTS")
    zero = run("topics", str(directory), "create", "--topic", "u", "--partitions", "0")
    _refused(zero, "INVALID_PARTITIONS")
    bogus = run("topics", str(directory), "create", "--topic", "u", "--config", "bogus=1")
    _refused(bogus, "INVALID_CONFIG")
    replicas = run("topics", str(directory), "create", "--topic", "u", "--replication-factor", "3")
    _refused(replicas, "INVALID_REPLICATION_FACTOR")
    assert _partition_count(directory, "u") is None


def test_a_config_without_an_equals_sign_is_a_usage_error(directory: Path) -> None:
    done = run("topics", str(directory), "create", "--topic", "u", "--config", "retention.ms")
    assert done.returncode == 2
    assert "--config takes KEY=VALUE" in done.stderr
    assert _partition_count(directory, "u") is None


def test_delete_removes_the_topic_and_refuses_an_unknown_or_internal_one(directory: Path) -> None:
    assert run("topics", str(directory), "create", "--topic", "t").returncode == 0
    done = run("topics", str(directory), "delete", "--topic", "t")
    assert done.returncode == 0 and done.stdout == "Deleted topic t.\n"
    assert _partition_count(directory, "t") is None
    _refused(run("topics", str(directory), "delete", "--topic", "t"), "UNKNOWN_TOPIC_OR_PART")
    internal = run("topics", str(directory), "delete", "--topic", "__consumer_offsets")
    _refused(internal, "TOPIC_EXCEPTION")


def test_alter_partitions_grows_the_topic_and_never_shrinks_it(directory: Path) -> None:
    run("topics", str(directory), "create", "--topic", "t", "--partitions", "2")
    done = run("topics", str(directory), "alter", "--topic", "t", "--partitions", "4")
    assert done.returncode == 0 and done.stdout == "Topic t now has 4 partitions.\n"
    assert _partition_count(directory, "t") == 4
    shrink = run("topics", str(directory), "alter", "--topic", "t", "--partitions", "3")
    _refused(shrink, "INVALID_PARTITIONS")
    assert _partition_count(directory, "t") == 4


def test_alter_sets_and_deletes_configs_as_kafka_configs_does(directory: Path) -> None:
    run("topics", str(directory), "create", "--topic", "t", "--config", "retention.ms=1000")
    added = run(
        "topics", str(directory), "alter", "--topic", "t",
        "--add-config", "retention.bytes=4096,segment.ms=600000",
        "--delete-config", "retention.ms",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert added.stdout == "Completed updating config for topic t.\n"
    assert _topic_configs(directory, "t") == {"retention.bytes": "4096", "segment.ms": "600000"}


def test_alter_with_one_bad_config_changes_none_of_them(directory: Path) -> None:
    run("topics", str(directory), "create", "--topic", "t", "--config", "retention.ms=1000")
    done = run(
        "topics", str(directory), "alter", "--topic", "t",
        "--add-config", "retention.ms=5,retention.bytes=lots",
    )  # fmt: skip
    _refused(done, "INVALID_CONFIG")
    assert _topic_configs(directory, "t") == {"retention.ms": "1000"}
    unknown = run("topics", str(directory), "alter", "--topic", "nope", "--add-config", "x=1")
    assert unknown.returncode == 1


def test_alter_needs_exactly_one_kind_of_change(directory: Path) -> None:
    run("topics", str(directory), "create", "--topic", "t")
    nothing = run("topics", str(directory), "alter", "--topic", "t")
    assert nothing.returncode == 2 and "give --partitions" in nothing.stderr
    both = run(
        "topics", str(directory), "alter", "--topic", "t",
        "--partitions", "3", "--add-config", "retention.ms=1",
    )  # fmt: skip
    assert both.returncode == 2
    assert _partition_count(directory, "t") == 1
    garbled = run("topics", str(directory), "alter", "--topic", "t", "--add-config", "novalue")
    assert garbled.returncode == 2 and "not a KEY=VALUE list" in garbled.stderr
