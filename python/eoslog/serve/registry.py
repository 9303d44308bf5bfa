"""The wire front end's table of Kafka APIs (docs/design.md "Wire protocol").

Every API `eoslog serve` answers is one handler registered here with the versions it serves;
ApiVersions reports exactly this table, so an API with no handler is simply absent and a
client never sends it. The message types are kio's, generated from Kafka's own JSON schemas:
a handler receives the request entity of the version the client sent and returns the
response entity of the same version (`response_type` gives it), or None when the request
wants no response (Produce with acks=0), or a `Later` holding a future of either (a
Produce waiting for its fsync while the connection's next request starts).

Handlers are coroutines run on the server's event loop. They must not block it: engine calls
that may wait (an fsync, a lock another thread holds, a wait for new data) go through
`Context.call`, which runs them on the server's worker threads. A handler that meets input it
cannot serve raises `ProtocolViolation` (the connection is closed, nothing changed) or
answers with the Kafka error code the request deserves.

Handler modules register themselves at import (the `api` decorator); the server imports
every module named in `HANDLER_MODULES` before it listens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

from kio.index import load_response_schema

if TYPE_CHECKING:
    from eoslog.broker import Broker
    from eoslog.serve.security import Session

T = TypeVar("T")

# The modules whose import registers handlers, in the order the server imports them.
HANDLER_MODULES: list[str] = [
    "eoslog.serve.data_apis",
    "eoslog.serve.fetch_api",
    "eoslog.serve.admin_apis",
    "eoslog.serve.group_apis",
    "eoslog.serve.offset_apis",
    "eoslog.serve.txn_apis",
    "eoslog.serve.txn_admin_apis",
    "eoslog.serve.sasl_apis",
]


class ProtocolViolation(Exception):
    """A request no correct client sends (bad framing, an impossible field): the server logs it,
    closes that connection and changes nothing."""


async def _no_wait(_generation: int, _timeout_s: float) -> bool:
    return False


@dataclass(slots=True)
class Context:
    """What a handler knows about the server and the connection its request came on."""

    broker: Broker
    node_id: int
    host: str  # the advertised host and port clients are told to connect to
    port: int
    peer: str  # "host:port" of the client
    client_id: str | None
    # Runs a blocking engine call on the server's worker threads and awaits its result.
    call: Callable[..., Awaitable[Any]]
    # wait_for_append(generation, timeout_s): awaits until the broker's AppendSignal
    # (eoslog.log.append_signal) is past `generation`, timeout_s passes or the server stops;
    # whether it moved. Waits on the loop, holding no worker thread. The default (for a
    # Context made outside a server, as in a handler's unit test) does not wait.
    wait_for_append: Callable[[int, float], Awaitable[bool]] = field(default=_no_wait)
    # The connection's SASL state (eoslog.serve.security); None outside a server.
    session: Session | None = None


@dataclass(frozen=True, slots=True)
class Later:
    """A handler's answer that is ready once `response` completes (it returns the response
    entity, or None for no response). The handler has applied its request when it returns
    this; what remains (a wait for an fsync) may overlap the next request of the connection,
    whose effects still come after this one's. Answers still go out in request order."""

    response: asyncio.Future[Any]


Handler = Callable[[Context, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    min_version: int
    max_version: int
    handler: Handler


APIS: Final[dict[int, Api]] = {}


def api(key: int, min_version: int, max_version: int) -> Callable[[Handler], Handler]:
    """Register the decorated coroutine as the handler of API `key` for versions
    min_version..max_version (inclusive)."""

    def register(handler: Handler) -> Handler:
        if key in APIS:
            raise RuntimeError(f"API key {key} has two handlers")
        if not 0 <= min_version <= max_version:
            raise ValueError(f"bad version range {min_version}..{max_version} for API {key}")
        APIS[key] = Api(key, min_version, max_version, handler)
        return handler

    return register


def response_type(request: Any) -> type[Any]:
    """The kio response class answering `request` (same API key, same version)."""
    return load_response_schema(int(request.__api_key__), int(request.__version__))
