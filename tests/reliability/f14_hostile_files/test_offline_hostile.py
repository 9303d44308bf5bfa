"""eoslog.scan (the offline reader behind plan_ranges/read_range and the Spark source) over
damaged or forged files: it returns exactly what the owner's recovery would see, or raises a
typed error naming the file, never fewer records silently and never an untyped error."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import eoslog
from eoslog._ext import scan as native_scan
from eoslog.errors import CorruptCheckpointError, CorruptRecordError
from eoslog.log import checkpoints
from eoslog.log.segment_reads import LOG_SUFFIX, file_name
from tests.fuzz import seeds
from tests.fuzz.inputs import run_checked
from tests.fuzz.targets import TARGETS

TOPIC = "t"
RECORDS = 30  # one batch each
SEGMENT_BYTES = 1024


def written(path: str, **config: int) -> str:
    """A directory closed cleanly holding RECORDS one-record batches of TOPIC-0 over several
    segments (or as `config` says); returns the partition directory."""
    broker = eoslog.open(path, durability="none")
    try:
        config = {"segment.bytes": SEGMENT_BYTES, **config}
        broker.create_topic(TOPIC, num_partitions=1, config=config)
        producer = broker.producer({})
        for number in range(RECORDS):
            producer.produce(TOPIC, value=b"v%d" % number, partition=0)
            producer.flush()
    finally:
        broker.close()
    return os.path.join(path, f"{TOPIC}-0")


def scanned_offsets(path: str) -> list[int]:
    offsets: list[int] = []
    for batch in eoslog.scan(path, [TOPIC], "read_uncommitted"):
        offsets.extend(batch.column("offset").to_pylist())
    return offsets


def segment_bases(directory: str) -> list[int]:
    return sorted(int(name[:-4]) for name in os.listdir(directory) if name.endswith(LOG_SUFFIX))


def last_log(directory: str) -> str:
    return os.path.join(directory, file_name(segment_bases(directory)[-1], LOG_SUFFIX))


def scanned_values(path: str) -> list[bytes]:
    """The values a read_committed scan returns."""
    values: list[bytes] = []
    for batch in eoslog.scan(path, [TOPIC]):
        values.extend(batch.column("value").to_pylist())
    return values


def batch_starts(log_path: str) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of each batch of a .log."""
    with open(log_path, "rb") as file:
        infos, _, _ = native_scan.scan_batches(file.read(), verify_crc=False)
    return [(int(r["position"]), int(r["size"]), int(r["base_offset"])) for r in infos]


def unclean(path: str, recovery_point: int | None) -> None:
    """Make the directory look like one whose owner died: no clean-shutdown marker, and the
    partition's recovery point as given (None: no entry)."""
    os.unlink(os.path.join(path, checkpoints.CLEAN_SHUTDOWN_FILE))
    entries = {} if recovery_point is None else {(TOPIC, 0): recovery_point}
    with open(os.path.join(path, checkpoints.RECOVERY_POINT_FILE), "wb") as file:
        file.write(checkpoints.encode_offsets(entries))


def owner_offsets(path: str) -> list[int]:
    """What the owner serves after opening (and recovering) the directory."""
    broker = eoslog.open(path, durability="none")
    try:
        consumer = broker.consumer({"isolation.level": "read_uncommitted"})
        consumer.assign([eoslog.TopicPartition(TOPIC, 0, eoslog.OFFSET_BEGINNING)])
        offsets: list[int] = []
        while messages := consumer.consume(1000, timeout=0):
            offsets.extend(message.offset() for message in messages)
        consumer.close()
        return offsets
    finally:
        broker.close()


def write_log_start(path: str, value: int) -> None:
    with open(os.path.join(path, checkpoints.LOG_START_OFFSET_FILE), "wb") as file:
        file.write(checkpoints.encode_offsets({(TOPIC, 0): value}))


# --- the log-start checkpoint ----------------------------------------------------------------


