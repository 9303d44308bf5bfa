"""The native codec and its pure-Python twin are one contract (pyext/codec.pyi): for every input
they build the same bytes, return equal values, and raise the same exception type with the
same message (docs/style.md rule 12).

These tests need both twins at once, so they import the modules directly rather than through
the parametrized `codec` fixture; a missing extension makes every test here error.
"""

from __future__ import annotations

import bisect
import dataclasses
import importlib
import itertools
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eoslog.errors import InvalidRecordError
from eoslog.record import layout
from eoslog.record.columns import ColumnarRecords, RecordHeaders
from eoslog.record.compression import CODEC_NAMES
from tests.support.batches import (
    INT32_MAX,
    SEED_BATCHES,
    TS,
    assemble,
    bad_input,
    encode_varint,
    outcome,
    raw_record,
    with_fixed_crc,
)

FAST = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

Twins = tuple[ModuleType, ModuleType]


@pytest.fixture(scope="module")
def codecs() -> Twins:
    return (
        importlib.import_module("eoslog._ext.codec"),
        importlib.import_module("eoslog.record.pycodec"),
    )


@pytest.fixture(scope="module")
def primitive_twins() -> Twins:
    return (
        importlib.import_module("eoslog._ext.primitives"),
        importlib.import_module("eoslog.record.pyprimitives"),
    )


# --- strategies -------------------------------------------------------------------------------

timestamps = st.one_of(
    st.just(-1),
    st.integers(0, 2**41),
    st.just(TS),
    st.integers(TS - 10_000, TS + 10_000),
    st.integers(2**41, 2**62),
)
payloads = st.one_of(
    st.none(),
    st.just(b""),
    st.binary(max_size=64),
    st.binary(min_size=500, max_size=2048),
    st.integers(1, 2048).map(lambda n: b"ab" * (n // 2)),  # compressible
)
headers = st.lists(
    st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=40))), max_size=3
)
records = st.lists(st.tuples(timestamps, payloads, payloads, headers), min_size=1, max_size=12)


@st.composite
def builder_settings(draw: st.DrawFn) -> dict[str, Any]:
    chosen: dict[str, Any] = {
        "compression": draw(st.sampled_from(list(CODEC_NAMES.values()))),
        "timestamp_type": draw(st.sampled_from([0, 1])),
        "partition_leader_epoch": draw(st.sampled_from([-1, 0, 5])),
        "base_offset": draw(st.sampled_from([0, 1, 2**40])),
    }
    if draw(st.booleans()):
        chosen["producer_id"] = draw(st.integers(0, 2**63 - 1))
        chosen["producer_epoch"] = draw(st.integers(0, 2**15 - 1))
        chosen["base_sequence"] = draw(st.integers(0, INT32_MAX))
        chosen["is_transactional"] = draw(st.booleans())
    if draw(st.booleans()):
        # Small enough that some appends return False and some records do not fit at all.
        chosen["batch_bytes_max"] = draw(st.integers(layout.HEADER_SIZE, 4096))
    return chosen


def _columns_equal(native: ColumnarRecords, pure: ColumnarRecords) -> None:
    for field in dataclasses.fields(ColumnarRecords):
        mine, theirs = getattr(native, field.name), getattr(pure, field.name)
        if isinstance(mine, np.ndarray):
            assert mine.dtype == theirs.dtype, field.name
            assert np.array_equal(mine, theirs), field.name
        elif isinstance(mine, RecordHeaders) or isinstance(theirs, RecordHeaders):
            assert mine is not None and theirs is not None, field.name
            for sub in dataclasses.fields(RecordHeaders):
                a, b = getattr(mine, sub.name), getattr(theirs, sub.name)
                assert a.dtype == b.dtype, sub.name
                assert np.array_equal(a, b), f"headers.{sub.name}"
        else:
            assert mine == theirs, field.name
    assert native.to_arrow("t", 0).equals(pure.to_arrow("t", 0))


def _same(native: tuple[str, Any], pure: tuple[str, Any]) -> None:
    assert native[0] == pure[0], (native, pure)
    if native[0] == "ok" and isinstance(native[1], ColumnarRecords):
        _columns_equal(native[1], pure[1])
    else:
        assert native == pure


