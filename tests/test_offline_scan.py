"""eoslog.scan: a read-only, lock-free reader of a log directory (docs/api.md "Offline scans"). Its
read_committed view must equal the embedded Consumer's record for record, from the files
alone, while the owner keeps the directory open or keeps writing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import eoslog
from eoslog import offline
from eoslog.errors import KafkaStorageError, OffsetOutOfRangeError
from eoslog.fs import PosixFileSystem
from eoslog.log.offset_index import OffsetIndex
from eoslog.log.partition_view import PartitionView
from eoslog.log.time_index import TimeIndex
from tests.support import REPO_ROOT, scanlog

SEED = int(os.environ.get("EOSLOG_SCAN_SEED", "7"))


@pytest.fixture
def owned(tmp_path):  # type: ignore[no-untyped-def]
    print(f"seed {SEED} (EOSLOG_SCAN_SEED replays)")
    broker = eoslog.open(str(tmp_path), durability="none")
    _, base = scanlog.fill(broker, SEED)
    yield str(tmp_path), broker, base
    broker.close()


def test_read_committed_scan_equals_consumer_with_open_transaction_at_tail(owned) -> None:  # type: ignore[no-untyped-def]
    path, broker, _ = owned
    assert any(len(broker.log(scanlog.TOPIC, p).segments) > 2 for p in range(scanlog.PARTITIONS))
    open_log = broker.log(scanlog.TOPIC, 0)
    assert open_log.last_stable_offset < open_log.log_end_offset  # the tail transaction
    want = scanlog.consumer_view(broker, include_headers=True)
    got = scanlog.scanned(eoslog.scan(path, [scanlog.TOPIC], include_headers=True), True)
    assert got.num_rows == want.num_rows > 0
    assert got.equals(want)
    assert b"open" not in got.column("value").to_pylist()
    assert b"after-open" not in got.column("value").to_pylist()


def test_read_uncommitted_scan_equals_consumer(owned) -> None:  # type: ignore[no-untyped-def]
    path, broker, _ = owned
    want = scanlog.consumer_view(broker, "read_uncommitted")
    got = scanlog.scanned(eoslog.scan(path, [scanlog.TOPIC], "read_uncommitted"))
    assert got.equals(want)
    assert b"open" in got.column("value").to_pylist()


def test_view_lso_and_end_match_the_owner(owned) -> None:  # type: ignore[no-untyped-def]
    path, broker, _ = owned
    for partition in range(scanlog.PARTITIONS):
        log = broker.log(scanlog.TOPIC, partition)
        directory = os.path.join(path, f"{scanlog.TOPIC}-{partition}")
        with PartitionView(PosixFileSystem(), directory, scanlog.TOPIC, partition) as view:
            assert view.log_end_offset == log.log_end_offset
            assert view.last_stable_offset == log.last_stable_offset


def test_offset_range_equals_consumer_from_that_offset(owned) -> None:  # type: ignore[no-untyped-def]
    path, broker, _ = owned
    starts = {p: broker.log(scanlog.TOPIC, p).log_end_offset // 3 for p in range(3)}
    ends = {p: 2 * broker.log(scanlog.TOPIC, p).log_end_offset // 3 for p in range(3)}
    spec = {scanlog.TOPIC: {str(p): o for p, o in starts.items()}}
    end_spec = {scanlog.TOPIC: {str(p): o for p, o in ends.items()}}
    got = scanlog.scanned(
        eoslog.scan(path, [scanlog.TOPIC], start_offsets=spec, end_offsets=end_spec)
    )
    want = scanlog.consumer_view(broker, start=starts)
    mask = pc.less(
        want.column("offset"),
        pa.array([ends[p] for p in want.column("partition").to_pylist()], pa.int64()),
    )
    assert got.equals(want.filter(mask))
    assert got.num_rows > 0


def test_timestamp_range_uses_the_first_record_at_or_after_each_bound(owned) -> None:  # type: ignore[no-untyped-def]
    path, broker, base = owned
    low, high = base + 10_000, base + 30_000
    got = scanlog.scanned(
        eoslog.scan(path, [scanlog.TOPIC], start_timestamp=low, end_timestamp=high)
    )
    starts, ends = {}, {}
    for p in range(scanlog.PARTITIONS):
        log = broker.log(scanlog.TOPIC, p)
        starts[p] = (log.offset_for_timestamp(low) or (log.last_stable_offset,))[0]
        ends[p] = (log.offset_for_timestamp(high) or (log.last_stable_offset,))[0]
    want = scanlog.consumer_view(broker, start=starts)
    mask = pc.less(
        want.column("offset"),
        pa.array([ends[p] for p in want.column("partition").to_pylist()], pa.int64()),
    )
    assert got.num_rows > 0
    assert got.equals(want.filter(mask))


def test_active_index_zeroed_slots_are_not_entries(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fs = PosixFileSystem()
    writer = OffsetIndex(fs, str(tmp_path / "a.index"), 100, max_index_bytes=800)
    writer.append(110, 4096)
    writer.append(120, 8192)
    writer.flush()
    reader = OffsetIndex(fs, writer.path, 100, writable=False)
    assert reader.entries == 2
    assert reader.lookup(1 << 40) == (120, 8192)
    times = TimeIndex(fs, str(tmp_path / "a.timeindex"), 100, max_index_bytes=1200)
    times.maybe_append(5000, 110)
    times.maybe_append(6000, 120)
    times.flush()
    assert TimeIndex(fs, times.path, 100, writable=False).entries == 2
    missing = OffsetIndex(fs, str(tmp_path / "none.index"), 0, writable=False, missing_ok=True)
    assert missing.entries == 0


def test_scan_takes_no_lock_and_writes_nothing(owned) -> None:  # type: ignore[no-untyped-def]
    path, _, _ = owned
    before = {
        os.path.join(root, name): os.stat(os.path.join(root, name)).st_mtime_ns
        for root, _, names in os.walk(path)
        for name in names
    }
    assert sum(batch.num_rows for batch in eoslog.scan(path, [scanlog.TOPIC])) > 0
    after = {
        os.path.join(root, name): os.stat(os.path.join(root, name)).st_mtime_ns
        for root, _, names in os.walk(path)
        for name in names
    }
    assert after == before


def test_unknown_topic_raises_typed_error(owned) -> None:  # type: ignore[no-untyped-def]
    path, _, _ = owned
    with pytest.raises(eoslog.UnknownTopicOrPartitionError):
        list(eoslog.scan(path, ["missing"]))
    with pytest.raises(ValueError):
        list(eoslog.scan(path, [scanlog.TOPIC], isolation_level="dirty"))


WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[3])
    import eoslog
    from tests.support import scanlog
    broker = eoslog.open(sys.argv[1], durability="none")
    for round in range(int(sys.argv[2])):
        tail, _ = scanlog.fill(broker, 1000 + round, transactions=15)
        tail.abort_transaction()
    broker.close()
    """
)


