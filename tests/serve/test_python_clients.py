"""kafka-python and aiokafka against `Broker.serve`: each produces records an in-process
consumer reads, and reads back with assign() what another client wrote."""

from __future__ import annotations

import asyncio
import time

import aiokafka
import kafka
from kafka.admin import ConfigResource, ConfigResourceType

import eoslog
from eoslog.broker import Broker
from eoslog.serve.server import Server
from tests.serve.clients import DEADLINE_S

RECORDS = 50


def _in_process_values(broker: Broker, topic: str, count: int) -> list[bytes]:
    log = broker.log(topic, 0)
    consumer = broker.consumer({"group.id": "check"})
    try:
        consumer.assign([eoslog.TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        while len(values) < count:
            batch = consumer.consume(count, timeout=DEADLINE_S)
            assert batch, f"read {len(values)} of {count} (log end {log.log_end_offset})"
            values.extend(message.value() for message in batch)
        return values
    finally:
        consumer.close()


def _written_in_process(broker: Broker, topic: str) -> list[bytes]:
    broker.create_topic(topic, 1)
    producer = broker.producer()
    values = [b"in-process-%d" % i for i in range(RECORDS)]
    for value in values:
        producer.produce(topic, value=value)
    producer.flush()
    producer.close()
    return values


def test_kafka_python_produces_records_an_in_process_consumer_reads(
    broker: Broker, server: Server
) -> None:
    broker.create_topic("kp", 1)
    # Not idempotent: InitProducerId is served by eoslog.serve.txn_apis once it is added.
    producer = kafka.KafkaProducer(
        bootstrap_servers=server.address, acks="all", enable_idempotence=False
    )
    values = [b"kafka-python-%d" % i for i in range(RECORDS)]
    sent = [producer.send("kp", value=value, partition=0) for value in values]
    producer.flush(timeout=DEADLINE_S)
    assert [future.get(DEADLINE_S).offset for future in sent] == list(range(RECORDS))
    producer.close()
    assert _in_process_values(broker, "kp", RECORDS) == values


def test_kafka_python_consumer_with_assign_reads_from_the_beginning(
    broker: Broker, server: Server
) -> None:
    values = _written_in_process(broker, "kc")
    consumer = kafka.KafkaConsumer(bootstrap_servers=server.address, enable_auto_commit=False)
    consumer.assign([kafka.TopicPartition("kc", 0)])
    consumer.seek_to_beginning()
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < RECORDS:
        assert time.monotonic() < deadline, f"read {len(got)} of {RECORDS}"
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(record.value for record in records)
    consumer.close()
    assert got == values


async def _aiokafka_round_trip(address: str, values: list[bytes]) -> list[bytes]:
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=address, acks="all")
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait("ak", value=value, partition=0)
    finally:
        await producer.stop()
    consumer = aiokafka.AIOKafkaConsumer(
        bootstrap_servers=address, enable_auto_commit=False, isolation_level="read_committed"
    )
    await consumer.start()
    try:
        partition = aiokafka.TopicPartition("ak", 0)
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        got: list[bytes] = []
        while len(got) < len(values):
            got.append((await consumer.getone()).value)
        return got
    finally:
        await consumer.stop()


def test_aiokafka_produces_and_reads_back_with_assign(broker: Broker, server: Server) -> None:
    broker.create_topic("ak", 1)
    values = [b"aiokafka-%d" % i for i in range(RECORDS)]
    got = asyncio.run(asyncio.wait_for(_aiokafka_round_trip(server.address, values), DEADLINE_S))
    assert got == values
    assert _in_process_values(broker, "ak", RECORDS) == values


def test_kafka_python_admin_reads_the_kafka_types_of_topic_and_broker_configs(
    broker: Broker, server: Server
) -> None:
    broker.create_topic("typed", 1, {"retention.ms": "60000"})
    admin = kafka.KafkaAdminClient(bootstrap_servers=server.address)
    try:
        described = admin.describe_configs(
            [
                ConfigResource(ConfigResourceType.TOPIC, "typed"),
                ConfigResource(ConfigResourceType.BROKER, "0"),
            ],
            config_filter="all",
        )
    finally:
        admin.close()
    topic = described["topic"]["typed"]
    assert {name: entry["config_type"] for name, entry in topic.items()} == {
        "segment.bytes": "INT",
        "segment.ms": "LONG",
        "segment.index.bytes": "INT",
        "index.interval.bytes": "INT",
        "retention.ms": "LONG",
        "retention.bytes": "LONG",
        "max.message.bytes": "INT",
        "message.timestamp.type": "STRING",
        "message.timestamp.before.max.ms": "LONG",
        "message.timestamp.after.max.ms": "LONG",
        "remote.storage.enable": "BOOLEAN",
        "local.retention.ms": "LONG",
        "local.retention.bytes": "LONG",
        "cleanup.policy": "LIST",
        "min.cleanable.dirty.ratio": "DOUBLE",
        "min.compaction.lag.ms": "LONG",
        "max.compaction.lag.ms": "LONG",
        "delete.retention.ms": "LONG",
    }
    assert topic["retention.ms"]["value"] == "60000"
    settings = described["broker"]["0"]
    assert settings["auto.create.topics.enable"]["config_type"] == "BOOLEAN"
    assert settings["log.retention.check.interval.ms"]["config_type"] == "LONG"
    assert settings["group.min.session.timeout.ms"]["config_type"] == "INT"
    assert "UNKNOWN" not in {entry["config_type"] for entry in settings.values()}