def _same_everywhere(codecs: Twins, data: bytes) -> None:
    calls: list[tuple[str, Callable[[ModuleType], Any]]] = [
        ("validate_batch", lambda c: c.validate_batch(data)),
        ("validate_batch_leader", lambda c: c.validate_batch(data, from_client=False)),
        ("validate_batch_small", lambda c: c.validate_batch(data, batch_bytes_max=100)),
        ("batch_records", lambda c: c.batch_records(data)),
        ("batch_records_no_crc", lambda c: c.batch_records(data, verify_crc=False)),
        ("read_header", lambda c: c.read_header(data)),
        ("iter_headers", lambda c: c.iter_headers(data)),
        ("batch_crc", lambda c: c.batch_crc(data)),
        ("decode_columns", lambda c: c.decode_columns(data)),
        (
            "decode_columns_all",
            lambda c: c.decode_columns(
                data, include_headers=True, include_control=True, verify_crc=False
            ),
        ),
    ]
    native, pure = codecs
    for name, call in calls:
        try:
            _same(outcome(call, native), outcome(call, pure))
        except AssertionError as error:
            raise AssertionError(f"{name}: {error}") from None


# --- building ---------------------------------------------------------------------------------


@FAST
@given(settings_=builder_settings(), specs=records)
def test_builders_make_identical_bytes_and_identical_append_answers(
    codecs: Twins, settings_: dict[str, Any], specs: list[Any]
) -> None:
    native, pure = codecs
    builders = [native.BatchBuilder(**settings_), pure.BatchBuilder(**settings_)]
    for timestamp, key, value, record_headers in specs:
        answers = [outcome(b.append, timestamp, key, value, record_headers) for b in builders]
        assert answers[0] == answers[1]
        assert builders[0].record_count() == builders[1].record_count()
        assert builders[0].estimated_size() == builders[1].estimated_size()
    if builders[0].record_count():
        built = [b.build() for b in builders]
        assert built[0] == built[1]
        _same_everywhere(codecs, built[0])


@FAST
@given(
    settings_=builder_settings(),
    values=st.lists(payloads, min_size=1, max_size=30),
    with_keys=st.booleans(),
    timestamp=timestamps,
)
def test_append_values_fits_the_same_records_in_both_twins(
    codecs: Twins, settings_: dict[str, Any], values: list[Any], with_keys: bool, timestamp: int
) -> None:
    keys = [b"%d" % i for i in range(len(values))] if with_keys else None
    builders = [codec.BatchBuilder(**settings_) for codec in codecs]
    answers = [outcome(b.append_values, values, keys, timestamp) for b in builders]
    assert answers[0] == answers[1]
    if builders[0].record_count():
        assert builders[0].build() == builders[1].build()


@pytest.mark.parametrize(
    "arguments",
    [
        {"compression": -1},
        {"compression": 5},
        {"compression": 7},
        {"timestamp_type": 2},
        {"is_transactional": True},
        {"is_transactional": True, "producer_id": -1, "producer_epoch": 0, "base_sequence": 0},
    ],
)
def test_builders_refuse_the_same_settings_the_same_way(
    codecs: Twins, arguments: dict[str, Any]
) -> None:
    native, pure = (outcome(codec.BatchBuilder, **arguments) for codec in codecs)
    assert native[0] == pure[0] == "raised"
    assert native == pure
    assert issubclass(native[1][0], ValueError)


@pytest.mark.parametrize("timestamp", [-2, -(2**40)])
def test_builders_refuse_a_negative_timestamp_the_same_way(codecs: Twins, timestamp: int) -> None:
    native, pure = (outcome(codec.BatchBuilder().append, timestamp, b"k", b"v") for codec in codecs)
    assert native[0] == "raised"
    assert native == pure
    assert issubclass(native[1][0], ValueError)


@pytest.mark.parametrize("control_type", [layout.CONTROL_ABORT, layout.CONTROL_COMMIT])
def test_control_batches_are_identical(codecs: Twins, control_type: int) -> None:
    built = [
        codec.build_control_batch(
            control_type,
            producer_id=2**40,
            producer_epoch=300,
            coordinator_epoch=-1,
            timestamp=TS,
            base_offset=77,
            partition_leader_epoch=4,
        )
        for codec in codecs
    ]
    assert built[0] == built[1]
    _same_everywhere(codecs, built[0])


