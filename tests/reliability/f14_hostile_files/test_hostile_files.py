"""Family 14 (docs/reliability.md) and family 4 extended (issue 12): the hostile-file corpus.

A realistic log directory (tests/support/hostile_dir.py: two user topics in small segments,
idempotent and transactional producers with committed and aborted transactions, lz4 batches, control
batches, a consumer group committing plainly and inside transactions, producer snapshots) is written
twice by a subprocess: closed cleanly, and stopped uncleanly. Every case of the catalogue
(tests/support/hostile_cases.py, damage in tests/support/hostile_damage.py) damages a fresh copy of
one of them: every .log header field (flipped, or forged with the CRC recomputed) in data and
control batches at the start, middle and tail, truncations of the tail, every derived file (.index,
.timeindex, .txnindex, .snapshot, both checkpoints, the clean-shutdown marker, eoslog.meta forged
with valid CRCs), the lock file, stray names, sparse 1 GiB files, symlinks out of the directory, an
lz4 bomb, and seeded bit flips anywhere. The runner (tests/support/hostile_runner.py) opens and
reads each copy in a child process with an alarm and a memory cap, and classifies the outcome.

The test prints a table of outcome counts per file kind and the seed, and fails if any case
ends in a class other than ok, ok after a reported torn-tail cut, or a typed error naming a
file (docs/reliability.md family 14: silent wrong result 0, data destroyed 0, crash 0, hang 0,
untyped error 0, allocation over max(256 MB, 4x bytes on disk) 0; tests/support/hostile_runner.py
lists every class). Each failing case is listed with its name (variant/kind/what), how the
offline scan and the broker fared on their own, and a detail. `HOSTILE_SEED=n` replays the
random flips of a run, `HOSTILE_CASES=name1,name2` reruns only those cases, and
`pytest -m soak` (`HOSTILE_SOAK_FLIPS`, default 2,000 per variant) runs many more flips.

CI size: ~400 cases, 30-70 s on a loaded 2-core machine (one runner process; each case is a
fork, ~0.1 s).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator

import pytest

from tests.support import REPO_ROOT
from tests.support.hostile_damage import CUT, OK_TYPED, REFUSE, Case
from tests.support.hostile_runner import ACCEPTED, CLASSES, FAILURES, Expected, classify

CI_RANDOM_FLIPS = 12  # per variant, on top of the named cases
SOAK_RANDOM_FLIPS = 2000
CASE_TIMEOUT_S = 20
RUN_TIMEOUT_S = 3600
DETAIL_CHARS = 150


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """tmpfs when there is one (hundreds of copies and opens with fsyncs), else tmp_path."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        directory = tempfile.mkdtemp(prefix="eoslog-hostile-", dir="/dev/shm")
        yield directory
        shutil.rmtree(directory, ignore_errors=True)
    else:
        yield os.fspath(tmp_path_factory.mktemp("hostile"))


def _python(code: str, *args: str, timeout: float) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": REPO_ROOT},
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


@pytest.fixture(scope="module")
def pristine(scratch: str) -> dict[str, dict[str, object]]:
    """Both pristine directories and their writers' ledgers."""
    variants = {}
    for mode in ("clean", "unclean"):
        root = os.path.join(scratch, f"pristine-{mode}")
        out = _python(
            "from tests.support import hostile_dir; hostile_dir.writer_main()",
            root,
            mode,
            timeout=120,
        )
        variants[mode] = {"root": root, "ledger": json.loads(out.splitlines()[-1])}
    return variants


def run_corpus(
    scratch: str,
    variants: dict[str, dict[str, object]],
    seed: int,
    random_flips: int,
    *,
    view: bool = False,
) -> list[dict[str, object]]:
    """Run the runner over the catalogue (or the HOSTILE_CASES names); one dict per case."""
    names = [n for n in os.environ.get("HOSTILE_CASES", "").split(",") if n]
    work = os.path.join(scratch, "work")
    os.makedirs(work, exist_ok=True)
    spec = {
        "work": work,
        "timeout_s": CASE_TIMEOUT_S,
        "seed": seed,
        "random_flips": random_flips,
        "variants": variants,
        "names": names,
        "view": view,
    }
    spec_path = os.path.join(scratch, "spec.json")
    with open(spec_path, "w") as file:
        json.dump(spec, file)
    out = _python(
        "from tests.support import hostile_runner; hostile_runner.main()",
        spec_path,
        timeout=RUN_TIMEOUT_S,
    )
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    header, outcomes = lines[0], lines[1:]
    assert len(outcomes) == header["cases"], "the runner finished every case"
    return outcomes


