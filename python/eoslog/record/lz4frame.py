"""Kafka's LZ4 framing of a batch's records section (docs/format.md §4), for both codec twins.

Kafka wraps the records in an LZ4 frame with a fixed shape: magic 04 22 4D 18, FLG 0x60
(version 1, independent blocks, no checksums, no content size), BD 0x40 (64 KiB blocks), header
checksum 0x82, blocks, then the end mark 00 00 00 00 (Lz4BlockOutputStream). Its reader
(Lz4BlockInputStream) also accepts a content-size field, a content checksum (read, never
verified) and block checksums (verified), and rejects everything else.

Both the Cython codec and the pure-Python twin call this module, so their lz4 behaviour cannot
drift apart. The block codec itself is the `lz4` package: it bundles the reference liblz4, and
its frame API emits Kafka's exact framing; calling it once per batch costs one Python call per
batch, not per record.

Status inside, exceptions outside (docs/style.md rule 4): decompress returns a status code for bad
bytes and never raises; the caller turns the code into an exception with the batch position.
Every function is pure and thread-safe.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final, NamedTuple

import lz4.frame

from eoslog.record import layout, status

if TYPE_CHECKING:
    from typing_extensions import Buffer

LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"
MAGIC_SIZE: Final = 4
# FLG bits (LZ4 frame format; Kafka's Lz4BlockOutputStream.FLG). Bits 0-1 are reserved (bit 0
# is the newer dictionary-id flag, which Kafka rejects as reserved).
FLG_RESERVED_MASK: Final = 0x03
FLG_CONTENT_CHECKSUM: Final = 0x04
FLG_CONTENT_SIZE: Final = 0x08
FLG_BLOCK_CHECKSUM: Final = 0x10
FLG_BLOCK_INDEPENDENCE: Final = 0x20
FLG_VERSION_MASK: Final = 0xC0
FLG_VERSION_01: Final = 0x40
# BD bits: 4-6 are the block-size code, the rest reserved (Kafka's Lz4BlockOutputStream.BD).
BD_RESERVED_MASK: Final = 0x8F
BD_SIZE_CODE_MIN: Final = 4
BD_SIZE_CODE_MAX: Final = 7
CONTENT_SIZE_BYTES: Final = 8
CHECKSUM_BYTES: Final = 4
BLOCK_HEADER_BYTES: Final = 4
# The high bit of a block's length word says the block is stored, not compressed.
BLOCK_STORED_BIT: Final = 0x80000000
BLOCK_SIZE_MASK: Final = 0x7FFFFFFF
END_MARK: Final = b"\x00\x00\x00\x00"

_U32_LE: Final = struct.Struct("<I")
# Decompression produces its output this many bytes at a time, so that a frame stopped at the
# limit (a decompression bomb) never holds more than the limit plus one piece, and a batch of
# up to one piece (nearly every batch) is produced by one call with no copy.
DECOMPRESS_PIECE_BYTES: Final = 1024 * 1024

# xxHash32's five primes (the xxHash specification), for the header and block checksums.
_PRIME32_1: Final = 2654435761
_PRIME32_2: Final = 2246822519
_PRIME32_3: Final = 3266489917
_PRIME32_4: Final = 668265263
_PRIME32_5: Final = 374761393
_U32: Final = 0xFFFFFFFF


def _rotate_left(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _U32


def _xxh32_round(accumulator: int, lane: int) -> int:
    accumulator = (accumulator + lane * _PRIME32_2) & _U32
    return (_rotate_left(accumulator, 13) * _PRIME32_1) & _U32


def xxh32(data: Buffer, seed: int = 0) -> int:
    """xxHash32 of data: the LZ4 frame format's header and block checksum. Written out here
    because the `lz4` package does not expose it, and Kafka's block checksums must be checked
    the same way whichever codec twin runs."""
    view = memoryview(data).cast("B")
    length = len(view)
    cursor = 0
    if length >= 16:
        lanes = [
            (seed + _PRIME32_1 + _PRIME32_2) & _U32,
            (seed + _PRIME32_2) & _U32,
            seed & _U32,
            (seed - _PRIME32_1) & _U32,
        ]
        stripes_end = length - length % 16
        for first, second, third, fourth in struct.iter_unpack("<4I", view[:stripes_end]):
            lanes[0] = _xxh32_round(lanes[0], first)
            lanes[1] = _xxh32_round(lanes[1], second)
            lanes[2] = _xxh32_round(lanes[2], third)
            lanes[3] = _xxh32_round(lanes[3], fourth)
        cursor = stripes_end
        digest = (
            _rotate_left(lanes[0], 1)
            + _rotate_left(lanes[1], 7)
            + _rotate_left(lanes[2], 12)
            + _rotate_left(lanes[3], 18)
        )
    else:
        digest = seed + _PRIME32_5
    digest = (digest + length) & _U32
    while cursor + 4 <= length:
        (word,) = _U32_LE.unpack_from(view, cursor)
        digest = (_rotate_left((digest + word * _PRIME32_3) & _U32, 17) * _PRIME32_4) & _U32
        cursor += 4
    while cursor < length:
        digest = (digest + view[cursor] * _PRIME32_5) & _U32
        digest = (_rotate_left(digest, 11) * _PRIME32_1) & _U32
        cursor += 1
    digest ^= digest >> 15
    digest = (digest * _PRIME32_2) & _U32
    digest ^= digest >> 13
    digest = (digest * _PRIME32_3) & _U32
    return digest ^ (digest >> 16)


def header_checksum(descriptor: Buffer) -> int:
    """The frame header checksum byte HC over FLG, BD and any content-size field."""
    return (xxh32(descriptor) >> 8) & 0xFF


def compress(records: Buffer, level: int = 0) -> bytes:
    """The LZ4 frame Kafka writes around a records section: `04 22 4D 18 60 40 82`, blocks of at
    most 64 KiB (stored raw when they do not shrink), end mark `00 00 00 00`. `level`: 0 is
    lz4's fast mode, 3 to 12 its high-compression modes (the frame is read the same way)."""
    frame: bytes = lz4.frame.compress(
        records,
        compression_level=level,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        block_checksum=False,
        store_size=False,
    )
    # Kafka's readers verify this exact header; a change in the lz4 package's defaults must
    # fail loudly here rather than write frames Kafka rejects.
    if frame[: len(layout.LZ4_FRAME_HEADER)] != layout.LZ4_FRAME_HEADER:
        raise AssertionError(f"lz4 package wrote an unexpected frame header {frame[:7].hex()}")
    if frame[-CHECKSUM_BYTES:] != END_MARK:
        raise AssertionError("lz4 package wrote a frame without Kafka's end mark")
    return frame


