"""Round trips against other implementations of the v2 batch (docs/style.md rule 2): what we write,
kafka-python and aiokafka (pure and Cython) read back unchanged, and what they write, we read,
for every codec.

The peers' codecs are optional packages, which the test extras install (aiokafka: cramjam for
all four; kafka-python: lz4, python-snappy, zstandard); test_peers_can_read_and_write_every_codec
fails loudly if one is missing, so every compressed case runs against every peer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import aiokafka.codec
import kafka.codec
import pytest
from aiokafka.record._crecords import DefaultRecordBatch as AiokafkaCythonBatch
from aiokafka.record._crecords import DefaultRecordBatchBuilder as AiokafkaCythonBuilder
from aiokafka.record._crecords import MemoryRecords as AiokafkaCythonMemoryRecords
from aiokafka.record.default_records import _DefaultRecordBatchBuilderPy as AiokafkaPyBuilder
from aiokafka.record.default_records import _DefaultRecordBatchPy as AiokafkaPyBatch
from kafka.record.default_records import ControlRecord as KafkaPythonControlRecord
from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPythonBuilder
from kafka.record.memory_records import MemoryRecords as KafkaPythonMemoryRecords

from eoslog.record import layout
from eoslog.record.types import Record
from tests.support.batches import (
    SAMPLE_RECORDS,
    TS,
    RecordSpec,
    build,
    compressible,
    crc_of,
    expected_records,
    forge,
    unpack_header,
)


def _noise(size: int, seed: int) -> bytes:
    """Bytes lz4 cannot shrink (a simple LCG), so large uncompressed cases stay large."""
    out = bytearray(size)
    state = seed or 1
    for i in range(size):
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        out[i] = state >> 16 & 0xFF
    return bytes(out)


PRODUCER = {"producer_id": 4242, "producer_epoch": 7, "base_sequence": 100}
LZ4 = {"compression": layout.COMPRESSION_LZ4}
GZIP = {"compression": layout.COMPRESSION_GZIP}
SNAPPY = {"compression": layout.COMPRESSION_SNAPPY}
ZSTD = {"compression": layout.COMPRESSION_ZSTD}
PLAIN_RECORDS: list[RecordSpec] = [
    (TS, b"key-0", b"value-0", []),
    (TS + 10, b"key-1", b"value-1", []),
    (TS + 5, b"key-2", b"value-2", []),
]

# name -> (records, settings shared by every builder: compression, transactional, producer)
CASES: dict[str, tuple[list[RecordSpec], dict[str, Any]]] = {
    "plain": (PLAIN_RECORDS, {}),
    "idempotent": (PLAIN_RECORDS, PRODUCER),
    "transactional": (PLAIN_RECORDS, {**PRODUCER, "is_transactional": True}),
    "lz4": ([(TS + i, b"k%d" % i, compressible(300, i), []) for i in range(5)], LZ4),
    "headers": (
        [
            (TS, b"k", b"v", [("trace-id", b"abc"), ("null", None), ("ключ", b""), ("k", b"2")]),
            (TS + 1, b"k", b"v", []),
            (TS + 2, None, None, [("only", None)]),
        ],
        {},
    ),
    "headers_lz4": (SAMPLE_RECORDS * 20, LZ4),
    "null_key": ([(TS, None, b"value", [])], {}),
    "null_value": ([(TS, b"tombstone", None, [])], {}),
    "empty_key_and_value": ([(TS, b"", b"", [])], {}),
    "large_values_lz4": (
        [(TS + i, b"big-%d" % i, compressible(100_000 + 4_000 * i, i), []) for i in range(3)],
        LZ4,
    ),
    "large_values_uncompressed": ([(TS, b"big", _noise(70_000, 3), [("h", b"x")])], {}),
    "transactional_lz4": (
        [(TS + i, None, compressible(2_000, i), []) for i in range(4)],
        {**PRODUCER, **LZ4, "is_transactional": True},
    ),
    "gzip": ([(TS + i, b"k%d" % i, compressible(300, i), []) for i in range(5)], GZIP),
    "snappy": ([(TS + i, b"k%d" % i, compressible(300, i), []) for i in range(5)], SNAPPY),
    "zstd": ([(TS + i, b"k%d" % i, compressible(300, i), []) for i in range(5)], ZSTD),
    "headers_zstd": (SAMPLE_RECORDS * 20, ZSTD),
    # Several xerial chunks (32 KiB of input each), several gzip deflate blocks, a zstd frame
    # larger than one block.
    "large_values_snappy": (
        [(TS + i, b"big-%d" % i, compressible(100_000 + 4_000 * i, i), []) for i in range(3)],
        SNAPPY,
    ),
    "large_values_gzip": (
        [(TS + i, b"big-%d" % i, compressible(100_000 + 4_000 * i, i), []) for i in range(3)],
        GZIP,
    ),
    "transactional_zstd": (
        [(TS + i, None, compressible(200_000, i), []) for i in range(2)],
        {**PRODUCER, **ZSTD, "is_transactional": True},
    ),
}

DECODERS: dict[str, Callable[[bytes], Any]] = {
    "kafka-python": KafkaPythonBatch,
    "aiokafka-py": AiokafkaPyBatch,
    "aiokafka-cython": AiokafkaCythonBatch,
}
BUILDERS: dict[str, Callable[..., Any]] = {
    "kafka-python": KafkaPythonBuilder,
    "aiokafka-py": AiokafkaPyBuilder,
    "aiokafka-cython": AiokafkaCythonBuilder,
}


@pytest.mark.parametrize("name", ["gzip", "snappy", "lz4", "zstd"])
def test_peers_can_read_and_write_every_codec(name: str) -> None:
    for peer in (aiokafka.codec, kafka.codec):
        assert getattr(peer, f"has_{name}")(), f"install the test extras: {peer.__name__} {name}"


PAIRS = [pytest.param(case, peer, id=f"{case}-{peer}") for case in CASES for peer in DECODERS]


def _lz4_block_count(batch: bytes) -> int:
    """How many data blocks the batch's LZ4 frame holds (docs/format.md §4 frame layout)."""
    frame = batch[layout.RECORDS_OFFSET :]
    flags = frame[4]
    cursor = 7 + (8 if flags & 0x08 else 0)  # magic, FLG, BD, [content size], HC
    blocks = 0
    while (word := int.from_bytes(frame[cursor : cursor + 4], "little")) != 0:
        cursor += 4 + (word & 0x7FFFFFFF) + (4 if flags & 0x10 else 0)
        blocks += 1
    assert cursor + 4 <= len(frame)
    return blocks


