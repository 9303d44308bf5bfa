"""The contenders of serve_bench.py: `eoslog serve` as a child process and librdkafka's mock
cluster, both driven by confluent-kafka's clients; the single-record transaction latency, the
read_committed consumer, Metadata answered one at a time, and the server side profiled per
thread inside an in-process Broker.serve."""

from __future__ import annotations

import cProfile
import io
import pstats
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import harness
from contenders_producer import PRODUCE_TOPIC, TXN_RECORDS
from contenders_shared import expect

LISTENING = "eoslog serve: listening on "
FETCH_TOPIC = "fetch-bench"
LATENCY_WARMUP = 50
# The mock cluster a Producer creates lives as long as the Producer.
MOCK: dict[str, object] = {"test.mock.num.brokers": 1}


def start_server(directory: str, durability: str) -> tuple[subprocess.Popen[str], str]:
    """`eoslog serve DIR` as a user runs it, on a free port: the process and its address."""
    command = [sys.executable, "-m", "eoslog", "serve", directory, "--listen", "127.0.0.1:0"]
    server = subprocess.Popen(
        [*command, "--durability", durability], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    if not line.startswith(LISTENING):
        server.kill()
        raise RuntimeError(f"eoslog serve did not start: {line!r}")
    return server, line[len(LISTENING) :].split()[0]


def mock_address(producer: Any) -> str:
    """The host:port of the mock broker `producer` created (it listens on loopback)."""
    broker = next(iter(producer.list_topics(timeout=10).brokers.values()))
    return f"{broker.host}:{broker.port}"


def fill(cluster: dict[str, object], values: list[bytes]) -> Any:
    """Transactions of TXN_RECORDS `values` into partition 0 of FETCH_TOPIC (the mock makes
    4 partitions on auto-creation, eoslog serve 1) through a confluent Producer on
    `cluster`; the producer (it keeps a mock cluster alive)."""
    from confluent_kafka import Producer

    producer = Producer({**cluster, "transactional.id": "bench-fill", "linger.ms": 5})
    producer.init_transactions(30)
    for start in range(0, len(values), TXN_RECORDS):
        producer.begin_transaction()
        for value in values[start : start + TXN_RECORDS]:
            while True:
                try:
                    producer.produce(FETCH_TOPIC, value, partition=0)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.commit_transaction(60)
    return producer


def consumer_contender(name: str, address: str, records: int, passes: int) -> harness.Contender:
    """A read_committed confluent Consumer (no group; made untimed) reading the `records` of
    FETCH_TOPIC's partition 0 `passes` times, each pass assign()ed at offset 0, asking
    consume() for at most what is left (it waits for its count). The mock keeps about 5 MB
    per partition: passes over a short topic make a run long enough. Checked: the count; the
    payload bytes of a run."""
    from confluent_kafka import TopicPartition

    def prepare() -> Any:
        from confluent_kafka import Consumer

        settings = {"bootstrap.servers": address, "group.id": "bench", "enable.auto.commit": False}
        # fetch.wait.max.ms 5: a pass's fetch at the log end does not hold the next pass 500 ms.
        return Consumer({**settings, "isolation.level": "read_committed", "fetch.wait.max.ms": 5})

    def run(consumer: Any) -> int:
        payload = 0
        deadline = time.monotonic() + 120
        for _ in range(passes):
            consumer.assign([TopicPartition(FETCH_TOPIC, 0, 0)])
            read = 0
            while read < records:
                expect(time.monotonic() < deadline, f"{name}: {read} of {records} read")
                for message in consumer.consume(min(10_000, records - read), 1.0):
                    if message.error() is None:
                        read += 1
                        payload += len(message.value())
            consumer.unassign()
        return payload

    def check(_consumer: Any, payload: int) -> int:
        return payload

    return harness.Contender(
        name, run, prepare, lambda c: c.close(), check, amount=records * passes
    )


def latency_contender(name: str, cluster: dict[str, object], samples: int) -> harness.Contender:
    """Self-timed: `samples` single-record transactions (begin, produce one value, commit) of
    a transactional confluent Producer with linger.ms 0, each timed alone (ns), after
    LATENCY_WARMUP untimed ones."""

    def prepare() -> Any:
        from confluent_kafka import Producer

        producer = Producer({**cluster, "transactional.id": "bench-latency", "linger.ms": 0})
        producer.init_transactions(30)
        return producer

    def one(producer: Any) -> None:
        producer.begin_transaction()
        producer.produce(PRODUCE_TOPIC, b"x" * 100)
        producer.commit_transaction(30)

    def run(producer: Any) -> Any:
        for _ in range(LATENCY_WARMUP):
            one(producer)
        times = np.empty(samples, dtype=np.int64)
        for i in range(samples):
            started = time.perf_counter_ns()
            one(producer)
            times[i] = time.perf_counter_ns() - started
        return times

    return harness.Contender(name, run, prepare, timed=False)


def metadata_frame() -> bytes:
    """One Metadata v12 request (PRODUCE_TOPIC, no auto-creation), framed."""
    from kio.index import load_payload_module
    from kio.serial import entity_writer
    from kio.static.constants import EntityType

    module = load_payload_module(3, 12, EntityType.request)
    topic = module.MetadataRequestTopic(topic_id=None, name=PRODUCE_TOPIC)
    request = module.MetadataRequest(
        topics=(topic,), allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    header_type = type(request).__header_schema__
    body = io.BytesIO()
    header = header_type(
        request_api_key=3, request_api_version=12, correlation_id=1, client_id="bench"
    )
    entity_writer(header_type)(body, header)
    entity_writer(type(request))(body, request)
    return struct.pack(">i", len(body.getvalue())) + body.getvalue()


def metadata_contender(name: str, address: str, count: int) -> harness.Contender:
    """Self-timed: `count` Metadata requests sent one at a time on one connection, each
    timed from send to the whole answer read (ns)."""
    frame = metadata_frame()

    def run(_: object) -> Any:
        host, _sep, port = address.rpartition(":")
        times = np.empty(count, dtype=np.int64)
        with socket.create_connection((host, int(port))) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for i in range(-LATENCY_WARMUP, count):
                started = time.perf_counter_ns()
                sock.sendall(frame)
                (size,) = struct.unpack(">i", _read(sock, 4))
                _read(sock, size)
                if i >= 0:
                    times[i] = time.perf_counter_ns() - started
        return times

    return harness.Contender(name, run, timed=False)


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        expect(bool(chunk), "the server closed the connection")
        data += chunk
    return data


# --- the server side profiled -------------------------------------------------------------------

SERVER_THREAD = "eoslog-serve"  # the loop thread; its worker threads are eoslog-serve_N
# Builtins that block (the loop's epoll, a worker's idle queue, locks, sleeps): waits, not work.
IDLE = ("select.epoll", "SimpleQueue", "acquire", "sleep")


@contextmanager
def profiled_threads() -> Iterator[dict[str, list[cProfile.Profile]]]:
    """cProfile every thread started inside the block, by thread name (threading.setprofile
    reaches new threads only; the calling thread is not profiled)."""
    found: dict[str, list[cProfile.Profile]] = {}

    def start(*_: object) -> None:
        profile = cProfile.Profile()
        found.setdefault(threading.current_thread().name, []).append(profile)
        profile.enable()

    threading.setprofile(start)
    try:
        yield found
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]


LAYERS = ("eoslog.serve + kio", "asyncio, sockets, threads", "engine")


def split_us(found: dict[str, list[cProfile.Profile]], requests: int) -> dict[str, float]:
    """From the server threads' profiles: µs of own time per request in each of LAYERS:
    eoslog.serve's and kio's functions; asyncio, socket calls and the worker pool's hand-off
    (the rest of the standard library and the loop thread's builtins); the engine, eoslog
    outside eoslog.serve plus the worker threads' other builtins (an fsync). Blocking waits
    (IDLE) are left out."""
    totals = dict.fromkeys(LAYERS, 0.0)
    for thread, profiles in found.items():
        if not thread.startswith(SERVER_THREAD) or thread == "eoslog-serve-appends":
            continue
        stats = pstats.Stats(profiles[0])
        for extra in profiles[1:]:
            stats.add(extra)
        table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
        for (filename, _line, function), (_cc, _calls, own, _cum, _callers) in table.items():
            if filename == "~" and any(word in function for word in IDLE):
                continue
            totals[_layer(thread, filename, function)] += own
    return {layer: seconds / requests * 1e6 for layer, seconds in totals.items()}


def _layer(thread: str, filename: str, function: str) -> str:
    if "/eoslog/serve/" in filename or "/kio/" in filename:
        return LAYERS[0]
    if "/eoslog/" in filename:
        return LAYERS[2]
    worker = thread != SERVER_THREAD
    if worker and filename == "~" and "_socket" not in function:
        return LAYERS[2]
    return LAYERS[1]


def profile_requests(broker: Any, count: int) -> dict[str, dict[str, float]]:
    """Metadata answered one at a time, then idempotent Produce requests of one batch (a
    confluent Producer, linger.ms 0, produce() + flush() per record), through an in-process
    broker.serve() whose threads are profiled, `count` of each: per kind, split_us() (the
    Produce side also answers the producer's few ApiVersions, Metadata and InitProducerId)."""
    from confluent_kafka import Producer

    results = {}
    frame = metadata_frame()
    kinds: dict[str, Callable[[str], None]] = {
        "Metadata v12": lambda address: _metadata(address, frame, count),
        "Produce, one batch of one record": lambda address: _produce_each(Producer, address, count),
    }
    for kind, drive in kinds.items():
        with profiled_threads() as found:
            server = broker.serve("127.0.0.1:0")
            try:
                drive(server.address)
            finally:
                server.close()
        results[kind] = split_us(found, count)
    return results


def _metadata(address: str, frame: bytes, count: int) -> None:
    host, _sep, port = address.rpartition(":")
    with socket.create_connection((host, int(port))) as sock:
        for _ in range(count):
            sock.sendall(frame)
            (size,) = struct.unpack(">i", _read(sock, 4))
            _read(sock, size)


def _produce_each(producer_type: Any, address: str, count: int) -> None:
    producer = producer_type(
        {"bootstrap.servers": address, "enable.idempotence": True, "linger.ms": 0}
    )
    for _ in range(count):
        producer.produce(PRODUCE_TOPIC, b"x" * 100)
        expect(producer.flush(30) == 0, "a record left unflushed")
