"""What every eoslog command shares, driven as a user runs it (a subprocess): `--version`,
`python -m eoslog`, and usage mistakes answered with one line and exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import eoslog
from tests.cli.shell import run


def test_version_prints_the_package_version() -> None:
    done = run("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"eoslog {eoslog.__version__}"


def test_help_lists_every_command() -> None:
    done = run("--help")
    assert done.returncode == 0
    for name in ("demo", "dump-log", "verify", "repair"):
        assert f"  {name} " in done.stdout, name


@pytest.mark.parametrize(
    ("arguments", "text"),
    [
        (("verify",), "eoslog verify: Missing argument 'PATH...'."),
        (("nope",), "eoslog: No such command 'nope'."),
        (("repair", "x", "--truncate-at", "abc"), "'abc' is not a valid integer"),
        (("dump-log", "x", "--bogus"), "eoslog dump-log: No such option '--bogus'"),
    ],
    ids=["missing-argument", "unknown-command", "bad-integer", "unknown-option"],
)
def test_a_usage_mistake_is_one_line_and_status_2(arguments: tuple[str, ...], text: str) -> None:
    done = run(*arguments)
    assert done.returncode == 2
    assert text in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stdout == ""


def complete(words: str, shell: str = "bash") -> subprocess.CompletedProcess[str]:
    """What the shell's completion function asks the command for, as click's scripts ask it."""
    environment = {
        **os.environ,
        "_EOSLOG_COMPLETE": f"{shell}_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
    }
    command = [sys.executable, "-m", "eoslog"]
    return subprocess.run(
        command, env=environment, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_shell_completion_script_is_printed_for_each_shell(shell: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "eoslog"],
        env={**os.environ, "_EOSLOG_COMPLETE": f"{shell}_source"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "_EOSLOG_COMPLETE" in done.stdout


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("eoslog tra", {"transactions"}),
        ("eoslog transactions data f", {"find-hanging"}),
        ("eoslog groups data ", {"list", "describe", "delete", "reset-offsets"}),
    ],
)
def test_completion_offers_the_commands_that_match(words: str, expected: set[str]) -> None:
    done = complete(words)
    assert done.returncode == 0, done.stderr
    offered = {line.split(",", 1)[1] for line in done.stdout.splitlines()}
    assert expected <= offered, offered
