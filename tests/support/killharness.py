"""A parent/child harness for kill -9 trials (docs/reliability.md family 1).

The child is a Python script that works on a log directory and reports on its stdout, one JSON
object per line, what it is about to do and what was acknowledged, flushing after each line:
the parent records an acknowledgement only after the child has printed it, and the child
prints it only after the call returned, so the parent's ledger never holds an unacknowledged
write. The parent kills the child with SIGKILL at a random moment (or lets it finish), then
reopens the directory itself and checks the invariants (tests/support/invariants.py).

A kill -9 leaves the page cache intact: these trials test process crashes, not power loss
(the fs twin does that, tests/reliability/f03_power_loss/test_crash_images.py).
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from tests.support import REPO_ROOT

CHILD_TIMEOUT_S = 60


@dataclass
class ChildRun:
    """What one child printed before it exited or was killed."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    killed: bool = False
    returncode: int | None = None
    stderr: str = ""


def run_child(
    script: str,
    args: list[str],
    rng: random.Random,
    kill_after_s: float | None,
    arm_after_lines: int = 1,
) -> ChildRun:
    """Run `script` (Python source) with `args` (sys.argv[1:]); SIGKILL it kill_after_s seconds
    after its arm_after_lines-th line (None: let it finish). Arming on progress rather than on
    the clock alone keeps a kill landing mid-run however fast the child has become. Returns
    every complete line it printed."""
    process = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": REPO_ROOT},
    )
    assert process.stdout is not None and process.stderr is not None
    run = ChildRun()
    buffer = b""
    deadline: float | None = None
    started = time.monotonic()
    while True:
        if deadline is not None and time.monotonic() >= deadline:
            process.send_signal(signal.SIGKILL)
            run.killed = True
            break
        if time.monotonic() - started > CHILD_TIMEOUT_S:
            process.kill()
            raise AssertionError(f"the child ran past {CHILD_TIMEOUT_S} s")
        wait = 0.05 if deadline is None else max(0.0, min(0.05, deadline - time.monotonic()))
        ready, _, _ = select.select([process.stdout], [], [], wait)
        if not ready:
            if process.poll() is not None:
                break
            continue
        chunk = os.read(process.stdout.fileno(), 65536)
        if not chunk:
            break
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        for line in complete:
            run.lines.append(json.loads(line))
            armed = len(run.lines) >= arm_after_lines
            if deadline is None and kill_after_s is not None and armed:
                deadline = time.monotonic() + kill_after_s
    # Whatever was printed before the kill and is still in the pipe was acknowledged too.
    rest = process.stdout.read()
    buffer += rest
    *complete, _ = buffer.split(b"\n")
    run.lines.extend(json.loads(line) for line in complete)
    run.returncode = process.wait()
    run.stderr = process.stderr.read().decode(errors="replace")
    if run.returncode == -signal.SIGKILL:
        run.killed = True  # by the parent, or by itself at a crash point (eoslog.crashpoints)
    if not run.killed and run.returncode != 0:
        raise AssertionError(f"the child failed ({run.returncode}):\n{run.stderr[-3000:]}")
    return run


def kill_delay(rng: random.Random, longest_s: float) -> float | None:
    """A random moment to kill at; now and then None, so some children finish and close."""
    return None if rng.random() < 0.1 else rng.uniform(0.0, longest_s)