def test_log_start_checkpoint_inside_a_segment_hides_no_record(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path)
    written(path)
    write_log_start(path, RECORDS // 2)
    assert scanned_offsets(path) == list(range(RECORDS))


@pytest.mark.parametrize("value", [RECORDS + 1, (1 << 63) - 1])
def test_log_start_checkpoint_past_the_log_end_is_a_typed_error_naming_the_file(
    tmp_path, value: int
) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path)
    written(path)
    write_log_start(path, value)
    with pytest.raises(CorruptCheckpointError, match=checkpoints.LOG_START_OFFSET_FILE):
        scanned_offsets(path)


# --- the tail ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cut_bytes", [1, 12, 61])
def test_a_torn_tail_after_an_unclean_stop_reads_every_batch_before_it_like_the_owner(
    tmp_path, cut_bytes: int
) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path)
    directory = written(path)
    unclean(path, recovery_point=segment_bases(directory)[-1])
    log_path = last_log(directory)
    os.truncate(log_path, os.path.getsize(log_path) - cut_bytes)
    got = scanned_offsets(path)
    assert got == list(range(RECORDS - 1))
    assert got == owner_offsets(path)


def test_a_torn_last_batch_that_the_last_index_entry_points_at_leaves_the_earlier_ones(
    tmp_path,
) -> None:  # type: ignore[no-untyped-def]
    """An index entry for every batch, one segment: the view used to walk only from the last
    entry, find no whole batch there, and drop the whole segment."""
    path = str(tmp_path)
    directory = written(path, **{"segment.bytes": 1 << 20, "index.interval.bytes": 1})
    assert segment_bases(directory) == [0]
    unclean(path, recovery_point=0)
    log_path = last_log(directory)
    os.truncate(log_path, os.path.getsize(log_path) - 1)
    got = scanned_offsets(path)
    assert got == list(range(RECORDS - 1))
    assert got == owner_offsets(path)


def test_a_garbage_tail_without_a_recovery_point_is_left_out_like_the_owner(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path)
    directory = written(path)
    unclean(path, recovery_point=None)
    with open(last_log(directory), "ab") as file:
        file.write(b"\x00\x00\x00\x00\x00\x00\x00\x1e\x00\x00\x00\x40" + b"\xff" * 20)
    got = scanned_offsets(path)
    assert got == list(range(RECORDS))
    assert got == owner_offsets(path)


def test_a_last_batch_with_a_flipped_base_offset_after_an_unclean_stop_ends_the_view(
    tmp_path,
) -> None:  # type: ignore[no-untyped-def]
    """The base offset is outside the CRC: the owner cuts the batch as a torn tail, and a
    reader must neither stop at its offsets nor serve them."""
    path = str(tmp_path)
    directory = written(path)
    unclean(path, recovery_point=segment_bases(directory)[-1])
    log_path = last_log(directory)
    position = batch_starts(log_path)[-1][0]
    with open(log_path, "r+b") as file:
        file.seek(position)
        file.write((0).to_bytes(8, "big"))
    got = scanned_offsets(path)
    assert got == list(range(RECORDS - 1))
    assert got == owner_offsets(path)


def test_damage_followed_by_a_valid_batch_is_a_typed_error_naming_file_and_byte(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path)
    directory = written(path)
    unclean(path, recovery_point=None)
    log_path = last_log(directory)
    batches = batch_starts(log_path)
    assert len(batches) >= 2
    position, size, _ = batches[-2]
    with open(log_path, "r+b") as file:
        file.seek(position + size - 1)  # the last value byte: the CRC no longer matches
        file.write(b"\xee")
    with pytest.raises(CorruptRecordError, match=f"{log_path} is damaged at byte {position}"):
        scanned_offsets(path)


