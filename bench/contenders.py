"""The codec's scenario table: the benchmarked paths, their contenders and targets, shared by
write_results.py (alternating rounds, RESULTS-codec.md) and test_bench.py (pytest-benchmark).

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
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

import eoslog
import harness
from eoslog import limits
from eoslog.record import layout
from eoslog.record.columns import SPARK_SCHEMA
from scenarios import BATCHES, CHUNKS, PATHS, SEGMENT
from workload import (
    BATCH_RECORDS,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    MIB,
    READ_TOPIC,
    TIMESTAMP_BASE_MS,
    VALUE_BYTES,
    BatchTable,
    Chunk,
    Committed,
    Partition,
    Workload,
    aiokafka_batches,
    arrow_from_lists,
    as_segment,
    eoslog_batches,
    eoslog_batches_vectorized,
    header_of,
    kafka_python_batches,
    remove_recovery_markers,
    segment_prefix,
)

TOPIC = "t"
PARTITION = 0

Record4 = tuple[int, int, bytes | None, bytes | None]


def _codec() -> Any:
    from eoslog.record import codec

    return codec


# --- decoders (timed bodies) ---------------------------------------------------------------


def eoslog_to_arrow(segment: bytes) -> pa.RecordBatch:
    return _codec().decode_columns(segment).to_arrow(TOPIC, PARTITION)


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
    codec = _codec()
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
    validate_batch = _codec().validate_batch
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
    *_encode_contenders("encode-lz4", COMPRESSION_LZ4),
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
    Contender("decode-lz4", "eoslog to_arrow", "eoslog", eoslog_to_arrow, ("decode-lz4",)),
    Contender("decode-lz4", "aiokafka to_arrow", "aiokafka", aiokafka_to_arrow, ("decode-lz4",)),
    Contender("decode-lz4", "aiokafka records", "aiokafka", aiokafka_records, ("decode-lz4",)),
    Contender("validate", "eoslog validate_batch", "eoslog", eoslog_validate, ("validate",)),
    Contender("validate", "aiokafka crc+walk", "aiokafka", aiokafka_validate, ("validate",)),
]


def contenders_of(path: str) -> list[Contender]:
    return [c for c in CONTENDERS if c.path == path]


def unavailable(contender: Contender) -> str | None:
    """Why a peer cannot run here (a missing optional codec library), or None."""
    compression = PATHS[contender.path].compression
    if compression == COMPRESSION_LZ4 and contender.library == "aiokafka":
        import aiokafka.codec

        if not aiokafka.codec.has_lz4():
            return "aiokafka's lz4 needs `cramjam` (pip install 'aiokafka[lz4]'), not installed"
    if compression == COMPRESSION_LZ4 and contender.library == "kafka-python":
        import kafka.codec

        if not kafka.codec.has_lz4():
            return "kafka-python's lz4 needs the `lz4` package, not installed"
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
            _expect(result == records, f"{contender.name}: {result} records, not {records}")
            return sum(len(batch) for batch in segment_or_batches)
        if isinstance(result, pa.RecordBatch):
            check_arrow(contender, result, self.expected_arrow(records))
        else:
            check_records(self.workload, contender, result, records, segment_or_batches)
        return len(segment_or_batches)


def _expect(condition: bool, message: str) -> None:
    # Not `assert`: the checks must run under python -O too.
    if not condition:
        raise AssertionError(f"fairness check failed: {message}")


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
    _expect(decoded.validate_crc(), "CRC mismatch")
    return [(r.offset, r.timestamp, r.key, r.value) for r in decoded]


def check_encoded(
    workload: Workload, contender: Contender, compression: int, batches: Sequence[bytes]
) -> int:
    chunks = workload.slow_chunks if contender.slow else workload.chunks
    name = contender.name
    _expect(len(batches) == len(chunks), f"{name}: {len(batches)} batches, not {len(chunks)}")
    for chunk, batch in zip(chunks, batches, strict=True):
        header = header_of(batch)
        _expect(header[3] == layout.MAGIC_V2, f"{name}: magic {header[3]}")
        _expect(header[12] == len(chunk), f"{name}: batch of {header[12]} records")
        _expect(header[1] + layout.LOG_OVERHEAD == len(batch), f"{name}: length field")
        codec_bits = header[5] & layout.COMPRESSION_MASK
        _expect(codec_bits == compression, f"{name}: compression {codec_bits}")
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
        _expect(got == want, f"{name}: batch {index} does not hold the workload's records")
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
    _expect(batch.num_rows == rows, f"{name}: {batch.num_rows} rows, not {rows}")
    _expect(batch.schema.equals(SPARK_SCHEMA), f"{name}: schema {batch.schema}")
    for column in SPARK_SCHEMA.names:
        _expect(
            batch.column(column).equals(expected.column(column)), f"{name}: column {column} differs"
        )


def _eoslog_first_batch(segment: bytes) -> list[Record4]:
    return [(r.offset, r.timestamp, r.key, r.value) for r in _codec().batch_records(segment, 0)]


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
    _expect(count == records, f"{name}: {count} records, not {records}")
    want_last = expected_record(workload, records - 1, False)
    _expect(last == want_last, f"{name}: last record {last!r:.80}")
    first = FIRST_BATCH_DECODERS[contender.library](segment)
    want = [expected_record(workload, i, False) for i in range(len(workload.chunks[0]))]
    _expect(first == want, f"{name}: first batch differs from the workload")


# --- the partition log: append, random read, recovery, clean open (log_bench.py) ----------------

APPEND_MAX_MESSAGE_BYTES = 2 * MIB


def append_contenders(
    broker: Any, root: str, batches: Sequence[bytes], records: int
) -> list[harness.Contender]:
    """eoslog `append_batch` of every batch (a new topic in `broker` per run) and raw
    `os.write` of the same bytes to a new file under `root`; each also with a final fsync."""
    total = sum(len(b) for b in batches)
    counter = iter(range(1 << 30))

    def eoslog_prepare() -> Any:
        topic = f"append-{next(counter)}"
        broker.create_topic(topic, 1, {"max.message.bytes": APPEND_MAX_MESSAGE_BYTES})
        return topic, broker.log(topic, 0)

    def eoslog_run(state: Any, sync: bool) -> None:
        log = state[1]
        append = log.append_batch
        for raw in batches:
            append(raw)
        if sync:
            log.flush()

    def eoslog_finish(state: Any) -> None:
        topic, log = state
        _expect(log.log_end_offset == records, f"eoslog log end {log.log_end_offset}")
        stored = sum(s.size for s in log.segments)
        _expect(stored == total, f"eoslog stored {stored} bytes, expected {total}")
        broker.delete_topic(topic)

    def raw_prepare() -> Any:
        path = os.path.join(root, f"raw-{next(counter)}.log")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        return path, fd

    def raw_run(state: Any, sync: bool) -> None:
        fd = state[1]
        write = os.write
        for raw in batches:
            if write(fd, raw) != len(raw):
                raise OSError("short write")
        if sync:
            os.fdatasync(fd)

    def raw_finish(state: Any) -> None:
        path, fd = state
        os.close(fd)
        size = os.path.getsize(path)
        _expect(size == total, f"raw file holds {size} bytes, not {total}")
        os.unlink(path)

    sides = []
    for sync, suffix in ((False, ""), (True, " + fsync")):
        sides += [
            harness.Contender(
                f"eoslog append_batch{suffix}",
                functools.partial(eoslog_run, sync=sync),
                eoslog_prepare,
                eoslog_finish,
            ),
            harness.Contender(
                f"raw os.write{suffix}",
                functools.partial(raw_run, sync=sync),
                raw_prepare,
                raw_finish,
            ),
        ]
    return sides


def append_parts(batches: Sequence[bytes]) -> list[harness.Contender]:
    """The parts of append_batch that touch every byte, over the same batches in memory."""
    from eoslog.record import primitives

    codec = _codec()

    def validate(_: object) -> None:
        for raw in batches:
            codec.validate_batch(raw, batch_bytes_max=APPEND_MAX_MESSAGE_BYTES)

    def crc(_: object) -> None:
        for raw in batches:
            primitives.crc32c(raw)

    def copy(_: object) -> None:
        for raw in batches:
            bytearray(raw)

    return [
        harness.Contender("validate_batch", validate),
        harness.Contender("of which CRC32C (eoslog primitives.crc32c)", crc),
        harness.Contender("bytearray copy", copy),
    ]


def read_files_raw(paths: Sequence[str], chunk: int = limits.recovery_chunk_bytes) -> int:
    """os.pread of every file in `chunk`-byte pieces: the physical peer of recovery."""
    total = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            position = 0
            while data := os.pread(fd, chunk, position):
                position += len(data)
            total += position
        finally:
            os.close(fd)
    return total


def open_files_raw(directory: str) -> int:
    """listdir plus open/fstat/close of every file: the syscall floor of a clean open."""
    count = 0
    for name in os.listdir(directory):
        fd = os.open(os.path.join(directory, name), os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fstat(fd)
        finally:
            os.close(fd)
        count += 1
    return count


def open_contenders(
    partition: Partition, recovery: bool, floor: Callable[[], int], floor_name: str
) -> list[harness.Contender]:
    """`eoslog.open` of the partition, `close()` of it (each timed alone: the open's broker is
    closed untimed, the close's opened untimed), and the floor. `recovery`: the clean-shutdown
    marker and the recovery point are removed before each open, so every segment is rescanned;
    otherwise the open must be clean."""
    durability = {"durability": "none"} if recovery else {}

    def prepare() -> list[Any]:
        if recovery:
            remove_recovery_markers(partition.root)
        return []

    def open_broker(holder: list[Any]) -> None:
        holder.append(eoslog.open(partition.root, background=False, **durability))

    def checked(holder: list[Any]) -> None:
        broker = holder.pop()
        log = broker.log(partition.topic, 0)
        report = log.recovery_report
        if recovery:
            ok = (
                not report.clean_shutdown
                and report.segments_recovered == partition.segments
                and not report.bytes_truncated
                and log.log_end_offset == partition.records
            )
        else:
            ok = report.clean_shutdown and not report.segments_recovered
            ok = ok and not report.indexes_rebuilt and len(log.segments) == partition.segments
        broker.close()
        _expect(ok, f"not the open expected of {partition.segments} segments: {report}")

    def opened() -> list[Any]:
        holder = prepare()
        open_broker(holder)
        return holder

    def expect_floor(_: object, done: int) -> None:
        expected = partition.log_bytes if recovery else len(os.listdir(partition.directory))
        _expect(done == expected, f"{floor_name}: {done}, expected {expected}")

    return [
        harness.Contender("eoslog open", open_broker, prepare, checked),
        harness.Contender("eoslog close", lambda holder: holder.pop().close(), opened),
        harness.Contender(floor_name, lambda _: floor(), check=expect_floor),
    ]


# Random-offset reads: each call timed alone, per round at most `budget` seconds.
READ_ROWS = ("eoslog", "header", "header again")


def read_contenders(
    log: Any,
    table: BatchTable,
    schedule: Callable[[int], tuple[list[int], float]],
    timer: harness.Timer,
) -> list[harness.Contender]:
    """Self-timed: eoslog's `log.read(offset, max_bytes=1)` (with `read_header` on the result,
    twice, timed apart), the floor (bisect + pread) and the zero-copy floor (bisect + a slice
    of the mapped segment), each returning per-call nanoseconds by row. `schedule(k)` gives
    the offsets and time budget of a contender's k-th run (0 is the warm-up); the cyclic GC is
    off during the calls as `timer` says."""
    read = log.read
    read_header = _codec().read_header
    clock = time.perf_counter_ns

    def runs() -> Callable[[], tuple[list[int], float]]:
        counter = iter(range(1 << 30))
        return lambda: schedule(next(counter))

    def run_eoslog(planned: tuple[list[int], float]) -> dict[str, np.ndarray]:
        offsets, budget = planned
        times = np.empty((3, len(offsets)), dtype=np.int64)
        deadline = clock() + int(budget * 1e9)
        done = 0
        with timer.gc_off():
            for offset in offsets:
                t0 = clock()
                result = read(offset, max_bytes=1)
                t1 = clock()
                header = read_header(result.records)
                t2 = clock()
                read_header(result.records)
                t3 = clock()
                if not header.base_offset <= offset <= header.last_offset:
                    raise AssertionError(f"read({offset}) returned batch {header}")
                times[:, done] = (t1 - t0, t2 - t1, t3 - t2)
                done += 1
                if t3 > deadline:
                    break
        return {row: times[i, :done] for i, row in enumerate(READ_ROWS)}

    def floor(read_floor: Callable[[int], object], row: str) -> Callable[[Any], Any]:
        def run(planned: tuple[list[int], float]) -> dict[str, np.ndarray]:
            offsets, budget = planned
            times = np.empty(len(offsets), dtype=np.int64)
            deadline = clock() + int(budget * 1e9)
            done = 0
            with timer.gc_off():
                for offset in offsets:
                    t0 = clock()
                    read_floor(offset)
                    t1 = clock()
                    times[done] = t1 - t0
                    done += 1
                    if t1 > deadline:
                        break
            return {row: times[:done]}

        return run

    return [
        harness.Contender("eoslog", run_eoslog, runs(), timed=False),
        harness.Contender("floor", floor(table.read, "floor"), runs(), timed=False),
        harness.Contender(
            "floor mmap", floor(table.read_mapped, "floor mmap"), runs(), timed=False
        ),
    ]


def check_reads(log: Any, table: BatchTable, offsets: Sequence[int]) -> None:
    """eoslog's read returns exactly the batch the floors read (untimed)."""
    for offset in offsets:
        expected = table.read(offset)
        _expect(bytes(log.read(offset, max_bytes=1).records) == expected, f"read at {offset}")
        _expect(table.read_mapped(offset) == expected, f"the floors at offset {offset}")


