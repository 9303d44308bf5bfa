"""The idempotent Producer (docs/api.md "Producer"): batching, sequences, retries, partitioning,
delivery reports, threads and configuration."""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from kafka.partitioner.default import murmur2 as kafka_murmur2

import eoslog
from eoslog.client.producer import Producer, next_sequence
from eoslog.errors import (
    InvalidConfigError,
    KafkaError,
    KafkaException,
    OutOfOrderSequenceError,
    ProducerStateError,
    UnknownTopicOrPartitionError,
)
from eoslog.record import layout
from eoslog.record import pycodec as codec
from eoslog.record.compression import CODEC_NAMES
from eoslog.record.pyprimitives import murmur2 as pure_murmur2

NOW_MS = 1_767_225_600_000
# Long enough that no batch closes on linger.ms while a test runs: batches close on size,
# count or flush only, so tests see deterministic batch boundaries.
LINGER_NEVER_MS = 600_000


@pytest.fixture
def broker(tmp_path: Any) -> Iterator[eoslog.Broker]:
    with eoslog.open(
        str(tmp_path / "log"), durability="none", clock_ms=lambda: NOW_MS, background=False
    ) as opened:
        yield opened


def batches_of(broker: eoslog.Broker, topic: str, partition: int = 0) -> list[Any]:
    """(header, records) of every batch in the partition."""
    log = broker.log(topic, partition)
    data = bytes(log.read(0, max_bytes=1 << 30).records)
    return [
        (header, codec.batch_records(data, position))
        for position, header in codec.iter_headers(data)
    ]


def values_of(broker: eoslog.Broker, topic: str, partition: int = 0) -> list[bytes | None]:
    return [r.value for _, records in batches_of(broker, topic, partition) for r in records]


def log_bytes(broker: eoslog.Broker, topic: str, partition: int = 0) -> bytes:
    return bytes(broker.log(topic, partition).read(0, max_bytes=1 << 30).records)


def test_records_land_in_order_with_consecutive_sequences(broker: eoslog.Broker) -> None:
    broker.create_topic("t", 1)
    producer = broker.producer({"batch.num.messages": 7, "linger.ms": LINGER_NEVER_MS})
    for i in range(50):
        producer.produce("t", value=b"v%d" % i)
    assert producer.flush() == 0
    found = batches_of(broker, "t")
    assert values_of(broker, "t") == [b"v%d" % i for i in range(50)]
    assert [len(records) for _, records in found] == [7] * 7 + [1]
    sequence = 0
    for header, records in found:
        assert header.producer_id == producer.producer_id >= 0
        assert header.producer_epoch == 0
        assert header.base_sequence == sequence
        sequence += len(records)


def test_sequences_wrap_at_int32_max_as_kafka_does(broker: eoslog.Broker) -> None:
    assert next_sequence(2**31 - 1, 1) == 0
    assert next_sequence(2**31 - 3, 5) == 2
    broker.create_topic("t", 1)
    producer = broker.producer({"batch.num.messages": 5, "linger.ms": LINGER_NEVER_MS})
    producer.produce("t", value=b"first")
    state = producer._batches.partitions[("t", 0)]
    # A producer unknown to the log may start at any sequence (docs/format.md §8.2).
    state.next_sequence = state.planned_sequence = 2**31 - 3
    for i in range(9):
        producer.produce("t", value=b"%d" % i)
    assert producer.flush() == 0
    headers = [header for header, _ in batches_of(broker, "t")]
    assert [h.base_sequence for h in headers] == [2**31 - 3, 2]


