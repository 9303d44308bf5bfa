"""Consumer.list_topics and Consumer.memberid (docs/api.md "Consumer"): the cluster metadata of
an open log directory in confluent_kafka.admin's shapes, and the group member id."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import eoslog
from eoslog.client.metadata import (
    NODE_ID,
    BrokerMetadata,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
    cluster_id,
)
from eoslog.errors import KafkaError


@pytest.fixture
def broker(tmp_path: os.PathLike[str]) -> Iterator[eoslog.Broker]:
    opened = eoslog.open(os.path.join(tmp_path, "data"), durability="none", background=False)
    opened.create_topic("orders", 3)
    opened.create_topic("audit", 1)
    yield opened
    opened.close()


@pytest.fixture
def consumer(broker: eoslog.Broker) -> Iterator[eoslog.Consumer]:
    made = broker.consumer({"group.id": "g", "auto.offset.reset": "earliest"})
    yield made
    made.close()


def test_list_topics_reports_every_topic_internal_ones_included(
    consumer: eoslog.Consumer,
) -> None:
    metadata = consumer.list_topics()
    assert isinstance(metadata, ClusterMetadata)
    assert set(metadata.topics) == {"orders", "audit", "__consumer_offsets", "__transaction_state"}
    orders = metadata.topics["orders"]
    assert isinstance(orders, TopicMetadata)
    assert (orders.topic, orders.error, sorted(orders.partitions)) == ("orders", None, [0, 1, 2])


def test_every_partition_is_led_by_the_one_node_its_only_in_sync_replica(
    consumer: eoslog.Consumer,
) -> None:
    for topic in consumer.list_topics().topics.values():
        for index, partition in topic.partitions.items():
            assert isinstance(partition, PartitionMetadata)
            assert (partition.id, partition.leader, partition.error) == (index, NODE_ID, None)
            assert partition.replicas == partition.isrs == [NODE_ID]


def test_the_cluster_is_one_node_that_is_its_controller_and_answers(
    broker: eoslog.Broker, consumer: eoslog.Consumer
) -> None:
    metadata = consumer.list_topics()
    (node,) = metadata.brokers.values()
    assert isinstance(node, BrokerMetadata)
    assert (node.id, node.host, node.port) == (NODE_ID, broker.path, -1)
    assert metadata.controller_id == metadata.orig_broker_id == NODE_ID
    assert metadata.orig_broker_name == f"{broker.path}:-1/{NODE_ID}" == str(node)


def test_the_cluster_id_is_kafka_shaped_and_stable_for_a_directory(
    broker: eoslog.Broker, consumer: eoslog.Consumer
) -> None:
    found = consumer.list_topics().cluster_id
    assert found == cluster_id(broker.path) == consumer.list_topics().cluster_id
    assert found is not None and len(found) == 22  # a UUID in URL-safe base64, unpadded
    assert cluster_id(broker.path + "-other") != found


def test_list_topics_of_one_topic_reports_only_it(consumer: eoslog.Consumer) -> None:
    metadata = consumer.list_topics("audit", timeout=1.5)
    assert list(metadata.topics) == ["audit"]
    assert list(metadata.topics["audit"].partitions) == [0]


def test_an_unknown_topic_asked_by_name_is_reported_with_its_error(
    consumer: eoslog.Consumer,
) -> None:
    missing = consumer.list_topics("nope").topics["nope"]
    assert missing.partitions == {}
    assert missing.error is not None and missing.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert repr(missing).startswith("TopicMetadata(nope, 0 partitions, KafkaError{")


def test_list_topics_follows_topic_creation_and_deletion(
    broker: eoslog.Broker, consumer: eoslog.Consumer
) -> None:
    broker.create_topic("later", 2)
    assert len(consumer.list_topics().topics["later"].partitions) == 2
    broker.delete_topic("audit")
    assert "audit" not in consumer.list_topics().topics


def test_list_topics_checks_its_arguments_as_confluent_does(consumer: eoslog.Consumer) -> None:
    with pytest.raises(TypeError, match="topic must be str, not int"):
        consumer.list_topics(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="timeout must be a number of seconds, not str"):
        consumer.list_topics(timeout="1")  # type: ignore[arg-type]


def test_metadata_reprs_and_strs_are_confluent_s() -> None:
    assert repr(BrokerMetadata(0, "h", 1)) == "BrokerMetadata(0, h:1)"
    assert repr(PartitionMetadata(2)) == "PartitionMetadata(2)" and str(PartitionMetadata(2)) == "2"
    assert repr(TopicMetadata("t", {0: PartitionMetadata(0)})) == "TopicMetadata(t, 1 partitions)"
    assert str(TopicMetadata("t")) == "t"
    made = ClusterMetadata()
    assert (made.cluster_id, made.controller_id, made.orig_broker_id) == (None, -1, -1)
    assert repr(made) == "ClusterMetadata(None)"


def test_memberid_is_none_until_the_consumer_joins_and_after_it_leaves(
    broker: eoslog.Broker, consumer: eoslog.Consumer
) -> None:
    assert consumer.memberid() is None
    consumer.subscribe(["orders"])
    consumer.poll(0.5)
    member = consumer.memberid()
    assert member is not None and member == consumer.consumer_group_metadata().member_id
    consumer.unsubscribe()
    assert consumer.memberid() is None


def test_memberid_is_none_without_a_group(broker: eoslog.Broker) -> None:
    plain = broker.consumer({})
    assert plain.memberid() is None
    plain.close()


def test_list_topics_and_memberid_refuse_a_closed_consumer(consumer: eoslog.Consumer) -> None:
    consumer.close()
    with pytest.raises(RuntimeError):
        consumer.list_topics()
    with pytest.raises(RuntimeError):
        consumer.memberid()
