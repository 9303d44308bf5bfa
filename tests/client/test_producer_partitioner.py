"""The producer's `partitioner` key: librdkafka's seven partitioners with its hashes and its
null- and empty-key rules (eoslog.client.partitioner), checked against librdkafka itself
(tests/client/librdkafka_oracle.py), in both spellings and on both produce() paths."""

from __future__ import annotations

import random
from typing import Any

import confluent_kafka
import pytest

from eoslog.client import partitioner
from tests.client import librdkafka_oracle as oracle
from tests.client.producer_spellings import MakeProducer, make_producer

__all__ = ["make_producer"]

HASHED = ["consistent", "murmur2", "fnv1a", "consistent_random", "murmur2_random", "fnv1a_random"]
# The partitioners that hash a null key (as no bytes) rather than pick a partition for it.
NULL_KEY_HASHED = ["consistent", "murmur2", "fnv1a"]
COUNTS = [1, 2, 3, 4, 7, 12, 100, 1000]


def keys_for_parity(count: int, seed: int = 16) -> list[bytes]:
    rng = random.Random(seed)
    keys = [b"a", b"user-1", bytes(range(256)), "ключ".encode(), b"\xff" * 3]
    keys += [rng.randbytes(rng.randrange(1, 64)) for _ in range(count)]
    return keys


@pytest.mark.parametrize("name", HASHED)
def test_the_hash_of_every_key_gives_librdkafkas_partition(name: str) -> None:
    rule = partitioner.PARTITIONERS[name]
    rng = random.Random(0)
    for count in COUNTS:
        for key in keys_for_parity(200):
            assert partitioner.choose(rule, key, count, rng) == oracle.partition(name, key, count)


@pytest.mark.parametrize("name", NULL_KEY_HASHED)
def test_null_and_empty_keys_go_where_librdkafka_sends_them(name: str) -> None:
    rule = partitioner.PARTITIONERS[name]
    for count in COUNTS:
        expected = oracle.partition(name, None, count)
        assert rule.hash_of(b"") % count == expected
        assert partitioner.choose(rule, b"", count, random.Random(0)) == expected


def confluent_partitions(name: str, topic: str, count: int, keys: list[Any]) -> list[int]:
    """Where the real confluent-kafka, on librdkafka's mock cluster, puts each key."""
    got: dict[int, int] = {}
    with oracle.mock_cluster({topic: count}) as servers:
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": servers, "partitioner": name, "linger.ms": 0}
        )
        for index, key in enumerate(keys):
            producer.produce(
                topic,
                value=str(index).encode(),
                key=key,
                on_delivery=lambda error, message: got.__setitem__(
                    int(message.value()), message.partition()
                ),
            )
        assert producer.flush(30) == 0
    return [got[index] for index in range(len(keys))]


@pytest.mark.parametrize("name", HASHED)
@pytest.mark.parametrize("linger_ms", [0, 600_000])
def test_produce_partitions_keys_as_confluent_kafka_on_the_mock_cluster(
    make_producer: MakeProducer, name: str, linger_ms: int
) -> None:
    # linger.ms 600000 keeps batches open, so most records take the native fast path.
    count = 7
    keys: list[Any] = keys_for_parity(60)
    if name in NULL_KEY_HASHED:
        keys += [None, b"", None]
    expected = confluent_partitions(name, "t", count, keys)
    producer, broker = make_producer({"partitioner": name, "linger.ms": linger_ms})
    broker.create_topic("t", count)
    assert eoslog_partitions(producer, "t", keys) == expected


def eoslog_partitions(producer: Any, topic: str, keys: list[Any]) -> list[int]:
    """Where the producer puts each key, from its delivery reports."""
    got: dict[int, int] = {}
    for index, key in enumerate(keys):
        producer.produce(
            topic,
            str(index).encode(),
            key=key,
            on_delivery=lambda e, m: got.__setitem__(int(m.value()), m.partition()),
        )
    assert producer.flush() == 0
    return [got[index] for index in range(len(keys))]


def test_each_spelling_defaults_to_its_clients_partitioner(make_producer: MakeProducer) -> None:
    producer, broker = make_producer({"linger.ms": 0})
    broker.create_topic("t", 12)
    keys: list[Any] = keys_for_parity(40)
    got = eoslog_partitions(producer, "t", keys)
    name = "murmur2_random" if type(producer).__module__ == "eoslog.client.producer" else None
    name = name or "consistent_random"
    assert got == [oracle.partition(name, key, 12) for key in keys]


@pytest.mark.parametrize("name", NULL_KEY_HASHED)
def test_produce_batch_partitions_as_produce(make_producer: MakeProducer, name: str) -> None:
    producer, broker = make_producer({"partitioner": name, "linger.ms": 0})
    broker.create_topic("t", 7)
    keys: list[Any] = [*keys_for_parity(50), None, b""]
    producer.produce_batch("t", [b"v"] * len(keys), keys=keys, partition=-1)
    landed = {
        p: broker.log("t", p).log_end_offset for p in range(7) if broker.log("t", p).log_end_offset
    }
    expected: dict[int, int] = {}
    for key in keys:
        chosen = oracle.partition(name, key, 7)
        expected[chosen] = expected.get(chosen, 0) + 1
    assert landed == expected


def test_consistent_random_sends_an_empty_key_to_random_partitions(
    make_producer: MakeProducer,
) -> None:
    producer, broker = make_producer({"partitioner": "consistent_random", "linger.ms": 0})
    broker.create_topic("t", 8)
    got: set[int] = set()
    for _ in range(200):
        producer.produce("t", b"v", key=b"", on_delivery=lambda e, m: got.add(m.partition()))
    assert producer.flush() == 0
    assert len(got) > 1  # consistent would put every one on partition 0


def test_sticky_partitioning_linger_ms_0_spreads_null_keys_record_by_record(
    make_producer: MakeProducer,
) -> None:
    producer, broker = make_producer(
        {"sticky.partitioning.linger.ms": 0, "linger.ms": 600_000, "batch.num.messages": 1000}
    )
    broker.create_topic("t", 8)
    got: set[int] = set()
    for _ in range(200):
        producer.produce("t", b"v", on_delivery=lambda e, m: got.add(m.partition()))
    assert producer.flush() == 0
    assert len(got) > 1  # sticky: all 200 in one open batch of one partition


def test_an_unknown_partitioner_is_refused(make_producer: MakeProducer) -> None:
    with pytest.raises(Exception, match="partitioner"):
        make_producer({"partitioner": "crc16"})
