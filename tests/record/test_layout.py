"""One format, one definition (docs/style.md rule 1): the C headers, the native module and the
Python modules state the same batch layout, control records, index entries and status codes.

The header checks parse engine/*.h from source, so they hold even before the extension is
built; the LAYOUT/STATUS checks compare what the built extension actually compiled in.
"""

from __future__ import annotations

import ast
import importlib
import itertools
import operator
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from eoslog import errors, limits
from eoslog.record import control, layout, status
from tests.support import REPO_ROOT

ENGINE = Path(REPO_ROOT) / "engine"

# Constants the C side states but Python keeps in limits.py rather than layout.py (rule 6: a
# named limit lives with the other limits).
C_NAMES_IN_LIMITS = {
    "RECORD_BYTES_MIN": "record_bytes_min",
    "RECORD_HEADER_BYTES_MIN": "record_header_bytes_min",
}
# Status codes that never leave the kernels, so Python has no name or message for them.
C_INTERNAL_STATUSES = {"NEED_SPACE"}

_BINARY_OPERATORS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.LShift: operator.lshift,
    ast.BitOr: operator.or_,
}


def _evaluate(expression: str, known: dict[str, int]) -> int:
    """The integer a #define's C expression stands for: literals, earlier EOS_ names, + - * << |."""

    def walk(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return known[node.id.removeprefix("EOS_")]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPERATORS:
            return _BINARY_OPERATORS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        raise AssertionError(f"cannot evaluate C expression {expression!r}")

    cleaned = re.sub(r"\b(0x[0-9a-fA-F]+|\d+)[uUlL]*\b", r"\1", expression)
    return walk(ast.parse(cleaned, mode="eval").body)


def _header_defines(name: str) -> dict[str, int]:
    """The EOS_ #defines of engine/<name>, without the prefix, evaluated."""
    values: dict[str, int] = {}
    text = (ENGINE / name).read_text()
    for match in re.finditer(r"^#define\s+EOS_(\w+)\s+(.+?)\s*$", text, re.MULTILINE):
        values[match.group(1)] = _evaluate(match.group(2), values)
    return values


def _header_enum(name: str) -> dict[str, int]:
    text = (ENGINE / name).read_text()
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"\bEOS_(\w+)\s*=\s*(\d+)", text)}


def _python_statuses() -> dict[str, int]:
    return {
        name: value
        for name, value in vars(status).items()
        if name.isupper() and isinstance(value, int) and not isinstance(value, bool)
    }


def _python_layout_integers() -> dict[str, int]:
    return {
        name: value
        for name, value in vars(layout).items()
        if name.isupper() and isinstance(value, int) and not isinstance(value, bool)
    }


# --- sources ----------------------------------------------------------------------------------


def test_batch_layout_header_parses_to_the_documented_offsets() -> None:
    defines = _header_defines("batch_layout.h")
    # docs/format.md §1.1: the two fields a leader rewrites, and where the records begin.
    assert defines["BASE_OFFSET_OFFSET"] == 0
    assert defines["PARTITION_LEADER_EPOCH_OFFSET"] == 12
    assert defines["RECORDS_OFFSET"] == defines["HEADER_SIZE"] == 61
    assert defines["BATCH_LENGTH_MIN"] == 49


def test_every_constant_in_batch_layout_h_has_the_same_value_in_python() -> None:
    defines = _header_defines("batch_layout.h")
    python = _python_layout_integers()
    mismatched = {}
    for name, value in defines.items():
        if name in C_NAMES_IN_LIMITS:
            python_value = getattr(limits, C_NAMES_IN_LIMITS[name])
        else:
            assert name in python, f"EOS_{name} has no twin in eoslog.record.layout"
            python_value = python[name]
        if python_value != value:
            mismatched[name] = (value, python_value)
    assert mismatched == {}, "C value vs Python value"


