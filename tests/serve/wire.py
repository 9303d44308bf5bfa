"""A bare Kafka wire client for the server tests: one request at a time over a socket, with
kio's schemas, so a test can send what a real client would not (or would, byte for byte)."""

from __future__ import annotations

import datetime
import io
import socket
import struct
from typing import Any

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from eoslog.record import codec
from eoslog.serve.messages import build

DEADLINE_S = 30.0  # a test fails rather than hang past this


def connect(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=DEADLINE_S)


def request_type(api_key: int, version: int) -> Any:
    return load_request_schema(api_key, version)


def frame(request: Any, correlation_id: int = 1, client_id: str = "wire-test") -> bytes:
    """The bytes of `request` on the wire: size, header, body."""
    out = io.BytesIO()
    header_type = type(request).__header_schema__
    header = build(
        header_type,
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    entity_writer(header_type)(out, header)
    entity_writer(type(request))(out, request)
    body = out.getvalue()
    return struct.pack(">i", len(body)) + body


def read_frame(sock: socket.socket) -> bytes | None:
    """The next response frame (without its size), or None if the server closed."""
    prefix = _read_exactly(sock, 4)
    if prefix is None:
        return None
    (size,) = struct.unpack(">i", prefix)
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = sock.recv(size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def call(sock: socket.socket, request: Any, correlation_id: int = 1) -> Any:
    """Send `request`, return the response entity (its correlation id checked)."""
    sock.sendall(frame(request, correlation_id))
    data = read_frame(sock)
    assert data is not None, "the server closed the connection"
    return decode(request.__api_key__, request.__version__, data, correlation_id)


def decode(api_key: int, version: int, data: bytes, correlation_id: int) -> Any:
    response_type = load_response_schema(api_key, version)
    header, used = entity_reader(response_type.__header_schema__)(data, 0)
    assert header.correlation_id == correlation_id
    response, size = entity_reader(response_type)(data, used)
    assert used + size == len(data)
    return response


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed the connection (reads EOF or a reset)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


PRODUCE_VERSION = 9


def produce_request(topic: str, partition: int, records: bytes | None, acks: int = -1) -> Any:
    """A Produce request (v9) of one partition's records."""
    module = load_payload_module(0, PRODUCE_VERSION, EntityType.request)
    data = build(module.PartitionProduceData, index=partition, records=records)
    return build(
        module.ProduceRequest,
        acks=acks,
        timeout=datetime.timedelta(seconds=DEADLINE_S),
        topic_data=(build(module.TopicProduceData, name=topic, partition_data=(data,)),),
    )


def metadata_request(*topics: str) -> Any:
    module = load_payload_module(3, 12, EntityType.request)
    return build(
        module.MetadataRequest,
        topics=tuple(build(module.MetadataRequestTopic, name=t, topic_id=None) for t in topics),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def batch(*values: bytes, timestamp_ms: int = 1_700_000_000_000) -> bytes:
    """One v2 batch of records with these values (no key, no headers)."""
    builder = codec.BatchBuilder()
    for value in values:
        assert builder.append(timestamp_ms, None, value, [])
    return builder.build()


def fetch_request(topic: str, offset: int, max_wait_ms: int, isolation_level: int = 1) -> Any:
    """A Fetch (v12) of partition 0 of `topic` from `offset` (isolation 1: read_committed)."""
    module = load_payload_module(1, 12, EntityType.request)
    partition = build(
        module.FetchPartition, partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
    )
    return build(
        module.FetchRequest,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        isolation_level=isolation_level,
        topics=(build(module.FetchTopic, topic=topic, partitions=(partition,)),),
        forgotten_topics_data=(),
    )
