"""The log directory's lock: one owner process at a time (docs/design.md "Ownership").

The owner (`eoslog.open`) and every offline writer (`eoslog repair`) take the same exclusive
lock on `<log dir>/.lock` and write their pid in it, so they exclude each other and a refusal
can name the process to stop.
"""

from __future__ import annotations

import os
from typing import Final

from eoslog.errors import LogDirLockedError
from eoslog.fs import FileLock, FileSystem

LOCK_FILE: Final = ".lock"


def lock_log_directory(fs: FileSystem, root: str, refusal_hint: str = "") -> FileLock:
    """Take the lock (fs.lock on `.lock`, then this pid written in it), without waiting.
    LogDirLockedError naming the holder's pid (and `refusal_hint`, if any) when a live process
    holds it; OSError from the file system, with the lock released."""
    path = os.path.join(root, LOCK_FILE)
    try:
        lock = fs.lock(path)
    except BlockingIOError:
        hint = f": {refusal_hint}" if refusal_hint else ""
        owner = _owner_pid(fs, path)
        holder = (
            f"this process (pid {owner}): another Broker here has it open; close it, or share it"
            if owner == str(os.getpid())
            else f"another process (pid {owner})"
        )
        raise LogDirLockedError(f"log directory {root} is locked by {holder}{hint}") from None
    try:
        handle = fs.open(path)
        try:
            handle.truncate(0)
            handle.pwrite(f"{os.getpid()}\n".encode(), 0)
        finally:
            handle.close()
    except BaseException:
        lock.release()
        raise
    return lock


def _owner_pid(fs: FileSystem, lock_path: str) -> str:
    """The pid the owner wrote in the lock file, or "unknown"."""
    try:
        handle = fs.open(lock_path, read_only=True)
        try:
            return handle.pread(32, 0).decode(errors="replace").strip() or "unknown"
        finally:
            handle.close()
    except OSError:
        return "unknown"
