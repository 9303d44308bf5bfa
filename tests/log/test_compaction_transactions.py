"""Compaction of transactional data (docs/design.md "Compaction", Kafka's rules): records of
aborted transactions are removed and never stand for their key; a read_committed consumer of
the cleaned log sees exactly what it saw before; markers stay while their transaction's data
does; each producer's last batch stays, so its state (epoch, sequence) survives a reopen."""

from __future__ import annotations

import logging
import os

import pytest

import eoslog
from eoslog.client.message import TopicPartition
from eoslog.log.partition import PartitionLog
from tests.log.test_compaction import COMPACT, new_topic
from tests.support import logtools
from tests.support.logtools import OpenBroker


def committed_view(broker: eoslog.Broker) -> list[tuple[int, bytes | None, bytes | None]]:
    consumer = broker.consumer(
        {"group.id": "reader", "isolation.level": "read_committed", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("t", 0, 0)])
    log = broker.log("t", 0)
    got: list[tuple[int, bytes | None, bytes | None]] = []
    while True:
        messages = consumer.consume(100, timeout=1)
        got += [(m.offset(), m.key(), m.value()) for m in messages]
        position = consumer.position([TopicPartition("t", 0)])[0].offset
        if position >= log.last_stable_offset:
            break
    consumer.close()
    return got


def transactions(broker: eoslog.Broker, rounds: int) -> None:
    """Round r: key<k> = r-<k> committed for every k, then key0 = aborted-r aborted."""
    producer = broker.producer({"transactional.id": "tx", "linger.ms": 0})
    producer.init_transactions()
    for round_ in range(rounds):
        producer.begin_transaction()
        for k in range(3):
            producer.produce("t", f"{round_}-{k}".encode(), key=f"key{k}".encode())
        producer.commit_transaction()
        producer.begin_transaction()
        producer.produce("t", f"aborted-{round_}".encode(), key=b"key0")
        producer.abort_transaction()
    producer.close()


def raw_values(log: PartitionLog) -> list[bytes | None]:
    return [record.value for record in logtools.read_all(log)]


def test_aborted_records_go_and_read_committed_sees_the_same_latest_values(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    log = new_topic(broker)
    transactions(broker, 6)
    log.roll()
    before = committed_view(broker)
    latest = {key: (offset, value) for offset, key, value in before}
    assert any(v is not None and v.startswith(b"aborted") for v in raw_values(log))
    broker.run_maintenance()
    assert log.cleaned_end > 0
    assert not any(v is not None and v.startswith(b"aborted") for v in raw_values(log))
    after = committed_view(broker)
    assert after == sorted((offset, key, value) for key, (offset, value) in latest.items())


def test_a_producers_last_batch_stays_empty_so_its_state_survives_a_reopen(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    log = new_topic(broker, {**COMPACT, "segment.bytes": 300})
    first = broker.producer({"enable.idempotence": True, "linger.ms": 0})
    for round_ in range(3):
        first.produce("t", b"first-%d" % round_, key=b"k")
    first.flush()
    second = broker.producer({"enable.idempotence": True, "linger.ms": 0})
    second.produce("t", b"second", key=b"k")  # supersedes every record of the first
    second.flush()
    log.roll()
    before = {p.producer_id: (p.epoch, p.last_sequence) for p in log.active_producers()}
    broker.run_maintenance()
    assert [r.value for r in logtools.read_all(log)] == [b"second"]
    broker.close()
    # Without its snapshots the open rebuilds producer state from the cleaned log alone:
    # the first producer's emptied last batch still names its epoch and sequence.
    for path in logtools.partition_files(log.directory, ".snapshot"):
        os.unlink(path)
    reopened = open_broker()
    after = {
        p.producer_id: (p.epoch, p.last_sequence) for p in reopened.log("t", 0).active_producers()
    }
    assert after == before
    assert len(after) == 2


def test_transactions_go_on_after_cleaning_and_a_reopen(open_broker: OpenBroker) -> None:
    broker = open_broker()
    log = new_topic(broker, {**COMPACT, "segment.bytes": 300})
    transactions(broker, 4)
    log.roll()
    broker.run_maintenance()
    expected = committed_view(broker)
    broker.close()
    reopened = open_broker()
    assert committed_view(reopened) == expected
    transactions(reopened, 1)  # the transactional id goes on where it stopped
    assert committed_view(reopened)[-1][2] == b"0-2"


def test_markers_whose_data_the_cleaner_removed_raise_no_warning_at_a_rebuild(
    open_broker: OpenBroker, caplog: pytest.LogCaptureFixture
) -> None:
    broker = open_broker()
    log = new_topic(broker, {**COMPACT, "segment.bytes": 300})
    transactions(broker, 4)
    log.roll()
    broker.run_maintenance()
    broker.close()
    for path in logtools.partition_files(log.directory, ".snapshot"):
        os.unlink(path)  # producer state rebuilt from the cleaned log alone
    with caplog.at_level(logging.INFO, logger="eoslog.log.producer_state"):
        open_broker()
    orphans = [r for r in caplog.records if "ends no open transaction" in r.getMessage()]
    assert orphans, "the cleaned log has markers without data"
    assert all(r.levelno == logging.INFO for r in orphans)
