"""Columnar decode (codec.decode_columns) and its Arrow form in the Spark Kafka source's schema
(docs/api.md "Spark"): the same records batch_records gives, filtered by offset, as Arrow
columns."""

from __future__ import annotations

import datetime
import itertools
import subprocess
import sys
from types import ModuleType

import numpy as np
import pyarrow as pa
import pytest

from eoslog.record import layout
from eoslog.record.columns import SPARK_SCHEMA, SPARK_SCHEMA_WITH_HEADERS, ColumnarRecords
from eoslog.record.types import Record
from tests.support.batches import (
    SAMPLE_RECORDS,
    TS,
    RecordSpec,
    build,
    compressible,
    expected_records,
)

# The Spark Kafka source's columns, written out here rather than imported, so that a change to
# columns.py cannot silently change the schema users get.
SPARK_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
HEADERS_FIELD = pa.field(
    "headers",
    pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])),
)

LZ4_RECORDS: list[RecordSpec] = [
    (TS + 20, b"lz-0", compressible(900, 0), [("h", b"1")]),
    (TS + 21, None, compressible(900, 1), []),
    (TS + 22, b"lz-2", None, [("n", None), ("e", b"")]),
    (TS + 19, b"", b"", []),
]
TXN_RECORDS: list[RecordSpec] = [(TS + 30, b"t0", b"v0", []), (TS + 31, b"t1", None, [])]
APPEND_TIME_RECORDS: list[RecordSpec] = [(TS + 40, b"a0", b"x", []), (TS + 41, None, b"y", [])]
APPEND_TIME = TS + 500
ABORT_OFFSET, COMMIT_OFFSET = 7, 10


def _marker(codec: ModuleType, control_type: int, offset: int) -> bytes:
    return codec.build_control_batch(
        control_type,
        producer_id=5,
        producer_epoch=1,
        coordinator_epoch=2,
        timestamp=TS + offset,
        base_offset=offset,
    )


def _run(codec: ModuleType) -> tuple[list[bytes], list[Record]]:
    """Six batches at consecutive offsets 0..12: none, lz4, ABORT marker, transactional, COMMIT
    marker, lz4 stamped with LogAppendTime. Returns the batches and the data records."""
    stamped = bytearray(build(codec, APPEND_TIME_RECORDS, compression=layout.COMPRESSION_LZ4))
    codec.stamp_batch(
        stamped, base_offset=11, partition_leader_epoch=0, log_append_time_ms=APPEND_TIME
    )
    producer = {"producer_id": 5, "producer_epoch": 1, "is_transactional": True}
    batches = [
        build(codec, SAMPLE_RECORDS),
        build(codec, LZ4_RECORDS, base_offset=3, compression=layout.COMPRESSION_LZ4),
        _marker(codec, layout.CONTROL_ABORT, ABORT_OFFSET),
        build(codec, TXN_RECORDS, base_offset=8, base_sequence=0, **producer),
        _marker(codec, layout.CONTROL_COMMIT, COMMIT_OFFSET),
        bytes(stamped),
    ]
    records = (
        expected_records(SAMPLE_RECORDS)
        + expected_records(LZ4_RECORDS, 3)
        + expected_records(TXN_RECORDS, 8)
        + expected_records(APPEND_TIME_RECORDS, 11, APPEND_TIME)
    )
    return batches, records


def _rows(columns: ColumnarRecords) -> list[Record]:
    table = columns.to_arrow("t", 0).to_pydict()
    headers = table.get("headers", [None] * columns.count)
    return [
        Record(offset, timestamp, key, value, tuple((h["key"], h["value"]) for h in entry or ()))
        for offset, timestamp, key, value, entry in zip(
            columns.offset.tolist(),
            columns.timestamp_ms.tolist(),
            table["key"],
            table["value"],
            headers,
            strict=True,
        )
    ]


def test_decode_columns_of_a_run_equals_batch_records_of_its_data_batches(
    codec: ModuleType,
) -> None:
    batches, records = _run(codec)
    run = b"".join(batches)
    from_batch_records = [
        record
        for batch in batches
        if not codec.read_header(batch).is_control
        for record in codec.batch_records(batch)
    ]
    assert from_batch_records == records
    columns = codec.decode_columns(run, include_headers=True)
    assert columns.count == len(records)
    assert columns.end_position == len(run)
    assert _rows(columns) == records


