"""The fs seam's contract (eoslog.fs) and its twin's power-loss and fault model (eoslog.fs_twin).

Part 1 runs one conformance suite against PosixFileSystem (in tmp_path) and against
RecordingFileSystem: the twin behaves as the OS does, errno for errno. Part 2 checks the twin's
crash images (docs/reliability.md family 3) and part 3 its injected faults (family 5). Every loop
over seeds names the seed in its failure message, and Hypothesis prints its falsifying example, so
every failure replays.
"""

from __future__ import annotations

import errno
import mmap
import os
import random
import re
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eoslog.fs
from eoslog.errors import UnsafePathError
from eoslog.fs import (
    DIRECTORY_FDS_MAX,
    FileHandle,
    FileSystem,
    PosixFileSystem,
    create_temporary,
)
from eoslog.fs_twin import RecordingFileSystem

CRASH_SEEDS = range(200)


@dataclass(frozen=True)
class Place:
    """A file system under test and an empty directory in it to work in."""

    fs: FileSystem
    root: str

    def path(self, *names: str) -> str:
        return os.path.join(self.root, *names)


@pytest.fixture(params=["posix", "twin"])
def place(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> Place:
    if request.param == "posix":
        return Place(PosixFileSystem(), os.fspath(tmp_path))
    twin = RecordingFileSystem(seed=0)
    twin.makedirs("/conformance")
    return Place(twin, "/conformance")


def write_file(fs: FileSystem, path: str, content: bytes) -> None:
    handle = fs.open(path, create=True)
    handle.pwrite(content, 0)
    handle.close()


def read_file(fs: FileSystem, path: str) -> bytes:
    handle = fs.open(path, read_only=True)
    try:
        return handle.pread(handle.size(), 0)
    finally:
        handle.close()


def unmap(mapping: mmap.mmap | memoryview) -> None:
    if isinstance(mapping, mmap.mmap):
        mapping.close()
    else:
        mapping.release()


def raises_errno(code: int, call: Callable[[], object]) -> OSError:
    with pytest.raises(OSError) as caught:
        call()
    assert caught.value.errno == code, caught.value
    return caught.value


# -- 1. conformance: the twin behaves as PosixFileSystem --------------------------------------


def test_open_missing_file_without_create_raises_file_not_found(place: Place) -> None:
    with pytest.raises(FileNotFoundError):
        place.fs.open(place.path("missing"))
    assert not place.fs.exists(place.path("missing"))


def test_open_with_create_makes_an_empty_file_in_its_directory(place: Place) -> None:
    handle = place.fs.open(place.path("new"), create=True)
    assert handle.path == place.path("new")
    assert handle.size() == 0
    handle.close()
    assert place.fs.exists(place.path("new"))
    assert place.fs.file_size(place.path("new")) == 0
    assert place.fs.listdir(place.root) == ["new"]


def test_pwrite_then_pread_round_trips_and_pread_stops_at_end_of_file(place: Place) -> None:
    handle = place.fs.open(place.path("f"), create=True)
    handle.pwrite(b"hello world", 0)
    handle.pwrite(memoryview(b"WORLD"), 6)
    assert handle.pread(5, 0) == b"hello"
    assert handle.pread(100, 6) == b"WORLD"
    assert handle.pread(10, 11) == b""
    assert handle.pread(10, 500) == b""
    assert handle.pread(0, 0) == b""
    assert handle.size() == place.fs.file_size(place.path("f")) == 11
    handle.close()


def test_pwrite_writes_the_bytes_of_any_contiguous_buffer(place: Place) -> None:
    # The real handle's pwrite is native (eoslog._ext.posix_file): it takes what the log
    # hands it (bytes, bytearray, memoryview slices, mmap views, numpy arrays) byte for byte.
    handle = place.fs.open(place.path("f"), create=True)
    handle.pwrite(np.array([1, 2], dtype=">i4"), 0)
    handle.pwrite(bytearray(b"xyz")[1:], 8)
    handle.pwrite(memoryview(b"..tail..")[2:6], 10)
    assert handle.pread(100, 0) == b"\0\0\0\x01\0\0\0\x02yztail"
    handle.close()


def test_pwrite_past_end_zero_fills_the_gap(place: Place) -> None:
    handle = place.fs.open(place.path("f"), create=True)
    handle.pwrite(b"ab", 0)
    handle.pwrite(b"z", 6)
    assert handle.pread(100, 0) == b"ab\0\0\0\0z"
    handle.pwrite(b"", 100)  # writing nothing does not extend the file
    assert handle.size() == 7
    handle.close()


def test_truncate_shrinks_and_zero_extends(place: Place) -> None:
    handle = place.fs.open(place.path("f"), create=True)
    handle.pwrite(b"abcdef", 0)
    handle.truncate(2)
    assert handle.pread(100, 0) == b"ab"
    handle.truncate(5)
    assert handle.pread(100, 0) == b"ab\0\0\0"
    raises_errno(errno.EINVAL, lambda: handle.truncate(-1))
    handle.close()


def test_negative_offsets_are_invalid(place: Place) -> None:
    handle = place.fs.open(place.path("f"), create=True)
    raises_errno(errno.EINVAL, lambda: handle.pwrite(b"x", -1))
    raises_errno(errno.EINVAL, lambda: handle.pread(1, -1))
    handle.close()


def test_writes_through_one_handle_are_visible_through_another(place: Place) -> None:
    writer = place.fs.open(place.path("f"), create=True)
    reader = place.fs.open(place.path("f"), read_only=True)
    writer.pwrite(b"shared", 0)
    assert reader.pread(6, 0) == b"shared"
    writer.close()
    reader.close()


def test_an_open_handle_keeps_its_file_after_unlink(place: Place) -> None:
    handle = place.fs.open(place.path("f"), create=True)
    handle.pwrite(b"still here", 0)
    place.fs.unlink(place.path("f"))
    assert not place.fs.exists(place.path("f"))
    assert handle.pread(100, 0) == b"still here"
    handle.close()


def test_read_only_handle_refuses_to_write(place: Place) -> None:
    write_file(place.fs, place.path("f"), b"abc")
    handle = place.fs.open(place.path("f"), read_only=True)
    raises_errno(errno.EBADF, lambda: handle.pwrite(b"x", 0))
    raises_errno(errno.EINVAL, lambda: handle.truncate(0))
    with pytest.raises(PermissionError):
        handle.map(3)
    handle.sync()  # fdatasync needs no write access
    assert handle.pread(3, 0) == b"abc"
    handle.close()


def test_closed_handle_raises_bad_file_descriptor_and_closes_twice(place: Place) -> None:
    handle = place.fs.open(place.path("f"), create=True)
    handle.close()
    raises_errno(errno.EBADF, lambda: handle.pread(1, 0))
    raises_errno(errno.EBADF, handle.size)
    with pytest.raises(ValueError, match="negative"):
        handle.sync()  # os.fdatasync checks the descriptor before the OS sees it
    assert handle.pread(0, 0) == b""
    handle.pwrite(b"", 0)  # an empty write makes no system call, so it cannot fail
    handle.close()


def test_rename_replaces_the_target(place: Place) -> None:
    write_file(place.fs, place.path("source"), b"new")
    write_file(place.fs, place.path("target"), b"old content")
    place.fs.rename(place.path("source"), place.path("target"))
    assert place.fs.listdir(place.root) == ["target"]
    assert read_file(place.fs, place.path("target")) == b"new"
    place.fs.rename(place.path("target"), place.path("target"))  # onto itself: nothing happens
    assert read_file(place.fs, place.path("target")) == b"new"


def test_rename_moves_a_directory_with_its_entries(place: Place) -> None:
    place.fs.mkdir(place.path("a"))
    write_file(place.fs, place.path("a", "f"), b"inside")
    place.fs.mkdir(place.path("empty"))
    place.fs.rename(place.path("a"), place.path("empty"))  # an empty directory is replaced
    assert place.fs.listdir(place.root) == ["empty"]
    assert read_file(place.fs, place.path("empty", "f")) == b"inside"


def test_rename_errors(place: Place) -> None:
    fs, path = place.fs, place.path
    fs.mkdir(path("dir"))
    write_file(fs, path("dir", "f"), b"x")
    fs.mkdir(path("other"))
    write_file(fs, path("file"), b"y")
    with pytest.raises(FileNotFoundError):
        fs.rename(path("missing"), path("anything"))
    with pytest.raises(FileNotFoundError):
        fs.rename(path("file"), path("no", "such", "dir"))
    with pytest.raises(IsADirectoryError):
        fs.rename(path("file"), path("dir"))
    with pytest.raises(NotADirectoryError):
        fs.rename(path("other"), path("file"))
    raises_errno(errno.ENOTEMPTY, lambda: fs.rename(path("other"), path("dir")))
    raises_errno(errno.EINVAL, lambda: fs.rename(path("dir"), path("dir", "inside")))
    assert fs.listdir(place.root) == ["dir", "file", "other"]


def test_unlink(place: Place) -> None:
    write_file(place.fs, place.path("f"), b"x")
    place.fs.mkdir(place.path("d"))
    place.fs.unlink(place.path("f"))
    assert place.fs.listdir(place.root) == ["d"]
    with pytest.raises(FileNotFoundError):
        place.fs.unlink(place.path("f"))
    with pytest.raises(IsADirectoryError):
        place.fs.unlink(place.path("d"))


def test_listdir_is_sorted_and_needs_a_directory(place: Place) -> None:
    for name in ["b", "a", "c10", "c9", "B"]:
        write_file(place.fs, place.path(name), b"")
    place.fs.mkdir(place.path("dir"))
    assert place.fs.listdir(place.root) == ["B", "a", "b", "c10", "c9", "dir"]
    assert place.fs.listdir(place.path("dir")) == []
    with pytest.raises(NotADirectoryError):
        place.fs.listdir(place.path("a"))
    with pytest.raises(FileNotFoundError):
        place.fs.listdir(place.path("missing"))


def test_mkdir_errors(place: Place) -> None:
    place.fs.mkdir(place.path("d"))
    write_file(place.fs, place.path("f"), b"")
    with pytest.raises(FileExistsError):
        place.fs.mkdir(place.path("d"))
    with pytest.raises(FileExistsError):
        place.fs.mkdir(place.path("f"))
    with pytest.raises(FileExistsError):
        place.fs.mkdir("/")
    with pytest.raises(FileNotFoundError):
        place.fs.mkdir(place.path("missing", "d"))
    with pytest.raises(NotADirectoryError):
        place.fs.mkdir(place.path("f", "d"))


def test_rmdir_removes_only_an_empty_directory(place: Place) -> None:
    place.fs.mkdir(place.path("d"))
    write_file(place.fs, place.path("d", "f"), b"")
    write_file(place.fs, place.path("f"), b"")
    raises_errno(errno.ENOTEMPTY, lambda: place.fs.rmdir(place.path("d")))
    with pytest.raises(NotADirectoryError):
        place.fs.rmdir(place.path("f"))
    with pytest.raises(FileNotFoundError):
        place.fs.rmdir(place.path("missing"))
    place.fs.unlink(place.path("d", "f"))
    place.fs.rmdir(place.path("d"))
    assert place.fs.listdir(place.root) == ["f"]


def test_a_path_through_a_file_is_not_a_directory(place: Place) -> None:
    write_file(place.fs, place.path("f"), b"")
    with pytest.raises(NotADirectoryError):
        place.fs.open(place.path("f", "x"), create=True)
    with pytest.raises(FileNotFoundError):
        place.fs.open(place.path("missing", "x"), create=True)


def test_opening_a_directory_as_a_file_is_a_directory_error(place: Place) -> None:
    place.fs.mkdir(place.path("d"))
    for call in (
        lambda: place.fs.open(place.path("d")),
        lambda: place.fs.open(place.path("d"), create=True),
        lambda: place.fs.open(place.path("d"), read_only=True),
    ):
        with pytest.raises(IsADirectoryError):
            call()


def test_sync_and_sync_dir(place: Place) -> None:
    handle = place.fs.open(place.path("f"), create=True)
    handle.pwrite(b"x", 0)
    handle.sync()
    handle.close()
    place.fs.sync_dir(place.root)
    with pytest.raises(NotADirectoryError):
        place.fs.sync_dir(place.path("f"))
    with pytest.raises(FileNotFoundError):
        place.fs.sync_dir(place.path("missing"))


def test_lock_is_exclusive_until_released(place: Place) -> None:
    # flock locks open file descriptions, so two opens in one process do conflict on Linux
    # (checked on the posix run of this test): no subprocess is needed to see the exclusion.
    lock_path = place.path("LOCK")
    first = place.fs.lock(lock_path)
    assert place.fs.exists(lock_path)
    with pytest.raises(BlockingIOError) as caught:
        place.fs.lock(lock_path)
    assert caught.value.errno == errno.EWOULDBLOCK
    first.release()
    first.release()  # a second release does nothing
    second = place.fs.lock(lock_path)
    second.release()
    with pytest.raises(IsADirectoryError):
        place.fs.lock(place.root)


def test_map_writes_are_visible_to_pread(place: Place) -> None:
    handle = place.fs.open(place.path("f"), create=True)
    handle.truncate(4096)
    mapping = handle.map(4096)
    mapping[100:105] = b"hello"
    assert handle.pread(5, 100) == b"hello"
    handle.pwrite(b"HELLO", 100)
    assert bytes(mapping[100:105]) == b"HELLO"
    unmap(mapping)
    whole = handle.map(0)  # size 0 maps the whole file
    assert len(whole) == 4096
    unmap(whole)
    with pytest.raises(ValueError, match="greater than file size"):
        handle.map(8192)
    handle.close()


def test_map_read_is_a_read_only_view_that_sees_later_writes_and_lets_the_file_grow(
    place: Place,
) -> None:
    handle = place.fs.open(place.path("f"), create=True)
    handle.pwrite(b"x" * 100, 0)
    mapping = handle.map_read(100)
    view = memoryview(mapping)
    assert view.readonly and len(view) == 100
    with pytest.raises(TypeError):
        view[0] = 0
    handle.pwrite(b"HELLO", 10)  # a shared mapping sees writes to the bytes it covers
    assert bytes(view[10:15]) == b"HELLO"
    handle.pwrite(b"grown", 100)  # growing a mapped file is fine; the mapping keeps its length
    assert handle.size() == 105 and len(mapping) == 100
    with pytest.raises(BufferError):
        mapping.close()  # a view is alive
    view.release()
    mapping.close()
    whole = handle.map_read(0)  # size 0 maps the whole file
    assert len(whole) == 105 and whole[100:105] == b"grown"
    whole.close()
    with pytest.raises(ValueError, match="mmap length is greater than file size"):
        handle.map_read(200)
    handle.close()
    reader = place.fs.open(place.path("f"), read_only=True)
    readable = reader.map_read(5)  # a read-only handle may map read-only
    assert readable[:5] == b"xxxxx"
    readable.close()
    reader.close()
    raises_errno(errno.EBADF, lambda: reader.map_read(5))


def test_map_read_of_an_empty_file_is_refused(place: Place) -> None:
    handle = place.fs.open(place.path("f"), create=True)
    with pytest.raises(ValueError, match="cannot mmap an empty file"):
        handle.map_read(0)
    handle.close()


def test_map_of_an_empty_file_is_refused(place: Place) -> None:
    handle = place.fs.open(place.path("f"), create=True)
    with pytest.raises(ValueError, match="empty file"):
        handle.map(0)
    handle.close()


def test_posix_lock_excludes_another_process(tmp_path: os.PathLike[str]) -> None:
    lock_path = os.path.join(os.fspath(tmp_path), "LOCK")
    child = textwrap.dedent(
        f"""
        import fcntl, os, sys
        fd = os.open({lock_path!r}, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            sys.exit(3)
        """
    )
    fs = PosixFileSystem()
    held = fs.lock(lock_path)
    assert subprocess.run([sys.executable, "-c", child], check=False).returncode == 3
    held.release()
    assert subprocess.run([sys.executable, "-c", child], check=False).returncode == 0


def test_exclusive_create_refuses_any_existing_name(place: Place) -> None:
    write_file(place.fs, place.path("f"), b"kept")
    place.fs.mkdir(place.path("d"))
    for name in ("f", "d"):
        with pytest.raises(FileExistsError):
            place.fs.open(place.path(name), create=True, exclusive=True)
    assert read_file(place.fs, place.path("f")) == b"kept"
    handle = place.fs.open(place.path("new"), create=True, exclusive=True)
    assert handle.size() == 0
    handle.close()


def test_list_directories_lists_only_the_subdirectories(place: Place) -> None:
    write_file(place.fs, place.path("00000000000000000000.log"), b"")
    place.fs.mkdir(place.path("00000000000000000007.log"))
    place.fs.mkdir(place.path("b"))
    assert place.fs.list_directories(place.root) == ["00000000000000000007.log", "b"]
    assert place.fs.list_directories(place.path("b")) == []
    raises_errno(
        errno.ENOTDIR, lambda: place.fs.list_directories(place.path("00000000000000000000.log"))
    )


def test_create_temporary_replaces_a_stale_file_instead_of_opening_it(place: Place) -> None:
    write_file(place.fs, place.path("x.tmp"), b"stale bytes from a crash")
    handle = create_temporary(place.fs, place.path("x.tmp"))
    assert handle.size() == 0
    handle.pwrite(b"new", 0)
    handle.close()
    assert read_file(place.fs, place.path("x.tmp")) == b"new"


# -- 1b. PosixFileSystem never acts through a symlink ------------------------------------------


@dataclass(frozen=True)
class Planted:
    """A rooted PosixFileSystem over `root`, with `outside` (a file) and `outside_dir` (a
    directory holding a file) beside the root, and symlinks inside the root to both."""

    fs: PosixFileSystem
    root: str
    outside: str
    outside_dir: str

    def path(self, *names: str) -> str:
        return os.path.join(self.root, *names)

    def untouched(self) -> bool:
        with open(self.outside, "rb") as file:
            same_file = file.read() == OUTSIDE_BYTES
        with open(os.path.join(self.outside_dir, "inner"), "rb") as file:
            same_dir = file.read() == OUTSIDE_BYTES and os.listdir(self.outside_dir) == ["inner"]
        return same_file and same_dir


OUTSIDE_BYTES = b"outside the log directory\n" * 64


@pytest.fixture
def planted(tmp_path: os.PathLike[str]) -> Planted:
    base = os.fspath(tmp_path)
    root = os.path.join(base, "root")
    os.mkdir(root)
    outside = os.path.join(base, "outside")
    outside_dir = os.path.join(base, "outside_dir")
    os.mkdir(outside_dir)
    for path in (outside, os.path.join(outside_dir, "inner")):
        with open(path, "wb") as file:
            file.write(OUTSIDE_BYTES)
    os.symlink(outside, os.path.join(root, "link"))
    os.symlink(outside_dir, os.path.join(root, "dirlink"))
    os.mkdir(os.path.join(root, "p-0"))
    os.symlink(outside, os.path.join(root, "p-0", "00000000000000000000.log"))
    return Planted(PosixFileSystem(root), root, outside, outside_dir)


REFUSING_OPERATIONS: dict[str, Callable[[Planted], object]] = {
    "open for writing": lambda p: p.fs.open(p.path("link")),
    "open read-only": lambda p: p.fs.open(p.path("link"), read_only=True),
    "open with create": lambda p: p.fs.open(p.path("link"), create=True),
    "open exclusive": lambda p: p.fs.open(p.path("link"), create=True, exclusive=True),
    "open in a partition directory": lambda p: p.fs.open(p.path("p-0", "00000000000000000000.log")),
    "lock": lambda p: p.fs.lock(p.path("link")),
    "file_size": lambda p: p.fs.file_size(p.path("link")),
    "listdir": lambda p: p.fs.listdir(p.path("dirlink")),
    "list_directories": lambda p: p.fs.list_directories(p.path("dirlink")),
    "sync_dir": lambda p: p.fs.sync_dir(p.path("dirlink")),
    "create_temporary": lambda p: create_temporary(p.fs, p.path("link")),
    "open through a linked directory": lambda p: p.fs.open(p.path("dirlink", "inner")),
    "create through a linked directory": lambda p: p.fs.open(p.path("dirlink", "new"), create=True),
    "mkdir through a linked directory": lambda p: p.fs.mkdir(p.path("dirlink", "new")),
    "unlink through a linked directory": lambda p: p.fs.unlink(p.path("dirlink", "inner")),
    "rename out of a linked directory": lambda p: p.fs.rename(
        p.path("dirlink", "inner"), p.path("moved")
    ),
    "rename into a linked directory": lambda p: p.fs.rename(
        p.path("p-0", "00000000000000000000.log"), p.path("dirlink", "inner")
    ),
    "exists through a linked directory": lambda p: p.fs.exists(p.path("dirlink", "inner")),
    "file_size through a linked directory": lambda p: p.fs.file_size(p.path("dirlink", "inner")),
}


@pytest.mark.parametrize("operation", sorted(REFUSING_OPERATIONS))
def test_a_rooted_posix_fs_refuses_to_act_through_a_symlink(
    planted: Planted, operation: str
) -> None:
    with pytest.raises(UnsafePathError, match="symbolic link") as caught:
        REFUSING_OPERATIONS[operation](planted)
    assert planted.root in str(caught.value)
    assert planted.untouched()
    assert os.path.islink(planted.path("link")) and os.path.islink(planted.path("dirlink"))


def test_the_last_component_is_never_followed_even_without_a_root(planted: Planted) -> None:
    fs = PosixFileSystem()
    for call in (
        lambda: fs.open(planted.path("link")),
        lambda: fs.open(planted.path("link"), create=True),
        lambda: fs.lock(planted.path("link")),
        lambda: fs.file_size(planted.path("link")),
    ):
        with pytest.raises(UnsafePathError):
            call()
    assert planted.untouched()


def test_unlink_and_rename_act_on_a_symlink_itself_never_its_target(planted: Planted) -> None:
    assert planted.fs.exists(planted.path("link"))
    planted.fs.rename(planted.path("link"), planted.path("renamed"))
    assert os.path.islink(planted.path("renamed"))
    planted.fs.unlink(planted.path("renamed"))
    planted.fs.unlink(planted.path("dirlink"))
    assert sorted(os.listdir(planted.root)) == ["p-0"]
    assert planted.untouched()


def test_exists_reports_a_dangling_symlink_without_following_it(planted: Planted) -> None:
    os.symlink(os.path.join(planted.root, "nowhere"), planted.path("dangling"))
    assert planted.fs.exists(planted.path("dangling"))
    assert not planted.fs.exists(planted.path("missing"))
    assert not planted.fs.exists(planted.path("missing", "below"))


@pytest.mark.parametrize(
    "path",
    ["{root}/../escaped", "{root}/p-0/../../escaped", "{root}/./x", "{root}//x", "{root}/p-0/"],
)
def test_a_path_that_leaves_the_root_or_names_nothing_in_it_is_refused(
    planted: Planted, path: str
) -> None:
    with pytest.raises(UnsafePathError, match="refusing"):
        planted.fs.open(path.format(root=planted.root), create=True)
    assert not os.path.exists(os.path.join(os.path.dirname(planted.root), "escaped"))


def test_a_path_outside_the_root_is_refused_but_the_root_and_its_parents_are_usable(
    planted: Planted,
) -> None:
    with pytest.raises(UnsafePathError, match="outside the log directory"):
        planted.fs.open(planted.outside, read_only=True)
    parent = os.path.dirname(planted.root)
    assert planted.fs.exists(parent) and planted.fs.exists(planted.root)
    planted.fs.sync_dir(parent)
    planted.fs.sync_dir(planted.root)
    assert "p-0" in planted.fs.listdir(planted.root)


def test_the_root_itself_may_be_a_symlink(planted: Planted, tmp_path: os.PathLike[str]) -> None:
    chosen = os.path.join(os.fspath(tmp_path), "chosen")
    os.symlink(planted.root, chosen)
    fs = PosixFileSystem(chosen)
    write_file(fs, os.path.join(chosen, "p-0", "file"), b"inside")
    assert fs.listdir(os.path.join(chosen, "p-0")) == ["00000000000000000000.log", "file"]
    assert fs.file_size(os.path.join(chosen, "p-0", "file")) == 6
    fs.sync_dir(chosen)
    with open(planted.path("p-0", "file"), "rb") as file:
        assert file.read() == b"inside"


def test_a_fifo_planted_as_a_file_is_refused_without_blocking(planted: Planted) -> None:
    os.mkfifo(planted.path("00000000000000000000.index"))
    for read_only in (True, False):
        with pytest.raises(UnsafePathError, match="not a regular file"):
            planted.fs.open(planted.path("00000000000000000000.index"), read_only=read_only)


def test_errors_below_the_root_name_the_whole_path(planted: Planted) -> None:
    error = raises_errno(errno.ENOENT, lambda: planted.fs.open(planted.path("p-0", "missing")))
    assert error.filename == planted.path("p-0", "missing")
    error = raises_errno(errno.ENOENT, lambda: planted.fs.unlink(planted.path("nope", "x")))
    assert error.filename == planted.path("nope", "x")


def test_a_directory_renamed_and_made_again_is_the_new_one(planted: Planted) -> None:
    # The rooted fs keeps directory descriptors: a rename or rmdir of its own must drop them.
    write_file(planted.fs, planted.path("p-0", "old"), b"old")
    planted.fs.rename(planted.path("p-0"), planted.path("p-0.gone-delete"))
    planted.fs.mkdir(planted.path("p-0"))
    write_file(planted.fs, planted.path("p-0", "new"), b"new")
    assert sorted(os.listdir(planted.path("p-0"))) == ["new"]
    for name in os.listdir(planted.path("p-0.gone-delete")):
        planted.fs.unlink(planted.path("p-0.gone-delete", name))
    planted.fs.rmdir(planted.path("p-0.gone-delete"))
    planted.fs.mkdir(planted.path("p-0.gone-delete"))
    assert planted.fs.listdir(planted.path("p-0.gone-delete")) == []


def test_a_symlink_swapped_in_for_a_directory_in_use_is_not_followed(planted: Planted) -> None:
    write_file(planted.fs, planted.path("p-0", "first"), b"1")  # p-0 is now in use
    os.rename(planted.path("p-0"), planted.path("moved"))
    os.symlink(planted.outside_dir, planted.path("p-0"))
    write_file(planted.fs, planted.path("p-0", "second"), b"2")
    assert planted.untouched()
    assert "second" in os.listdir(planted.path("moved"))
    fresh = PosixFileSystem(planted.root)  # a new walk meets the link, and refuses it
    with pytest.raises(UnsafePathError):
        fresh.open(planted.path("p-0", "third"), create=True)
    assert planted.untouched()


def test_a_rename_across_directories_with_a_full_cache_keeps_both_descriptors(
    planted: Planted, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cache of two: the root (oldest) and src. The rename's source lies in the root and its
    # target in an uncached directory: caching that must not close the root's descriptor
    # the rename is about to use.
    monkeypatch.setattr(eoslog.fs, "DIRECTORY_FDS_MAX", 2)
    write_file(planted.fs, planted.path("top"), b"moved")
    planted.fs.mkdir(planted.path("src"))
    write_file(planted.fs, planted.path("src", "f"), b"")
    planted.fs.mkdir(planted.path("fresh"))
    planted.fs.rename(planted.path("top"), planted.path("fresh", "top"))
    assert read_file(planted.fs, planted.path("fresh", "top")) == b"moved"
    assert not os.path.exists(planted.path("top"))


def test_a_rooted_fs_keeps_a_bounded_number_of_directories_open(planted: Planted) -> None:
    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = open_descriptors()
    for index in range(3 * DIRECTORY_FDS_MAX):
        planted.fs.mkdir(planted.path(f"d-{index}"))
        write_file(planted.fs, planted.path(f"d-{index}", "f"), b"x")
    assert open_descriptors() - before <= DIRECTORY_FDS_MAX
    assert planted.fs.listdir(planted.path("d-0")) == ["f"]
    planted.fs.close()
    assert open_descriptors() <= before


# -- 2. the twin's power-loss model -----------------------------------------------------------


def tree(fs: FileSystem, path: str = "/") -> dict[str, bytes | None]:
    """Every path below `path`, with a file's bytes or None for a directory."""
    found: dict[str, bytes | None] = {}
    for name in fs.listdir(path):
        child = os.path.join(path, name)
        try:
            below = tree(fs, child)
        except NotADirectoryError:
            found[child] = read_file(fs, child)
        else:
            found[child] = None
            found.update(below)
    return found


def durable_file(twin: RecordingFileSystem, path: str, content: bytes) -> FileHandle:
    """A file whose content and name are both durable, left open."""
    handle = twin.open(path, create=True)
    handle.pwrite(content, 0)
    handle.sync()
    twin.sync_dir(os.path.dirname(path))
    return handle


def crash_images(
    twin: RecordingFileSystem, chunk: int | None = None
) -> Iterator[tuple[int, RecordingFileSystem]]:
    for seed in CRASH_SEEDS:
        yield seed, twin.crash_image(random.Random(seed), chunk=chunk)


@pytest.fixture
def twin() -> RecordingFileSystem:
    fs = RecordingFileSystem(seed=0)
    fs.makedirs("/d", durable=True)
    return fs


def test_an_unsynced_write_may_be_lost_or_kept(twin: RecordingFileSystem) -> None:
    handle = durable_file(twin, "/d/f", b"A" * 100)
    handle.pwrite(b"B" * 100, 0)
    outcomes = {twin_image.snapshot_bytes("/d/f") for _, twin_image in crash_images(twin)}
    assert {b"A" * 100, b"B" * 100} <= outcomes


def test_a_synced_write_survives_every_crash_image(twin: RecordingFileSystem) -> None:
    handle = durable_file(twin, "/d/f", b"A" * 10_000)
    handle.pwrite(b"B" * 3000, 5000)
    handle.sync()
    handle.pwrite(b"C" * 20, 20_000)  # an unsynced extension does not endanger synced bytes
    for seed, image in crash_images(twin):
        content = image.snapshot_bytes("/d/f")
        assert content[:8000] == b"A" * 5000 + b"B" * 3000, f"crash seed {seed}"
        assert len(content) in (10_000, 20_020), f"crash seed {seed}"
        assert content[10_000:20_000].strip(b"\0") == b"", f"crash seed {seed}"


SYNCED_BYTES_OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["pwrite", "map_write", "truncate", "sync"]),
        st.integers(0, 9000),
        st.binary(min_size=1, max_size=3000),
    ),
    max_size=12,
)


