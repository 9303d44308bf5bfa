"""Derived files checked against the log, and offsets checked on every read (issue 12,
deliverables 1 and 2; docs/reliability.md "Derived files are never trusted over the log").

A damaged or forged `.txnindex` entry, producer snapshot or transaction marker must never hide
a committed record from, or show an aborted one to, a read_committed reader: the owner
(consumer) and the offline reader (eoslog.scan) both check what they use against the batch
headers it names. A base offset damaged after a clean shutdown (outside the CRC) must make
every reader raise CorruptRecordError, never deliver a record twice or loop."""

from __future__ import annotations

import os
import struct

import pytest
from kafka.record.util import calc_crc32c

import eoslog
from eoslog.client.fetch import plan_fetch
from eoslog.errors import CorruptRecordError, KafkaException, OutOfOrderSequenceError
from eoslog.fs import PosixFileSystem
from eoslog.log import checkpoints
from eoslog.log.partition_view import PartitionView
from eoslog.log.txn_index import ENTRY_BYTES, AbortedTxn, entry_disagreement
from eoslog.record import codec
from tests.support import logtools
from tests.support.fetch_reference import plan_fetch_reference

TOPIC = "t"
# Three transactions of four records each: committed, aborted, committed (offsets 0-3 and
# marker 4, 5-8 and marker 9, 10-13 and marker 14).
OUTCOMES = (True, False, True)
COMMITTED = [b"0-0", b"0-1", b"0-2", b"0-3", b"2-0", b"2-1", b"2-2", b"2-3"]
# v2 batch header positions (docs/format.md §1.1): the CRC, where the bytes it covers begin, and the
# producer id.
CRC_AT, CRC_FROM, PRODUCER_ID_AT, RECORDS_AT = 17, 21, 43, 61


def transactions(
    path: str,
    outcomes: tuple[bool, ...] = OUTCOMES,
    records: int = 4,
    config: dict[str, object] | None = None,
) -> None:
    """One transaction of `records` records (values b"<transaction>-<record>") per outcome
    (True: committed), in one segment, closed cleanly."""
    broker = eoslog.open(path, durability="none")
    broker.create_topic(TOPIC, num_partitions=1, config=config)
    producer = broker.producer({"transactional.id": "derived"})
    producer.init_transactions()
    for number, commit in enumerate(outcomes):
        producer.begin_transaction()
        for index in range(records):
            producer.produce(TOPIC, value=b"%d-%d" % (number, index), partition=0)
        producer.flush()
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.close()
    broker.close()


def segment_file(path: str, base: int = 0, suffix: str = ".log") -> str:
    return os.path.join(path, f"{TOPIC}-0", f"{base:020d}{suffix}")


def earliest_consumer(
    broker: eoslog.Broker, isolation_level: str, fetch_bytes: int | None = None
) -> eoslog.Consumer:
    config: dict[str, object] = {
        "group.id": "g",
        "isolation.level": isolation_level,
        "auto.offset.reset": "earliest",
    }
    if fetch_bytes is not None:
        config["max.partition.fetch.bytes"] = fetch_bytes
    consumer = broker.consumer(config)
    consumer.assign([eoslog.TopicPartition(TOPIC, 0, 0)])
    return consumer


def consumed(
    path: str, isolation_level: str = "read_committed", fetch_bytes: int | None = None
) -> list[bytes]:
    """Every value a consumer of the reopened directory delivers, in order."""
    broker = eoslog.open(path, durability="none")
    try:
        consumer = earliest_consumer(broker, isolation_level, fetch_bytes)
        values: list[bytes] = []
        while messages := consumer.consume(100, timeout=0.01):
            values.extend(message.value() for message in messages)  # type: ignore[misc]
        consumer.close()
        return values
    finally:
        broker.close()


def scanned(path: str) -> list[bytes]:
    return [value for batch in eoslog.scan(path, [TOPIC]) for value in batch["value"].to_pylist()]


def headers(path: str) -> list[tuple[int, codec.BatchHeader]]:
    return list(codec.iter_headers(logtools.file_bytes(segment_file(path))))


