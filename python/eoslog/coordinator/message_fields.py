"""Kafka's generated-message field encoding, as the internal topics' records use it
(`__transaction_state`, `__consumer_offsets`): fixed-width big-endian integers, strings with
an int16 length (or, in flexible versions, an unsigned varint of length + 1), arrays with an
int32 count (flexible: varint count + 1), and tagged-field sections. One definition shared by
eoslog.coordinator.transaction_log and eoslog.coordinator.offsets_log (docs/style.md rule 1).

Every function here is pure and thread-safe. Encoders raise ValueError for a value that does
not fit its field; the Reader raises the corruption error its caller names (a ValueError).
"""

from __future__ import annotations

import struct
from typing import Final

from eoslog.errors import KafkaException
from eoslog.record.pyprimitives import VARINT_BYTES_MAX

INT8: Final = struct.Struct(">b")
INT16: Final = struct.Struct(">h")
INT32: Final = struct.Struct(">i")
INT64: Final = struct.Struct(">q")
STRING_BYTES_MAX: Final = (1 << 15) - 1  # Kafka strings carry an int16 length


def pack(kind: struct.Struct, value: int, name: str) -> bytes:
    try:
        return kind.pack(value)
    except struct.error:
        raise ValueError(f"{name} = {value} does not fit a {kind.size}-byte integer") from None


def uvarint(value: int) -> bytes:
    """Kafka's unsigned varint (ByteUtils.writeUnsignedVarint): 7 bits a byte, low first."""
    if 0 <= value < 0x80:
        return _SMALL_UVARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# One byte each: the common case (counts, sizes, tags), without building a bytearray.
_SMALL_UVARINTS: Final = tuple(bytes((value,)) for value in range(0x80))


def string(text: str, flexible: bool) -> bytes:
    data = text.encode("utf-8")
    if len(data) > STRING_BYTES_MAX:
        raise ValueError(f"string of {len(data)} UTF-8 bytes is longer than {STRING_BYTES_MAX}")
    return (uvarint(len(data) + 1) if flexible else INT16.pack(len(data))) + data


def array_count(count: int | None, flexible: bool) -> bytes:
    if flexible:
        return uvarint(0 if count is None else count + 1)
    return INT32.pack(-1 if count is None else count)


class Reader:
    """A cursor over one key or value; every read checks the bytes are there, and a problem
    raises `error` (a KafkaException class) naming `what`."""

    __slots__ = ("_data", "_error", "_position", "_what")

    def __init__(self, data: bytes, what: str, error: type[KafkaException]) -> None:
        self._data = bytes(data)
        self._position = 0
        self._what = what
        self._error = error

    def corrupt(self, problem: str) -> KafkaException:
        return self._error(f"{self._what}: {problem} (at byte {self._position})")

    def take(self, size: int) -> bytes:
        start = self._position
        self.skip(size)
        return self._data[start : self._position]

    def skip(self, size: int) -> None:
        """take() without the copy (a request's record bytes, walked past)."""
        end = self._position + size
        if size < 0 or end > len(self._data):
            raise self.corrupt(f"truncated: {size} more bytes needed")
        self._position = end

    @property
    def position(self) -> int:
        return self._position

    def fixed(self, kind: struct.Struct) -> int:
        value: int = kind.unpack(self.take(kind.size))[0]
        return value

    def uvarint(self) -> int:
        value = 0
        for index in range(VARINT_BYTES_MAX):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << (7 * index)
            if not byte & 0x80:
                return value
        raise self.corrupt("malformed unsigned varint")

    def array_count(self, flexible: bool) -> int | None:
        count = self.uvarint() - 1 if flexible else self.fixed(INT32)
        if count < -1:
            raise self.corrupt(f"negative array length {count}")
        # Every element takes at least one byte, so a count past the bytes left is a lie.
        if count > len(self._data) - self._position:
            raise self.corrupt(f"array of {count} elements is longer than the bytes left")
        return None if count == -1 else count

    def string(self, flexible: bool) -> str:
        length = self.uvarint() - 1 if flexible else self.fixed(INT16)
        if length < 0:
            raise self.corrupt("null or negative length for a non-nullable string")
        try:
            return self.take(length).decode("utf-8")
        except UnicodeDecodeError:
            raise self.corrupt("string is not UTF-8") from None

    def skip_tagged_fields(self) -> None:
        """A tagged-field section none of whose tags this version knows (a struct's own)."""
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def finish(self) -> None:
        if self._position != len(self._data):
            raise self.corrupt(f"{len(self._data) - self._position} trailing bytes")