def _expected_attributes(settings: dict[str, Any]) -> int:
    attributes = settings.get("compression", 0)
    if settings.get("is_transactional"):
        attributes |= layout.TRANSACTIONAL_MASK
    return attributes


def _peer_build(peer: str, records: Sequence[RecordSpec], settings: dict[str, Any]) -> bytes:
    builder = BUILDERS[peer](
        2,
        settings.get("compression", 0),
        settings.get("is_transactional", False),
        settings.get("producer_id", -1),
        settings.get("producer_epoch", -1),
        settings.get("base_sequence", -1),
        1 << 30,
    )
    for offset, (timestamp, key, value, headers) in enumerate(records):
        assert builder.append(offset, timestamp, key, value, list(headers)) is not None
    built = bytes(builder.build())
    # A builder that finds compression does not pay falls back to none; make sure each lz4
    # case really is compressed.
    assert built[layout.ATTRIBUTES_OFFSET + 1] == _expected_attributes(settings)
    return built


def _peer_records(batch: Any) -> list[Record]:
    return [
        Record(r.offset, r.timestamp, r.key, r.value, tuple((k, v) for k, v in r.headers))
        for r in batch
    ]


def _check_peer_header(batch: Any, records: Sequence[RecordSpec], settings: dict[str, Any]) -> None:
    assert batch.magic == 2
    assert batch.attributes == _expected_attributes(settings)
    assert batch.compression_type == settings.get("compression", 0)
    assert batch.is_transactional == bool(settings.get("is_transactional"))
    assert not batch.is_control_batch
    assert batch.last_offset_delta == len(records) - 1
    assert batch.first_timestamp == records[0][0]
    assert batch.max_timestamp == max(record[0] for record in records)
    assert batch.producer_id == settings.get("producer_id", -1)
    assert batch.producer_epoch == settings.get("producer_epoch", -1)
    assert batch.base_sequence == settings.get("base_sequence", -1)


def _columns_as_records(columns: Any) -> list[Record]:
    table = columns.to_arrow("t", 0).to_pydict()
    headers = table.get("headers", [None] * columns.count)
    return [
        Record(
            offset,
            timestamp_ms,
            key,
            value,
            tuple((h["key"], h["value"]) for h in entry) if entry else (),
        )
        for offset, timestamp_ms, key, value, entry in zip(
            columns.offset.tolist(),
            columns.timestamp_ms.tolist(),
            table["key"],
            table["value"],
            headers,
            strict=True,
        )
    ]


# --- our bytes, their decoder -----------------------------------------------------------------