# --- producers: idempotent and transactional produce (producer_bench.py, txn_bench.py) ----------

PRODUCE_TOPIC = "bench"
POLL_EVERY = 10_000  # produce() loops poll(0) this often, as a producing application would
TXN_RECORDS = 1_000  # records per transaction (docs/bench.md: commit every 1,000)
# Batches close at batch.num.messages; batch.size and linger.ms are large enough not to first.
PRODUCER_CONFIG: dict[str, object] = {
    "batch.num.messages": BATCH_RECORDS,
    "batch.size": 1 << 20,
    "linger.ms": 100,
}


def open_broker(root: str, durability: str, config: dict[str, object] | None = None) -> Any:
    """A broker in a fresh directory under `root` with PRODUCE_TOPIC (one partition)."""
    import tempfile

    broker = eoslog.open(tempfile.mkdtemp(dir=root), durability=durability, background=False)
    broker.create_topic(PRODUCE_TOPIC, 1, config or {})
    return broker


def close_broker(broker: Any) -> None:
    import shutil

    path = broker.path
    broker.close()
    shutil.rmtree(path, ignore_errors=True)


def committed_rows(broker: Any) -> int:
    """Records a read_committed consumer reads from offset 0 (untimed check)."""
    consumer = broker.consumer({"isolation.level": "read_committed"})
    consumer.assign([eoslog.TopicPartition(PRODUCE_TOPIC, 0, 0)])
    rows = 0
    while batch := consumer.consume_arrow(100_000, timeout=0).num_rows:
        rows += batch
    consumer.close()
    return rows


