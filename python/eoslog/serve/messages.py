"""Building kio's message entities for whatever version a client sent, and the values they
hold (error codes, durations), so a handler writes one answer for every version it serves.

kio generates one module per API version, each with its own dataclasses; a field a version
lacks is not a parameter of its class. `build` takes the fields a handler knows and keeps
those the version has, so a handler names the newest fields and older versions drop them.
"""

from __future__ import annotations

import datetime
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import fields
from typing import Any

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from eoslog.errors import KafkaError, KafkaException

# Kafka's UNKNOWN_SERVER_ERROR: what a broker answers for a failure with no code of its own.
UNKNOWN_SERVER_ERROR = -1
NO_THROTTLE = datetime.timedelta(0)


_RESPONSE_MODULES: dict[tuple[int, int], Any] = {}


def response_module(api_key: int, version: int) -> Any:
    """kio's module of the response of API `api_key` at `version` (its classes by name)."""
    module = _RESPONSE_MODULES.get((api_key, version))
    if module is None:
        module = load_payload_module(api_key, version, EntityType.response)
        _RESPONSE_MODULES[(api_key, version)] = module
    return module


_FIELD_NAMES: dict[type[Any], frozenset[str]] = {}


def _field_names(entity_type: type[Any]) -> frozenset[str]:
    names = _FIELD_NAMES.get(entity_type)
    if names is None:
        names = _FIELD_NAMES[entity_type] = frozenset(field.name for field in fields(entity_type))
    return names


def build(entity_type: type[Any], **values: Any) -> Any:
    """An entity of `entity_type` from those of `values` its version has; the others are
    dropped (a newer version's field). A field the version has but `values` lacks takes its
    schema default, or raises TypeError if it has none (a handler's bug)."""
    names = _field_names(entity_type)
    return entity_type(**{name: value for name, value in values.items() if name in names})


def by_topic(
    topic_type: type[Any],
    topics: Iterable[Any],
    rows: Iterable[Iterable[Any]],
    answer: Callable[[Any, Any], Any],
    *,
    name_field: str = "name",
    partitions_field: str = "partitions",
    request_partitions: str = "partitions",
) -> tuple[Any, ...]:
    """A response's topic entities answering the request's `topics`, from `rows` (one row
    per topic, one answer per partition): each topic's name under `name_field` (the same
    field in request and response) and its partitions under `partitions_field`, each built
    by answer(the request's partition, its answer); the request's partitions are under
    `request_partitions`."""
    return tuple(
        build(
            topic_type,
            **{
                name_field: getattr(topic, name_field),
                partitions_field: tuple(
                    answer(partition, found)
                    for partition, found in zip(
                        getattr(topic, request_partitions), row, strict=True
                    )
                ),
            },
        )
        for topic, row in zip(topics, rows, strict=True)
    )


_ELEMENTS: dict[tuple[type[Any], str], type[Any]] = {}


def element(entity_type: type[Any], name: str) -> type[Any]:
    """The entity class the list field `name` of `entity_type` holds (tuple[X, ...], maybe
    optional): the nested type of the same version, whatever kio named it there."""
    found = _ELEMENTS.get((entity_type, name))
    if found is None:
        hint = typing.get_type_hints(entity_type)[name]
        if isinstance(hint, types.UnionType):
            hint = next(arm for arm in typing.get_args(hint) if arm is not type(None))
        found = typing.get_args(hint)[0]
        assert isinstance(found, type), f"{entity_type.__name__}.{name} holds {found!r}"
        _ELEMENTS[(entity_type, name)] = found
    return found


def has_field(entity_type: type[Any], name: str) -> bool:
    return name in _field_names(entity_type)


def error_code(code: int) -> ErrorCode:
    """kio's value of a Kafka error code; a code kio does not know (none from Kafka's
    protocol should be) or one of librdkafka's local codes becomes UNKNOWN_SERVER_ERROR."""
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode(UNKNOWN_SERVER_ERROR)


def code_of(error: KafkaException) -> int:
    """The Kafka protocol code an eoslog error stands for (eoslog.error_codes). librdkafka's
    local codes (negative, below -1) have no protocol meaning: an invalid argument is the
    request's fault (INVALID_REQUEST), any other UNKNOWN_SERVER_ERROR."""
    code = error.error.code()
    if code == KafkaError._INVALID_ARG:
        return KafkaError.INVALID_REQUEST
    return code if code >= UNKNOWN_SERVER_ERROR else UNKNOWN_SERVER_ERROR


def milliseconds(value: int) -> datetime.timedelta:
    """kio's duration fields (throttle time, timeouts) from milliseconds."""
    return datetime.timedelta(milliseconds=value)


def to_milliseconds(value: datetime.timedelta) -> int:
    return round(value.total_seconds() * 1000)