# --- .txnindex --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "byte", "bit"),
    [
        ("producer_id", 7, 0),
        ("first_offset", 7, 2),
        ("first_offset", 7, 0),
        ("last_offset", 7, 0),
        # The sign bit: a negative first offset, which passed as "below the log start, where
        # retention removed the first batch" and hid the producer's committed records
        # (hostile-files soak, random-file .txnindex@10.7).
        ("first_offset", 0, 7),
    ],
)
def test_a_flipped_txnindex_entry_neither_shows_aborted_nor_hides_committed_records(
    tmp_path: os.PathLike[str], field: str, byte: int, bit: int
) -> None:
    path = str(tmp_path)
    transactions(path)
    index = segment_file(path, suffix=".txnindex")
    entry = AbortedTxn.decode(logtools.file_bytes(index))
    assert entry[:3] == (entry.producer_id, 5, 9)
    position = 2 + 8 * AbortedTxn._fields.index(field) + byte  # big-endian: 7 is the low byte
    logtools.flip_bit(index, position, bit)
    assert AbortedTxn.decode(logtools.file_bytes(index)) != entry
    # The offline reader first (the owner's open would rebuild the file), then the owner.
    assert scanned(path) == COMMITTED
    assert consumed(path) == COMMITTED
    assert AbortedTxn.decode(logtools.file_bytes(index)) == entry  # rebuilt from the log


def test_an_entry_is_checked_against_the_abort_marker_and_first_batch_it_names(
    tmp_path: os.PathLike[str],
) -> None:
    path = str(tmp_path)
    transactions(path)
    entry = AbortedTxn.decode(logtools.file_bytes(segment_file(path, suffix=".txnindex")))
    with PartitionView(PosixFileSystem(), os.path.join(path, f"{TOPIC}-0"), TOPIC, 0) as view:
        lookup = view._logged_batch
        assert entry_disagreement(entry, lookup, 0) is None
        commit_marker = entry._replace(last_offset=14)
        assert "no ABORT marker" in str(entry_disagreement(commit_marker, lookup, 0))
        inside_a_batch = entry._replace(first_offset=6)
        assert "starts no transactional batch" in str(entry_disagreement(inside_a_batch, lookup, 0))
        other_producer = entry._replace(producer_id=entry.producer_id + 1)
        assert entry_disagreement(other_producer, lookup, 0) is not None
        late_lso = entry._replace(last_stable_offset=entry.last_offset + 2)
        assert "last stable offset" in str(entry_disagreement(late_lso, lookup, 0))
        # Retention removed the first batch: only the marker can be compared.
        assert entry_disagreement(entry._replace(first_offset=1), lookup, 5) is None
    assert len(AbortedTxn(1, 2, 3, 4).encode()) == ENTRY_BYTES


def test_a_txnindex_cut_inside_its_entry_after_a_clean_shutdown_is_rebuilt_not_believed(
    tmp_path: os.PathLike[str],
) -> None:
    path = str(tmp_path)
    transactions(path)
    index = segment_file(path, suffix=".txnindex")
    entry = logtools.file_bytes(index)
    with open(index, "r+b") as file:
        file.truncate(20)  # the one entry, 34 bytes, loses its tail: a clean log synced it whole
    assert consumed(path) == COMMITTED
    assert logtools.file_bytes(index) == entry  # rebuilt from the log


def test_a_txnindex_emptied_after_a_clean_shutdown_is_rebuilt_not_believed(
    tmp_path: os.PathLike[str],
) -> None:
    path = str(tmp_path)
    transactions(path)
    index = segment_file(path, suffix=".txnindex")
    entry = logtools.file_bytes(index)
    with open(index, "r+b") as file:
        file.truncate(0)  # eoslog never leaves an empty .txnindex: damage, not "no aborts"
    assert consumed(path) == COMMITTED
    assert logtools.file_bytes(index) == entry  # rebuilt from the log