def eoslog_producer(
    name: str,
    root: str,
    values: list[bytes],
    durability: str,
    *,
    batch: bool = False,
    transactional: bool = False,
    config: dict[str, object] | None = None,
) -> harness.Contender:
    """eoslog's Producer on a fresh broker per run: `produce()` per record (poll(0) every
    POLL_EVERY) then `flush()`, or `produce_batch(values)` then `flush()`; `transactional`:
    `produce()` per record in transactions of TXN_RECORDS (init_transactions() untimed).
    Checked: the records landed (every run), read_committed reads them all (warm-up)."""

    def prepare() -> tuple[Any, Any]:
        broker = open_broker(root, durability, config)
        transactional_id = {"transactional.id": "bench-txn"} if transactional else {}
        producer = broker.producer({**PRODUCER_CONFIG, **transactional_id})
        if transactional:
            producer.init_transactions()
        return broker, producer

    def produce_each(state: tuple[Any, Any]) -> None:
        producer = state[1]
        produce = producer.produce
        for i, value in enumerate(values):
            produce(PRODUCE_TOPIC, value)
            if i % POLL_EVERY == 0:
                producer.poll(0)
        _expect(producer.flush() == 0, "flush left messages queued")

    def produce_batch(state: tuple[Any, Any]) -> None:
        producer = state[1]
        producer.produce_batch(PRODUCE_TOPIC, values, partition=0)
        _expect(producer.flush() == 0, "flush left messages queued")

    def produce_transactions(state: tuple[Any, Any]) -> None:
        producer = state[1]
        produce = producer.produce
        for start in range(0, len(values), TXN_RECORDS):
            producer.begin_transaction()
            for value in values[start : start + TXN_RECORDS]:
                produce(PRODUCE_TOPIC, value)
            producer.commit_transaction()

    def check(state: tuple[Any, Any], _: object) -> None:
        rows = committed_rows(state[0])
        _expect(rows == len(values), f"{name}: {rows} committed records read")

    def finish(state: tuple[Any, Any]) -> None:
        broker, producer = state
        if not transactional:
            landed = broker.log(PRODUCE_TOPIC, 0).log_end_offset
            _expect(landed == len(values), f"{name}: {landed} records landed")
        producer.close()
        close_broker(broker)

    run = produce_transactions if transactional else produce_batch if batch else produce_each
    return harness.Contender(name, run, prepare, finish, check)