@settings(max_examples=100, deadline=None)
@given(operations=SYNCED_BYTES_OPERATIONS, crash_seed=st.integers(0, 2**32 - 1))
def test_bytes_synced_and_not_written_since_survive_every_crash_image(
    operations: list[tuple[str, int, bytes]], crash_seed: int
) -> None:
    twin = RecordingFileSystem(seed=0)
    handle = durable_file(twin, "/f", b"")
    model = bytearray()
    # offset -> byte for every byte the last sync made durable and nothing has touched since.
    protected: dict[int, int] = {}
    for operation, offset, data in operations:
        if operation == "sync":
            handle.sync()
            protected = dict(enumerate(model))
            continue
        if operation == "truncate":
            handle.truncate(offset)
            del model[offset:]
            model.extend(bytes(offset - len(model)))
            touched = range(offset, 2**31)
        elif operation == "pwrite":
            handle.pwrite(data, offset)
            model.extend(bytes(max(0, offset + len(data) - len(model))))
            model[offset : offset + len(data)] = data
            touched = range(offset, offset + len(data))
        else:
            if not model:
                continue
            start = offset % len(model)
            length = min(len(data), len(model) - start)
            mapping = handle.map(len(model))
            mapping[start : start + length] = data[:length]
            unmap(mapping)
            model[start : start + length] = data[:length]
            touched = range(start, start + length)
        protected = {i: byte for i, byte in protected.items() if i not in touched}
    assert twin.snapshot_bytes("/f") == model
    offsets = np.fromiter(protected.keys(), dtype=np.int64, count=len(protected))
    expected = np.fromiter(protected.values(), dtype=np.uint8, count=len(protected))
    rng = random.Random(crash_seed)
    for image_number in range(8):
        content = twin.crash_image(rng).snapshot_bytes("/f")
        image = np.frombuffer(content, dtype=np.uint8)
        assert len(content) > (offsets.max() if len(offsets) else -1), f"image {image_number}"
        lost = np.flatnonzero(image[offsets] != expected)
        assert not len(lost), f"image {image_number}: synced bytes at {offsets[lost][:10]} lost"


