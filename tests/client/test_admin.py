"""The AdminClient (docs/api.md "Drop-in for confluent-kafka"): confluent_kafka.admin's calls,
result types and error codes, in both spellings (broker.admin() and
eoslog.confluent.AdminClient). confluent-kafka on librdkafka's mock cluster is the oracle for
the argument checks made at the call (the mock has no controller, so its topic calls time
out and cannot be compared)."""

from __future__ import annotations

import gc
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

import eoslog
from eoslog.confluent import AdminClient, TopicPartition
from eoslog.confluent import admin as ek_admin
from eoslog.confluent.admin import (
    ConfigResource,
    ConfigSource,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
    TopicCollection,
)
from eoslog.errors import KafkaError, KafkaException

confluent_admin = pytest.importorskip("confluent_kafka.admin")
MOCK = {"bootstrap.servers": "", "test.mock.num.brokers": 1}


@pytest.fixture
def broker(tmp_path: Path) -> Any:
    with eoslog.open(str(tmp_path / "d")) as opened:
        yield opened


def error_code(future: Future[Any]) -> int:
    error = future.exception(timeout=0)
    assert isinstance(error, KafkaException)
    return int(error.args[0].code())


def test_create_topics_creates_each_and_reports_errors_per_topic(broker: Any) -> None:
    admin = broker.admin()
    done = admin.create_topics([NewTopic("a", 3), NewTopic("b", config={"retention.ms": "1000"})])
    assert set(done) == {"a", "b"}
    assert all(f.done() and f.result() is None for f in done.values())
    assert broker.list_topics()["a"].num_partitions == 3
    assert broker.list_topics()["b"].config["retention.ms"] == 1000
    again = admin.create_topics([NewTopic("a", 1), NewTopic("bad/name", 1), NewTopic("c", 0)])
    assert error_code(again["a"]) == KafkaError.TOPIC_ALREADY_EXISTS
    assert error_code(again["bad/name"]) == KafkaError.TOPIC_EXCEPTION
    assert error_code(again["c"]) == KafkaError.INVALID_PARTITIONS
    replicated = admin.create_topics([NewTopic("r", 1, replication_factor=3)])
    assert error_code(replicated["r"]) == KafkaError.INVALID_REPLICATION_FACTOR
    bad_config = admin.create_topics([NewTopic("x", 1, config={"no.such.key": "1"})])
    assert error_code(bad_config["x"]) == KafkaError.INVALID_CONFIG
    assert "x" not in broker.list_topics()


def test_create_topics_validate_only_checks_and_creates_nothing(broker: Any) -> None:
    admin = broker.admin()
    assert admin.create_topics([NewTopic("v", 2)], validate_only=True)["v"].result() is None
    assert "v" not in broker.list_topics()
    admin.create_topics([NewTopic("v", 2)])
    again = admin.create_topics([NewTopic("v", 2)], validate_only=True)
    assert error_code(again["v"]) == KafkaError.TOPIC_ALREADY_EXISTS


def test_delete_topics_deletes_and_reports_unknown_topics(broker: Any) -> None:
    broker.create_topic("a", 1)
    done = broker.admin().delete_topics(["a", "nope"])
    assert done["a"].result() is None
    assert error_code(done["nope"]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert "a" not in broker.list_topics()


def test_list_topics_is_cluster_metadata_not_a_future(broker: Any) -> None:
    broker.create_topic("a", 2)
    metadata = broker.admin().list_topics()
    assert type(metadata).__name__ == "ClusterMetadata"
    assert sorted(metadata.topics["a"].partitions) == [0, 1]
    missing = broker.admin().list_topics("zz").topics["zz"]
    assert missing.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_topics_gives_partitions_or_unknown(broker: Any) -> None:
    broker.create_topic("a", 2)
    done = broker.admin().describe_topics(TopicCollection(["a", "zz", "__consumer_offsets"]))
    described = done["a"].result()
    assert described.name == "a" and not described.is_internal
    assert [p.id for p in described.partitions] == [0, 1]
    assert described.partitions[0].leader.id == 0
    assert done["__consumer_offsets"].result().is_internal
    assert error_code(done["zz"]) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_configs_marks_what_was_set_on_the_topic(broker: Any) -> None:
    broker.create_topic("a", 1, config={"retention.ms": 1000})
    resource = ConfigResource(ResourceType.TOPIC, "a")
    done = broker.admin().describe_configs([resource, ConfigResource("topic", "zz")])
    entries = done[ConfigResource("topic", "a")].result()
    assert entries["retention.ms"].value == "1000"
    assert entries["retention.ms"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert entries["segment.bytes"].source is ConfigSource.DEFAULT_CONFIG
    assert entries["segment.bytes"].is_default
    assert error_code(done[ConfigResource("topic", "zz")]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    node = broker.admin().describe_configs([ConfigResource("broker", "0")])
    assert "num.partitions" in node[ConfigResource("broker", "0")].result()


def test_groups_are_listed_described_altered_and_deleted(broker: Any) -> None:
    broker.create_topic("t", 2)
    admin = broker.admin()
    request = ConsumerGroupTopicPartitions(
        "g", [TopicPartition("t", 0, 5), TopicPartition("t", 1, 7)]
    )
    altered = admin.alter_consumer_group_offsets([request])["g"].result()
    assert [(tp.partition, tp.offset) for tp in altered.topic_partitions] == [(0, 5), (1, 7)]
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("g")])["g"].result()
    assert [(tp.partition, tp.offset) for tp in listed.topic_partitions] == [(0, 5), (1, 7)]
    groups = admin.list_consumer_groups().result()
    assert [(g.group_id, g.is_simple_consumer_group, g.state) for g in groups.valid] == [
        ("g", True, ConsumerGroupState.EMPTY)
    ]
    described = admin.describe_consumer_groups(["g", "nope"])
    assert described["g"].result().members == []
    assert error_code(described["nope"]) == KafkaError.GROUP_ID_NOT_FOUND
    deleted = admin.delete_consumer_groups(["g", "nope"])
    assert deleted["g"].result() is None
    assert error_code(deleted["nope"]) == KafkaError.GROUP_ID_NOT_FOUND
    after = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("g", [TopicPartition("t", 0)])]
    )
    assert after["g"].result().topic_partitions[0].offset == eoslog.OFFSET_INVALID


