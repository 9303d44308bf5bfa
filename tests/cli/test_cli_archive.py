"""`eoslog archive DIR URL` as a user runs it (docs/api.md "Command line"): it copies the
archivable segments of a directory another process owns without changing a byte of it, says
what it copied, copies nothing the second time, and refuses what is not a log directory or an
archive it cannot open with exit status 2."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import eoslog
from tests.cli.shell import run
from tests.support import scanlog, tieredlog


def _digest(directory: str) -> str:
    digest = hashlib.sha256()
    for folder, _, names in sorted(os.walk(directory)):
        for name in sorted(names):
            digest.update(name.encode())
            with open(os.path.join(folder, name), "rb") as file:
                digest.update(file.read())
    return digest.hexdigest()


def test_archive_of_a_live_directory_copies_its_closed_segments_once(tmp_path: Path) -> None:
    log = tieredlog.TieredLog(str(tmp_path / "log"))  # owned by this process while archived
    try:
        target = str(tmp_path / "archive")
        before = _digest(log.path)
        first = run("archive", log.path, target)
        assert first.returncode == 0, first.stderr
        copied = sum(
            len(tieredlog.segment_bases(target, partition))
            for partition in range(tieredlog.PARTITIONS)
        )
        assert first.stdout.startswith(f"{copied} segments copied, 0 already archived; ")
        assert copied > 0
        assert _digest(log.path) == before, "archive changed the directory it read"
        second = run("archive", log.path, "file://" + target)
        assert second.returncode == 0, second.stderr
        assert second.stdout == (
            f"0 segments copied, {copied} already archived; 0 objects, 0 bytes written\n"
        )
        scanned = scanlog.scanned(eoslog.scan(log.path, [tieredlog.TOPIC], archive=target))
        assert scanned.equals(log.view())
    finally:
        log.close()


def test_archive_refuses_a_path_that_is_no_log_directory_with_status_2(tmp_path: Path) -> None:
    done = run("archive", str(tmp_path / "nothing"), str(tmp_path / "archive"))
    assert done.returncode == 2
    assert done.stderr.startswith("eoslog archive: ") and done.stderr.count("\n") == 1
    assert not (tmp_path / "archive").exists()


def test_archive_refuses_a_url_it_cannot_open_with_status_2(tmp_path: Path) -> None:
    with eoslog.open(str(tmp_path / "log")) as broker:
        broker.create_topic("t", 1)
    done = run("archive", str(tmp_path / "log"), "nosuchscheme://bucket/prefix")
    assert done.returncode == 2, done.stderr
    assert "nosuchscheme" in done.stderr and "Traceback" not in done.stderr


def test_archive_help_says_what_it_copies_and_that_it_only_reads_dir() -> None:
    done = run("archive", "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "wholly below its partition's last stable offset" in text
    assert "Only reads DIR" in text and "archive=URL" in text