def test_a_file_created_without_sync_dir_may_vanish(twin: RecordingFileSystem) -> None:
    handle = twin.open("/d/new", create=True)
    handle.pwrite(b"synced content", 0)
    handle.sync()
    outcomes = {image.exists("/d/new") for _, image in crash_images(twin)}
    assert outcomes == {True, False}
    twin.sync_dir("/d")
    for seed, image in crash_images(twin):
        assert image.snapshot_bytes("/d/new") == b"synced content", f"crash seed {seed}"


def test_an_unlinked_file_without_sync_dir_may_reappear_with_its_durable_content(
    twin: RecordingFileSystem,
) -> None:
    durable_file(twin, "/d/old", b"durable").close()
    twin.unlink("/d/old")
    outcomes = {
        image.snapshot_bytes("/d/old") if image.exists("/d/old") else None
        for _, image in crash_images(twin)
    }
    assert outcomes == {b"durable", None}


def test_a_rename_without_sync_dir_lands_or_not_but_never_mixes_contents(
    twin: RecordingFileSystem,
) -> None:
    old, new = b"o" * 5000, b"n" * 5000
    durable_file(twin, "/d/target", old).close()
    fresh = twin.open("/d/target.tmp", create=True)
    fresh.pwrite(new, 0)
    fresh.sync()
    fresh.close()
    twin.rename("/d/target.tmp", "/d/target")
    outcomes = set()
    for seed, image in crash_images(twin):
        assert image.listdir("/d") == ["target"], f"crash seed {seed}"
        outcomes.add(image.snapshot_bytes("/d/target"))
    assert outcomes == {old, new}
    twin.sync_dir("/d")
    for seed, image in crash_images(twin):
        assert image.snapshot_bytes("/d/target") == new, f"crash seed {seed}"


