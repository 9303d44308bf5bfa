"""The internal topics are compacted (docs/coordinator.md §2.3): `__transaction_state` and
`__consumer_offsets` are `compact`, the cleaner keeps each transactional id's and each group
offset's latest record, and deletes segments it left empty, so the logs follow the live state
while a reopen, clean or after a crash, loads the same transactions and committed offsets."""

from __future__ import annotations

import os
import random
import shutil
from typing import Any

import eoslog
from eoslog.broker import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from eoslog.client.admin_types import ConsumerGroupTopicPartitions
from tests.support import logtools

# Tiny internal segments, so that a few hundred transactions roll them many times.
CONFIG = {"transaction.state.log.segment.bytes": 2048, "offsets.topic.segment.bytes": 2048}
IDS = 4
ROUNDS = 60
TOPIC = "t"


def _state(broker: eoslog.Broker) -> dict[str, Any]:
    """What a reopen must load again: every transactional id's description and every
    group's committed offsets."""
    admin = broker.admin()
    ids = sorted(listing.transactional_id for listing in admin.list_transactions().result())
    described = admin.describe_transactions(ids) if ids else {}
    transactions = {
        tid: (d.state, d.producer_id, d.producer_epoch, sorted(map(str, d.topic_partitions)))
        for tid, future in described.items()
        for d in [future.result()]
    }
    offsets = {}
    for group in ("copier", "plain"):
        request = [ConsumerGroupTopicPartitions(group)]
        (future,) = admin.list_consumer_group_offsets(request).values()
        listed = future.result().topic_partitions
        offsets[group] = sorted((tp.topic, tp.partition, tp.offset) for tp in listed)
    return {"transactions": transactions, "offsets": offsets}


def _sizes(broker: eoslog.Broker) -> dict[str, tuple[int, int]]:
    """Per internal topic: (segments, bytes)."""
    out = {}
    for topic in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC):
        segments = broker.log(topic, 0).segments
        out[topic] = (len(segments), sum(segment.size for segment in segments))
    return out


def _history(broker: eoslog.Broker, rng: random.Random) -> list[eoslog.Producer]:
    """The workload; returns its producers, the first with its transaction still open (the
    caller keeps them: a producer collected with an open transaction aborts it)."""
    broker.create_topic(TOPIC, 2)
    producers = []
    for number in range(IDS):
        producer = broker.producer({"transactional.id": f"id-{number}", "linger.ms": 0})
        producer.init_transactions()
        producers.append(producer)
    plain = broker.consumer({"group.id": "plain", "enable.auto.commit": False})
    copier = broker.consumer({"group.id": "copier", "enable.auto.commit": False})
    for round_ in range(ROUNDS):
        producer = producers[round_ % IDS]
        producer.begin_transaction()
        partition = rng.randrange(2)
        producer.produce(TOPIC, b"%d" % round_, partition=partition)
        offsets = [eoslog.TopicPartition(TOPIC, partition, round_)]
        producer.send_offsets_to_transaction(offsets, copier.consumer_group_metadata())
        if rng.random() < 0.25:
            producer.abort_transaction()
        else:
            producer.commit_transaction()
        plain.commit(offsets=[eoslog.TopicPartition(TOPIC, round_ % 2, round_)], asynchronous=False)
    # One transaction left open: its Ongoing state and pending offsets must survive too.
    producers[0].begin_transaction()
    producers[0].produce(TOPIC, b"open", partition=0)
    producers[0].flush()
    plain.close()
    copier.close()
    return producers


def test_cleaning_the_internal_topics_keeps_every_transaction_and_committed_offset(
    tmp_path: os.PathLike[str],
) -> None:
    path = os.path.join(tmp_path, "data")
    broker = eoslog.open(path, config=CONFIG, background=False)
    producers = _history(broker, logtools.seeded(7))
    before, sizes = _state(broker), _sizes(broker)
    broker.run_maintenance()
    cleaned = _sizes(broker)
    for topic in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC):
        assert broker.log(topic, 0).config.compact
        assert cleaned[topic][1] < sizes[topic][1] / 2, (topic, sizes, cleaned)
    # The segments cleaning emptied are gone. (The offsets log keeps its transactions' COMMIT
    # markers until delete.retention.ms after the clean, as Kafka does, so its segments stay.)
    topic = TRANSACTION_STATE_TOPIC
    assert cleaned[topic][0] < sizes[topic][0] / 2, (topic, sizes, cleaned)
    assert _state(broker) == before
    crashed = os.path.join(tmp_path, "crashed")  # as a kill -9 leaves it: never closed
    shutil.copytree(path, crashed, ignore=shutil.ignore_patterns(".lock"))
    for producer in producers:
        producer.close()  # the open transaction aborts
    at_close = _state(broker)
    broker.close()
    for reopened_path, expected in ((path, at_close), (crashed, before)):
        with eoslog.open(reopened_path, config=CONFIG, background=False) as reopened:
            assert _state(reopened) == expected, reopened_path
            # The ids go on from the producer ids and epochs the compacted log holds.
            producer = reopened.producer({"transactional.id": "id-1"})
            producer.init_transactions()
            producer.begin_transaction()
            producer.produce(TOPIC, b"after", partition=1)
            producer.commit_transaction()
            producer.close()


def test_the_internal_topics_are_compact_whatever_the_broker_and_meta_say(
    tmp_path: os.PathLike[str],
) -> None:
    config = {**CONFIG, "log.cleanup.policy": "delete", "log.retention.bytes": 1}
    with eoslog.open(os.fspath(tmp_path), config=config, background=False) as broker:
        for topic in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC):
            log_config = broker.log(topic, 0).config
            assert log_config.compact and log_config.retention_bytes == -1