def confluent_producer(name: str, values: list[bytes], transactional: bool) -> harness.Contender:
    """confluent-kafka's producer on librdkafka's in-process mock cluster (a fresh one per
    run, created untimed): idempotent `produce()` per record (poll(0) every POLL_EVERY and on
    BufferError) then `flush()`; or transactional, begin / produce / commit_transaction() every
    TXN_RECORDS (the commit flushes, inside the timing). The mock does not filter
    read_committed: the check is the delivery reports (every run)."""

    def prepare() -> tuple[Any, list[int]]:
        from confluent_kafka import Producer

        settings: dict[str, object] = {
            "test.mock.num.brokers": 1,
            "batch.num.messages": BATCH_RECORDS,
            "linger.ms": 5,
        }
        settings |= {"transactional.id": "bench-txn"} if transactional else {}
        producer = Producer(settings | ({} if transactional else {"enable.idempotence": True}))
        delivered = [0]

        def count(err: object, msg: object) -> None:
            if err is None:
                delivered[0] += 1

        if transactional:
            producer.init_transactions(30)
            producer.begin_transaction()
        producer.produce(PRODUCE_TOPIC, b"warm", on_delivery=count)  # creates the topic
        if transactional:
            producer.commit_transaction(30)
        producer.flush()
        delivered[0] = 0
        return (producer, count), delivered

    def run(state: tuple[Any, list[int]]) -> None:
        (producer, count), _ = state
        produce = producer.produce
        step = TXN_RECORDS if transactional else len(values)
        for start in range(0, len(values), step):
            if transactional:
                producer.begin_transaction()
            for i, value in enumerate(values[start : start + step]):
                try:
                    produce(PRODUCE_TOPIC, value, on_delivery=count)
                except BufferError:
                    producer.poll(0.01)
                    produce(PRODUCE_TOPIC, value, on_delivery=count)
                if not transactional and i % POLL_EVERY == 0:
                    producer.poll(0)
            if transactional:
                producer.commit_transaction()
        if not transactional:
            _expect(producer.flush() == 0, "confluent flush left messages queued")

    def finish(state: tuple[Any, list[int]]) -> None:
        delivered = state[1][0]
        _expect(delivered == len(values), f"{name}: {delivered} delivered")

    return harness.Contender(name, run, prepare, finish)


