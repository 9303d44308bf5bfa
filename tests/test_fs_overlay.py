"""OverlayFileSystem (eoslog.fs_overlay): a directory read from disk with every change kept in
memory. Nothing it does reaches the disk; it sees the disk as of its first look; and a disk
file the owner cuts or deletes under it never crashes a reader."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import eoslog
from eoslog.errors import UnsafePathError
from eoslog.fs import PosixFileSystem
from eoslog.fs_overlay import OverlayFileSystem


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every directory (None) and file (its bytes) below root."""
    found: dict[str, bytes | None] = {}
    for directory, names, files in os.walk(root):
        for name in names:
            found[os.path.relpath(os.path.join(directory, name), root)] = None
        for name in files:
            path = os.path.join(directory, name)
            found[os.path.relpath(path, root)] = Path(path).read_bytes()
    return found


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.log").write_bytes(b"0123456789")
    (tmp_path / "b.txt").write_bytes(b"hello")
    return tmp_path


def test_every_change_is_seen_through_the_overlay_and_none_reaches_the_disk(root: Path) -> None:
    before = _tree(root)
    fs = OverlayFileSystem(str(root))
    handle = fs.open(str(root / "d" / "a.log"))
    handle.pwrite(b"AB", 8)
    handle.pwrite(b"Z", 20)
    assert handle.pread(100, 0) == b"01234567AB" + bytes(10) + b"Z"
    handle.truncate(4)
    assert handle.pread(100, 0) == b"0123" and handle.size() == 4
    new = fs.open(str(root / "d" / "new"), create=True, exclusive=True)
    new.pwrite(b"fresh", 0)
    fs.rename(str(root / "d" / "new"), str(root / "renamed"))
    fs.unlink(str(root / "b.txt"))
    fs.mkdir(str(root / "e"))
    fs.lock(str(root / ".lock")).release()
    assert fs.listdir(str(root)) == [".lock", "d", "e", "renamed"]
    assert fs.list_directories(str(root)) == ["d", "e"]
    assert fs.open(str(root / "renamed")).pread(10, 0) == b"fresh"
    assert not fs.exists(str(root / "b.txt")) and fs.file_size(str(root / "d" / "a.log")) == 4
    with pytest.raises(FileNotFoundError):
        fs.open(str(root / "b.txt"))
    fs.close()
    assert _tree(root) == before


def test_a_writable_mapping_is_a_copy_in_memory(root: Path) -> None:
    fs = OverlayFileSystem(str(root))
    handle = fs.open(str(root / "d" / "a.log"))
    handle.truncate(10 * 1024 * 1024)  # an index preallocated as the owner's active one is
    mapping = handle.map(16)
    mapping[0:2] = b"xy"
    assert handle.pread(4, 0) == b"xy23"
    mapping.release()
    handle.truncate(10)
    assert handle.pread(100, 0) == b"xy23456789"
    handle.truncate(12)  # bytes cut and grown again read as zeros
    assert handle.pread(100, 8) == b"89\0\0"
    assert (root / "d" / "a.log").read_bytes() == b"0123456789"


def test_the_view_is_the_disk_as_first_seen(root: Path) -> None:
    fs = OverlayFileSystem(str(root))
    assert fs.listdir(str(root / "d")) == ["a.log"]
    handle = fs.open(str(root / "d" / "a.log"), read_only=True)
    with (root / "d" / "a.log").open("ab") as appended:
        appended.write(b"later")
    (root / "d" / "b.log").write_bytes(b"new")
    (root / "d" / "c.tmp").write_bytes(b"owner's write in progress")
    os.unlink(root / "d" / "a.log")
    assert handle.size() == 10 and handle.pread(100, 0) == b"0123456789"
    assert fs.open(str(root / "d" / "a.log")).pread(100, 5) == b"56789"
    assert fs.listdir(str(root / "d")) == ["a.log"]
    assert OverlayFileSystem(str(root)).listdir(str(root / "d")) == ["b.log"]