def test_a_crc_mismatch_in_an_earlier_segment_is_a_typed_error_naming_the_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path)
    directory = written(path)
    log_path = os.path.join(directory, file_name(0, LOG_SUFFIX))
    position, size, _ = batch_starts(log_path)[1]
    with open(log_path, "r+b") as file:
        file.seek(position + size - 1)
        file.write(b"\xee")
    with pytest.raises(CorruptRecordError, match=f"{log_path}, in the batches read from byte"):
        scanned_offsets(path)


def test_a_crc_mismatch_in_a_commit_marker_is_a_typed_error_naming_the_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Control batches are decoded while planning read_committed (the producer-state replay
    and the .txnindex checks): their errors must name the file as well."""
    path = str(tmp_path)
    directory = written(path)
    broker = eoslog.open(path, durability="none")
    try:
        producer = broker.producer({"transactional.id": "hostile"})
        producer.init_transactions()
        producer.begin_transaction()
        producer.produce(TOPIC, value=b"in a transaction", partition=0)
        producer.commit_transaction()
        plain = broker.producer({})
        for number in range(RECORDS):  # the marker ends up inside the log, not at its tail
            plain.produce(TOPIC, value=b"after %d" % number, partition=0)
            plain.flush()
    finally:
        broker.close()
    logs = [
        os.path.join(directory, file_name(base, LOG_SUFFIX)) for base in segment_bases(directory)
    ]
    (log_path, marker), *_ = [
        (log, row)
        for log in logs
        for row in native_scan.scan_batches(Path(log).read_bytes(), verify_crc=False)[0]
        if int(row["attributes"]) & 0x20  # the control bit
    ]
    with open(log_path, "r+b") as file:
        file.seek(int(marker["position"]) + int(marker["size"]) - 1)
        file.write(b"\xee")
    unclean(path, recovery_point=0)
    with pytest.raises(CorruptRecordError, match=log_path):
        list(eoslog.scan(path, [TOPIC]))


def test_a_short_tail_after_a_clean_shutdown_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The directory says it was closed cleanly: everything in it was durable, so a damaged
    end is not a torn tail, and records must not go missing silently."""
    path = str(tmp_path)
    directory = written(path)
    log_path = last_log(directory)
    position = batch_starts(log_path)[-1][0]
    os.truncate(log_path, os.path.getsize(log_path) - 1)
    with pytest.raises(CorruptRecordError, match=f"{log_path} is damaged at byte {position}"):
        scanned_offsets(path)


def test_a_whole_batch_missing_after_a_clean_shutdown_is_refused_by_the_recovery_point(
    tmp_path,
) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path)
    directory = written(path)
    log_path = last_log(directory)
    os.truncate(log_path, batch_starts(log_path)[-1][0])
    with pytest.raises(CorruptCheckpointError, match=checkpoints.RECOVERY_POINT_FILE):
        scanned_offsets(path)


def test_a_torn_tail_below_the_recovery_point_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path)
    directory = written(path)
    unclean(path, recovery_point=RECORDS)
    log_path = last_log(directory)
    os.truncate(log_path, os.path.getsize(log_path) - 1)
    with pytest.raises(CorruptRecordError, match="recovery point"):
        scanned_offsets(path)


# --- segments and strays -----------------------------------------------------------------------


def test_a_segment_copied_under_a_name_past_the_log_end_is_a_typed_error_naming_it(
    tmp_path,
) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path)
    directory = written(path)
    copy = os.path.join(directory, file_name(99_999, LOG_SUFFIX))
    shutil.copyfile(os.path.join(directory, file_name(0, LOG_SUFFIX)), copy)
    with pytest.raises(CorruptRecordError, match=f"{copy} is damaged at byte 0"):
        scanned_offsets(path)