def test_a_file_left_under_both_names_by_a_crash_is_one_file(twin: RecordingFileSystem) -> None:
    # Both names were synced into /d before the rename, so a crash can keep both entries.
    handle = durable_file(twin, "/d/a", b"synced")
    handle.pwrite(b"unsynced tail", 6)
    twin.rename("/d/a", "/d/b")
    both = 0
    for seed, image in crash_images(twin):
        if image.listdir("/d") != ["a", "b"]:
            continue
        both += 1
        assert image.snapshot_bytes("/d/a") == image.snapshot_bytes("/d/b"), f"crash seed {seed}"
        write_file(image, "/d/a", b"through a")
        assert image.snapshot_bytes("/d/b").startswith(b"through a"), f"crash seed {seed}"
    assert both > 0


def test_a_crash_never_gives_a_directory_two_names(twin: RecordingFileSystem) -> None:
    # Durable: /d/a/b/marker. Then b moves to /d/b and a moves into it (/d/b/a), unsynced: mixing
    # old and new entries could link a under b and b under a, or b twice.
    twin.makedirs("/d/a/b", durable=True)
    durable_file(twin, "/d/a/b/marker", b"m").close()
    twin.rename("/d/a/b", "/d/b")
    twin.rename("/d/a", "/d/b/a")
    markers = set()
    for seed, image in crash_images(twin):
        paths = tree(image)
        found = [path for path in paths if path.endswith("/marker")]
        assert len(found) <= 1, f"crash seed {seed}: {found}"
        markers.update(found)
    assert markers == {"/d/a/b/marker", "/d/b/marker"}


