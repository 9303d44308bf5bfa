"""What `eoslog serve` does with requests no correct client sends, and with clients that go
away: the connection is closed with a log line (logger "eoslog.serve") and nothing changes;
a size past socket.request.max.bytes is refused before its body is read."""

from __future__ import annotations

import logging
import random
import struct
from pathlib import Path

import pytest

import eoslog
from eoslog.broker import Broker
from eoslog.serve.server import Server
from tests.serve import wire


def _state(broker: Broker) -> dict[tuple[str, int], int]:
    """Every partition's log end: what a request that changes nothing leaves as it was."""
    return {
        (name, partition): broker.log(name, partition).log_end_offset
        for name, meta in broker.list_topics().items()
        for partition in range(meta.num_partitions)
    }


def _closed_with_a_log_line(sock: object, caplog: pytest.LogCaptureFixture) -> None:
    assert wire.closed_by_server(sock)  # type: ignore[arg-type]
    assert any(
        record.name == "eoslog.serve" and "closing the connection" in record.getMessage()
        for record in caplog.records
    ), caplog.text


@pytest.mark.parametrize("size", [-1, 0, 104_857_601, 2**31 - 1])
def test_a_size_outside_socket_request_max_bytes_closes_the_connection_before_any_body(
    server: Server, caplog: pytest.LogCaptureFixture, size: int
) -> None:
    caplog.set_level(logging.WARNING, logger="eoslog.serve")
    with wire.connect(server.address) as sock:
        sock.sendall(struct.pack(">i", size))  # and no body: the server must not wait for one
        _closed_with_a_log_line(sock, caplog)


@pytest.mark.parametrize("seed", range(8))
def test_garbage_bytes_close_the_connection_and_change_nothing(
    broker: Broker, server: Server, caplog: pytest.LogCaptureFixture, seed: int
) -> None:
    caplog.set_level(logging.WARNING, logger="eoslog.serve")
    broker.create_topic("t", 1)
    before = _state(broker), set(broker.list_topics())
    garbage = random.Random(seed).randbytes(64)
    with wire.connect(server.address) as sock:
        sock.sendall(struct.pack(">i", len(garbage)) + garbage)
        _closed_with_a_log_line(sock, caplog)
    assert (_state(broker), set(broker.list_topics())) == before


def test_a_produce_request_cut_short_inside_its_body_closes_the_connection_and_appends_nothing(
    broker: Broker, server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="eoslog.serve")
    broker.create_topic("t", 1)
    body = wire.frame(wire.produce_request("t", 0, wire.batch(b"never written")))[4:]
    cut = body[: len(body) - 20]  # framed as a whole request: the body itself is short
    with wire.connect(server.address) as sock:
        sock.sendall(struct.pack(">i", len(cut)) + cut)
        _closed_with_a_log_line(sock, caplog)
    assert broker.log("t", 0).log_end_offset == 0


def test_a_client_killed_mid_request_leaves_nothing_applied_and_others_are_served(
    broker: Broker, server: Server
) -> None:
    broker.create_topic("t", 1)
    frame = wire.frame(wire.produce_request("t", 0, wire.batch(b"half sent")))
    with wire.connect(server.address) as sock:
        sock.sendall(frame[: len(frame) // 2])
    with wire.connect(server.address) as other:
        response = wire.call(other, wire.produce_request("t", 0, wire.batch(b"whole")))
    (partition,) = response.responses[0].partition_responses
    assert (partition.error_code, partition.base_offset) == (0, 0)
    assert broker.log("t", 0).log_end_offset == 1


def test_an_api_not_served_closes_the_connection(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="eoslog.serve")
    # UpdateFeatures (57) v0: a header no broker of one node serves.
    body = struct.pack(">hhih", 57, 0, 7, -1)
    with wire.connect(server.address) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        _closed_with_a_log_line(sock, caplog)


def test_api_versions_of_a_version_not_served_is_answered_unsupported_at_version_0(
    server: Server,
) -> None:
    body = struct.pack(">hhih", 18, 99, 5, -1) + b"\0\0"
    with wire.connect(server.address) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        data = wire.read_frame(sock)
    assert data is not None
    response = wire.decode(18, 0, data, correlation_id=5)
    assert response.error_code == 35  # UNSUPPORTED_VERSION
    served = {key.api_key: (key.min_version, key.max_version) for key in response.api_keys}
    assert served[18] == (0, 4)
    assert served[0][0] == 3  # Produce


def test_connections_past_max_connections_are_closed(tmp_path: Path) -> None:
    with eoslog.open(str(tmp_path / "log"), config={"max.connections": 1}) as broker:
        server = broker.serve("127.0.0.1:0")
        with wire.connect(server.address) as first:
            wire.call(first, wire.metadata_request())
            with wire.connect(server.address) as second:
                assert wire.closed_by_server(second)
            wire.call(first, wire.metadata_request())


def test_a_read_ahead_of_one_request_still_serves_a_pipelining_client(tmp_path: Path) -> None:
    config = {"queued.max.requests": 1, "queued.max.request.bytes": 1}
    with eoslog.open(str(tmp_path / "log"), config=config) as broker:
        broker.create_topic("t", 1)
        server = broker.serve("127.0.0.1:0")
        requests = [wire.produce_request("t", 0, wire.batch(b"%d" % i)) for i in range(10)]
        with wire.connect(server.address) as sock:
            sock.sendall(b"".join(wire.frame(r, number) for number, r in enumerate(requests)))
            for number in range(len(requests)):
                data = wire.read_frame(sock)
                assert data is not None
                wire.decode(0, wire.PRODUCE_VERSION, data, number)
        assert broker.log("t", 0).log_end_offset == 10
