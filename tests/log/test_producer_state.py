"""Producer state (docs/format.md §8; docs/kafka-behaviours.md PSM-T 39-66, UL-T 76 and 78, LV-T
71): the table's checks in Kafka's order, markers, expiry, the .snapshot format, and the partition
log's use of them (duplicates, snapshots on roll and close, rebuild at open and truncation).
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Callable

import pytest

import eoslog
from eoslog import limits
from eoslog._ext.producer_state import (
    APPEND_DUPLICATE,
    APPEND_OK,
    NO_OFFSET,
    ProducerStateTable,
    last_sequence_of,
)
from eoslog.errors import (
    CorruptRecordError,
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TooManyProducersError,
    TransactionCoordinatorFencedError,
)
from eoslog.log.partition import AppendInfo, PartitionLog
from eoslog.log.producer_state import ProducerStateManager, marker_type
from eoslog.record import codec
from tests.support import logtools

TS = logtools.TS
INT32_MAX = (1 << 31) - 1
PID = 1000
DAY_MS = 86_400_000


def append(
    table: ProducerStateTable,
    first_offset: int,
    *,
    pid: int = PID,
    epoch: int = 0,
    sequence: int,
    count: int = 1,
    timestamp: int = TS,
    transactional: bool = False,
) -> int:
    """Check then record a client batch of `count` records at first_offset; the verdict."""
    verdict, _ = table.check_append(pid, epoch, sequence, count - 1, transactional)
    if verdict == APPEND_OK:
        table.apply_append(
            pid,
            epoch,
            sequence,
            count - 1,
            first_offset,
            first_offset + count - 1,
            timestamp,
            transactional,
        )
    return int(verdict)


# --- the table: sequences and epochs (PSM-T 39-45) --------------------------------------------


def test_consecutive_sequences_are_accepted_and_a_repeat_or_gap_is_not() -> None:
    table = ProducerStateTable()
    append(table, 0, sequence=0)
    append(table, 1, sequence=1)
    with pytest.raises(OutOfOrderSequenceError):
        table.check_append(PID, 0, 3, 0, False)  # skips 2
    with pytest.raises(OutOfOrderSequenceError):
        table.check_append(PID, 0, 1, 1, False)  # overlaps 1 without matching a batch
    append(table, 2, epoch=1, sequence=0)  # a new, higher epoch from sequence 0
    with pytest.raises(InvalidProducerEpochError):
        table.check_append(PID, 0, 2, 0, False)


def test_a_new_epoch_must_start_at_sequence_zero() -> None:
    table = ProducerStateTable()
    append(table, 0, sequence=0)
    with pytest.raises(OutOfOrderSequenceError):
        table.check_append(PID, 1, 5, 0, False)


def test_an_unknown_producer_starts_with_any_epoch_and_sequence() -> None:
    """docs/format.md §8.2 item 5 (testAllowNonZeroSequenceOnFirstAppendNonZeroEpoch)."""
    table = ProducerStateTable()
    assert append(table, 0, epoch=3, sequence=17) == APPEND_OK
    assert table.entry(PID).last_sequence == 17  # type: ignore[union-attr]


def test_sequences_wrap_from_int32_max_to_zero_and_only_to_zero() -> None:
    table = ProducerStateTable()
    append(table, 0, sequence=INT32_MAX - 1, count=2)
    with pytest.raises(OutOfOrderSequenceError):
        table.check_append(PID, 0, 1, 0, False)
    assert append(table, 2, sequence=0) == APPEND_OK


def test_a_batch_spanning_the_wrap_has_its_last_sequence_past_zero() -> None:
    assert last_sequence_of(INT32_MAX, 0) == INT32_MAX
    assert last_sequence_of(INT32_MAX, 1) == 0
    assert last_sequence_of(INT32_MAX - 1, 3) == 1
    table = ProducerStateTable()
    append(table, 0, sequence=INT32_MAX - 1, count=4)
    assert append(table, 4, sequence=2) == APPEND_OK


def test_recovery_replay_records_a_new_producer_as_it_is() -> None:
    """testNoValidationOnFirstEntryWhenLoadingLog: apply_append checks nothing."""
    table = ProducerStateTable()
    table.apply_append(PID, 5, 42, 3, 100, 103, TS, False)
    entry = table.entry(PID)
    assert entry is not None
    assert (entry.epoch, entry.last_sequence, entry.last_data_offset) == (5, 45, 103)
    assert table.map_end_offset == 104


def test_a_non_transactional_batch_while_a_transaction_is_open_is_refused() -> None:
    table = ProducerStateTable()
    append(table, 0, sequence=0, transactional=True)
    with pytest.raises(InvalidTxnStateError):
        table.check_append(PID, 0, 1, 0, False)
    assert append(table, 1, sequence=1, transactional=True) == APPEND_OK


# --- duplicates (UL-T 76) ---------------------------------------------------------------------


def test_a_retry_of_any_of_the_last_five_batches_is_a_duplicate_with_its_offsets() -> None:
    table = ProducerStateTable()
    for n in range(7):
        append(table, 10 * n, sequence=2 * n, count=2, timestamp=TS + n)
    for n in range(2, 7):
        verdict, original = table.check_append(PID, 0, 2 * n, 1, False)
        assert verdict == APPEND_DUPLICATE
        assert original == (10 * n, 10 * n + 1, TS + n)
    # The sixth-newest batch is no longer retained: its retry is out of order.
    with pytest.raises(OutOfOrderSequenceError):
        table.check_append(PID, 0, 2, 1, False)


def test_a_retry_under_another_epoch_is_not_a_duplicate() -> None:
    table = ProducerStateTable()
    append(table, 0, sequence=0)
    append(table, 1, epoch=1, sequence=0)
    with pytest.raises(InvalidProducerEpochError):
        table.check_append(PID, 0, 0, 0, False)


# --- markers (PSM-T 40, 43, 44, 46, 50, 58, 59, 61) -------------------------------------------


def test_a_marker_for_an_unknown_producer_sets_its_epoch_and_data_restarts_at_zero() -> None:
    table = ProducerStateTable()
    assert table.apply_marker(PID, 2, 0, TS, 7) is None
    with pytest.raises(InvalidProducerEpochError):
        table.check_append(PID, 1, 0, 0, False)
    with pytest.raises(OutOfOrderSequenceError):
        table.check_append(PID, 2, 17, 0, False)
    assert append(table, 8, epoch=2, sequence=0) == APPEND_OK


def test_a_marker_with_a_higher_epoch_ends_the_transaction_and_forgets_sequences() -> None:
    table = ProducerStateTable()
    append(table, 0, sequence=0, count=3, transactional=True)
    assert table.apply_marker(PID, 1, 0, TS + 1, 3) == 0  # the transaction began at 0
    entry = table.entry(PID)
    assert entry is not None
    assert (entry.epoch, entry.current_txn_first_offset, entry.batch_metadata) == (1, NO_OFFSET, [])
    with pytest.raises(OutOfOrderSequenceError):
        table.check_append(PID, 1, 3, 0, False)  # the old sequence does not continue
    assert append(table, 4, epoch=1, sequence=0) == APPEND_OK


def test_a_commit_marker_completes_the_transaction_and_keeps_cached_batches() -> None:
    table = ProducerStateTable()
    append(table, 16, sequence=0, count=5, transactional=True)
    append(table, 21, sequence=5, count=5, transactional=True)
    before = table.entry(PID).batch_metadata  # type: ignore[union-attr]
    assert table.open_transactions() == {16: PID}
    assert table.apply_marker(PID, 0, 0, TS, 40) == 16
    assert table.open_transactions() == {}
    assert table.entry(PID).batch_metadata == before  # type: ignore[union-attr]


def test_a_fencing_abort_marker_keeps_the_entry_through_an_immediate_expiry_pass() -> None:
    table = ProducerStateTable()
    append(table, 0, sequence=0, transactional=True)
    table.apply_marker(PID, 1, 0, TS + 5, 1)
    assert table.remove_expired(TS + 5, DAY_MS) == 0
    entry = table.entry(PID)
    assert entry is not None
    assert (entry.epoch, entry.current_txn_first_offset, entry.last_data_offset) == (
        1,
        NO_OFFSET,
        NO_OFFSET,
    )


def test_markers_from_an_older_producer_or_coordinator_epoch_are_refused() -> None:
    table = ProducerStateTable()
    table.apply_marker(PID, 3, 5, TS, 0)
    with pytest.raises(InvalidProducerEpochError):
        table.check_marker(PID, 2, 5)
    with pytest.raises(TransactionCoordinatorFencedError):
        table.check_marker(PID, 3, 4)
    table.check_marker(PID, 3, 5)
    table.check_marker(PID, 4, 6)


# --- expiry (PSM-T 56, 57) --------------------------------------------------------------------


def test_an_idle_producer_expires_and_its_next_batch_starts_it_afresh() -> None:
    table = ProducerStateTable()
    append(table, 0, sequence=0, count=2, timestamp=TS)
    assert table.remove_expired(TS + DAY_MS - 1, DAY_MS) == 0
    assert table.remove_expired(TS + DAY_MS, DAY_MS) == 1
    assert table.entry(PID) is None
    assert append(table, 2, sequence=2) == APPEND_OK


def test_a_producer_with_an_open_transaction_never_expires() -> None:
    table = ProducerStateTable()
    append(table, 0, sequence=0, transactional=True, timestamp=TS)
    assert table.remove_expired(TS + 100 * DAY_MS, DAY_MS) == 0
    assert table.entry(PID) is not None


# --- the snapshot format (PSM-T 48, 60, 65) ---------------------------------------------------


def test_a_snapshot_round_trips_every_field_and_keeps_only_the_newest_batch() -> None:
    table = ProducerStateTable()
    append(table, 0, sequence=0, count=2, timestamp=TS)
    append(table, 2, sequence=2, count=3, timestamp=TS + 1, transactional=True)
    table.apply_marker(PID + 1, 4, 9, TS + 2, 5)  # an entry with no batch metadata
    table.map_end_offset = 6
    data = table.snapshot()
    assert len(data) == 10 + 2 * 46
    assert struct.unpack_from(">hIi", data)[0::2] == (1, 2)
    loaded = ProducerStateTable()
    loaded.load_snapshot(data, 6)
    assert loaded.map_end_offset == 6
    first = loaded.entry(PID)
    assert first is not None
    assert first.batch_metadata == [(2, 4, 2, 4, TS + 1)]
    assert (first.epoch, first.current_txn_first_offset, first.last_timestamp) == (0, 2, TS + 1)
    second = loaded.entry(PID + 1)
    assert second is not None
    assert (second.epoch, second.coordinator_epoch, second.batch_metadata) == (4, 9, [])
    assert loaded.snapshot() == data
    # After a reload the producer continues with the next sequence.
    assert append(loaded, 6, sequence=5, transactional=True) == APPEND_OK


def test_the_snapshot_layout_matches_kafka_byte_for_byte() -> None:
    """docs/format.md §8.3: version, CRC-32C of everything after it, count, 46-byte entries."""
    table = ProducerStateTable()
    table.apply_append(7, 1, 10, 2, 100, 102, TS, False)
    data = table.snapshot()
    entry = struct.pack(">qhiqiqiq", 7, 1, 12, 102, 2, TS, -1, -1)
    body = struct.pack(">i", 1) + entry
    from kafka.record.util import calc_crc32c  # an implementation independent of eoslog

    assert data == struct.pack(">hI", 1, calc_crc32c(body)) + body


@pytest.mark.parametrize("damage", ["empty", "truncated", "bit flip", "version"])
def test_a_damaged_snapshot_is_refused_and_changes_nothing(damage: str) -> None:
    table = ProducerStateTable()
    append(table, 0, sequence=0)
    good = table.snapshot()
    bad = {
        "empty": b"",
        "truncated": good[:-1],
        "bit flip": good[:20] + bytes([good[20] ^ 4]) + good[21:],
        "version": b"\x00\x02" + good[2:],
    }[damage]
    target = ProducerStateTable(5)
    append(target, 5, pid=9, sequence=0)
    with pytest.raises(CorruptSnapshotError):
        target.load_snapshot(bad, 1)
    assert target.producer_ids() == [9]
    assert target.map_end_offset == 6


# --- snapshot files (PSM-T 47, 53, 60, 62, 66) ------------------------------------------------


@pytest.fixture
def manager(tmp_path: os.PathLike[str]) -> ProducerStateManager:
    return ProducerStateManager(eoslog.fs.PosixFileSystem(), str(tmp_path), DAY_MS)


def write_snapshot(manager: ProducerStateManager, offset: int, sequence: int = 0) -> None:
    manager.table.clear(0)
    manager.table.apply_append(PID, 0, sequence, 0, offset - 1, offset - 1, TS, False)
    manager.table.map_end_offset = offset
    manager.take_snapshot()


def test_a_snapshot_at_an_unchanged_offset_is_not_written_again(
    manager: ProducerStateManager,
) -> None:
    write_snapshot(manager, 3, sequence=1)
    path = os.path.join(manager.directory, f"{3:020d}.snapshot")
    before = os.stat(path).st_mtime_ns, logtools.file_bytes(path)
    write_snapshot(manager, 3, sequence=2)
    assert (os.stat(path).st_mtime_ns, logtools.file_bytes(path)) == before


def test_loading_keeps_snapshots_inside_the_log_and_uses_the_newest(
    manager: ProducerStateManager,
) -> None:
    for offset in (1, 2, 3, 4):
        write_snapshot(manager, offset, sequence=offset)
    assert manager.load_newest_snapshot(log_start_offset=1, log_end_offset=3) == 3
    assert manager.snapshot_offsets() == [2, 3]
    assert manager.table.entry(PID).last_sequence == 3  # type: ignore[union-attr]


@pytest.mark.parametrize("damage", [b"", b"\x00\x01\x00", b"garbage that is long enough!"])
def test_a_corrupt_newest_snapshot_is_deleted_and_the_previous_one_loaded(
    manager: ProducerStateManager, damage: bytes
) -> None:
    write_snapshot(manager, 2, sequence=2)
    write_snapshot(manager, 5, sequence=5)
    with open(os.path.join(manager.directory, f"{5:020d}.snapshot"), "wb") as file:
        file.write(damage)
    assert manager.load_newest_snapshot(0, 10) == 2
    assert manager.snapshot_offsets() == [2]
    assert manager.table.entry(PID).last_sequence == 2  # type: ignore[union-attr]


@pytest.mark.parametrize(("bases", "kept"), [([5], [5, 42]), ([42], [42]), ([0, 5, 42], [5, 42])])
def test_stray_snapshots_go_but_the_clean_shutdown_one_above_every_segment_stays(
    manager: ProducerStateManager, bases: list[int], kept: list[int]
) -> None:
    for offset in (2, 5, 42):
        write_snapshot(manager, offset)
    manager.remove_stray_snapshots(bases)
    assert manager.snapshot_offsets() == kept


# --- the partition log (UL-T 76, 78; LV-T 71) -------------------------------------------------


OpenBroker = Callable[..., eoslog.Broker]


def idempotent(
    sequence: int, count: int = 2, *, pid: int = PID, epoch: int = 0, first: int = 0
) -> bytes:
    builder = codec.BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=sequence)
    for value in logtools.values(first, count):
        assert builder.append(TS, None, value)
    return builder.build()


def new_topic(broker: eoslog.Broker, config: dict[str, object] | None = None) -> PartitionLog:
    broker.create_topic("t", 1, config=config or {})
    return broker.log("t", 0)


def test_a_retried_batch_returns_its_original_offsets_and_writes_nothing(
    open_broker: OpenBroker,
) -> None:
    log = new_topic(open_broker())
    first = [log.append_batch(idempotent(2 * n, first=2 * n)) for n in range(6)]
    end, files = log.log_end_offset, logtools.contents(log.directory)
    for n in range(1, 6):
        retry = log.append_batch(idempotent(2 * n, first=2 * n))
        assert retry == AppendInfo(first[n].base_offset, first[n].last_offset, -1, True)
    assert (log.log_end_offset, logtools.contents(log.directory)) == (end, files)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_batch(idempotent(0))  # the sixth-newest: no longer retained
    with pytest.raises(OutOfOrderSequenceError):
        log.append_batch(idempotent(11, count=3))  # overlaps the last batch
    assert logtools.contents(log.directory) == files


def test_a_new_producer_past_producers_per_partition_max_is_refused_and_writes_nothing(
    open_broker: OpenBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/style.md rule 6: the cap, lowered to 3, refuses a fourth producer's batch (a
    typed error, nothing written); producers already kept still append and retry, and plain
    batches never count."""
    monkeypatch.setattr(limits, "producers_per_partition_max", 3)
    log = new_topic(open_broker())
    for pid in (1, 2, 3):
        log.append_batch(idempotent(0, pid=pid))
    log.append_batch(logtools.batch(logtools.values(0, 2), timestamps=TS))  # no producer id
    end, files = log.log_end_offset, logtools.contents(log.directory)
    with pytest.raises(TooManyProducersError, match="producers_per_partition_max") as refused:
        log.append_batch(idempotent(0, pid=4))
    assert refused.value.error.code() == 89 and not refused.value.error.retriable()
    assert (log.log_end_offset, logtools.contents(log.directory)) == (end, files)
    assert sorted(log._producers.table.producer_ids()) == [1, 2, 3]
    assert log.append_batch(idempotent(0, pid=3)).duplicate  # a retry of a kept producer
    assert not log.append_batch(idempotent(2, pid=3, first=2)).duplicate