@pytest.mark.parametrize("chunk", [512, 4096])
def test_torn_chunks_appear_only_in_unsynced_regions(twin: RecordingFileSystem, chunk: int) -> None:
    old, new = 0xAA, 0x55
    handle = durable_file(twin, "/d/f", bytes([old]) * 16_384)
    handle.pwrite(bytes([new]) * 6000, 1000)
    fates = set()
    for seed, image in crash_images(twin, chunk=chunk):
        content = image.snapshot_bytes("/d/f")
        assert content[:1000] + content[7000:] == bytes([old]) * 10_384, f"crash seed {seed}"
        for start in range(0, 16_384, chunk):
            part = content[max(start, 1000) : min(start + chunk, 7000)]
            # Within a chunk the current bytes form a prefix: applied, dropped or torn.
            assert re.fullmatch(rb"\x55*\xaa*", part), f"crash seed {seed}, chunk at {start}"
            if part:
                fates.add("applied" if part[-1] == new else "dropped" if part[0] == old else "torn")
    assert fates == {"applied", "dropped", "torn"}


def test_an_unsynced_truncate_leaves_the_durable_or_the_current_size(
    twin: RecordingFileSystem,
) -> None:
    handle = durable_file(twin, "/d/f", b"x" * 3000)
    handle.truncate(1000)
    sizes = set()
    for seed, image in crash_images(twin):
        content = image.snapshot_bytes("/d/f")
        assert content[:1000] == b"x" * 1000, f"crash seed {seed}"
        sizes.add(len(content))
    assert sizes == {1000, 3000}