class _FrameShape(NamedTuple):
    """What a walk of a frame's structure found, before any block is decoded."""

    flags: int
    block_descriptor: int
    blocks_start: int  # first byte after the frame header
    blocks_end: int  # first byte after the end mark
    # No block decodes to more than its size code allows and a stored block is its own size,
    # so this bounds the decompressed size from the bytes actually present.
    decompressed_bytes_max: int


def _read_header(view: memoryview) -> _FrameShape | int:
    """Check the frame header against Kafka's reader rules (Lz4BlockInputStream.readHeader,
    FLG.validate, BD.validate). Returns a shape with only the header fields filled in."""
    if len(view) < MAGIC_SIZE + 3 or bytes(view[:MAGIC_SIZE]) != LZ4_MAGIC:
        return status.DECOMPRESS_FAILED
    flags = view[MAGIC_SIZE]
    block_descriptor = view[MAGIC_SIZE + 1]
    if (
        flags & FLG_RESERVED_MASK
        or flags & FLG_VERSION_MASK != FLG_VERSION_01
        or not flags & FLG_BLOCK_INDEPENDENCE
        or block_descriptor & BD_RESERVED_MASK
        or not BD_SIZE_CODE_MIN <= block_descriptor >> 4 <= BD_SIZE_CODE_MAX
    ):
        return status.DECOMPRESS_FAILED
    descriptor_end = MAGIC_SIZE + 2
    if flags & FLG_CONTENT_SIZE:
        # Kafka skips the content size without using it; it only feeds the header checksum.
        descriptor_end += CONTENT_SIZE_BYTES
    if len(view) <= descriptor_end:
        return status.DECOMPRESS_FAILED
    if view[descriptor_end] != header_checksum(view[MAGIC_SIZE:descriptor_end]):
        return status.DECOMPRESS_FAILED
    return _FrameShape(flags, block_descriptor, descriptor_end + 1, 0, 0)


