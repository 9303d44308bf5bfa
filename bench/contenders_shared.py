"""What the contenders of several areas share (bench/contenders_*.py): the fairness check that
fails a run, the codec under test, and the SQLite peer's fresh log table."""

from __future__ import annotations

import os
from typing import Any

_SQLITE_SUFFIXES = ("", "-wal", "-shm")


def expect(condition: bool, message: str) -> None:
    # Not `assert`: the checks must run under python -O too.
    if not condition:
        raise AssertionError(f"fairness check failed: {message}")


def record_codec() -> Any:
    from eoslog.record import codec

    return codec


def sqlite_log(path: str, synchronous: str) -> Any:
    """A fresh SQLite file at `path` (any left there removed) in WAL mode with `synchronous`,
    holding an empty table log (offset INTEGER PRIMARY KEY, value BLOB); autocommit, so each
    caller writes its own BEGIN and COMMIT."""
    import sqlite3

    remove_sqlite(path)
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(f"PRAGMA synchronous={synchronous}")
    connection.execute("CREATE TABLE log (offset INTEGER PRIMARY KEY, value BLOB)")
    return connection


def remove_sqlite(path: str) -> None:
    """Remove the SQLite file at `path` and its WAL and shared-memory files, where present."""
    for suffix in _SQLITE_SUFFIXES:
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)