def test_layout_header_struct_places_each_field_at_its_named_offset() -> None:
    offsets = [
        layout.BASE_OFFSET_OFFSET,
        layout.BATCH_LENGTH_OFFSET,
        layout.PARTITION_LEADER_EPOCH_OFFSET,
        layout.MAGIC_OFFSET,
        layout.CRC_OFFSET,
        layout.ATTRIBUTES_OFFSET,
        layout.LAST_OFFSET_DELTA_OFFSET,
        layout.BASE_TIMESTAMP_OFFSET,
        layout.MAX_TIMESTAMP_OFFSET,
        layout.PRODUCER_ID_OFFSET,
        layout.PRODUCER_EPOCH_OFFSET,
        layout.BASE_SEQUENCE_OFFSET,
        layout.RECORDS_COUNT_OFFSET,
        layout.RECORDS_OFFSET,
    ]
    sizes = [8, 4, 4, 1, 4, 2, 4, 8, 8, 8, 2, 4, 4]  # docs/format.md §1.1
    assert [b - a for a, b in itertools.pairwise(offsets)] == sizes
    assert layout.HEADER_STRUCT.format.lstrip(">") == "qiibIhiqqqhii"


def test_every_status_in_status_h_has_the_same_code_in_python() -> None:
    c_statuses = _header_enum("status.h")
    python = _python_statuses()
    public = {name: code for name, code in c_statuses.items() if name not in C_INTERNAL_STATUSES}
    assert public == python
    internal_codes = {c_statuses[name] for name in C_INTERNAL_STATUSES}
    assert internal_codes.isdisjoint(python.values())


def test_status_codes_are_distinct_and_every_error_has_a_message() -> None:
    python = _python_statuses()
    assert len(set(python.values())) == len(python)
    assert python["OK"] == 0
    assert set(status.MESSAGES) == set(python.values()) - {status.OK}
    for code, (class_name, text) in status.MESSAGES.items():
        error_class = getattr(errors, class_name)
        assert issubclass(error_class, errors.KafkaException), code
        assert issubclass(error_class, ValueError), code
        assert text and text == text.strip(), code


def test_error_for_status_names_the_batch_position() -> None:
    error = errors.error_for_status(status.CRC_MISMATCH, 4096)
    assert isinstance(error, errors.CorruptRecordError)
    assert str(error) == "CRC-32C mismatch: the batch is corrupt (batch at byte 4096)"
    assert error.error.code() == 2


# --- the built extension ----------------------------------------------------------------------


def _native_codec() -> ModuleType:
    # Imported here so that a missing extension fails these tests, not the whole module.
    return importlib.import_module("eoslog._ext.codec")


def test_native_layout_exports_exactly_the_constants_c_and_python_share() -> None:
    native = _native_codec().LAYOUT
    shared = set(_header_defines("batch_layout.h")) & set(_python_layout_integers())
    assert set(native) == shared


def test_native_layout_agrees_with_layout_py() -> None:
    native = _native_codec().LAYOUT
    assert native, "LAYOUT is empty"
    assert {key: getattr(layout, key) for key in native} == dict(native)


def test_native_status_agrees_with_status_py() -> None:
    native = _native_codec().STATUS
    assert dict(native) == _python_statuses()


# --- control records (docs/format.md §3) -------------------------------------------------------


def test_control_module_states_the_layout_of_batch_layout_h() -> None:
    defines = _header_defines("batch_layout.h")
    assert control.KEY.size == defines["CONTROL_KEY_SIZE"]
    assert control.MARKER_VALUE.size == defines["END_TXN_MARKER_VALUE_SIZE"]
    assert (defines["CONTROL_ABORT"], defines["CONTROL_COMMIT"]) == (control.ABORT, control.COMMIT)
    key = control.encode_key(control.COMMIT)
    assert (
        int.from_bytes(key[: defines["CONTROL_KEY_TYPE_OFFSET"]], "big")
        == (defines["CONTROL_KEY_VERSION"])
    )
    assert int.from_bytes(key[defines["CONTROL_KEY_TYPE_OFFSET"] :], "big") == control.COMMIT
    value = control.encode_marker_value(7)
    epoch_at = defines["END_TXN_MARKER_EPOCH_OFFSET"]
    assert int.from_bytes(value[:epoch_at], "big") == defines["END_TXN_MARKER_VERSION"]
    assert int.from_bytes(value[epoch_at:], "big") == 7