def _walk_blocks(view: memoryview, header: _FrameShape) -> _FrameShape | int:
    """Follow the block length words to the end mark, checking every block fits its size
    code and the bytes present, verifying block checksums, and that nothing trails the frame."""
    block_bytes_max = 1 << (2 * (header.block_descriptor >> 4) + 8)
    has_block_checksum = bool(header.flags & FLG_BLOCK_CHECKSUM)
    cursor = header.blocks_start
    bound = 0
    while True:
        if cursor + BLOCK_HEADER_BYTES > len(view):
            return status.DECOMPRESS_FAILED  # the end mark is missing
        (word,) = _U32_LE.unpack_from(view, cursor)
        cursor += BLOCK_HEADER_BYTES
        if word == 0:
            break
        size = word & BLOCK_SIZE_MASK
        # Kafka would read a stored block of length 0 as an end mark while liblz4 reads it as
        # an empty block; no writer emits one, so it is refused rather than read two ways.
        if size == 0 or size > block_bytes_max:
            return status.DECOMPRESS_FAILED
        block_end = cursor + size
        if block_end + (CHECKSUM_BYTES if has_block_checksum else 0) > len(view):
            return status.DECOMPRESS_FAILED
        if has_block_checksum:
            (expected,) = _U32_LE.unpack_from(view, block_end)
            if xxh32(view[cursor:block_end]) != expected:
                return status.DECOMPRESS_FAILED
            block_end += CHECKSUM_BYTES
        bound += size if word & BLOCK_STORED_BIT else block_bytes_max
        cursor = block_end
    blocks_end = cursor
    if header.flags & FLG_CONTENT_CHECKSUM:
        # Kafka reads the content checksum but does not verify it; it must still be present.
        cursor += CHECKSUM_BYTES
    # Kafka stops reading at the end mark; eoslog is stricter and refuses bytes after the
    # frame, since no writer puts them there and a batch must mean one thing.
    if cursor != len(view):
        return status.DECOMPRESS_FAILED
    return header._replace(blocks_end=blocks_end, decompressed_bytes_max=bound)


def _kafka_shaped(view: memoryview, shape: _FrameShape) -> Buffer:
    """The frame with any optional fields removed: no content size, no content checksum, no
    block checksums (already verified by the walk). liblz4 would check the content size and
    content checksum, which Kafka does not, so handing it this shape keeps Kafka's verdicts."""
    optional = FLG_CONTENT_SIZE | FLG_CONTENT_CHECKSUM | FLG_BLOCK_CHECKSUM
    if not shape.flags & optional:
        return view
    flags = shape.flags & ~optional
    descriptor = bytes((flags, shape.block_descriptor))
    out = bytearray(LZ4_MAGIC + descriptor + bytes((header_checksum(descriptor),)))
    cursor = shape.blocks_start
    has_block_checksum = bool(shape.flags & FLG_BLOCK_CHECKSUM)
    while True:
        (word,) = _U32_LE.unpack_from(view, cursor)
        block_end = cursor + BLOCK_HEADER_BYTES + (word & BLOCK_SIZE_MASK)
        out += view[cursor:block_end]
        if word == 0:
            return bytes(out)
        cursor = block_end + (CHECKSUM_BYTES if has_block_checksum else 0)


def decompress(payload: Buffer, size_max: int) -> bytes | int:
    """The records inside a Kafka LZ4 frame, or a status code: DECOMPRESS_FAILED for a frame
    Kafka's reader would refuse (bad magic, flags, block size code, header checksum, block
    checksum, a block larger than its size code, missing end mark, bytes after the frame, a
    block liblz4 cannot decode); DECOMPRESSED_TOO_LARGE as soon as the records exceed
    size_max. The output is produced DECOMPRESS_PIECE_BYTES at a time, so a frame that would
    exceed size_max holds at most size_max + one piece before it is refused (a records
    section of several pieces is then joined into one copy). Never raises for bad bytes."""
    view = memoryview(payload).cast("B")
    header = _read_header(view)
    if isinstance(header, int):
        return header
    shape = _walk_blocks(view, header)
    if isinstance(shape, int):
        return shape
    source = memoryview(_kafka_shaped(view, shape)).cast("B")
    # One byte more than the most the blocks can hold keeps the lz4 package from stopping at a
    # full buffer just before the end mark; one byte more than size_max detects an overflow.
    output_bytes_max = min(size_max, shape.decompressed_bytes_max) + 1
    pieces: list[bytes] = []
    produced = 0
    consumed = 0
    end_of_frame = False
    try:
        context = lz4.frame.create_decompression_context()
        while not end_of_frame and produced < output_bytes_max:
            piece_bytes_max = min(DECOMPRESS_PIECE_BYTES, output_bytes_max - produced)
            result: tuple[bytes, int, bool] = lz4.frame.decompress_chunk(
                context, source[consumed:], max_length=piece_bytes_max
            )
            piece, bytes_read, end_of_frame = result
            if not piece and not bytes_read and not end_of_frame:
                break  # no progress: the frame cannot go on (reported below)
            pieces.append(piece)
            produced += len(piece)
            consumed += bytes_read
            if produced > size_max:
                return status.DECOMPRESSED_TOO_LARGE
    except (RuntimeError, ValueError):
        # The lz4 package reports a block liblz4 cannot decode as RuntimeError.
        return status.DECOMPRESS_FAILED
    if not end_of_frame or consumed != len(source):
        return status.DECOMPRESS_FAILED
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)
