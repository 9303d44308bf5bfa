"""Kafka's checkpoint files at the log-directory root (FORMAT.md §9.1): the recovery point and
log-start offset checkpoints (text: version, count, then `topic partition offset` lines) and
the clean-shutdown marker. Written through the fs seam: temp file, sync, rename, sync dir."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from eoslog.fs import FileSystem, create_temporary

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
_VERSION = 0

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


def decode_offsets(data: bytes) -> dict[TopicPartition, int]:
    """The entries of a checkpoint file; ValueError if it is malformed (Kafka treats a file it
    cannot read as holding no entries, and so do the callers)."""
    if not data:
        return {}
    lines = data.decode().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2 or int(lines[0]) != _VERSION:
        raise ValueError("unsupported checkpoint version or missing header")
    count = int(lines[1])
    if count != len(lines) - 2:
        raise ValueError(f"checkpoint says {count} entries but holds {len(lines) - 2}")
    offsets = {}
    for line in lines[2:]:
        fields = line.split()
        if len(fields) != 3:
            raise ValueError(f"malformed checkpoint line {line!r}")
        offsets[(fields[0], int(fields[1]))] = int(fields[2])
    return offsets


def read_offsets(fs: FileSystem, path: str) -> dict[TopicPartition, int]:
    """The checkpoint's entries; none if the file is missing or unreadable (FORMAT.md §9.1)."""
    if not fs.exists(path):
        return {}
    handle = fs.open(path, read_only=True)
    try:
        data = handle.pread(handle.size(), 0)
    finally:
        handle.close()
    try:
        return decode_offsets(data)
    except (ValueError, UnicodeDecodeError):
        return {}


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