def test_mapped_writes_follow_the_same_crash_rules(twin: RecordingFileSystem) -> None:
    handle = durable_file(twin, "/d/f", bytes(4096))
    mapping = handle.map(4096)
    mapping[0:100] = b"M" * 100
    outcomes = {image.snapshot_bytes("/d/f")[:100] for _, image in crash_images(twin)}
    assert {b"M" * 100, bytes(100)} <= outcomes
    handle.sync()
    unmap(mapping)
    for seed, image in crash_images(twin):
        assert image.snapshot_bytes("/d/f")[:100] == b"M" * 100, f"crash seed {seed}"


def test_a_mapped_file_cannot_change_size_until_the_map_is_released(
    twin: RecordingFileSystem,
) -> None:
    handle = durable_file(twin, "/d/f", b"x" * 100)
    mapping = handle.map(100)
    with pytest.raises(BufferError):
        handle.truncate(50)
    with pytest.raises(BufferError):
        handle.truncate(200)
    with pytest.raises(BufferError):
        handle.pwrite(b"past the end", 95)
    handle.pwrite(b"inside", 10)
    assert twin.snapshot_bytes("/d/f") == b"x" * 10 + b"inside" + b"x" * 84
    unmap(mapping)
    handle.truncate(200)
    assert handle.size() == 200