def sqlite_insert(name: str, root: str, values: list[bytes], synchronous: str) -> harness.Contender:
    """SQLite in WAL mode, `executemany` of BATCH_RECORDS-row transactions into
    (offset INTEGER PRIMARY KEY, value BLOB), a fresh file per run; checked: the row count."""
    path = os.path.join(root, f"bench-{synchronous}.sqlite")

    def prepare() -> Any:
        import sqlite3

        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.unlink(path + suffix)
        connection = sqlite3.connect(path, isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(f"PRAGMA synchronous={synchronous}")
        connection.execute("CREATE TABLE log (offset INTEGER PRIMARY KEY, value BLOB)")
        return connection

    def run(connection: Any) -> None:
        for start in range(0, len(values), BATCH_RECORDS):
            connection.execute("BEGIN")
            connection.executemany(
                "INSERT INTO log (value) VALUES (?)",
                ((v,) for v in values[start : start + BATCH_RECORDS]),
            )
            connection.execute("COMMIT")

    def finish(connection: Any) -> None:
        (rows,) = connection.execute("SELECT count(*) FROM log").fetchone()
        connection.close()
        _expect(rows == len(values), f"{name}: {rows} rows")

    return harness.Contender(name, run, prepare, finish)


# --- consumers: reading a partition back (consumer_bench.py, txn_bench.py) -----------------------

CONSUME_MESSAGES = 500
ARROW_RECORDS = 100_000


def consume_contenders(
    broker: Any, committed: Committed, sqlite: Any
) -> dict[str, harness.Contender]:
    """Every contender reads the committed records of READ_TOPIC partition 0 from offset 0:
    the floors (one Python object per record, made by Python code / by `list(zip())`),
    read_committed `consume(500, timeout=0)` until every record is read, every Message kept
    (and the same calling `value()` on each), `consume_arrow(100_000, timeout=0)`, a SQLite
    Python-cursor scan of the same rows, and `numpy.copyto` of the value bytes. Each warm-up
    is checked against the committed records."""
    offsets, values = committed.offsets[0], committed.values[0]
    n = len(offsets)
    payload = np.frombuffer(b"".join(values), dtype=np.uint8)
    target = np.empty_like(payload)

    def consumer() -> Any:
        made = broker.consumer({"isolation.level": "read_committed"})
        made.assign([eoslog.TopicPartition(READ_TOPIC, 0, 0)])
        return made

    def consume(touch: bool) -> Callable[[object], object]:
        def run(_: object) -> object:
            made = consumer()
            out: list[Any] = []
            while len(out) < n:
                found = made.consume(CONSUME_MESSAGES, timeout=0)
                _expect(bool(found), "the partition ended early")
                if touch:
                    for message in found:
                        message.value()
                out.extend(found)
            made.close()
            return out

        return run

    def consume_arrow(_: object) -> object:
        made = consumer()
        out: list[pa.RecordBatch] = []
        rows = 0
        while rows < n:
            batch = made.consume_arrow(ARROW_RECORDS, timeout=0)
            _expect(batch.num_rows > 0, "the partition ended early")
            rows += batch.num_rows
            out.append(batch)
        made.close()
        return out

    def sqlite_scan(_: object) -> object:
        query = "SELECT offset, timestamp, key, value FROM records ORDER BY offset"
        return [row for row in sqlite.execute(query)]

    def memcpy(_: object) -> object:
        np.copyto(target, payload)
        return target

    def check_messages(_: object, result: Any) -> None:
        _expect([m.offset() for m in result] == offsets, "consume(): offsets differ")
        _expect(result[0].value() == values[0] and result[-1].value() == values[-1], "values")
        _expect(result[-1].key() is None, "consume(): a key where none was written")

    def check_arrow(_: object, result: Any) -> None:
        table = pa.Table.from_batches(result)
        _expect(table.column("offset").to_pylist() == offsets, "consume_arrow(): offsets")
        _expect(table.column("value").to_pylist() == values, "consume_arrow(): values")

    def check_rows(_: object, result: Any) -> None:
        _expect(len(result) == n and result[-1][3] == values[-1], "SQLite: rows differ")

    def check_copy(_: object, result: Any) -> None:
        _expect(np.array_equal(payload, result), "memcpy: bytes differ")

    def check_floor(_: object, result: Any) -> None:
        _expect(len(result) == n and result[-1] == (offsets[-1], values[-1]), "the floor")

    table: list[harness.Contender] = [
        harness.Contender(
            "floor",
            lambda _: [(offset, value) for offset, value in zip(offsets, values, strict=True)],
            check=check_floor,
        ),
        harness.Contender(
            "floor, C loop", lambda _: list(zip(offsets, values, strict=True)), check=check_floor
        ),
        harness.Contender("consume()", consume(touch=False), check=check_messages),
        harness.Contender("consume() + value()", consume(touch=True), check=check_messages),
        harness.Contender("consume_arrow()", consume_arrow, check=check_arrow),
        harness.Contender("SQLite scan", sqlite_scan, check=check_rows),
        harness.Contender("memcpy", memcpy, check=check_copy),
    ]
    return {c.name: c for c in table}


# --- single-record transactions against an fsync (txn_bench.py) ---------------------------------

LATENCY_WARMUP = 200  # untimed calls before the timed ones, in every run
FSYNC_BLOCK = 4096


def transaction_latency(
    name: str, root: str, value: bytes, durability: str, samples: int
) -> harness.Contender:
    """Self-timed: `samples` single-record transactions (begin_transaction(), produce() of
    `value`, commit_transaction()) on a fresh broker, each timed alone; nanoseconds. Checked:
    read_committed reads every record back."""

    def prepare() -> tuple[Any, Any]:
        broker = open_broker(root, durability)
        producer = broker.producer({**PRODUCER_CONFIG, "transactional.id": "bench-txn"})
        producer.init_transactions()
        return broker, producer

    def run(state: tuple[Any, Any]) -> np.ndarray:
        producer = state[1]
        begin, produce, commit = (
            producer.begin_transaction,
            producer.produce,
            producer.commit_transaction,
        )
        clock = time.perf_counter_ns
        for _ in range(LATENCY_WARMUP):
            begin()
            produce(PRODUCE_TOPIC, value)
            commit()
        out = np.empty(samples, dtype=np.int64)
        for i in range(samples):
            start = clock()
            begin()
            produce(PRODUCE_TOPIC, value)
            commit()
            out[i] = clock() - start
        rows = committed_rows(state[0])
        _expect(rows == LATENCY_WARMUP + samples, f"{name}: {rows} committed")
        return out

    def finish(state: tuple[Any, Any]) -> None:
        state[1].close()
        close_broker(state[0])

    return harness.Contender(name, run, prepare, finish, timed=False)


def fsync_latency(name: str, root: str, samples: int) -> harness.Contender:
    """Self-timed: `samples` appends of FSYNC_BLOCK bytes + `os.fdatasync` to a file under
    `root`, each timed alone; nanoseconds."""
    path = os.path.join(root, "fsync-probe")
    block = b"x" * FSYNC_BLOCK

    def prepare() -> int:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)

    def run(fd: int) -> np.ndarray:
        clock = time.perf_counter_ns
        for _ in range(LATENCY_WARMUP):
            os.write(fd, block)
            os.fdatasync(fd)
        out = np.empty(samples, dtype=np.int64)
        for i in range(samples):
            start = clock()
            os.write(fd, block)
            os.fdatasync(fd)
            out[i] = clock() - start
        size = os.fstat(fd).st_size
        _expect(size == FSYNC_BLOCK * (LATENCY_WARMUP + samples), f"{name}: {size} bytes")
        return out

    def finish(fd: int) -> None:
        os.close(fd)
        os.unlink(path)

    return harness.Contender(name, run, prepare, finish, timed=False)


