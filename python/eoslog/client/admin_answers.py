"""What every AdminClient call shares (eoslog.client.admin and the modules it draws on): the
argument checks confluent makes at the call, and the futures the answers go in, already done
(the work runs before the call returns).

Thread safety: pure functions; any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from eoslog.arguments import real
from eoslog.client.admin_types import Node
from eoslog.client.metadata import NO_PORT, NODE_ID
from eoslog.errors import KafkaError, KafkaException

_V = TypeVar("_V")


def answered(work: Callable[..., _V], *args: Any) -> Future[_V]:
    """A Future already holding work(*args)'s result, or the KafkaException it raised."""
    future: Future[_V] = Future()
    try:
        future.set_result(work(*args))
    except KafkaException as error:
        future.set_exception(error)
    return future


def refused(code: int, reason: str) -> KafkaException:
    return KafkaException(KafkaError(code, reason))


def check_options(call: str, given: Mapping[str, object], allowed: Iterable[str]) -> None:
    """confluent's refusal of a keyword the call does not take; timeouts must be numbers."""
    for name, value in given.items():
        if name not in allowed:
            raise TypeError(f"'{name}' is an invalid keyword argument for {call}()")
        if name.endswith("_timeout"):
            real(name, value)


def non_empty_list(value: object, kind: type, what: str) -> list[Any]:
    """A non-empty list of `kind` (TypeError for another type, ValueError when empty)."""
    if not isinstance(value, list):
        raise TypeError(f"Expected list of {what}, not {type(value).__name__}")
    if not value:
        raise ValueError(f"Expected non-empty list of {what}")
    for item in value:
        if not isinstance(item, kind):
            raise TypeError(f"Expected list of {what}, found {type(item).__name__}")
    return value


def node() -> Node:
    """The one node of a log directory (eoslog.client.metadata)."""
    return Node(NODE_ID, "", NO_PORT)
