"""Family 14 (docs/reliability.md), part 4: running the cases and classifying what happened.

One runner process (started by tests/reliability/f14_hostile_files/test_hostile_files.py)
imports eoslog once, then for each case copies the pristine directory into a sandbox, applies
the damage, and forks a child that runs the attempt (tests/support/hostile_dir.py: scan, open,
read, committed offsets, append, close) under an alarm (SIGALRM with its default action: a hang
anywhere, C included, ends the child) and an RLIMIT_AS cap. The child's peak RSS comes from
wait4. A crash or hang kills only that child, so the runner goes on with the next case. After
the attempt the runner compares the sandbox with what it held before: every batch that was
intact before must still be in place (data destroyed), and nothing outside the log directory may
have changed (escape). An attempt that came out ok is followed by a second one on what it left.

Outcome classes, worst first (the test asserts that only the last three occur):
- crash, hang, allocation over bound (peak RSS over max(256 MiB, 4x the bytes on disk), or a
  MemoryError under the address-space cap);
- wrote outside the directory, data destroyed;
- silent wrong result (a reader returned a record that is not in the expected view, lost one
  without an error or a reported cut, moved backwards, or the log end or committed offsets
  moved);
- the next open differs (after an ok attempt, a second one on what it left fails or sees
  other records than the first plus its append);
- untyped error (not a KafkaException);
- a failed open changed the directory (segments or directories added or removed by an open
  that then raised);
- typed error naming no file; refused a torn tail (a typed error where only a cut is right);
  accepted an invalid file (an open that succeeded where only a refusal is right);
- typed error, ok after a reported cut, ok.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import shutil
import signal
import stat
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from tests.support.hostile_cases import catalogue
from tests.support.hostile_damage import ABSOLUTE_BAIT, OK_TYPED, REFUSE, Case, Target
from tests.support.hostile_dir import APPENDED, Batch, attempt, read_layout, user_partitions

FAILURES = (
    "crash",
    "hang",
    "allocation over bound",
    "wrote outside the directory",
    "data destroyed",
    "the view changed the directory",
    "silent wrong result",
    "the next open differs",
    "untyped error",
    "a failed open changed the directory",
    "typed error naming no file",
    "refused a torn tail",
    "accepted an invalid file",
)
ACCEPTED = ("typed error", "ok after a reported cut", "ok")
CLASSES = FAILURES + ACCEPTED
# Errors about what the caller asked for, not about a file: a topic a damaged or forged meta
# no longer lists is unknown, and saying so is right.
NOT_ABOUT_A_FILE = frozenset({"UnknownTopicOrPartitionError"})
RSS_BOUND_MIN = 256 << 20
# The child's address-space cap above the runner's: room for mapping a 1 GiB sparse file, but
# an allocation that size fails at once (MemoryError) instead of paging the machine.
ADDRESS_SPACE_EXTRA = 3 << 29
FILE_WORDS = (".log", ".index", ".timeindex", ".txnindex", ".snapshot", "checkpoint", "eoslog.meta")
FILE_WORDS += (".lock", "cleanshutdown", "/")


@dataclass
class Expected:
    records: dict[str, list[list[Any]]]
    committed: dict[str, dict[str, int]]
    log_end: dict[str, int]
    # The writer's log ends; an open after an unclean stop may add a marker above them.
    log_end_min: dict[str, int]

    def record_count(self) -> int:
        return max(len(found) for found in self.records.values())


@dataclass
class Variant:
    root: str
    layout: dict[str, list[Batch]]
    pristine: dict[tuple[str, int], bytes]  # (file, position) -> the batch's bytes
    expected: Expected


# --- the child --------------------------------------------------------------------------------


def run_attempt(
    root: str, result_path: str, records: int, timeout_s: int, view: bool = False
) -> tuple[int, int]:
    """Fork a child that runs attempt(root) (through the command line's view with view) and
    writes its JSON to result_path; returns (wait status, peak RSS in bytes)."""
    limit = _address_space() + ADDRESS_SPACE_EXTRA
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(timeout_s)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            seen = attempt(root, records, view)
            with open(result_path, "w") as file:
                json.dump(seen, file)
        except BaseException:
            code = 3
        os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    return status, usage.ru_maxrss * 1024


def _address_space() -> int:
    with open("/proc/self/status") as file:
        for line in file:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("VmSize in /proc/self/status")


# --- the sandbox ------------------------------------------------------------------------------


def batch_bytes(root: str, batch: Batch) -> bytes | None:
    try:
        descriptor = os.open(os.path.join(root, batch.file), os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.pread(descriptor, batch.size, batch.position)
    except OSError:
        return None
    finally:
        os.close(descriptor)


def shape(root: str) -> set[str]:
    """The directories and segment files under root: what a failed open must leave alone."""
    found = set()
    for directory, names, files in os.walk(root):
        found.update(os.path.relpath(os.path.join(directory, n), root) + "/" for n in names)
        found.update(
            os.path.relpath(os.path.join(directory, n), root) for n in files if n.endswith(".log")
        )
    return found


def disk_bytes(root: str) -> int:
    total = 0
    for directory, _, names in os.walk(root):
        for name in names:
            with contextlib.suppress(OSError):  # a dangling symlink holds nothing
                total += os.stat(os.path.join(directory, name)).st_blocks * 512
    return total


def tree_state(root: str) -> dict[str, tuple[str, int, bytes]]:
    """Every name below root (not following symlinks): its kind, size and, for a regular
    file, the hash of its bytes (sparse files hashed by their data only would miss a write:
    the whole content is hashed, read in pieces)."""
    state: dict[str, tuple[str, int, bytes]] = {}
    for directory, names, files in os.walk(root):
        for name in [*names, *files]:
            path = os.path.join(directory, name)
            status = os.lstat(path)
            digest = b""
            if stat.S_ISREG(status.st_mode) and status.st_blocks:
                digest = _file_digest(path)
            kind = stat.filemode(status.st_mode)
            state[os.path.relpath(path, root)] = (kind, status.st_size, digest)
    return state


def _file_digest(path: str) -> bytes:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.digest()


def outside_state(sandbox: str) -> dict[str, bytes]:
    """Every file beside the log directory (the bait), and the sandbox's own entries."""
    state: dict[str, bytes] = {"": "\n".join(sorted(os.listdir(sandbox))).encode()}
    for directory, _, names in os.walk(os.path.join(sandbox, "outside")):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as file:
                state[os.path.relpath(path, sandbox)] = file.read()
    state["abs"] = (
        b"present"
        if any(n.startswith(os.path.basename(ABSOLUTE_BAIT)) for n in os.listdir("/tmp"))
        else b""
    )
    return state


# --- classification -------------------------------------------------------------------------


@dataclass
class Outcome:
    name: str
    kind: str
    variant: str
    outcome: str
    detail: str
    seconds: float
    rss_mb: float
    readers: str  # each reader's class on its own: which one needs the fix


def classify(
    case: Case,
    seen: dict[str, Any] | None,
    status: int,
    expected: Expected,
    cut: dict[str, int],
    problems: dict[str, str],
    over_bound: str,
) -> tuple[str, str]:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number == signal.SIGALRM:
            return "hang", "no answer before the alarm"
        return "crash", f"killed by {signal.Signals(number).name}"
    if seen is None:
        return "crash", f"the child exited {os.WEXITSTATUS(status)} with no result"
    errors = [e for e in (seen["scan_error"], seen["error"]) if e]
    if over_bound or any(e["kind"] == "memory" for e in errors):
        return "allocation over bound", over_bound or _text(errors)
    for label in (
        "wrote outside the directory",
        "data destroyed",
        "the view changed the directory",
    ):
        if label in problems:
            return label, problems[label]
    consumer_cut = cut if "cut" in case.expect else {}
    scan_cut = cut if "cut" in case.expect or case.partial_tail else {}
    # Damage that adds offsets legitimately (a well-formed batch appended, a marker recovery
    # writes again) says by how many, as `grow:<partition>`: the log end may be that much
    # higher.
    grown = {key[5:]: value for key, value in cut.items() if key.startswith("grow:")}
    wrong = _wrong(seen, expected, consumer_cut, scan_cut, grown)
    if wrong:
        return "silent wrong result", wrong
    untyped = [e for e in errors if e["kind"] != "typed"]
    if untyped:
        return "untyped error", _text(untyped)
    label = "a failed open changed the directory"
    if label in problems:
        return label, f"{problems[label]}; {_text(errors)}"
    nameless = [
        e
        for e in errors
        if not any(w in e["message"] for w in FILE_WORDS) and e["type"] not in NOT_ABOUT_A_FILE
    ]
    if nameless:
        return "typed error naming no file", _text(nameless)
    if seen["error"] and case.expect == frozenset({"cut"}):
        return "refused a torn tail", _text([seen["error"]])
    if case.expect == frozenset({"typed at open"}) and not (
        seen["error"] and seen["phase"] == "open"
    ):
        return "accepted an invalid file", f"open succeeded; {_text(errors)}"
    if errors:
        return "typed error", _text(errors)
    if any(seen["cuts"].values()) and _missing_any(seen, expected):
        return "ok after a reported cut", f"cut {seen['cuts']}"
    return "ok", ""


def _text(errors: Iterable[dict[str, str]]) -> str:
    return "; ".join(f"{e['type']}: {e['message'][:160]}" for e in errors)


def _missing_any(seen: dict[str, Any], expected: Expected) -> bool:
    return any(
        len(seen["records"].get(key, [])) < len(found) for key, found in expected.records.items()
    )


def _wrong(
    seen: dict[str, Any],
    expected: Expected,
    cut: dict[str, int],
    scan_cut: dict[str, int],
    grown: dict[str, int],
) -> str:
    """Why what the readers returned is wrong, or "" (see the module docstring)."""
    problems = []
    if seen["backwards"]:
        problems.append(f"consumer went backwards or looped: {seen['backwards']}")
    readers = (("scan", seen["scan_records"], seen["scan_error"], False, scan_cut),)
    if seen["phase"] not in ("scan", "open"):
        readers += (("consumer", seen["records"], seen["error"], True, cut),)
    for reader, records, error, reported, may_cut in readers:
        for key, wanted in expected.records.items():
            found = records.get(key, [])
            problem = _compare(key, wanted, found, error, may_cut, reported, seen)
            if problem:
                problems.append(f"{reader} {problem}")
    if seen["phase"] in ("append", "close", "done") or (
        seen["phase"] == "offsets" and not seen["error"]
    ):
        problems += _compare_offsets(seen, expected, cut)
    if seen["phase"] not in ("scan", "open"):
        for key, end in expected.log_end.items():
            found = seen["log_end"].get(key)
            if found is None and seen["error"]:
                continue  # the error came before this partition was reached
            low = min(expected.log_end_min[key], cut.get(key, end))
            if found is None or not low <= found <= end + grown.get(key, 0):
                problems.append(f"log end of {key} is {found}, not {end}")
    return "; ".join(problems)[:600]


def _compare(
    key: str,
    wanted: list[list[Any]],
    found: list[list[Any]],
    error: dict[str, str] | None,
    cut: dict[str, int],
    reported: bool,
    seen: dict[str, Any],
) -> str:
    by_offset = {record[0]: record for record in wanted}
    wrong = [r for r in found if by_offset.get(r[0]) != r]
    if wrong:
        return f"{key}: {len(wrong)} records not in the expected view, first {wrong[0]}"
    if error:
        return ""  # an error explains what is missing
    got = {record[0] for record in found}
    missing = [r[0] for r in wanted if r[0] not in got]
    if not missing:
        return ""
    allowed = key in cut and min(missing) >= cut[key]
    if allowed and (not reported or seen["cuts"].get(key, 0) > 0):
        return ""
    return (
        f"{key}: {len(missing)} of {len(wanted)} records missing without an error, "
        f"from {missing[0]}"
    )


def _compare_offsets(seen: dict[str, Any], expected: Expected, cut: dict[str, int]) -> list[str]:
    problems = []
    offsets_cut = seen["cuts"].get("__consumer_offsets-0", 0) > 0
    for group, wanted in expected.committed.items():
        found = seen["committed"].get(group, {})
        if found == wanted:
            continue
        rolled_back = all(found.get(k, -1) <= v for k, v in wanted.items()) and set(found) <= set(
            wanted
        )
        if "__consumer_offsets-0" in cut and offsets_cut and rolled_back:
            continue
        problems.append(f"committed offsets of {group} are {found}, not {wanted}")
    return problems


# --- one case ---------------------------------------------------------------------------------


def run_case(
    case: Case, variant: Variant, work: str, timeout_s: int, view: bool = False
) -> Outcome:
    started = time.monotonic()
    sandbox = os.path.join(work, "case")
    shutil.rmtree(sandbox, ignore_errors=True)
    os.makedirs(os.path.join(sandbox, "outside"))
    with open(os.path.join(sandbox, "outside", "bait.txt"), "wb") as file:
        file.write(b"outside the log directory\n")
    root = os.path.join(sandbox, "root")
    shutil.copytree(variant.root, root, symlinks=True)
    target = Target(root, os.path.join(sandbox, "outside"), variant.layout)
    cut = case.damage(target)
    intact = [
        batch
        for batches in variant.layout.values()
        for batch in batches
        if batch_bytes(root, batch) == variant.pristine[(batch.file, batch.position)]
    ]
    before = outside_state(sandbox)
    shape_before = shape(root)
    bound = max(RSS_BOUND_MIN, 4 * disk_bytes(root))
    tree_before = tree_state(root) if view else {}
    records = variant.expected.record_count()
    status, rss, seen = attempt_once(root, work, records, timeout_s, view)
    problems = _sandbox_problems(case, variant, root, sandbox, before, intact, cut)
    tree_after = tree_state(root) if view else {}
    if tree_after != tree_before:
        keys = set(tree_before) | set(tree_after)
        changed = sorted(k for k in keys if tree_before.get(k) != tree_after.get(k))
        problems["the view changed the directory"] = f"changed: {changed[:5]}"
    if seen is not None and seen["error"] and seen["phase"] == "open":
        added, removed = sorted(shape(root) - shape_before), sorted(shape_before - shape(root))
        if added or removed:
            problems["a failed open changed the directory"] = (
                f"{len(added)} added, first {added[:3]}; "
                f"{len(removed)} removed, first {removed[:3]}"
            )
    over = f"peak RSS {rss >> 20} MiB over the bound {bound >> 20} MiB" if rss > bound else ""
    outcome, detail = classify(case, seen, status, variant.expected, cut, problems, over)
    if outcome in ("ok", "ok after a reported cut") and not view:  # a view leaves no change
        assert seen is not None
        differs = reopen_differs(root, work, seen, variant, timeout_s)
        if differs:
            outcome, detail = "the next open differs", differs
    readers = by_reader(case, seen, variant.expected, cut) if seen is not None else ""
    shutil.rmtree(sandbox, ignore_errors=True)
    seconds = time.monotonic() - started
    return Outcome(
        case.name, case.kind, case.variant, outcome, detail, seconds, rss / 2**20, readers
    )


def attempt_once(
    root: str, work: str, records: int, timeout_s: int, view: bool = False
) -> tuple[int, int, dict[str, Any] | None]:
    """(wait status, peak RSS, what the attempt saw or None if it died)."""
    result_path = os.path.join(work, "result.json")
    if os.path.exists(result_path):
        os.unlink(result_path)
    status, rss = run_attempt(root, result_path, records, timeout_s, view)
    if not os.path.exists(result_path):
        return status, rss, None
    with open(result_path) as file:
        seen: dict[str, Any] = json.load(file)
    return status, rss, seen


def reopen_differs(
    root: str, work: str, seen: dict[str, Any], variant: Variant, timeout_s: int
) -> str:
    """Why a second attempt on what the first left does not see the same thing plus the
    record the first appended, or "" (docs/reliability.md invariant 8: recovery is deterministic;
    an open that "succeeded" must not have left damage for the next one)."""
    status, _, again = attempt_once(root, work, variant.expected.record_count() + 1, timeout_s)
    if again is None or status != 0:
        return f"the second open died (status {status})"
    errors = [e for e in (again["scan_error"], again["error"]) if e]
    if errors:
        return f"the second open failed: {_text(errors)}"
    wanted = {key: list(found) for key, found in seen["records"].items()}
    appended = [seen["log_end"]["orders-0"], None, APPENDED.decode()]
    wanted["orders-0"] = [*wanted.get("orders-0", []), appended]
    for reader in ("scan_records", "records"):
        for key, found in wanted.items():
            if again[reader].get(key, []) != found:
                got = again[reader].get(key, [])
                return f"the second open's {reader} of {key}: {len(got)} records, not {len(found)}"
    if again["committed"] != seen["committed"]:
        return f"the second open's committed offsets are {again['committed']}"
    return ""


def by_reader(case: Case, seen: dict[str, Any], expected: Expected, cut: dict[str, int]) -> str:
    """The class of the offline scan alone and of the broker (open, consumer, committed
    offsets) alone, ignoring the sandbox checks."""
    scan_only = {**seen, "phase": "open", "error": None, "cuts": {}}
    broker_only = {**seen, "scan_records": expected.records, "scan_error": None}
    # The scan reads no eoslog.meta: a meta only the broker must refuse is nothing to it.
    scan_case = replace(case, expect=OK_TYPED) if case.expect == REFUSE else case
    scan = classify(scan_case, scan_only, 0, expected, cut, {}, "")[0]
    broker = classify(case, broker_only, 0, expected, cut, {}, "")[0]
    return f"scan: {scan}; broker: {broker}"


def _sandbox_problems(
    case: Case,
    variant: Variant,
    root: str,
    sandbox: str,
    before: dict[str, bytes],
    intact: list[Batch],
    cut: dict[str, int],
) -> dict[str, str]:
    problems = {}
    after = outside_state(sandbox)
    if after != before:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        problems["wrote outside the directory"] = f"changed: {changed} ({after.get('', b'')!r})"
        for name in os.listdir("/tmp"):
            if name.startswith(os.path.basename(ABSOLUTE_BAIT)):
                shutil.rmtree(os.path.join("/tmp", name), ignore_errors=True)
    may_cut = cut if "cut" in case.expect else {}
    directory_of = {b: d for d, batches in variant.layout.items() for b in batches}
    gone = [
        batch
        for batch in intact
        if batch_bytes(root, batch) != variant.pristine[(batch.file, batch.position)]
        and not (
            directory_of[batch] in may_cut and batch.base_offset >= may_cut[directory_of[batch]]
        )
    ]
    if gone:
        problems["data destroyed"] = (
            f"{len(gone)} intact batches gone, first {gone[0].file}@{gone[0].position} "
            f"(offsets {gone[0].base_offset}-{gone[0].last_offset})"
        )
    return problems


# --- set-up and the protocol ------------------------------------------------------------------


def load_variant(root: str, ledger: dict[str, Any], work: str, timeout_s: int) -> Variant:
    """The pristine directory's layout and batch bytes, and the expected view: what an
    attempt on an undamaged copy sees, checked against the writer's ledger first."""
    layout = read_layout(root)
    pristine = {}
    for batches in layout.values():
        for batch in batches:
            data = batch_bytes(root, batch)
            assert data is not None
            pristine[(batch.file, batch.position)] = data
    copy = os.path.join(work, "baseline")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(root, copy)
    result_path = os.path.join(work, "baseline.json")
    status, _ = run_attempt(copy, result_path, 10_000, timeout_s)
    assert status == 0, f"the baseline attempt on {root} failed: status {status}"
    with open(result_path) as file:
        seen = json.load(file)
    shutil.rmtree(copy)
    check_baseline(seen, ledger)
    expected = Expected(seen["records"], seen["committed"], seen["log_end"], ledger["log_end"])
    return Variant(root, layout, pristine, expected)


def check_baseline(seen: dict[str, Any], ledger: dict[str, Any]) -> None:
    """The undamaged copy reads back exactly the committed values of the ledger, in order,
    by both readers; the committed offsets and log ends are the ledger's."""
    assert seen["error"] is None and seen["scan_error"] is None, seen
    assert not any(seen["cuts"].values()), seen["cuts"]
    for topic, partition in user_partitions():
        key = f"{topic}-{partition}"
        wanted = [v for t, p, v, ok in ledger["values"] if (t, p) == (topic, partition) and ok]
        assert [r[2] for r in seen["records"][key]] == wanted, key
        assert seen["scan_records"][key] == seen["records"][key], key
    assert seen["committed"] == ledger["committed"], (seen["committed"], ledger["committed"])
    # An open after an unclean stop may finish the last transaction again (a second marker):
    # the log end can only grow.
    assert all(seen["log_end"][k] >= end for k, end in ledger["log_end"].items()), seen["log_end"]


def warm_up(root: str, work: str) -> None:
    """One attempt in this process, so that every module the attempt imports lazily is
    loaded before the children are forked (each would pay ~0.5 s otherwise)."""
    copy = os.path.join(work, "warm-up")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(root, copy)
    attempt(copy, 10_000)
    shutil.rmtree(copy)


def main() -> None:
    """`python -c 'from tests.support import hostile_runner; hostile_runner.main()' SPEC_JSON`
    (REPO_ROOT on PYTHONPATH): run the cases the spec names (all if none), printing one JSON
    line per case."""
    with open(sys.argv[1]) as file:
        spec = json.load(file)
    work, timeout_s = spec["work"], spec["timeout_s"]
    warm_up(next(iter(spec["variants"].values()))["root"], work)
    variants = {
        name: load_variant(entry["root"], entry["ledger"], work, timeout_s)
        for name, entry in spec["variants"].items()
    }
    layouts = {name: variant.layout for name, variant in variants.items()}
    roots = {name: variant.root for name, variant in variants.items()}
    cases = catalogue(layouts, roots, spec["seed"], spec["random_flips"])
    wanted = set(spec.get("names") or [case.name for case in cases])
    print(json.dumps({"cases": len([c for c in cases if c.name in wanted])}), flush=True)
    for case in cases:
        if case.name in wanted:
            outcome = run_case(
                case, variants[case.variant], work, timeout_s, spec.get("view", False)
            )
            print(json.dumps(outcome.__dict__), flush=True)