# --- Spark scans (spark_bench.py) ---------------------------------------------------------------


def check_committed(table: pa.Table, committed: Committed, partition: int, name: str) -> None:
    """One partition's rows, in offset order, are exactly its committed records (untimed)."""
    offsets = table.column("offset").to_pylist()
    _expect(offsets == committed.offsets[partition], f"{name}: partition {partition}: offsets")
    values = table.column("value").to_pylist()
    _expect(values == committed.values[partition], f"{name}: partition {partition}: values")


def spark_contenders(
    frames: dict[str, Callable[[], Any]], committed: Committed, queries: Sequence[str]
) -> list[harness.Contender]:
    """Each query of `queries` ("count()", "sum(length(value))") over each source of `frames`
    (a fresh DataFrame per run: each query plans its scan anew, as a user's would), named
    "<query> <source>". Every run checks its count or total length; the warm-up of a source's
    first query also collects its rows (toArrow) and compares them with the committed ones."""
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    def count(frame: Any) -> None:
        rows = frame.count()
        _expect(rows == committed.committed, f"count() = {rows}")

    def total_length(frame: Any) -> None:
        total = frame.select(F.sum(F.length("value"))).collect()[0][0]
        _expect(total == committed.committed * VALUE_BYTES, f"sum(length(value)) = {total}")

    def check_rows(source: str) -> Callable[[object, object], None]:
        def check(_: object, __: object) -> None:
            table = frames[source]().toArrow()
            _expect(table.num_rows == committed.committed, f"{source}: {table.num_rows} rows")
            for partition in range(len(committed.offsets)):
                mine = table.filter(pc.equal(table.column("partition"), partition))
                check_committed(mine.sort_by("offset"), committed, partition, source)

        return check

    run = {"count()": count, "sum(length(value))": total_length}
    return [
        harness.Contender(
            f"{query} {source}",
            lambda _, query=query, source=source: run[query](frames[source]()),
            **({"check": check_rows(source)} if query == queries[0] else {}),
        )
        for query in queries
        for source in frames
    ]


