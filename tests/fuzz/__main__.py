"""The fuzzing soak (docs/reliability.md family 12): every target in turn, as long as asked.

    python -m tests.fuzz --seconds 600                 # each target for 10 minutes
    python -m tests.fuzz --seconds 60 --targets meta   # one target
    python -m tests.fuzz --write-seeds                 # rewrite the seed corpus
    make fuzz FUZZ_SECONDS=600

Targets run one at a time, each in its own process on one core. New inputs go to a scratch
corpus under --work (default build/fuzz/<target>/corpus) unless --grow adds them to the
committed corpus; findings (crash-, timeout-, oom- files) go to build/fuzz/<target>/ and are
listed at the end. Exit status 1 if any target found something.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

from . import launch, seeds
from .targets import TARGETS


def fuzz_target(name: str, seconds: int, work: Path, grow: bool) -> tuple[int, list[Path]]:
    """Fuzz one target; returns the runs executed and the finding files it wrote."""
    target_dir = work / name
    scratch = target_dir / "corpus"
    scratch.mkdir(parents=True, exist_ok=True)
    corpus_dirs = [seeds.corpus_dir(name)] if grow else [scratch, seeds.corpus_dir(name)]
    started = time.monotonic()
    completed = launch.run(name, seconds, corpus_dirs, target_dir)
    (target_dir / "output.txt").write_text(completed.stdout + completed.stderr)
    runs = re.search(r"number_of_executed_units:\s*(\d+)", completed.stderr)
    findings = launch.findings_in(target_dir)
    elapsed = time.monotonic() - started
    print(
        f"{name}: {runs.group(1) if runs else '?'} runs in {elapsed:.0f} s, exit "
        f"{completed.returncode}, {len(findings)} finding(s)",
        flush=True,
    )
    if completed.returncode != 0 and not findings:
        print(completed.stderr[-3000:], file=sys.stderr)
    return (int(runs.group(1)) if runs else 0), findings


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--seconds", type=int, default=60, help="per target (default 60)")
    parser.add_argument("--targets", nargs="*", default=sorted(TARGETS), choices=sorted(TARGETS))
    parser.add_argument("--work", type=Path, default=launch.REPO / "build" / "fuzz")
    parser.add_argument("--grow", action="store_true", help="add new inputs to the corpus")
    parser.add_argument(
        "--known",
        default="",
        help="comma list of exception type names to pass over (findings already recorded)",
    )
    parser.add_argument("--write-seeds", action="store_true", help="rewrite the seed corpus")
    options = parser.parse_args()
    if options.grow and options.known:
        # Inputs that raise a passed-over exception look fine to libFuzzer and would enter the
        # committed corpus, where they fail the replay.
        parser.error("--grow and --known do not go together")
    if options.write_seeds:
        for name, count in seeds.write_seeds().items():
            print(f"{name}: {count} inputs in {seeds.corpus_dir(name)}")
        return 0
    os.environ["EOSLOG_FUZZ_KNOWN"] = options.known
    all_findings: list[Path] = []
    for name in options.targets:
        _, findings = fuzz_target(name, options.seconds, options.work, options.grow)
        all_findings += findings
    for path in all_findings:
        print(f"finding: {path}")
    return 1 if all_findings else 0


if __name__ == "__main__":
    sys.exit(main())