def test_a_batch_with_a_producer_id_and_a_negative_sequence_is_invalid(
    open_broker: OpenBroker,
) -> None:
    """checkInvalidSequence: base sequence -2 at byte 53 with a producer id."""
    log = new_topic(open_broker())
    raw = bytearray(idempotent(0))
    struct.pack_into(">i", raw, 53, -2)
    from kafka.record.util import calc_crc32c

    struct.pack_into(">I", raw, 17, calc_crc32c(bytes(raw[21:])))
    with pytest.raises(InvalidRecordError):
        log.append_batch(bytes(raw))
    assert log.log_end_offset == 0


def test_every_roll_writes_a_producer_snapshot_at_the_new_segment_base(
    open_broker: OpenBroker,
) -> None:
    log = new_topic(open_broker(), {"segment.bytes": 3 * len(idempotent(0))})
    for n in range(7):
        log.append_batch(idempotent(2 * n, first=2 * n))
    manager = ProducerStateManager(log.fs, log.directory, DAY_MS)
    bases = [segment.base_offset for segment in log.segments]
    assert manager.snapshot_offsets() == bases[1:]
    path = os.path.join(log.directory, f"{bases[1]:020d}.snapshot")
    table = ProducerStateTable()
    table.load_snapshot(logtools.file_bytes(path), bases[1])
    assert table.entry(PID).last_data_offset == bases[1] - 1  # type: ignore[union-attr]


