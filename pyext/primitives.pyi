"""CRC-32C and zigzag varints (docs/format.md §1.1, §2.1).

Implemented by eoslog._ext.primitives (C, engine/) and eoslog.record.pyprimitives (pure Python
twin); both behave identically, and tests run against both.
"""

import numpy as np
import numpy.typing as npt
from typing_extensions import Buffer

def crc32c(data: Buffer, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of data, continuing from a previous result `crc` (0 to start).

    crc32c(b"123456789") == 0xE3069283; crc32c(b, crc32c(a)) == crc32c(a + b).
    """

def crc32c_backend() -> str:
    """Which implementation runs: "sse4.2" (hardware, self-checked), "portable" or "python"."""

def encode_varint(value: int) -> bytes:
    """Zigzag + LEB128 encoding of a signed 32-bit value (1-5 bytes). ValueError outside int32."""

def encode_varlong(value: int) -> bytes:
    """Zigzag + LEB128 encoding of a signed 64-bit value (1-10 bytes). ValueError outside int64."""

def decode_varint(data: Buffer, position: int = 0) -> tuple[int, int]:
    """(value, next position). InvalidRecordError (status BAD_VARINT) if the bytes run out or a
    5th byte still has its continuation bit; bits past bit 31 of a 5th byte are dropped, as
    Kafka's ByteUtils.readUnsignedVarint drops them."""

def decode_varlong(data: Buffer, position: int = 0) -> tuple[int, int]:
    """(value, next position); at most 10 bytes, else InvalidRecordError (BAD_VARINT)."""

def size_of_varint(value: int) -> int: ...
def size_of_varlong(value: int) -> int: ...
def murmur2(data: Buffer) -> int:
    """Kafka's murmur2 of the bytes (Utils.murmur2), as a signed int32: the hash the default
    partitioner takes of a key; partition = (murmur2(key) & 0x7fffffff) % partitions."""

def murmur2_spans(
    data: Buffer, starts: npt.ArrayLike, lengths: npt.ArrayLike
) -> npt.NDArray[np.int32]:
    """murmur2 of each span data[starts[i] : starts[i] + lengths[i]] as an int32 array; a span
    of length -1 (a null key) hashes to 0, which callers mask out. ValueError for a span
    outside data, a length below -1, or starts and lengths of different lengths."""
