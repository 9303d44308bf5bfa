"""produce()'s native per-record path (eoslog._ext.accumulator) against the Python path it
hands the other cases to (Producer.produce): the same records, batches, delivery reports and
errors, whichever path a call takes (docs/style.md rule 12, for the producer)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import eoslog
from eoslog.client.producer import Producer
from eoslog.errors import ProducerFencedError, ProducerStateError
from eoslog.record import USING_EXTENSIONS, layout
from eoslog.record import pycodec as codec

NOW_MS = 1_767_225_600_000
LINGER_NEVER_MS = 600_000
PATHS = ["native", "python"]


@pytest.fixture
def broker(tmp_path: Any) -> Iterator[eoslog.Broker]:
    with eoslog.open(
        str(tmp_path / "log"), durability="none", clock_ms=lambda: NOW_MS, background=False
    ) as opened:
        yield opened


def produce_of(producer: Producer, path: str) -> Callable[..., None]:
    """The native produce (the producer's own attribute) or the Python path itself."""
    if path == "native":
        return producer.produce
    return lambda *args, **kwargs: Producer.produce(producer, *args, **kwargs)


def log_records(broker: eoslog.Broker, topic: str, partitions: int) -> list[Any]:
    """(partition, batch boundaries, records) with producer ids and CRCs left out."""
    found = []
    for partition in range(partitions):
        data = bytes(broker.log(topic, partition).read(0, max_bytes=1 << 30).records)
        for position, header in codec.iter_headers(data):
            records = codec.batch_records(data, position)
            found.append((partition, header.base_sequence, header.base_timestamp, records))
    return found


def test_native_produce_is_bound_when_the_extension_is_used(broker: eoslog.Broker) -> None:
    producer = broker.producer()
    if not USING_EXTENSIONS:
        assert "produce" not in vars(producer)  # the pure twin: the Python path only
        return
    assert type(producer.produce.__self__).__module__ == "eoslog._ext.accumulator"


def _workload(produce: Callable[..., None], reports: list[Any]) -> None:
    def report(err: Any, msg: Any) -> None:
        where = (msg.topic(), msg.partition(), msg.offset(), msg.timestamp())
        reports.append((err, *where, msg.key(), msg.value(), msg.headers()))

    for i in range(2_000):
        key = None if i % 3 == 0 else (b"k%d" % (i % 13) if i % 3 == 1 else f"ключ{i}")
        value: Any = (
            bytes((i * 7 + j) % 256 for j in range(i % 40))
            if i % 5
            else (f"text {i}" if i % 2 else None)
        )
        produce(
            "t",
            value,
            key=key,
            partition=-1 if i % 7 else i % 3,
            on_delivery=report if i % 4 == 0 else None,
            timestamp=0 if i % 6 else 1_000 + i,
            headers=[("h", b"%d" % i)] if i % 97 == 0 else None,
            **({"callback": report} if i % 11 == 0 else {}),
        )


@pytest.mark.parametrize("config", [{"batch.num.messages": 50}, {"batch.size": 900}])
def test_native_and_python_paths_write_the_same_batches_and_reports(
    tmp_path: Any, config: dict[str, Any]
) -> None:
    results = {}
    for path in PATHS:
        with eoslog.open(
            str(tmp_path / path), durability="none", clock_ms=lambda: NOW_MS, background=False
        ) as broker:
            broker.create_topic("t", 3)
            producer = Producer(broker, {**config, "linger.ms": LINGER_NEVER_MS}, seed=7)
            reports: list[Any] = []
            _workload(produce_of(producer, path), reports)
            assert len(producer) == 2_000
            assert producer.flush() == 0
            results[path] = (log_records(broker, "t", 3), reports)
    assert len(results["native"][1]) > 500
    assert results["native"] == results["python"]


def test_the_native_path_reads_the_wall_clock_as_the_broker_does(tmp_path: Any) -> None:
    with eoslog.open(str(tmp_path / "log"), durability="none", background=False) as broker:
        broker.create_topic("t", 1)
        producer = broker.producer({"linger.ms": LINGER_NEVER_MS})
        stamps: list[int] = []
        before = broker.clock_ms()
        for _ in range(3):  # the first record opens the batch (Python path), the rest append
            producer.produce("t", b"v", on_delivery=lambda e, m: stamps.append(m.timestamp()[1]))
        after = broker.clock_ms()
        producer.flush()
        assert len(stamps) == 3 and all(before <= stamp <= after for stamp in stamps)
        _, records = log_records(broker, "t", 1)[0][2:]
        assert [r.timestamp for r in records] == stamps


BAD_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("value of type int", {"value": 5}),
    ("value of type list", {"value": [1]}),
    ("timestamp below -1", {"timestamp": -5}),
    ("timestamp past int64", {"timestamp": 2**70}),
    ("timestamp of type float", {"timestamp": 1.5}),
    ("partition past the topic", {"partition": 3}),
    ("partition past int64", {"partition": 2**70}),
    ("key of type int", {"key": 5}),
    ("key of type bytearray", {"key": bytearray(b"k"), "value": b"ok"}),
    ("str value that is not UTF-8", {"value": "\udc80"}),
    ("unknown topic", {"topic": "missing"}),
    ("topic of type bytes", {"topic": b"t"}),
]


