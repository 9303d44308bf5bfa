"""Run one fuzz target under atheris (libFuzzer), in this process, until libFuzzer stops.

    python -m tests.fuzz.runner TARGET [libFuzzer arguments and corpus directories]

eoslog and the targets are imported under atheris' instrumentation, so the pure-Python code
(the pure codec twin, recovery, the coordinator decoders) gives coverage feedback; the native
modules run uninstrumented and are exercised for crashes.

libFuzzer first runs every input of the corpus directories given, then mutates them; given
files instead of directories, it runs each once (the replay of a finding:
`python -m tests.fuzz.runner TARGET tests/fuzz/findings/<file>.bin`).

Outcomes: an input that raises anything but the target's acceptable errors is a crash
(libFuzzer writes it as `crash-<sha1>` under -artifact_prefix); one that runs past -timeout
seconds a hang (`timeout-<sha1>`). Memory: after a warm-up run of every seed, RLIMIT_DATA
caps the process's heap at what it holds then plus ALLOCATION_BOUND_BYTES, so an input that
allocates more fails with MemoryError (a crash artifact) instead of exhausting the machine.
The cap is taken again every CAP_EVERY_INPUTS inputs: libFuzzer's own memory grows slowly
as it runs (about 200 MB over 900,000 inputs was measured), and that growth is not the
inputs' allocation.
Inputs are at most -max_len bytes (libFuzzer's default: 4096 or the largest seed), so the
bound max(256 MB, 4 x input size) is 256 MB.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Sequence
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["eoslog"]):
    from tests.fuzz.inputs import ALLOCATION_BOUND_BYTES, run_checked
    from tests.fuzz.targets import TARGETS

# Often enough that libFuzzer's growth between two caps is negligible, rarely enough that
# reading /proc/self/status costs nothing measurable.
CAP_EVERY_INPUTS = 256


def heap_bytes() -> int:
    """The process's data segment size (VmData: heap and private anonymous mappings), which
    is what RLIMIT_DATA limits."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmData:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmData in /proc/self/status")


def warm_up(name: str, corpus_dirs: Sequence[str]) -> None:
    """Run the first seed once, uncapped: imports, the partition template and caches are
    built before the memory cap is taken. libFuzzer then runs every seed again, capped."""
    for directory in corpus_dirs:
        for path in sorted(Path(directory).glob("*"))[:1]:
            run_checked(TARGETS[name], path.read_bytes())
            return


def cap_heap() -> None:
    limit = heap_bytes() + ALLOCATION_BOUND_BYTES
    resource.setrlimit(resource.RLIMIT_DATA, (limit, resource.getrlimit(resource.RLIMIT_DATA)[1]))


def main(argv: list[str]) -> None:
    name, arguments = argv[1], argv[2:]
    # Exploration only (the soak's --known): exception types already recorded as findings,
    # passed over so that a run can go on to find others. CI never sets it.
    known = set(filter(None, os.environ.get("EOSLOG_FUZZ_KNOWN", "").split(",")))
    target = TARGETS[name]
    warm_up(name, [argument for argument in arguments if not argument.startswith("-")])
    cap_heap()

    inputs_run = 0

    def test_one_input(data: bytes) -> None:
        nonlocal inputs_run
        inputs_run += 1
        if inputs_run % CAP_EVERY_INPUTS == 0:
            cap_heap()
        try:
            run_checked(target, data)
        except Exception as error:
            if type(error).__name__ not in known:
                raise

    # libFuzzer's own RSS check reads getrusage's ru_maxrss, which Linux carries across exec:
    # a runner started by a large process (pytest late in a suite) would report its parent's
    # peak and stop at once with a false "out-of-memory". RLIMIT_DATA (cap_heap) is the bound.
    if not any(argument.startswith("-rss_limit_mb=") for argument in arguments):
        arguments = ["-rss_limit_mb=0", *arguments]
    atheris.Setup([argv[0], *arguments], test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
