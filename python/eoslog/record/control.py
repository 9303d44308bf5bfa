"""Control records (docs/format.md §3; Kafka's ControlRecordType and EndTransactionMarker): the
one Python definition of their key and value, used by every writer and reader of them (the pure
twin's build_control_batch, producer-state replay, the read_committed filter, the logged-batch
lookups, the offline tools).

A control record's key is version int16 (0) + type int16 (ABORT 0, COMMIT 1); an
end-transaction marker's value is version int16 (0) + coordinator epoch int32. The numbers are
layout's (CONTROL_*, END_TXN_MARKER_*), which engine/batch_layout.h states for C, where
pyext/codec.pyx's build_control_batch writes the same bytes; tests/record/test_layout.py checks that
the three agree (docs/style.md rule 1).

Pure functions, safe in any thread. Readers decide what a key or value too short to hold its
fields means (corruption, an invalid record, or "not a marker"): the decoders here return None
for one.
"""

from __future__ import annotations

import struct
from typing import Final

from eoslog.record import layout

ABORT: Final = layout.CONTROL_ABORT
COMMIT: Final = layout.CONTROL_COMMIT
# The names Kafka's ControlRecordType gives the two types (DumpLogSegments prints them).
TYPE_NAMES: Final = {ABORT: "ABORT", COMMIT: "COMMIT"}

KEY: Final = struct.Struct(">hh")  # version, type
MARKER_VALUE: Final = struct.Struct(">hi")  # version, coordinator epoch
assert KEY.size == layout.CONTROL_KEY_SIZE
assert MARKER_VALUE.size == layout.END_TXN_MARKER_VALUE_SIZE
assert struct.calcsize(">h") == layout.CONTROL_KEY_TYPE_OFFSET
assert struct.calcsize(">h") == layout.END_TXN_MARKER_EPOCH_OFFSET


def encode_key(control_type: int) -> bytes:
    """The key of a control record of `control_type` (version CONTROL_KEY_VERSION)."""
    return KEY.pack(layout.CONTROL_KEY_VERSION, control_type)


def encode_marker_value(coordinator_epoch: int) -> bytes:
    """An end-transaction marker's value (version END_TXN_MARKER_VERSION). struct.error for
    an epoch outside int32."""
    return MARKER_VALUE.pack(layout.END_TXN_MARKER_VERSION, coordinator_epoch)


def read_type(key: bytes | None) -> int | None:
    """The type in a control record's key (ABORT, COMMIT or any other int16 a writer put
    there); None for a missing key or one shorter than version + type."""
    if key is None or len(key) < KEY.size:
        return None
    found: int = KEY.unpack_from(key)[1]
    return found


def read_coordinator_epoch(value: bytes | None) -> int | None:
    """The coordinator epoch in an end-transaction marker's value; None for a missing value or
    one shorter than version + epoch."""
    if value is None or len(value) < MARKER_VALUE.size:
        return None
    found: int = MARKER_VALUE.unpack_from(value)[1]
    return found