@FAST
@given(
    seed=st.sampled_from(sorted(SEED_BATCHES)),
    base_offset=st.integers(0, 2**62),
    epoch=st.integers(-1, INT32_MAX),
    append_time=st.one_of(st.just(-1), st.integers(0, 2**50)),
    max_timestamp=st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
)
def test_stamp_batch_rewrites_identically(
    codecs: Twins,
    seed: str,
    base_offset: int,
    epoch: int,
    append_time: int,
    max_timestamp: int | None,
) -> None:
    stamped = []
    for codec in codecs:
        data = bytearray(SEED_BATCHES[seed])
        codec.stamp_batch(
            data,
            base_offset=base_offset,
            partition_leader_epoch=epoch,
            log_append_time_ms=append_time,
            max_timestamp=max_timestamp if append_time < 0 else None,
        )
        stamped.append(bytes(data))
    assert stamped[0] == stamped[1]
    _same_everywhere(codecs, stamped[0])


# --- decoding bad bytes -----------------------------------------------------------------------


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=bad_input())
def test_twins_agree_on_every_decode_of_bad_bytes(codecs: Twins, data: bytes) -> None:
    _same_everywhere(codecs, data)


def test_twins_agree_when_a_bad_utf8_header_key_comes_before_an_overrun(codecs: Twins) -> None:
    # Found by the test above: the pure walk reported the key's UTF-8 before the later
    # header that runs past the record; the native walk checks the structure first.
    data = bytes.fromhex(
        "00000000000000000000006800000000022275ea620000000000020000018bcfe568000000018bcf"
        "e56807ffffffffffffffffffffffffffff0000000348000000046b301666697273742076616c7565"
        "040a0000008074726162630a656d707479010c000e020100001400060400010204c3a900"
    )
    _same_everywhere(codecs, data)


@FAST
@given(
    data=st.lists(st.sampled_from(sorted(SEED_BATCHES)), min_size=1, max_size=4),
    cut=st.integers(0, 200),
    offset_min=st.integers(0, 5),
    span=st.integers(0, 8),
)
def test_twins_agree_on_decoding_runs_of_batches(
    codecs: Twins, data: list[str], cut: int, offset_min: int, span: int
) -> None:
    run = b"".join(SEED_BATCHES[name] for name in data)
    run = run[: max(0, len(run) - cut)]
    for include_headers in (False, True):
        _same(
            *(
                outcome(
                    codec.decode_columns,
                    run,
                    include_headers=include_headers,
                    include_control=True,
                    offset_min=offset_min,
                    offset_end=offset_min + span,
                )
                for codec in codecs
            )
        )
    _same(*(outcome(codec.iter_headers, run) for codec in codecs))


# --- primitives -------------------------------------------------------------------------------


@FAST
@given(value=st.integers(-(2**31), 2**31 - 1), wide=st.integers(-(2**63), 2**63 - 1))
def test_varint_encodings_are_identical(primitive_twins: Twins, value: int, wide: int) -> None:
    native, pure = primitive_twins
    assert native.encode_varint(value) == pure.encode_varint(value)
    assert native.encode_varlong(wide) == pure.encode_varlong(wide)
    assert native.size_of_varint(value) == pure.size_of_varint(value)
    assert native.size_of_varlong(wide) == pure.size_of_varlong(wide)


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, 2**40])
def test_varint_refuses_values_outside_int32_alike(primitive_twins: Twins, value: int) -> None:
    native, pure = (outcome(p.encode_varint, value) for p in primitive_twins)
    assert native[0] == pure[0] == "raised"
    assert issubclass(native[1][0], ValueError) and issubclass(pure[1][0], ValueError)


@FAST
@given(data=st.binary(max_size=12), position=st.integers(0, 12), seed=st.integers(0, 2**32 - 1))
def test_varint_decoding_and_crc_agree_on_random_bytes(
    primitive_twins: Twins, data: bytes, position: int, seed: int
) -> None:
    native, pure = primitive_twins
    position = min(position, len(data))
    for name in ("decode_varint", "decode_varlong"):
        assert outcome(getattr(native, name), data, position) == outcome(
            getattr(pure, name), data, position
        ), name
    assert native.crc32c(data) == pure.crc32c(data)
    assert native.crc32c(data, seed) == pure.crc32c(data, seed)


# --- the native validation walk's fast path and chunks ---------------------------------------
#
# The native validate_batch walks uncompressed records in chunks, interleaved with the CRC, and
# checks the common record (no headers, offset delta i, varints of at most 3 bytes) on a fast
# path that hands every other record to the exact path. These batches are long enough to span
# many chunks and reach 3-byte offset deltas (i >= 8192); each lie below forces one record off
# the fast path at a chosen place, where the twins must still agree on the status.