def test_a_group_with_members_is_not_deleted_or_altered(broker: Any) -> None:
    broker.create_topic("t", 1)
    consumer = broker.consumer({"group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["t"])
    consumer.poll(0.2)
    admin = broker.admin()
    described = admin.describe_consumer_groups(["g"])["g"].result()
    assert [m.assignment.topic_partitions for m in described.members] == [[TopicPartition("t", 0)]]
    assert described.state is ConsumerGroupState.STABLE
    assert error_code(admin.delete_consumer_groups(["g"])["g"]) == KafkaError.NON_EMPTY_GROUP
    request = ConsumerGroupTopicPartitions("g", [TopicPartition("t", 0, 1)])
    assert error_code(admin.alter_consumer_group_offsets([request])["g"]) == (
        KafkaError.UNKNOWN_MEMBER_ID
    )
    consumer.close()


def test_group_deletion_survives_a_reopen(tmp_path: Path) -> None:
    with eoslog.open(str(tmp_path)) as broker:
        broker.create_topic("t", 1)
        request = ConsumerGroupTopicPartitions("g", [TopicPartition("t", 0, 3)])
        broker.admin().alter_consumer_group_offsets([request])["g"].result()
        broker.admin().delete_consumer_groups(["g"])["g"].result()
    with eoslog.open(str(tmp_path)) as broker:
        assert broker.admin().list_consumer_groups().result().valid == []


def test_list_offsets_earliest_latest_by_timestamp_and_max_timestamp(broker: Any) -> None:
    broker.create_topic("t", 1)
    producer = broker.producer({"linger.ms": 0})
    for timestamp in (1000, 2000, 3000):
        producer.produce("t", b"v", timestamp=timestamp)
    producer.flush()
    tp = TopicPartition("t", 0)
    admin = broker.admin()
    specs = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "t": OffsetSpec.for_timestamp(1500),
        "later": OffsetSpec.for_timestamp(9000),
    }
    got = {name: admin.list_offsets({tp: spec})[tp].result() for name, spec in specs.items()}
    assert got["earliest"].offset == 0
    assert got["latest"].offset == 3
    assert (got["t"].offset, got["t"].timestamp) == (1, 2000)
    assert got["later"].offset == -1
    committed = admin.list_offsets(
        {tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED
    )
    assert committed[tp].result().offset == 3
    missing = TopicPartition("zz", 0)
    assert error_code(admin.list_offsets({missing: OffsetSpec.latest()})[missing]) == (
        KafkaError.UNKNOWN_TOPIC_OR_PART
    )
    producer.produce("t", b"v", timestamp=2500)  # the largest timestamp stays at offset 2
    producer.flush()
    most = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result()
    assert (most.offset, most.timestamp) == (2, 3000)
    producer.close()


def test_the_confluent_spelling_shares_the_directory_and_releases_it(tmp_path: Path) -> None:
    directory = str(tmp_path / "d")
    admin = AdminClient({"bootstrap.servers": "eoslog://" + directory})
    assert admin.create_topics([NewTopic("a", 2)])["a"].result() is None
    assert "a" in admin.list_topics().topics
    del admin
    gc.collect()
    # Released at collection: the directory is free for eoslog.open again.
    with eoslog.open(directory) as broker:
        assert broker.list_topics()["a"].num_partitions == 2
    closing = AdminClient({"eoslog.dir": directory})
    closing.close()
    with eoslog.open(directory):
        pass


def test_the_confluent_module_exports_the_admin_types() -> None:
    import eoslog.confluent as confluent

    for name in (
        "AdminClient",
        "NewTopic",
        "NewPartitions",
        "ConfigResource",
        "ConsumerGroupTopicPartitions",
        "OffsetSpec",
        "TopicCollection",
    ):
        assert hasattr(confluent, name)
        assert hasattr(ek_admin, name)
        assert hasattr(confluent_admin, name) or name in (
            "ConsumerGroupTopicPartitions",
            "TopicCollection",
        )


def calls(admin_module: Any, tp_class: Any, cgtp: Any, collection: Any) -> list[tuple[str, Any]]:
    """The same bad calls for either AdminClient: each raises at the call."""
    return [
        ("create_topics empty", lambda a: a.create_topics([])),
        (
            "create_topics validate_only",
            lambda a: a.create_topics([admin_module.NewTopic("a", 1)], validate_only="x"),
        ),
        (
            "create_topics keyword",
            lambda a: a.create_topics([admin_module.NewTopic("a", 1)], foo=1),
        ),
        ("delete_topics str", lambda a: a.delete_topics("x")),
        ("delete_topics empty", lambda a: a.delete_topics([])),
        ("create_partitions empty", lambda a: a.create_partitions([])),
        ("describe_topics list", lambda a: a.describe_topics(["a"])),
        ("describe_configs empty", lambda a: a.describe_configs([])),
        (
            "incremental_alter_configs no entries",
            lambda a: a.incremental_alter_configs(
                [admin_module.ConfigResource("topic", "a", set_config={"x": "1"})]
            ),
        ),
        ("list_consumer_groups states", lambda a: a.list_consumer_groups(states="x")),
        ("describe_consumer_groups str", lambda a: a.describe_consumer_groups("g")),
        ("describe_consumer_groups empty", lambda a: a.describe_consumer_groups([])),
        ("list_consumer_group_offsets empty", lambda a: a.list_consumer_group_offsets([])),
        ("list_consumer_group_offsets str", lambda a: a.list_consumer_group_offsets(["g"])),
        ("list_consumer_group_offsets no id", lambda a: a.list_consumer_group_offsets([cgtp("")])),
        (
            "list_consumer_group_offsets offset",
            lambda a: a.list_consumer_group_offsets([cgtp("g", [tp_class("t", 0, 5)])]),
        ),
        (
            "alter_consumer_group_offsets none",
            lambda a: a.alter_consumer_group_offsets([cgtp("g")]),
        ),
        (
            "alter_consumer_group_offsets negative",
            lambda a: a.alter_consumer_group_offsets([cgtp("g", [tp_class("t", 0)])]),
        ),
        ("delete_consumer_groups str", lambda a: a.delete_consumer_groups("g")),
        ("delete_consumer_groups empty", lambda a: a.delete_consumer_groups([])),
        ("list_offsets list", lambda a: a.list_offsets([tp_class("t", 0)])),
        ("list_offsets spec", lambda a: a.list_offsets({tp_class("t", 0): 5})),
        (
            "list_offsets partition",
            lambda a: a.list_offsets({tp_class("t", -1): admin_module.OffsetSpec.latest()}),
        ),
        (
            "list_offsets isolation",
            lambda a: a.list_offsets(
                {tp_class("t", 0): admin_module.OffsetSpec.latest()}, isolation_level="x"
            ),
        ),
        ("list_topics int", lambda a: a.list_topics(3)),
    ]


def test_bad_arguments_raise_at_the_call_as_confluent_raises_them(broker: Any) -> None:
    import confluent_kafka

    theirs_admin = confluent_admin.AdminClient(MOCK)
    theirs = calls(
        confluent_admin,
        confluent_kafka.TopicPartition,
        confluent_kafka.ConsumerGroupTopicPartitions,
        confluent_kafka.TopicCollection,
    )
    ours = calls(ek_admin, TopicPartition, ConsumerGroupTopicPartitions, TopicCollection)
    for (label, their_call), (_, our_call) in zip(theirs, ours, strict=True):
        with pytest.raises(Exception) as their_error:
            their_call(theirs_admin)
        with pytest.raises(Exception) as our_error:
            our_call(broker.admin())
        assert type(our_error.value) is type(their_error.value), label


def test_new_topic_and_config_resource_have_confluents_shapes() -> None:
    assert repr(NewTopic("a", 1)) == repr(confluent_admin.NewTopic("a", 1))
    assert repr(NewPartitions("a", 2)) == repr(confluent_admin.NewPartitions("a", 2))
    assert repr(ConfigResource("topic", "a")) == repr(confluent_admin.ConfigResource("topic", "a"))
    ours, theirs = NewTopic("a"), confluent_admin.NewTopic("a")
    assert (ours.num_partitions, ours.replication_factor, ours.config) == (
        theirs.num_partitions,
        theirs.replication_factor,
        theirs.config,
    )
    for bad in (
        lambda m: m.NewTopic(3),
        lambda m: m.NewTopic("a", "3"),
        lambda m: m.ConfigResource("nope", "a"),
    ):
        with pytest.raises(Exception) as their_error:
            bad(confluent_admin)
        with pytest.raises(Exception) as our_error:
            bad(ek_admin)
        assert type(our_error.value) is type(their_error.value)
    assert {m.name: m.value for m in ResourceType} == {
        m.name: m.value for m in confluent_admin.ResourceType
    }
    assert {m.name: m.value for m in ConfigSource} == {
        m.name: m.value for m in confluent_admin.ConfigSource
    }
