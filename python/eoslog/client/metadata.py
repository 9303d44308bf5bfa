"""Cluster metadata as confluent-kafka-python returns it from list_topics()
(confluent_kafka.admin.ClusterMetadata, BrokerMetadata, TopicMetadata, PartitionMetadata),
for Consumer.list_topics and, later, Producer.list_topics and the AdminClient (docs/api.md
"Consumer").

An open log directory is a cluster of one node: broker id NODE_ID, the controller, the leader
and only replica of every partition, always in sync. It has no listener (broker.serve is not
built), so its BrokerMetadata has the directory as host and port -1 (Kafka's Node.noNode
port). Kafka keeps a cluster id in meta.properties; eoslog.meta has none yet, so the id is
derived from the directory's absolute path, in Kafka's form (a UUID in URL-safe base64,
22 characters): the same directory at the same path always reports the same id.

The classes are confluent's shapes with the same attribute names, reprs and str()s; they
are built fresh for each call and the caller may keep or change them. Not to be confused with
eoslog.TopicMetadata (name, num_partitions, config), Broker.list_topics' answer.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from typing import Final, Protocol

from eoslog.errors import KafkaError

# The one node's broker id (Kafka's default node.id in a single-node KRaft quick start is 1;
# librdkafka's mock cluster numbers from 1 too; eoslog has no other node, and 0 is Kafka's
# broker.id default in ZooKeeper mode).
NODE_ID: Final = 0
# Kafka's Node.noNode() port: no listener.
NO_PORT: Final = -1


class TopicCounts(Protocol):
    """A topic's partition count, as eoslog.TopicMetadata gives it."""

    @property
    def num_partitions(self) -> int: ...


class MetadataSource(Protocol):
    """What the metadata needs of the Broker: its directory and its topics (internal ones
    included, as Kafka's Metadata response lists them)."""

    path: str

    def list_topics(self) -> Mapping[str, TopicCounts]: ...


class BrokerMetadata:
    """One broker (confluent_kafka.admin.BrokerMetadata): id, host, port."""

    def __init__(self, id: int = -1, host: str | None = None, port: int = -1) -> None:
        self.id = id
        self.host = host
        self.port = port

    def __repr__(self) -> str:
        return f"BrokerMetadata({self.id}, {self.host}:{self.port})"

    def __str__(self) -> str:
        return f"{self.host}:{self.port}/{self.id}"


class PartitionMetadata:
    """One partition (confluent_kafka.admin.PartitionMetadata): id, leader, replicas, isrs
    (broker ids) and error (a KafkaError or None)."""

    def __init__(
        self,
        id: int = -1,
        leader: int = -1,
        replicas: list[int] | None = None,
        isrs: list[int] | None = None,
        error: KafkaError | None = None,
    ) -> None:
        self.id = id
        self.leader = leader
        self.replicas: list[int] = [] if replicas is None else replicas
        self.isrs: list[int] = [] if isrs is None else isrs
        self.error = error

    def __repr__(self) -> str:
        if self.error is not None:
            return f"PartitionMetadata({self.id}, {self.error})"
        return f"PartitionMetadata({self.id})"

    def __str__(self) -> str:
        return str(self.id)


class TopicMetadata:
    """One topic (confluent_kafka.admin.TopicMetadata): topic, partitions ({id:
    PartitionMetadata}) and error (a KafkaError or None; UNKNOWN_TOPIC_OR_PART, with no
    partitions, for a topic asked for by name that does not exist)."""

    def __init__(
        self,
        topic: str | None = None,
        partitions: dict[int, PartitionMetadata] | None = None,
        error: KafkaError | None = None,
    ) -> None:
        self.topic = topic
        self.partitions: dict[int, PartitionMetadata] = {} if partitions is None else partitions
        self.error = error

    def __repr__(self) -> str:
        if self.error is not None:
            return f"TopicMetadata({self.topic}, {len(self.partitions)} partitions, {self.error})"
        return f"TopicMetadata({self.topic}, {len(self.partitions)} partitions)"

    def __str__(self) -> str:
        return str(self.topic)


class ClusterMetadata:
    """The cluster (confluent_kafka.admin.ClusterMetadata): cluster_id, controller_id,
    brokers ({id: BrokerMetadata}), topics ({name: TopicMetadata}), and the broker the answer
    came from, orig_broker_id and orig_broker_name."""

    def __init__(self) -> None:
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.brokers: dict[int, BrokerMetadata] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.orig_broker_id = -1
        self.orig_broker_name: str | None = None

    def __repr__(self) -> str:
        return f"ClusterMetadata({self.cluster_id})"

    def __str__(self) -> str:
        return str(self.cluster_id)


def cluster_id(path: str) -> str:
    """The cluster id of the log directory at `path` (see the module docstring)."""
    derived = uuid.uuid5(uuid.NAMESPACE_URL, "file://" + path)
    return base64.urlsafe_b64encode(derived.bytes).rstrip(b"=").decode("ascii")


def cluster_metadata(source: MetadataSource, topic: str | None = None) -> ClusterMetadata:
    """The metadata of every topic, or of `topic` alone (with UNKNOWN_TOPIC_OR_PART when it
    does not exist), as list_topics() answers."""
    node = BrokerMetadata(NODE_ID, source.path, NO_PORT)
    metadata = ClusterMetadata()
    metadata.cluster_id = cluster_id(source.path)
    metadata.controller_id = NODE_ID
    metadata.brokers = {NODE_ID: node}
    metadata.orig_broker_id = NODE_ID
    metadata.orig_broker_name = str(node)
    counts = {name: meta.num_partitions for name, meta in source.list_topics().items()}
    wanted = sorted(counts) if topic is None else [topic]
    for name in wanted:
        count = counts.get(name)
        if count is None:
            missing = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
            metadata.topics[name] = TopicMetadata(name, {}, missing)
            continue
        partitions = {
            index: PartitionMetadata(index, NODE_ID, [NODE_ID], [NODE_ID]) for index in range(count)
        }
        metadata.topics[name] = TopicMetadata(name, partitions)
    return metadata
