"""confluent-kafka's AdminClient, and a Consumer's offset lookups, against `Broker.serve`:
what they change is what the broker holds, and what they read is what it has."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from eoslog.broker import Broker
from eoslog.serve.server import Server
from tests.serve.clients import DEADLINE_S, confluent_consumer

# Recent: older records would be past the default retention and deleted by maintenance.
TS = int(time.time() * 1000) // 1000 * 1000


@pytest.fixture
def admin(server: Server) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.address})


def _result(future: Any) -> Any:
    return future.result(timeout=DEADLINE_S)


def _code(future: Any) -> int:
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=DEADLINE_S)
    return int(raised.value.args[0].code())


def _write(broker: Broker, topic: str, timestamps: list[int], partition: int = 0) -> None:
    producer = broker.producer({"linger.ms": 0})
    for timestamp in timestamps:
        producer.produce(topic, b"v", partition=partition, timestamp=timestamp)
    producer.flush()
    producer.close()


def test_create_topics_makes_them_with_their_partitions_and_configs(
    broker: Broker, admin: AdminClient
) -> None:
    new = NewTopic("made", num_partitions=3, config={"retention.ms": "60000"})
    _result(admin.create_topics([new])["made"])
    made = broker.list_topics()["made"]
    assert made.num_partitions == 3
    assert broker.topic_metadata("made").config == {"retention.ms": 60000}
    assert _code(admin.create_topics([NewTopic("made", 1)])["made"]) == (
        KafkaError.TOPIC_ALREADY_EXISTS
    )


def test_create_topics_with_validate_only_creates_nothing(
    broker: Broker, admin: AdminClient
) -> None:
    _result(admin.create_topics([NewTopic("checked", 2)], validate_only=True)["checked"])
    assert "checked" not in broker.list_topics()


def test_a_bad_topic_config_is_refused_and_nothing_is_created(
    broker: Broker, admin: AdminClient
) -> None:
    new = NewTopic("bad", 1, config={"retention.ms": "soon"})
    assert _code(admin.create_topics([new])["bad"]) == KafkaError.INVALID_CONFIG
    assert "bad" not in broker.list_topics()


def test_list_topics_lists_the_user_topics_with_their_partitions(
    broker: Broker, admin: AdminClient, server: Server
) -> None:
    broker.create_topic("listed", 2)
    metadata = admin.list_topics(timeout=DEADLINE_S)
    assert sorted(metadata.topics["listed"].partitions) == [0, 1]
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", server.port)]


def test_describe_cluster_names_the_one_node_as_controller(
    admin: AdminClient, server: Server
) -> None:
    cluster = _result(admin.describe_cluster())
    assert [(node.id, node.host, node.port) for node in cluster.nodes] == [
        (0, "127.0.0.1", server.port)
    ]
    assert cluster.controller.id == 0


def test_delete_topics_deletes_them(broker: Broker, admin: AdminClient) -> None:
    broker.create_topic("doomed", 1)
    _result(admin.delete_topics(["doomed"])["doomed"])
    assert "doomed" not in broker.list_topics()
    assert _code(admin.delete_topics(["doomed"])["doomed"]) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_create_partitions_grows_a_topic(broker: Broker, admin: AdminClient) -> None:
    broker.create_topic("grown", 1)
    _result(admin.create_partitions([NewPartitions("grown", 4)])["grown"])
    assert broker.list_topics()["grown"].num_partitions == 4
    assert _code(admin.create_partitions([NewPartitions("grown", 2)])["grown"]) == (
        KafkaError.INVALID_PARTITIONS
    )


def test_describe_configs_tells_the_topics_own_configs_from_the_defaults(
    broker: Broker, admin: AdminClient
) -> None:
    broker.create_topic("described", 1, {"retention.bytes": "100000", "retention.ms": "1000"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "described")
    entries = _result(admin.describe_configs([resource])[resource])
    assert entries["retention.ms"].value == "1000"
    assert not entries["retention.ms"].is_default
    assert entries["segment.bytes"].is_default
    assert entries["segment.bytes"].value == str(broker.default_log_config.segment_bytes)


def test_incremental_alter_configs_sets_and_deletes_a_topic_config(
    broker: Broker, admin: AdminClient
) -> None:
    broker.create_topic("altered", 1, {"retention.ms": "1000"})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "altered",
        incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("segment.ms", "90000", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    _result(admin.incremental_alter_configs([resource])[resource])
    assert broker.topic_metadata("altered").config == {"segment.ms": 90000}


def test_delete_records_moves_the_log_start_up(broker: Broker, admin: AdminClient) -> None:
    broker.create_topic("trimmed", 1)
    _write(broker, "trimmed", [TS, TS + 1, TS + 2])
    tp = TopicPartition("trimmed", 0, 2)
    deleted = _result(admin.delete_records([tp])[tp])
    assert deleted.low_watermark == 2
    assert broker.log("trimmed", 0).log_start_offset == 2


def test_list_offsets_earliest_latest_by_time_and_largest_time(
    broker: Broker, admin: AdminClient
) -> None:
    broker.create_topic("timed", 1)
    _write(broker, "timed", [TS, TS + 3000, TS + 1000])
    tp = TopicPartition("timed", 0)
    specs = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "after": OffsetSpec.for_timestamp(TS + 500),
        "largest": OffsetSpec.max_timestamp(),
    }
    got = {name: _result(admin.list_offsets({tp: spec})[tp]) for name, spec in specs.items()}
    assert got["earliest"].offset == 0
    assert got["latest"].offset == 3
    assert (got["after"].offset, got["after"].timestamp) == (1, TS + 3000)
    assert (got["largest"].offset, got["largest"].timestamp) == (1, TS + 3000)


def test_a_consumer_reads_watermarks_and_offsets_for_times(broker: Broker, server: Server) -> None:
    broker.create_topic("timed", 1)
    _write(broker, "timed", [TS, TS + 1000, TS + 2000])
    broker.delete_records("timed", 0, 1)
    consumer = confluent_consumer(server.address)
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("timed", 0), DEADLINE_S)
        assert (low, high) == (1, 3)
        (found,) = consumer.offsets_for_times([TopicPartition("timed", 0, TS + 1500)], DEADLINE_S)
        assert found.offset == 2
    finally:
        consumer.close()