def table(outcomes: list[dict[str, object]]) -> str:
    """Counts per outcome class (columns, those that occurred) and file kind (rows)."""
    kinds = sorted({str(o["kind"]) for o in outcomes})
    counts = Counter((str(o["kind"]), str(o["outcome"])) for o in outcomes)
    columns = [c for c in CLASSES if any(counts[(k, c)] for k in kinds)]
    width = max(len(k) for k in [*kinds, "total"]) + 2
    lines = ["file kind".ljust(width) + " | " + " | ".join(columns)]
    for kind in [*kinds, "total"]:
        cells = [
            str(
                sum(counts[(k, column)] for k in kinds)
                if kind == "total"
                else counts[(kind, column)]
            ).rjust(len(column))
            for column in columns
        ]
        lines.append(kind.ljust(width) + " | " + " | ".join(cells))
    totals = Counter(str(o["outcome"]) for o in outcomes)
    lines.append("every class: " + ", ".join(f"{c} {totals[c]}" for c in CLASSES))
    return "\n".join(lines)


def report(outcomes: list[dict[str, object]], seed: int) -> list[str]:
    """Print the table and the failing cases; return the failures."""
    print(f"seed={seed} cases={len(outcomes)}")
    print(table(outcomes))
    failing = sorted(
        (o for o in outcomes if o["outcome"] in FAILURES),
        key=lambda o: (FAILURES.index(str(o["outcome"])), str(o["kind"]), str(o["name"])),
    )
    failures = [
        f"{o['outcome']}: {o['name']}: ({o['readers']}) {str(o['detail'])[:DETAIL_CHARS]}"
        for o in failing
    ]
    for line in failures:
        print("  " + line)
    slowest = max(outcomes, key=lambda o: float(o["seconds"]))  # type: ignore[arg-type]
    print(f"slowest case {slowest['name']} {float(slowest['seconds']):.2f} s")  # type: ignore[arg-type]
    return failures


def test_every_damaged_or_forged_file_is_read_correctly_or_refused_with_a_typed_error(
    scratch: str, pristine: dict[str, dict[str, object]]
) -> None:
    seed = int(os.environ.get("HOSTILE_SEED", random.randrange(1 << 30)))
    outcomes = run_corpus(scratch, pristine, seed, CI_RANDOM_FLIPS)
    failures = report(outcomes, seed)
    assert {str(o["outcome"]) for o in outcomes} <= set(CLASSES)
    assert not failures, f"{len(failures)} of {len(outcomes)} cases failed (seed={seed})"
    assert any(o["outcome"] in ACCEPTED for o in outcomes)


def test_every_damaged_or_forged_file_read_through_the_command_line_view_is_left_unchanged(
    scratch: str, pristine: dict[str, dict[str, object]]
) -> None:
    # The same corpus, opened as the command line's read commands open a directory (an
    # overlay file system, Broker(view=True), no append: eoslog.cli.output
    # reading_admin): read correctly or refused with a typed error, as the owner's open is,
    # and not one byte of the directory changed, whatever the open recovered.
    seed = int(os.environ.get("HOSTILE_SEED", random.randrange(1 << 30)))
    outcomes = run_corpus(scratch, pristine, seed, CI_RANDOM_FLIPS, view=True)
    failures = report(outcomes, seed)
    assert not failures, f"{len(failures)} of {len(outcomes)} cases failed (seed={seed})"
    assert any(o["outcome"] in ACCEPTED for o in outcomes)


# --- the classifier on its own: every class is reachable -------------------------------------


def _seen(**changes: object) -> dict[str, object]:
    """An attempt that saw exactly EXPECTED, with `changes`."""
    seen: dict[str, object] = {
        "scan_records": EXPECTED.records,
        "scan_error": None,
        "records": EXPECTED.records,
        "committed": EXPECTED.committed,
        "log_end": EXPECTED.log_end,
        "cuts": {"orders-0": 0},
        "backwards": [],
        "error": None,
        "phase": "done",
    }
    seen.update(changes)
    return seen


