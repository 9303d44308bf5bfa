"""What every eoslog command shares, driven as a user runs it (a subprocess): `--version`,
`python -m eoslog`, and usage mistakes answered with one line and exit status 2."""

from __future__ import annotations

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
        (("verify",), "eoslog verify: Missing argument 'PATH'."),
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
