"""The Consumer without groups (docs/api.md "Consumer"; docs/format.md §6.4, §7; docs/design.md
"Fetch").

Logs are built with PartitionLog.append_batch and codec.BatchBuilder; markers with
PartitionLog.append_marker, as the transaction coordinator writes them (transactions v2: each
marker bumps the producer epoch, and the producer's next batch starts at sequence 0, which
`append` follows from the log's producer state). `report_aborted` pins the aborted
transactions a read() reports, for tests about the consumer's filtering alone.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa
import pytest

import eoslog
from eoslog import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TopicPartition,
    limits,
)
from eoslog.client import fetcher as fetcher_module
from eoslog.client import read_loop as read_loop_module
from eoslog.client.fetch import plan_fetch
from eoslog.errors import InvalidConfigError, KafkaError, KafkaException
from eoslog.log.partition import PartitionLog
from eoslog.log.partition_reads import FetchResult
from eoslog.record import codec, layout
from eoslog.record.columns import SPARK_SCHEMA, SPARK_SCHEMA_WITH_HEADERS
from tests.support.batches import assemble, forge, raw_record

TS = 1_700_000_000_000
TOPIC = "orders"
# Small segments, so a few batches already span several of them.
SMALL = {"segment.bytes": 4096}
Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None]


@pytest.fixture
def broker(tmp_path: os.PathLike[str]) -> Iterator[eoslog.Broker]:
    # The records' time (TS) is the broker's too: markers are stamped with the broker clock,
    # and a real clock years past TS would roll a segment (segment.ms) at every marker.
    opened = eoslog.open(
        os.path.join(tmp_path, "data"),
        durability="none",
        config={"log.index.size.max.bytes": 4096},
        background=False,
        clock_ms=lambda: TS,
    )
    yield opened
    opened.close()


@pytest.fixture
def log(broker: eoslog.Broker) -> PartitionLog:
    broker.create_topic(TOPIC, 1, config=SMALL)
    return broker.log(TOPIC, 0)


def append(
    log: PartitionLog,
    records: Sequence[Record],
    *,
    compression: int = 0,
    producer_id: int = -1,
    transactional: bool = False,
    base_sequence: int = -1,
) -> int:
    """Append one batch of (key, value, headers); returns its base offset."""
    epoch, sequence = -1, -1
    if producer_id >= 0:
        # The producer's current epoch and next sequence, as its client would send them.
        entry = log.producer_state.entry(producer_id)
        epoch = entry.epoch if entry is not None and entry.epoch >= 0 else 0
        sequence = entry.last_sequence + 1 if entry is not None and entry.batch_metadata else 0
    builder = codec.BatchBuilder(
        compression=compression,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
    )
    for i, (key, value, headers) in enumerate(records):
        assert builder.append(TS + i, key, value, headers)
    return log.append_batch(builder.build()).base_offset


def values(first: int, count: int) -> list[Record]:
    return [(None, b"v%d" % i, None) for i in range(first, first + count)]


def append_marker(log: PartitionLog, control_type: int, producer_id: int) -> int:
    """Write a COMMIT (1) or ABORT (0) marker at the log end as the coordinator does, with
    the producer's next epoch; returns its offset."""
    entry = log.producer_state.entry(producer_id)
    epoch = entry.epoch + 1 if entry is not None and entry.epoch >= 0 else 0
    return log.append_marker(producer_id, epoch, 0, control_type == layout.CONTROL_COMMIT)


def report_aborted(
    monkeypatch: pytest.MonkeyPatch, log: PartitionLog, aborted: list[tuple[int, int, int]]
) -> None:
    """Make log.read return these aborted transactions, (producer id, first offset, ABORT
    marker offset), under read_committed: those whose marker is at or after the fetch offset
    (docs/format.md §6.3)."""
    real_read = log.read

    def read(offset: int, max_bytes: int = 1 << 20, isolation_level: str = "read_committed"):
        result: FetchResult = real_read(offset, max_bytes, isolation_level)
        if isolation_level != "read_committed":
            return result
        found = [(pid, first) for pid, first, last in aborted if last >= offset]
        return result._replace(aborted_transactions=found)

    monkeypatch.setattr(log, "read", read)


def consumer(broker: eoslog.Broker, offset: int = 0, **config: object) -> eoslog.Consumer:
    made = broker.consumer({key.replace("_", "."): value for key, value in config.items()})
    made.assign([TopicPartition(TOPIC, 0, offset)])
    return made


def drain(made: eoslog.Consumer) -> list[eoslog.Message]:
    out: list[eoslog.Message] = []
    while found := made.consume(1000, timeout=0):
        out.extend(found)
    return out


def offsets(messages: Sequence[eoslog.Message]) -> list[int]:
    return [m.offset() for m in messages]


# --- records and Message accessors ------------------------------------------------------------


