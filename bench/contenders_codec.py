"""The codec's contenders for the paths of its scenario table (scenarios.py: paths, tables,
targets), shared by write_results.py (alternating rounds, RESULTS-codec.md) and test_bench.py
(pytest-benchmark).

A path is one comparison: its contenders consume the same input (the same chunks of records,
the same segment bytes, the same batches) and are timed in the same run. Each contender is a
plain function of that input, written the way a user of its library would write it. Every
result is checked once, outside the timed region, against the workload itself (check()), so a
contender that dropped or mangled records cannot post a rate.

Fairness notes (README.md has the long form):
- decoders verify CRCs: eoslog does by default, and aiokafka's and kafka-python's consumers call
  batch.validate_crc() by default (check_crcs=True), so their loops here do too;
- per-record decoders touch offset, timestamp, key and value of every record, nothing more;
- the aiokafka decode-to-Arrow gathers Python lists per column and builds the arrays once, with
  pyarrow doing the bulk work (pa.repeat, numpy for timestamps): the natural fast way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

import harness
from contenders_shared import expect, record_codec
from eoslog.record import layout
from eoslog.record.columns import SPARK_SCHEMA
from scenarios import BATCHES, CHUNKS, CODECS, COMPRESSION_NAMES, PATHS, SEGMENT
from workload import (
    BATCH_RECORDS,
    COMPRESSION_NONE,
    TIMESTAMP_BASE_MS,
    Chunk,
    Workload,
    aiokafka_batches,
    arrow_from_lists,
    as_segment,
    eoslog_batches,
    eoslog_batches_vectorized,
    header_of,
    kafka_python_batches,
    segment_prefix,
)

TOPIC = "t"
PARTITION = 0

Record4 = tuple[int, int, bytes | None, bytes | None]


# --- decoders (timed bodies) ---------------------------------------------------------------


def eoslog_to_arrow(segment: bytes) -> pa.RecordBatch:
    return record_codec().decode_columns(segment).to_arrow(TOPIC, PARTITION)


def aiokafka_to_arrow(segment: bytes) -> pa.RecordBatch:
    """aiokafka's Cython reader into Spark-schema Arrow: one Python object per field per
    record (its API hands out DefaultRecord objects), gathered into lists, then one pa.array
    per column."""
    from aiokafka.record._crecords import MemoryRecords

    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    offsets: list[int] = []
    timestamps: list[int] = []
    timestamp_types: list[int] = []
    add_key, add_value = keys.append, values.append
    add_offset, add_timestamp = offsets.append, timestamps.append
    records = MemoryRecords(segment)
    while (batch := records.next_batch()) is not None:
        if not batch.validate_crc():
            raise ValueError("aiokafka: CRC mismatch")
        before = len(offsets)
        for record in batch:
            add_offset(record.offset)
            add_timestamp(record.timestamp)
            add_key(record.key)
            add_value(record.value)
        timestamp_types += [batch.timestamp_type] * (len(offsets) - before)
    return arrow_from_lists(keys, values, offsets, timestamps, timestamp_types)


def eoslog_records(segment: bytes) -> tuple[int, Record4 | None]:
    codec = record_codec()
    batch_records = codec.batch_records
    count = 0
    last = None
    for position, _header in codec.iter_headers(segment):
        for record in batch_records(segment, position):
            last = (record.offset, record.timestamp, record.key, record.value)
            count += 1
    return count, last


def aiokafka_records(segment: bytes) -> tuple[int, Record4 | None]:
    from aiokafka.record._crecords import MemoryRecords

    count = 0
    last = None
    records = MemoryRecords(segment)
    while (batch := records.next_batch()) is not None:
        if not batch.validate_crc():
            raise ValueError("aiokafka: CRC mismatch")
        for record in batch:
            last = (record.offset, record.timestamp, record.key, record.value)
            count += 1
    return count, last


def kafka_python_records(segment: bytes) -> tuple[int, Record4 | None]:
    from kafka.record.memory_records import MemoryRecords

    count = 0
    last = None
    records = MemoryRecords(segment)
    while (batch := records.next_batch()) is not None:
        if not batch.validate_crc():
            raise ValueError("kafka-python: CRC mismatch")
        for record in batch:
            last = (record.offset, record.timestamp, record.key, record.value)
            count += 1
    return count, last


# --- validators (timed bodies) -------------------------------------------------------------


def eoslog_validate(batches: Sequence[bytes]) -> int:
    validate_batch = record_codec().validate_batch
    count = 0
    for batch in batches:
        count += validate_batch(batch).header.records_count
    return count


def aiokafka_validate(batches: Sequence[bytes]) -> int:
    """What a Python broker built on aiokafka could do: check the CRC, then walk every record
    (aiokafka has no validator; this checks less than validate_batch does)."""
    from aiokafka.record._crecords import DefaultRecordBatch

    count = 0
    for data in batches:
        batch = DefaultRecordBatch(data)
        if not batch.validate_crc():
            raise ValueError("aiokafka: CRC mismatch")
        for _record in batch:
            count += 1
    return count


# --- the codec's contenders -------------------------------------------------------------------


@dataclass(frozen=True)
class Contender:
    path: str
    name: str
    library: str
    run: Callable[[Any], Any]
    # RESULTS.md tables this contender's row appears in (a path may render as two tables).
    tables: tuple[str, ...]
    # Runs on Workload.slow_chunks (kafka-python): fewer records, same rate unit.
    slow: bool = False
    # For encoders: every record of a batch carries the batch's first timestamp.
    one_timestamp_per_batch: bool = False


def _encode_contenders(path: str, compression: int) -> list[Contender]:
    def bind(fn: Callable[[Sequence[Chunk], int], Any]) -> Callable[[Any], Any]:
        return functools.partial(_encode_with, fn, compression)

    tables = (path,)
    return [
        Contender(path, "eoslog append", "eoslog", bind(eoslog_batches), tables),
        Contender(
            path,
            "eoslog append_values",
            "eoslog",
            bind(eoslog_batches_vectorized),
            tables,
            one_timestamp_per_batch=True,
        ),
        Contender(path, "aiokafka", "aiokafka", bind(aiokafka_batches), tables),
        Contender(path, "kafka-python", "kafka-python", bind(kafka_python_batches), tables, True),
    ]


def _encode_with(fn: Callable[[Sequence[Chunk], int], Any], compression: int, chunks: Any) -> Any:
    return fn(chunks, compression)


CONTENDERS: list[Contender] = [
    *_encode_contenders("encode-none", COMPRESSION_NONE),
    *(c for name in CODECS for c in _encode_contenders(f"encode-{name}", CODECS[name])),
    Contender("decode", "eoslog to_arrow", "eoslog", eoslog_to_arrow, ("decode-arrow",)),
    Contender("decode", "aiokafka to_arrow", "aiokafka", aiokafka_to_arrow, ("decode-arrow",)),
    Contender(
        "decode",
        "aiokafka records",
        "aiokafka",
        aiokafka_records,
        ("decode-arrow", "decode-records"),
    ),
    Contender("decode", "eoslog batch_records", "eoslog", eoslog_records, ("decode-records",)),
    Contender(
        "decode",
        "kafka-python records",
        "kafka-python",
        kafka_python_records,
        ("decode-records",),
        slow=True,
    ),
    *(
        Contender(f"decode-{name}", label, library, fn, (f"decode-{name}",))
        for name in CODECS
        for label, library, fn in (
            ("eoslog to_arrow", "eoslog", eoslog_to_arrow),
            ("aiokafka to_arrow", "aiokafka", aiokafka_to_arrow),
            ("aiokafka records", "aiokafka", aiokafka_records),
        )
    ),
    Contender("validate", "eoslog validate_batch", "eoslog", eoslog_validate, ("validate",)),
    Contender("validate", "aiokafka crc+walk", "aiokafka", aiokafka_validate, ("validate",)),
]


def contenders_of(path: str) -> list[Contender]:
    return [c for c in CONTENDERS if c.path == path]


def unavailable(contender: Contender) -> str | None:
    """Why a peer cannot run here (a missing optional codec library), or None."""
    compression = PATHS[contender.path].compression
    if compression == COMPRESSION_NONE or contender.library == "eoslog":
        return None
    name = COMPRESSION_NAMES[compression]
    if contender.library == "aiokafka":
        import aiokafka.codec

        if not getattr(aiokafka.codec, f"has_{name}")():
            return f"aiokafka's {name} needs `cramjam` (pip install cramjam), not installed"
    if contender.library == "kafka-python":
        import kafka.codec

        if not getattr(kafka.codec, f"has_{name}")():
            package = {"snappy": "python-snappy", "zstd": "zstandard"}.get(name, name)
            return f"kafka-python's {name} needs the `{package}` package, not installed"
    return None


# --- inputs and checks ------------------------------------------------------------------------


class Inputs:
    """The inputs of every path for one workload, built on first use and kept."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self._segments: dict[int, bytes] = {}
        self._client_batches: list[bytes] | None = None
        self._expected_arrow: dict[int, pa.RecordBatch] = {}

    def segment(self, compression: int, slow: bool = False) -> bytes:
        if compression not in self._segments:
            self._segments[compression] = as_segment(
                eoslog_batches(self.workload.chunks, compression)
            )
        whole = self._segments[compression]
        return segment_prefix(whole, len(self.workload.slow_chunks)) if slow else whole

    def client_batches(self) -> list[bytes]:
        if self._client_batches is None:
            self._client_batches = eoslog_batches(self.workload.chunks, COMPRESSION_NONE)
        return self._client_batches

    def expected_arrow(self, records: int) -> pa.RecordBatch:
        """The first `records` records as the Spark-schema batch a decoder must return."""
        if records not in self._expected_arrow:
            self._expected_arrow[records] = expected_arrow(self.workload, 0, records)
        return self._expected_arrow[records]

    def records(self, contender: Contender) -> int:
        return self.workload.slow_records if contender.slow else self.workload.records

    def input_of(self, contender: Contender) -> Any:
        path = PATHS[contender.path]
        if path.input_kind == CHUNKS:
            return self.workload.slow_chunks if contender.slow else self.workload.chunks
        if path.input_kind == SEGMENT:
            return self.segment(path.compression, contender.slow)
        return self.client_batches()

    def runner(self, contender: Contender) -> Callable[[], Any]:
        """The timed call: the contender's function bound to its input."""
        return functools.partial(contender.run, self.input_of(contender))

    def timed(self, contender: Contender) -> harness.Contender:
        """The contender as the harness runs it: bound to its input, checked on the warm-up
        (the check returns the bytes the run produced or consumed)."""
        runner = self.runner(contender)
        return harness.Contender(
            contender.name,
            run=lambda _: runner(),
            check=lambda _, result: self.check(contender, result),
            amount=self.records(contender),
        )

    def check(self, contender: Contender, result: Any) -> int:
        """Fail unless `result` holds exactly the workload's records; return the bytes the run
        produced (encode) or consumed (decode, validate), for bandwidth figures."""
        path = PATHS[contender.path]
        records = self.records(contender)
        if path.input_kind == CHUNKS:
            return check_encoded(self.workload, contender, path.compression, result)
        segment_or_batches = self.input_of(contender)
        if path.input_kind == BATCHES:
            expect(result == records, f"{contender.name}: {result} records, not {records}")
            return sum(len(batch) for batch in segment_or_batches)
        if isinstance(result, pa.RecordBatch):
            check_arrow(contender, result, self.expected_arrow(records))
        else:
            check_records(self.workload, contender, result, records, segment_or_batches)
        return len(segment_or_batches)