def aborted_counts_line(path: str) -> str:
    lines = logtools.file_bytes(os.path.join(path, checkpoints.ABORTED_TXNS_FILE)).decode()
    return next(line for line in lines.splitlines() if line.startswith(f"{TOPIC} 0 "))


def test_the_aborted_txn_checkpoint_counts_each_segments_entries_below_the_recovery_point(
    tmp_path: os.PathLike[str],
) -> None:
    path = str(tmp_path)
    transactions(path)
    # Closed cleanly: durable to the end (15), one entry in segment 0 (the abort at 9).
    assert aborted_counts_line(path) == f"{TOPIC} 0 15 0=1"


def transactions_with_txnindex_deleted(path: str) -> tuple[str, bytes]:
    """transactions(), closed cleanly, then its one .txnindex deleted: (its path, its bytes)."""
    transactions(path)
    index = segment_file(path, suffix=".txnindex")
    entry = logtools.file_bytes(index)
    os.unlink(index)
    return index, entry


@pytest.mark.parametrize("reader", ["scan", "consumer"])
def test_a_txnindex_deleted_after_a_clean_shutdown_is_rebuilt_not_read_as_no_aborts(
    tmp_path: os.PathLike[str], reader: str
) -> None:
    # Regression (issue 12, a known limit until now): Kafka and eoslog create the .txnindex
    # with a segment's first abort, so a deleted one read as "no aborts" and read_committed
    # readers delivered the aborted transaction's four records.
    path = str(tmp_path)
    index, entry = transactions_with_txnindex_deleted(path)
    if reader == "scan":
        assert scanned(path) == COMMITTED
        assert not os.path.exists(index)  # the offline reader changes nothing
    else:
        assert consumed(path) == COMMITTED
        assert logtools.file_bytes(index) == entry  # rebuilt from the log


@pytest.mark.parametrize("checkpoint", ["deleted", "garbled"])
def test_a_txnindex_lost_with_the_aborted_txn_checkpoint_is_still_rebuilt(
    tmp_path: os.PathLike[str], checkpoint: str
) -> None:
    # Without a count every .txnindex is rebuilt from the log (every segment rescanned), as
    # without a recovery point: the two files lost together still hide the aborted records.
    path = str(tmp_path)
    index, entry = transactions_with_txnindex_deleted(path)
    counts = os.path.join(path, checkpoints.ABORTED_TXNS_FILE)
    if checkpoint == "deleted":
        os.unlink(counts)
    else:
        with open(counts, "ab") as file:
            file.write(b"t 0 zz\n")
    assert scanned(path) == COMMITTED
    broker = eoslog.open(path, durability="none")
    try:
        report = broker.log(TOPIC, 0).recovery_report
        assert report.indexes_rebuilt
        if checkpoint == "garbled":
            assert any(checkpoints.ABORTED_TXNS_FILE in note for note in report.checkpoints_ignored)
        consumer = earliest_consumer(broker, "read_committed")
        values = [m.value() for m in consumer.consume(100, timeout=0.01)]
        consumer.close()
    finally:
        broker.close()
    assert values == COMMITTED
    assert logtools.file_bytes(index) == entry
    assert aborted_counts_line(path) == f"{TOPIC} 0 15 0=1"  # written again


def test_a_txnindex_holding_fewer_entries_than_counted_is_rebuilt(
    tmp_path: os.PathLike[str],
) -> None:
    # Two aborts in one segment; the file keeps only the first entry (whole, so no sanity
    # check fails): the count says two.
    path = str(tmp_path)
    transactions(path, outcomes=(False, False, True), records=1)
    index = segment_file(path, suffix=".txnindex")
    entries = logtools.file_bytes(index)
    assert len(entries) == 2 * ENTRY_BYTES
    with open(index, "r+b") as file:
        file.truncate(ENTRY_BYTES)
    assert scanned(path) == [b"2-0"]
    assert consumed(path) == [b"2-0"]
    assert logtools.file_bytes(index) == entries


# --- offset and time indexes ------------------------------------------------------------------


