"""Real Kafka clients transact through `eoslog serve` (issue 18 item 5): confluent-kafka's
(librdkafka's) transactional producer, kafka-python's and aiokafka's, each against a server in
front of a Broker in this process. What they commit is what an in-process read_committed
consumer and `eoslog.scan` of the files see; what they abort is invisible; a second producer
with the same transactional.id fences the first."""

from __future__ import annotations

import asyncio
import time

import confluent_kafka
import pytest

import eoslog
from eoslog.serve.server import Server

TIMEOUT_S = 30.0


@pytest.fixture
def served(broker: eoslog.Broker, server: Server) -> tuple[eoslog.Broker, str]:
    """The conftest's broker, served, with topic "out" (2 partitions): (broker, address)."""
    broker.create_topic("out", 2)
    return broker, server.address


def read_committed(broker: eoslog.Broker, partitions: int = 2) -> list[bytes | None]:
    """Every committed value of "out", partition by partition, in offset order."""
    consumer = broker.consumer({"auto.offset.reset": "earliest"})
    consumer.assign([eoslog.TopicPartition("out", p, 0) for p in range(partitions)])
    found: list[tuple[int, int, bytes | None]] = []
    while batch := consumer.consume(1000, timeout=0):
        found.extend((m.partition(), m.offset(), m.value()) for m in batch)
    consumer.close()
    return [value for _, _, value in sorted(found)]


def scanned(broker: eoslog.Broker) -> list[bytes]:
    """The committed values `eoslog.scan` finds in the files, by partition and offset."""
    rows = []
    for batch in eoslog.scan(broker.path, topics=["out"], isolation_level="read_committed"):
        table = batch.to_pydict()
        rows.extend(zip(table["partition"], table["offset"], table["value"], strict=True))
    return [value for _, _, value in sorted(rows)]


def confluent_producer(address: str, transactional_id: str) -> confluent_kafka.Producer:
    return confluent_kafka.Producer(
        {"bootstrap.servers": address, "transactional.id": transactional_id, "linger.ms": 0}
    )


def confluent_transaction(
    producer: confluent_kafka.Producer, values: list[bytes], commit: bool
) -> None:
    producer.begin_transaction()
    for index, value in enumerate(values):
        producer.produce("out", value, partition=index % 2)
    if commit:
        producer.commit_transaction(TIMEOUT_S)
    else:
        producer.flush(TIMEOUT_S)
        producer.abort_transaction(TIMEOUT_S)


def test_confluent_kafka_commits_are_read_committed_and_aborts_are_not(
    served: tuple[eoslog.Broker, str],
) -> None:
    broker, address = served
    producer = confluent_producer(address, "confluent-1")
    producer.init_transactions(TIMEOUT_S)
    confluent_transaction(producer, [b"c1", b"c2"], commit=True)
    confluent_transaction(producer, [b"a1", b"a2"], commit=False)
    confluent_transaction(producer, [b"c3", b"c4"], commit=True)
    expected = [b"c1", b"c3", b"c2", b"c4"]  # partition 0, then partition 1
    assert read_committed(broker) == expected
    assert scanned(broker) == expected
    meta = broker.transactions.metadata("confluent-1")
    assert meta is not None and meta.state.kafka_name == "CompleteCommit"


def test_a_second_confluent_producer_with_the_id_fences_the_first(
    served: tuple[eoslog.Broker, str],
) -> None:
    broker, address = served
    first = confluent_producer(address, "confluent-2")
    first.init_transactions(TIMEOUT_S)
    first.begin_transaction()
    first.produce("out", b"zombie", partition=0)
    first.flush(TIMEOUT_S)
    second = confluent_producer(address, "confluent-2")
    second.init_transactions(TIMEOUT_S)  # aborts what the first left open
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        first.commit_transaction(TIMEOUT_S)
    error = raised.value.args[0]
    assert error.fatal() and error.code() == confluent_kafka.KafkaError._FENCED
    confluent_transaction(second, [b"live"], commit=True)
    assert read_committed(broker) == [b"live"]


