"""The consumer's offset store, as librdkafka's (docs/api.md "Consumer";
eoslog.client.offset_store): enable.auto.offset.store, store_offsets(), and commit() and
auto-commit committing the stored offsets."""

from __future__ import annotations

from typing import Any

import pytest

import eoslog
from eoslog import TopicPartition
from eoslog.errors import InvalidConfigError, KafkaError, KafkaException
from tests.support import logtools
from tests.support.logtools import OpenBroker

TOPIC = "t"
GROUP = "g"


def tp(partition: int, offset: int = eoslog.OFFSET_INVALID) -> TopicPartition:
    return TopicPartition(TOPIC, partition, offset)


def make_broker(open_broker: OpenBroker, records: int = 6) -> eoslog.Broker:
    broker = open_broker("none")
    broker.create_topic(TOPIC, 2)
    producer = broker.producer({})
    for i in range(records):
        for partition in (0, 1):
            producer.produce(TOPIC, b"%d" % i, partition=partition)
    producer.flush()
    producer.close()
    return broker


def consumer_of(broker: eoslog.Broker, **config: Any) -> eoslog.Consumer:
    settings: dict[str, object] = {
        "group.id": GROUP,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    settings.update({key.replace("_", "."): value for key, value in config.items()})
    return broker.consumer(settings)


def committed(broker: eoslog.Broker, partition: int = 0) -> TopicPartition:
    reader = consumer_of(broker)
    found = reader.committed([tp(partition)])[0]
    reader.close()
    return found


def code_of(raised: pytest.ExceptionInfo[KafkaException]) -> int:
    return int(raised.value.args[0].code())


def count_commits(broker: eoslog.Broker, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one at each offset commit the group coordinator takes."""
    calls: list[int] = []
    real = broker.groups.commit_offsets

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(broker.groups, "commit_offsets", counted)
    return calls


# --- enable.auto.offset.store (the default) ----------------------------------------------------


def test_poll_stores_each_delivered_message_and_commit_commits_it(
    open_broker: OpenBroker,
) -> None:
    broker = make_broker(open_broker)
    consumer = consumer_of(broker)
    consumer.assign([tp(0, 0), tp(1, 0)])
    taken = consumer.consume(3, timeout=0)
    assert [(m.partition(), m.offset()) for m in taken] == [(0, 0), (0, 1), (0, 2)]
    assert consumer.commit() == [tp(0, 3)]
    assert committed(broker).offset == 3
    assert committed(broker, 1).offset == eoslog.OFFSET_INVALID  # nothing delivered from it


def test_consume_arrow_stores_what_it_delivers(open_broker: OpenBroker) -> None:
    broker = make_broker(open_broker)
    consumer = consumer_of(broker)
    consumer.assign([tp(1, 2)])
    assert consumer.consume_arrow(3, timeout=0).num_rows == 3
    assert [t.offset for t in consumer.commit() or []] == [5]


def test_a_commit_goes_past_a_transaction_s_commit_marker(open_broker: OpenBroker) -> None:
    # librdkafka's too (checked on its mock cluster): the store follows the position, which
    # moves past the control batch that ends the transaction's records.
    broker = open_broker("none")
    broker.create_topic(TOPIC, 1)
    producer = broker.producer({"transactional.id": "tx"})
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(3):
        producer.produce(TOPIC, b"%d" % i, partition=0)
    producer.commit_transaction()
    producer.close()
    consumer = consumer_of(broker)
    consumer.assign([tp(0, 0)])
    assert [m.offset() for m in consumer.consume(10, timeout=0)] == [0, 1, 2]
    assert consumer.commit() == [tp(0, 4)]
    assert consumer.position([tp(0)])[0].offset == 4


def test_a_seek_stores_nothing_so_commit_commits_what_was_delivered(
    open_broker: OpenBroker,
) -> None:
    broker = make_broker(open_broker)
    consumer = consumer_of(broker)
    consumer.assign([tp(0, 0)])
    consumer.consume(2, timeout=0)
    consumer.seek(tp(0, 5))
    assert consumer.commit() == [tp(0, 2)] and committed(broker).offset == 2


def test_commit_right_after_assign_has_no_offset_to_commit(open_broker: OpenBroker) -> None:
    broker = make_broker(open_broker)
    consumer = consumer_of(broker)
    consumer.assign([tp(0, 4)])
    with pytest.raises(KafkaException) as raised:
        consumer.commit()
    assert code_of(raised) == KafkaError._NO_OFFSET
    # As confluent's: an asynchronous commit reports nothing to the caller.
    assert consumer.commit(asynchronous=True) is None
    assert committed(broker).offset == eoslog.OFFSET_INVALID


def test_a_commit_with_nothing_new_writes_nothing_and_reports_the_stored_offsets(
    open_broker: OpenBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = make_broker(open_broker)
    consumer = consumer_of(broker)
    consumer.assign([tp(0, 0), tp(1, 0)])
    consumer.consume(2, timeout=0)
    commits = count_commits(broker, monkeypatch)
    assert consumer.commit() == [tp(0, 2)] and len(commits) == 1
    assert consumer.commit() == [tp(0, 2)] and len(commits) == 1  # an idle loop's commit
    consumer.consume(100, timeout=0)
    assert consumer.commit() == [tp(0, 6), tp(1, 6)] and len(commits) == 2


def test_commit_of_explicit_offsets_counts_as_committing_the_stored_ones(
    open_broker: OpenBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = make_broker(open_broker)
    consumer = consumer_of(broker)
    consumer.assign([tp(0, 0)])
    message = consumer.consume(2, timeout=0)[-1]
    consumer.commit(message=message)
    commits = count_commits(broker, monkeypatch)
    assert consumer.commit() == [tp(0, 2)] and commits == []


def test_commit_takes_a_message_or_offsets_not_both(open_broker: OpenBroker) -> None:
    broker = make_broker(open_broker)
    consumer = consumer_of(broker)
    consumer.assign([tp(0, 0)])
    message = consumer.consume(1, timeout=0)[0]
    with pytest.raises(ValueError, match="mutually exclusive"):
        consumer.commit(message=message, offsets=[tp(0, 1)])


# --- store_offsets -----------------------------------------------------------------------------


def test_without_auto_store_only_store_offsets_stores(open_broker: OpenBroker) -> None:
    broker = make_broker(open_broker)
    consumer = consumer_of(broker, enable_auto_offset_store=False)
    consumer.assign([tp(0, 0)])
    first, second = consumer.consume(2, timeout=0)
    with pytest.raises(KafkaException) as raised:
        consumer.commit()
    assert code_of(raised) == KafkaError._NO_OFFSET
    consumer.store_offsets(message=first)
    assert consumer.commit() == [tp(0, 1)]
    consumer.store_offsets(second)
    assert consumer.commit() == [tp(0, 2)] and committed(broker).offset == 2


def test_stored_offsets_carry_their_metadata_to_the_commit(open_broker: OpenBroker) -> None:
    broker = make_broker(open_broker)
    consumer = consumer_of(broker, enable_auto_offset_store="false")
    consumer.assign([tp(0, 0)])
    consumer.store_offsets(offsets=[tp(0, 4)])
    consumer.store_offsets(offsets=[TopicPartition(TOPIC, 0, 5, "checkpoint-7")])
    assert [(t.offset, t.metadata) for t in consumer.commit() or []] == [(5, "checkpoint-7")]
    found = committed(broker)
    assert (found.offset, found.metadata) == (5, "checkpoint-7")


def test_a_logical_offset_clears_the_stored_one(open_broker: OpenBroker) -> None:
    broker = make_broker(open_broker)
    consumer = consumer_of(broker, enable_auto_offset_store=False)
    consumer.assign([tp(0, 0)])
    consumer.store_offsets(offsets=[tp(0, 3)])
    consumer.store_offsets(offsets=[tp(0, eoslog.OFFSET_BEGINNING)])
    with pytest.raises(KafkaException) as raised:
        consumer.commit()
    assert code_of(raised) == KafkaError._NO_OFFSET


def test_store_offsets_is_refused_while_the_store_is_automatic(open_broker: OpenBroker) -> None:
    broker = make_broker(open_broker)
    consumer = consumer_of(broker)
    consumer.assign([tp(0, 0)])
    message = consumer.consume(1, timeout=0)[0]
    for call in ({"message": message}, {"offsets": [tp(0, 1)]}):
        with pytest.raises(KafkaException) as raised:
            consumer.store_offsets(**call)  # type: ignore[arg-type]
        assert code_of(raised) == KafkaError._INVALID_ARG


def test_store_offsets_checks_its_arguments_as_confluent_does(open_broker: OpenBroker) -> None:
    broker = make_broker(open_broker)
    consumer = consumer_of(broker, enable_auto_offset_store=False)
    consumer.assign([tp(0, 0)])
    message = consumer.consume(1, timeout=0)[0]
    with pytest.raises(ValueError, match="expected either message or offsets"):
        consumer.store_offsets()
    with pytest.raises(ValueError, match="mutually exclusive"):
        consumer.store_offsets(message=message, offsets=[tp(0, 1)])
    with pytest.raises(TypeError, match="message must be a Message, not str"):
        consumer.store_offsets(message="m")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a list of TopicPartition"):
        consumer.store_offsets(offsets=tp(0, 1))  # type: ignore[arg-type]
    consumer.close()
    with pytest.raises(RuntimeError):
        consumer.store_offsets(offsets=[tp(0, 1)])


def test_store_offsets_stores_what_it_can_and_raises_only_when_it_stored_nothing(
    open_broker: OpenBroker,
) -> None:
    # librdkafka's rd_kafka_offsets_store: per-partition errors, the last one raised when
    # every partition failed.
    broker = make_broker(open_broker)
    consumer = consumer_of(broker, enable_auto_offset_store=False)
    consumer.assign([tp(0, 0)])
    with pytest.raises(KafkaException) as raised:
        consumer.store_offsets(offsets=[tp(1, 2)])  # exists, not assigned
    assert code_of(raised) == KafkaError._STATE
    with pytest.raises(KafkaException) as raised:
        consumer.store_offsets(offsets=[tp(1, 2), TopicPartition("missing", 0, 1)])
    assert code_of(raised) == KafkaError._UNKNOWN_PARTITION
    consumer.store_offsets(offsets=[tp(1, 2), tp(0, 4)])
    consumer.store_offsets(offsets=[tp(1, eoslog.OFFSET_END)])  # logical: accepted, no effect
    assert consumer.commit() == [tp(0, 4)]


def test_stored_offsets_go_with_their_partition(open_broker: OpenBroker) -> None:
    broker = make_broker(open_broker)
    consumer = consumer_of(broker)
    consumer.assign([tp(0, 0)])
    consumer.consume(2, timeout=0)
    consumer.unassign()
    consumer.assign([tp(0, 0)])
    with pytest.raises(KafkaException) as raised:
        consumer.commit()
    assert code_of(raised) == KafkaError._NO_OFFSET


# --- auto-commit -------------------------------------------------------------------------------


def test_auto_commit_commits_the_stored_offsets_at_the_interval_and_at_close(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = make_broker(open_broker)
    consumer = consumer_of(broker, enable_auto_commit=True, auto_commit_interval_ms=1_000)
    consumer.subscribe([TOPIC])
    (first,) = consumer.consume(1, timeout=1)  # joins and takes a first record
    assert (first.partition(), first.offset()) == (0, 0)
    consumer.pause([tp(1)])
    consumer.seek(tp(0, 4))  # stores nothing
    clock.advance(1_000)
    consumer.consume(1, timeout=0)  # commits the stored offset, then takes offset 4
    assert committed(broker).offset == 1
    consumer.close()
    assert committed(broker).offset == 5


def test_auto_commit_without_auto_store_commits_only_what_was_stored(
    open_broker: OpenBroker,
) -> None:
    broker = make_broker(open_broker)
    consumer = consumer_of(broker, enable_auto_commit=True, enable_auto_offset_store=False)
    consumer.assign([tp(0, 0), tp(1, 0)])
    consumer.consume(100, timeout=0)
    consumer.store_offsets(offsets=[tp(1, 3)])
    consumer.close()
    assert committed(broker).offset == eoslog.OFFSET_INVALID
    assert committed(broker, 1).offset == 3


def test_unassign_auto_commits_the_partitions_it_removes(open_broker: OpenBroker) -> None:
    # librdkafka commits the stored offsets of partitions leaving the assignment.
    broker = make_broker(open_broker)
    consumer = consumer_of(broker, enable_auto_commit=True)
    consumer.assign([tp(0, 0), tp(1, 0)])
    assert len(consumer.consume(8, timeout=0)) == 8
    consumer.incremental_unassign([tp(1)])
    assert committed(broker, 1).offset == 2 and committed(broker).offset == eoslog.OFFSET_INVALID
    consumer.unassign()
    assert committed(broker).offset == 6


def test_enable_auto_offset_store_is_a_boolean(open_broker: OpenBroker) -> None:
    broker = make_broker(open_broker)
    assert consumer_of(broker, enable_auto_offset_store="true").config.enable_auto_offset_store
    assert consumer_of(broker).config.enable_auto_offset_store  # librdkafka's default
    with pytest.raises(InvalidConfigError):
        consumer_of(broker, enable_auto_offset_store="yes")