def test_decode_columns_reports_each_records_timestamp_type(codec: ModuleType) -> None:
    batches, records = _run(codec)
    columns = codec.decode_columns(b"".join(batches))
    types = [1 if record.offset >= 11 else 0 for record in records]
    assert columns.timestamp_type.tolist() == types
    assert columns.to_arrow("t", 0).column("timestampType").to_pylist() == types


@pytest.mark.parametrize(
    ("offset_min", "offset_end"),
    [(0, 2**63 - 1), (2, 5), (3, 7), (5, 6), (7, 8), (7, 11), (12, 100), (100, 200), (4, 4)],
)
def test_decode_columns_keeps_only_offsets_from_offset_min_to_before_offset_end(
    codec: ModuleType, offset_min: int, offset_end: int
) -> None:
    batches, records = _run(codec)
    run = b"".join(batches)
    columns = codec.decode_columns(
        run, include_headers=True, offset_min=offset_min, offset_end=offset_end
    )
    assert _rows(columns) == [r for r in records if offset_min <= r.offset < offset_end]
    assert columns.end_position == len(run)


def test_include_control_adds_the_marker_records_in_offset_order(codec: ModuleType) -> None:
    batches, records = _run(codec)
    columns = codec.decode_columns(b"".join(batches), include_headers=True, include_control=True)
    rows = _rows(columns)
    assert [row.offset for row in rows] == list(range(13))
    markers = {row.offset: row for row in rows if row.offset in (ABORT_OFFSET, COMMIT_OFFSET)}
    assert markers[ABORT_OFFSET].key == b"\x00\x00\x00\x00"
    assert markers[COMMIT_OFFSET].key == b"\x00\x00\x00\x01"
    assert markers[COMMIT_OFFSET].value == b"\x00\x00\x00\x00\x00\x02"
    assert markers[COMMIT_OFFSET].timestamp == TS + COMMIT_OFFSET
    assert [row for row in rows if row.offset not in markers] == records


def test_decode_columns_starts_at_the_given_position(codec: ModuleType) -> None:
    batches, records = _run(codec)
    run = b"".join(batches)
    start = len(batches[0]) + len(batches[1])
    columns = codec.decode_columns(run, start, include_headers=True)
    assert _rows(columns) == [r for r in records if r.offset >= ABORT_OFFSET]
    assert columns.end_position == len(run)


def test_decode_columns_of_runs_decodes_only_the_batches_inside_them(codec: ModuleType) -> None:
    # A read_committed fetch's plan: the aborted LZ4 batch between the runs is never decoded.
    batches, records = _run(codec)
    run = b"".join(batches)
    ends = list(itertools.accumulate(len(batch) for batch in batches))
    runs = [(0, ends[0]), (ends[1], ends[4])]
    columns = codec.decode_columns(run, include_headers=True, runs=runs)
    assert _rows(columns) == [r for r in records if r.offset < 3 or 8 <= r.offset < 11]
    assert columns.end_position == ends[4]
    assert codec.decode_columns(run, runs=[]).count == 0


@pytest.mark.parametrize("runs", [[(10, 5)], [(0, 10**6)], [(50, 60), (0, 10)], [(-1, 4)]])
def test_decode_columns_rejects_runs_out_of_order_or_outside_the_data(
    codec: ModuleType, runs: list[tuple[int, int]]
) -> None:
    batches, _ = _run(codec)
    with pytest.raises(ValueError, match="out of order or outside"):
        codec.decode_columns(b"".join(batches), runs=runs)


@pytest.mark.parametrize("records_max", [1, 2, 3, 4, 5, 7, 100])
def test_decoding_records_max_at_a_time_from_the_last_offset_yields_every_record_once(
    codec: ModuleType, records_max: int
) -> None:
    batches, records = _run(codec)
    run = b"".join(batches)
    found: list[Record] = []
    position = offset_min = 0
    while position < len(run):
        columns = codec.decode_columns(
            run, position, include_headers=True, offset_min=offset_min, records_max=records_max
        )
        assert 0 < columns.count <= records_max or columns.end_position == len(run)
        found += _rows(columns)
        position = columns.end_position
        offset_min = found[-1].offset + 1 if found else 0
    assert found == records