def _padded_varint(value: int, size: int) -> bytes:
    """`value` zigzagged in exactly `size` bytes (a longer than needed encoding is legal)."""
    unsigned = (value << 1) ^ (value >> 63)
    out = bytearray()
    for _ in range(size - 1):
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    assert unsigned < 0x80
    out.append(unsigned)
    return bytes(out)


def _plain_section(count: int, value_bytes: Callable[[int], int]) -> list[bytes]:
    return [
        raw_record(offset_delta=i, timestamp_delta=i % 50 - 20, value=b"v" * value_bytes(i))
        for i in range(count)
    ]


def _lied(index: int, lie: str) -> bytes:
    """Record `index` of a long section, told in one of the ways that leave the fast path."""
    value = b"v" * (index % 40 + 1)
    lies: dict[str, Callable[[], bytes]] = {
        "wrong offset delta": lambda: raw_record(offset_delta=index + 1, value=value),
        "header count without headers": lambda: raw_record(
            offset_delta=index, value=value, header_count=1
        ),
        "key longer than the record": lambda: raw_record(
            offset_delta=index, key=b"k", key_length=200, value=value
        ),
        "header key not UTF-8": lambda: raw_record(
            offset_delta=index, value=value, headers=[(b"\xff", b"x")]
        ),
        "valid header": lambda: raw_record(offset_delta=index, value=value, headers=[(b"h", None)]),
        "valid long timestamp delta": lambda: raw_record(
            offset_delta=index, timestamp_delta=2**40, value=value
        ),
        "valid null key and value": lambda: raw_record(offset_delta=index),
    }
    if lie in lies:
        return lies[lie]()
    body = bytearray(raw_record(offset_delta=index, value=value))
    length_bytes = 1 if body[0] < 0x80 else 2
    length = len(body) - length_bytes
    body = body[length_bytes:]
    if lie == "valid 4-byte value length":
        at = body.index(encode_varint(len(value)) + value)
        body[at : at + len(encode_varint(len(value)))] = _padded_varint(len(value), 4)
        length = len(body)
    told = {"length one short": length - 1, "length one long": length + 1, "length 0": 0}
    return encode_varint(told.get(lie, -1 if lie == "length -1" else length)) + bytes(body)


LIES = [
    "length one short",
    "length one long",
    "length 0",
    "length -1",
    "wrong offset delta",
    "header count without headers",
    "key longer than the record",
    "header key not UTF-8",
    "valid header",
    "valid long timestamp delta",
    "valid null key and value",
    "valid 4-byte value length",
]