EXPECTED = Expected(
    records={"orders-0": [[0, None, "a"], [1, None, "b"], [2, None, "c"]]},
    committed={"g": {"orders-0": 2}},
    log_end={"orders-0": 3},
    log_end_min={"orders-0": 3},
)
TORN = Case("unclean/.log/torn", ".log", "unclean", lambda target: {}, CUT)
MIDDLE = Case("clean/.log/middle", ".log", "clean", lambda target: {}, OK_TYPED)
BAD_META = Case("clean/eoslog.meta/bad", "eoslog.meta", "clean", lambda target: {}, REFUSE)
TYPED = {"kind": "typed", "type": "CorruptRecordError", "message": "orders-0/0.log byte 7"}


@pytest.mark.parametrize(
    ("case", "seen", "status", "problems", "expected"),
    [
        (MIDDLE, _seen(), 0, {}, "ok"),
        (MIDDLE, None, signal.SIGSEGV, {}, "crash"),
        (MIDDLE, None, signal.SIGALRM, {}, "hang"),
        (MIDDLE, None, 3 << 8, {}, "crash"),
        (MIDDLE, _seen(error={**TYPED, "kind": "memory"}), 0, {}, "allocation over bound"),
        (MIDDLE, _seen(), 0, {"data destroyed": "x"}, "data destroyed"),
        (MIDDLE, _seen(), 0, {"wrote outside the directory": "x"}, "wrote outside the directory"),
        (MIDDLE, _seen(records={"orders-0": [[0, None, "a"]]}), 0, {}, "silent wrong result"),
        (MIDDLE, _seen(scan_records={"orders-0": [[0, None, "z"]]}), 0, {}, "silent wrong result"),
        (MIDDLE, _seen(backwards=["orders-0: 2 then 0"]), 0, {}, "silent wrong result"),
        (MIDDLE, _seen(committed={"g": {"orders-0": 1}}), 0, {}, "silent wrong result"),
        (MIDDLE, _seen(log_end={"orders-0": 9}), 0, {}, "silent wrong result"),
        (MIDDLE, _seen(error={**TYPED, "kind": "untyped"}), 0, {}, "untyped error"),
        (
            MIDDLE,
            _seen(error=TYPED, phase="open", records={}),
            0,
            {"a failed open changed the directory": "x"},
            "a failed open changed the directory",
        ),
        (MIDDLE, _seen(error={**TYPED, "message": "bad"}), 0, {}, "typed error naming no file"),
        (MIDDLE, _seen(error=TYPED, phase="open", records={}), 0, {}, "typed error"),
        (TORN, _seen(error=TYPED, phase="open", records={}), 0, {}, "refused a torn tail"),
        (BAD_META, _seen(), 0, {}, "accepted an invalid file"),
        (BAD_META, _seen(error=TYPED, phase="read"), 0, {}, "accepted an invalid file"),
        (BAD_META, _seen(error=TYPED, phase="open", records={}), 0, {}, "typed error"),
        (
            TORN,
            _seen(
                records={"orders-0": [[0, None, "a"]]},
                cuts={"orders-0": 9},
                log_end={"orders-0": 1},
            ),
            0,
            {},
            "ok after a reported cut",
        ),
        (
            TORN,
            _seen(records={"orders-0": [[0, None, "a"]]}, log_end={"orders-0": 1}),
            0,
            {},
            "silent wrong result",
        ),
    ],
)
def test_the_classifier_tells_every_outcome_class_apart(
    case: Case, seen: dict[str, object] | None, status: int, problems: dict[str, str], expected: str
) -> None:
    cut = {"orders-0": 1} if case is TORN else {}
    assert classify(case, seen, status, EXPECTED, cut, problems, "")[0] == expected


@pytest.mark.soak
def test_soak_random_bit_flips_anywhere_are_read_correctly_or_refused(
    scratch: str, pristine: dict[str, dict[str, object]]
) -> None:
    seed = int(os.environ.get("HOSTILE_SEED", random.randrange(1 << 30)))
    flips = int(os.environ.get("HOSTILE_SOAK_FLIPS", SOAK_RANDOM_FLIPS))
    outcomes = run_corpus(scratch, pristine, seed, flips)
    failures = report(outcomes, seed)
    assert not failures, f"{len(failures)} of {len(outcomes)} cases failed (seed={seed})"
