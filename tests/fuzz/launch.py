"""Starting a fuzz run in a child process (libFuzzer exits the process it runs in): the
command line tests/reliability/f12_fuzzing/test_fuzz.py and the soak share (see
tests/fuzz/runner.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from .inputs import INPUT_TIMEOUT_S

REPO = Path(__file__).resolve().parents[2]
FINDING_PREFIXES = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")


def command(
    name: str,
    seconds: int,
    corpus_dirs: Sequence[Path],
    artifact_dir: Path,
    extra: Sequence[str] = (),
) -> list[str]:
    """The command line that fuzzes `name` for `seconds`, adding new inputs to the first
    corpus directory and writing findings under artifact_dir."""
    return [
        sys.executable,
        "-m",
        "tests.fuzz.runner",
        name,
        f"-max_total_time={seconds}",
        f"-timeout={INPUT_TIMEOUT_S}",
        f"-artifact_prefix={artifact_dir}/",
        "-print_final_stats=1",
        # Keep the seeds in the corpus even when they add no coverage of instrumented
        # (Python) code: the native readers give libFuzzer no feedback of their own.
        "-keep_seed=1",
        *extra,
        *(str(directory) for directory in corpus_dirs),
    ]


def run(
    name: str, seconds: int, corpus_dirs: Sequence[Path], artifact_dir: Path
) -> subprocess.CompletedProcess[str]:
    """Fuzz `name` in a child process; the directories are created if missing."""
    for directory in (*corpus_dirs, artifact_dir):
        directory.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        command(name, seconds, corpus_dirs, artifact_dir),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=seconds + 120,
        check=False,
    )


def findings_in(artifact_dir: Path) -> list[Path]:
    """The inputs libFuzzer wrote as findings (crash, hang, out-of-memory) in artifact_dir."""
    return sorted(path for path in artifact_dir.iterdir() if path.name.startswith(FINDING_PREFIXES))