def test_the_twin_forbids_shrinking_a_file_under_a_live_read_mapping(
    twin: RecordingFileSystem,
) -> None:
    """On Linux the cut would succeed and a later touch of the cut pages would kill the
    process (SIGBUS); the twin refuses the cut itself, before anything changes."""
    handle = durable_file(twin, "/d/f", b"x" * 100)
    mapping = handle.map_read(100)
    view = memoryview(mapping)[:10]
    with pytest.raises(BufferError, match="live read-only mapping"):
        handle.truncate(99)
    assert twin.snapshot_bytes("/d/f") == b"x" * 100
    handle.pwrite(b"more", 100)  # growth is allowed
    handle.truncate(100)  # and so is shrinking back down to the mapped length
    with pytest.raises(BufferError):
        mapping.close()  # the view keeps the mapping, and so the rule, alive
    view.release()
    mapping.close()
    handle.truncate(10)
    assert twin.snapshot_bytes("/d/f") == b"x" * 10
    # A mapping that became garbage without close() does not hold the file either.
    handle.map_read(10)
    handle.truncate(0)
    assert handle.size() == 0


def test_crash_images_are_reproducible_for_the_same_seed(twin: RecordingFileSystem) -> None:
    handle = durable_file(twin, "/d/f", random.Random(1).randbytes(20_000))
    handle.pwrite(random.Random(2).randbytes(9000), 5000)
    write_file(twin, "/d/unsynced", b"maybe")
    twin.makedirs("/d/sub/deeper")
    twin.rename("/d/f", "/d/sub/f")
    images = [tree(twin.crash_image(random.Random(seed))) for seed in range(20)]
    again = [tree(twin.crash_image(random.Random(seed))) for seed in range(20)]
    assert images == again
    assert len({repr(sorted(image.items())) for image in images}) > 1


def test_a_crash_image_is_fully_durable_and_has_no_locks(twin: RecordingFileSystem) -> None:
    handle = durable_file(twin, "/d/f", b"a")
    handle.pwrite(b"b", 1)
    twin.makedirs("/d/x/y")
    twin.lock("/d/x/LOCK")
    image = twin.crash_image(random.Random(7))
    assert image.unsynced_paths() == []
    assert tree(image.crash_image(random.Random(8))) == tree(image)
    if image.exists("/d/x/LOCK"):
        image.lock("/d/x/LOCK").release()


def test_unsynced_paths_lists_files_and_directories_with_pending_changes() -> None:
    twin = RecordingFileSystem(seed=0)
    assert twin.unsynced_paths() == []
    twin.makedirs("/a/b")
    handle = twin.open("/a/b/f", create=True)
    assert twin.unsynced_paths() == ["/", "/a", "/a/b"]
    handle.pwrite(b"x", 0)
    assert twin.unsynced_paths() == ["/", "/a", "/a/b", "/a/b/f"]
    handle.sync()
    for directory in ["/", "/a", "/a/b"]:
        twin.sync_dir(directory)
    assert twin.unsynced_paths() == []
    assert twin.durable_bytes("/a/b/f") == twin.snapshot_bytes("/a/b/f") == b"x"


def test_twin_paths_are_normalized_and_relative_to_the_root() -> None:
    twin = RecordingFileSystem(seed=0)
    twin.makedirs("a/b")
    write_file(twin, "a/./b/../b/f", b"x")
    assert twin.snapshot_bytes("/a/b/f") == b"x"
    assert twin.listdir("//a") == ["b"]
    with pytest.raises(FileNotFoundError):
        twin.open("")
    with pytest.raises(FileExistsError):
        twin.makedirs("/a/b/f")
    with pytest.raises(NotADirectoryError):
        twin.makedirs("/a/b/f/g")