def kafka_python_has_transactions() -> bool:
    import kafka

    return "transactional_id" in kafka.KafkaProducer.DEFAULT_CONFIG


@pytest.mark.skipif(not kafka_python_has_transactions(), reason="kafka-python has no transactions")
def test_kafka_python_commits_are_read_committed_and_aborts_are_not(
    served: tuple[eoslog.Broker, str],
) -> None:
    import kafka

    broker, address = served
    producer = kafka.KafkaProducer(bootstrap_servers=address, transactional_id="kafka-python-1")
    try:
        producer.init_transactions()
        for values, commit in (([b"k1"], True), ([b"k2"], False), ([b"k3"], True)):
            producer.begin_transaction()
            for value in values:
                producer.send("out", value, partition=0)
            if commit:
                producer.commit_transaction()
            else:
                producer.flush()
                producer.abort_transaction()
    finally:
        producer.close(timeout=TIMEOUT_S)
    assert read_committed(broker) == [b"k1", b"k3"]
    assert scanned(broker) == [b"k1", b"k3"]


def test_aiokafka_commits_are_read_committed_and_aborts_are_not(
    served: tuple[eoslog.Broker, str],
) -> None:
    import aiokafka

    broker, address = served

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=address, transactional_id="aiokafka-1"
        )
        await producer.start()
        try:
            for value, commit in ((b"x1", True), (b"x2", False), (b"x3", True)):
                await producer.begin_transaction()
                await producer.send_and_wait("out", value, partition=1)
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(run(), TIMEOUT_S))
    assert read_committed(broker) == [b"x1", b"x3"]
    assert scanned(broker) == [b"x1", b"x3"]


def consume_some(consumer: confluent_kafka.Consumer, count: int) -> list[confluent_kafka.Message]:
    """`count` records from the consumer's group assignment; fails the test at the deadline."""
    got: list[confluent_kafka.Message] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < count:
        assert time.monotonic() < deadline, f"consumed {len(got)} of {count}"
        for message in consumer.consume(count - len(got), timeout=0.5):
            assert message.error() is None, message.error()
            got.append(message)
    return got


def committed_offset(broker: eoslog.Broker) -> int | None:
    found = broker.groups.fetch_offsets("copiers", [("in", 0)], require_stable=False)
    stored = found[("in", 0)]
    return None if stored is None else stored.offset


def test_a_confluent_copier_commits_its_group_offsets_with_its_output_or_neither(
    served: tuple[eoslog.Broker, str],
) -> None:
    """Consume-transform-produce: send_offsets_to_transaction (AddOffsetsToTxn,
    TxnOffsetCommit with the member's generation) commits the group's offsets with the
    output; an abort drops both."""
    broker, address = served
    broker.create_topic("in", 1)
    source = broker.producer()
    for index in range(6):
        source.produce("in", b"in-%d" % index, partition=0)
    source.flush()
    source.close()
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": address,
            "group.id": "copiers",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    producer = confluent_producer(address, "copier-1")
    try:
        consumer.subscribe(["in"])
        producer.init_transactions(TIMEOUT_S)
        for commit in (True, False):
            producer.begin_transaction()
            for message in consume_some(consumer, 3):
                producer.produce("out", message.value().upper(), partition=0)
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()),
                consumer.consumer_group_metadata(),
                TIMEOUT_S,
            )
            if commit:
                producer.commit_transaction(TIMEOUT_S)
            else:
                producer.abort_transaction(TIMEOUT_S)
    finally:
        consumer.close()
    assert read_committed(broker) == [b"IN-0", b"IN-1", b"IN-2"]
    assert committed_offset(broker) == 3


def group_consumer(address: str) -> confluent_kafka.Consumer:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": address,
            "group.id": "copiers",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe(["in"])
    return consumer


