"""CRC-32C and zigzag varints in pure Python (docs/format.md §1.1, §2.1).

The readable twin of eoslog._ext.primitives: same results, same exceptions, same messages
(contract: pyext/primitives.pyi). EOSLOG_NO_EXTENSIONS=1 selects it. Every function here is
pure and thread-safe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

# Imported as a module, not by name: eoslog.errors imports eoslog.record, which loads this
# twin while eoslog.errors is still initialising, so its names are looked up at call time.
from eoslog import errors
from eoslog.record import status

if TYPE_CHECKING:
    from typing_extensions import Buffer

INT16_MIN: Final = -(1 << 15)
INT16_MAX: Final = (1 << 15) - 1
INT32_MIN: Final = -(1 << 31)
INT32_MAX: Final = (1 << 31) - 1
INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1
UINT32_MASK: Final = 0xFFFFFFFF
UINT64_MASK: Final = 0xFFFFFFFFFFFFFFFF

# Kafka reads at most 5 bytes for a varint and 10 for a varlong (ByteUtils.readUnsignedVarint,
# readUnsignedVarlong); a longer encoding is malformed.
VARINT_BYTES_MAX: Final = 5
VARLONG_BYTES_MAX: Final = 10

# CRC-32C (Castagnoli) in its reflected form, with Kafka's (java.util.zip.CRC32C) initial value
# and final XOR of all ones.
CRC32C_POLYNOMIAL_REFLECTED: Final = 0x82F63B78
# Iterating a bytes object is the quickest byte loop CPython offers, so the CRC copies the input
# into bytes this many at a time; the bound keeps the copy small for a large mapped segment.
CRC_CHUNK_BYTES: Final = 1 << 16


def _crc32c_table() -> tuple[int, ...]:
    table = []
    for index in range(256):
        crc = index
        for _ in range(8):
            crc = (crc >> 1) ^ CRC32C_POLYNOMIAL_REFLECTED if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_CRC32C_TABLE: Final = _crc32c_table()


def byte_view(data: Buffer) -> memoryview:
    """A flat, one-byte-per-item view of any buffer, without copying it.

    TypeError if `data` does not support the buffer protocol (as memoryview() raises)."""
    view = memoryview(data)
    if view.format != "B" or view.ndim != 1:
        # A numpy array of another dtype, or a 2-D buffer, is still just bytes to the codec.
        view = view.cast("B")
    return view


def crc32c(data: Buffer, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of data, continuing from a previous result `crc` (0 to start).

    crc32c(b"123456789") == 0xE3069283; crc32c(b, crc32c(a)) == crc32c(a + b).
    ValueError if `crc` is not an unsigned 32-bit value."""
    if not 0 <= crc <= UINT32_MASK:
        raise ValueError(f"crc must be an unsigned 32-bit value, got {crc}")
    view = byte_view(data)
    table = _CRC32C_TABLE
    # Continuing a CRC means undoing the final XOR of the previous result.
    value = crc ^ UINT32_MASK
    for start in range(0, len(view), CRC_CHUNK_BYTES):
        for byte in view[start : start + CRC_CHUNK_BYTES].tobytes():
            value = table[(value ^ byte) & 0xFF] ^ (value >> 8)
    return value ^ UINT32_MASK


def crc32c_backend() -> str:
    """Which implementation runs: always "python" for this twin."""
    return "python"


def _check_int32(value: int) -> None:
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint value {value} is outside the int32 range")


def _check_int64(value: int) -> None:
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong value {value} is outside the int64 range")


