"""Requests whose sizes lie (found by the wire_stream fuzz target, tests/fuzz/wire_target.py):
a count or length past the request's end, or a null where the schema allows none, closes the
connection with a log line before kio reads the request, so nothing is allocated from the
claimed size and nothing changes."""

from __future__ import annotations

import logging
import socket
import struct
from pathlib import Path

import pytest

from eoslog.broker import Broker
from eoslog.serve.connection import parse_request
from eoslog.serve.registry import ProtocolViolation
from eoslog.serve.server import Server
from tests.serve import wire

CORPUS = Path(__file__).parents[1] / "fuzz" / "corpus" / "wire_stream"


def _header(api_key: int, version: int, flexible: bool) -> bytes:
    """A request header (v1, or v2 with its empty tagged fields) with client id "x"."""
    return struct.pack(">hhih", api_key, version, 1, 1) + b"x" + (b"\0" if flexible else b"")


@pytest.mark.parametrize(
    "body",
    [
        # Metadata v1: a topics array of 2**31 - 1 entries, and no bytes for any.
        pytest.param(_header(3, 1, False) + struct.pack(">i", 2**31 - 1), id="legacy-count"),
        # Metadata v12: a compact array whose varint count is 2**28.
        pytest.param(_header(3, 12, True) + b"\x81\x80\x80\x80\x01", id="compact-count"),
        # Produce v3: a transactional id string of 32767 bytes in a 20-byte request.
        pytest.param(_header(0, 3, False) + struct.pack(">h", 32767), id="string-length"),
        # Produce v9: topic_data null (compact length 0), which the schema does not allow.
        pytest.param(
            _header(0, 9, True) + b"\0" + struct.pack(">hi", -1, 1000) + b"\0\0",
            id="null-array",
        ),
        # A varint that never ends.
        pytest.param(_header(3, 12, True) + b"\xff" * 8, id="endless-varint"),
    ],
)
def test_a_request_whose_sizes_lie_is_refused_before_it_is_parsed(
    broker: Broker, server: Server, caplog: pytest.LogCaptureFixture, body: bytes
) -> None:
    caplog.set_level(logging.WARNING, logger="eoslog.serve")
    with pytest.raises(ProtocolViolation):
        parse_request(body)
    broker.create_topic("t", 1)
    topics = set(broker.list_topics())
    with wire.connect(server.address) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        assert wire.closed_by_server(sock)
    assert "closing the connection" in caplog.text
    assert set(broker.list_topics()) == topics
    assert broker.log("t", 0).log_end_offset == 0


@pytest.mark.parametrize("finding", sorted(p.name for p in CORPUS.glob("*")) or ["none"])
def test_every_wire_stream_corpus_input_leaves_the_server_serving(
    broker: Broker, server: Server, finding: str
) -> None:
    """The fuzz corpus (seeds and fixed findings) against this server: each connection ends,
    and a fresh client is served after it."""
    data = (CORPUS / finding).read_bytes()
    with wire.connect(server.address) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)  # the stream is all there is
        while sock.recv(1 << 16):
            pass
    with wire.connect(server.address) as sock:
        wire.call(sock, wire.metadata_request())
