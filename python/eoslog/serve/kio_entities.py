"""Building kio response entities of any version (eoslog.serve handlers).

A kio entity class is one version of one message: its fields are exactly that version's, and
a nested entity (a topic of a response, a member of a group) is another class of the same
version. `make` builds an entity from the values a handler has, dropping those its version
lacks, so one handler serves every version; `element` finds the nested class a list field
holds. Thread-safe (what is read of a class is cached; a race computes the same value twice).
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from typing import Any, Final

from kio.schema.errors import ErrorCode

NO_THROTTLE: Final = datetime.timedelta(0)


_FIELD_NAMES: dict[type[Any], frozenset[str]] = {}
_ELEMENTS: dict[tuple[type[Any], str], type[Any]] = {}


def _field_names(entity: type[Any]) -> frozenset[str]:
    names = _FIELD_NAMES.get(entity)
    if names is None:  # two threads may both compute it: the same value
        names = _FIELD_NAMES[entity] = frozenset(f.name for f in dataclasses.fields(entity))
    return names


def make(entity: type[Any], **values: Any) -> Any:
    """An instance of kio class `entity` from `values`, those it has no field for dropped;
    "error_code" is converted to kio's ErrorCode and "throttle_time" defaults to none."""
    names = _field_names(entity)
    if "throttle_time" in names:
        values.setdefault("throttle_time", NO_THROTTLE)
    if "error_code" in values:
        values["error_code"] = ErrorCode(values["error_code"])
    return entity(**{name: value for name, value in values.items() if name in names})


def element(entity: type[Any], name: str) -> type[Any]:
    """The entity class the list field `name` of `entity` holds (tuple[X, ...], maybe
    optional)."""
    found = _ELEMENTS.get((entity, name))
    if found is None:
        found = _ELEMENTS[(entity, name)] = _element(entity, name)
    return found


def _element(entity: type[Any], name: str) -> type[Any]:
    hint = typing.get_type_hints(entity)[name]
    if isinstance(hint, types.UnionType):
        hint = next(arm for arm in typing.get_args(hint) if arm is not type(None))
    inner = typing.get_args(hint)[0]
    assert isinstance(inner, type), f"{entity.__name__}.{name} holds {inner!r}"
    return inner


def has_field(entity: object, name: str) -> bool:
    """Whether the version `entity` (a kio instance) is of has the field `name`."""
    return name in _field_names(type(entity))


def milliseconds(value: datetime.timedelta) -> int:
    return value // datetime.timedelta(milliseconds=1)