def test_consume_returns_every_record_in_offset_order_across_segments(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    expected: list[Record] = []
    for i in range(12):
        batch = [
            (b"k%d" % i, random.Random(i).randbytes(700), [("n", b"%d" % i), ("null", None)]),
            (None, None, None),
            (b"", b"", [("é", b"")]),
        ]
        append(log, batch, compression=layout.COMPRESSION_LZ4 if i % 2 else 0)
        expected.extend(batch)
    assert len(log.segments) > 2
    found = drain(consumer(broker))
    assert offsets(found) == list(range(36))
    assert [(m.key(), m.value(), m.headers()) for m in found] == expected


def test_message_accessors_follow_confluent(broker: eoslog.Broker, log: PartitionLog) -> None:
    append(log, [(b"k", b"value", [("trace", b"t1"), ("empty", None)]), (None, None, None)])
    first, second = drain(consumer(broker))
    assert (first.topic(), first.partition(), first.offset()) == (TOPIC, 0, 0)
    assert first.key() == b"k" and first.value() == b"value"
    assert first.headers() == [("trace", b"t1"), ("empty", None)]
    assert first.timestamp() == (eoslog.TIMESTAMP_CREATE_TIME, TS)
    assert first.error() is None
    assert first.len() == len(first) == 5
    assert second.key() is None and second.value() is None and second.headers() is None
    assert second.len() == 0 and second.timestamp() == (eoslog.TIMESTAMP_CREATE_TIME, TS + 1)
    assert isinstance(first, eoslog.Message)
    with pytest.raises(TypeError):
        eoslog.Message()


def test_log_append_time_topics_report_log_append_time(broker: eoslog.Broker) -> None:
    broker.create_topic(TOPIC, 1, config={"message.timestamp.type": "LogAppendTime"})
    append(broker.log(TOPIC, 0), values(0, 2))
    kinds = {m.timestamp()[0] for m in drain(consumer(broker))}
    assert kinds == {eoslog.TIMESTAMP_LOG_APPEND_TIME}


def test_messages_stay_valid_after_later_fetches(broker: eoslog.Broker, log: PartitionLog) -> None:
    for i in range(20):
        append(log, values(i * 10, 10))
    made = consumer(broker, max_partition_fetch_bytes=200)
    early = made.consume(5, timeout=0)
    rest = drain(made)
    assert [m.value() for m in early] == [b"v%d" % i for i in range(5)]
    assert offsets(rest) == list(range(5, 200))


def test_messages_stay_readable_after_truncation_and_close(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    # A Message reads its record from the fetched view of the mapped segment, not a copy: a
    # truncation under it, and closing the log, must leave that view intact (mapped_log.py).
    append(log, [(b"k", b"kept", [("h", b"1")]), *values(1, 9)])
    append(log, values(10, 10), compression=layout.COMPRESSION_LZ4)
    made = consumer(broker)
    found = drain(made)
    made.close()
    log.truncate_to(0)
    broker.close()
    assert (found[0].key(), found[0].value(), found[0].headers()) == (b"k", b"kept", [("h", b"1")])
    assert [m.value() for m in found[1:]] == [b"v%d" % i for i in range(1, 20)]
    assert offsets(found) == list(range(20))


def test_poll_returns_one_record_at_a_time(broker: eoslog.Broker, log: PartitionLog) -> None:
    append(log, values(0, 3))
    made = consumer(broker)
    polled = [made.poll(0) for _ in range(4)]
    assert [m.offset() if m is not None else None for m in polled] == [0, 1, 2, None]


# --- offsets, gaps and control batches ------------------------------------------------------


def test_control_batches_never_surface(broker: eoslog.Broker, log: PartitionLog) -> None:
    append(log, values(0, 2), producer_id=7, transactional=True, base_sequence=0)
    commit = append_marker(log, layout.CONTROL_COMMIT, 7)
    append(log, values(2, 2), producer_id=7, transactional=True, base_sequence=2)
    abort = append_marker(log, layout.CONTROL_COMMIT, 7)
    for isolation in ("read_committed", "read_uncommitted"):
        found = drain(consumer(broker, isolation_level=isolation))
        assert offsets(found) == [0, 1, 3, 4], isolation
        assert commit == 2 and abort == 5  # both markers are skipped


def test_position_moves_past_trailing_control_batches(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    append(log, values(0, 3), producer_id=7, transactional=True, base_sequence=0)
    append_marker(log, layout.CONTROL_COMMIT, 7)
    made = consumer(broker)
    tp = TopicPartition(TOPIC, 0)
    assert made.position([tp])[0].offset == 0
    made.consume(2, timeout=0)
    assert made.position([tp])[0].offset == 2
    made.consume(10, timeout=0)
    # Not 3 (last record + 1): the marker at 3 is consumed too, so a restart does not
    # fetch it again.
    assert made.position([tp])[0].offset == 4


def test_a_fetch_of_only_control_batches_moves_on_to_the_records_after_them(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    append(log, values(0, 1), producer_id=7, transactional=True, base_sequence=0)
    for _ in range(3):
        append_marker(log, layout.CONTROL_COMMIT, 7)
    append(log, values(4, 1))
    made = consumer(broker, 1, max_partition_fetch_bytes=1)  # one batch per read
    assert offsets(made.consume(5, timeout=0)) == [4]


def flip_value_byte(log: PartitionLog, value: bytes) -> None:
    """Damage the first copy of `value` in the partition's last segment file, in place."""
    path = log.segments[-1].path(".log")
    with open(path, "r+b") as file:
        data = file.read()
        at = data.index(value)
        file.seek(at)
        file.write(bytes([data[at] ^ 0x01]))


def test_consume_raises_for_a_crc_mismatch_unless_check_crcs_is_off(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    append(log, [(None, b"damaged value", None)])
    flip_value_byte(log, b"damaged value")
    with pytest.raises(eoslog.CorruptRecordError):
        consumer(broker).consume(10, timeout=0)
    with pytest.raises(eoslog.CorruptRecordError):
        consumer(broker).poll(0)
    unchecked = consumer(broker, check_crcs=False).consume(10, timeout=0)
    assert [m.value() for m in unchecked] == [b"eamaged value"]


def batch_holding(path: str, value: bytes) -> int:
    """The byte of the .log at `path` where the batch holding the first copy of `value`
    begins."""
    with open(path, "rb") as file:
        data = file.read()
    at = data.index(value)
    return max(p for p, _ in codec.iter_headers(data) if p <= at)


@pytest.mark.parametrize("read", ["consume", "poll", "consume_arrow"])
def test_a_damaged_batch_raises_naming_its_segment_file_and_byte_in_that_file(
    broker: eoslog.Broker, log: PartitionLog, read: str
) -> None:
    # Regression: the error named the byte in the fetched buffer ("batch at byte 0" for any
    # batch a fetch starts at) and no file.
    for i in range(5):
        append(log, [(None, b"value %d" % i, None)])
    damaged = b"value 3"
    path = log.segments[-1].path(".log")
    position = batch_holding(path, damaged)
    assert position > 0
    flip_value_byte(log, damaged)
    made = consumer(broker, 3)
    with pytest.raises(eoslog.CorruptRecordError) as raised:
        if read == "consume_arrow":
            made.consume_arrow(10, timeout=0)
        else:
            getattr(made, read)(*([10] if read == "consume" else []), timeout=0)
    assert str(raised.value) == (
        f"{path} at byte {position}: CRC-32C mismatch: the batch is corrupt"
    )
    assert isinstance(raised.value.__cause__, eoslog.CorruptRecordError)


def test_a_plan_error_names_the_file_and_the_byte_of_the_batch_out_of_order() -> None:
    # The read refuses batches out of order before the plan sees them; the plan's own check
    # (its defence in depth) must name the file too, not its byte in the buffer.
    batches = [codec.BatchBuilder() for _ in range(2)]
    for builder in batches:
        assert builder.append(TS, None, b"v", None)
    first, second = (builder.build() for builder in batches)
    records = memoryview(first + second)  # both at base offset 0: the second goes backwards
    result = FetchResult(records, None, 2, 2, 0, "/data/orders-0/00000000000000000000.log", 500)
    with pytest.raises(eoslog.CorruptRecordError) as raised:
        fetcher_module._planned(result, 0)
    assert str(raised.value).startswith(
        f"/data/orders-0/00000000000000000000.log at byte {500 + len(first)}: the batch of a "
        "fetch from offset 0 is out of order"
    )


def test_seek_inside_a_batch_skips_its_earlier_records(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    append(log, values(0, 10))
    append(log, values(10, 10), compression=layout.COMPRESSION_LZ4)
    made = consumer(broker)
    made.seek(TopicPartition(TOPIC, 0, 7))
    assert offsets(made.consume(5, timeout=0)) == [7, 8, 9, 10, 11]
    made.seek(TopicPartition(TOPIC, 0, 15))
    assert offsets(drain(made)) == [15, 16, 17, 18, 19]
    # Assigning inside a batch does the same.
    assert offsets(drain(consumer(broker, 13)))[:2] == [13, 14]


def test_seek_discards_records_already_fetched(broker: eoslog.Broker, log: PartitionLog) -> None:
    append(log, values(0, 10))
    made = consumer(broker)
    assert offsets(made.consume(3, timeout=0)) == [0, 1, 2]
    made.seek(TopicPartition(TOPIC, 0, 1))
    assert offsets(made.consume(2, timeout=0)) == [1, 2]
    made.seek(TopicPartition(TOPIC, 0, OFFSET_END))
    assert made.consume(1, timeout=0) == []


def test_seek_on_an_unassigned_partition_is_a_state_error(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    made = broker.consumer({})
    with pytest.raises(KafkaException) as raised:
        made.seek(TopicPartition(TOPIC, 0, 0))
    assert raised.value.error.code() == -172


# --- read_committed ---------------------------------------------------------------------------


def test_read_committed_drops_aborted_batches_until_their_abort_marker(
    broker: eoslog.Broker, log: PartitionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    append(log, values(0, 2), producer_id=7, transactional=True, base_sequence=0)  # 0-1
    append(log, values(2, 1))  # 2: not transactional
    append(log, values(3, 2), producer_id=8, transactional=True, base_sequence=0)  # 3-4
    append(log, values(5, 2), producer_id=7, transactional=True, base_sequence=2)  # 5-6
    append_marker(log, layout.CONTROL_ABORT, 7)  # 7
    append_marker(log, layout.CONTROL_COMMIT, 8)  # 8
    append(log, values(9, 2), producer_id=7, transactional=True, base_sequence=4)  # 9-10
    append_marker(log, layout.CONTROL_COMMIT, 7)  # 11
    report_aborted(monkeypatch, log, [(7, 0, 7)])
    assert offsets(drain(consumer(broker))) == [2, 3, 4, 9, 10]
    # A fetch starting after the aborted data still honours the list, and one past the
    # marker no longer gets the entry.
    assert offsets(drain(consumer(broker, 5))) == [9, 10]
    assert offsets(drain(consumer(broker, 8))) == [9, 10]
    # read_uncommitted delivers everything but the markers.
    found = drain(consumer(broker, isolation_level="read_uncommitted"))
    assert offsets(found) == [0, 1, 2, 3, 4, 5, 6, 9, 10]


def test_read_committed_consume_arrow_skips_aborted_batches_and_stops_inside_a_batch(
    broker: eoslog.Broker, log: PartitionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    append(log, values(0, 2), producer_id=7, transactional=True, base_sequence=0)  # 0-1
    append(log, values(2, 1))  # 2
    append(log, values(3, 3), producer_id=8, transactional=True, base_sequence=0)  # 3-5
    append(log, values(6, 2), producer_id=7, transactional=True, base_sequence=2)  # 6-7
    append_marker(log, layout.CONTROL_ABORT, 7)  # 8
    append_marker(log, layout.CONTROL_COMMIT, 8)  # 9
    append(log, values(10, 2))  # 10-11
    report_aborted(monkeypatch, log, [(7, 0, 8)])
    made = consumer(broker)
    # One decode over the runs [2, 3-5] and [10-11]; max_records cuts the batch 3-5.
    first = made.consume_arrow(3, timeout=0)
    assert first.column("offset").to_pylist() == [2, 3, 4]
    assert first.column("value").to_pylist() == [b"v2", b"v3", b"v4"]
    assert made.position([TopicPartition(TOPIC, 0)])[0].offset == 5
    rest = made.consume_arrow(100, timeout=0)
    assert rest.column("offset").to_pylist() == [5, 10, 11]
    assert rest.column("value").to_pylist() == [b"v5", b"v10", b"v11"]
    assert made.position([TopicPartition(TOPIC, 0)])[0].offset == 12


def test_read_committed_filter_works_fetch_by_fetch(
    broker: eoslog.Broker, log: PartitionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    append(log, values(0, 2), producer_id=7, transactional=True, base_sequence=0)
    append(log, values(2, 2), producer_id=7, transactional=True, base_sequence=2)
    append_marker(log, layout.CONTROL_ABORT, 7)
    append(log, values(5, 1))
    report_aborted(monkeypatch, log, [(7, 0, 4)])
    made = consumer(broker, max_partition_fetch_bytes=1)  # one batch per read
    assert offsets(drain(made)) == [5]


def test_plan_fetch_reports_runs_and_the_next_offset(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    append(log, values(0, 2), producer_id=7, transactional=True, base_sequence=0)
    append(log, values(2, 2))
    append_marker(log, layout.CONTROL_ABORT, 7)
    data = log.read(0, 1 << 20).records
    sizes = [header.size_in_bytes for _, header in codec.iter_headers(data)]
    plan = plan_fetch(data, 1, [(7, 0)])
    assert plan.runs == [(sizes[0], len(data))]
    assert (plan.next_offset, plan.records, plan.planned_bytes) == (5, 2, len(data))
    uncommitted = plan_fetch(data, 1, None)
    assert uncommitted.runs == [(0, len(data))] and uncommitted.records == 3
    assert plan_fetch(data, 0, None, records_max=2).next_offset == 2


# --- watermarks, special offsets and auto.offset.reset ---------------------------------------


def test_watermarks_report_lso_under_read_committed(
    broker: eoslog.Broker, log: PartitionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    append(log, values(0, 10))
    tp = TopicPartition(TOPIC, 0)
    assert broker.consumer({}).get_watermark_offsets(tp) == (0, 10)
    # An open transaction from offset 4 holds the LSO there (docs/format.md §7).
    monkeypatch.setattr(PartitionLog, "last_stable_offset", property(lambda self: 4))
    committed = broker.consumer({"isolation.level": "read_committed"})
    uncommitted = broker.consumer({"isolation.level": "read_uncommitted"})
    assert committed.get_watermark_offsets(tp) == (0, 4)
    assert uncommitted.get_watermark_offsets(tp) == (0, 10)
    committed.assign([TopicPartition(TOPIC, 0, OFFSET_END)])
    uncommitted.assign([TopicPartition(TOPIC, 0, OFFSET_END)])
    assert committed.position([tp])[0].offset == 4
    assert uncommitted.position([tp])[0].offset == 10


def test_offset_beginning_and_end(broker: eoslog.Broker, log: PartitionLog) -> None:
    append(log, values(0, 5))
    assert offsets(drain(consumer(broker, OFFSET_BEGINNING))) == [0, 1, 2, 3, 4]
    made = consumer(broker, OFFSET_END)
    assert made.consume(1, timeout=0) == []
    append(log, values(5, 2))
    assert offsets(drain(made)) == [5, 6]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("earliest", [0, 1, 2]),
        ("smallest", [0, 1, 2]),
        ("beginning", [0, 1, 2]),
        ("latest", []),
        ("largest", []),
        ("end", []),
    ],
)
def test_auto_offset_reset_applies_to_stored_and_invalid_offsets(
    broker: eoslog.Broker, log: PartitionLog, policy: str, expected: list[int]
) -> None:
    append(log, values(0, 3))
    for start in (OFFSET_STORED, OFFSET_INVALID):
        assert offsets(drain(consumer(broker, start, auto_offset_reset=policy))) == expected


def test_auto_offset_reset_defaults_to_latest_as_in_kafka(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    append(log, values(0, 3))
    made = broker.consumer({})
    made.assign([TopicPartition(TOPIC, 0)])
    assert made.consume(1, timeout=0) == []


def test_out_of_range_offsets_are_reset_by_the_policy(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    append(log, values(0, 3))
    assert offsets(drain(consumer(broker, 50, auto_offset_reset="earliest"))) == [0, 1, 2]
    made = consumer(broker, 50, auto_offset_reset="latest")
    assert made.consume(1, timeout=0) == []
    append(log, values(3, 1))
    assert offsets(drain(made)) == [3]


def test_auto_offset_reset_error_delivers_one_error_message_and_halts_the_partition(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    # librdkafka's behaviour (was: poll() raised OffsetOutOfRangeError / KafkaException -140).
    append(log, values(0, 3))
    out_of_range = consumer(broker, 50, auto_offset_reset="error")
    (message,) = out_of_range.consume(5, timeout=0)
    assert message.error().code() == KafkaError._AUTO_OFFSET_RESET
    assert (message.topic(), message.partition(), message.offset()) == (TOPIC, 0, 50)
    assert out_of_range.consume(5, timeout=0) == []  # halted until assign(), as librdkafka's
    with pytest.raises(KafkaException) as raised:
        out_of_range.seek(TopicPartition(TOPIC, 0, 1))
    assert raised.value.args[0].code() == KafkaError._STATE
    out_of_range.assign([TopicPartition(TOPIC, 0, 1)])
    assert offsets(drain(out_of_range)) == [1, 2]
    (message,) = consumer(broker, OFFSET_STORED, auto_offset_reset="error").consume(5, timeout=0)
    assert message.error().code() == KafkaError._AUTO_OFFSET_RESET
    assert message.offset() is None and message.value() == message.error().str().encode()
    # An explicit start needs no policy.
    assert offsets(drain(consumer(broker, OFFSET_BEGINNING, auto_offset_reset="error"))) == [
        0,
        1,
        2,
    ]


# --- consume_arrow ----------------------------------------------------------------------------


def test_consume_arrow_matches_spark_kafka_schema(broker: eoslog.Broker, log: PartitionLog) -> None:
    append(log, [(b"k", b"v0", [("h", b"x")]), (None, None, None)])
    append(log, values(2, 3), compression=layout.COMPRESSION_LZ4)
    batch = consumer(broker).consume_arrow(100, timeout=0)
    assert isinstance(batch, pa.RecordBatch) and batch.schema == SPARK_SCHEMA
    assert batch.column("offset").to_pylist() == [0, 1, 2, 3, 4]
    assert batch.column("value").to_pylist() == [b"v0", None, b"v2", b"v3", b"v4"]
    assert batch.column("key").to_pylist()[:2] == [b"k", None]
    assert set(batch.column("topic").to_pylist()) == {TOPIC}
    assert set(batch.column("partition").to_pylist()) == {0}
    assert batch.column("timestampType").to_pylist() == [0] * 5
    assert batch.column("timestamp").to_pylist()[0].timestamp() * 1000 == TS
    with_headers = consumer(broker).consume_arrow(100, timeout=0, include_headers=True)
    assert with_headers.schema == SPARK_SCHEMA_WITH_HEADERS
    assert with_headers.column("headers").to_pylist()[:2] == [[{"key": "h", "value": b"x"}], None]


def test_consume_arrow_gathers_up_to_max_records_across_fetches(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    for i in range(10):
        append(log, values(i * 10, 10))
    made = consumer(broker, max_partition_fetch_bytes=1)
    first = made.consume_arrow(25, timeout=0)
    assert first.num_rows == 25 and first.column("offset").to_pylist() == list(range(25))
    rest = made.consume_arrow(1000, timeout=0)
    assert rest.column("offset").to_pylist() == list(range(25, 100))
    empty = made.consume_arrow(10, timeout=0)
    assert empty.num_rows == 0 and empty.schema == SPARK_SCHEMA


def test_consume_arrow_reads_on_across_segments_into_one_piece(
    broker: eoslog.Broker, log: PartitionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 4 KiB segments of ~1.1 KiB batches: a 25-record call spans several segments (reads),
    # all decoded into one set of columns, so nothing is concatenated.
    for i in range(10):
        append(log, [(None, b"%d" % (i * 10 + j) * 100, None) for j in range(10)])
    assert len(log.segments) > 3
    pieces: list[int] = []
    one_batch = read_loop_module._one_batch

    def counted(found: list[pa.RecordBatch], include_headers: bool) -> pa.RecordBatch:
        pieces.append(len(found))
        return one_batch(found, include_headers)

    monkeypatch.setattr(read_loop_module, "_one_batch", counted)
    made = consumer(broker)
    first = made.consume_arrow(25, timeout=0)
    assert first.column("offset").to_pylist() == list(range(25))
    assert first.column("value").to_pylist() == [b"%d" % i * 100 for i in range(25)]
    assert made.position([TopicPartition(TOPIC, 0)])[0].offset == 25
    rest = made.consume_arrow(1000, timeout=0)
    assert rest.column("offset").to_pylist() == list(range(25, 100))
    assert made.position([TopicPartition(TOPIC, 0)])[0].offset == 100
    assert pieces == [1, 1]


@pytest.mark.parametrize("arrow", [True, False], ids=["consume_arrow", "consume"])
def test_records_before_damage_in_a_later_fetch_are_delivered_then_the_damage_raises(
    broker: eoslog.Broker, log: PartitionLog, arrow: bool
) -> None:
    # Regression: the records taken before a fetch that raised were dropped with the call
    # while their position had moved past them, so they were never delivered.
    for i in range(10):
        append(log, [(None, b"%d" % (i * 10 + j) * 100, None) for j in range(10)])
    first_damaged = log.segments[-1].base_offset
    assert first_damaged > 0
    flip_value_byte(log, b"%d" % first_damaged * 100)
    made = consumer(broker)

    def read() -> list[int]:
        if arrow:
            return made.consume_arrow(1000, timeout=0).column("offset").to_pylist()
        return offsets(made.consume(1000, timeout=0))

    assert read() == list(range(first_damaged))
    for _ in range(2):
        with pytest.raises(eoslog.CorruptRecordError):
            read()
        assert made.position([TopicPartition(TOPIC, 0)])[0].offset == first_damaged


def test_consume_and_consume_arrow_share_one_position(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    append(log, [(None, b"v0", [("h", b"0")]), *values(1, 9)])
    made = consumer(broker)
    assert made.consume_arrow(3, timeout=0).column("offset").to_pylist() == [0, 1, 2]
    # Records buffered by consume_arrow without headers are fetched again with them.
    messages = made.consume(2, timeout=0)
    assert offsets(messages) == [3, 4]
    made.seek(TopicPartition(TOPIC, 0, 0))
    assert made.poll(0).headers() == [("h", b"0")]  # type: ignore[union-attr]
    assert made.consume_arrow(100, timeout=0).column("offset").to_pylist() == list(range(1, 10))


# --- timeouts and waiting ---------------------------------------------------------------------


def test_poll_returns_none_when_its_timeout_passes(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    made = consumer(broker)
    started = time.monotonic()
    assert made.poll(0.05) is None
    assert time.monotonic() - started >= 0.05


def test_poll_wakes_for_a_record_appended_while_it_waits(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    made = consumer(broker)
    writer = threading.Timer(0.05, lambda: append(log, values(0, 1)))
    writer.start()
    started = time.monotonic()
    found = made.poll(5.0)
    writer.join()
    assert found is not None and found.value() == b"v0"
    assert time.monotonic() - started < 2.0


def test_consume_waits_for_num_messages_or_the_timeout(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    append(log, values(0, 2))
    made = consumer(broker)
    started = time.monotonic()
    assert offsets(made.consume(5, timeout=0.05)) == [0, 1]
    assert time.monotonic() - started >= 0.05
    # Once num_messages are there it returns at once, whatever the timeout.
    append(log, values(2, 3))
    started = time.monotonic()
    assert offsets(made.consume(3, timeout=30)) == [2, 3, 4]
    assert time.monotonic() - started < 5


@pytest.fixture
def pauses_of_an_hour(monkeypatch: pytest.MonkeyPatch) -> None:
    """A consumer that slept between looks would not see an append for an hour: only the
    broker's append signal can end its wait in time."""
    monkeypatch.setattr(limits, "poll_sleep_s_min", 3600.0)
    monkeypatch.setattr(limits, "poll_sleep_s_max", 3600.0)


@pytest.mark.usefixtures("pauses_of_an_hour")
@pytest.mark.parametrize("read", ["poll", "consume_arrow"])
def test_a_waiting_consumer_wakes_on_the_append_not_on_a_timer(
    broker: eoslog.Broker, log: PartitionLog, read: str
) -> None:
    made = consumer(broker)
    found: list[int] = []

    def wait_for_one() -> None:
        if read == "poll":
            message = made.poll(60)
            found.extend([] if message is None else [message.offset()])
        else:
            found.extend(made.consume_arrow(1, timeout=60).column("offset").to_pylist())

    reader = threading.Thread(target=wait_for_one, daemon=True)  # a failure must not hang
    reader.start()
    for offset in range(3):  # one append may land before the reader waits: so may more
        append(log, values(offset, 1))
        reader.join(0.2)
        if not reader.is_alive():
            break
    reader.join(30)
    assert not reader.is_alive() and found == [0]


@pytest.mark.usefixtures("pauses_of_an_hour")
def test_every_record_appended_one_by_one_wakes_a_read_committed_consumer_at_its_commit(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    """Produce, then commit, 200 times from another thread while the consumer waits for each
    record: its LSO moves with the COMMIT marker, and that publication wakes it. A lost
    wake-up would leave the consumer waiting an hour (the join's deadline fails the test)."""
    made = consumer(broker, isolation_level="read_committed")
    rounds = 200
    got: list[int] = []
    reader = threading.Thread(
        target=lambda: [
            got.append(message.offset())
            for _ in range(rounds)
            if (message := made.poll(60)) is not None
        ],
        daemon=True,  # a failure must not hang the run
    )
    reader.start()
    for number in range(rounds):
        append(log, values(number, 1), producer_id=7, transactional=True)
        append_marker(log, layout.CONTROL_COMMIT, 7)
    reader.join(60)
    assert not reader.is_alive()
    assert got == list(range(0, 2 * rounds, 2))  # each record, then its marker


# --- assignment, partitions, lifecycle -------------------------------------------------------


def test_partitions_are_served_in_turn(broker: eoslog.Broker) -> None:
    broker.create_topic(TOPIC, 2)
    for partition in (0, 1):
        append(broker.log(TOPIC, partition), values(0, 3))
    made = broker.consumer({})
    made.assign([TopicPartition(TOPIC, 0, 0), TopicPartition(TOPIC, 1, 0)])
    assert sorted(made.assignment()) == [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
    first = made.consume(3, timeout=0)
    second = made.consume(3, timeout=0)
    assert {m.partition() for m in first} != {m.partition() for m in second}
    assert sorted((m.partition(), m.offset()) for m in first + second) == [
        (p, o) for p in (0, 1) for o in range(3)
    ]
    made.unassign()
    assert made.assignment() == [] and made.consume(1, timeout=0) == []


def test_assign_creates_a_missing_topic_only_when_allowed(broker: eoslog.Broker) -> None:
    """librdkafka's allow.auto.create.topics (default false) covers assign() too; the
    partition must still exist in the topic created."""
    with pytest.raises(eoslog.UnknownTopicOrPartitionError):
        broker.consumer().assign([TopicPartition("missing", 0, 0)])
    assert "missing" not in broker.list_topics()
    allowed = broker.consumer({"allow.auto.create.topics": True})
    with pytest.raises(eoslog.UnknownTopicOrPartitionError):
        allowed.assign([TopicPartition("made", 1, 0)])
    assert broker.list_topics()["made"].num_partitions == 1
    allowed.assign([TopicPartition("new", 0, 0)])
    assert allowed.assignment() == [TopicPartition("new", 0)]
    assert allowed.consume(1, timeout=0) == []


def test_assign_checks_partitions_before_changing_anything(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    made = consumer(broker)
    with pytest.raises(eoslog.UnknownTopicOrPartitionError):
        made.assign([TopicPartition(TOPIC, 0, 0), TopicPartition("missing", 0, 0)])
    with pytest.raises(ValueError):
        made.assign([TopicPartition(TOPIC, 0, 0), TopicPartition(TOPIC, 0, 1)])
    assert made.assignment() == [TopicPartition(TOPIC, 0)]


def test_group_calls_without_a_group_id_raise_invalid_group_id(
    broker: eoslog.Broker, log: PartitionLog
) -> None:
    made = broker.consumer({"enable.auto.commit": False})
    calls: list[Callable[[], object]] = [
        lambda: made.subscribe([TOPIC]),
        made.commit,
        lambda: made.committed([TopicPartition(TOPIC, 0)]),
        made.consumer_group_metadata,
    ]
    for call in calls:
        with pytest.raises(KafkaException) as raised:
            call()
        assert raised.value.error.code() == 24  # INVALID_GROUP_ID
    made.unsubscribe()  # nothing subscribed: nothing to do
    assert made.config.group_id is None


def test_a_closed_consumer_raises_runtime_error(broker: eoslog.Broker, log: PartitionLog) -> None:
    with broker.consumer({}) as made:
        made.assign([TopicPartition(TOPIC, 0, 0)])
    made.close()  # idempotent
    for call in (lambda: made.poll(0), lambda: made.assignment(), made.unassign):
        with pytest.raises(RuntimeError, match="Consumer closed"):
            call()


# --- configuration and TopicPartition ----------------------------------------------------------


def test_config_defaults_and_accepted_keys(broker: eoslog.Broker) -> None:
    config = broker.consumer({}).config
    assert config.isolation_level == "read_committed"
    assert config.auto_offset_reset == "latest"
    accepted = broker.consumer(
        {
            "bootstrap.servers": "ignored:9092",
            "client.id": "c",
            "enable.auto.commit": "false",
            "check.crcs": True,
            "fetch.max.bytes": 1 << 20,
            "max.partition.fetch.bytes": 1 << 16,
            "auto.offset.reset": "largest",
        }
    ).config
    assert accepted.auto_offset_reset == "latest" and accepted.enable_auto_commit is False


@pytest.mark.parametrize(
    "config",
    [
        {"no.such.key": 1},
        {"isolation.level": "serializable"},
        {"auto.offset.reset": "sometimes"},
        {"enable.auto.commit": "yes"},
        {"fetch.max.bytes": 0},
        {"max.partition.fetch.bytes": True},
        {"group.id": ""},
    ],
)
def test_bad_or_unknown_config_raises_invalid_config(
    broker: eoslog.Broker, config: dict[str, object]
) -> None:
    with pytest.raises(InvalidConfigError):
        broker.consumer(config)


def test_topic_partition_follows_confluent() -> None:
    assert (OFFSET_BEGINNING, OFFSET_END, OFFSET_STORED, OFFSET_INVALID) == (-2, -1, -1000, -1001)
    assert (
        eoslog.TIMESTAMP_NOT_AVAILABLE,
        eoslog.TIMESTAMP_CREATE_TIME,
        eoslog.TIMESTAMP_LOG_APPEND_TIME,
    ) == (0, 1, 2)
    tp = TopicPartition("t", 1)
    assert tp.offset == OFFSET_INVALID and tp.error is None and tp.metadata is None
    # Equality and hashing by (topic, partition), as in confluent-kafka-python.
    assert tp == TopicPartition("t", 1, 42) and len({tp, TopicPartition("t", 1, 7)}) == 1
    assert TopicPartition("a", 5) < TopicPartition("b", 0) < TopicPartition("b", 1)
    assert "topic=t,partition=1,offset=-1001" in repr(tp)


def test_a_batch_header_claiming_a_huge_offset_span_sizes_no_allocation_past_the_bytes_read(
    broker: eoslog.Broker, log: PartitionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression (fuzz finding partition_directory-record-refs-2.6GB, whose input is now kept
    # in the committed corpus): consume() reserved a reference for every offset the headers
    # claim (2.6 GB there, 100 GB here) before reading a record; the bytes read bound the
    # records they can hold.
    builder = codec.BatchBuilder()
    assert builder.append(TS, None, b"v", None)
    forged = forge(builder.build(), last_offset_delta=(1 << 31) - 1)  # CRC still valid
    result = FetchResult(memoryview(forged), None, 1 << 31, 1 << 31, 0, "/x/0.log", 0)
    sizes: list[int] = []
    real = fetcher_module.RecordRefs

    def record_refs(capacity: int) -> object:
        sizes.append(capacity)
        return real(capacity)

    monkeypatch.setattr(fetcher_module, "RecordRefs", record_refs)
    made = consumer(broker)
    assigned = made._assignment.partitions[(TOPIC, 0)]
    plan = fetcher_module._planned(result, 0)
    assert plan.records == 1 << 31
    with contextlib.suppress(KafkaException):
        made._fetcher._index_messages(assigned, result, 0, plan)
    assert sizes and max(sizes) <= len(forged) // limits.record_bytes_min + 1


@pytest.mark.parametrize("arrow", [True, False], ids=["consume_arrow", "consume"])
@pytest.mark.parametrize(
    "deltas",
    [(0, 1, 0), (0, 1, 8)],
    ids=["backwards", "past-the-batch-end"],
)
def test_a_batch_whose_record_offsets_go_backwards_is_refused_naming_file_and_byte(
    broker: eoslog.Broker, log: PartitionLog, arrow: bool, deltas: tuple[int, ...]
) -> None:
    # Regression: a CRC-valid batch whose record offset deltas run 0, 1, 0 was delivered as
    # offsets 0, 1, 0: the position moves forward but the application sees offsets go back.
    # Deltas 0, 1, 8 in a batch whose last offset delta is 2 (fuzz finding
    # partition_directory-consumer-offsets-go-back) gave offset 8 before the next batch's 3.
    section = b"".join(raw_record(offset_delta=d, value=b"v") for d in deltas)
    forged = assemble(section, records_count=3, last_offset_delta=2)
    result = FetchResult(memoryview(forged), None, 3, 3, 0, "/x/00000000000000000000.log", 0)
    made = consumer(broker)
    assigned = made._assignment.partitions[(TOPIC, 0)]
    plan = fetcher_module._planned(result, 0)
    with pytest.raises(eoslog.InvalidRecordError) as raised:
        if arrow:
            made._fetcher._decode_columns(assigned, result, 0, plan, False, None)
        else:
            made._fetcher._index_messages(assigned, result, 0, plan)
    assert str(raised.value).startswith(
        "/x/00000000000000000000.log at byte 0: record offset deltas must run"
    )
