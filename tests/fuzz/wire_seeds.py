"""Seeds of the wire_stream target: what real clients send on one connection, captured from
confluent-kafka (librdkafka) through a recording relay in front of a server, and requests
built with kio for the APIs those clients did not use in the capture."""

from __future__ import annotations

import contextlib
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import eoslog
from tests.serve import wire

SEED_BYTES_MAX = 4096  # libFuzzer's default max_len: a longer capture is cut


class _RecordingRelay:
    """A listener that relays each connection to `target` and keeps what the client sent."""

    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self._target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self.streams: list[bytearray] = []
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target)
            except OSError:  # the server has closed: a client still retrying
                client.close()
                continue
            sent = bytearray()
            self.streams.append(sent)
            for source, sink, record in ((client, upstream, sent), (upstream, client, None)):
                pump = threading.Thread(target=_pump, args=(source, sink, record), daemon=True)
                pump.start()
                self._threads.append(pump)

    def close(self) -> None:
        self._listener.close()


def _pump(source: socket.socket, sink: socket.socket, record: bytearray | None) -> None:
    try:
        while chunk := source.recv(1 << 16):
            if record is not None:
                record += chunk
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def captured_streams() -> list[bytes]:
    """Each connection's bytes from a confluent producer, an assign() consumer and an
    AdminClient against a server in a temporary directory."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    with (
        tempfile.TemporaryDirectory() as directory,
        eoslog.open(str(Path(directory) / "log")) as broker,
    ):
        broker.create_topic("fuzzed", 2)
        server = broker.serve("127.0.0.1:0")
        relay = _RecordingRelay(server.address)
        # Metadata then names the relay as the broker, so every connection passes through it.
        server.port = int(relay.address.rpartition(":")[2])
        conf = {"bootstrap.servers": relay.address}
        producer = Producer({**conf, "acks": "all", "enable.idempotence": False, "linger.ms": 0})
        for i in range(3):
            producer.produce("fuzzed", key=b"k%d" % i, value=b"value-%d" % i, partition=i % 2)
        producer.flush(30)
        consumer = Consumer({**conf, "group.id": "fuzz", "enable.auto.commit": False})
        consumer.assign([TopicPartition("fuzzed", 0, 0)])
        consumer.consume(2, timeout=10)
        consumer.close()
        admin = AdminClient(conf)
        admin.list_topics(timeout=10)
        relay.close()
    return [bytes(stream[:SEED_BYTES_MAX]) for stream in relay.streams if stream]


def built_streams() -> Iterator[bytes]:
    """Requests built with kio: a produce, a fetch, a metadata, alone and two in a row."""
    produce = wire.frame(wire.produce_request("fuzzed", 0, wire.batch(b"a", b"b")))
    fetch = wire.frame(wire.fetch_request("fuzzed", 0, max_wait_ms=0), 2)
    metadata = wire.frame(wire.metadata_request("fuzzed"), 3)
    yield from (produce, fetch, metadata, metadata + produce + fetch)


def wire_seeds() -> Iterator[bytes]:
    yield from built_streams()
    yield from captured_streams()


def _sasl_prefix(password: bytes) -> bytes:
    """ApiVersions, SaslHandshake(PLAIN) and SaslAuthenticate with `password` for "fuzz"."""
    versions = wire.request_type(18, 3)(client_software_name="f", client_software_version="1")
    handshake = wire.request_type(17, 1)(mechanism="PLAIN")
    authenticate = wire.request_type(36, 2)(auth_bytes=b"\0fuzz\0" + password)
    return b"".join(
        wire.frame(request, -100 - n)
        for n, request in enumerate((versions, handshake, authenticate))
    )


def wire_sasl_seeds() -> Iterator[bytes]:
    """The wire seeds, alone and after a SASL exchange with a wrong password."""
    for seed in [*built_streams(), *captured_streams()]:
        yield seed
        yield (_sasl_prefix(b"not-the-password") + seed)[:SEED_BYTES_MAX]