@pytest.mark.parametrize(("case", "peer"), PAIRS)
def test_peer_decodes_our_batch_to_the_same_records(
    codec: ModuleType, case: str, peer: str
) -> None:
    records, settings = CASES[case]
    ours = build(codec, records, **settings)
    if case == "large_values_lz4":
        assert _lz4_block_count(ours) >= 4  # 300 KiB of records in 64 KiB blocks
    batch = DECODERS[peer](ours)
    assert batch.validate_crc()
    assert batch.crc == crc_of(ours)
    assert batch.base_offset == 0
    _check_peer_header(batch, records, settings)
    assert _peer_records(batch) == expected_records(records)
    assert {r.timestamp_type for r in DECODERS[peer](ours)} == {layout.TIMESTAMP_CREATE_TIME}


@pytest.mark.parametrize(
    ("peer", "compression"),
    [
        pytest.param(peer, compression, id=f"{peer}-{name}")
        for peer in DECODERS
        for name, compression in (("none", 0), ("lz4", layout.COMPRESSION_LZ4))
    ],
)
def test_peer_reads_our_log_append_time_stamp(
    codec: ModuleType, peer: str, compression: int
) -> None:
    ours = bytearray(build(codec, SAMPLE_RECORDS, compression=compression))
    append_time = TS + 999
    codec.stamp_batch(
        ours, base_offset=50, partition_leader_epoch=3, log_append_time_ms=append_time
    )
    batch = DECODERS[peer](bytes(ours))
    assert batch.validate_crc()
    assert batch.timestamp_type == layout.TIMESTAMP_LOG_APPEND_TIME
    assert batch.max_timestamp == append_time
    assert _peer_records(batch) == expected_records(SAMPLE_RECORDS, 50, append_time)


@pytest.mark.parametrize("peer", list(DECODERS))
@pytest.mark.parametrize("control_type", [layout.CONTROL_ABORT, layout.CONTROL_COMMIT])
def test_peer_reads_our_end_transaction_marker(
    codec: ModuleType, peer: str, control_type: int
) -> None:
    marker = codec.build_control_batch(
        control_type,
        producer_id=31,
        producer_epoch=4,
        coordinator_epoch=17,
        timestamp=TS,
        base_offset=9,
        partition_leader_epoch=2,
    )
    batch = DECODERS[peer](marker)
    assert batch.validate_crc()
    assert batch.is_control_batch
    assert batch.is_transactional
    assert batch.attributes == layout.TRANSACTIONAL_MASK | layout.CONTROL_MASK
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (31, 4, -1)
    assert (batch.base_offset, batch.last_offset_delta, batch.max_timestamp) == (9, 0, TS)
    [record] = list(batch)
    assert (record.offset, record.timestamp) == (9, TS)
    assert record.key == b"\x00\x00" + control_type.to_bytes(2, "big")
    assert record.value == b"\x00\x00" + (17).to_bytes(4, "big")
    if peer == "kafka-python":
        assert isinstance(record, KafkaPythonControlRecord)
        assert (record.abort, record.commit) == (
            control_type == layout.CONTROL_ABORT,
            control_type == layout.CONTROL_COMMIT,
        )
        assert batch.leader_epoch == 2


def _our_run(codec: ModuleType) -> tuple[bytes, list[Record]]:
    """Two data batches (none, lz4) and a COMMIT marker at consecutive offsets."""
    first = build(codec, PLAIN_RECORDS, base_offset=0, **PRODUCER, is_transactional=True)
    second = build(
        codec, SAMPLE_RECORDS, base_offset=3, **LZ4, **{**PRODUCER, "base_sequence": 103}
    )
    marker = codec.build_control_batch(
        layout.CONTROL_COMMIT,
        producer_id=4242,
        producer_epoch=7,
        coordinator_epoch=1,
        timestamp=TS + 100,
        base_offset=6,
    )
    records = expected_records(PLAIN_RECORDS) + expected_records(SAMPLE_RECORDS, 3)
    return first + second + marker, records


def test_kafka_python_memory_records_reads_a_run_of_our_batches(codec: ModuleType) -> None:
    run, records = _our_run(codec)
    batches = list(KafkaPythonMemoryRecords(run))
    assert [b.is_control_batch for b in batches] == [False, False, True]
    assert all(b.validate_crc() for b in batches)
    assert [r for b in batches[:2] for r in _peer_records(b)] == records
    [marker] = list(batches[2])
    assert marker.commit and marker.offset == 6