def test_offset_index_garbage_after_a_clean_shutdown_is_never_read_at_a_negative_position(
    tmp_path: os.PathLike[str],
) -> None:
    path = str(tmp_path)
    transactions(path)
    # Entries of 0xfe bytes read as a negative relative offset and position.
    with open(segment_file(path, suffix=".index"), "wb") as file:
        file.write(b"\xfe" * 24)
    assert consumed(path) == COMMITTED
    assert consumed(path, "read_uncommitted") == [
        b"%d-%d" % (number, index) for number in range(3) for index in range(4)
    ]


def test_an_offset_index_entry_moved_past_the_segment_never_shows_aborted_records(
    tmp_path: os.PathLike[str],
) -> None:
    # Regression (hostile-files seed 144439985): after a clean shutdown the offset index is
    # not checked at open, and a read_committed fetch bounds the aborted transactions it is
    # told about by the first index entry past the bytes it returns. One flipped bit moved
    # the first entry's position past the segment's end, so that entry became the bound of
    # a later fetch, an offset below the fetch itself: no aborted transaction was reported
    # and the aborted records were delivered.
    path = str(tmp_path)
    transactions(path, (True, True, False, True), config={"index.interval.bytes": 1})
    index = segment_file(path, suffix=".index")
    first_position = struct.unpack_from(">i", logtools.file_bytes(index), 4)[0]
    with open(index, "r+b") as file:
        file.seek(4)
        file.write(struct.pack(">i", first_position + os.path.getsize(segment_file(path))))
    committed = [b"%d-%d" % (number, index) for number in (0, 1, 3) for index in range(4)]
    assert consumed(path, fetch_bytes=1) == committed
    assert consumed(path) == committed


# --- markers ----------------------------------------------------------------------------------


def forge_marker_producer(path: str, number: int) -> None:
    """The control batch `number` (in file order) names another producer, its CRC
    recomputed: a forged marker, since the CRC covers the producer id."""
    log = segment_file(path)
    data = bytearray(logtools.file_bytes(log))
    position, header = headers(path)[number]
    assert header.is_control
    struct.pack_into(">q", data, position + PRODUCER_ID_AT, header.producer_id ^ 1)
    covered = bytes(data[position + CRC_FROM : position + header.size_in_bytes])
    struct.pack_into(">I", data, position + CRC_AT, calc_crc32c(covered))
    with open(log, "wb") as file:
        file.write(data)
    assert headers(path)[number][1].producer_id == header.producer_id ^ 1


def forge_marker_type(path: str, number: int) -> None:
    """The control batch `number` (in file order) turned from ABORT to COMMIT or back, its
    CRC recomputed: a forged marker, since the CRC covers the control record's key."""
    log = segment_file(path)
    data = bytearray(logtools.file_bytes(log))
    position, header = headers(path)[number]
    assert header.is_control
    # The control record: five one-byte prefix fields (length, attributes, timestamp and
    # offset deltas, key length), then the key, version int16 0 and type int16 (docs/format.md §3).
    type_at = position + RECORDS_AT + 5 + 3
    assert data[type_at - 3 : type_at - 1] == b"\x00\x00", "control key version 0"
    data[type_at] ^= 1
    covered = bytes(data[position + CRC_FROM : position + header.size_in_bytes])
    struct.pack_into(">I", data, position + CRC_AT, calc_crc32c(covered))
    with open(log, "wb") as file:
        file.write(data)


def test_an_abort_marker_forged_to_commit_is_refused_not_believed_over_the_txnindex(
    tmp_path: os.PathLike[str],
) -> None:
    """The ABORT at 9 forged to a COMMIT: the .txnindex entry and the marker now disagree
    only on the outcome, and either may be the forged file. Believing the marker showed the
    aborted records; the owner refuses to open, naming the entry, and changes nothing."""
    path = str(tmp_path)
    transactions(path)
    assert headers(path)[3][1].base_offset == 9
    forge_marker_type(path, 3)
    before = logtools.contents(path)
    # The offline reader refuses too (it showed txn's aborted records before).
    with pytest.raises(CorruptRecordError, match=r"\.txnindex says producer .* is a COMMIT"):
        scanned(path)
    for attempt in ("clean", "after the refused open took the clean-shutdown marker"):
        with pytest.raises(CorruptRecordError, match=r"entry 0 \(byte 0\).*COMMIT marker"):
            consumed(path)
        after = logtools.contents(path)
        assert after == {k: v for k, v in before.items() if k != ".kafka_cleanshutdown"}, attempt
    # As the message says: with the segment's indexes removed, the owner rescans the segment
    # and believes the log (a user who checked the outcome chose it).
    os.unlink(segment_file(path, suffix=".index"))
    os.unlink(segment_file(path, suffix=".txnindex"))
    assert len(consumed(path)) == 12