def test_scans_while_a_subprocess_writes_are_prefixes_of_the_final_view(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path)
    eoslog.open(path).close()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, path, "12", REPO_ROOT])
    seen = []
    try:
        while writer.poll() is None:
            if os.path.isdir(os.path.join(path, f"{scanlog.TOPIC}-0")):
                seen.append(scanlog.scanned(eoslog.scan(path, [scanlog.TOPIC])))
    finally:
        assert writer.wait(timeout=120) == 0
    with eoslog.open(path) as broker:
        final = scanlog.consumer_view(broker)
    assert len(seen) >= 2
    for table in seen:
        for partition in range(scanlog.PARTITIONS):
            mine = table.filter(pc.equal(table.column("partition"), partition))
            whole = final.filter(pc.equal(final.column("partition"), partition))
            assert mine.equals(whole.slice(0, mine.num_rows))
            offsets = mine.column("offset").to_numpy()
            assert np.all(np.diff(offsets) > 0)


def test_retention_between_plan_and_read_fails_or_skips_the_lost_records(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Kafka's Spark source's failOnDataLoss: records planned, then deleted by the owner's
    retention before the read, fail the read (OffsetOutOfRangeError) by default, or are
    skipped with fail_on_data_loss=False; a range planned above the new log start reads."""
    retained = scanlog.RetainedLog(str(tmp_path))
    topic = retained.TOPIC
    try:
        (whole,) = offline.plan_ranges(str(tmp_path), [(topic, 0)])
        late = offline.plan_ranges(str(tmp_path), [(topic, 0)], start_offsets=retained.RECORDS - 10)
        assert whole.start == 0 and whole.stop == retained.RECORDS
        log_start = retained.expire()
        with pytest.raises(OffsetOutOfRangeError, match="retention deleted"):
            next(offline.read_range(whole))
        skipped = scanlog.scanned(offline.read_range(whole, fail_on_data_loss=False))
        assert skipped.column("offset").to_pylist() == list(range(log_start, retained.RECORDS))
        assert skipped.column("value")[0].as_py().startswith(b"r%d-" % log_start)
        (kept,) = late
        tail = scanlog.scanned(offline.read_range(kept))
        assert tail.column("offset").to_pylist() == list(range(kept.start, retained.RECORDS))
        replanned = scanlog.scanned(eoslog.scan(str(tmp_path), [topic]))
        assert replanned.equals(skipped)  # a fresh plan starts at the new log start
    finally:
        retained.broker.close()


def test_a_scan_of_a_path_with_no_log_directory_is_a_typed_error_naming_it(
    tmp_path: os.PathLike[str],
) -> None:
    # It raised a bare FileNotFoundError (the README's scan example, run in a fresh directory).
    missing = os.path.join(tmp_path, "data")
    with pytest.raises(KafkaStorageError, match=r"no log directory at .*data"):
        list(eoslog.scan(missing, ["orders"]))