def test_produce_batch_equals_a_produce_loop_byte_for_byte(broker: eoslog.Broker) -> None:
    broker.create_topic("loop", 1)
    broker.create_topic("batch", 1)
    values = [os.urandom(i % 50) if i % 13 else None for i in range(2_500)]
    keys = [b"k%d" % i if i % 3 else None for i in range(2_500)]
    config = {"batch.size": 4096, "linger.ms": LINGER_NEVER_MS}
    looped = broker.producer(config)
    for key, value in zip(keys, values, strict=True):
        looped.produce("loop", value=value, key=key, partition=0)
    looped.flush()
    batched = broker.producer(config)
    batched.produce_batch("batch", values, keys=keys, partition=0)
    loop_batches = batches_of(broker, "loop")
    assert len(loop_batches) > 3
    # Same records, same batch boundaries; only the producer id differs in the headers.
    assert [records for _, records in batches_of(broker, "batch")] == [
        records for _, records in loop_batches
    ]
    strip = _without_producer_ids
    assert strip(log_bytes(broker, "batch")) == strip(log_bytes(broker, "loop"))


def _without_producer_ids(data: bytes) -> bytes:
    """The log bytes with every producer id (and so CRC) zeroed, to compare two producers."""
    out = bytearray(data)
    for position, _header in codec.iter_headers(data):
        out[position + layout.PRODUCER_ID_OFFSET : position + layout.PRODUCER_ID_OFFSET + 8] = (
            bytes(8)
        )
        out[position + layout.CRC_OFFSET : position + layout.CRC_OFFSET + 4] = bytes(4)
    return bytes(out)


@pytest.mark.parametrize("form", ["list", "numpy", "numpy-unicode", "arrow", "arrow-large"])
def test_produce_batch_takes_lists_numpy_and_arrow_arrays(broker: eoslog.Broker, form: str) -> None:
    broker.create_topic("t", 1)
    values = [b"value-%d" % i for i in range(3_000)]
    column: Any = {
        "list": lambda: values,
        "numpy": lambda: np.array(values, dtype="S20"),
        "numpy-unicode": lambda: np.array([v.decode() for v in values]),
        "arrow": lambda: pa.array(values, pa.binary()).slice(0),
        "arrow-large": lambda: pa.chunked_array(
            [pa.array(values[:5], pa.large_binary()), pa.array(values[5:], pa.large_binary())]
        ),
    }[form]()
    producer = broker.producer({"linger.ms": LINGER_NEVER_MS})
    producer.produce_batch("t", column)
    assert values_of(broker, "t") == values


def test_produce_batch_keeps_arrow_nulls_and_slices(broker: eoslog.Broker) -> None:
    broker.create_topic("t", 1)
    array = pa.array([b"a", None, b"", b"dddd", None, b"f"]).slice(1, 4)
    broker.producer().produce_batch("t", array, keys=pa.array(["k1", None, "k3", "k4"]))
    records = [r for _, batch in batches_of(broker, "t") for r in batch]
    assert [(r.key, r.value) for r in records] == [
        (b"k1", None),
        (None, b""),
        (b"k3", b"dddd"),
        (b"k4", None),
    ]


def test_a_retry_of_a_batch_that_landed_returns_the_original_offsets(
    broker: eoslog.Broker,
) -> None:
    broker.create_topic("t", 1)
    log = broker.log("t", 0)
    original = log.append_batch
    sent: list[bytes] = []

    def append_then_lose_the_answer(raw: Any) -> Any:
        # The write happens, then the caller sees a retriable error (a lost response).
        sent.append(bytes(raw))
        info = original(raw)
        if len(sent) == 1:
            raise KafkaException(KafkaError(KafkaError.REQUEST_TIMED_OUT, retriable=True))
        return info

    log.append_batch = append_then_lose_the_answer  # type: ignore[method-assign]
    delivered: list[tuple[Any, int]] = []
    producer = broker.producer({"retry.backoff.ms": 1, "linger.ms": LINGER_NEVER_MS})
    for i in range(3):
        producer.produce(
            "t", value=b"%d" % i, on_delivery=lambda err, msg: delivered.append((err, msg.offset()))
        )
    assert producer.flush() == 0
    assert sent[0] == sent[1]  # the retry sent the same bytes
    assert values_of(broker, "t") == [b"0", b"1", b"2"]  # written once
    assert delivered == [(None, 0), (None, 1), (None, 2)]
    # And the log's own answer to the same raw batch again: the original offsets, a duplicate.
    again = original(sent[0])
    assert (again.base_offset, again.last_offset, again.duplicate) == (0, 2, True)


