"""docs/reliability.md family 12 at CI size: the committed fuzz corpus replays to acceptable
outcomes, and every target survives a bounded atheris run.

Acceptable outcomes are a normal return or the target's typed errors (tests/fuzz/targets.py);
everything else is a finding: another exception or an oracle's FuzzFinding, a hang past
INPUT_TIMEOUT_S, an allocation past max(256 MB, 4 x input size) (measured with tracemalloc
here, which sees Python and numpy allocations; capped with RLIMIT_DATA in the fuzzing
process, which sees every allocation), a crash. A bounded run starts by running the whole
committed corpus under that cap, so the corpus is replayed both ways.

EOSLOG_FUZZ_SECONDS sets each bounded run. The default, 15 s, keeps the family inside its CI
budget of 5 minutes on two cores: 13 targets at 15 s plus about 5 s of start-up each (import
under instrumentation, warm-up) take about 4.5 minutes of one core. The soak runs longer:
`make fuzz`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import pytest

from eoslog.errors import CorruptRecordError
from tests.fuzz import launch, seeds
from tests.fuzz.inputs import ALLOCATION_BOUND_BYTES, INPUT_TIMEOUT_S, Target, run_checked
from tests.fuzz.targets import TARGETS

FUZZ_SECONDS = int(os.environ.get("EOSLOG_FUZZ_SECONDS", "15"))
# Every target needs seeds that reach past its first checks; a handful is the least any has.
SEEDS_MIN = 2


class Hang(BaseException):
    """An input ran past INPUT_TIMEOUT_S (a BaseException, so no target swallows it)."""


@contextmanager
def input_timeout(seconds: int) -> Iterator[None]:
    def expire(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"input still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def replay(name: str, path: Path) -> int:
    """Run one corpus input; returns the bytes it allocated at its peak (Python and numpy
    allocations, which tracemalloc sees)."""
    data = path.read_bytes()
    tracemalloc.reset_peak()
    baseline = tracemalloc.get_traced_memory()[0]
    with input_timeout(INPUT_TIMEOUT_S):
        run_checked(TARGETS[name], data)
    return tracemalloc.get_traced_memory()[1] - baseline


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_committed_corpus_replays_to_typed_outcomes_within_time_and_memory(name: str) -> None:
    inputs = sorted(seeds.corpus_dir(name).iterdir())
    assert len(inputs) >= SEEDS_MIN, f"{name} has {len(inputs)} corpus inputs"
    tracemalloc.start()
    try:
        peaks = {path.name: replay(name, path) for path in inputs}
    finally:
        tracemalloc.stop()
    worst = max(peaks, key=peaks.__getitem__)
    print(f"{name}: {len(inputs)} inputs replayed; peak allocation {peaks[worst]} B ({worst})")
    for path in inputs:
        bound = max(ALLOCATION_BOUND_BYTES, 4 * path.stat().st_size)
        assert peaks[path.name] <= bound, f"{name}/{path.name} allocated {peaks[path.name]} B"


def test_every_target_has_a_committed_corpus_and_seeds() -> None:
    assert set(seeds.SEEDS) == set(TARGETS)
    for name in TARGETS:
        assert seeds.corpus_dir(name).is_dir(), f"no corpus for {name}"


def raise_untyped(data: bytes) -> None:
    raise KeyError(data)


def raise_typed(data: bytes) -> None:
    raise CorruptRecordError(f"bad bytes {data!r}")


def test_the_harness_swallows_typed_errors_and_surfaces_every_other_exception() -> None:
    run_checked(Target("typed", raise_typed), b"x")
    with pytest.raises(KeyError):
        run_checked(Target("untyped", raise_untyped), b"x")


def test_an_input_past_the_timeout_is_reported_as_a_hang() -> None:
    with pytest.raises(Hang), input_timeout(1):
        while True:
            pass


ALLOCATION_PROBE = """
from tests.fuzz.runner import cap_heap
cap_heap()
below = bytearray({below}); del below
try:
    bytearray({above})
except MemoryError:
    print("refused")
"""


def test_the_fuzzing_process_refuses_an_allocation_past_the_bound() -> None:
    """The cap the runner takes after its warm-up lets an input allocate somewhat less than
    ALLOCATION_BOUND_BYTES and refuses more (MemoryError: a crash finding)."""
    probe = ALLOCATION_PROBE.format(
        below=ALLOCATION_BOUND_BYTES * 3 // 4, above=ALLOCATION_BOUND_BYTES + (16 << 20)
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=launch.REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (completed.returncode, completed.stdout) == (0, "refused\n"), completed.stderr[-2000:]


@pytest.mark.fuzz
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_bounded_fuzz_run_finds_no_crash_hang_or_allocation_over_bound(
    name: str, tmp_path: Path
) -> None:
    artifacts = tmp_path / "findings"
    completed = launch.run(
        name, FUZZ_SECONDS, [tmp_path / "corpus", seeds.corpus_dir(name)], artifacts
    )
    summary = [line for line in completed.stderr.splitlines() if line.startswith("stat::")]
    print(f"{name}: {FUZZ_SECONDS} s, exit {completed.returncode}", *summary, sep="\n")
    found = launch.findings_in(artifacts)
    details = "\n".join(f"{path.name}: {path.read_bytes()[:512].hex()}" for path in found)
    output = (completed.stdout + completed.stderr).splitlines()
    report = [line for line in output if "Instrumenting" not in line]
    tail = "\n".join(report[-80:])
    assert completed.returncode == 0 and not found, (
        f"{name} found {len(found)} input(s) (replay: python -m tests.fuzz.runner {name} FILE):"
        f"\n{details}\n{tail}"
    )
