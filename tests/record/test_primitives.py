"""CRC-32C and zigzag varints (docs/format.md §1.1, §2.1), against both implementations.

The `primitives` fixture runs every shared test on the native module (eoslog._ext.primitives)
and on the pure-Python twin (eoslog.record.pyprimitives), with ids `native` and `pure`. A twin
that fails to import is an error, never a skip (docs/style.md rule 12). Tests of the native module's
private helpers (the portable path alone, combine) use the native module directly.
"""

from __future__ import annotations

import array
import importlib
import os
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eoslog.errors import InvalidRecordError

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

IMPLEMENTATIONS = {
    "native": "eoslog._ext.primitives",
    "pure": "eoslog.record.pyprimitives",
}

# Known answers: the CRC-32C check value (docs/format.md §1.1) and RFC 3720 (iSCSI) Appendix B.4.
CRC_KNOWN_ANSWERS = [
    pytest.param(b"123456789", 0xE3069283, id="check-123456789"),
    pytest.param(bytes(32), 0x8A9136AA, id="32-zeros"),
    pytest.param(b"\xff" * 32, 0x62A8AB43, id="32-ones"),
    pytest.param(bytes(range(32)), 0x46DD794E, id="ascending-0-31"),
    pytest.param(bytes(range(31, -1, -1)), 0x113FDB5C, id="descending-31-0"),
]

# docs/format.md §2.1 examples: (value, encoded bytes).
VARINT_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (300, "d804"),
    (INT32_MAX, "feffffff0f"),
    (INT32_MIN, "ffffffff0f"),
]

# Enough for hypothesis, fast enough for the pure twin.
FAST = settings(max_examples=200, deadline=None)


# EOSLOG_TEST_IMPLS narrows the run as in conftest.py (a development aid, never for CI).
SELECTED = [
    name
    for name in IMPLEMENTATIONS
    if name in os.environ.get("EOSLOG_TEST_IMPLS", ",".join(IMPLEMENTATIONS)).split(",")
]


# Module scope (unlike conftest.py's `primitives`) so hypothesis can use it: a module is
# stateless, so sharing it across examples is safe.
@pytest.fixture(scope="module", params=SELECTED, ids=SELECTED)
def primitives(request: pytest.FixtureRequest) -> ModuleType:
    # An ImportError here is a test error, on purpose: never a skip.
    return importlib.import_module(IMPLEMENTATIONS[request.param])


@pytest.fixture(scope="module")
def native() -> ModuleType:
    if "native" not in SELECTED:
        pytest.skip("EOSLOG_TEST_IMPLS excludes the native module")
    return importlib.import_module(IMPLEMENTATIONS["native"])