def test_the_twin_can_be_shared_by_threads() -> None:
    twin = RecordingFileSystem(seed=0)
    twin.makedirs("/t")

    def write_files(worker: int) -> None:
        for number in range(50):
            handle = twin.open(f"/t/{worker}-{number}", create=True)
            handle.pwrite(bytes([worker]) * 100, 0)
            handle.sync()
            handle.close()
            twin.sync_dir("/t")

    threads = [threading.Thread(target=write_files, args=(worker,)) for worker in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(twin.listdir("/t")) == 8 * 50
    assert twin.calls == 8 * 50 * 4 + 1  # open, pwrite, sync, sync_dir each; then listdir
    assert twin.unsynced_paths() == ["/"]  # only makedirs' /t entry was never synced


# -- 3. the twin's injected faults ------------------------------------------------------------

COUNTED_OPERATIONS = [
    "mkdir", "open", "pwrite", "pread", "truncate", "sync", "map", "map_read", "listdir",
    "list_directories", "sync_dir", "rename", "lock", "open", "unlink", "mkdir", "rmdir",
]  # fmt: skip


class Workload:
    """A fixed run of one counted call per step that covers every counted operation. A failed
    step changes nothing, so retrying it continues the run."""

    def __init__(self, fs: RecordingFileSystem) -> None:
        self.fs = fs
        self.handle: FileHandle | None = None

    def steps(self) -> list[Callable[[], object]]:
        fs = self.fs
        return [
            lambda: fs.mkdir("/data"),
            self.open,
            lambda: self.opened().pwrite(b"payload", 0),
            lambda: self.opened().pread(7, 0),
            lambda: self.opened().truncate(4),
            lambda: self.opened().sync(),
            lambda: unmap(self.opened().map(4)),
            lambda: self.opened().map_read(4).close(),
            lambda: fs.listdir("/data"),
            lambda: fs.list_directories("/data"),
            lambda: fs.sync_dir("/data"),
            lambda: fs.rename("/data/a", "/data/b"),
            lambda: fs.lock("/data/LOCK").release(),
            lambda: fs.open("/data/b", read_only=True).close(),
            lambda: fs.unlink("/data/b"),
            lambda: fs.mkdir("/data/sub"),
            lambda: fs.rmdir("/data/sub"),
        ]

    def open(self) -> None:
        self.handle = self.fs.open("/data/a", create=True)

    def opened(self) -> FileHandle:
        assert self.handle is not None
        return self.handle


def test_counted_calls_are_exactly_the_documented_list() -> None:
    twin = RecordingFileSystem(seed=0)
    for step in Workload(twin).steps():
        step()
    assert [operation for operation, _ in twin.recorded_calls()] == COUNTED_OPERATIONS
    assert twin.calls == len(COUNTED_OPERATIONS)
    # Queries, releases and the test helpers are not counted.
    handle = twin.open("/data/q", create=True)
    before = twin.calls
    twin.exists("/data/q")
    twin.file_size("/data/q")
    assert handle.path == "/data/q"
    handle.size()
    handle.close()
    twin.lock("/data/LOCK2").release()
    after_lock = twin.calls
    twin.makedirs("/x/y")
    twin.snapshot_bytes("/data/q")
    twin.durable_bytes("/data/q")
    twin.unsynced_paths()
    twin.crash_image(random.Random(0))
    assert after_lock - before == 1  # the lock call itself; its release is free
    assert twin.calls == after_lock


@pytest.mark.parametrize("kind", ["EIO", "ENOSPC", "EFBIG"])
@pytest.mark.parametrize("call_index", range(len(COUNTED_OPERATIONS)))
def test_fail_at_fails_exactly_that_call_once(kind: str, call_index: int) -> None:
    twin = RecordingFileSystem(seed=0)
    twin.fail_at(call_index, kind)
    for number, step in enumerate(Workload(twin).steps()):
        if number == call_index:
            raises_errno(getattr(errno, kind), step)
            assert twin.calls == call_index + 1
        step()  # fail_at fails one call: the retry succeeds
    assert twin.calls == len(COUNTED_OPERATIONS) + 1
    assert tree(twin) == {"/data": None, "/data/LOCK": b""}


def test_a_failed_sync_keeps_the_durable_image(twin: RecordingFileSystem) -> None:
    handle = durable_file(twin, "/d/f", b"old")
    handle.pwrite(b"new", 0)
    twin.fail_at(twin.calls, "EIO")
    raises_errno(errno.EIO, handle.sync)
    assert twin.durable_bytes("/d/f") == b"old"
    assert twin.snapshot_bytes("/d/f") == b"new"
    outcomes = {image.snapshot_bytes("/d/f") for _, image in crash_images(twin)}
    assert b"old" in outcomes
    handle.sync()
    assert twin.durable_bytes("/d/f") == b"new"


def test_a_short_write_leaves_a_strict_prefix_and_raises_enospc() -> None:
    data = bytes(range(1, 101))
    landed_lengths = set()
    for seed in range(100):
        twin = RecordingFileSystem(seed)
        handle = twin.open("/f", create=True)
        handle.pwrite(b"\xff" * 10, 0)
        twin.fail_at(twin.calls, "short")
        with pytest.raises(OSError) as caught:
            handle.pwrite(data, 10)
        assert caught.value.errno == errno.ENOSPC, f"seed {seed}"
        content = twin.snapshot_bytes("/f")
        landed = len(content) - 10
        assert 1 <= landed < len(data), f"seed {seed}"
        assert content == b"\xff" * 10 + data[:landed], f"seed {seed}"
        landed_lengths.add(landed)
    assert len(landed_lengths) > 10


def test_a_short_write_of_one_byte_writes_nothing() -> None:
    twin = RecordingFileSystem(seed=0)
    handle = twin.open("/f", create=True)
    twin.fail_at(twin.calls, "short")
    raises_errno(errno.ENOSPC, lambda: handle.pwrite(b"x", 0))
    assert twin.snapshot_bytes("/f") == b""


def test_a_short_fault_on_any_other_call_is_eio() -> None:
    twin = RecordingFileSystem(seed=0)
    handle = twin.open("/f", create=True)
    twin.fail_at(twin.calls, "short")
    raises_errno(errno.EIO, handle.sync)
    twin.fail_at(twin.calls, "short")
    raises_errno(errno.EIO, lambda: twin.mkdir("/d"))
    assert not twin.exists("/d")


@pytest.mark.parametrize("kind", ["EIO", "ENOSPC", "EFBIG"])
def test_a_failed_write_changes_nothing(kind: str) -> None:
    twin = RecordingFileSystem(seed=0)
    handle = twin.open("/f", create=True)
    handle.pwrite(b"before", 0)
    twin.fail_at(twin.calls, kind)
    raises_errno(getattr(errno, kind), lambda: handle.pwrite(b"after and longer", 0))
    assert twin.snapshot_bytes("/f") == b"before"


def test_fail_after_fails_every_later_counted_call_but_not_queries() -> None:
    twin = RecordingFileSystem(seed=0)
    handle = twin.open("/f", create=True)
    handle.pwrite(b"alive", 0)
    twin.fail_after(twin.calls + 1, "EIO")
    handle.sync()  # the call before the dead disk still works
    dead_calls: list[Callable[[], object]] = [
        lambda: handle.pwrite(b"x", 0),
        lambda: handle.pread(1, 0),
        handle.sync,
        lambda: twin.open("/f"),
        lambda: twin.mkdir("/d"),
        lambda: twin.listdir("/"),
        lambda: twin.sync_dir("/"),
        lambda: twin.lock("/LOCK"),
    ]
    for call in dead_calls * 2:
        raises_errno(errno.EIO, call)
    assert twin.exists("/f") and twin.file_size("/f") == 5 and handle.size() == 5
    handle.close()
    assert twin.snapshot_bytes("/f") == twin.durable_bytes("/f") == b"alive"
    image = twin.crash_image(random.Random(0))  # a restart gets a working disk
    image.mkdir("/d")


def test_faults_cannot_be_set_for_past_calls_or_unknown_kinds() -> None:
    twin = RecordingFileSystem(seed=0)
    twin.mkdir("/d")
    with pytest.raises(ValueError, match="already been made"):
        twin.fail_at(0, "EIO")
    with pytest.raises(ValueError, match="fault kind"):
        twin.fail_after(5, "EPERM")