def test_out_of_order_sequence_is_fatal_and_reported_to_every_message(
    broker: eoslog.Broker,
) -> None:
    broker.create_topic("t", 1)
    producer = broker.producer({"batch.num.messages": 1, "linger.ms": LINGER_NEVER_MS})
    producer.produce("t", value=b"a")
    producer.poll(0)
    state = producer._batches.partitions[("t", 0)]
    state.next_sequence = state.planned_sequence = 5  # a gap the log must refuse
    errors: list[Any] = []
    producer.produce("t", value=b"b", on_delivery=lambda err, msg: errors.append(err))
    with pytest.raises(OutOfOrderSequenceError) as raised:
        producer.flush()
    assert raised.value.error.fatal()
    assert len(errors) == 1 and errors[0].fatal() and errors[0].code() == 45
    with pytest.raises(OutOfOrderSequenceError):
        producer.produce("t", value=b"c")
    assert values_of(broker, "t") == [b"a"]


def test_partition_choice_equals_kafka_python_murmur2(broker: eoslog.Broker) -> None:
    partitions = 7
    broker.create_topic("t", partitions)
    keys = [os.urandom(i % 40) for i in range(3_000)] + [b"", b"a", b"abc", "ключ".encode()]
    expected = [(kafka_murmur2(bytearray(k)) & 0x7FFFFFFF) % partitions for k in keys]
    producer = broker.producer({"linger.ms": LINGER_NEVER_MS})
    landed: dict[bytes, int] = {}
    for key in keys:
        producer.produce(
            "t",
            value=b"",
            key=key,
            on_delivery=lambda e, m: landed.__setitem__(m.key(), m.partition()),
        )
    producer.flush()
    assert [landed[k] for k in keys] == expected
    # The vectorized path agrees, for list and Arrow keys.
    for topic_keys in (keys, pa.array(keys, pa.binary())):
        broker.create_topic(name := f"v{len(broker.list_topics())}", partitions)
        producer.produce_batch(name, [b"x"] * len(keys), keys=topic_keys, partition=-1)
        got = {
            r.key: p for p in range(partitions) for _, rs in batches_of(broker, name, p) for r in rs
        }
        assert [got[k] for k in keys] == expected


def test_native_and_pure_murmur2_agree_with_kafka_python() -> None:
    from eoslog._ext import primitives

    for length in range(0, 70):
        key = os.urandom(length)
        assert primitives.murmur2(key) == pure_murmur2(key)
        assert primitives.murmur2(key) & 0xFFFFFFFF == kafka_murmur2(bytearray(key))


def test_null_keys_stick_to_one_partition_until_its_batch_closes(broker: eoslog.Broker) -> None:
    broker.create_topic("t", 4)
    producer = Producer(broker, {"batch.num.messages": 10, "linger.ms": LINGER_NEVER_MS}, seed=1)
    landed: list[int] = []
    for _ in range(60):
        producer.produce("t", value=b"v", on_delivery=lambda e, m: landed.append(m.partition()))
    producer.flush()
    runs = [landed[i : i + 10] for i in range(0, 60, 10)]
    assert all(len(set(run)) == 1 for run in runs)  # one partition per batch
    assert all(a[0] != b[0] for a, b in itertools.pairwise(runs))  # then moves on


