"""The leader's validation of client batches (docs/format.md §10; docs/kafka-behaviours.md LV-T
67-73), through PartitionLog.append_batch. Every refusal is a typed error and writes nothing."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.util import calc_crc32c

import eoslog
from eoslog.errors import InvalidRecordError, InvalidTimestampError
from eoslog.log.config import LogConfig
from eoslog.log.partition import PartitionLog
from eoslog.log.timestamps import check_client_timestamps
from eoslog.record import codec, layout
from tests.support import logtools
from tests.support.batches import assemble, raw_record
from tests.support.logtools import OpenBroker

TS = logtools.TS
HOUR_MS = 3_600_000


def new_topic(broker: eoslog.Broker, **config: object) -> PartitionLog:
    broker.create_topic("t", 1, config=dict(config))
    return broker.log("t", 0)


def recrc(raw: bytearray) -> bytes:
    """The batch with its CRC recomputed (kafka-python's CRC-32C: independent of eoslog)."""
    struct.pack_into(
        ">I", raw, layout.CRC_OFFSET, calc_crc32c(bytes(raw[layout.ATTRIBUTES_OFFSET :]))
    )
    return bytes(raw)


def with_header(field_offset: int, fmt: str, value: int) -> Callable[[], bytes]:
    def make() -> bytes:
        raw = bytearray(logtools.batch(logtools.values(0, 3), timestamps=TS))
        struct.pack_into(fmt, raw, field_offset, value)
        return recrc(raw)

    return make


def assert_refused(
    log: PartitionLog, raw: bytes, error: type[Exception]
) -> pytest.ExceptionInfo[Exception]:
    end, files = log.log_end_offset, logtools.contents(log.directory)
    with pytest.raises(error) as caught:
        log.append_batch(raw)
    assert (log.log_end_offset, logtools.contents(log.directory)) == (end, files)
    return caught


def test_only_one_batch_per_append(open_broker: OpenBroker) -> None:
    """checkOnlyOneBatch."""
    log = new_topic(open_broker())
    one = logtools.batch(logtools.values(0, 1))
    assert_refused(log, one + one, InvalidRecordError)


def test_a_batch_without_records_is_not_allowed_from_a_client(open_broker: OpenBroker) -> None:
    """testBatchWithoutRecordsNotAllowed: count 0 and last offset delta -1."""
    log = new_topic(open_broker())
    raw = bytearray(logtools.batch(logtools.values(0, 1), timestamps=TS))
    struct.pack_into(">i", raw, layout.LAST_OFFSET_DELTA_OFFSET, -1)
    struct.pack_into(">i", raw, layout.RECORDS_COUNT_OFFSET, 0)
    raw = raw[: layout.RECORDS_OFFSET]
    struct.pack_into(">i", raw, layout.BATCH_LENGTH_OFFSET, len(raw) - 12)
    assert_refused(log, recrc(raw), InvalidRecordError)


@pytest.mark.parametrize(
    ("case", "make"),
    [
        ("count above the records", with_header(layout.RECORDS_COUNT_OFFSET, ">i", 4)),
        ("count below the records", with_header(layout.RECORDS_COUNT_OFFSET, ">i", 2)),
        ("delta disagrees with count", with_header(layout.LAST_OFFSET_DELTA_OFFSET, ">i", 5)),
        ("negative count", with_header(layout.RECORDS_COUNT_OFFSET, ">i", -1)),
    ],
)
def test_inconsistent_count_and_offset_delta_are_refused(
    open_broker: OpenBroker, case: str, make: Callable[[], bytes]
) -> None:
    """testInconsistentCountAndOffset / testUnmatchedNumberOfRecords."""
    log = new_topic(open_broker())
    assert_refused(log, make(), InvalidRecordError)
    assert log.append_batch(logtools.batch(logtools.values(0, 3))).last_offset == 2


def test_control_records_are_not_allowed_from_clients(open_broker: OpenBroker) -> None:
    """testControlRecordsNotAllowedFromClients."""
    log = new_topic(open_broker())
    marker = codec.build_control_batch(
        1, producer_id=7, producer_epoch=0, coordinator_epoch=0, timestamp=TS
    )
    assert_refused(log, marker, InvalidRecordError)


def test_a_producer_id_with_a_negative_sequence_is_refused(open_broker: OpenBroker) -> None:
    """checkInvalidSequence: base sequence -2 at byte 53."""
    log = new_topic(open_broker())
    builder = codec.BatchBuilder(producer_id=5, producer_epoch=0, base_sequence=0)
    builder.append(TS, None, b"v")
    raw = bytearray(builder.build())
    struct.pack_into(">i", raw, layout.BASE_SEQUENCE_OFFSET, -2)
    assert_refused(log, recrc(raw), InvalidRecordError)


@pytest.mark.parametrize("direction", ["past", "future"])
def test_create_time_records_outside_the_allowed_range_are_each_reported(
    open_broker: OpenBroker, clock: object, direction: str
) -> None:
    """testRecordWithPastTimestampIsRejected / testRecordWithFutureTimestampIsRejected."""
    log = new_topic(
        open_broker(),
        **{"message.timestamp.before.max.ms": HOUR_MS, "message.timestamp.after.max.ms": HOUR_MS},
    )
    shift = -2 * HOUR_MS if direction == "past" else 2 * HOUR_MS
    timestamps = [TS, TS + shift, TS + 10, TS + shift - 1, -1]
    raw = logtools.batch(logtools.values(0, 5), timestamps=timestamps)
    caught = assert_refused(log, raw, InvalidTimestampError)
    assert [index for index, _ in caught.value.record_errors] == [1, 3]  # type: ignore[attr-defined]
    assert caught.value.error.code() == 32  # type: ignore[attr-defined]
    inside = logtools.batch(logtools.values(0, 3), timestamps=[TS - HOUR_MS, TS, TS + HOUR_MS])
    assert log.append_batch(inside).last_offset == 2


def _java_long(value: int) -> int:
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


_LONG = st.integers(-(1 << 63), (1 << 63) - 1)
_NEAR = st.integers(TS - 3 * HOUR_MS, TS + 3 * HOUR_MS)


@settings(max_examples=400, deadline=None)
@given(
    timestamps=st.lists(st.one_of(st.just(-1), _NEAR, _LONG), min_size=1, max_size=6),
    now=st.one_of(_NEAR, _LONG),
    before=st.one_of(st.just(HOUR_MS), st.integers(0, (1 << 63) - 1)),
    after=st.one_of(st.just(HOUR_MS), st.integers(0, (1 << 63) - 1)),
)
def test_the_timestamp_rule_reports_exactly_the_records_kafka_would(
    timestamps: list[int], now: int, before: int, after: int
) -> None:
    """LogValidator.validateTimestamp per record, in Java's wrapping long arithmetic: a
    record other than -1 is out of range when now - t > before or t - now > after. The check
    decides most batches from validate_batch's smallest and largest timestamps without a
    decode; the records it names must be the rule's, whatever the bounds."""
    base = timestamps[0]
    section = b"".join(
        raw_record(offset_delta=i, timestamp_delta=_java_long(t - base), value=b"v")
        for i, t in enumerate(timestamps)
    )
    raw = assemble(section, records_count=len(timestamps), base_timestamp=base, max_timestamp=base)
    validated = codec.validate_batch(raw)
    config = LogConfig(timestamp_before_max_ms=before, timestamp_after_max_ms=after)
    expected = [
        index
        for index, t in enumerate(timestamps)
        if t != -1 and (_java_long(now - t) > before or _java_long(t - now) > after)
    ]
    try:
        check_client_timestamps(raw, validated, config, now)
        found: list[int] = []
    except InvalidTimestampError as error:
        found = [index for index, _ in error.record_errors]  # type: ignore[attr-defined]
    assert found == expected


def test_a_client_batch_claiming_log_append_time_is_refused(open_broker: OpenBroker) -> None:
    log = new_topic(open_broker())
    raw = bytearray(logtools.batch(logtools.values(0, 2), timestamps=TS))
    attributes = struct.unpack_from(">h", raw, layout.ATTRIBUTES_OFFSET)[0]
    struct.pack_into(">h", raw, layout.ATTRIBUTES_OFFSET, attributes | layout.TIMESTAMP_TYPE_MASK)
    assert_refused(log, recrc(raw), InvalidTimestampError)


def test_offsets_are_assigned_consecutively_from_the_log_end_with_log_append_time(
    open_broker: OpenBroker, clock: object
) -> None:
    """checkLogAppendTimeNonCompressed / testRelativeOffsetAssignmentNonCompressedV2."""
    log = new_topic(open_broker(), **{"message.timestamp.type": "LogAppendTime"})
    log.append_batch(logtools.batch(logtools.values(0, 4), timestamps=TS - 5))
    info = log.append_batch(logtools.batch(logtools.values(4, 3), timestamps=TS - 5))
    assert (info.base_offset, info.last_offset, info.log_append_time_ms) == (4, 6, TS)
    stored = codec.read_header(bytes(log.read(4).records))
    assert stored.timestamp_type == 1 and stored.max_timestamp == TS
    records = logtools.records(bytes(log.read(4).records))
    assert [(r.offset, r.timestamp) for r in records] == [(4, TS), (5, TS), (6, TS)]


@pytest.mark.parametrize("claimed", [TS + 1, TS + 500, -1], ids=["low", "high", "none"])
def test_a_create_time_batch_is_stored_with_its_largest_record_timestamp_as_kafka_writes_it(
    open_broker: OpenBroker, claimed: int
) -> None:
    # Kafka's LogValidator sets a CreateTime batch's max timestamp to its largest record
    # timestamp. Regression: eoslog stored the producer's value, with the time index built on
    # append from the records and rebuilt after a crash from the header, so offset lookups by
    # time changed across a restart.
    broker = open_broker()
    log = new_topic(broker)
    log.append_batch(logtools.batch(logtools.values(0, 2), timestamps=[TS, TS + 1]))
    raw = bytearray(logtools.batch(logtools.values(2, 3), timestamps=[TS + 5, TS + 9, TS + 7]))
    struct.pack_into(">q", raw, layout.MAX_TIMESTAMP_OFFSET, claimed)
    log.append_batch(recrc(raw))
    stored = bytes(log.read(2).records)  # the second batch, as written to the .log
    header = codec.read_header(stored)
    assert header.max_timestamp == TS + 9
    assert header.crc == calc_crc32c(bytes(stored[layout.ATTRIBUTES_OFFSET :]))
    lookups = [log.offset_for_timestamp(TS + t) for t in (2, 6, 9, 10)]
    assert lookups == [(2, TS + 5), (3, TS + 9), (3, TS + 9), None]
    directory = log.directory
    broker.close()
    for name in os.listdir(directory):  # a restart that rebuilds the indexes from the log
        if name.endswith((".index", ".timeindex")):
            os.unlink(os.path.join(directory, name))
    again = open_broker().log("t", 0)
    assert [again.offset_for_timestamp(TS + t) for t in (2, 6, 9, 10)] == lookups
