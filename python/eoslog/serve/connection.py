"""One client connection of `eoslog serve` (docs/design.md "Wire protocol"): Kafka's framing
(a 4-byte big-endian size, then the request header and body), the limits checked before any
request is read into memory, and the order of the answers.

Requests on a connection are served one at a time, in the order they came, as a Kafka broker
serves them (it stops reading a connection while a request of it is in flight): a client that
pipelines gets its answers in order, and the next request starts only when the one before it
has been applied. A handler may hand back its answer as a `Later` (a Produce waiting for the
fsync that makes its batches durable): the next request then starts while it waits, so that
pipelined produce requests share fsyncs, and a writer task sends the answers in order. Up to
`queued.max.requests` requests and `queued.max.request.bytes` bytes are read ahead of the one
being served; past either the connection is not read until the queue drains (backpressure,
not an error).

A request whose size is negative or past `socket.request.max.bytes`, whose header or body does
not parse, or that names an API or version the server does not serve (other than ApiVersions,
which gets Kafka's UNSUPPORTED_VERSION answer at version 0) closes the connection with a log
line; nothing of it has been applied. So does any request but ApiVersions, SaslHandshake and
SaslAuthenticate on a SASL listener before the client has authenticated
(eoslog.serve.security), and the answer to a failed SASL step is the connection's last.
"""

from __future__ import annotations

import asyncio
import functools
import io
import logging
import struct
from typing import TYPE_CHECKING, Any, Final

from kio.index import load_request_schema
from kio.serial import entity_reader, entity_writer

from eoslog.serve import registry
from eoslog.serve.frame_check import check_sizes
from eoslog.serve.messages import build, error_code, milliseconds, response_module
from eoslog.serve.security import Session

if TYPE_CHECKING:
    from eoslog.serve.server import Server

log = logging.getLogger("eoslog.serve")

_SIZE = struct.Struct(">i")
_KEY_AND_VERSION = struct.Struct(">hhi")  # api key, api version, correlation id
API_VERSIONS_KEY: Final = 18
_UNSUPPORTED_VERSION: Final = 35


# kio's request class by (api key, version), as the server meets them (kio resolves it by
# name on every call otherwise).
_REQUEST_TYPES: dict[tuple[int, int], Any] = {}


class _Refused(Exception):
    """The connection is closed: the reason is logged."""


def api_versions_table() -> list[tuple[int, int, int]]:
    """(api key, min version, max version) of every API served, as ApiVersions reports it."""
    return [(a.key, a.min_version, a.max_version) for _, a in sorted(registry.APIS.items())]


def _unsupported_api_versions(correlation_id: int) -> memoryview:
    """Kafka's answer to an ApiVersions request of a version it does not know: version 0,
    UNSUPPORTED_VERSION and the table, from which the client picks a version both know."""
    module = response_module(API_VERSIONS_KEY, 0)
    keys = tuple(
        build(module.ApiVersion, api_key=key, min_version=low, max_version=high)
        for key, low, high in api_versions_table()
    )
    response = build(
        module.ApiVersionsResponse,
        error_code=error_code(_UNSUPPORTED_VERSION),
        api_keys=keys,
        throttle_time=milliseconds(0),
    )
    return encode_response(response, correlation_id)


def encode_response(response: Any, correlation_id: int) -> memoryview:
    """The frame of `response`: its size, the response header its version takes, the body;
    a view of the buffer it was written into (a Fetch's records are copied once, into it)."""
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    header_type = type(response).__header_schema__
    entity_writer(header_type)(out, build(header_type, correlation_id=correlation_id))
    entity_writer(type(response))(out, response)
    frame = out.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - 4)
    return frame


def parse_request(frame: bytes) -> tuple[registry.Api, Any, Any] | memoryview:
    """(api, header, request) of a request frame (the bytes after the size); or, for an
    ApiVersions of a version not served, the bytes of its answer. Raises
    ProtocolViolation for anything else a correct client never sends."""
    if len(frame) < _KEY_AND_VERSION.size:
        raise registry.ProtocolViolation(f"a request of {len(frame)} bytes has no header")
    key, version, correlation_id = _KEY_AND_VERSION.unpack_from(frame)
    api = registry.APIS.get(key)
    if api is None or not api.min_version <= version <= api.max_version:
        if key == API_VERSIONS_KEY:
            return _unsupported_api_versions(correlation_id)
        raise registry.ProtocolViolation(f"API {key} version {version} is not served")
    request_type = _REQUEST_TYPES.get((key, version))
    if request_type is None:
        request_type = _REQUEST_TYPES[(key, version)] = load_request_schema(key, version)
    check_sizes(request_type, frame)  # before kio sizes a buffer from a count
    try:
        header, used = entity_reader(request_type.__header_schema__)(frame, 0)
        request, _ = entity_reader(request_type)(frame, used)
    except Exception as error:  # kio raises whatever its readers meet (struct, unicode, ...)
        raise registry.ProtocolViolation(
            f"API {key} v{version} does not parse: {type(error).__name__}: {error}"
        ) from error
    # Bytes after the request are ignored, as Kafka's parser ignores them: librdkafka 2.16
    # sends three after some Metadata v12 requests.
    return api, header, request


