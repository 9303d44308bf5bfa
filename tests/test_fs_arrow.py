"""eoslog.fs_arrow, the read-only file system of object-storage scans, without a server: over
pyarrow's local file system it scans as the local directory does, every write is refused, and
URLs are shown without their secrets (the S3 server tests: tests/test_offline_scan_s3.py)."""

from __future__ import annotations

import errno
import os

import pyarrow.fs as pafs
import pytest

import eoslog
from eoslog import fs_arrow, offline
from tests.support import scanlog


@pytest.fixture(scope="module")
def log_directory(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("arrow-log"))
    with eoslog.open(path, durability="none") as broker:
        scanlog.fill(broker, 5, transactions=12)
    return path


def test_a_scan_through_pyarrows_local_file_system_equals_the_local_scan(
    log_directory: str,
) -> None:
    fs = fs_arrow.ArrowFileSystem(pafs.LocalFileSystem(), "")
    pairs = offline.list_partitions(log_directory, [scanlog.TOPIC], fs=fs)
    ranges = offline.plan_ranges(log_directory, pairs, fs=fs)
    got = scanlog.scanned(b for r in ranges for b in offline.read_range(r, fs=fs))
    want = scanlog.scanned(eoslog.scan(log_directory, [scanlog.TOPIC]))
    assert got.num_rows == want.num_rows > 0
    assert got.equals(want)


def test_a_file_url_scans_the_local_directory(log_directory: str) -> None:
    want = scanlog.scanned(eoslog.scan(log_directory, [scanlog.TOPIC]))
    assert scanlog.scanned(eoslog.scan("file://" + log_directory, [scanlog.TOPIC])).equals(want)


def test_every_write_is_refused_and_changes_nothing(log_directory: str) -> None:
    fs = fs_arrow.ArrowFileSystem(pafs.LocalFileSystem(), "")
    partition = os.path.join(log_directory, f"{scanlog.TOPIC}-0")
    name = fs.listdir(partition)[0]
    target = os.path.join(partition, name)
    before = os.path.getsize(target)
    handle = fs.open(target, read_only=True)
    calls = [
        lambda: fs.open(target),
        lambda: fs.open(target + ".new", create=True, read_only=True),
        lambda: fs.unlink(target),
        lambda: fs.rename(target, target + ".moved"),
        lambda: fs.mkdir(partition + "-x"),
        lambda: fs.lock(target),
        lambda: handle.pwrite(b"x", 0),
        lambda: handle.truncate(0),
    ]
    for call in calls:
        with pytest.raises(OSError) as raised:
            call()
        assert raised.value.errno == errno.EROFS
    assert fs.listdir(partition) == sorted(os.listdir(partition))
    assert os.path.getsize(target) == before


def test_a_missing_object_is_file_not_found_as_locally(log_directory: str) -> None:
    fs = fs_arrow.ArrowFileSystem(pafs.LocalFileSystem(), "")
    missing = os.path.join(log_directory, f"{scanlog.TOPIC}-0", "00000000000000000099.txnindex")
    with pytest.raises(FileNotFoundError):
        fs.open(missing, read_only=True)
    assert not fs.exists(missing)


def test_urls_are_shown_without_credentials_or_options() -> None:
    url = "s3://key:the-secret@bucket/logs/?endpoint_override=127.0.0.1:9&scheme=http"
    assert fs_arrow.display_path(url) == "s3://bucket/logs"
    assert fs_arrow.is_url(url)
    assert not fs_arrow.is_url("data/logs")
    with pytest.raises(ValueError, match="cannot open s3://bucket/logs") as raised:
        fs_arrow.open_url(url + "&no_such_option=1")
    assert "the-secret" not in str(raised.value)
    with pytest.raises(ValueError, match="another host"):
        offline.located("file://elsewhere/data")