@pytest.mark.parametrize(("case", "call"), BAD_CALLS, ids=[c for c, _ in BAD_CALLS])
def test_native_and_python_paths_raise_the_same_errors(
    broker: eoslog.Broker, case: str, call: dict[str, Any]
) -> None:
    broker.create_topic("t", 3)
    outcomes = []
    for path in PATHS:
        producer = Producer(broker, {"linger.ms": LINGER_NEVER_MS}, seed=3)
        produce = produce_of(producer, path)
        for partition in range(3):  # open a batch everywhere: the native path then appends
            produce("t", b"open", partition=partition)
        produce("t", b"open", key=b"k")
        arguments = {"topic": "t", "value": b"v", **call}
        try:
            produce(arguments.pop("topic"), **arguments)
            outcome: Any = "queued"
        except Exception as error:
            outcome = (type(error), str(error))
        outcomes.append((outcome, len(producer)))
        producer.flush()
    assert outcomes[0] == outcomes[1], case


def test_queue_full_and_closed_raise_on_the_native_path(broker: eoslog.Broker) -> None:
    broker.create_topic("t", 1)
    producer = broker.producer({"queue.buffering.max.messages": 5, "linger.ms": LINGER_NEVER_MS})
    for _ in range(5):
        producer.produce("t", b"v")
    with pytest.raises(BufferError, match="Queue full"):
        producer.produce("t", b"v")
    assert len(producer) == 5
    producer.close()
    with pytest.raises(ProducerStateError):
        producer.produce("t", b"v")
    data = bytes(broker.log("t", 0).read(0).records)
    assert [h.records_count for _, h in codec.iter_headers(data)] == [5]
    assert len(data) > layout.HEADER_SIZE


def test_queue_buffering_max_kbytes_bounds_the_values_not_yet_reported(
    broker: eoslog.Broker,
) -> None:
    """librdkafka counts each record's value against queue.buffering.max.kbytes from
    produce() until its report is served: past it produce() raises BufferError, on either
    path, and a poll() after the flush frees the room again."""
    broker.create_topic("t", 1)
    producer = broker.producer({"queue.buffering.max.kbytes": "2", "linger.ms": LINGER_NEVER_MS})
    value = b"v" * 512
    for _ in range(4):  # 2,048 bytes: exactly the bound
        producer.produce("t", value)
    for extra in (b"x", value):
        with pytest.raises(BufferError, match="Queue full"):
            producer.produce("t", extra)
    producer.produce("t", None)  # a null value takes no room
    producer.produce("t", b"")
    assert len(producer) == 6
    assert producer.flush(10) == 0
    producer.produce("t", value)
    assert producer.flush(10) == 0
    data = bytes(broker.log("t", 0).read(0).records)
    assert sum(h.records_count for _, h in codec.iter_headers(data)) == 7
    producer.close()


# --- a transactional producer: the native path serves records only inside a transaction -------


