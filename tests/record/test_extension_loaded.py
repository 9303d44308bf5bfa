"""The extension must load when it should (docs/style.md rule 12): an installed eoslog never falls
back to the pure-Python twin without being asked to.

Each check runs in a fresh interpreter so that it holds whatever EOSLOG_NO_EXTENSIONS the
test run itself was started with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import eoslog

PROBE = """
import importlib.machinery, json
import eoslog.record as record
print(json.dumps({
    "using_extensions": record.USING_EXTENSIONS,
    "codec": record.codec.__name__,
    "primitives": record.primitives.__name__,
    "codec_file": getattr(record.codec, "__file__", ""),
    "primitives_file": getattr(record.primitives, "__file__", ""),
    "extension_suffixes": importlib.machinery.EXTENSION_SUFFIXES,
}))
"""


def _run(code: str, no_extensions: str | None) -> str:
    """stdout of `code` run by a fresh interpreter with EOSLOG_NO_EXTENSIONS as given."""
    env = {k: v for k, v in os.environ.items() if k != "EOSLOG_NO_EXTENSIONS"}
    if no_extensions is not None:
        env["EOSLOG_NO_EXTENSIONS"] = no_extensions
    # The child imports the same eoslog this run imported, wherever it lives.
    package_root = str(Path(eoslog.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in [package_root, env.get("PYTHONPATH")] if p)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _probe(no_extensions: str | None) -> dict[str, object]:
    result: dict[str, object] = json.loads(_run(PROBE, no_extensions))
    return result


def test_native_codec_is_used_when_eoslog_no_extensions_is_unset() -> None:
    probe = _probe(None)
    assert probe["using_extensions"] is True
    assert probe["codec"] == "eoslog._ext.codec"
    assert probe["primitives"] == "eoslog._ext.primitives"
    suffixes = probe["extension_suffixes"]
    assert isinstance(suffixes, list)
    for key in ("codec_file", "primitives_file"):
        path = probe[key]
        assert isinstance(path, str)
        assert path.endswith(".so"), path
        assert any(path.endswith(suffix) for suffix in suffixes), path


def test_eoslog_record_codec_is_the_extension_module_object() -> None:
    # Not only the name: the very module object the facade hands out is the extension.
    code = (
        "import eoslog.record, eoslog._ext.codec, eoslog._ext.primitives;"
        "assert eoslog.record.codec is eoslog._ext.codec;"
        "assert eoslog.record.primitives is eoslog._ext.primitives;"
        "import eoslog._ext.accumulator;"
        "assert eoslog.record.accumulator is eoslog._ext.accumulator"
    )
    _run(code, None)


def test_eoslog_no_extensions_selects_the_pure_python_twin() -> None:
    probe = _probe("1")
    assert probe["using_extensions"] is False
    assert probe["codec"] == "eoslog.record.pycodec"
    assert probe["primitives"] == "eoslog.record.pyprimitives"
    codec_file = probe["codec_file"]
    assert isinstance(codec_file, str)
    assert codec_file.endswith("pycodec.py")