def random_bytes(length: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(length)


def cpu_has_sse42() -> bool:
    cpuinfo = Path("/proc/cpuinfo")
    if not sys.platform.startswith("linux") or not cpuinfo.exists():
        pytest.skip("CPU flags are read from /proc/cpuinfo (Linux only)")
    for line in cpuinfo.read_text().splitlines():
        if line.startswith("flags"):
            return "sse4_2" in line.split(":", 1)[1].split()
    return False


# ---- CRC-32C ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("data", "expected"), CRC_KNOWN_ANSWERS)
def test_crc32c_matches_known_answers(primitives: ModuleType, data: bytes, expected: int) -> None:
    assert primitives.crc32c(data) == expected


def test_crc32c_of_empty_input_is_the_starting_value(primitives: ModuleType) -> None:
    assert primitives.crc32c(b"") == 0
    assert primitives.crc32c(b"", 0xE3069283) == 0xE3069283


@FAST
@given(data=st.binary(max_size=3000), cut_fraction=st.floats(min_value=0.0, max_value=1.0))
def test_crc32c_continuation_equals_crc_of_concatenation(
    primitives: ModuleType, data: bytes, cut_fraction: float
) -> None:
    cut = int(len(data) * cut_fraction)
    head, tail = data[:cut], data[cut:]
    assert primitives.crc32c(tail, primitives.crc32c(head)) == primitives.crc32c(data)


def test_crc32c_continuation_across_many_pieces(primitives: ModuleType) -> None:
    data = random_bytes(20_000, seed=7)
    cuts = sorted(random.Random(8).sample(range(1, len(data)), 40))
    crc = 0
    for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
        crc = primitives.crc32c(data[start:end], crc)
    assert crc == primitives.crc32c(data)


@pytest.mark.parametrize("length", [1, 100, 4096, 65_535, 65_536, 100_003, 1 << 20])
def test_crc32c_matches_the_crc32c_package(primitives: ModuleType, length: int) -> None:
    reference = pytest.importorskip("crc32c")
    data = random_bytes(length, seed=length)
    assert primitives.crc32c(data) == reference.crc32c(data)


@FAST
@given(data=st.binary(max_size=5000))
def test_crc32c_matches_the_crc32c_package_on_random_data(
    primitives: ModuleType, data: bytes
) -> None:
    reference = pytest.importorskip("crc32c")
    assert primitives.crc32c(data) == reference.crc32c(data)


def test_crc32c_reads_any_buffer_without_copying(primitives: ModuleType) -> None:
    np = pytest.importorskip("numpy")
    data = random_bytes(1000, seed=3)
    expected = primitives.crc32c(data)
    assert primitives.crc32c(bytearray(data)) == expected
    assert primitives.crc32c(memoryview(data)) == expected
    assert primitives.crc32c(memoryview(b"xx" + data)[2:]) == expected
    assert primitives.crc32c(np.frombuffer(data, dtype=np.uint8)) == expected
    # Other item formats: the CRC is over the buffer's memory, as bytes.
    words = array.array("i", range(250))
    assert primitives.crc32c(words) == primitives.crc32c(words.tobytes())
    assert primitives.crc32c(np.frombuffer(data, dtype=np.int64)) == expected


def test_crc32c_rejects_a_start_value_outside_uint32(primitives: ModuleType) -> None:
    with pytest.raises(ValueError):
        primitives.crc32c(b"x", -1)
    with pytest.raises(ValueError):
        primitives.crc32c(b"x", 2**32)


def test_crc32c_rejects_non_buffers(primitives: ModuleType) -> None:
    with pytest.raises(TypeError):
        primitives.crc32c("123456789")


def test_crc32c_backend_names_the_implementation(primitives: ModuleType) -> None:
    backend = primitives.crc32c_backend()
    if primitives.__name__ == IMPLEMENTATIONS["pure"]:
        assert backend == "python"
    else:
        assert backend in ("sse4.2", "portable")


def test_crc32c_backend_is_sse42_on_a_cpu_with_sse42(native: ModuleType) -> None:
    if not cpu_has_sse42():
        pytest.skip("this CPU has no SSE4.2")
    assert native.crc32c_backend() == "sse4.2"


def test_hardware_path_equals_portable_for_every_length_and_alignment(native: ModuleType) -> None:
    data = memoryview(random_bytes(1100 + 16, seed=11))
    for alignment in range(16):
        for length in range(1101):
            piece = data[alignment : alignment + length]
            start = (alignment * 0x9E3779B1 + length) & 0xFFFFFFFF
            assert native.crc32c(piece, start) == native._crc32c_portable(piece, start), (
                alignment,
                length,
            )


@pytest.mark.parametrize(
    # Around the three-stream block sizes of engine/crc32c.c (3 x 256 and 3 x 4096 bytes), their
    # multiples and sums, and sizes that take the GIL-free path.
    "length",
    [767, 768, 769, 1535, 1536, 12_287, 12_288, 12_289, 13_056, 24_576, 26_113, 65_536, 1 << 20],
)
def test_hardware_path_equals_portable_across_block_boundaries(
    native: ModuleType, length: int
) -> None:
    data = memoryview(random_bytes(length + 8, seed=length))
    for alignment in (0, 1, 7, 8):
        piece = data[alignment : alignment + length]
        assert native.crc32c(piece, 12345) == native._crc32c_portable(piece, 12345)


def test_portable_path_matches_known_answers(native: ModuleType) -> None:
    for param in CRC_KNOWN_ANSWERS:
        data, expected = param.values
        assert native._crc32c_portable(data) == expected


@FAST
@given(first=st.binary(max_size=2000), second=st.binary(max_size=2000))
def test_combine_gives_the_crc_of_the_concatenation(
    native: ModuleType, first: bytes, second: bytes
) -> None:
    combined = native._crc32c_combine(native.crc32c(first), native.crc32c(second), len(second))
    assert combined == native.crc32c(first + second)


def test_combine_handles_long_second_parts(native: ModuleType) -> None:
    first, second = random_bytes(100, seed=1), random_bytes(3 << 20, seed=2)
    combined = native._crc32c_combine(native.crc32c(first), native.crc32c(second), len(second))
    assert combined == native.crc32c(first + second)


# ---- varints ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "encoded"), VARINT_VECTORS)
def test_encode_varint_matches_format_vectors(
    primitives: ModuleType, value: int, encoded: str
) -> None:
    assert primitives.encode_varint(value).hex() == encoded


@pytest.mark.parametrize(("value", "encoded"), VARINT_VECTORS)
def test_decode_varint_matches_format_vectors(
    primitives: ModuleType, value: int, encoded: str
) -> None:
    data = bytes.fromhex(encoded)
    assert primitives.decode_varint(data) == (value, len(data))


@pytest.mark.parametrize(("value", "encoded"), VARINT_VECTORS)
def test_varlong_encoding_agrees_with_varint_on_int32_values(
    primitives: ModuleType, value: int, encoded: str
) -> None:
    # Zigzag of a 32-bit value is the same number at 64 bits, so the bytes are the same.
    assert primitives.encode_varlong(value).hex() == encoded
    assert primitives.decode_varlong(bytes.fromhex(encoded)) == (value, len(encoded) // 2)


@FAST
@given(value=st.integers(INT32_MIN, INT32_MAX))
def test_varint_round_trips(primitives: ModuleType, value: int) -> None:
    encoded = primitives.encode_varint(value)
    assert primitives.decode_varint(encoded) == (value, len(encoded))


@FAST
@given(value=st.integers(INT64_MIN, INT64_MAX) | st.sampled_from([INT64_MIN, INT64_MAX, 0, -1]))
def test_varlong_round_trips(primitives: ModuleType, value: int) -> None:
    encoded = primitives.encode_varlong(value)
    assert 1 <= len(encoded) <= 10
    assert primitives.decode_varlong(encoded) == (value, len(encoded))


def test_varlong_int64_extremes_take_ten_bytes(primitives: ModuleType) -> None:
    assert primitives.encode_varlong(INT64_MAX).hex() == "fe" + "ff" * 8 + "01"
    assert primitives.encode_varlong(INT64_MIN).hex() == "ff" * 9 + "01"
    assert primitives.decode_varlong(bytes.fromhex("ff" * 9 + "01")) == (INT64_MIN, 10)


def test_decode_reads_from_a_position_and_returns_the_next(primitives: ModuleType) -> None:
    data = b"\xaa" + primitives.encode_varint(300) + primitives.encode_varlong(-(2**40))
    value, position = primitives.decode_varint(data, 1)
    assert (value, position) == (300, 3)
    assert primitives.decode_varlong(data, position) == (-(2**40), len(data))


def test_decode_varint_drops_bits_past_bit_31_of_the_fifth_byte(primitives: ModuleType) -> None:
    # Kafka's readUnsignedVarint keeps only the low 4 bits of a 5th byte (docs/format.md §2.1).
    assert primitives.decode_varint(bytes.fromhex("ffffffff7f")) == (INT32_MIN, 5)
    assert primitives.decode_varint(bytes.fromhex("feffffff1f")) == (INT32_MAX, 5)


def test_varint_with_continuation_bit_on_fifth_byte_raises_invalid_record(
    primitives: ModuleType,
) -> None:
    with pytest.raises(InvalidRecordError):
        primitives.decode_varint(bytes.fromhex("ffffffff8f00"))


@pytest.mark.parametrize("encoded", ["", "80", "ff", "8080", "ffffffff"])
def test_truncated_varint_raises_invalid_record(primitives: ModuleType, encoded: str) -> None:
    with pytest.raises(InvalidRecordError):
        primitives.decode_varint(bytes.fromhex(encoded))


@pytest.mark.parametrize("encoded", ["", "80", "ffffffffffffffffff"])
def test_truncated_varlong_raises_invalid_record(primitives: ModuleType, encoded: str) -> None:
    with pytest.raises(InvalidRecordError):
        primitives.decode_varlong(bytes.fromhex(encoded))


def test_eleven_byte_varlong_raises_invalid_record(primitives: ModuleType) -> None:
    with pytest.raises(InvalidRecordError):
        primitives.decode_varlong(bytes.fromhex("ff" * 10 + "01"))


def test_malformed_varint_error_names_the_position_where_it_started(
    primitives: ModuleType,
) -> None:
    with pytest.raises(InvalidRecordError, match=r"\bbyte 3\b"):
        primitives.decode_varint(b"\x00\x00\x00\x80", 3)
    with pytest.raises(InvalidRecordError, match=r"\bbyte 2\b"):
        primitives.decode_varlong(b"\x00\x00" + b"\xff" * 10, 2)


def test_decode_at_or_past_the_end_raises_invalid_record(primitives: ModuleType) -> None:
    with pytest.raises(InvalidRecordError):
        primitives.decode_varint(b"\x02", 1)
    with pytest.raises(InvalidRecordError):
        primitives.decode_varlong(b"\x02", 5)


def test_decode_rejects_a_negative_position(primitives: ModuleType) -> None:
    with pytest.raises(ValueError):
        primitives.decode_varint(b"\x02", -1)


@pytest.mark.parametrize("value", [INT32_MAX + 1, INT32_MIN - 1, 2**100])
def test_encode_varint_out_of_range_raises_value_error(primitives: ModuleType, value: int) -> None:
    with pytest.raises(ValueError):
        primitives.encode_varint(value)
    with pytest.raises(ValueError):
        primitives.size_of_varint(value)


@pytest.mark.parametrize("value", [INT64_MAX + 1, INT64_MIN - 1, -(2**100)])
def test_encode_varlong_out_of_range_raises_value_error(primitives: ModuleType, value: int) -> None:
    with pytest.raises(ValueError):
        primitives.encode_varlong(value)
    with pytest.raises(ValueError):
        primitives.size_of_varlong(value)


@FAST
@given(value=st.integers(INT32_MIN, INT32_MAX))
def test_size_of_varint_equals_encoded_length(primitives: ModuleType, value: int) -> None:
    assert primitives.size_of_varint(value) == len(primitives.encode_varint(value))


@FAST
@given(value=st.integers(INT64_MIN, INT64_MAX))
def test_size_of_varlong_equals_encoded_length(primitives: ModuleType, value: int) -> None:
    assert primitives.size_of_varlong(value) == len(primitives.encode_varlong(value))
