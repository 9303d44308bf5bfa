"""A log start inside a segment, which only delete_records writes, is believed at open only when
eoslog's checksummed log-start checkpoint (`eoslog-log-start-checkpoint`) confirms it: a damaged
digit in Kafka's log-start checkpoint, which has no checksum, never hides a record, and a
crash between the two files' writes keeps the deletion (docs/format.md §9.1)."""

from __future__ import annotations

import os

import pytest

import eoslog
from eoslog.errors import CorruptCheckpointError
from eoslog.fs import PosixFileSystem
from eoslog.log import checkpoints
from eoslog.record import primitives
from tests.support import logtools
from tests.support.logtools import OpenBroker

KAFKA_FILE = checkpoints.LOG_START_OFFSET_FILE
OURS_FILE = checkpoints.CONFIRMED_LOG_START_FILE


def write_ten_and_delete_below(open_broker: OpenBroker, offset: int) -> None:
    broker = open_broker()
    broker.create_topic("t", 1)
    producer = broker.producer({"linger.ms": 0})
    for value in logtools.values(0, 10):
        producer.produce("t", value, partition=0)
    assert producer.flush(10) == 0
    producer.close()
    assert broker.log("t", 0).delete_records(offset) == offset
    broker.close()


def offsets_read(log: eoslog.PartitionLog) -> list[int]:
    return [record.offset for record in logtools.read_all(log)]


def test_delete_records_writes_both_files_with_the_same_log_start(
    open_broker: OpenBroker, data_dir: str
) -> None:
    write_ten_and_delete_below(open_broker, 4)
    fs = PosixFileSystem()
    assert checkpoints.read_offsets(fs, os.path.join(data_dir, KAFKA_FILE)) == {("t", 0): 4}
    with open(os.path.join(data_dir, OURS_FILE), "rb") as file:
        assert checkpoints.decode_confirmed_log_starts(file.read()) == {("t", 0): 4}
    log = open_broker().log("t", 0)
    assert (log.log_start_offset, offsets_read(log)) == (4, list(range(4, 10)))
    assert log.recovery_report.checkpoints_ignored == []


def test_a_damaged_kafka_log_start_is_ignored_for_the_confirmed_one(
    open_broker: OpenBroker, data_dir: str
) -> None:
    write_ten_and_delete_below(open_broker, 4)
    with open(os.path.join(data_dir, KAFKA_FILE), "w") as file:
        file.write("0\n1\nt 0 6\n")  # a flipped bit: 4 (0x34) became 6 (0x36)
    log = open_broker().log("t", 0)
    assert (log.log_start_offset, offsets_read(log)) == (4, list(range(4, 10)))


def test_a_log_start_the_checksummed_file_does_not_confirm_hides_no_record(
    open_broker: OpenBroker, data_dir: str
) -> None:
    """Kafka's file alone says 4 (eoslog's was lost or damaged): the open cannot tell a
    deletion from a damaged digit, so it hides nothing and reports the value it ignored."""
    write_ten_and_delete_below(open_broker, 4)
    path = os.path.join(data_dir, OURS_FILE)
    with open(path, "r+b") as file:
        data = bytearray(file.read())
        data[-3] ^= 0x01  # the CRC line no longer matches
        file.seek(0)
        file.write(data)
    log = open_broker().log("t", 0)
    assert (log.log_start_offset, offsets_read(log)) == (0, list(range(10)))
    notes = " ".join(log.recovery_report.checkpoints_ignored)
    assert OURS_FILE in notes and "log start 4" in notes, notes


def test_a_crash_between_the_two_writes_keeps_the_newer_deletion(
    open_broker: OpenBroker, data_dir: str
) -> None:
    """eoslog's file is written first: after a crash before Kafka's, eoslog's newer value
    holds (the deletion had not been answered, so either outcome was allowed)."""
    write_ten_and_delete_below(open_broker, 4)
    checkpoints.write_atomically(
        PosixFileSystem(),
        os.path.join(data_dir, OURS_FILE),
        checkpoints.encode_confirmed_log_starts({("t", 0): 7}),
    )
    log = open_broker().log("t", 0)
    assert (log.log_start_offset, offsets_read(log)) == (7, list(range(7, 10)))


def test_scan_starts_at_a_confirmed_log_start(open_broker: OpenBroker, data_dir: str) -> None:
    write_ten_and_delete_below(open_broker, 4)
    offsets = [
        offset
        for batch in eoslog.scan(data_dir, ["t"], isolation_level="read_uncommitted")
        for offset in batch.column("offset").to_pylist()
    ]
    assert offsets == list(range(4, 10))


def test_the_checksummed_file_round_trips_and_refuses_a_bad_crc() -> None:
    offsets = {("t", 0): 4, ("other", 3): 0}
    data = checkpoints.encode_confirmed_log_starts(offsets)
    assert checkpoints.decode_confirmed_log_starts(data) == offsets
    assert data.endswith(b"crc32c=%08x\n" % primitives.crc32c(data[: data.rindex(b"crc32c")]))
    assert checkpoints.decode_confirmed_log_starts(b"") == {}
    for damaged in (
        data.replace(b"t 0 4", b"t 0 6"),  # an entry changed under its CRC
        data[: data.rindex(b"crc32c")],  # the CRC line lost
        data[:-1],  # the last newline lost
        b"crc32c=00000000\n",  # a CRC alone
    ):
        with pytest.raises(CorruptCheckpointError):
            checkpoints.decode_confirmed_log_starts(damaged)