def test_a_disk_file_cut_under_the_view_reads_as_zeros_and_maps_without_a_crash(
    root: Path,
) -> None:
    fs = OverlayFileSystem(str(root))
    handle = fs.open(str(root / "d" / "a.log"), read_only=True)
    os.truncate(root / "d" / "a.log", 3)
    assert handle.pread(100, 0) == b"012" + bytes(7)
    mapping = handle.map_read(10)  # a real mapping of the disk file would SIGBUS here
    assert mapping[:] == b"012" + bytes(7)
    with pytest.raises(TypeError):
        mapping[0] = 1  # type: ignore[index]
    mapping.close()


def test_a_read_only_handle_refuses_writes_as_the_disk_would(root: Path) -> None:
    handle = OverlayFileSystem(str(root)).open(str(root / "b.txt"), read_only=True)
    for call, code in (
        (lambda: handle.pwrite(b"x", 0), errno.EBADF),
        (lambda: handle.truncate(0), errno.EINVAL),
        (lambda: handle.map(1), errno.EACCES),
    ):
        with pytest.raises(OSError) as raised:
            call()
        assert raised.value.errno == code


def test_a_symlink_below_the_root_is_refused(root: Path, tmp_path: Path) -> None:
    (root / "d" / "link.log").symlink_to(root / "b.txt")
    with pytest.raises(UnsafePathError):
        OverlayFileSystem(str(root)).open(str(root / "d" / "link.log"), read_only=True)


def test_a_lock_held_by_the_owner_does_not_stop_the_overlay(root: Path) -> None:
    held = PosixFileSystem(str(root)).lock(str(root / ".lock"))
    try:
        OverlayFileSystem(str(root)).lock(str(root / ".lock")).release()
    finally:
        held.release()


def test_a_broker_opened_on_an_overlay_recovers_in_memory_only(tmp_path: Path) -> None:
    root = tmp_path / "data"
    with eoslog.open(str(root), background=False) as broker:
        broker.create_topic("t", 1)
        producer = broker.producer({"linger.ms": 0})
        producer.produce("t", b"kept")
        producer.flush()
    (root / ".kafka_cleanshutdown").unlink()  # as if killed: recovery runs
    segment = root / "t-0" / "00000000000000000000.log"
    with segment.open("ab") as torn:
        torn.write(b"\x00" * 5)  # a torn tail, which recovery cuts
    before = _tree(root)
    overlay = OverlayFileSystem(str(root))
    view = eoslog.Broker(str(root), fs=overlay, durability="none", background=False)
    try:
        assert view.log("t", 0).high_watermark == 1
        producer = view.producer({"linger.ms": 0})
        producer.produce("t", b"in memory only")
        producer.flush()
        assert view.log("t", 0).high_watermark == 2
    finally:
        view.close()
        overlay.close()
    assert _tree(root) == before


def test_a_file_claiming_100_gib_with_holes_costs_only_its_real_bytes(root: Path) -> None:
    # A sparse (or forged) index claiming 100 GiB: mapping it copies only its data, as the
    # engine's mapping of it on disk costs nothing; the holes read as zeros.
    path = root / "d" / "huge.index"
    with path.open("wb") as huge:
        huge.write(b"head")
        huge.truncate(100 << 30)
    handle = OverlayFileSystem(str(root)).open(str(path))
    mapping = handle.map(0)
    assert len(mapping) == 100 << 30
    assert mapping[:6] == b"head\0\0" and mapping[-1] == 0
    mapping[-1] = 7
    assert handle.pread(1, (100 << 30) - 1) == b"\x07"
    mapping.release()
    read_only = handle.map_read(1 << 30)
    assert read_only[:4] == b"head"
    read_only.close()
    assert path.stat().st_blocks * 512 < 1 << 20  # still sparse on disk: nothing written
