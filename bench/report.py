"""The report writer: every RESULTS-<area>.md has the same header (command, date, codec under
test, source tree), machine description (CPU, memory, Python, package versions, the file
system under --tmp, load average), method and targets table, then the script's sections
(bench/summary.py reads the targets table under TARGETS_HEADING). A script returns a `Report`
of `Section`s from its `measure()`; harness.main() renders and writes it."""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path as FilePath

BENCH_DIR = FilePath(__file__).resolve().parent
TARGETS_HEADING = "## Targets (docs/bench.md)"


@dataclass
class Section:
    title: str
    lines: list[str]
    targets: list[str] = field(default_factory=list)  # rows of the targets table


@dataclass
class Report:
    """One RESULTS-<area>.md: the title, the method (Markdown from bench/prose.py), the
    packages whose versions the machine section names, and the sections."""

    title: str
    method: str
    packages: Sequence[str]
    sections: list[Section]
    data_disk: bool = True  # name the file system under --tmp
    targets_heading: str = TARGETS_HEADING


def render(report: Report, args: argparse.Namespace, seconds: float, load_start: str) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# {report.title}",
        "",
        f"Command: `{command_line(args.argv)}`  ",
        f"Date: {now}; wall time {seconds:.0f} s  ",
        codec_line() + "  ",
        tree_line(),
        "",
        "## Machine",
        "",
        *machine_lines(report.packages),
        *([f"- data: {disk_line(args.tmp)}"] if report.data_disk else []),
        f"- load average (1, 5, 15 min) at the start: {load_start}; at the end: {load()} "
        "(other processes share this machine)",
        "",
        "## Method",
        "",
        report.method.strip(),
        "",
        report.targets_heading,
        "",
        "| path | figure | target | measured (median; min – max) | status |",
        "|---|---|---|---|---|",
        *(row for section in report.sections for row in section.targets),
    ]
    for section in report.sections:
        body = list(section.lines)
        while body and not body[-1]:
            body.pop()
        lines += ["", f"## {section.title}", "", *body]
    return "\n".join(lines).rstrip() + "\n"


# --- the machine --------------------------------------------------------------------------------


def machine_lines(packages: Sequence[str]) -> list[str]:
    cpu = _proc_field("/proc/cpuinfo", "model name", lambda v: v) or platform.processor()
    memory = _proc_field("/proc/meminfo", "MemTotal", lambda v: f"{int(v.split()[0]) / 2**20:.1f}")
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    versions = ", ".join(f"{name} {package_version(name)}" for name in packages)
    return [
        f"- CPU: {cpu or 'unknown'}; cores: {os.cpu_count()} (usable by this process: {usable})",
        f"- memory: {f'{memory} GiB' if memory else 'unknown'}",
        f"- {platform.python_implementation()} {platform.python_version()} on "
        f"{platform.platform()}",
        f"- packages: {versions}",
    ]


def _proc_field(path: str, name: str, parse: Callable[[str], str]) -> str:
    with contextlib.suppress(OSError, ValueError):
        for line in FilePath(path).read_text().splitlines():
            if line.startswith(name):
                return parse(line.split(":", 1)[1].strip())
    return ""


def package_version(name: str) -> str:
    try:
        found = metadata.version(name)
    except metadata.PackageNotFoundError:
        found = "not installed"
    if name == "eoslog":
        import eoslog

        source = FilePath(eoslog.__file__).parent
        commit = git_output("rev-parse", "--short", "HEAD")
        at = f", commit {commit.strip()}" if commit is not None else ""
        found = (
            f"{eoslog.__version__} (imported from {source}{at}; installed distribution: {found})"
        )
    return found


def git_output(*args: str) -> str | None:
    """What `git -C bench/ ARGS` prints, or None if git is missing or fails."""
    try:
        done = subprocess.run(
            ["git", "-C", str(BENCH_DIR), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def command_line(argv: Sequence[str]) -> str:
    env = [
        f"{k}={os.environ[k]}" for k in ("EOSLOG_NO_EXTENSIONS", "PYTHONPATH") if k in os.environ
    ]
    python = os.path.relpath(sys.executable)
    if python.startswith(".."):
        python = "python"
    return " ".join([*env, shlex.join([python, sys.argv[0], *argv])])


def codec_line() -> str:
    from eoslog.record import USING_EXTENSIONS, codec, primitives

    backend = primitives.crc32c_backend()
    line = f"Codec under test: `{codec.__name__}` (CRC32C backend: {backend})."
    if not USING_EXTENSIONS:
        line += (
            " **The pure-Python twin is selected (EOSLOG_NO_EXTENSIONS): these numbers check the"
            " harness, they are not eoslog's performance.**"
        )
    return line


def tree_line() -> str:
    status = git_output("status", "--porcelain", "--untracked-files=no")
    if status is None:
        return ""
    dirty = "uncommitted changes to tracked files" if status.strip() else "clean"
    return f"Source tree: {dirty} (the measured code is the installed package named below)."


def disk_line(tmp: str) -> str:
    """The file system under the data directory and the kernel's write-back thresholds."""
    path = os.path.realpath(tmp)
    best = ("?", "?", "")
    with contextlib.suppress(OSError):
        for line in FilePath("/proc/mounts").read_text().splitlines():
            device, mount, fstype = line.split()[:3]
            inside = path == mount or path.startswith(mount.rstrip("/") + "/")
            if inside and len(mount) > len(best[2]):
                best = (device, fstype, mount)
    dirty = []
    for knob in ("dirty_background_ratio", "dirty_ratio"):
        with contextlib.suppress(OSError):
            dirty.append(f"vm.{knob}={FilePath(f'/proc/sys/vm/{knob}').read_text().strip()}")
    return (
        f"under {tmp} on {best[0]} ({best[1]}, mounted at {best[2] or '?'}); eoslog and every "
        f"peer write and read in the same directory tree; {', '.join(dirty)}"
    )


def load() -> str:
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())
