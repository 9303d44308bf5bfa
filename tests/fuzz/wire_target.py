"""The wire_stream target: the bytes of one input are everything a client sends on one
connection to `eoslog serve` (eoslog.serve.connection and every handler behind it), served
by a broker in a temporary directory made once per process.

The client sends the input, half-closes and reads until the server closes. Oracles:

- nothing raises out of the server: a handler's unexpected exception (logged by the
  connection as "... failed") or a task's exception on the loop (logged by asyncio) is a
  finding;
- the server never hangs: it closes the connection within HANG_S of the client's last byte,
  and it is gone from the server's count, unless the stream holds a request that may wait
  as long as it asks (a Fetch's max_wait, a JoinGroup's rebalance, a SyncGroup);
- a stream whose first request does not parse changes nothing: every topic's partitions,
  log start and end offsets are as before.

The wire_stream_sasl target sends the same streams to a SASL_PLAINTEXT listener of the same
broker whose one user's password is random (no input holds it): whatever the bytes, the
server closes the connection in time, raises nothing, and the log never changes.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import socket
import struct
import tempfile
import time
from pathlib import Path

import eoslog
from eoslog.broker import Broker
from eoslog.serve import registry
from eoslog.serve.connection import parse_request
from eoslog.serve.server import Server

from .inputs import INPUT_TIMEOUT_S, FuzzFinding

TOPIC = "fuzzed"
# How long the server may take to close a connection the client half-closed (well under the
# per-input timeout, so a hang is reported as this finding rather than libFuzzer's timeout).
HANG_S = INPUT_TIMEOUT_S / 2
# The broker's request limits for the target: an input is at most a few KiB, so a larger
# size prefix is hostile and must be refused before it is read.
CONFIG = {"socket.request.max.bytes": 1 << 20, "queued.max.request.bytes": 1 << 20}

SASL_USER = "fuzz"
_SASL_PASSWORD = os.urandom(16).hex()  # no input can hold it

_served: list[tuple[Broker, Server, Server]] = []
_failures: list[str] = []


class _ServerErrors(logging.Handler):
    """Collects what the server logs at ERROR (a handler's or a task's exception)."""

    def emit(self, record: logging.LogRecord) -> None:
        _failures.append(
            record.getMessage() + (f": {record.exc_info[1]!r}" if record.exc_info else "")
        )


def served() -> tuple[Broker, Server, Server]:
    """The broker and its servers (PLAINTEXT, SASL_PLAINTEXT) every input of this process
    talks to."""
    if not _served:
        directory = Path(tempfile.mkdtemp(prefix="eoslog-fuzz-wire-"))
        broker = eoslog.open(str(directory / "log"), "none", CONFIG)
        broker.create_topic(TOPIC, 2)
        producer = broker.producer({"transactional.id": "fuzz"})
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(4):
            producer.produce(TOPIC, value=b"v%d" % i, partition=i % 2)
        producer.commit_transaction()
        producer.close()
        server = broker.serve("127.0.0.1:0")
        users = {"sasl.plain.users": {SASL_USER: _SASL_PASSWORD}}
        sasl_server = broker.serve("SASL_PLAINTEXT://127.0.0.1:0", users)
        for name in ("eoslog.serve", "asyncio"):
            logger = logging.getLogger(name)
            logger.addHandler(_ServerErrors(logging.ERROR))
            logger.propagate = False  # the fuzzer's output stays readable

        def close() -> None:
            broker.close()
            shutil.rmtree(directory, ignore_errors=True)

        atexit.register(close)
        _served.append((broker, server, sasl_server))
    return _served[0]


def state(broker: Broker) -> dict[tuple[str, int], tuple[int, int]]:
    """(log start, log end) of every partition of every topic: what a refused request
    leaves as it was."""
    found = {}
    for name, meta in broker.list_topics().items():
        for partition in range(meta.num_partitions):
            log = broker.log(name, partition)
            found[(name, partition)] = (log.log_start_offset, log.log_end_offset)
    return found


# APIs whose request may wait as long as it asks (Kafka's long poll, a rebalance): a stream
# holding one may keep its connection past HANG_S.
WAITING_APIS = frozenset({1, 11, 14})


def requests_served(data: bytes, size_max: int) -> list[int]:
    """The API keys of the whole requests the stream starts with that the server serves
    (those before the first it refuses)."""
    keys, position = [], 0
    while position + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, position)
        if not 0 < size <= size_max or len(data) < position + 4 + size:
            break
        try:
            parsed = parse_request(data[position + 4 : position + 4 + size])
        except registry.ProtocolViolation:
            break
        keys.append(18 if isinstance(parsed, memoryview) else parsed[0].key)
        position += 4 + size
    return keys


def _exchange(address: str, data: bytes, timeout_s: float) -> bool:
    """Send `data`, half-close, read until the server closes; whether it closed in time."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(1 << 16):
                pass
        except TimeoutError:
            return False
        except ConnectionError:
            pass  # closed on us with a reset
        return True


def _connections_end(server: Server, open_before: int) -> bool:
    """Whether the server's connections drop back to what was open before this input
    (one of an earlier waiting input may still be open)."""
    deadline = time.monotonic() + HANG_S
    while server.connections_open() > open_before:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def wire_stream(data: bytes) -> None:
    broker, server, _ = served()
    served_keys = requests_served(data, CONFIG["socket.request.max.bytes"])
    before = state(broker) if not served_keys else None
    open_before = server.connections_open()
    may_wait = not WAITING_APIS.isdisjoint(served_keys)
    # A stream that may wait is not held to HANG_S: reading its answers briefly is enough.
    closed = _exchange(server.address, data, 0.1 if may_wait else HANG_S)
    if not closed and not may_wait:
        raise FuzzFinding(f"the server neither answered nor closed within {HANG_S} s")
    if not may_wait and not _connections_end(server, open_before):
        raise FuzzFinding("a connection the client closed is still open on the server")
    _raise_failures()
    if before is not None and state(broker) != before:
        raise FuzzFinding("a stream whose first request does not parse changed the log")


def wire_stream_sasl(data: bytes) -> None:
    broker, _, server = served()
    before = state(broker)
    open_before = server.connections_open()
    if not _exchange(server.address, data, HANG_S):
        raise FuzzFinding(f"the SASL listener neither answered nor closed within {HANG_S} s")
    if not _connections_end(server, open_before):
        raise FuzzFinding("a connection the client closed is still open on the server")
    _raise_failures()
    if state(broker) != before:
        raise FuzzFinding("a client that never authenticated changed the log")


def _raise_failures() -> None:
    if _failures:
        failures = list(_failures)
        _failures.clear()
        raise FuzzFinding(f"the server raised: {failures[0]}")