@pytest.mark.parametrize("name", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_decode(broker: eoslog.Broker, name: str) -> None:
    broker.create_topic("t", 1)
    producer = broker.producer({"compression.type": name, "linger.ms": LINGER_NEVER_MS})
    values = [b"compressible " * 5 + b"%d" % i for i in range(500)]
    for value in values:
        producer.produce("t", value=value)
    producer.produce_batch("t", values)
    producer.flush()
    found = batches_of(broker, "t")
    assert all(header.compression == CODEC_NAMES[name] for header, _ in found)
    assert values_of(broker, "t") == values + values


def test_headers_and_timestamps_reach_the_log_and_the_report(broker: eoslog.Broker) -> None:
    broker.create_topic("t", 1)
    # Both records in one batch, closed by flush(): with the default linger.ms (5) a slow
    # moment between the two produce() calls let the linger thread close the first alone, and
    # the second batch, 7 days of timestamps later, rolled a segment this test does not read.
    producer = broker.producer({"linger.ms": 60_000})
    reports: list[Any] = []
    producer.produce(
        "t",
        "text",
        key="key",
        headers={"h1": b"x", "h2": "y"},
        timestamp=1234,
        on_delivery=lambda e, m: reports.append(m),
    )
    producer.produce("t", b"v", headers=[("h", None)], on_delivery=lambda e, m: reports.append(m))
    producer.flush()
    records = [r for _, batch in batches_of(broker, "t") for r in batch]
    assert [(r.key, r.value, list(r.headers), r.timestamp) for r in records] == [
        (b"key", b"text", [("h1", b"x"), ("h2", b"y")], 1234),
        (None, b"v", [("h", None)], NOW_MS),
    ]
    first = reports[0]
    assert (first.topic(), first.partition(), first.offset(), first.error()) == ("t", 0, 0, None)
    assert first.headers() == [("h1", b"x"), ("h2", b"y")]
    assert first.timestamp() == (1, 1234) and first.key() == b"key" and first.value() == b"text"


def test_flush_returns_zero_and_every_callback_fired_exactly_once(broker: eoslog.Broker) -> None:
    broker.create_topic("t", 3)
    producer = broker.producer({"batch.size": 300, "linger.ms": 1})
    seen: list[bytes] = []
    for i in range(1_000):
        producer.produce(
            "t", b"%d" % i, key=b"%d" % (i % 17), on_delivery=lambda e, m: seen.append(m.value())
        )
        if i % 100 == 0:
            producer.poll(0)
    assert len(producer) > 0
    assert producer.flush() == 0
    assert len(producer) == 0
    assert sorted(seen) == sorted(b"%d" % i for i in range(1_000))
    assert producer.poll(0) == 0 and producer.flush() == 0  # nothing fires twice


def test_linger_closes_a_batch_without_poll_or_flush(broker: eoslog.Broker) -> None:
    broker.create_topic("t", 1)
    producer = broker.producer({"linger.ms": 5})
    producer.produce("t", b"alone")
    assert producer.poll(5.0) == 1  # the linger thread appended it; poll served the report
    assert values_of(broker, "t") == [b"alone"]
    producer.close()
    linger_thread = producer._sender._linger_thread
    assert linger_thread is not None and not linger_thread.is_alive()
    with pytest.raises(ProducerStateError):
        producer.produce("t", b"late")


def test_concurrent_produce_from_4_threads_loses_and_duplicates_nothing(
    broker: eoslog.Broker,
) -> None:
    broker.create_topic("t", 3)
    producer = broker.producer({"batch.size": 512, "linger.ms": 2})
    per_thread = 3_000
    delivered: list[bytes] = []

    def work(thread: int) -> None:
        for i in range(per_thread):
            key = None if i % 2 else b"%d" % (i % 11)
            producer.produce(
                "t",
                b"%d-%d" % (thread, i),
                key=key,
                on_delivery=lambda e, m: delivered.append(m.value()),
            )
            if i % 500 == 0:
                producer.poll(0)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert producer.flush() == 0
    expected = sorted(b"%d-%d" % (t, i) for t in range(4) for i in range(per_thread))
    stored = sorted(v for p in range(3) for v in values_of(broker, "t", p))  # type: ignore[type-var]
    assert stored == expected
    assert sorted(delivered) == expected
    for p in range(3):  # per thread, per partition: in produce order
        values = values_of(broker, "t", p)
        for t in range(4):
            mine = [int(v.split(b"-")[1]) for v in values if v and v.startswith(b"%d-" % t)]
            assert mine == sorted(mine)


@pytest.mark.parametrize(
    "config",
    [
        {"no.such.key": 1},
        {"batch.size": 0},
        {"batch.size": "big"},
        {"linger.ms": -1},
        {"compression.type": "brotli"},
        {"acks": 1},
        {"enable.idempotence": "maybe"},
        {"enable.idempotence": False, "transactional.id": "t"},
        {"max.in.flight.requests.per.connection": 6},
        {"on_delivery": 3},
    ],
)
def test_config_errors_are_typed_and_change_nothing(
    broker: eoslog.Broker, config: dict[str, Any]
) -> None:
    meta = broker._next_producer_id_block
    with pytest.raises(InvalidConfigError):
        broker.producer(config)
    assert broker._next_producer_id_block == meta  # no producer id was taken


def test_confluent_keys_and_aliases_are_accepted(broker: eoslog.Broker) -> None:
    producer = broker.producer(
        {
            "bootstrap.servers": "ignored:9092",
            "acks": "all",
            "client.id": "me",
            "queue.buffering.max.ms": 2,
            "compression.codec": "lz4",
            "enable.idempotence": "true",
        }
    )
    assert producer.settings.linger_ms == 2 and producer.settings.client_id == "me"
    plain = broker.producer({"enable.idempotence": False, "acks": 1})
    assert plain.producer_id == -1


def test_unknown_partition_raises_at_produce(broker: eoslog.Broker) -> None:
    broker.create_topic("t", 2)
    producer = broker.producer()
    with pytest.raises(UnknownTopicOrPartitionError):
        producer.produce("t", b"v", partition=2)
    with pytest.raises(UnknownTopicOrPartitionError):
        producer.produce_batch("t", [b"v"], partition=2)
    assert len(producer) == 0


@pytest.mark.parametrize("partition", [2, -2, -100])
def test_partition_outside_the_topic_is_unknown_partition_at_the_call(
    broker: eoslog.Broker, partition: int
) -> None:
    """librdkafka's rule: -1 lets the partitioner choose; any other partition the topic does
    not have is _UNKNOWN_PARTITION at the call, also once the topic's batch is open (the
    native fast path) and for a key (no hash takes a negative partition to a real one)."""
    broker.create_topic("t", 2)
    producer = broker.producer({"linger.ms": 60_000})
    producer.produce("t", b"first", key=b"k")  # opens a batch: the next may take the fast path
    for key in (None, b"k"):
        with pytest.raises(UnknownTopicOrPartitionError) as raised:
            producer.produce("t", b"v", key=key, partition=partition)
        assert raised.value.args[0].code() == KafkaError._UNKNOWN_PARTITION
        assert not raised.value.args[0].retriable()
    with pytest.raises(UnknownTopicOrPartitionError):
        producer.produce_batch("t", [b"v"], partition=partition)
    assert len(producer) == 1
    assert producer.flush(10) == 0


def test_produce_to_an_unknown_topic_creates_it_with_num_partitions(tmp_path: Any) -> None:
    """Kafka's broker creates a topic a producer names (auto.create.topics.enable and the
    producer's allow.auto.create.topics, both true by default) with num.partitions."""
    config = {"num.partitions": 3}
    with eoslog.open(str(tmp_path / "log"), "none", config, background=False) as broker:
        producer = broker.producer({"linger.ms": 0})
        producer.produce("keyed", b"v", key=b"k")
        producer.produce_batch("batched", [b"a", b"b"], partition=-1)
        assert producer.flush() == 0
        topics = broker.list_topics()
        assert topics["keyed"].num_partitions == topics["batched"].num_partitions == 3
        keyed = [values_of(broker, "keyed", partition) for partition in range(3)]
        assert sorted(keyed) == [[], [], [b"v"]]


def test_auto_create_disabled_raises_unknown_topic(tmp_path: Any) -> None:
    """Off at the broker (auto.create.topics.enable) or at the producer
    (allow.auto.create.topics): produce() raises at once and queues nothing."""
    config = {"auto.create.topics.enable": False}
    with eoslog.open(str(tmp_path / "off"), "none", config, background=False) as broker:
        producer = broker.producer()
        with pytest.raises(UnknownTopicOrPartitionError):
            producer.produce("missing", b"v")
        assert len(producer) == 0 and "missing" not in broker.list_topics()
    with eoslog.open(str(tmp_path / "on"), "none", background=False) as broker:
        producer = broker.producer({"allow.auto.create.topics": "false"})
        with pytest.raises(UnknownTopicOrPartitionError):
            producer.produce("missing", b"v")
        with pytest.raises(UnknownTopicOrPartitionError):
            producer.produce_batch("missing", [b"v"])
        assert len(producer) == 0 and "missing" not in broker.list_topics()


def test_produce_to_an_invalid_topic_name_raises_invalid_topic(broker: eoslog.Broker) -> None:
    producer = broker.producer()
    with pytest.raises(eoslog.InvalidTopicError):
        producer.produce("no spaces", b"v")
    assert len(producer) == 0 and "no spaces" not in broker.list_topics()


def test_transaction_calls_without_a_transactional_id_raise_state_errors(
    broker: eoslog.Broker,
) -> None:
    producer = broker.producer()
    for call in (
        producer.init_transactions,
        producer.begin_transaction,
        producer.commit_transaction,
        producer.abort_transaction,
        lambda: producer.send_offsets_to_transaction([], None),
    ):
        with pytest.raises(ProducerStateError, match=r"no transactional\.id"):
            call()


def test_send_offsets_to_transaction_refuses_metadata_not_from_a_consumer(
    broker: eoslog.Broker,
) -> None:
    broker.create_topic("t", 1)
    producer = broker.producer({"transactional.id": "copier-0"})
    producer.init_transactions()
    producer.begin_transaction()
    with pytest.raises(TypeError, match="consumer_group_metadata"):
        producer.send_offsets_to_transaction([eoslog.TopicPartition("t", 0, 1)], None)  # type: ignore[arg-type]
    assert producer.transaction_state == "IN_TRANSACTION"


def test_queue_full_raises_buffer_error_until_poll(broker: eoslog.Broker) -> None:
    broker.create_topic("t", 1)
    producer = broker.producer({"queue.buffering.max.messages": 5, "linger.ms": 0})
    for _ in range(5):
        producer.produce("t", b"v")
    with pytest.raises(BufferError):
        producer.produce("t", b"v")
    assert producer.poll(0) == 5
    producer.produce("t", b"v")
    assert producer.flush() == 0


def test_a_record_larger_than_batch_size_gets_a_batch_of_its_own(broker: eoslog.Broker) -> None:
    broker.create_topic("t", 1)
    producer = broker.producer({"batch.size": 1000, "linger.ms": LINGER_NEVER_MS})
    producer.produce("t", b"small")
    producer.produce("t", b"x" * 5000)
    producer.produce_batch("t", [b"y" * 5000, b"z"])
    assert producer.flush() == 0
    assert [len(records) for _, records in batches_of(broker, "t")] == [1, 1, 1, 1]


def test_flush_fsyncs_under_commit_durability(tmp_path: Any) -> None:
    with eoslog.open(str(tmp_path / "c"), durability="commit", background=False) as broker:
        broker.create_topic("t", 1)
        producer = broker.producer()
        producer.produce("t", b"v")
        producer.flush()
        assert broker.log("t", 0).recovery_point == 1