@pytest.mark.parametrize("stop", ["clean close", "crash", "crash without snapshots"])
def test_retries_after_a_reopen_are_never_written_twice(
    open_broker: OpenBroker, tmp_path: os.PathLike[str], clock: logtools.Clock, stop: str
) -> None:
    """After a reopen the newest batch of a producer is always recognized. Older ones are
    recognized if the rebuild replayed them (the batches after the snapshot it loaded);
    otherwise, as in Kafka, whose snapshot keeps only each producer's newest batch, their retry
    is refused with OutOfOrderSequenceError. Either way nothing is written twice."""
    broker = open_broker()
    log = new_topic(broker, {"segment.bytes": 4 * len(idempotent(0))})
    acked = [log.append_batch(idempotent(2 * n, first=2 * n)) for n in range(9)]
    if stop == "clean close":
        broker.close()
        copy = os.path.join(tmp_path, "data")
    else:
        log.flush()
        copy = os.path.join(tmp_path, "copy")
        # The files as a kill -9 leaves them (the lock file is not copied).
        shutil.copytree(
            os.path.join(tmp_path, "data"), copy, ignore=shutil.ignore_patterns(".lock")
        )
        broker.close()
        if stop == "crash without snapshots":
            for name in os.listdir(os.path.join(copy, "t-0")):
                if name.endswith(".snapshot"):
                    os.unlink(os.path.join(copy, "t-0", name))
    reopened = eoslog.open(copy, background=False, clock_ms=clock)
    try:
        log = reopened.log("t", 0)
        recognized = []
        for n in range(4, 9):
            try:
                retry = log.append_batch(idempotent(2 * n, first=2 * n))
            except OutOfOrderSequenceError:
                continue
            assert retry == AppendInfo(acked[n].base_offset, acked[n].last_offset, -1, True)
            recognized.append(n)
        assert (
            recognized
            == {
                "clean close": [8],  # the close snapshot holds the newest batch only
                # No recovery-point checkpoint was written before the crash: recovery rescans
                # every segment, and the producer-state replay starts at the first of them.
                "crash": [4, 5, 6, 7, 8],
                "crash without snapshots": [4, 5, 6, 7, 8],  # a full replay
            }[stop]
        )
        assert log.log_end_offset == 18
        assert log.append_batch(idempotent(18, first=18)).base_offset == 18
        with pytest.raises(OutOfOrderSequenceError):
            log.append_batch(idempotent(30, first=30))
    finally:
        reopened.close()


