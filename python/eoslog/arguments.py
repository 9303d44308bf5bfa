"""Argument checks at the call, as confluent-kafka-python's C layer makes them (docs/api.md
"Errors"): a wrong type is a TypeError naming the argument, raised before anything changes,
instead of a failure later, elsewhere, or a silently wrong result.

Each check returns the value (so a caller writes `partition = integer("partition", partition)`)
and accepts what confluent accepts: any int-like object (operator.index) for an integer, any
real number for a timeout, None where confluent allows it.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

_T = TypeVar("_T")


def _name_of(value: object) -> str:
    return type(value).__name__


def integer(name: str, value: Any) -> int:
    """value as an int (bool included, as Python's C API takes it); TypeError otherwise."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {_name_of(value)}") from None


def real(name: str, value: Any) -> float:
    """A number of seconds (int or float); TypeError for anything else, str included."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, not {_name_of(value)}")
    return float(value)


def optional_real(name: str, value: Any) -> float | None:
    return None if value is None else real(name, value)


def text(name: str, value: Any) -> str:
    """A str; TypeError otherwise (None included: a topic name is never null)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be str, not {_name_of(value)}")
    return value


def callable_or_none(name: str, value: _T) -> _T:
    """A callable or None; TypeError otherwise, at the call rather than when it is called."""
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be callable, not {_name_of(value)}")
    return value


def headers(value: Any) -> Mapping[str, Any] | Iterable[tuple[str, Any]]:
    """A dict or a list/tuple of (key, value) pairs, as confluent's produce takes them."""
    if isinstance(value, Mapping):
        return value
    if isinstance(value, list | tuple) and all(
        isinstance(pair, tuple) and len(pair) == 2 for pair in value
    ):
        return value
    raise TypeError(
        f"headers must be a dict or a list of (key, value) tuples, not {_name_of(value)}"
    )


def names(name: str, value: Any) -> list[str]:
    """A list (or tuple) of str; a lone str is refused, since iterating it gives characters."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a list of str, not {_name_of(value)}")
    items = list(value)
    for item in items:
        text(f"every item of {name}", item)
    return items


def refuse_config_as_broker(kind: str, broker: object) -> None:
    """TypeError when a confluent-style config dict is passed where eoslog's client takes the
    broker: `eoslog.{kind}({{...}})` would otherwise be accepted and fail later, elsewhere."""
    if isinstance(broker, Mapping):
        raise TypeError(
            f"{kind}(broker, config) takes the broker first: create one with "
            f"broker.{kind.lower()}(config); a dict was given as the broker"
        )
