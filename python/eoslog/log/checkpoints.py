"""Kafka's checkpoint files at the log-directory root (FORMAT.md §9.1): the recovery point and
log-start offset checkpoints (text: version, count, then `topic partition offset` lines) and
the clean-shutdown marker. Written through the fs seam: temp file, sync, rename, sync dir."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Final

from eoslog import limits
from eoslog.errors import CorruptCheckpointError
from eoslog.fs import FileHandle, FileSystem, create_temporary

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
_VERSION = 0
# Decimal ASCII without sign or spaces: Python's int() alone would also take " 5", "+5",
# "5_0" and non-ASCII digits, which no checkpoint writer produces.
_NUMBER: Final = re.compile(rb"0|[1-9][0-9]{0,18}")
_ENTRY: Final = re.compile(rb"([!-~]+) (0|[1-9][0-9]{0,9}) (0|[1-9][0-9]{0,18})")
_PARTITION_MAX: Final = (1 << 31) - 1
_OFFSET_MAX: Final = (1 << 63) - 1

TopicPartition = tuple[str, int]


def write_atomically(fs: FileSystem, path: str, data: bytes) -> None:
    """Replace the file at path with data so that a crash leaves the old or the new content,
    never a mix: write a temp file, sync it, rename it over, sync the directory.
    Not thread-safe for one path: the caller holds the lock that serializes writers of that
    file (two writers would share `path.tmp`, and one's rename would take the other's file).
    The temp file is created exclusively (fs.create_temporary), so a symlink or a stale file
    planted at `path.tmp` never receives the write."""
    temporary = path + ".tmp"
    handle = create_temporary(fs, temporary)
    try:
        handle.pwrite(data, 0)
        handle.sync()
    finally:
        handle.close()
    fs.rename(temporary, path)
    fs.sync_dir(os.path.dirname(path) or ".")


def encode_offsets(offsets: Mapping[TopicPartition, int]) -> bytes:
    lines = [str(_VERSION), str(len(offsets))]
    lines += [
        f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())
    ]
    return ("\n".join(lines) + "\n").encode()


def decode_offsets(data: bytes, path: str = "checkpoint") -> dict[TopicPartition, int]:
    """The entries of a checkpoint file. CorruptCheckpointError naming `path` and the byte
    where it goes wrong if it is malformed: a bad header or count, a line that is not
    `topic partition offset` in decimal ASCII, an offset outside 0 .. 2**63 - 1, or the same
    partition twice. (Kafka reads a file it cannot parse as holding no entries; eoslog's
    callers decide what an unreadable file means, so they must be told.)"""
    if not data:
        return {}
    lines = data.split(b"\n")
    if lines[-1] != b"":
        raise _malformed(path, len(data), "the last line has no newline")
    lines.pop()
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    if len(lines) < 2 or lines[0] != str(_VERSION).encode():
        raise _malformed(path, 0, f"not a version {_VERSION} checkpoint")
    if not _NUMBER.fullmatch(lines[1]) or int(lines[1]) != len(lines) - 2:
        raise _malformed(path, starts[1], f"the count does not match the {len(lines) - 2} entries")
    offsets: dict[TopicPartition, int] = {}
    for number, line in enumerate(lines[2:], start=2):
        entry = _ENTRY.fullmatch(line)
        if entry is None:
            raise _malformed(path, starts[number], "expected `topic partition offset`")
        topic, partition, offset = entry.group(1).decode(), int(entry[2]), int(entry[3])
        if partition > _PARTITION_MAX or offset > _OFFSET_MAX or (topic, partition) in offsets:
            raise _malformed(path, starts[number], "a value out of range or a repeated entry")
        offsets[(topic, partition)] = offset
    return offsets


def _malformed(path: str, position: int, what: str) -> CorruptCheckpointError:
    return CorruptCheckpointError(f"{path} is malformed at byte {position}: {what}")


def read_offsets(fs: FileSystem, path: str) -> dict[TopicPartition, int]:
    """The checkpoint's entries; none if the file is missing (FORMAT.md §9.1).
    CorruptCheckpointError if it cannot be read as a checkpoint (decode_offsets), or if it is
    larger than limits.checkpoint_file_bytes_max (refused before anything is read)."""
    if not fs.exists(path):
        return {}
    handle = fs.open(path, read_only=True)
    try:
        data = read_small_file(handle, path, limits.checkpoint_file_bytes_max)
    except ValueError as error:
        raise CorruptCheckpointError(str(error)) from None
    finally:
        handle.close()
    return decode_offsets(data, path)


def read_believed_offsets(
    fs: FileSystem, path: str
) -> tuple[dict[TopicPartition, int], str | None]:
    """read_offsets for an open: the entries, and, for a file that cannot be read, no
    entries and the reason, which the caller reports (a partition without an entry then has
    no value it can trust, which is safe: see eoslog.log.recovery)."""
    try:
        return read_offsets(fs, path), None
    except CorruptCheckpointError as error:
        return {}, f"{error}; none of its entries is believed"


def write_offsets(fs: FileSystem, path: str, offsets: Mapping[TopicPartition, int]) -> None:
    write_atomically(fs, path, encode_offsets(offsets))


def write_clean_shutdown(fs: FileSystem, root: str, broker_epoch: int = 0) -> None:
    payload = json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":"))
    write_atomically(fs, os.path.join(root, CLEAN_SHUTDOWN_FILE), payload.encode())


def take_clean_shutdown(fs: FileSystem, root: str) -> bool:
    """Whether the last close was clean. The marker is deleted at once (and the deletion made
    durable), so a crash while loading forces full recovery next time (FORMAT.md §9.1)."""
    path = os.path.join(root, CLEAN_SHUTDOWN_FILE)
    if not fs.exists(path):
        return False
    fs.unlink(path)
    fs.sync_dir(root)
    return True


def read_small_file(handle: FileHandle, path: str, bytes_max: int) -> bytes:
    """The whole of a file that is small by nature (a checkpoint, eoslog.meta), open as
    `handle`. ValueError, before anything is read, if it claims more than bytes_max bytes: a
    sparse or lying file must not cost the size it claims. OSError from the file system."""
    size = handle.size()
    if size > bytes_max:
        raise ValueError(f"{path} is {size} bytes, over the limit of {bytes_max} for its kind")
    return handle.pread(size, 0)