@pytest.mark.parametrize("lie", LIES)
def test_twins_agree_on_a_long_batch_with_one_record_off_the_fast_path(
    codecs: Twins, lie: str
) -> None:
    count = 1_500  # ~40 KiB: many chunks of the native walk (3 KiB each)
    records = _plain_section(count, lambda i: i % 40 + 1)
    ends = list(itertools.accumulate(len(record) for record in records))
    # The records around the first chunks' ends, wherever the batch sits in memory.
    straddling = {
        bisect.bisect(ends, at) for at in [*range(2_950, 3_100, 28), *range(6_000, 6_200, 28)]
    }
    for index in sorted({0, 1, count // 2, count - 2, count - 1} | straddling):
        section = [*records[:index], _lied(index, lie), *records[index + 1 :]]
        data = assemble(b"".join(section), records_count=count)
        native, pure = (outcome(codec.validate_batch, data) for codec in codecs)
        assert native == pure, (lie, index)
        assert (native[0] == "ok") == lie.startswith("valid"), (lie, index, native)


def test_twins_agree_on_a_batch_with_3_byte_offset_deltas_and_record_lengths(
    codecs: Twins,
) -> None:
    count = 9_000  # offset deltas from 8192 on take 3 bytes; the 9 KiB value's length too
    records = _plain_section(count, lambda i: 9_000 if i == 5_000 else i % 3)
    for cut in (0, 1, 2, 3, 17):  # the last records end 0-17 bytes before the section does
        data = assemble(b"".join(records)[: -cut or None], records_count=count)
        native, pure = (outcome(codec.validate_batch, data) for codec in codecs)
        assert native == pure, cut
        assert (native[0] == "ok") == (cut == 0)


LONG_SEED = assemble(
    b"".join(_plain_section(2_500, lambda i: 9_000 if i == 1_000 else i % 120)),
    records_count=2_500,
)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_twins_agree_on_mutations_of_a_long_batch(codecs: Twins, data: st.DataObject) -> None:
    mutated = bytearray(LONG_SEED)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(layout.HEADER_SIZE, len(mutated) - 1))
        kind = data.draw(st.sampled_from(["overwrite", "insert", "delete"]))
        if kind == "overwrite":
            mutated[at] = data.draw(st.integers(0, 255))
        elif kind == "insert":
            mutated[at:at] = data.draw(st.binary(min_size=1, max_size=4))
        else:
            del mutated[at : at + data.draw(st.integers(1, 4))]
    batch = with_fixed_crc(mutated) if data.draw(st.booleans()) else bytes(mutated)
    native, pure = (outcome(codec.validate_batch, batch) for codec in codecs)
    assert native == pure


# --- columnar appends and murmur2 (the producer's vectorized path) ---------------------------

spans = st.lists(st.tuples(st.integers(-2, 40), st.integers(-2, 12)), max_size=30)


@FAST
@given(
    data=st.binary(max_size=40),
    value_spans=spans,
    keyed=st.booleans(),
    first=st.integers(0, 3),
    batch_bytes_max=st.sampled_from([200, 1 << 20]),
)
def test_twins_build_the_same_batch_from_spans(
    codecs: Twins,
    data: bytes,
    value_spans: list[tuple[int, int]],
    keyed: bool,
    first: int,
    batch_bytes_max: int,
) -> None:
    starts = np.array([s for s, _ in value_spans], dtype=np.int64)
    lengths = np.array([n for _, n in value_spans], dtype=np.int32)
    results = []
    for module in codecs:
        builder = module.BatchBuilder(batch_bytes_max=batch_bytes_max, producer_id=7)
        appended = outcome(
            builder.append_spans,
            data,
            starts,
            lengths,
            data if keyed else None,
            starts[::-1].copy() if keyed else None,
            lengths[::-1].copy() if keyed else None,
            TS,
            first,
        )
        builder.set_producer_state(7, 3, 2**31 - 2)
        built = outcome(builder.build)
        results.append((appended, built))
    assert results[0] == results[1]


@FAST
@given(value_spans=spans, data=st.binary(max_size=40))
def test_twins_agree_on_murmur2_of_spans(
    primitive_twins: Twins, value_spans: list[tuple[int, int]], data: bytes
) -> None:
    starts = np.array([s for s, _ in value_spans], dtype=np.int64)
    lengths = np.array([n for _, n in value_spans], dtype=np.int32)
    native, pure = (outcome(m.murmur2_spans, data, starts, lengths) for m in primitive_twins)
    if native[0] == "ok":
        assert pure[0] == "ok" and native[1].tolist() == pure[1].tolist()
    else:
        assert native == pure
    assert primitive_twins[0].murmur2(data) == primitive_twins[1].murmur2(data)


# --- offsets going backwards inside a batch (fuzz findings codec_differential-records-max-*) ---


def _batch_with_offset_deltas(deltas: list[int], last_offset_delta: int | None = None) -> bytes:
    """A batch with a valid CRC whose records carry these offset deltas."""
    section = b"".join(
        raw_record(offset_delta=delta, value=b"v%d" % i) for i, delta in enumerate(deltas)
    )
    last = len(deltas) - 1 if last_offset_delta is None else last_offset_delta
    return assemble(section, records_count=len(deltas), last_offset_delta=last)


def _decodes(data: bytes) -> list[tuple[str, Callable[[ModuleType], Any]]]:
    return [
        ("batch_records", lambda c: c.batch_records(data)),
        ("decode_columns", lambda c: c.decode_columns(data)),
        ("decode_columns_capped", lambda c: c.decode_columns(data, records_max=3)),
        ("decode_columns_from_1", lambda c: c.decode_columns(data, offset_min=1, records_max=2)),
    ]


@pytest.mark.parametrize(
    ("deltas", "last_offset_delta"),
    [
        ([0, 1, 2, 3, 0], None),
        ([-1, 1, 2, 3, 4], None),
        ([0, 1, 1], None),
        ([0, 1, 5, 6, 9], 4),
        ([0, 1, 2, 3, 4, 5, 6, 7], 4),
    ],
    ids=["back-to-0", "negative-first", "repeated", "past-the-last-delta", "count-past-the-span"],
)
def test_both_twins_refuse_offset_deltas_that_do_not_increase_within_the_batch(
    codecs: Twins, deltas: list[int], last_offset_delta: int | None
) -> None:
    # Regression: decode_columns and batch_records returned offsets going backwards (only
    # validate_batch refused the batch), and with records_max the twins returned different
    # records: the native one cut by offset, the pure one by count. Regression (fuzz finding
    # partition_directory-consumer-offsets-go-back): a record past the batch's last offset
    # delta read as an offset of the next batch's, so a consumer saw 4, 13, 6.
    data = _batch_with_offset_deltas(deltas, last_offset_delta)
    expected = "record offset deltas must run 0, 1, ..., count-1"
    for name, call in _decodes(data):
        for codec in codecs:
            kind, value = outcome(call, codec)
            assert kind == "raised", (name, codec.__name__, value)
            assert value[0] is InvalidRecordError, (name, codec.__name__, value)
            assert value[1].startswith(expected), (name, codec.__name__, value)
    _same_everywhere(codecs, data)


@pytest.mark.parametrize(
    ("deltas", "last_offset_delta"),
    [([0, 2, 3, 7], 7), ([0, 1, 5, 6, 9], 9), ([3, 4], 6)],
    ids=["compacted", "gaps-after-the-first-two", "first-offsets-compacted-away"],
)
def test_both_twins_read_increasing_offset_deltas_alike_with_or_without_records_max(
    codecs: Twins, deltas: list[int], last_offset_delta: int
) -> None:
    # Deltas increasing with gaps (what compaction leaves) still read. Regression (fuzz
    # finding codec_differential-records-max-cut and a later input of the same target): with
    # records_max, a batch whose count says one record per offset but whose deltas disagree
    # was cut by offset in the native twin and by count in the pure one.
    data = _batch_with_offset_deltas(deltas, last_offset_delta)
    for name, call in _decodes(data):
        native, pure = (outcome(call, codec) for codec in codecs)
        assert native[0] == "ok", (name, native)
        _same(native, pure)
    assert [r.offset for r in codecs[0].batch_records(data)] == deltas


def _two_faults(faults: tuple[str, str]) -> bytes:
    """Record 1 of three, with both faults: a length one long (the byte after it is padding), an
    offset delta that is not its index, a header key that is not UTF-8."""
    headers = [(b"\xff", b"x")] if "header key not UTF-8" in faults else [(b"h", b"x")]
    delta = 5 if "wrong offset delta" in faults else 1
    record = raw_record(offset_delta=delta, value=b"v", headers=headers)
    if "length one long" in faults:
        record = encode_varint(len(record)) + record[1:] + b"\x00"  # body + 1 byte
    return record


@pytest.mark.parametrize(
    "faults",
    list(
        itertools.combinations(["length one long", "wrong offset delta", "header key not UTF-8"], 2)
    ),
    ids=lambda faults: " + ".join(faults),
)
def test_twins_name_the_same_fault_for_a_record_with_two(
    codecs: Twins, faults: tuple[str, str]
) -> None:
    # Regression (fuzz finding codec_differential-two-faults-order): for a record whose length
    # field was wrong and whose header key was not UTF-8, native validate_batch named the length
    # and the pure twin the header key. Both now check structure, offset delta, then UTF-8.
    section = raw_record(offset_delta=0, value=b"v") + _two_faults(faults)
    section += raw_record(offset_delta=2, value=b"v")
    data = assemble(section, records_count=3)
    native, pure = (outcome(codec.validate_batch, data) for codec in codecs)
    assert native[0] == "raised"
    assert native == pure


def test_a_log_batch_with_more_records_than_its_offset_span_is_invalid_in_both_twins(
    codecs: Twins,
) -> None:
    # Regression (found by the codec_native fuzz replay once readers refused a record past the
    # last offset delta): validate_batch(from_client=False) accepted three records in a batch
    # whose last offset delta is 1, which every reader then refused.
    section = b"".join(raw_record(offset_delta=i, value=b"v") for i in range(3))
    data = assemble(section, records_count=3, last_offset_delta=1)
    for codec in codecs:
        with pytest.raises(InvalidRecordError, match="up to the batch's last offset delta"):
            codec.validate_batch(data, from_client=False)
        with pytest.raises(InvalidRecordError, match="up to the batch's last offset delta"):
            codec.batch_records(data)
