"""The AdminClient's topic changes (docs/api.md "Drop-in for confluent-kafka"):
create_partitions, incremental_alter_configs and delete_records, in both spellings, with their
effects on the live clients and logs and across a reopen; the argument checks made at the call
compared with confluent-kafka's (its mock cluster answers none of these calls, so only the
checks at the call can be compared)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

import eoslog
from eoslog.confluent import AdminClient, TopicPartition
from eoslog.confluent.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    DeletedRecords,
    NewPartitions,
    NewTopic,
)
from eoslog.errors import KafkaError, KafkaException, RecordTooLargeError
from eoslog.fs import PosixFileSystem
from eoslog.log import checkpoints
from tests.support import logtools

confluent_admin = pytest.importorskip("confluent_kafka.admin")
MOCK = {"bootstrap.servers": "", "test.mock.num.brokers": 1}
SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[eoslog.Broker]:
    with eoslog.open(str(tmp_path / "d"), background=False) as opened:
        yield opened


def error_code(future: Future[Any]) -> int:
    error = future.exception(timeout=0)
    assert isinstance(error, KafkaException), error
    return int(error.args[0].code())


def now_batch(value: bytes = b"x" * 40, count: int = 1) -> bytes:
    return logtools.batch([value] * count, timestamps=int(time.time() * 1000))


def alter(name: str, *entries: tuple[str, str | None, AlterConfigOpType]) -> ConfigResource:
    configs = [ConfigEntry(key, value, incremental_operation=op) for key, value, op in entries]
    return ConfigResource("topic", name, incremental_configs=configs)


# --- create_partitions -------------------------------------------------------------------


def test_create_partitions_adds_partitions_that_survive_a_reopen(tmp_path: Path) -> None:
    path = str(tmp_path / "d")
    with eoslog.open(path, background=False) as broker:
        broker.create_topic("t", 2)
        done = broker.admin().create_partitions([NewPartitions("t", 5)])
        assert done["t"].result() is None
        assert broker.list_topics()["t"].num_partitions == 5
        broker.log("t", 4).append_batch(now_batch())
    assert {name for name in os.listdir(path) if name.startswith("t-")} == {
        f"t-{p}" for p in range(5)
    }
    with eoslog.open(path, background=False) as broker:
        assert broker.list_topics()["t"].num_partitions == 5
        assert broker.log("t", 4).log_end_offset == 1


def test_the_confluent_spelling_adds_partitions_too(tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": f"eoslog://{tmp_path}"})
    admin.create_topics([NewTopic("t", 1)])
    assert admin.create_partitions([NewPartitions("t", 3)])["t"].result() is None
    assert admin.list_topics().topics["t"].partitions.keys() == {0, 1, 2}
    admin.close()


def test_create_partitions_refuses_as_kafka_does_and_changes_nothing(
    broker: eoslog.Broker,
) -> None:
    broker.create_topic("t", 3)
    admin = broker.admin()
    same = admin.create_partitions([NewPartitions("t", 3), NewPartitions("zz", 4)])
    assert error_code(same["t"]) == KafkaError.INVALID_PARTITIONS
    assert error_code(same["zz"]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    fewer = admin.create_partitions([NewPartitions("t", 2)])
    assert error_code(fewer["t"]) == KafkaError.INVALID_PARTITIONS
    internal = admin.create_partitions([NewPartitions("__consumer_offsets", 9)])
    assert error_code(internal["__consumer_offsets"]) == KafkaError.TOPIC_EXCEPTION
    wrong_count = admin.create_partitions([NewPartitions("t", 5, replica_assignment=[[0]])])
    assert error_code(wrong_count["t"]) == KafkaError.INVALID_REPLICA_ASSIGNMENT
    other_node = admin.create_partitions([NewPartitions("t", 4, replica_assignment=[[1]])])
    assert error_code(other_node["t"]) == KafkaError.INVALID_REPLICA_ASSIGNMENT
    twice = admin.create_partitions([NewPartitions("t", 4), NewPartitions("t", 5)])
    assert error_code(twice["t"]) == KafkaError.INVALID_REQUEST
    checked = admin.create_partitions([NewPartitions("t", 6)], validate_only=True)
    assert checked["t"].result() is None
    assert broker.list_topics()["t"].num_partitions == 3
    assigned = admin.create_partitions([NewPartitions("t", 4, replica_assignment=[[0]])])
    assert assigned["t"].result() is None
    assert broker.list_topics()["t"].num_partitions == 4


def test_a_producer_writes_to_the_new_partitions_at_its_next_call(broker: eoslog.Broker) -> None:
    broker.create_topic("t", 1)
    producer = broker.producer({"linger.ms": 0})
    producer.produce("t", b"before", partition=0)
    with pytest.raises(KafkaException):
        producer.produce("t", b"early", partition=2)
    broker.create_partitions("t", 3)
    errors: list[Any] = []
    producer.produce("t", b"after", partition=2, on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(10) == 0
    assert errors == [None]
    assert broker.log("t", 2).log_end_offset == 1
    producer.close()


def test_a_subscribed_group_rebalances_onto_the_new_partitions(broker: eoslog.Broker) -> None:
    broker.create_topic("t", 1)
    consumer = broker.consumer({"group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["t"])
    deadline = time.monotonic() + 30
    while len(consumer.assignment()) != 1:
        assert time.monotonic() < deadline, "never assigned"
        consumer.poll(0.05)
    broker.create_partitions("t", 3)
    for partition in range(3):
        broker.log("t", partition).append_batch(now_batch(b"%d" % partition))
    seen: set[int] = set()
    while len(seen) < 3:
        assert time.monotonic() < deadline, f"only {seen} consumed"
        message = consumer.poll(0.05)
        if message is not None and message.error() is None:
            seen.add(message.partition())  # type: ignore[arg-type]
    assert {tp.partition for tp in consumer.assignment()} == {0, 1, 2}
    consumer.close()


def test_a_partition_directory_past_the_count_is_ignored_then_replaced(tmp_path: Path) -> None:
    # What a crash between the new directories and eoslog.meta's rename leaves.
    path = str(tmp_path / "d")
    with eoslog.open(path, background=False) as broker:
        broker.create_topic("t", 1)
    os.mkdir(os.path.join(path, "t-1"))
    with open(os.path.join(path, "t-1", "junk"), "wb") as file:
        file.write(b"left by a crash")
    with eoslog.open(path, background=False) as broker:
        assert broker.list_topics()["t"].num_partitions == 1
        broker.create_partitions("t", 2)
        assert os.listdir(os.path.join(path, "t-1")).count("junk") == 0
        assert broker.log("t", 1).log_end_offset == 0


# --- incremental_alter_configs -------------------------------------------------------------


def test_alter_configs_sets_and_deletes_and_describe_configs_shows_the_source(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "d")
    with eoslog.open(path, background=False) as broker:
        broker.create_topic("t", 1, {"segment.ms": 5000})
        admin = broker.admin()
        resource = alter("t", ("retention.ms", "1000", SET), ("segment.ms", None, DELETE))
        assert admin.incremental_alter_configs([resource])[resource].result() is None
    with eoslog.open(path, background=False) as broker:
        key = ConfigResource("topic", "t")
        entries = broker.admin().describe_configs([key])[key].result()
        assert entries["retention.ms"].value == "1000"
        assert entries["retention.ms"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
        assert entries["segment.ms"].value == str(7 * 24 * 3600 * 1000)
        assert entries["segment.ms"].source is ConfigSource.DEFAULT_CONFIG
        assert broker.log("t", 0).config.retention_ms == 1000


def test_alter_configs_refuses_bad_changes_and_applies_none_of_a_resource(
    broker: eoslog.Broker,
) -> None:
    broker.create_topic("t", 1)
    admin = broker.admin()
    bad_value = alter("t", ("retention.ms", "5", SET), ("segment.bytes", "abc", SET))
    assert error_code(admin.incremental_alter_configs([bad_value])[bad_value]) == (
        KafkaError.INVALID_CONFIG
    )
    unknown = alter("t", ("no.such.key", "1", SET))
    assert error_code(admin.incremental_alter_configs([unknown])[unknown]) == (
        KafkaError.INVALID_CONFIG
    )
    appended = alter("t", ("retention.ms", "1", AlterConfigOpType.APPEND))
    assert error_code(admin.incremental_alter_configs([appended])[appended]) == (
        KafkaError.INVALID_CONFIG
    )
    missing = alter("zz", ("retention.ms", "1", SET))
    assert error_code(admin.incremental_alter_configs([missing])[missing]) == (
        KafkaError.UNKNOWN_TOPIC_OR_PART
    )
    node = ConfigResource("broker", "0", incremental_configs=[ConfigEntry("num.partitions", "3")])
    node.incremental_configs[0].incremental_operation = SET
    assert error_code(admin.incremental_alter_configs([node])[node]) == KafkaError.INVALID_REQUEST
    twice = admin.incremental_alter_configs([unknown, alter("t", ("retention.ms", "1", SET))])
    assert {error_code(future) for future in twice.values()} == {KafkaError._INVALID_ARG}
    checked = alter("t", ("retention.ms", "9", SET))
    assert admin.incremental_alter_configs([checked], validate_only=True)[checked].result() is None
    assert broker.topic_metadata("t").config == {}
    assert broker.log("t", 0).config.retention_ms == 7 * 24 * 3600 * 1000


def test_a_lower_max_message_bytes_refuses_the_next_append(broker: eoslog.Broker) -> None:
    broker.create_topic("t", 1)
    log = broker.log("t", 0)
    log.append_batch(now_batch(b"x" * 500))
    broker.alter_topic_config("t", {"max.message.bytes": 200})
    with pytest.raises(RecordTooLargeError):
        log.append_batch(now_batch(b"x" * 500))
    log.append_batch(now_batch(b"x" * 10))


def test_a_smaller_segment_bytes_rolls_at_the_next_append(broker: eoslog.Broker) -> None:
    broker.create_topic("t", 1)
    log = broker.log("t", 0)
    for _ in range(3):
        log.append_batch(now_batch())
    assert len(log.segments) == 1
    broker.alter_topic_config("t", {"segment.bytes": 200})
    for _ in range(4):
        log.append_batch(now_batch())
    assert len(log.segments) >= 3


def test_a_shorter_retention_deletes_at_the_next_maintenance(tmp_path: Path) -> None:
    clock = [1_700_000_000_000]
    with eoslog.open(str(tmp_path), background=False, clock_ms=lambda: clock[0]) as broker:
        broker.create_topic("t", 1, {"segment.bytes": 200})
        log = broker.log("t", 0)
        for _ in range(6):
            log.append_batch(logtools.batch([b"x" * 40], timestamps=clock[0]))
        clock[0] += 60_000
        broker.run_maintenance()
        assert log.log_start_offset == 0
        broker.alter_topic_config("t", {"retention.ms": 1000})
        broker.run_maintenance()
        assert log.log_start_offset > 0


# --- delete_records ----------------------------------------------------------------------


def test_delete_records_moves_the_log_start_durably_and_deletes_whole_segments(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "d")
    with eoslog.open(path, background=False) as broker:
        broker.create_topic("t", 1, {"segment.bytes": 400})
        log = broker.log("t", 0)
        for _ in range(10):
            log.append_batch(now_batch(count=2))  # two records a batch, 20 in all
        bases = [segment.base_offset for segment in log.segments]
        assert len(bases) > 2
        inside = bases[1] + 1  # inside the second segment
        done = broker.admin().delete_records([TopicPartition("t", 0, inside)])
        result = done[TopicPartition("t", 0)].result()
        assert isinstance(result, DeletedRecords) and result.low_watermark == inside
        # Durable before the answer: the checkpoint already says so.
        stored = checkpoints.read_offsets(
            PosixFileSystem(), os.path.join(path, checkpoints.LOG_START_OFFSET_FILE)
        )
        assert stored[("t", 0)] == inside
        assert log.segments[0].base_offset == bases[1]
        with pytest.raises(eoslog.OffsetOutOfRangeError):
            log.read(inside - 1)
    with eoslog.open(path, background=False) as broker:
        assert broker.log("t", 0).log_start_offset == inside
        earliest = broker.consumer({"group.id": "g", "auto.offset.reset": "earliest"})
        earliest.assign([TopicPartition("t", 0, 0)])
        offsets = []
        while messages := earliest.consume(100, timeout=0.5):
            offsets += [message.offset() for message in messages]
        assert offsets == list(range(inside, 20))
        earliest.close()


def test_delete_records_to_offset_end_empties_and_past_the_end_is_out_of_range(
    broker: eoslog.Broker,
) -> None:
    broker.create_topic("t", 2)
    log = broker.log("t", 0)
    for _ in range(3):
        log.append_batch(now_batch())
    admin = broker.admin()
    past = admin.delete_records([TopicPartition("t", 0, 4), TopicPartition("zz", 0, 0)])
    assert error_code(past[TopicPartition("t", 0)]) == KafkaError.OFFSET_OUT_OF_RANGE
    assert error_code(past[TopicPartition("zz", 0)]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert log.log_start_offset == 0
    internal = admin.delete_records([TopicPartition("__consumer_offsets", 0, 0)])
    assert error_code(internal[TopicPartition("__consumer_offsets", 0)]) == (
        KafkaError.TOPIC_EXCEPTION
    )
    everything = admin.delete_records([TopicPartition("t", 0, -1)])
    assert everything[TopicPartition("t", 0)].result().low_watermark == 3
    lower = admin.delete_records([TopicPartition("t", 0, 1)])
    assert lower[TopicPartition("t", 0)].result().low_watermark == 3
    twice = admin.delete_records([TopicPartition("t", 0, 1), TopicPartition("t", 1, 0)] * 2)
    assert {error_code(future) for future in twice.values()} == {KafkaError._INVALID_ARG}
    assert admin.delete_records([]) == {}


def test_read_committed_keeps_the_lso_at_or_above_the_new_log_start(
    broker: eoslog.Broker,
) -> None:
    broker.create_topic("t", 1)
    log = broker.log("t", 0)
    for _ in range(4):
        log.append_batch(now_batch())
    broker.delete_records("t", 0, 2)
    assert log.last_stable_offset == log.high_watermark == 4
    assert log.read(2, isolation_level="read_committed").log_start_offset == 2


# --- the checks at the call, beside confluent's -----------------------------------------


def bad_calls(tp_class: Any, admin_module: Any) -> list[tuple[str, Any]]:
    entry = admin_module.ConfigEntry
    resource = admin_module.ConfigResource
    return [
        ("delete_records str", lambda a: a.delete_records("t")),
        ("delete_records item", lambda a: a.delete_records(["t"])),
        ("delete_records negative", lambda a: a.delete_records([tp_class("t", -1, 0)])),
        ("delete_records keyword", lambda a: a.delete_records([tp_class("t", 0, 0)], foo=1)),
        (
            "delete_records timeout",
            lambda a: a.delete_records([tp_class("t", 0, 0)], request_timeout="x"),
        ),
        (
            "alter without operation",
            lambda a: a.incremental_alter_configs(
                [resource("topic", "t", incremental_configs=[entry("retention.ms", "1")])]
            ),
        ),
        (
            "alter SET without value",
            lambda a: a.incremental_alter_configs(
                [
                    resource(
                        "topic",
                        "t",
                        incremental_configs=[
                            entry("retention.ms", None, incremental_operation=SET_OF(admin_module))
                        ],
                    )
                ]
            ),
        ),
        (
            "create_partitions validate_only",
            lambda a: a.create_partitions([admin_module.NewPartitions("t", 3)], validate_only="x"),
        ),
        (
            "create_partitions assignment",
            lambda a: a.create_partitions(
                [admin_module.NewPartitions("t", 1, replica_assignment=[[0], [0]])]
            ),
        ),
    ]


def SET_OF(admin_module: Any) -> Any:
    return admin_module.AlterConfigOpType.SET


def test_bad_arguments_raise_at_the_call_as_confluent_raises_them(broker: eoslog.Broker) -> None:
    import confluent_kafka

    from eoslog.confluent import admin as ours_module

    theirs_admin = confluent_admin.AdminClient(MOCK)
    theirs = bad_calls(confluent_kafka.TopicPartition, confluent_admin)
    ours = bad_calls(TopicPartition, ours_module)
    for (label, their_call), (_, our_call) in zip(theirs, ours, strict=True):
        with pytest.raises(Exception) as their_error:
            their_call(theirs_admin)
        with pytest.raises(Exception) as our_error:
            our_call(broker.admin())
        assert type(our_error.value) is type(their_error.value), label
        if label not in ("delete_records keyword", "delete_records timeout"):
            assert str(our_error.value) == str(their_error.value), label
