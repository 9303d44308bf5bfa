"""What the fuzz targets share: input flags, CRC fix-ups, the finding type, a scratch twin."""

from __future__ import annotations

import contextlib
import importlib
import struct
from collections.abc import Callable
from dataclasses import dataclass

from eoslog.errors import KafkaException
from eoslog.fs_twin import RecordingFileSystem
from eoslog.record import layout

PRIMITIVES = importlib.import_module("eoslog._ext.primitives")

# Flags in the first byte of an input (targets that take them).
FIX_CRC = 0x01
FROM_CLIENT = 0x02
CLEAN_SHUTDOWN = 0x04
DROP_RECOVERY_POINT = 0x08
# The batch size limit the codec targets pass: small enough that a decompression bomb inside a
# fuzz-sized input is refused long before the memory bound.
BATCH_BYTES_MAX = 1 << 20
# An input may allocate at most max(ALLOCATION_BOUND_BYTES, 4 x its size) (docs/reliability.md
# family 12) and run at most INPUT_TIMEOUT_S seconds.
ALLOCATION_BOUND_BYTES = 256 << 20
INPUT_TIMEOUT_S = 10


class FuzzFinding(AssertionError):
    """An oracle saw a wrong answer (never an acceptable outcome)."""


@dataclass(frozen=True)
class Target:
    name: str
    run: Callable[[bytes], None]
    # What the reader may raise for bad bytes; anything else is a finding.
    acceptable: tuple[type[BaseException], ...] = (KafkaException,)


def run_checked(target: Target, data: bytes) -> None:
    """Run one input, swallowing only the target's acceptable errors."""
    with contextlib.suppress(*target.acceptable):
        target.run(data)


def split_flags(data: bytes) -> tuple[int, bytes]:
    return (data[0], data[1:]) if data else (0, b"")


# --- batch CRCs -------------------------------------------------------------------------------


def fix_batch_crcs(data: bytes) -> bytes:
    """`data` with the CRC of every whole batch (as its length fields chain them) recomputed,
    so mutations behind the CRC reach the record walk."""
    out = bytearray(data)
    position = 0
    while position + layout.HEADER_SIZE <= len(out):
        (length,) = struct.unpack_from(">i", out, position + layout.BATCH_LENGTH_OFFSET)
        end = position + layout.LOG_OVERHEAD + length
        if length < layout.BATCH_LENGTH_MIN or end > len(out):
            break
        crc = PRIMITIVES.crc32c(memoryview(out)[position + layout.ATTRIBUTES_OFFSET : end])
        struct.pack_into(">I", out, position + layout.CRC_OFFSET, crc)
        position = end
    return bytes(out)


def batch_input(data: bytes) -> tuple[bytes, bool]:
    flags, body = split_flags(data)
    if flags & FIX_CRC:
        body = fix_batch_crcs(body)
    return body, bool(flags & FROM_CLIENT)


INDEX_DIRECTORY = "/p/t-0"


def fresh_twin() -> RecordingFileSystem:
    twin = RecordingFileSystem(seed=0)
    twin.makedirs(INDEX_DIRECTORY, durable=True)
    return twin


def write_file(twin: RecordingFileSystem, path: str, data: bytes) -> None:
    handle = twin.open(path, create=True)
    try:
        handle.pwrite(data, 0)
        handle.sync()
    finally:
        handle.close()