def test_retention_deleting_a_producers_batches_keeps_its_state(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    log = new_topic(broker, {"segment.bytes": 2 * len(idempotent(0)), "retention.ms": 1000})
    acked = [log.append_batch(idempotent(2 * n, first=2 * n)) for n in range(4)]
    other = log.append_batch(idempotent(0, pid=PID + 1, first=100))
    clock.advance(10 * DAY_MS // 10_000)  # well past retention.ms, far from expiry
    clock.now_ms = TS + 2000
    assert log.delete_retained_segments() > 0
    assert log.log_start_offset > acked[-1].last_offset
    retry = log.append_batch(idempotent(6, first=6))
    assert (retry.base_offset, retry.duplicate) == (acked[3].base_offset, True)
    assert log.append_batch(idempotent(8, first=8)).duplicate is False
    assert other.base_offset == acked[-1].last_offset + 1


def test_truncation_restores_the_producer_state_of_the_shorter_log(
    open_broker: OpenBroker,
) -> None:
    log = new_topic(open_broker(), {"segment.bytes": 3 * len(idempotent(0))})
    acked = [log.append_batch(idempotent(2 * n, first=2 * n)) for n in range(8)]
    log.truncate_to(acked[5].base_offset)
    assert log.producer_state.entry(PID).last_sequence == 9  # type: ignore[union-attr]
    again = log.append_batch(idempotent(10, first=10))
    assert (again.base_offset, again.duplicate) == (acked[5].base_offset, False)
    assert log.append_batch(idempotent(8, first=8)).duplicate is True


@pytest.mark.parametrize("key", [None, b"", b"\x00", b"\x00\x00\x00"])
def test_a_control_key_too_short_for_its_type_is_a_typed_error(key: bytes | None) -> None:
    # The group coordinator's replay raised an untyped struct.error on such a key.
    with pytest.raises(CorruptRecordError, match="control record's key"):
        marker_type(key)