def expected_record(workload: Workload, index: int, one_timestamp_per_batch: bool) -> Record4:
    timestamp = workload.timestamps[index]
    if one_timestamp_per_batch:
        timestamp = TIMESTAMP_BASE_MS + index - index % BATCH_RECORDS
    return (index, timestamp, workload.keys[index], workload.values[index])


def referee_decode(batch: bytes | bytearray) -> list[Record4]:
    """Decode one batch with kafka-python's pure-Python reader (the independent referee),
    checking its CRC first. Offsets are made relative to the workload by the caller."""
    from kafka.record.default_records import DefaultRecordBatch

    decoded = DefaultRecordBatch(bytes(batch))
    expect(decoded.validate_crc(), "CRC mismatch")
    return [(r.offset, r.timestamp, r.key, r.value) for r in decoded]


def check_encoded(
    workload: Workload, contender: Contender, compression: int, batches: Sequence[bytes]
) -> int:
    chunks = workload.slow_chunks if contender.slow else workload.chunks
    name = contender.name
    expect(len(batches) == len(chunks), f"{name}: {len(batches)} batches, not {len(chunks)}")
    for chunk, batch in zip(chunks, batches, strict=True):
        header = header_of(batch)
        expect(header[3] == layout.MAGIC_V2, f"{name}: magic {header[3]}")
        expect(header[12] == len(chunk), f"{name}: batch of {header[12]} records")
        expect(header[1] + layout.LOG_OVERHEAD == len(batch), f"{name}: length field")
        codec_bits = header[5] & layout.COMPRESSION_MASK
        expect(codec_bits == compression, f"{name}: compression {codec_bits}")
    # The referee is slow (pure Python), so it decodes ten batches spread over the run,
    # first and last included; the headers above cover every batch.
    for index in sorted({round(k * (len(chunks) - 1) / 9) for k in range(10)}):
        chunk = chunks[index]
        got = [
            (chunk.first_index + offset, timestamp, key, value)
            for offset, timestamp, key, value in referee_decode(batches[index])
        ]
        want = [
            expected_record(workload, chunk.first_index + i, contender.one_timestamp_per_batch)
            for i in range(len(chunk))
        ]
        expect(got == want, f"{name}: batch {index} does not hold the workload's records")
    return sum(len(batch) for batch in batches)