# --- another eoslog build, in child processes (checks_bench.py) -----------------------------

# What one child process times, with the eoslog its interpreter imports: "open" (best of five
# clean opens of the log directory), "consume" or "consume_arrow" (read_committed from offset 0
# until N records are read). It prints {"seconds": ..., "records": ...} as JSON.
CHILD = """
import json, sys, time
import eoslog
kind, path, records = sys.argv[1], sys.argv[2], int(sys.argv[3])
if kind == "open":
    times = []
    for _ in range(5):
        start = time.perf_counter()
        broker = eoslog.open(path, background=False)
        times.append(time.perf_counter() - start)
        broker.close()
    print(json.dumps({"seconds": min(times), "records": records}))
else:
    broker = eoslog.open(path, background=False, durability="none")
    consumer = broker.consumer({"auto.offset.reset": "earliest"})
    consumer.assign([eoslog.TopicPartition("%s", 0, 0)])
    taken = 0
    start = time.perf_counter()
    if kind == "consume":
        while taken < records:
            taken += len(consumer.consume(500, timeout=0))
    else:
        while taken < records:
            table = consumer.consume_arrow(100_000, timeout=0)
            taken += 0 if table is None else table.num_rows
    seconds = time.perf_counter() - start
    consumer.close()
    broker.close()
    print(json.dumps({"seconds": seconds, "records": taken}))
"""


