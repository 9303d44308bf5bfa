"""What happens to a broker's clients when it closes, and to a producer's queue when it is purged
or closed (docs/api.md "Producer", "Broker"): no message is ever dropped without a delivery
report, an open transaction is aborted, and a consumer left open commits and leaves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import eoslog
from eoslog.errors import KafkaError, MessagePurgedError
from tests.support import logtools

LINGER_NEVER_MS = 900_000


def reports_into(out: list[tuple[Any, Any]]) -> Any:
    return lambda error, message: out.append((error, message))


def values_in(path: str, topic: str, isolation_level: str = "read_committed") -> list[bytes]:
    with eoslog.open(path, durability="none") as broker:
        consumer = broker.consumer({"isolation.level": isolation_level})
        consumer.assign([eoslog.TopicPartition(topic, 0, eoslog.OFFSET_BEGINNING)])
        values: list[bytes] = []
        while messages := consumer.consume(500, timeout=0):
            values.extend(message.value() for message in messages)  # type: ignore[misc]
        consumer.close()
        return values


def test_broker_close_flushes_what_a_producer_never_flushed(tmp_path: Path) -> None:
    # Regression: 1,000 records produced and not flushed were dropped by broker.close(), with
    # no error and no delivery report.
    path = str(tmp_path)
    reports: list[tuple[Any, Any]] = []
    broker = eoslog.open(path, durability="none")
    broker.create_topic("t", 1)
    producer = broker.producer({"linger.ms": LINGER_NEVER_MS})
    for number in range(1000):
        producer.produce("t", b"%d" % number, on_delivery=reports_into(reports))
    broker.close()
    assert len(reports) == 1000 and all(error is None for error, _ in reports)
    assert [message.offset() for _, message in reports] == list(range(1000))
    assert values_in(path, "t") == [b"%d" % number for number in range(1000)]


def test_broker_close_aborts_an_open_transaction(tmp_path: Path) -> None:
    path = str(tmp_path)
    broker = eoslog.open(path, durability="none")
    broker.create_topic("t", 1)
    producer = broker.producer({"transactional.id": "open-at-close"})
    producer.init_transactions()
    producer.begin_transaction()
    producer.produce("t", b"never committed", partition=0)
    producer.flush()
    broker.close()
    assert values_in(path, "t") == []
    assert values_in(path, "t", "read_uncommitted") == [b"never committed"]
    with eoslog.open(path, durability="none") as reopened:
        log = reopened.log("t", 0)
        assert log.last_stable_offset == log.log_end_offset  # no transaction left hanging


def test_broker_close_commits_and_closes_a_consumer_left_open(tmp_path: Path) -> None:
    path = str(tmp_path)
    broker = eoslog.open(path, durability="none")
    broker.create_topic("t", 1)
    producer = broker.producer()
    for number in range(10):
        producer.produce("t", b"%d" % number)
    producer.flush()
    consumer = broker.consumer({"group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["t"])
    assert len(consumer.consume(4, timeout=5)) == 4
    broker.close()
    # Regression: poll() after broker.close() failed with "Bad file descriptor".
    with pytest.raises(RuntimeError):
        consumer.poll(0)
    with eoslog.open(path, durability="none") as reopened:
        again = reopened.consumer({"group.id": "g"})
        [committed] = again.committed([eoslog.TopicPartition("t", 0)])
        again.close()
    assert committed.offset == 4


def test_purge_reports_every_queued_message_with_purge_queue(tmp_path: Path) -> None:
    reports: list[tuple[Any, Any]] = []
    with eoslog.open(str(tmp_path), durability="none") as broker:
        broker.create_topic("t", 1)
        producer = broker.producer({"linger.ms": LINGER_NEVER_MS})
        for number in range(50):
            producer.produce("t", b"%d" % number, on_delivery=reports_into(reports))
        producer.purge()
        assert producer.flush() == 0
        producer.produce("t", b"after", on_delivery=reports_into(reports))
        assert producer.flush() == 0
        producer.close()
        assert broker.log("t", 0).log_end_offset == 1
    assert [error.code() for error, _ in reports[:50]] == [KafkaError._PURGE_QUEUE] * 50
    assert reports[50][0] is None and reports[50][1].value() == b"after"


def test_purge_in_a_transaction_leaves_only_abort(tmp_path: Path) -> None:
    with eoslog.open(str(tmp_path), durability="none") as broker:
        broker.create_topic("t", 1)
        producer = broker.producer({"transactional.id": "p", "linger.ms": LINGER_NEVER_MS})
        producer.init_transactions()
        producer.begin_transaction()
        producer.produce("t", b"gone", partition=0)
        producer.purge()
        with pytest.raises(eoslog.KafkaException) as raised:
            producer.commit_transaction()
        assert raised.value.args[0].txn_requires_abort()
        producer.abort_transaction()
        producer.close()


def test_purge_checks_its_arguments(tmp_path: Path) -> None:
    with (
        eoslog.open(str(tmp_path), durability="none") as broker,
        pytest.raises(TypeError, match="in_queue"),
    ):
        broker.producer().purge(in_queue="yes")  # type: ignore[arg-type]


def test_close_reports_what_its_flush_timeout_left_unwritten(tmp_path: Path) -> None:
    reports: list[tuple[Any, Any]] = []
    with eoslog.open(str(tmp_path), durability="none") as broker:
        broker.create_topic("t", 1)
        producer = broker.producer({"linger.ms": LINGER_NEVER_MS})
        for number in range(20):
            producer.produce("t", b"%d" % number, on_delivery=reports_into(reports))
        assert producer.close(timeout=0) == 0
    assert len(reports) == 20
    assert all(isinstance(error, KafkaError) for error, _ in reports)
    assert {error.code() for error, _ in reports} == {KafkaError._PURGE_QUEUE}
    assert MessagePurgedError.code == KafkaError._PURGE_QUEUE


def test_a_producer_used_as_a_context_manager_flushes_and_closes(tmp_path: Any) -> None:
    """As confluent-kafka's: leaving the block flushes what was produced and closes the
    producer; a later call raises a RuntimeError (here ProducerClosedError, also a
    ProducerStateError)."""
    with eoslog.open(str(tmp_path), "none") as broker:
        broker.create_topic("t", 1)
        with broker.producer({"linger.ms": 60_000}) as producer:
            for value in (b"a", b"b", b"c"):
                producer.produce("t", value)
        assert len(producer) == 0
        with pytest.raises(RuntimeError, match="closed"):
            producer.produce("t", b"d")
        with pytest.raises(eoslog.ProducerStateError):
            producer.produce("t", b"e")
        data = bytes(broker.log("t", 0).read(0).records)
        assert [record.value for record in logtools.records(data)] == [b"a", b"b", b"c"]
