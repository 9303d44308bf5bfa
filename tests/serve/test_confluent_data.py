"""confluent-kafka (librdkafka) producing and consuming through `Broker.serve`: what it writes
is what an in-process consumer and an offline scan of the files read, and what an in-process
writer commits or aborts is what it reads at each isolation level."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

import eoslog
from eoslog.broker import Broker
from eoslog.serve.server import Server
from tests.serve import wire
from tests.serve.clients import DEADLINE_S, confluent_consumer, read_assigned
from tests.support import scanlog

RECORDS = 200


def _produce(address: str, topic: str, **config: object) -> None:
    producer = Producer({"bootstrap.servers": address, "linger.ms": 5, **config})
    errors = []
    for i in range(RECORDS):
        producer.produce(
            topic,
            key=b"k%d" % (i % 7),
            value=b"value-%d" % i,
            partition=i % 3,
            on_delivery=lambda error, _message: errors.append(error) if error else None,
        )
    assert producer.flush(DEADLINE_S) == 0
    assert errors == []


def _expected() -> list[tuple[int, bytes, bytes]]:
    return sorted((i % 3, b"k%d" % (i % 7), b"value-%d" % i) for i in range(RECORDS))


def _read_in_process(broker: Broker, topic: str) -> list[tuple[int, bytes, bytes]]:
    consumer = broker.consumer({"group.id": "check", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([eoslog.TopicPartition(topic, p, 0) for p in range(3)])
        got: list[tuple[int, bytes, bytes]] = []
        while len(got) < RECORDS:
            batch = consumer.consume(RECORDS, timeout=DEADLINE_S)
            assert batch, f"read {len(got)} of {RECORDS} records"
            got.extend((m.partition(), m.key(), m.value()) for m in batch)
        return sorted(got)
    finally:
        consumer.close()


def _scanned(broker: Broker, topic: str) -> list[tuple[int, bytes, bytes]]:
    broker.log(topic, 0).flush()
    rows = []
    for batch in eoslog.scan(broker.path, [topic]):
        for row in batch.to_pylist():
            rows.append((row["partition"], row["key"], row["value"]))
    return sorted(rows)


def test_confluent_producer_with_acks_all_writes_records_an_in_process_consumer_and_a_scan_read(
    broker: Broker, server: Server
) -> None:
    broker.create_topic("events", 3)
    _produce(server.address, "events", acks="all", **{"enable.idempotence": False})
    assert _read_in_process(broker, "events") == _expected()
    assert _scanned(broker, "events") == _expected()


def test_idempotent_confluent_producer_writes_each_record_once(
    broker: Broker, server: Server
) -> None:
    broker.create_topic("events", 3)
    _produce(server.address, "events", **{"enable.idempotence": True})
    assert _read_in_process(broker, "events") == _expected()
    assert _scanned(broker, "events") == _expected()
    producers = {p.producer_id for p in broker.log("events", 0).active_producers()}
    assert len(producers) == 1


def test_producing_to_an_unknown_topic_creates_it_as_an_in_process_producer_does(
    broker: Broker, server: Server
) -> None:
    producer = Producer({"bootstrap.servers": server.address, "enable.idempotence": False})
    producer.produce("made-by-metadata", value=b"v")
    assert producer.flush(DEADLINE_S) == 0
    assert broker.list_topics()["made-by-metadata"].num_partitions == 1


def _write_committed_and_aborted(broker: Broker) -> None:
    """Three records committed, three aborted, three committed, by an in-process
    transactional producer."""
    broker.create_topic("txn", 1)
    producer = broker.producer({"transactional.id": "writer"})
    producer.init_transactions()
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(3):
            producer.produce("txn", value=f"{outcome}-{i}".encode())
        producer.flush()
        if outcome == "commit":
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.close()


COMMITTED = ["commit-0", "commit-1", "commit-2"]
ABORTED = ["abort-0", "abort-1", "abort-2"]


@pytest.mark.parametrize(
    ("isolation", "wanted"),
    [
        ("read_committed", [*COMMITTED, *COMMITTED]),
        ("read_uncommitted", [*COMMITTED, *ABORTED, *COMMITTED]),
    ],
)
def test_confluent_consumer_with_assign_reads_what_its_isolation_level_allows(
    broker: Broker, server: Server, isolation: str, wanted: list[str]
) -> None:
    _write_committed_and_aborted(broker)
    consumer = confluent_consumer(server.address, **{"isolation.level": isolation})
    try:
        got = read_assigned(consumer, "txn", 1, len(wanted))
    finally:
        consumer.close()
    assert [value.decode() for _, _, _, value in got if value is not None] == wanted


def test_confluent_consumer_reads_many_partitions_through_a_small_fetch_max_bytes(
    broker: Broker, server: Server
) -> None:
    broker.create_topic("wide", 3)
    producer = broker.producer({"linger.ms": 0})
    written = {(p, b"%d-%d" % (p, i)) for p in range(3) for i in range(300)}
    for partition, value in sorted(written):
        producer.produce("wide", value=value + b"." * 200, partition=partition)
    producer.flush()
    producer.close()
    small = {"fetch.max.bytes": 4096, "message.max.bytes": 4096, "max.partition.fetch.bytes": 2048}
    consumer = confluent_consumer(server.address, **small)
    try:
        got = read_assigned(consumer, "wide", 3, len(written))
    finally:
        consumer.close()
    assert {(p, value.rstrip(b".")) for p, _, _, value in got if value} == written
    for partition in range(3):
        offsets = [offset for p, offset, _, _ in got if p == partition]
        assert offsets == list(range(300))


def test_confluent_consumer_below_the_log_start_resets_to_it(
    broker: Broker, server: Server
) -> None:
    broker.create_topic("trimmed", 1)
    producer = broker.producer({"linger.ms": 0})
    for i in range(10):
        producer.produce("trimmed", value=b"%d" % i)
    producer.flush()
    producer.close()
    broker.delete_records("trimmed", 0, 6)
    consumer = confluent_consumer(server.address, **{"auto.offset.reset": "earliest"})
    try:
        got = read_assigned(consumer, "trimmed", 1, 4)
    finally:
        consumer.close()
    assert [(offset, value) for _, offset, _, value in got] == [
        (6, b"6"),
        (7, b"7"),
        (8, b"8"),
        (9, b"9"),
    ]


def test_read_committed_consumer_stops_at_an_open_transaction_until_it_commits(
    broker: Broker, server: Server
) -> None:
    writer, plain = scanlog.open_transaction_between(broker, "open")
    consumer = confluent_consumer(server.address, **{"isolation.level": "read_committed"})
    try:
        assert [v for *_, v in read_assigned(consumer, "open", 1, 1)] == [b"before"]
        with wire.connect(server.address) as sock:
            answer = wire.call(sock, wire.fetch_request("open", 1, max_wait_ms=0))
        (held,) = answer.responses[0].partitions
        assert (held.high_watermark, held.last_stable_offset, held.records) == (3, 1, b"")
        writer.commit_transaction()
        rest = []
        while len(rest) < 2:
            message = consumer.poll(DEADLINE_S)
            assert message is not None, "the commit did not release the records"
            rest.append(message.value())
    finally:
        consumer.close()
        writer.close()
        plain.close()
    assert rest == [b"inside", b"after"]
