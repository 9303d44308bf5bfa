"""`eoslog serve` against librdkafka's in-process mock cluster, through the same confluent-kafka
producer in one run (issue 18, item 6): records per second of an acks=all producer writing
values of 100 bytes, idempotent where the server serves InitProducerId.

    python bench/serve_bench.py [--records N] [--value-bytes B] [--rounds R] [--tmp DIR]
        [--durability commit|always|none] [--plain]

The server is a child process (`eoslog serve DIR --listen 127.0.0.1:0`), as a user runs it;
the mock cluster lives in the producer's own process (`test.mock.num.brokers`), so it pays
no socket, no disk and no fsync: it is the ceiling of the client, not a broker. Rounds
alternate between the two. --plain measures the non-idempotent producer (a server without
InitProducerId refuses an idempotent one). It also times Metadata requests answered one at
a time on one connection (µs each: the protocol layer's cost per request plus a loopback
round trip), and a read_committed Consumer reading the records back. Printed, never
asserted.
"""

from __future__ import annotations

import argparse
import io
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kio.index import load_payload_module
from kio.serial import entity_writer
from kio.static.constants import EntityType

LISTENING = "eoslog serve: listening on "
TOPIC = "bench"


def produce(config: dict[str, object], records: int, value: bytes) -> float:
    """Records per second of one producer writing `records` values, flush included."""
    producer = Producer({"linger.ms": 5, "acks": "all", **config})
    failed: list[object] = []

    def report(error: object, _message: object) -> None:
        if error is not None:
            failed.append(error)

    # Warm up: metadata, the producer id, the connection.
    producer.produce(TOPIC, value=value, on_delivery=report)
    producer.flush(30)
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(TOPIC, value=value, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.001)
    if producer.flush(120) != 0 or failed:
        raise KafkaException(failed[0] if failed else "records left unflushed")
    return records / (time.perf_counter() - started)


def consume(address: str, records: int) -> float:
    """Records per second of a read_committed confluent Consumer reading `records` of the
    topic from its beginning with assign() (no group)."""
    consumer = Consumer(
        {
            "bootstrap.servers": address,
            "group.id": "bench",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    started = time.perf_counter()
    read = 0
    while read < records:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                read += 1
    rate = records / (time.perf_counter() - started)
    consumer.close()
    return rate


def round_trip_us(address: str, count: int) -> float:
    """Microseconds per Metadata (v12, one topic) request answered, one at a time on one
    connection: the protocol layer's cost per request (frame, kio parse, handler, kio
    encode, the loop) plus a loopback round trip."""
    module = load_payload_module(3, 12, EntityType.request)
    topic = module.MetadataRequestTopic(topic_id=None, name=TOPIC)
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
    frame = struct.pack(">i", len(body.getvalue())) + body.getvalue()
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port))) as sock:
        started = time.perf_counter()
        for _ in range(count):
            sock.sendall(frame)
            (size,) = struct.unpack(">i", _read(sock, 4))
            _read(sock, size)
        return (time.perf_counter() - started) / count * 1e6


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return data


def start_server(directory: Path, durability: str) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "eoslog", "serve", str(directory)]
    server = subprocess.Popen(
        [*command, "--listen", "127.0.0.1:0", "--durability", durability],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    if not line.startswith(LISTENING):
        server.kill()
        raise RuntimeError(f"eoslog serve did not start: {line!r}")
    return server, line[len(LISTENING) :].split()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tmp", default=None)
    parser.add_argument("--durability", default="commit", choices=("commit", "always", "none"))
    parser.add_argument("--plain", action="store_true", help="a non-idempotent producer")
    parser.add_argument("--round-trips", type=int, default=5_000)
    options = parser.parse_args()
    value = bytes(range(256))[: options.value_bytes].ljust(options.value_bytes, b"v")
    idempotent = {"enable.idempotence": not options.plain}
    rates: dict[str, list[float]] = {"eoslog serve": [], "librdkafka mock cluster": []}
    latencies: list[float] = []
    reads: list[float] = []
    with tempfile.TemporaryDirectory(dir=options.tmp) as root:
        server, address = start_server(Path(root) / "log", options.durability)
        try:
            for _ in range(options.rounds):
                rates["eoslog serve"].append(
                    produce({"bootstrap.servers": address, **idempotent}, options.records, value)
                )
                mock = {"bootstrap.servers": "", "test.mock.num.brokers": 1, **idempotent}
                rates["librdkafka mock cluster"].append(produce(mock, options.records, value))
                latencies.append(round_trip_us(address, options.round_trips))
                reads.append(consume(address, options.records))
        finally:
            server.terminate()
            server.wait(60)
    kind = "plain" if options.plain else "idempotent"
    print(
        f"confluent-kafka {kind} producer, acks=all, linger.ms=5, {options.records} records of "
        f"{options.value_bytes} B, {options.rounds} rounds, durability={options.durability}\n"
    )
    print("| target | records/s (median) | rounds |")
    print("|---|---|---|")
    for name, measured in rates.items():
        rounds = ", ".join(f"{rate:,.0f}" for rate in measured)
        print(f"| {name} | {statistics.median(measured):,.0f} | {rounds} |")
    print(
        f"\nread_committed Consumer (assign, from the beginning) through eoslog serve: "
        f"{statistics.median(reads):,.0f} records/s"
    )
    print(
        f"Metadata request answered, one at a time: {statistics.median(latencies):.0f} µs "
        "(median of rounds; the protocol layer plus a loopback round trip)"
    )


if __name__ == "__main__":
    main()
