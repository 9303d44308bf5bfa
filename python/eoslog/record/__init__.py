"""The Kafka v2 record batch codec and its primitives, native or pure Python.

`codec`, `primitives` and `accumulator` are the Cython modules in eoslog._ext unless the
environment variable EOSLOG_NO_EXTENSIONS=1 selects the pure-Python twins
(eoslog.record.pycodec, eoslog.record.pyprimitives and eoslog.record.pyaccumulator). An
installed eoslog always has its extensions: a failed import of them is an error, never a
silent switch to the slow path (docs/style.md rule 12).

They are loaded on first use, so the modules they depend on (errors, status, layout) can
import from this package without a cycle.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Type checkers see the pure twins, whose signatures the native modules share (the .pyi
    # contracts in pyext/); at run time __getattr__ below picks one of the two.
    from eoslog.record import pyaccumulator as accumulator
    from eoslog.record import pycodec as codec
    from eoslog.record import pyprimitives as primitives

USING_EXTENSIONS: bool = os.environ.get("EOSLOG_NO_EXTENSIONS", "") not in ("1", "true", "yes")

_MODULES = {
    "accumulator": ("eoslog._ext.accumulator", "eoslog.record.pyaccumulator"),
    "codec": ("eoslog._ext.codec", "eoslog.record.pycodec"),
    "primitives": ("eoslog._ext.primitives", "eoslog.record.pyprimitives"),
}


def __getattr__(name: str) -> ModuleType:
    if name not in _MODULES:
        raise AttributeError(f"module 'eoslog.record' has no attribute {name!r}")
    native, pure = _MODULES[name]
    module = importlib.import_module(native if USING_EXTENSIONS else pure)
    globals()[name] = module
    return module


__all__ = ["USING_EXTENSIONS", "accumulator", "codec", "primitives"]
