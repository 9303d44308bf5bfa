"""The Kafka v2 record batch codec and its primitives, native or pure Python.

`codec` and `primitives` are the Cython modules in eoslog._ext unless the environment variable
EOSLOG_NO_EXTENSIONS=1 selects the pure-Python twins (eoslog.record.pycodec and
eoslog.record.pyprimitives). An installed eoslog always has its extensions: a failed import
of them is an error, never a silent switch to the slow path (STYLE.md rule 12).
"""

from __future__ import annotations

import os
from types import ModuleType

USING_EXTENSIONS: bool = os.environ.get("EOSLOG_NO_EXTENSIONS", "") not in ("1", "true", "yes")


def _load() -> tuple[ModuleType, ModuleType]:
    if USING_EXTENSIONS:
        from eoslog._ext import codec as native_codec
        from eoslog._ext import primitives as native_primitives

        return native_codec, native_primitives
    from eoslog.record import pycodec, pyprimitives

    return pycodec, pyprimitives


codec, primitives = _load()

__all__ = ["USING_EXTENSIONS", "codec", "primitives"]