def child_contender(
    name: str, python: str, kind: str, path: str, records: int
) -> harness.Contender:
    """Self-timed: `kind` (see CHILD) run by `python` in a fresh child process, so it imports
    its own eoslog; the child's seconds."""
    import json
    import subprocess

    topic = READ_TOPIC if kind != "open" else "segments"

    def run(_: object) -> float:
        done = subprocess.run(
            [python, "-c", CHILD % topic, kind, path, str(records)],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        result = json.loads(done.stdout.strip().splitlines()[-1])
        _expect(result["records"] >= records, f"{name} read {result['records']} of {records}")
        return float(result["seconds"])

    return harness.Contender(name, run, timed=False)


def read_back(
    broker: Any,
    committed: Committed,
    sqlite_path: str,
    names: Sequence[str],
    rounds: int,
    timer: harness.Timer,
) -> tuple[harness.Runs, float]:
    """Alternate the contenders `names` of consume_contenders over the committed records (a
    SQLite file of them made at `sqlite_path` for the scan): the runs, and the median GiB/s of
    value bytes consume_arrow() delivered."""
    from workload import sqlite_rows

    sqlite = sqlite_rows(sqlite_path, committed)
    try:
        table = consume_contenders(broker, committed, sqlite)
        runs = harness.alternate([table[n] for n in names], rounds, timer, label="read")
    finally:
        sqlite.close()
    payload = sum(len(v) for v in committed.values[0])
    return runs, statistics.median(runs.rates("consume_arrow()", payload / (1 << 30)))