def test_records_max_cuts_the_batch_that_reaches_it_and_ends_at_that_batch(
    codec: ModuleType,
) -> None:
    batches, records = _run(codec)
    columns = codec.decode_columns(b"".join(batches), records_max=len(SAMPLE_RECORDS) + 2)
    assert columns.offset.tolist() == [r.offset for r in records[: len(SAMPLE_RECORDS) + 2]]
    assert columns.end_position == len(batches[0])  # the LZ4 batch was cut: start there again
    whole = codec.decode_columns(b"".join(batches), records_max=len(SAMPLE_RECORDS))
    assert whole.end_position == len(batches[0])  # reached at a batch's end: past it
    with pytest.raises(ValueError, match="records_max"):
        codec.decode_columns(b"".join(batches), records_max=0)


def test_a_column_decoder_fills_one_set_of_columns_from_several_buffers(
    codec: ModuleType,
) -> None:
    batches, records = _run(codec)
    split = 3
    decoder = codec.ColumnDecoder(True)
    assert decoder.decode(b"".join(batches[:split])) == sum(len(b) for b in batches[:split])
    later = b"".join(batches[split:])
    assert decoder.decode(later, offset_min=9) == len(later)
    columns = decoder.finish()
    assert _rows(columns) == [r for r in records if r.offset < 7 or r.offset >= 9]
    assert columns.end_position == len(later)
    with pytest.raises(ValueError, match="finished"):
        decoder.finish()
    with pytest.raises(ValueError, match="finished"):
        decoder.decode(later)


def test_a_column_decoders_records_max_counts_every_record_it_holds(codec: ModuleType) -> None:
    batches, records = _run(codec)
    decoder = codec.ColumnDecoder()
    decoder.decode(batches[0], records_max=len(SAMPLE_RECORDS) + 1)
    assert decoder.count == len(SAMPLE_RECORDS)
    assert decoder.decode(batches[1], records_max=len(SAMPLE_RECORDS) + 1) == 0  # cut in it
    assert decoder.decode(batches[1], records_max=len(SAMPLE_RECORDS) + 1) == 0  # full
    columns = decoder.finish()
    assert columns.offset.tolist() == [r.offset for r in records[: len(SAMPLE_RECORDS) + 1]]


@pytest.mark.parametrize("skipped", [(0,), (1,), (1, 3), (0, 1, 5), (3, 5), (5,), ()])
def test_decode_columns_jumps_over_skipped_batches_unread(
    codec: ModuleType, skipped: tuple[int, ...]
) -> None:
    batches, _ = _run(codec)
    run = bytearray(b"".join(batches))
    starts = np.cumsum([0, *map(len, batches)]).tolist()
    skips = [(starts[i], starts[i + 1]) for i in skipped]
    for start, end in skips:
        run[start + 20 : end] = b"\xff" * (end - start - 20)  # unread: damage goes unseen
    columns = codec.decode_columns(bytes(run), include_headers=True, skips=skips)
    kept = [
        row
        for i, batch in enumerate(batches)
        if i not in skipped
        for row in _rows(codec.decode_columns(batch, include_headers=True))
    ]
    assert _rows(columns) == kept
    assert columns.end_position == len(run)


def test_runs_and_skips_are_not_given_together(codec: ModuleType) -> None:
    batches, _ = _run(codec)
    with pytest.raises(ValueError, match="runs or skips"):
        codec.decode_columns(b"".join(batches), runs=[(0, 10)], skips=[(0, 10)])


@pytest.mark.parametrize(
    "skips",
    [[(5, 40)], [(0, 10**9)], [(10, 5)]],
    ids=["inside-a-batch", "past-the-end", "reversed"],
)
def test_decode_columns_rejects_skips_that_are_not_whole_batches(
    codec: ModuleType, skips: list[tuple[int, int]]
) -> None:
    batches, _ = _run(codec)
    run = b"".join(batches)
    with pytest.raises(ValueError, match="skip"):
        codec.decode_columns(run, skips=skips)