def test_a_directory_named_like_a_segment_is_a_stray(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path)
    directory = written(path)
    os.mkdir(os.path.join(directory, file_name(99_999, LOG_SUFFIX)))
    assert scanned_offsets(path) == list(range(RECORDS))


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_a_directory_in_an_index_place_makes_the_reader_scan_the_log(tmp_path, suffix: str) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path)
    directory = written(path)
    index = os.path.join(directory, file_name(segment_bases(directory)[1], suffix))
    os.unlink(index)
    os.mkdir(index)
    assert scanned_offsets(path) == list(range(RECORDS))


# --- fuzz findings (tests/fuzz/corpus/offline_scan keeps them replayed in CI too) --------------

FINDINGS = {
    # a batch claiming offsets up to int64's maximum: OverflowError from decode_columns
    "decode-columns-overflow": "743433102457763fc12b9cf96b7e0660c22725a1",
    # a reader returned offset 2, then offset 1
    "offsets-backwards": "5a7dd33dec3c685f83f0ce45394b871b0ae39755",
    # bad bytes reached readcommitted.plan_fetch's assertion
    "plan-fetch-assertion": "8632c61418b71498da1de767b116109b7d7ea3d2",
    # a CRC-valid batch whose records repeat an offset: a reader returned offset 4 twice
    "record-offset-repeated": "82c77f434accb310e2634003512ef175ba596990",
    # a control record value of 2 bytes: struct.error from the producer-state replay
    "short-control-value": "9cf203a356acd650dc1dad125c1d2c972a145ff2",
}


@pytest.mark.parametrize("finding", sorted(FINDINGS))
def test_offline_scan_fuzz_finding_replays_to_a_typed_outcome(finding: str) -> None:
    data = (seeds.corpus_dir("offline_scan") / FINDINGS[finding]).read_bytes()
    run_checked(TARGETS["offline_scan"], data)


# --- the transaction index ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "damage", ["emptied", "odd-length", "directory", "last-offset-past-end", "unknown-version"]
)
def test_an_unreadable_txnindex_makes_the_view_derive_aborts_from_the_log(
    tmp_path, damage: str
) -> None:  # type: ignore[no-untyped-def]
    """A .txnindex that does not read whole (emptied, cut inside an entry, a directory in its
    place), whose entry the log contradicts, or whose entry has a version no reader knows is
    not believed: read_committed still hides every aborted record. Regression (hostile-files
    seed 357257324): a version byte of 32 raised CorruptIndexError out of scan, naming no
    file."""
    path = str(tmp_path)
    broker = eoslog.open(path, durability="none")
    try:
        broker.create_topic(TOPIC, num_partitions=1, config={"segment.bytes": SEGMENT_BYTES})
        producer = broker.producer({"transactional.id": "hostile"})
        producer.init_transactions()
        for number in range(24):
            producer.begin_transaction()
            for index in range(3):
                producer.produce(TOPIC, value=b"%d-%d" % (number, index), partition=0)
            producer.flush()  # aborted records reach the log
            if number % 2:
                producer.abort_transaction()
            else:
                producer.commit_transaction()
    finally:
        broker.close()
    want = scanned_values(path)
    assert len(want) == 12 * 3
    damaged = 0
    directory = os.path.join(path, f"{TOPIC}-0")
    for name in sorted(os.listdir(directory)):
        index = os.path.join(directory, name)
        if not name.endswith(".txnindex") or os.path.getsize(index) == 0:
            continue
        if damage == "directory":
            os.unlink(index)
            os.mkdir(index)
        elif damage == "last-offset-past-end":
            # The last entry's last offset (bytes 18-25 of a 34-byte entry) past the log end,
            # where a reader would think the replay of the headers covers it.
            with open(index, "r+b") as file:
                file.seek(os.path.getsize(index) - 34 + 18)
                file.write((1 << 40).to_bytes(8, "big"))
        elif damage == "unknown-version":
            with open(index, "r+b") as file:
                file.write(bytes([32]))  # the first entry's version (int16, first byte read)
        else:
            os.truncate(index, 0 if damage == "emptied" else 20)
        damaged += 1
    assert damaged
    assert scanned_values(path) == want
