"""Kafka's four codecs for a batch's records section (docs/format.md §4), for both codec twins,
the builders and the readers: one call per batch, no per-record Python.

- gzip: an RFC 1952 stream, as the JDK's GZIPOutputStream writes it (members may follow one
  another, as GZIPInputStream reads them).
- snappy: written in the xerial snappy-java stream format Kafka's Java producer writes (a 16-byte
  header, then [int32 BE length][raw snappy block] chunks of 32 KiB of input); read in that
  format or as one raw snappy block, which is what librdkafka writes and what snappy-java's
  reader falls back to when the header is absent.
- lz4: Kafka's own LZ4 framing (lz4frame).
- zstd: standard zstd frames (zstd-jni's streams; frames may follow one another).

gzip, snappy and zstd use the reference libraries (zlib, snappy, libzstd) bundled in pyarrow,
which eoslog depends on already; lz4 uses the `lz4` package through lz4frame. Decompression is
bounded: the output is produced DECOMPRESS_PIECE_BYTES at a time (gzip, zstd) or its size is
read from the block headers before anything is allocated (snappy), so a decompression bomb
allocates at most its limit plus one piece before DECOMPRESSED_TOO_LARGE.

Status inside, exceptions outside (docs/style.md rule 4): decompress returns a status code for
bad bytes and never raises; the caller turns it into an exception naming the batch. Every
function is pure and thread-safe.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow as pa

from eoslog.record import layout, lz4frame, status

if TYPE_CHECKING:
    from typing_extensions import Buffer

# The producer's compression.type names, by codec id (docs/format.md §1.1 attributes bits 0-2).
CODEC_NAMES: Final = {
    "none": layout.COMPRESSION_NONE,
    "gzip": layout.COMPRESSION_GZIP,
    "snappy": layout.COMPRESSION_SNAPPY,
    "lz4": layout.COMPRESSION_LZ4,
    "zstd": layout.COMPRESSION_ZSTD,
}
# A level of -1 asks for the codec's default: Kafka's (KIP-390: gzip -1 is the JDK default, 6;
# zstd 3; lz4 0, lz4frame's fast mode). snappy has no levels.
LEVEL_DEFAULT: Final = -1
_DEFAULT_LEVEL: Final = {
    layout.COMPRESSION_GZIP: 6,
    layout.COMPRESSION_LZ4: 0,
    layout.COMPRESSION_ZSTD: 3,
}
# The levels each codec has. A level above its codec's highest is lowered to it, as librdkafka
# does with compression.level (one key for every codec); gzip 0 stores, zstd 0 is its default.
LEVEL_RANGES: Final = {
    layout.COMPRESSION_GZIP: (0, 9),
    layout.COMPRESSION_LZ4: (0, 12),
    layout.COMPRESSION_ZSTD: (0, 22),
}

_STREAM_CODECS: Final = {layout.COMPRESSION_GZIP: "gzip", layout.COMPRESSION_ZSTD: "zstd"}
DECOMPRESS_PIECE_BYTES: Final = lz4frame.DECOMPRESS_PIECE_BYTES
# The first piece is smaller: most records sections decompress to less than this.
_FIRST_PIECE_BYTES: Final = 64 * 1024
_GZIP_MAGIC: Final = b"\x1f\x8b"

# snappy-java's stream header: magic, then version and minimum compatible version (int32 BE).
XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
XERIAL_HEADER: Final = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_BYTES: Final = 32 * 1024
_INT32: Final = struct.Struct(">i")
# A raw snappy block starts with its uncompressed length as a varint of at most 5 bytes.
_VARINT32_BYTES_MAX: Final = 5


def codec_level(codec: int, level: int) -> int:
    """The level `codec` (1-4) compresses at for a requested `level`: LEVEL_DEFAULT (-1) is the
    codec's default, a level past the codec's highest is its highest (librdkafka's rule for
    compression.level), snappy has none (0). ValueError below -1 or for an unknown codec."""
    if codec not in CODEC_NAMES.values() or codec == layout.COMPRESSION_NONE:
        raise ValueError(f"codec {codec} is not one of Kafka's compression codecs 1-4")
    if level < LEVEL_DEFAULT:
        raise ValueError(f"compression level must be -1 (the codec's default) or more, not {level}")
    if codec == layout.COMPRESSION_SNAPPY:
        return 0
    if level == LEVEL_DEFAULT:
        return int(_DEFAULT_LEVEL[codec])
    return min(level, LEVEL_RANGES[codec][1])


def compress(codec: int, data: Buffer, level: int = LEVEL_DEFAULT) -> bytes:
    """The records section `data` compressed with `codec` (1-4) at `level` (codec_level: -1
    is Kafka's default for the codec, a level past the codec's highest is its highest; snappy
    has none). ValueError for codec 0 or an unknown one, or a level below -1."""
    level = codec_level(codec, level)
    if codec == layout.COMPRESSION_LZ4:
        return lz4frame.compress(data, level)
    if codec == layout.COMPRESSION_SNAPPY:
        return _xerial_compress(memoryview(data).cast("B"))
    result: bytes = pa.Codec(_STREAM_CODECS[codec], compression_level=level).compress(
        data, asbytes=True
    )
    return result


def decompress(codec: int, payload: Buffer, size_max: int) -> bytes | int:
    """The records inside the compressed section `payload` of a batch with `codec` (1-4), or a
    status: DECOMPRESS_FAILED for bytes the codec's Kafka reader would refuse (and for an
    empty section, and for bytes after the last gzip member or zstd frame),
    DECOMPRESSED_TOO_LARGE as soon as the records exceed size_max, BAD_COMPRESSION for an
    unknown codec. Never raises for bad bytes."""
    if codec == layout.COMPRESSION_LZ4:
        return lz4frame.decompress(payload, size_max)
    view = memoryview(payload).cast("B")
    if len(view) == 0:
        return status.DECOMPRESS_FAILED
    if codec == layout.COMPRESSION_SNAPPY:
        return _snappy_decompress(view, size_max)
    name = _STREAM_CODECS.get(codec)
    if name is None:
        return status.BAD_COMPRESSION
    if name == "gzip" and bytes(view[:2]) != _GZIP_MAGIC:
        return status.DECOMPRESS_FAILED  # zlib would also take a bare zlib stream; Java does not
    pieces: list[bytes] = []
    produced = 0
    piece_bytes = _FIRST_PIECE_BYTES
    try:
        stream = pa.CompressedInputStream(pa.BufferReader(pa.py_buffer(view)), name)
        while True:
            # Into buffers of our own (malloc, as every other decoder's), not Arrow's memory
            # pool: a pool that grows by arenas failed a 1 MiB read under the fuzzer's
            # RLIMIT_DATA cap long before the limit (f12, codec_differential).
            piece = np.empty(min(piece_bytes, size_max - produced + 1), np.uint8)
            got = stream.readinto(piece)
            if got == 0:
                break
            pieces.append(piece[:got].tobytes())
            produced += got
            if produced > size_max:
                return status.DECOMPRESSED_TOO_LARGE
            piece_bytes = DECOMPRESS_PIECE_BYTES
    except (OSError, pa.ArrowException):
        return status.DECOMPRESS_FAILED
    if not pieces:
        return b""
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _xerial_compress(view: memoryview) -> bytes:
    codec = pa.Codec("snappy")
    out = bytearray(XERIAL_HEADER)
    for start in range(0, len(view), XERIAL_BLOCK_BYTES):
        block: bytes = codec.compress(view[start : start + XERIAL_BLOCK_BYTES], asbytes=True)
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _raw_length(block: memoryview) -> int | None:
    """The uncompressed length a raw snappy block declares (its leading varint), or None if
    the varint is cut short or longer than five bytes."""
    length = 0
    for index in range(min(len(block), _VARINT32_BYTES_MAX)):
        byte = block[index]
        length |= (byte & 0x7F) << (7 * index)
        if byte < 0x80:
            return length
    return None


def _snappy_blocks(view: memoryview) -> list[memoryview] | None:
    """The raw snappy blocks of a section: the chunks of a xerial stream, or the section as
    one raw block when it does not start with the xerial magic. None for a xerial stream cut
    inside its header or a chunk, or one whose minimum compatible version is not 1."""
    if bytes(view[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        return [view]
    if len(view) < len(XERIAL_HEADER):
        return None
    if _INT32.unpack_from(view, len(XERIAL_MAGIC) + 4)[0] != 1:
        return None
    blocks = []
    cursor = len(XERIAL_HEADER)
    while cursor < len(view):
        if cursor + _INT32.size > len(view):
            return None
        (length,) = _INT32.unpack_from(view, cursor)
        cursor += _INT32.size
        if length < 0 or cursor + length > len(view):
            return None
        blocks.append(view[cursor : cursor + length])
        cursor += length
    return blocks


def _snappy_decompress(view: memoryview, size_max: int) -> bytes | int:
    blocks = _snappy_blocks(view)
    if blocks is None:
        return status.DECOMPRESS_FAILED
    lengths = []
    for block in blocks:
        length = _raw_length(block)
        if length is None:
            return status.DECOMPRESS_FAILED
        lengths.append(length)
    if sum(lengths) > size_max:
        return status.DECOMPRESSED_TOO_LARGE
    codec = pa.Codec("snappy")
    try:
        pieces = [
            codec.decompress(block, decompressed_size=length, asbytes=True)
            for block, length in zip(blocks, lengths, strict=True)
            if length
        ]
    except (OSError, pa.ArrowException):
        return status.DECOMPRESS_FAILED
    if not pieces:
        return b""
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)
