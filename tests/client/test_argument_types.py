"""Wrong argument types are a TypeError at the call, as confluent-kafka-python raises them
(docs/api.md "Errors"), never a failure later or elsewhere, a misleading error, or a silently
wrong result. confluent-kafka on librdkafka's in-process mock cluster is the oracle: every case
below raises TypeError from both."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import eoslog

confluent_kafka = pytest.importorskip("confluent_kafka")
MOCK = {"bootstrap.servers": "", "test.mock.num.brokers": 1}

PRODUCER_CASES: dict[str, Callable[[Any], object]] = {
    "partition given as str": lambda p: p.produce("t", b"v", partition="0"),
    "topic None": lambda p: p.produce(None, b"v"),
    "topic not a str": lambda p: p.produce(5, b"v"),
    "value an int": lambda p: p.produce("t", 5),
    "key a list": lambda p: p.produce("t", b"v", key=[1]),
    "timestamp a str": lambda p: p.produce("t", b"v", timestamp="1"),
    "headers an int": lambda p: p.produce("t", b"v", headers=5),
    "flush timeout a str": lambda p: p.flush("1"),
    "poll timeout a str": lambda p: p.poll("1"),
}
CONSUMER_CASES: dict[str, Callable[[Any], object]] = {
    "poll timeout a str": lambda c: c.poll("1"),
    "consume count a str": lambda c: c.consume("5", 0),
    "consume timeout a str": lambda c: c.consume(1, "0"),
    "assign a str": lambda c: c.assign("t"),
    "assign a list of str": lambda c: c.assign(["t"]),
    "subscribe a str": lambda c: c.subscribe("t"),
    "on_assign not callable": lambda c: c.subscribe(["t"], on_assign="x"),
    "seek a str": lambda c: c.seek("t"),
    "commit offsets a str": lambda c: c.commit(offsets="x"),
    "committed a str": lambda c: c.committed("t"),
    "position a str": lambda c: c.position("t"),
    "watermarks of a str": lambda c: c.get_watermark_offsets("t"),
}
TOPIC_PARTITION_CASES: dict[str, Callable[[Any], object]] = {
    "partition a str": lambda m: m.TopicPartition("t", "0"),
    "topic an int": lambda m: m.TopicPartition(5, 0),
    "offset a str": lambda m: m.TopicPartition("t", 0, "5"),
}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[eoslog.Broker]:
    with eoslog.open(str(tmp_path), durability="none") as opened:
        opened.create_topic("t", 1)
        yield opened


def raises_type_error(call: Callable[[], object]) -> bool:
    try:
        call()
    except TypeError:
        return True
    return False


@pytest.mark.parametrize("case", list(PRODUCER_CASES))
def test_producer_refuses_a_wrong_type_as_confluent_does(broker: eoslog.Broker, case: str) -> None:
    ours = broker.producer({"linger.ms": 0})
    theirs = confluent_kafka.Producer(MOCK)
    assert raises_type_error(lambda: PRODUCER_CASES[case](theirs))
    with pytest.raises(TypeError):
        PRODUCER_CASES[case](ours)
    assert ours.flush(1) == 0 and len(ours) == 0  # nothing was queued
    assert broker.log("t", 0).log_end_offset == 0


@pytest.mark.parametrize("case", list(CONSUMER_CASES))
def test_consumer_refuses_a_wrong_type_as_confluent_does(broker: eoslog.Broker, case: str) -> None:
    ours = broker.consumer({"group.id": "g"})
    theirs = confluent_kafka.Consumer({**MOCK, "group.id": "g"})
    try:
        assert raises_type_error(lambda: CONSUMER_CASES[case](theirs))
        with pytest.raises(TypeError):
            CONSUMER_CASES[case](ours)
    finally:
        theirs.close()
        ours.close()


@pytest.mark.parametrize("case", list(TOPIC_PARTITION_CASES))
def test_topic_partition_refuses_a_wrong_type_as_confluent_does(case: str) -> None:
    assert raises_type_error(lambda: TOPIC_PARTITION_CASES[case](confluent_kafka))
    with pytest.raises(TypeError):
        TOPIC_PARTITION_CASES[case](eoslog)


def test_a_delivery_callback_that_is_not_callable_is_refused_at_produce(
    broker: eoslog.Broker,
) -> None:
    # Regression: produce(callback="x") was accepted and failed only at flush().
    producer = broker.producer({"linger.ms": 0})
    for keyword in ("callback", "on_delivery"):
        with pytest.raises(TypeError, match=keyword):
            producer.produce("t", b"v", **{keyword: "x"})
    assert producer.flush(1) == 0
    assert broker.log("t", 0).log_end_offset == 0


def test_scan_refuses_a_topic_name_given_where_a_list_is_expected(broker: eoslog.Broker) -> None:
    # Regression: scan(dir, "live") iterated the characters of the string.
    with pytest.raises(TypeError, match="topics must be a list of str"):
        list(eoslog.scan(broker.path, "t"))


@pytest.mark.parametrize("kind", ["Consumer", "Producer"])
def test_a_config_dict_given_as_the_broker_is_refused(kind: str) -> None:
    # Regression: eoslog.Consumer({"group.id": "g"}) was accepted, the dict taken as the broker.
    with pytest.raises(TypeError, match=f"broker.{kind.lower()}\\(config\\)"):
        getattr(eoslog, kind)({"group.id": "g"})


def test_a_second_broker_in_the_owning_process_is_told_so(broker: eoslog.Broker) -> None:
    # Regression: the lock error said "another process" when the holder was this process.
    with pytest.raises(eoslog.LogDirLockedError, match="locked by this process"):
        eoslog.open(broker.path)
