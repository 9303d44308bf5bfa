"""Running eoslog as a user runs it (`python -m eoslog ...` in a child process), and what the
command-line tests write into their directories first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import eoslog
from eoslog.record import codec

# A producer id no transactional id owns: its batch reaches the log directly, as a foreign
# client's would, and no coordinator will ever end its transaction.
FOREIGN_PRODUCER_ID = 900_000


def run(*arguments: str) -> subprocess.CompletedProcess[str]:
    """`python -m eoslog ARGUMENTS...`, its output captured."""
    command = [sys.executable, "-m", "eoslog", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def run_json(*arguments: str) -> Any:
    """The JSON a read command prints with --json; the command must succeed."""
    done = run(*arguments, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def hang(broker: eoslog.Broker, value: bytes, timestamp_ms: int, topic: str = "t") -> int:
    """A transactional batch of FOREIGN_PRODUCER_ID in partition 0 of topic that no marker
    ends, stamped timestamp_ms; returns its offset."""
    builder = codec.BatchBuilder(
        is_transactional=True, producer_id=FOREIGN_PRODUCER_ID, producer_epoch=3, base_sequence=0
    )
    builder.append(timestamp_ms, None, value)
    log = broker.log(topic, 0)
    start = log.high_watermark
    log.append_batch(builder.build())
    return start


def started_child(script: str, directory: Path) -> subprocess.Popen[str]:
    """A child Python process running script (with eoslog and sys imported, the directory
    as sys.argv[1]), returned once the script has run; it then waits for its stdin to close."""
    program = f"import eoslog, sys\n{script}print('ready', flush=True)\nsys.stdin.read()\n"
    child = subprocess.Popen(
        [sys.executable, "-c", program, str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "ready\n"
    return child
