"""What the contenders of several areas share (bench/contenders_*.py): the fairness check that
fails a run, and the codec under test."""

from __future__ import annotations

from typing import Any


def expect(condition: bool, message: str) -> None:
    # Not `assert`: the checks must run under python -O too.
    if not condition:
        raise AssertionError(f"fairness check failed: {message}")


def record_codec() -> Any:
    from eoslog.record import codec

    return codec