def _count_slow_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the calls of Producer.produce (the Python path), made from either path."""
    calls = [0]
    python_produce = Producer.produce

    def counted(self: Producer, *args: Any, **kwargs: Any) -> None:
        calls[0] += 1
        python_produce(self, *args, **kwargs)

    monkeypatch.setattr(Producer, "produce", counted)
    return calls


@pytest.mark.parametrize("config", [{"batch.num.messages": 50}, {"batch.size": 900}])
def test_transactional_native_and_python_paths_write_the_same_batches_and_reports(
    tmp_path: Any, config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    slow_calls = _count_slow_calls(monkeypatch)
    results = {}
    calls = {}
    for path in PATHS:
        slow_calls[0] = 0
        with eoslog.open(
            str(tmp_path / path), durability="none", clock_ms=lambda: NOW_MS, background=False
        ) as broker:
            broker.create_topic("t", 3)
            producer = Producer(
                broker,
                {**config, "linger.ms": LINGER_NEVER_MS, "transactional.id": "fast"},
                seed=7,
            )
            producer.init_transactions()
            reports: list[Any] = []
            produce = produce_of(producer, path)
            for commit in (True, False, True):  # the aborted one is written, then aborted
                producer.begin_transaction()
                _workload(produce, reports)
                if commit:
                    producer.commit_transaction()
                else:
                    producer.abort_transaction()
            assert len(producer) == 0
            found = log_records(broker, "t", 3)
            headers = [
                header
                for partition in range(3)
                for _, header in codec.iter_headers(
                    bytes(broker.log("t", partition).read(0, max_bytes=1 << 30).records)
                )
            ]
            assert all(header.is_transactional for header in headers)
            assert sum(header.is_control for header in headers) == 9  # 3 partitions x 3 ends
            results[path] = (found, reports)
            calls[path] = slow_calls[0]
    assert len(results["native"][1]) > 1_500
    assert results["native"] == results["python"]
    assert calls["python"] == 6_000
    if USING_EXTENSIONS:
        assert calls["native"] < 6_000 // 2  # most records appended natively


def _transactional(broker: eoslog.Broker) -> Producer:
    producer = Producer(broker, {"linger.ms": LINGER_NEVER_MS, "transactional.id": "gate"})
    producer.init_transactions()
    return producer


def _outcome(produce: Callable[..., None]) -> Any:
    try:
        produce("t", b"v")
    except Exception as error:
        return (type(error), str(error), error.args[0].fatal(), error.args[0].txn_requires_abort())
    return "queued"


@pytest.mark.parametrize("path", PATHS)
def test_transactional_produce_outside_a_transaction_raises_on_either_path(
    broker: eoslog.Broker, path: str
) -> None:
    broker.create_topic("t", 1)
    producer = _transactional(broker)
    produce = produce_of(producer, path)
    with pytest.raises(ProducerStateError, match="call begin_transaction"):
        produce("t", b"v")
    producer.begin_transaction()
    produce("t", b"a")  # opens the batch: the next records append natively
    produce("t", b"b")
    producer.commit_transaction()
    with pytest.raises(ProducerStateError, match="in state READY"):
        produce("t", b"c")
    producer.begin_transaction()
    produce("t", b"d")
    produce("t", b"e")
    producer.abort_transaction()
    with pytest.raises(ProducerStateError, match="in state READY"):
        produce("t", b"f")
    assert len(producer) == 0
    committed = broker.consumer({"isolation.level": "read_committed"})
    committed.assign([eoslog.TopicPartition("t", 0, 0)])
    assert [m.value() for m in committed.consume(10, timeout=0)] == [b"a", b"b"]


def test_transactional_error_states_raise_the_same_on_both_paths(broker: eoslog.Broker) -> None:
    """ABORTABLE_ERROR and FATAL_ERROR with a batch open (where the native path would
    append): both paths raise the stored error, and queue nothing."""
    broker.create_topic("t", 1)
    outcomes: dict[str, list[Any]] = {}
    for path in PATHS:
        producer = _transactional(broker)
        produce = produce_of(producer, path)
        producer.begin_transaction()
        produce("t", b"open")
        with producer._lock:
            producer._sender.txn_failed(eoslog.KafkaException(eoslog.KafkaError(1, "failed")))
        found = [_outcome(produce), len(producer)]
        producer.abort_transaction()
        producer.begin_transaction()
        produce("t", b"open")
        producer._sender.set_fatal(ProducerFencedError("fenced"))
        found += [_outcome(produce), len(producer)]
        outcomes[path] = found
        producer.close()  # in FATAL_ERROR close does not raise
    assert outcomes["native"] == outcomes["python"]
    abortable, queued, fatal, _ = outcomes["native"]
    assert abortable[2:] == (False, True) and queued == 1  # only the record that opened
    assert fatal[0] is ProducerFencedError and fatal[2] is True
