"""A walk over a request's bytes, before kio parses them, that every length and count in it
fits in the bytes that follow (docs/design.md "Wire protocol").

kio's native reader sizes its buffers from the counts it reads: a request of a few bytes
claiming an array of two billion entries makes it allocate gigabytes, and a failed
allocation aborts the whole process (found by the wire_stream fuzz target). This walk follows
the same schema (kio's entity classes: field order, `kafka_type`, flexible versions, tagged
fields) with eoslog.coordinator.message_fields.Reader, allocating nothing, and raises
ProtocolViolation at the first length or count past the end, or at a null in a field the
schema does not make nullable (Kafka's parser refuses it; kio would hand on a None). kio then
only ever reads a request whose sizes are bounded by its frame.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from types import NoneType, UnionType
from typing import Any, Final

from eoslog.coordinator.message_fields import INT8, INT16, INT32, Reader
from eoslog.errors import InvalidRequestError
from eoslog.serve.registry import ProtocolViolation

# A walker moves a Reader past one value.
Walker = Callable[[Reader], None]

_FIXED: Final = {
    "int8": 1, "uint8": 1, "bool": 1, "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4, "int64": 8, "uint64": 8, "float64": 8,
    "timedelta_i64": 8, "datetime_i64": 8, "uuid": 16,
}  # fmt: skip


def _null(reader: Reader, nullable: bool) -> None:
    if not nullable:
        raise reader.corrupt("a null for a field that cannot be null")


def _blob(compact: bool, wide: bool, nullable: bool) -> Walker:
    def walk(reader: Reader) -> None:
        size = reader.uvarint() - 1 if compact else reader.fixed(INT32 if wide else INT16)
        if size == -1:
            _null(reader, nullable)
        else:
            reader.skip(size)

    return walk


def _fixed(size: int) -> Walker:
    return lambda reader: reader.skip(size)


def _array(element: Walker, compact: bool, nullable: bool) -> Walker:
    def walk(reader: Reader) -> None:
        count = reader.array_count(compact)  # no more elements than bytes left
        if count is None:
            _null(reader, nullable)
            return
        for _ in range(count):
            element(reader)

    return walk


def _nullable_entity(entity: Walker) -> Walker:
    def walk(reader: Reader) -> None:
        if reader.fixed(INT8) != -1:
            entity(reader)

    return walk


def _field_walker(hint: Any, kafka_type: str | None, flexible: bool, header: bool) -> Walker:
    optional = False
    if isinstance(hint, UnionType):
        arms = [arm for arm in typing.get_args(hint) if arm is not NoneType]
        optional, hint = True, arms[0]
    is_array = typing.get_origin(hint) is tuple
    inner = typing.get_args(hint)[0] if is_array else hint
    if is_dataclass(inner):
        element = entity_walker(typing.cast(type, inner))
        if optional and not is_array:
            element = _nullable_entity(element)
    elif kafka_type in _FIXED:
        element = _fixed(_FIXED[kafka_type])
    else:  # string, bytes, records; a header's client id is always a legacy string
        nullable = isinstance(inner, UnionType) if is_array else optional
        element = _blob(flexible and not header, kafka_type != "string", nullable)
    return _array(element, flexible, optional) if is_array else element


@functools.cache
def entity_walker(entity_type: Any) -> Walker:
    """The walker of one kio entity class (a request, its header, a nested entity)."""
    flexible = bool(entity_type.__flexible__)
    header = entity_type.__name__ == "RequestHeader"
    hints = typing.get_type_hints(entity_type)
    inline: list[Walker] = []
    tagged: dict[int, Walker] = {}
    for field in fields(entity_type):
        kafka_type = field.metadata.get("kafka_type")
        walker = _field_walker(hints[field.name], kafka_type, flexible, header)
        tag = field.metadata.get("tag")
        if tag is None:
            inline.append(walker)
        else:
            tagged[tag] = walker

    def walk(reader: Reader) -> None:
        for walker in inline:
            walker(reader)
        if not flexible:
            return
        # Each tagged field takes at least two bytes, so a lying count runs out of them.
        for _ in range(reader.uvarint()):
            tag, size = reader.uvarint(), reader.uvarint()
            end = reader.position + size
            if tag in tagged:
                tagged[tag](reader)
                if reader.position != end:
                    raise reader.corrupt(f"tagged field {tag} does not fill its {size} bytes")
            else:
                reader.skip(size)

    return walk


def check_sizes(request_type: Any, frame: bytes) -> None:
    """ProtocolViolation unless every size in the header and body of `frame` fits."""
    reader = Reader(frame, "the request", InvalidRequestError)
    try:
        entity_walker(request_type.__header_schema__)(reader)
        entity_walker(request_type)(reader)
    except InvalidRequestError as error:
        raise ProtocolViolation(str(error)) from error
