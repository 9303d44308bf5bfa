"""Progress for the command line's slow work that has no known total (eoslog.progress
activity_progress): opening a directory reports the bytes recovery rescans, and a spinner
shows them on a terminal once the work has taken a second; nothing at all without one."""

from __future__ import annotations

import io
import os
import signal
import time
from pathlib import Path

import pytest

import eoslog
from eoslog import progress
from eoslog.log import recovery
from tests.cli.shell import started_child


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _killed_owner_directory(root: Path) -> Path:
    """A directory whose owner wrote 3 records to t-0 and was killed: the next open rescans."""
    script = """
b = eoslog.open(sys.argv[1])
b.create_topic("t", 1)
p = b.producer({"linger.ms": 0})
for _ in range(3):
    p.produce("t", b"v" * 1000)
p.flush()
"""
    child = started_child(script, root)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    return root / "t-0" / "00000000000000000000.log"


def test_an_open_after_a_kill_reports_each_segment_its_recovery_rescans(tmp_path: Path) -> None:
    segment = _killed_owner_directory(tmp_path / "data")
    # The whole file as the kill left it (its tail of zeros included: see
    # tests/log/test_preallocation.py), which the open then cuts.
    killed_size = os.path.getsize(segment)
    rescanned: list[int] = []
    token = recovery.RESCANNED_BYTES.set(rescanned.append)
    try:
        with eoslog.open(str(tmp_path / "data"), background=False) as broker:
            assert broker.log("t", 0).high_watermark == 3
        assert killed_size in rescanned
        rescanned.clear()
        with eoslog.open(str(tmp_path / "data"), background=False):
            pass
        assert rescanned == []  # a clean open rescans nothing
    finally:
        recovery.RESCANNED_BYTES.reset(token)


def test_a_spinner_shows_the_amount_done_on_a_terminal_once_the_work_is_slow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    monkeypatch.setattr(progress, "ACTIVITY_SECONDS_MIN", 0.0)
    with progress.activity_progress("opening data") as advance:
        advance(3 * 1024 * 1024)
        deadline = time.monotonic() + 30
        while "opening data" not in terminal.getvalue():
            assert time.monotonic() < deadline, terminal.getvalue()
            time.sleep(0.01)
    assert "3.1 MB" in terminal.getvalue()


def test_quick_work_or_no_terminal_shows_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    with progress.activity_progress("opening data") as advance:
        advance(1)  # done well within ACTIVITY_SECONDS_MIN
    assert terminal.getvalue() == ""
    piped = io.StringIO()
    monkeypatch.setattr("sys.stderr", piped)
    monkeypatch.setattr(progress, "ACTIVITY_SECONDS_MIN", 0.0)
    with progress.activity_progress("opening data") as advance:
        assert advance is progress.no_progress
    assert piped.getvalue() == ""
