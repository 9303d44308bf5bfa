"""Every Kafka codec through every reader (docs/format.md §4): a topic written with gzip, snappy,
lz4 or zstd, by eoslog's producer or by another Kafka client's batch builder, reads back the
same through poll(), consume_arrow(), eoslog.scan and `eoslog dump-log`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

import eoslog
import eoslog.confluent
from eoslog import cli
from eoslog.record.compression import CODEC_NAMES

CODECS = ["gzip", "snappy", "lz4", "zstd"]
VALUES = [b"order %d: " % i + b"widget " * (i % 7) for i in range(300)]


def consumed(broker: eoslog.Broker, topic: str) -> list[bytes]:
    consumer = broker.consumer({"group.id": "g", "auto.offset.reset": "earliest"})
    consumer.assign([eoslog.TopicPartition(topic, 0, eoslog.OFFSET_BEGINNING)])
    values: list[bytes] = []
    while messages := consumer.consume(100, timeout=0):
        values.extend(message.value() for message in messages)  # type: ignore[misc]
    consumer.close()
    return values


def consumed_arrow(broker: eoslog.Broker, topic: str) -> list[bytes]:
    consumer = broker.consumer({"group.id": "g", "auto.offset.reset": "earliest"})
    consumer.assign([eoslog.TopicPartition(topic, 0, eoslog.OFFSET_BEGINNING)])
    values: list[bytes] = []
    while (batch := consumer.consume_arrow(120, timeout=0)).num_rows:
        values.extend(batch.column("value").to_pylist())
    consumer.close()
    return values


def scanned(path: str, topic: str) -> list[bytes]:
    return [v for batch in eoslog.scan(path, [topic]) for v in batch["value"].to_pylist()]


@pytest.mark.parametrize("name", CODECS)
def test_a_topic_written_with_each_codec_reads_back_through_every_reader(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path)
    with eoslog.open(path, durability="none") as broker:
        broker.create_topic("t", 1)
        producer = broker.producer({"compression.type": name, "transactional.id": "w"})
        producer.init_transactions()
        for start in range(0, len(VALUES), 100):
            producer.begin_transaction()
            for value in VALUES[start : start + 100]:
                producer.produce("t", value, partition=0)
            producer.commit_transaction()
        producer.close()
        assert consumed(broker, "t") == VALUES
        assert consumed_arrow(broker, "t") == VALUES
    assert scanned(path, "t") == VALUES
    segment = os.path.join(path, "t-0", f"{0:020d}.log")
    assert cli.main(["dump-log", segment]) == 0
    lines = capsys.readouterr().out.splitlines()
    data = [line for line in lines if "isControl: false" in line]
    assert data and all(f"compresscodec: {name}" in line for line in data)


@pytest.mark.parametrize("name", CODECS)
def test_a_batch_another_kafka_client_compressed_is_appended_and_read(
    tmp_path: Path, name: str
) -> None:
    # What a Java or librdkafka producer sends with compression.type=zstd (and the others),
    # built here by kafka-python: the broker keeps the producer's codec and bytes.
    builder = DefaultRecordBatchBuilder(2, CODEC_NAMES[name], False, -1, -1, -1, 1 << 20)
    for offset, value in enumerate(VALUES):
        builder.append(offset, 1_700_000_000_000 + offset, None, value, [])
    batch = bytes(builder.build())
    path = str(tmp_path)
    with eoslog.open(path, durability="none") as broker:
        broker.create_topic("t", 1)
        log = broker.log("t", 0)
        assert log.append_batch(batch).base_offset == 0
        assert log.append_batch(batch).base_offset == len(VALUES)
        assert consumed(broker, "t") == VALUES + VALUES
        assert consumed_arrow(broker, "t") == VALUES + VALUES
    assert scanned(path, "t") == VALUES + VALUES


def produce_values(path: str, spelling: str, topic: str, config: dict[str, object]) -> None:
    """VALUES to partition 0 of `topic` through broker.producer() or eoslog.confluent."""
    if spelling == "native":
        with eoslog.open(path, durability="none") as broker:
            producer = broker.producer(config)
            for value in VALUES:
                producer.produce(topic, value, partition=0)
            assert producer.flush(10) == 0
            producer.close()
        return
    producer = eoslog.confluent.Producer({**config, "eoslog.dir": path})
    for value in VALUES:
        producer.produce(topic, value, partition=0)
    assert producer.flush(10) == 0
    producer.close()  # the last client of the directory: its broker closes too


@pytest.mark.parametrize("spelling", ["native", "confluent"])
def test_compression_level_is_applied_to_the_producers_batches(
    tmp_path: Path, spelling: str
) -> None:
    """librdkafka's compression.level: gzip level 1 and 9 write different deflate streams
    (RFC 1952's XFL byte 4 and 2), and both read back the same records."""
    path = str(tmp_path)
    for level in (1, 9):
        config = {"compression.type": "gzip", "compression.level": str(level)}
        produce_values(path, spelling, f"level-{level}", config)
    with eoslog.open(path, durability="none") as broker:
        for level in (1, 9):
            topic = f"level-{level}"
            assert consumed(broker, topic) == VALUES
            batches = bytes(broker.log(topic, 0).read(0, 1 << 20).records)
            # The first batch's records section starts after its 61-byte header; XFL is
            # byte 8 of the gzip stream.
            assert batches[61 + 8] == {1: 4, 9: 2}[level]


def test_a_compression_level_outside_librdkafkas_range_is_refused(tmp_path: Path) -> None:
    with eoslog.open(str(tmp_path), durability="none") as broker:
        for level in (-2, 13):
            with pytest.raises(eoslog.KafkaException):
                broker.producer({"compression.type": "gzip", "compression.level": level})