def expected_arrow(workload: Workload, start: int, stop: int) -> pa.RecordBatch:
    count = stop - start
    return arrow_from_lists(
        workload.keys[start:stop],
        list(workload.values[start:stop]),
        list(range(start, stop)),
        workload.timestamps[start:stop],
        [layout.TIMESTAMP_CREATE_TIME] * count,
    )


def check_arrow(contender: Contender, batch: pa.RecordBatch, expected: pa.RecordBatch) -> None:
    """The whole decoded batch against the one built from the workload: every row, every
    column (cheap next to the decode, and the strongest guard)."""
    name = contender.name
    rows = expected.num_rows
    expect(batch.num_rows == rows, f"{name}: {batch.num_rows} rows, not {rows}")
    expect(batch.schema.equals(SPARK_SCHEMA), f"{name}: schema {batch.schema}")
    for column in SPARK_SCHEMA.names:
        expect(
            batch.column(column).equals(expected.column(column)), f"{name}: column {column} differs"
        )


def _eoslog_first_batch(segment: bytes) -> list[Record4]:
    return [
        (r.offset, r.timestamp, r.key, r.value) for r in record_codec().batch_records(segment, 0)
    ]


def _aiokafka_first_batch(segment: bytes) -> list[Record4]:
    from aiokafka.record._crecords import MemoryRecords

    batch = MemoryRecords(segment).next_batch()
    return [(r.offset, r.timestamp, r.key, r.value) for r in batch]


def _kafka_python_first_batch(segment: bytes) -> list[Record4]:
    from kafka.record.memory_records import MemoryRecords

    batch = MemoryRecords(segment).next_batch()
    return [(r.offset, r.timestamp, r.key, r.value) for r in batch]


# Each library's own reader for the first batch, to compare its records in full.
FIRST_BATCH_DECODERS: dict[str, Callable[[bytes], list[Record4]]] = {
    "eoslog": _eoslog_first_batch,
    "aiokafka": _aiokafka_first_batch,
    "kafka-python": _kafka_python_first_batch,
}


def check_records(
    workload: Workload,
    contender: Contender,
    result: tuple[int, Record4 | None],
    records: int,
    segment: bytes,
) -> None:
    name = contender.name
    count, last = result
    expect(count == records, f"{name}: {count} records, not {records}")
    want_last = expected_record(workload, records - 1, False)
    expect(last == want_last, f"{name}: last record {last!r:.80}")
    first = FIRST_BATCH_DECODERS[contender.library](segment)
    want = [expected_record(workload, i, False) for i in range(len(workload.chunks[0]))]
    expect(first == want, f"{name}: first batch differs from the workload")