class Connection:
    """Reads requests from one client and answers them in order. Runs on the server's loop."""

    def __init__(
        self, server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._server = server
        self._reader = reader
        self._writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        limits = server.limits
        self._request_bytes_max = limits.request_bytes_max
        self._queued_bytes_max = limits.queued_bytes_max
        self._queued_requests_max = limits.queued_requests_max
        # Frames read ahead of the one being served; None ends them (the client closed, or
        # `_broken` says which rule it broke). Bounded by the condition below, not by the
        # queue, so that the end can always be put.
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._queued_bytes = 0
        self._drained = asyncio.Condition()
        self._broken: _Refused | None = None
        # Answers in request order: bytes, None (no response) or a Later's future; None
        # ends them. Bounded like the read-ahead, so a client that does not read its
        # answers stops being served.
        self._answers: asyncio.Queue[Any] = asyncio.Queue(limits.queued_requests_max)
        self._unanswered = 0
        # Set while no request is being served or waits for its answer to be written
        # (Server.close waits for it).
        self.idle = asyncio.Event()
        self.idle.set()
        self._session = Session(server.security)

    async def run(self) -> None:
        """Serve the connection until the client closes it, it breaks a rule, or the server
        stops; then close it."""
        reading = asyncio.ensure_future(self._read_requests())
        writing = asyncio.ensure_future(self._write_answers())
        serving = asyncio.ensure_future(self._serve_requests())
        try:
            done, _ = await asyncio.wait({serving, writing}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # a rule broken on either side ends the connection
            if serving in done:  # the client is done: answer what it asked, then close
                await self._answers.put(_END)
                await writing
        except _Refused as refused:
            log.warning("closing the connection from %s: %s", self.peer, refused)
        except ConnectionError:
            pass  # the client went away: nothing of an unanswered request was applied
        finally:
            for task in (reading, serving, writing):
                task.cancel()
            self._writer.close()
            await asyncio.gather(reading, serving, writing, return_exceptions=True)
            while not self._answers.empty():
                pending = self._answers.get_nowait()
                if isinstance(pending, asyncio.Future):
                    pending.cancel()
            self.idle.set()  # nothing more will be answered

    def stop(self) -> None:
        """End the connection once the request being served is answered: the requests
        read ahead are refused (the connection closes). Loop thread."""
        self._queue.put_nowait(None)

    def _room_for(self, size: int) -> bool:
        if self._queue.qsize() >= self._queued_requests_max:
            return False
        return self._queued_bytes == 0 or self._queued_bytes + size <= self._queued_bytes_max

    async def _read_requests(self) -> None:
        try:
            while True:
                try:
                    prefix = await self._reader.readexactly(4)
                except asyncio.IncompleteReadError as end:
                    if end.partial:
                        self._broken = _Refused("the connection ended inside a size prefix")
                    return
                (size,) = _SIZE.unpack(prefix)
                if not 0 < size <= self._request_bytes_max:
                    # Checked before reading: a hostile size never becomes an allocation.
                    self._broken = _Refused(
                        f"request size {size} is outside 1..{self._request_bytes_max} "
                        "(socket.request.max.bytes)"
                    )
                    return
                async with self._drained:
                    await self._drained.wait_for(functools.partial(self._room_for, size))
                    self._queued_bytes += size
                try:
                    frame = await self._reader.readexactly(size)
                except asyncio.IncompleteReadError:
                    self._broken = _Refused(f"the connection ended inside a {size}-byte request")
                    return
                self._queue.put_nowait(frame)
        except ConnectionError:
            return
        finally:
            self._queue.put_nowait(None)

    async def _serve_requests(self) -> None:
        while True:
            frame = await self._queue.get()
            if frame is None:
                if self._broken is not None:
                    raise self._broken
                return
            async with self._drained:
                self._queued_bytes -= len(frame)
                self._drained.notify_all()
            if self._server.stopping:
                # Refused: the connection closes once the answers owed are written.
                log.info("refusing the requests of %s read ahead: stopping", self.peer)
                return
            self._unanswered += 1
            self.idle.clear()
            answer = await self._answer(frame)
            await self._answers.put(answer)
            if self._session.closing:  # a failed SASL step: its answer is the last
                log.warning("closing the connection from %s: SASL failed", self.peer)
                return

    async def _write_answers(self) -> None:
        """Write the answers in request order, each once it is ready."""
        while True:
            answer = await self._answers.get()
            if answer is _END:
                return
            if isinstance(answer, asyncio.Future):
                try:
                    response, correlation_id = await answer
                except registry.ProtocolViolation as violation:
                    raise _Refused(str(violation)) from violation
                answer = None if response is None else encode_response(response, correlation_id)
            if answer is not None:
                self._writer.write(answer)
                await self._writer.drain()
            self._unanswered -= 1
            if self._unanswered == 0:
                self.idle.set()

    async def _answer(self, frame: bytes) -> memoryview | asyncio.Future[tuple[Any, int]] | None:
        try:
            parsed = parse_request(frame)
        except registry.ProtocolViolation as violation:
            raise _Refused(str(violation)) from violation
        if isinstance(parsed, memoryview):
            return parsed
        api, header, request = parsed
        if not self._session.allows(api.key):
            raise _Refused(f"API {api.key} before SASL authentication")
        context = self._server.context(self.peer, header.client_id, self._session)
        try:
            response = await api.handler(context, request)
        except registry.ProtocolViolation as violation:
            raise _Refused(f"API {api.key}: {violation}") from violation
        except Exception as error:  # a handler's bug: this connection ends, the server runs on
            log.exception("API %d v%d from %s failed", api.key, request.__version__, self.peer)
            raise _Refused(f"API {api.key} failed: {error}") from error
        if isinstance(response, registry.Later):
            return asyncio.ensure_future(_with_id(response.response, header.correlation_id))
        if response is None:
            return None
        return encode_response(response, header.correlation_id)


async def _with_id(response: asyncio.Future[Any], correlation_id: int) -> tuple[Any, int]:
    return await response, correlation_id


_END: Final = object()  # ends the answers
