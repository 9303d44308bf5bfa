"""`eoslog archive DIR URL` and scans of a log split between the archive and the live directory
(eoslog.archive, eoslog.archive_view; docs/design.md "Tiered storage"), on a local archive
(a `file://` URL): the archive alone scans as a log directory; once retention deletes the
archived segments locally, `scan(dir, archive=url)` equals the whole log's read_committed view,
with no duplicate and no gap at the seam and aborts whose marker lies across it filtered; runs
are idempotent, a run killed mid-copy never shows half a segment and the next completes it, a
scan during a run sees a consistent log, and missing or damaged archived files give the typed
errors local ones give. The same against S3: tests/test_archive_s3.py."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from eoslog import archive, offline
from eoslog.crashpoints import ENV
from eoslog.errors import KafkaException, KafkaStorageError
from eoslog.log import checkpoints
from tests.support import REPO_ROOT, tieredlog
from tests.support.tieredlog import TOPIC, TieredLog, scanned


class Split(NamedTuple):
    path: str  # the live directory (its owner closed), archived segments deleted locally
    url: str  # the archive
    committed: pa.Table  # the whole log's read_committed view, before retention
    uncommitted: pa.Table
    starts: list[int]  # each partition's local log start after retention


def _url(path: str) -> str:
    return "file://" + path


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> Split:
    root = tmp_path_factory.mktemp("split")
    path, url = str(root / "log"), _url(str(root / "archive"))
    # Synced as it is written, so the owner's checkpoints count the .txnindex entries.
    log = TieredLog(path, durability="commit")
    committed, uncommitted = log.view(), log.view("read_uncommitted")
    archive.archive(path, url)
    starts = log.expire()
    log.close()
    return Split(path, url, committed, uncommitted, starts)


def test_the_split_log_has_archived_segments_deleted_locally_and_an_abort_across_the_seam(
    split: Split,
) -> None:
    archived = tieredlog.segment_bases(split.url.removeprefix("file://"), 0)
    local = tieredlog.segment_bases(split.path, 0)
    assert archived[0] == 0 and local[0] == split.starts[0] > 0
    assert set(archived) & set(local), "the archive reaches past the local log start"
    straddling = pc.starts_with(split.uncommitted.column("value").cast(pa.string()), "straddling")
    offset = split.uncommitted.filter(straddling).column("offset")[0].as_py()
    assert offset < split.starts[0], "the aborted data lies in a segment deleted locally"
    # The local directory alone starts at the log start retention left.
    assert scanned(split.path).num_rows < split.committed.num_rows


@pytest.mark.parametrize("isolation_level", ["read_committed", "read_uncommitted"])
def test_scan_of_the_directory_with_its_archive_equals_the_whole_log(
    split: Split, isolation_level: str
) -> None:
    want = split.committed if isolation_level == "read_committed" else split.uncommitted
    tieredlog.check_whole_log(split.path, split.url, want, isolation_level)


def test_records_of_an_abort_whose_marker_lies_past_the_seam_are_filtered(split: Split) -> None:
    values = scanned(split.path, archive=split.url).column("value").to_pylist()
    assert not [value for value in values if value.startswith(tieredlog.STRADDLING)]


def test_offsets_are_contiguous_at_the_seam(split: Split) -> None:
    got = scanned(split.path, isolation_level="read_uncommitted", archive=split.url)
    for partition in range(tieredlog.PARTITIONS):
        offsets = got.filter(pc.equal(got.column("partition"), partition)).column("offset")
        listed = offsets.to_pylist()
        assert listed == sorted(set(listed)), "no duplicate, in order"
        assert any(offset < split.starts[partition] for offset in listed)
        assert any(offset >= split.starts[partition] for offset in listed)


def test_scan_of_the_archive_alone_is_the_log_up_to_its_archived_end(split: Split) -> None:
    got = scanned(split.url, isolation_level="read_uncommitted")
    tieredlog.check_prefix_of_each_partition(got, split.uncommitted)


def test_planned_ranges_carry_the_archive_for_the_readers(split: Split) -> None:
    pairs = offline.list_partitions(split.path, [TOPIC], archive=split.url)
    ranges = offline.plan_ranges(split.path, pairs, archive=split.url)
    assert ranges and all(each.archive == split.url for each in ranges)
    assert ranges[0].start == 0
    read = pa.Table.from_batches(
        [batch for each in ranges for batch in offline.read_range(each)],
        schema=offline.arrow_schema(False),
    )
    assert read.equals(split.committed)


# --- archiving: idempotence, crashes, concurrency ------------------------------------------


class Live(NamedTuple):
    log: TieredLog
    url: str
    committed: pa.Table


@pytest.fixture
def live(tmp_path: Any) -> Iterator[Live]:
    log = TieredLog(str(tmp_path / "log"))
    try:
        yield Live(log, _url(str(tmp_path / "archive")), log.view())
    finally:
        log.close()


def test_a_second_run_copies_nothing(live: Live) -> None:
    first = archive.archive(live.log.path, live.url)
    assert first.segments_copied > 0 and first.objects > first.segments_copied
    second = archive.archive(live.log.path, live.url)
    assert second == archive.ArchiveReport(0, first.segments_copied, 0, 0)


def test_only_closed_segments_below_the_last_stable_offset_are_archived(live: Live) -> None:
    producer = live.log.broker.producer({"transactional.id": "open"})
    producer.init_transactions()
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"open" + b"o" * 900, partition=1)
    producer.flush()
    plain = live.log.broker.producer({"enable.idempotence": True})
    for index in range(30):  # closes the open transaction's segment and more
        plain.produce(TOPIC, value=b"after-%d-" % index + b"a" * 100, partition=1)
        plain.flush()
    archive.archive(live.log.path, live.url)
    archived = tieredlog.segment_bases(live.url.removeprefix("file://"), 1)
    local = tieredlog.segment_bases(live.log.path, 1)
    lso = live.log.broker.log(TOPIC, 1).last_stable_offset
    assert archived == [base for base, end in itertools.pairwise(local) if end <= lso]
    assert len(archived) < len(local) - 1, "closed segments past the LSO stay local"
    producer.abort_transaction()
    plain.close()


def _run_archiver(path: str, url: str, crash_at: int | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    if crash_at is not None:
        env[ENV] = f"archive.copy:{crash_at}"
    return subprocess.run(
        [sys.executable, "-m", "eoslog", "archive", path, url],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _visible_segments_are_whole(source: str, archived: str) -> None:
    """Every segment the archive shows (by its `.log`) is there whole: the `.log` and each
    index file the source has, byte for byte."""
    for partition in range(tieredlog.PARTITIONS):
        folder = f"{TOPIC}-{partition}"
        for base in tieredlog.segment_bases(archived, partition):
            for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                name = os.path.join(folder, f"{base:020d}{suffix}")
                if suffix != ".log" and not os.path.exists(os.path.join(source, name)):
                    continue
                with (
                    open(os.path.join(archived, name), "rb") as copy,
                    open(os.path.join(source, name), "rb") as original,
                ):
                    assert copy.read() == original.read(), name


@pytest.mark.parametrize("crash_at", [1, 2, 3, 5, 8, 13])
def test_an_archiver_killed_mid_copy_leaves_no_half_segment_and_the_next_run_completes(
    live: Live, crash_at: int
) -> None:
    target = live.url.removeprefix("file://")
    killed = _run_archiver(live.log.path, live.url, crash_at)
    assert killed.returncode == -9, killed.stderr
    _visible_segments_are_whole(live.log.path, target)
    if os.path.isdir(os.path.join(target, f"{TOPIC}-0")):
        # What is visible scans as a log (a prefix of it), never a half segment.
        scanned(live.url, isolation_level="read_uncommitted")
    finished = _run_archiver(live.log.path, live.url, None)
    assert finished.returncode == 0, finished.stderr
    _visible_segments_are_whole(live.log.path, target)
    reference = live.url + "-reference"
    report = archive.archive(live.log.path, reference)
    for partition in range(tieredlog.PARTITIONS):
        assert tieredlog.segment_bases(target, partition) == tieredlog.segment_bases(
            reference.removeprefix("file://"), partition
        )
    assert report.segments_copied > 0
    assert archive.archive(live.log.path, live.url).segments_copied == 0
    assert scanned(live.log.path, archive=live.url).equals(live.committed)


def test_scans_during_a_run_see_a_consistent_log(live: Live) -> None:
    def check() -> None:
        assert scanned(live.log.path, archive=live.url).equals(live.committed)

    tieredlog.scans_during(lambda: archive.archive(live.log.path, live.url), check)
    check()


def test_segments_deleted_locally_between_plan_and_read_are_read_from_the_archive(
    live: Live,
) -> None:
    archive.archive(live.log.path, live.url)
    pairs = offline.list_partitions(live.log.path, [TOPIC], archive=live.url)
    ranges = offline.plan_ranges(live.log.path, pairs, archive=live.url)
    live.log.expire()
    read = pa.Table.from_batches(
        [batch for each in ranges for batch in offline.read_range(each)],
        schema=offline.arrow_schema(False),
    )
    assert read.equals(live.committed)


def test_a_run_that_would_leave_a_hole_in_the_archive_copies_nothing(live: Live) -> None:
    archive.archive(live.log.path, live.url)
    producer = live.log.broker.producer({"enable.idempotence": True})

    def write(timestamp: int) -> None:
        for index in range(30):
            producer.produce(
                TOPIC, value=b"z%d-" % index + b"z" * 100, partition=0, timestamp=timestamp
            )
            producer.flush()

    write(live.log.now_ms)
    # Retention deletes segments no run archived; then closed segments follow them.
    live.log.now_ms += 10 * tieredlog.RETENTION_MS
    live.log.broker.run_maintenance()
    write(live.log.now_ms)
    target = live.url.removeprefix("file://")
    before = sorted(os.listdir(os.path.join(target, f"{TOPIC}-0")))
    with pytest.raises(KafkaStorageError, match="hole"):
        archive.archive(live.log.path, live.url)
    assert sorted(os.listdir(os.path.join(target, f"{TOPIC}-0"))) == before
    producer.close()


# --- missing and damaged archived files -----------------------------------------------------


@pytest.mark.parametrize("how", ["missing", "damaged"])
def test_a_missing_or_damaged_archived_segment_gives_the_error_a_local_one_gives(
    split: Split, tmp_path: Any, how: str
) -> None:
    archived = str(tmp_path / "archive")
    shutil.copytree(split.url.removeprefix("file://"), archived)
    local = str(tmp_path / "local")  # the same files as a local log directory
    shutil.copytree(archived, local)
    tieredlog.harm(archived, how)
    tieredlog.harm(local, how)
    want = tieredlog.error_of(lambda: scanned(local))
    assert want is not KafkaException
    assert tieredlog.error_of(lambda: scanned(_url(archived))) is want
    live = str(tmp_path / "live")
    shutil.copytree(split.path, live)
    with pytest.raises(want) as caught:
        scanned(live, archive=_url(archived))
    # It names the archived file read, not only its path in the live directory.
    assert f"was read from the archive: {archived}/{TOPIC}-0/" in str(caught.value)


# --- the log start and the aborted-transaction counts of the split log ----------------------


def test_delete_records_inside_the_local_segments_holds_over_the_archive(live: Live) -> None:
    archive.archive(live.log.path, live.url)
    start = live.log.expire()[0]
    assert live.log.broker.delete_records(TOPIC, 0, start + 2) == start + 2
    got = tieredlog.partition_of(scanned(live.log.path, archive=live.url), 0)
    assert got.column("offset")[0].as_py() >= start + 2
    want = tieredlog.partition_of(live.committed, 0)
    assert got.equals(want.filter(pc.greater_equal(want.column("offset"), start + 2)))
    # Partition 1's archived records below its local log start are still read.
    assert tieredlog.partition_of(scanned(live.log.path, archive=live.url), 1).equals(
        tieredlog.partition_of(live.committed, 1)
    )


def test_delete_records_before_archiving_holds_in_the_archive(live: Live) -> None:
    assert live.log.broker.delete_records(TOPIC, 1, 5) == 5
    archive.archive(live.log.path, live.url)
    live.log.expire()
    for path, archived in ((live.url, None), (live.log.path, live.url)):
        got = tieredlog.partition_of(
            scanned(path, isolation_level="read_uncommitted", archive=archived), 1
        )
        assert got.column("offset")[0].as_py() >= 5


def test_the_archived_txnindex_files_are_believed_through_the_archived_count(
    split: Split,
) -> None:
    local = set(tieredlog.segment_bases(split.path, 0))
    archived_only = [
        base
        for base in tieredlog.segment_bases(split.url.removeprefix("file://"), 0)
        if base not in local
    ]
    fs, root = offline.located(split.path, archive=split.url)
    counts, problem = checkpoints.read_believed_aborted_counts(fs, root)
    assert problem is None
    line = counts[(TOPIC, 0)]
    assert line.covered_to > max(archived_only)
    aborted_in = {base: count for base, count in line.by_segment.items() if base in archived_only}
    assert aborted_in, "some archived-only segment holds .txnindex entries, counted"


def test_a_segment_listed_then_deleted_locally_is_opened_from_the_archive(
    split: Split, tmp_path: Any
) -> None:
    live = str(tmp_path / "live")
    shutil.copytree(split.path, live)
    fs, root = offline.located(live, archive=split.url)
    directory = os.path.join(root, f"{TOPIC}-0")
    base = tieredlog.segment_bases(live, 0)[0]
    name = f"{base:020d}.log"
    assert name in fs.listdir(directory)
    with open(os.path.join(live, f"{TOPIC}-0", name), "rb") as file:
        original = file.read()
    os.unlink(os.path.join(live, f"{TOPIC}-0", name))  # retention, after the listing
    handle = fs.open(os.path.join(directory, name), read_only=True)
    assert handle.pread(len(original) + 1, 0) == original
    handle.close()


def test_an_archived_log_of_another_length_is_refused_and_nothing_more_is_copied(
    live: Live,
) -> None:
    archive.archive(live.log.path, live.url)
    target = live.url.removeprefix("file://")
    base = tieredlog.segment_bases(target, 0)[1]
    os.truncate(os.path.join(target, f"{TOPIC}-0", f"{base:020d}.log"), 10)
    later = tieredlog.segment_bases(target, 0)[2:]
    for each in later:  # would be copied again if the run went on past the refusal
        os.unlink(os.path.join(target, f"{TOPIC}-0", f"{each:020d}.log"))
    with pytest.raises(KafkaStorageError, match="another log under this name"):
        archive.archive(live.log.path, live.url)
    assert tieredlog.segment_bases(target, 0)[2:] == []