def test_offsets_sent_with_a_departed_members_metadata_are_refused_kip_447(
    served: tuple[eoslog.Broker, str],
) -> None:
    """A zombie copier (its member left the group, another took its partitions) cannot commit
    offsets in a transaction: TxnOffsetCommit fences it by member and generation."""
    broker, address = served
    broker.create_topic("in", 1)
    source = broker.producer()
    source.produce("in", b"record", partition=0)
    source.flush()
    source.close()
    zombie = group_consumer(address)
    consume_some(zombie, 1)
    stale = zombie.consumer_group_metadata()
    positions = zombie.position(zombie.assignment())
    zombie.close()  # LeaveGroup
    successor = group_consumer(address)
    producer = confluent_producer(address, "copier-2")
    try:
        consume_some(successor, 1)  # the group's next generation holds the partition
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        with pytest.raises(confluent_kafka.KafkaException) as raised:
            producer.send_offsets_to_transaction(positions, stale, TIMEOUT_S)
        assert not raised.value.args[0].fatal()
        producer.abort_transaction(TIMEOUT_S)
    finally:
        successor.close()
    assert committed_offset(broker) is None


def test_aiokafka_commits_group_offsets_in_a_transaction(
    served: tuple[eoslog.Broker, str],
) -> None:
    """aiokafka's send_offsets_to_transaction (AddOffsetsToTxn, TxnOffsetCommit v0: a group
    id alone, no member) commits with the transaction, and an abort drops them."""
    import aiokafka
    from aiokafka.structs import TopicPartition as AioTopicPartition

    broker, address = served
    broker.create_topic("in", 1)

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=address, transactional_id="aiokafka-2"
        )
        await producer.start()
        try:
            for offset, commit in ((3, True), (5, False)):
                await producer.begin_transaction()
                await producer.send_and_wait("out", b"o-%d" % offset, partition=0)
                await producer.send_offsets_to_transaction(
                    {AioTopicPartition("in", 0): offset}, "aio-copiers"
                )
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(run(), TIMEOUT_S))
    found = broker.groups.fetch_offsets("aio-copiers", [("in", 0)], require_stable=True)
    stored = found[("in", 0)]
    assert stored is not None and stored.offset == 3
    assert read_committed(broker) == [b"o-3"]


@pytest.mark.skipif(not kafka_python_has_transactions(), reason="kafka-python has no transactions")
def test_a_second_kafka_python_producer_with_the_id_fences_the_first(
    served: tuple[eoslog.Broker, str],
) -> None:
    import kafka
    import kafka.errors

    broker, address = served
    first = kafka.KafkaProducer(bootstrap_servers=address, transactional_id="kafka-python-2")
    second = kafka.KafkaProducer(bootstrap_servers=address, transactional_id="kafka-python-2")
    try:
        first.init_transactions()
        first.begin_transaction()
        first.send("out", b"zombie", partition=0).get(TIMEOUT_S)
        second.init_transactions()  # aborts what the first left open
        with pytest.raises(
            (kafka.errors.ProducerFencedError, kafka.errors.InvalidProducerEpochError)
        ):
            first.commit_transaction()
        second.begin_transaction()
        second.send("out", b"live", partition=0)
        second.commit_transaction()
    finally:
        first.close(timeout=TIMEOUT_S)
        second.close(timeout=TIMEOUT_S)
    assert read_committed(broker) == [b"live"]


def test_an_idempotent_kafka_python_producer_writes_each_record_once(
    served: tuple[eoslog.Broker, str],
) -> None:
    """InitProducerId without a transactional id: the records carry the producer id it
    handed out, one producer for the partition."""
    import kafka

    broker, address = served
    producer = kafka.KafkaProducer(bootstrap_servers=address, enable_idempotence=True, acks="all")
    try:
        futures = [producer.send("out", b"i-%d" % i, partition=0) for i in range(20)]
        assert [f.get(TIMEOUT_S).offset for f in futures] == list(range(20))
    finally:
        producer.close(timeout=TIMEOUT_S)
    assert read_committed(broker) == [b"i-%d" % i for i in range(20)]
    (state,) = broker.log("out", 0).active_producers()
    assert state.producer_id >= 0 and state.last_sequence == 19