@pytest.mark.parametrize("control_type", [control.ABORT, control.COMMIT])
def test_both_twins_write_the_control_record_the_control_module_reads(
    codec: ModuleType, control_type: int
) -> None:
    marker = codec.build_control_batch(
        control_type, producer_id=5, producer_epoch=1, coordinator_epoch=-3, timestamp=9
    )
    assert len(marker) == layout.END_TXN_MARKER_BATCH_SIZE
    (record,) = codec.batch_records(marker)
    assert record.key == control.encode_key(control_type)
    assert record.value == control.encode_marker_value(-3)
    assert control.read_type(record.key) == control_type
    assert control.read_coordinator_epoch(record.value) == -3


def test_control_readers_return_none_for_fields_too_short() -> None:
    assert control.read_type(None) is None
    assert control.read_type(control.encode_key(control.ABORT)[:-1]) is None
    assert control.read_coordinator_epoch(None) is None
    assert control.read_coordinator_epoch(control.encode_marker_value(1)[:-1]) is None


# --- index entries (docs/format.md §5.4, §5.5, §6.1) ------------------------------------------


def _native_index() -> ModuleType:
    return importlib.import_module("eoslog._ext.index")


@pytest.mark.parametrize(
    ("dtype_name", "prefix", "fields"),
    [
        (
            "OFFSET_ENTRY_DTYPE",
            "OFFSET_INDEX",
            {"relative": ("RELATIVE_OFFSET_AT", 4), "position": ("POSITION_AT", 4)},
        ),
        (
            "TIME_ENTRY_DTYPE",
            "TIME_INDEX",
            {"timestamp": ("TIMESTAMP_AT", 8), "relative": ("RELATIVE_OFFSET_AT", 4)},
        ),
        (
            "TXN_ENTRY_DTYPE",
            "TXN_INDEX",
            {
                "version": ("VERSION_AT", 2),
                "producer_id": ("PRODUCER_ID_AT", 8),
                "first_offset": ("FIRST_OFFSET_AT", 8),
                "last_offset": ("LAST_OFFSET_AT", 8),
                "last_stable_offset": ("LAST_STABLE_OFFSET_AT", 8),
            },
        ),
    ],
)
def test_index_entry_dtypes_place_each_field_where_index_h_does(
    dtype_name: str, prefix: str, fields: dict[str, tuple[str, int]]
) -> None:
    defines = _header_defines("index.h")
    dtype = getattr(_native_index(), dtype_name)
    assert dtype.itemsize == defines[f"{prefix}_ENTRY_BYTES"]
    assert list(dtype.names) == list(fields)
    for name, (define, size) in fields.items():
        field, offset = dtype.fields[name][:2]
        assert offset == defines[f"{prefix}_{define}"], name
        assert (field.kind, field.itemsize, field.byteorder) == ("i", size, ">"), name
    # Packed: the fields fill the entry with no gap (Kafka writes them back to back).
    assert sum(size for _, size in fields.values()) == dtype.itemsize


def test_index_modules_use_the_exported_entry_layouts() -> None:
    from eoslog.log import offset_index, time_index, txn_index  # they import the extension

    index = _native_index()
    assert offset_index._ENTRY_DTYPE is index.OFFSET_ENTRY_DTYPE
    assert index.OFFSET_ENTRY_DTYPE.itemsize == offset_index.ENTRY_BYTES
    assert time_index._ENTRY_DTYPE is index.TIME_ENTRY_DTYPE
    assert index.TIME_ENTRY_DTYPE.itemsize == time_index.ENTRY_BYTES
    assert txn_index._ENTRY_DTYPE is index.TXN_ENTRY_DTYPE
    assert index.TXN_ENTRY_DTYPE.itemsize == txn_index.ENTRY_BYTES