def test_a_last_commit_marker_forged_to_abort_is_refused_by_the_coordinators_decision(
    tmp_path: os.PathLike[str],
) -> None:
    """The last COMMIT (offset 14) forged to an ABORT, then a crash: recovery rebuilds the
    .txnindex from the log, so nothing on the partition contradicts the marker, and its
    records (10-13) would be hidden. `__transaction_state` decided that end (the producer
    and the marker's epoch) as a commit including the partition: the open refuses."""
    path = str(tmp_path)
    transactions(path)
    assert headers(path)[5][1].base_offset == 14
    forge_marker_type(path, 5)
    os.unlink(os.path.join(path, ".kafka_cleanshutdown"))
    with pytest.raises(KafkaException, match=r"offset 14 aborts .* records that end as a commit"):
        consumed(path)


def remove_snapshots(path: str) -> None:
    directory = os.path.join(path, f"{TOPIC}-0")
    for name in os.listdir(directory):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(directory, name))


@pytest.mark.parametrize("stop", ["crash", "clean close, snapshots lost"])
@pytest.mark.parametrize(("marker", "offset"), [(1, 4), (5, 14)])
def test_a_forged_commit_marker_never_turns_committed_records_into_aborted_ones(
    tmp_path: os.PathLike[str],
    stop: str,
    marker: int,
    offset: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first COMMIT forged: without the rule the producer's transaction at 0-3 stays
    open in a replay until the ABORT at 9, which then covers it (4 committed records silently
    dropped). The last one forged: its transaction stays open, hiding its records, until the
    owner's coordinator rewrites the COMMIT from `__transaction_state`; the offline reader
    takes the orphan COMMIT at the epoch the end bumped to as that transaction's."""
    path = str(tmp_path)
    transactions(path)
    assert headers(path)[marker][1].base_offset == offset
    forge_marker_producer(path, marker)
    remove_snapshots(path)
    if stop == "crash":
        os.unlink(os.path.join(path, ".kafka_cleanshutdown"))
    assert scanned(path) == COMMITTED
    assert f"COMMIT marker at offset {offset} names producer" in caplog.text
    reported = [r for r in caplog.records if "ends no open transaction" in r.getMessage()]
    assert reported and all(record.levelname == "WARNING" for record in reported)
    assert consumed(path) == COMMITTED
    assert scanned(path) == COMMITTED


def test_a_forged_abort_marker_that_cannot_be_placed_is_an_error_not_a_silent_result(
    tmp_path: os.PathLike[str],
) -> None:
    path = str(tmp_path)
    broker = eoslog.open(path, durability="none")
    broker.create_topic(TOPIC, num_partitions=1)
    producer = broker.producer({"transactional.id": "derived"})
    producer.init_transactions()
    for commit in (False, True):
        producer.begin_transaction()
        producer.produce(TOPIC, value=b"x", partition=0)
        producer.flush()
        producer.commit_transaction() if commit else producer.abort_transaction()
    producer.close()
    broker.close()
    forge_marker_producer(path, 1)
    remove_snapshots(path)
    with pytest.raises(CorruptRecordError, match="has no marker before its next transaction"):
        scanned(path)


# --- producer snapshots -----------------------------------------------------------------------

PID_FIELD, EPOCH_FIELD, SEQUENCE_FIELD = 0, 8, 10  # entry fields (docs/format.md §8.3)


def forge_snapshot(path: str, field: int, fmt: str, value: int) -> None:
    """Set one field of the (single) entry of every snapshot, the CRC recomputed."""
    directory = os.path.join(path, f"{TOPIC}-0")
    snapshots = [name for name in os.listdir(directory) if name.endswith(".snapshot")]
    assert snapshots
    for name in snapshots:
        file = os.path.join(directory, name)
        data = bytearray(logtools.file_bytes(file))
        struct.pack_into(fmt, data, 10 + field, value)
        struct.pack_into(">I", data, 2, calc_crc32c(bytes(data[6:])))
        with open(file, "wb") as out:
            out.write(data)


def idempotent_log(path: str) -> None:
    """Five idempotent batches of 2 records from producer 1000, epoch 0 (offsets 0-9)."""
    broker = eoslog.open(path, durability="none")
    broker.create_topic(TOPIC, num_partitions=1)
    log = broker.log(TOPIC, 0)
    for number in range(5):
        log.append_batch(batch(2 * number))
    producer = log.producer_state.entry(1000)
    assert producer is not None and producer.last_sequence == 9
    broker.close()


def batch(sequence: int, epoch: int = 0) -> bytes:
    builder = codec.BatchBuilder(producer_id=1000, producer_epoch=epoch, base_sequence=sequence)
    for value in logtools.values(sequence, 2):
        assert builder.append(logtools.TS, None, value)
    return builder.build()


@pytest.mark.parametrize(
    ("field", "fmt", "value"),
    [(SEQUENCE_FIELD, ">i", 15), (EPOCH_FIELD, ">h", 3), (PID_FIELD, ">q", 1001)],
)
def test_a_forged_snapshot_is_discarded_and_the_state_rebuilt_from_the_log(
    tmp_path: os.PathLike[str], field: int, fmt: str, value: int
) -> None:
    path = str(tmp_path)
    idempotent_log(path)
    forge_snapshot(path, field, fmt, value)
    broker = eoslog.open(path, durability="none")
    try:
        log = broker.log(TOPIC, 0)
        retry = log.append_batch(batch(8))  # the last batch again: a duplicate, as logged
        assert (retry.base_offset, retry.duplicate) == (8, True)
        assert log.append_batch(batch(10)).base_offset == 10  # the true next sequence
        with pytest.raises(OutOfOrderSequenceError):
            log.append_batch(batch(16))
    finally:
        broker.close()


TXN_FIRST_OFFSET_FIELD = 38


def test_a_snapshot_forging_an_open_transaction_hides_nothing(tmp_path: os.PathLike[str]) -> None:
    """The clean-close snapshot claims the last (committed) transaction is still open: the
    last stable offset would stop at 10 and hide its records from both readers."""
    path = str(tmp_path)
    transactions(path)
    forge_snapshot(path, TXN_FIRST_OFFSET_FIELD, ">q", 10)
    assert scanned(path) == COMMITTED
    assert consumed(path) == COMMITTED


# --- offsets on every read --------------------------------------------------------------------


def test_a_damaged_producer_id_the_snapshot_check_finds_is_an_error_not_a_hidden_transaction(
    tmp_path: os.PathLike[str],
) -> None:
    # Regression (hostile-files soak): a flipped bit in the producer id of a producer's last
    # batch made the snapshot disagree with the log, so the state was rebuilt by a replay of
    # the batch headers (here: the snapshots are gone, the same replay). The replay believed
    # the damaged header: a transaction of a producer that never wrote, without a marker,
    # held the LSO there and a read_committed consumer stopped without an error. The replay
    # now checks the CRC of the batches recovery did not check.
    path = str(tmp_path)
    # Small segments: the damaged batch lies in a rolled one, which a clean open reads only
    # through the replay (the active segment's tail is checked whole).
    transactions(path, (True, True, True), config={"segment.bytes": 300})
    remove_snapshots(path)
    position = [at for at, header in headers(path) if not header.is_control][-1]
    with open(segment_file(path), "r+b") as file:
        file.seek(position + PRODUCER_ID_AT + 5)
        byte = file.read(1)[0]
        file.seek(position + PRODUCER_ID_AT + 5)
        file.write(bytes([byte ^ 0x10]))
    damaged = rf"{TOPIC}-0/0+\.log is damaged at byte {position}"
    with pytest.raises(CorruptRecordError, match=damaged):
        consumed(path)


def many_segments(path: str) -> list[int]:
    """40 single-record batches in segments of 4 batches; the segments' base offsets."""
    broker = eoslog.open(path, durability="none")
    broker.create_topic(
        TOPIC,
        num_partitions=1,
        config={"segment.bytes": 4 * len(logtools.batch([b"v"], base_offset=0)) + 8},
    )
    log = broker.log(TOPIC, 0)
    for offset in range(40):
        log.append_batch(logtools.batch([b"v%d" % offset], base_offset=0))
    segments = [segment.base_offset for segment in log.segments]
    broker.close()
    return segments


def set_base_offset(path: str, segment_base: int, number: int, value: int) -> None:
    log = segment_file(path, segment_base)
    data = logtools.file_bytes(log)
    position = [p for p, _ in codec.iter_headers(data)][number]
    logtools.write_at(log, position, struct.pack(">q", value))


@pytest.mark.parametrize("value", [0, 1, 33, 39])
def test_a_damaged_base_offset_in_a_middle_segment_stops_every_reader(
    tmp_path: os.PathLike[str], value: int
) -> None:
    """After a clean shutdown no open-time check reads a middle segment: the readers must."""
    path = str(tmp_path)
    segments = many_segments(path)
    assert len(segments) >= 5
    middle = segments[len(segments) // 2]
    assert value != middle + 1
    set_base_offset(path, middle, 1, value)
    with pytest.raises(CorruptRecordError, match=f"{middle:020d}.log"):
        scanned(path)
    for isolation_level in ("read_committed", "read_uncommitted"):
        broker = eoslog.open(path, durability="none")
        try:
            consumer = broker.consumer(
                {
                    "group.id": "g",
                    "isolation.level": isolation_level,
                    "auto.offset.reset": "earliest",
                }
            )
            consumer.assign([eoslog.TopicPartition(TOPIC, 0, 0)])
            offsets: list[int] = []
            with pytest.raises(CorruptRecordError):
                for _ in range(100):
                    offsets.extend(m.offset() for m in consumer.consume(7, timeout=0.01))  # type: ignore[misc]
            assert offsets == list(range(len(offsets)))  # never backwards, never twice
            assert offsets[-1] < middle + 2
            consumer.assign([eoslog.TopicPartition(TOPIC, 0, 0)])
            with pytest.raises(CorruptRecordError):
                for _ in range(100):
                    consumer.consume_arrow(1000, timeout=0.01)
        finally:
            broker.close()


def test_a_last_batch_whose_base_offset_reads_zero_is_refused_at_open_and_by_scan(
    tmp_path: os.PathLike[str],
) -> None:
    """The log end used to come out at 1 while the first batch ends at 3: the consumer
    delivered 0..3, fell past the end, reset to the start and delivered them again forever.
    The clean open's tail check now refuses the log (everything was durable, so this is
    damage, not a torn tail), and the offline reader refuses it too."""
    path = str(tmp_path)
    transactions(path)
    set_base_offset(path, 0, len(headers(path)) - 1, 0)
    with pytest.raises(CorruptRecordError, match=r"\.log is damaged at byte"):
        eoslog.open(path, durability="none")
    with pytest.raises(CorruptRecordError):
        scanned(path)


def fetch_of(*bases_and_counts: tuple[int, int]) -> bytes:
    return b"".join(
        logtools.batch(logtools.values(base, count), base_offset=base)
        for base, count in bases_and_counts
    )


@pytest.mark.parametrize("plan", [plan_fetch, plan_fetch_reference])
@pytest.mark.parametrize(
    ("records", "fetch_offset"),
    [
        (fetch_of((0, 3), (3, 2), (1, 2)), 0),  # goes backwards
        (fetch_of((0, 3), (2, 2)), 0),  # overlaps
        (fetch_of((0, 3), (3, 2)), 7),  # ends below it
    ],
)
def test_a_fetch_whose_batches_break_the_offset_order_raises(
    plan: object, records: bytes, fetch_offset: int
) -> None:
    with pytest.raises(CorruptRecordError, match="out of order"):
        plan(records, fetch_offset, [])  # type: ignore[operator]


@pytest.mark.parametrize("plan", [plan_fetch, plan_fetch_reference])
def test_a_fetch_from_inside_a_gap_plans_from_the_next_batch(plan: object) -> None:
    # A compacted log's gap (Kafka's rule: the next batch after it); where a log has no
    # gaps, the partition's read refuses such a batch before any plan (segment.read).
    found = plan(fetch_of((5, 3)), 2, None)  # type: ignore[operator]
    assert (found.next_offset, found.records) == (8, 3)


@pytest.mark.parametrize("plan", [plan_fetch, plan_fetch_reference])
def test_a_fetch_in_order_plans_as_before(plan: object) -> None:
    found = plan(fetch_of((0, 3), (3, 2), (5, 1)), 1, None)  # type: ignore[operator]
    assert (found.next_offset, found.records) == (6, 5)


def test_a_damaged_base_offset_of_the_last_offsets_batch_never_rolls_a_commit_back(
    tmp_path: os.PathLike[str],
) -> None:
    """Offsets 20 then 30 committed; the second record's batch base offset damaged after a
    clean shutdown. The group coordinator's replay used to stop before it (the log end was
    taken from the damaged batch) and report 20."""
    path = str(tmp_path)
    broker = eoslog.open(path, durability="none")
    broker.create_topic(TOPIC, num_partitions=1)
    consumer = broker.consumer({"group.id": "g"})
    for offset in (20, 30):
        consumer.commit(offsets=[eoslog.TopicPartition(TOPIC, 0, offset)], asynchronous=False)
    consumer.close()
    broker.close()
    damaged = []
    for directory in os.listdir(path):
        if directory.startswith("__consumer_offsets-"):
            log = os.path.join(path, directory, f"{0:020d}.log")
            found = list(codec.iter_headers(logtools.file_bytes(log)))
            if len(found) == 2:
                logtools.write_at(log, found[1][0], struct.pack(">q", 0))
                damaged.append(log)
    assert len(damaged) == 1
    with pytest.raises(CorruptRecordError, match=os.path.basename(damaged[0])):
        reopened = eoslog.open(path, durability="none")
        try:
            committed = reopened.consumer({"group.id": "g"}).committed(
                [eoslog.TopicPartition(TOPIC, 0)]
            )
            assert committed[0].offset == 30
        finally:
            reopened.close()


@pytest.mark.parametrize("arrow", [False, True])
def test_a_consumer_never_moves_backwards_even_when_a_fetch_does(
    tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch, arrow: bool
) -> None:
    """Whatever a fetch returns, the consumer's own check (plan_fetch) refuses batches out of
    offset order, naming the partition: here every fetch ends with offset 0 again."""
    broker = eoslog.open(str(tmp_path), durability="none")
    try:
        broker.create_topic(TOPIC, num_partitions=1)
        log = broker.log(TOPIC, 0)
        for offset in range(5):
            log.append_batch(logtools.batch([b"v%d" % offset], base_offset=0))
        read = log.read

        def backwards(offset: int, *args: object) -> object:
            result = read(offset, *args)  # type: ignore[arg-type]
            again = logtools.batch([b"again"], base_offset=0)
            return result._replace(records=memoryview(bytes(result.records) + again))

        monkeypatch.setattr(log, "read", backwards)
        consumer = earliest_consumer(broker, "read_committed")
        with pytest.raises(
            CorruptRecordError, match=rf"{TOPIC}-0/.*\.log at byte .*do not follow offset 4"
        ):
            if arrow:
                consumer.consume_arrow(100, timeout=0.01)
            else:
                consumer.consume(100, timeout=0.01)
        consumer.close()
    finally:
        broker.close()
