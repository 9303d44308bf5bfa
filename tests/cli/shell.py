"""Running eoslog as a user runs it: `python -m eoslog ...` in a child process."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def run(*arguments: str) -> subprocess.CompletedProcess[str]:
    """`python -m eoslog ARGUMENTS...`, its output captured."""
    command = [sys.executable, "-m", "eoslog", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def run_json(*arguments: str) -> Any:
    """The JSON a read command prints with --json; the command must succeed."""
    done = run(*arguments, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