def _unsigned_leb128(unsigned: int) -> bytes:
    out = bytearray()
    while unsigned >= 0x80:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zigzag + LEB128 encoding of a signed 32-bit value (1-5 bytes). ValueError outside int32."""
    _check_int32(value)
    return _unsigned_leb128(((value << 1) ^ (value >> 31)) & UINT32_MASK)


def encode_varlong(value: int) -> bytes:
    """Zigzag + LEB128 encoding of a signed 64-bit value (1-10 bytes). ValueError outside int64."""
    _check_int64(value)
    return _unsigned_leb128(((value << 1) ^ (value >> 63)) & UINT64_MASK)


def _unsigned_size(unsigned: int) -> int:
    # One byte per started group of 7 bits, and at least one byte for zero.
    return max(1, (unsigned.bit_length() + 6) // 7)


def size_of_varint(value: int) -> int:
    """Bytes encode_varint(value) takes. ValueError outside int32."""
    _check_int32(value)
    return _unsigned_size(((value << 1) ^ (value >> 31)) & UINT32_MASK)


def size_of_varlong(value: int) -> int:
    """Bytes encode_varlong(value) takes. ValueError outside int64."""
    _check_int64(value)
    return _unsigned_size(((value << 1) ^ (value >> 63)) & UINT64_MASK)


def check_position(position: int) -> None:
    """ValueError for a negative byte position (the codec twins share this rule)."""
    if position < 0:
        raise ValueError(f"position must not be negative, got {position}")


def _decode_unsigned(data: Buffer, position: int, bytes_max: int) -> tuple[int, int]:
    """(unsigned value, next position) of the LEB128 group at `position`; BAD_VARINT if the
    bytes run out or the encoding is longer than bytes_max. Bits past the value's width are
    left for the caller to mask off."""
    check_position(position)
    view = byte_view(data)
    end = min(len(view), position + bytes_max)
    unsigned = 0
    shift = 0
    cursor = position
    while cursor < end:
        byte = view[cursor]
        cursor += 1
        unsigned |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return unsigned, cursor
        shift += 7
    # Either the buffer ended inside the varint or the last allowed byte still continued.
    errors.raise_for_status(status.BAD_VARINT, position)


def decode_varint(data: Buffer, position: int = 0) -> tuple[int, int]:
    """(value, next position). InvalidRecordError (status BAD_VARINT) if the bytes run out or a
    5th byte still has its continuation bit; bits past bit 31 of a 5th byte are dropped, as
    Kafka's ByteUtils.readUnsignedVarint drops them. ValueError for a negative position."""
    unsigned, cursor = _decode_unsigned(data, position, VARINT_BYTES_MAX)
    unsigned &= UINT32_MASK
    return (unsigned >> 1) ^ -(unsigned & 1), cursor


def decode_varlong(data: Buffer, position: int = 0) -> tuple[int, int]:
    """(value, next position); at most 10 bytes, else InvalidRecordError (BAD_VARINT). Bits
    past bit 63 of a 10th byte are dropped, as Kafka's readUnsignedVarlong drops them.
    ValueError for a negative position."""
    unsigned, cursor = _decode_unsigned(data, position, VARLONG_BYTES_MAX)
    unsigned &= UINT64_MASK
    return (unsigned >> 1) ^ -(unsigned & 1), cursor


# Kafka's murmur2 constants (Utils.murmur2): seed and multiplier.
MURMUR2_SEED: Final = 0x9747B28C
MURMUR2_M: Final = 0x5BD1E995


def murmur2(data: Buffer) -> int:
    """Kafka's murmur2 of the bytes (Utils.murmur2), as a signed int32: the hash the default
    partitioner takes of a key; partition = (murmur2(key) & 0x7fffffff) % partitions.
    Java's wrapping int arithmetic is done in Python ints masked to 32 bits."""
    raw = byte_view(data).tobytes()
    length = len(raw)
    m = MURMUR2_M
    h = (MURMUR2_SEED ^ length) & UINT32_MASK
    blocks = length // 4
    for i in range(blocks):
        k = int.from_bytes(raw[4 * i : 4 * i + 4], "little")
        k = (k * m) & UINT32_MASK
        k ^= k >> 24
        k = (k * m) & UINT32_MASK
        h = ((h * m) & UINT32_MASK) ^ k
    tail = raw[4 * blocks :]
    if tail:
        # Java's switch falls through from the highest remaining byte down to the first.
        for shift, byte in reversed(list(enumerate(tail))):
            h ^= byte << (8 * shift)
        h = (h * m) & UINT32_MASK
    h ^= h >> 13
    h = (h * m) & UINT32_MASK
    h ^= h >> 15
    return h - (1 << 32) if h > INT32_MAX else h


def murmur2_spans(
    data: Buffer, starts: npt.ArrayLike, lengths: npt.ArrayLike
) -> npt.NDArray[np.int32]:
    """murmur2 of each span data[starts[i] : starts[i] + lengths[i]] as an int32 array; a span
    of length -1 (a null key) hashes to 0, which callers mask out. ValueError for a span
    outside data, a length below -1, or starts and lengths of different lengths."""
    view = byte_view(data)
    start_array = np.asarray(starts, dtype=np.int64)
    length_array = np.asarray(lengths, dtype=np.int32)
    if len(start_array) != len(length_array):
        raise ValueError(
            f"starts and lengths must have the same length, got {len(start_array)} and "
            f"{len(length_array)}"
        )
    check_spans(len(view), start_array, length_array)
    out = np.zeros(len(start_array), dtype=np.int32)
    for i, (start, length) in enumerate(
        zip(start_array.tolist(), length_array.tolist(), strict=True)
    ):
        if length >= 0:
            out[i] = murmur2(view[start : start + length])
    return out


def check_spans(size: int, starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int32]) -> None:
    """ValueError unless every span lies inside [0, size) (length -1 is a null)."""
    for i, (start, length) in enumerate(zip(starts.tolist(), lengths.tolist(), strict=True)):
        if length < -1 or (length >= 0 and (start < 0 or start > size - length)):
            raise ValueError(
                f"span {i} (start {start}, length {length}) lies outside the {size} bytes of data"
            )