def test_decode_columns_of_nothing_is_an_empty_batch_in_the_spark_schema(
    codec: ModuleType,
) -> None:
    columns = codec.decode_columns(b"")
    assert (columns.count, columns.end_position) == (0, 0)
    table = columns.to_arrow("t", 0)
    assert table.num_rows == 0
    assert table.schema.equals(pa.schema(SPARK_FIELDS))


# --- the Arrow form ---------------------------------------------------------------------------


def test_to_arrow_has_exactly_the_spark_kafka_schema(codec: ModuleType) -> None:
    batches, _ = _run(codec)
    plain = codec.decode_columns(b"".join(batches)).to_arrow("orders", 3)
    with_headers = codec.decode_columns(b"".join(batches), include_headers=True).to_arrow(
        "orders", 3
    )
    assert plain.schema.equals(pa.schema(SPARK_FIELDS))
    assert with_headers.schema.equals(pa.schema([*SPARK_FIELDS, HEADERS_FIELD]))
    assert SPARK_SCHEMA.equals(pa.schema(SPARK_FIELDS))
    assert SPARK_SCHEMA_WITH_HEADERS.equals(pa.schema([*SPARK_FIELDS, HEADERS_FIELD]))


def test_to_arrow_values_equal_the_records(codec: ModuleType) -> None:
    batches, records = _run(codec)
    table = codec.decode_columns(b"".join(batches), include_headers=True).to_arrow("orders", 3)
    table.validate(full=True)
    assert table.column("topic").to_pylist() == ["orders"] * len(records)
    assert table.column("partition").to_pylist() == [3] * len(records)
    assert table.column("offset").to_pylist() == [r.offset for r in records]
    assert table.column("key").to_pylist() == [r.key for r in records]
    assert table.column("value").to_pylist() == [r.value for r in records]
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [
        r.timestamp * 1000 for r in records
    ]
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    assert table.column("timestamp").to_pylist()[0] == epoch + datetime.timedelta(milliseconds=TS)
    # A record without headers has a null headers entry, as in Spark's Kafka source.
    assert table.column("headers").to_pylist() == [
        [{"key": k, "value": v} for k, v in r.headers] if r.headers else None for r in records
    ]


def test_columns_are_arrow_layout_buffers(codec: ModuleType) -> None:
    batches, records = _run(codec)
    columns = codec.decode_columns(b"".join(batches), include_headers=True)
    n = len(records)
    assert columns.offset.dtype == np.int64 and columns.timestamp_ms.dtype == np.int64
    assert columns.timestamp_type.dtype == np.int32
    for name in ("key", "value"):
        offsets = getattr(columns, f"{name}_offsets")
        data = getattr(columns, f"{name}_data")
        validity = np.unpackbits(getattr(columns, f"{name}_validity"), bitorder="little")[:n]
        assert offsets.dtype == np.int32 and len(offsets) == n + 1 and offsets[0] == 0
        assert data.dtype == np.uint8 and offsets[-1] == len(data)
        assert validity.tolist() == [getattr(r, name) is not None for r in records]
    assert columns.headers is not None
    header_validity = np.unpackbits(columns.headers.validity, bitorder="little")[:n]
    assert header_validity.tolist() == [bool(r.headers) for r in records]
    assert len(columns.headers.offsets) == n + 1
    assert columns.headers.offsets[-1] == sum(len(r.headers) for r in records)


def test_decode_columns_without_headers_leaves_them_out(codec: ModuleType) -> None:
    batches, _ = _run(codec)
    columns = codec.decode_columns(b"".join(batches))
    assert columns.headers is None
    assert "headers" not in columns.to_arrow("t", 0).schema.names


def test_to_arrow_does_not_import_pandas() -> None:
    # Regression: pa.array() of a numpy column imports pandas when it is installed (pyspark's
    # extra installs it): 0.26 s on the first consume_arrow() of a process, which made that call
    # run at 4 M records/s instead of 16 M (bench/checks_bench.py, 1 M records).
    code = (
        "import sys\n"
        "from eoslog.record import codec\n"
        "builder = codec.BatchBuilder()\n"
        "builder.append(1, b'k', b'v', None)\n"
        "codec.decode_columns(builder.build()).to_arrow('t', 0)\n"
        "print('pandas' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