def test_aiokafka_memory_records_reads_a_run_of_our_uncompressed_batches(codec: ModuleType) -> None:
    first = build(codec, PLAIN_RECORDS)
    second = build(codec, SAMPLE_RECORDS, base_offset=3)
    memory_records = AiokafkaCythonMemoryRecords(first + second)
    read = []
    while memory_records.has_next():
        batch = memory_records.next_batch()
        assert batch.validate_crc()
        read.extend(_peer_records(batch))
    assert read == expected_records(PLAIN_RECORDS) + expected_records(SAMPLE_RECORDS, 3)


# --- their bytes, our decoder -----------------------------------------------------------------


@pytest.mark.parametrize(("case", "peer"), PAIRS)
def test_we_decode_a_peer_batch_to_the_same_records(
    codec: ModuleType, case: str, peer: str
) -> None:
    records, settings = CASES[case]
    theirs = _peer_build(peer, records, settings)
    if case == "large_values_lz4":
        assert _lz4_block_count(theirs) >= 4
    header = codec.read_header(theirs)
    assert header == unpack_header(theirs)
    assert header.attributes == _expected_attributes(settings)
    assert header.records_count == len(records)
    assert header.max_timestamp == max(record[0] for record in records)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
        settings.get("producer_id", -1),
        settings.get("producer_epoch", -1),
        settings.get("base_sequence", -1),
    )
    assert codec.batch_crc(theirs) == header.crc == crc_of(theirs)
    validated = codec.validate_batch(theirs)
    timestamps = [record[0] for record in records]
    assert validated.max_timestamp == max(timestamps)
    assert validated.offset_delta_of_max_timestamp == timestamps.index(max(timestamps))
    expected = expected_records(records)
    assert codec.batch_records(theirs) == expected
    columns = codec.decode_columns(theirs, include_headers=True)
    assert columns.end_position == len(theirs)
    assert _columns_as_records(columns) == expected


@pytest.mark.parametrize("peer", list(BUILDERS))
def test_we_read_log_append_time_set_on_a_peer_batch(codec: ModuleType, peer: str) -> None:
    theirs = _peer_build(peer, SAMPLE_RECORDS, {})
    append_time = TS + 4321
    # The stamp a broker applies, done with kafka-python's CRC rather than ours.
    stamped = forge(
        theirs,
        base_offset=20,
        attributes=layout.TIMESTAMP_TYPE_MASK,
        max_timestamp=append_time,
    )
    header = codec.read_header(stamped)
    assert header.timestamp_type == layout.TIMESTAMP_LOG_APPEND_TIME
    assert codec.validate_batch(stamped, from_client=False).max_timestamp == append_time
    assert codec.batch_records(stamped) == expected_records(SAMPLE_RECORDS, 20, append_time)
    columns = codec.decode_columns(stamped)
    assert columns.timestamp_ms.tolist() == [append_time] * 3
    assert columns.timestamp_type.tolist() == [layout.TIMESTAMP_LOG_APPEND_TIME] * 3


def test_we_read_a_run_of_kafka_python_batches_at_broker_assigned_offsets(
    codec: ModuleType,
) -> None:
    plain = _peer_build("kafka-python", PLAIN_RECORDS, {})
    compressed = _peer_build("kafka-python", *CASES["lz4"])
    # The broker rewrites the base offset, which lies outside the CRC.
    run = plain + forge(compressed, base_offset=3, fix_crc=False)
    assert [position for position, _ in codec.iter_headers(run)] == [0, len(plain)]
    expected = expected_records(PLAIN_RECORDS) + expected_records(CASES["lz4"][0], 3)
    columns = codec.decode_columns(run, include_headers=True)
    assert columns.end_position == len(run)
    assert _columns_as_records(columns) == expected


# --- identical bytes --------------------------------------------------------------------------

UNCOMPRESSED_CASES = [
    case for case, (_, settings) in CASES.items() if "compression" not in settings
]


@pytest.mark.parametrize("case", UNCOMPRESSED_CASES)
@pytest.mark.parametrize("peer", ["aiokafka-py", "aiokafka-cython"])
def test_our_uncompressed_batch_is_byte_identical_to_aiokafkas(
    codec: ModuleType, case: str, peer: str
) -> None:
    records, settings = CASES[case]
    assert build(codec, records, **settings) == _peer_build(peer, records, settings)


@pytest.mark.parametrize("case", UNCOMPRESSED_CASES)
def test_our_uncompressed_batch_matches_kafka_python_but_for_the_leader_epoch(
    codec: ModuleType, case: str
) -> None:
    # kafka-python writes partition leader epoch 0 where Kafka's producer writes -1 (the
    # broker overwrites it either way, and it lies outside the CRC).
    records, settings = CASES[case]
    ours = build(codec, records, **settings)
    assert forge(ours, partition_leader_epoch=0, fix_crc=False) == _peer_build(
        "kafka-python", records, settings
    )
