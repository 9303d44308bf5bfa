"""Imports point down only (docs/design.md "Layers", docs/style.md rule 17).

Every import in python/eoslog, spark_udfs and pyext/*.pyx|pxd|pxi is collected (Python files
with an ast walk, Cython files with a regex over import and cimport lines) and checked against
LAYER_RULES. A new layer adds a row.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Layers above the codec, top first (docs/design.md "Layers").
ABOVE_CODEC = ("eoslog.cli", "eoslog.client", "eoslog.broker", "eoslog.coordinator", "eoslog.log")

# (module prefix, import prefixes it may not use). Prefixes match whole dotted components:
# "eoslog.log" covers eoslog.log and eoslog.log.segment, not eoslog.logging.
LAYER_RULES: list[tuple[str, tuple[str, ...]]] = [
    ("eoslog", ("eoslog_spark",)),
    ("eoslog._ext", ABOVE_CODEC),
    ("eoslog.record", ABOVE_CODEC),
    ("eoslog.errors", ABOVE_CODEC),
    ("eoslog.limits", ABOVE_CODEC),
    # The fs seam sits under the log: it knows nothing of segments, brokers or clients.
    ("eoslog.fs", ABOVE_CODEC),
    ("eoslog.fs_twin", ABOVE_CODEC),
    # The partition log is used by the broker and the coordinator, never the other way.
    ("eoslog.log", ("eoslog.cli", "eoslog.client", "eoslog.broker", "eoslog.coordinator")),
    # Offline scans read the files through the log layer alone: no broker, no client.
    ("eoslog.offline", ("eoslog.cli", "eoslog.client", "eoslog.broker", "eoslog.coordinator")),
]

_CYTHON_FROM = re.compile(
    r"^[ \t]*from[ \t]+([\w.]+)[ \t]+c?import[ \t]+(\([^)]*\)|[^\n]*)", re.MULTILINE
)
_CYTHON_IMPORT = re.compile(r"^[ \t]*c?import[ \t]+([^\n]+)", re.MULTILINE)


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _names(imported: str) -> list[str]:
    """The names in the tail of an import line: "(a as b,\\n c)" -> ["a", "c"]."""
    cleaned = re.sub(r"#[^\n]*", "", imported).strip().strip("()")
    return [part.split()[0] for part in cleaned.replace("\n", " ").split(",") if part.strip()]


def python_imports(source: str, module: str, is_package: bool) -> set[str]:
    """Every module `source` may import: the module named by each import statement, and for
    `from X import y` also X.y (y may be a submodule). Relative imports are resolved."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{anchor}.{base}" if base else anchor
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return found


def cython_imports(source: str) -> set[str]:
    found: set[str] = set()
    for match in _CYTHON_FROM.finditer(source):
        base = match.group(1)
        found.add(base)
        found.update(f"{base}.{name}" for name in _names(match.group(2)) if name != "*")
    for match in _CYTHON_IMPORT.finditer(source):
        found.update(_names(match.group(1)))
    return found


def _python_modules(root: Path, package_dir: Path) -> Iterator[tuple[str, set[str]]]:
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        module = ".".join(parts)
        yield module, python_imports(path.read_text(), module, is_package)


def _pyext_modules() -> Iterator[tuple[str, set[str]]]:
    # pyext/ is installed as eoslog._ext (docs/design.md "Where things live").
    for pattern in ("*.pyx", "*.pxd", "*.pxi"):
        for path in sorted((ROOT / "pyext").glob(pattern)):
            yield f"eoslog._ext.{path.stem}", cython_imports(path.read_text())


def all_modules() -> dict[str, set[str]]:
    modules: dict[str, set[str]] = {}
    sources = [
        _python_modules(ROOT / "python", ROOT / "python" / "eoslog"),
        _python_modules(ROOT / "spark_udfs", ROOT / "spark_udfs" / "eoslog_spark"),
        _pyext_modules(),
    ]
    for source in sources:
        for module, imports in source:
            modules.setdefault(module, set()).update(imports)
    return modules


def violations(
    modules: dict[str, set[str]], rules: Iterable[tuple[str, tuple[str, ...]]]
) -> list[str]:
    found = []
    for module, imports in sorted(modules.items()):
        for layer, forbidden in rules:
            if not _under(module, layer):
                continue
            for name in sorted(imports):
                for prefix in forbidden:
                    if _under(name, prefix):
                        found.append(
                            f"{module} imports {name} (layer {layer} may not use {prefix})"
                        )
    return found


def test_every_source_tree_is_scanned() -> None:
    modules = all_modules()
    assert "eoslog.errors" in modules
    assert "eoslog.record.types" in modules
    assert "eoslog_spark" in modules
    assert "eoslog._ext.codec" in modules
    assert "eoslog.record.status" in modules["eoslog.errors"]


def test_imports_point_down_only() -> None:
    assert violations(all_modules(), LAYER_RULES) == []


def test_python_eoslog_never_imports_eoslog_spark() -> None:
    modules = all_modules()
    eoslog_modules = {name: found for name, found in modules.items() if _under(name, "eoslog")}
    assert eoslog_modules
    assert violations(eoslog_modules, [("eoslog", ("eoslog_spark",))]) == []


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("eoslog.record.x", "from ..log import segment\n", "eoslog.log.segment"),
        ("eoslog.record.x", "from eoslog import coordinator\n", "eoslog.coordinator"),
        (
            "eoslog.record.x",
            "def f():\n    import eoslog.client.producer\n",
            "eoslog.client.producer",
        ),
        ("eoslog.x", "import eoslog_spark.source as s\n", "eoslog_spark.source"),
    ],
)
def test_the_checker_catches_an_upward_import(module: str, source: str, expected: str) -> None:
    modules = {module: python_imports(source, module, is_package=False)}
    found = violations(modules, LAYER_RULES)
    assert found
    assert any(f"imports {expected} " in violation for violation in found), found


def test_the_checker_matches_whole_dotted_components_only() -> None:
    modules = {
        "eoslog.record.x": python_imports(
            "import eoslog.logging_helpers\n", "eoslog.record.x", False
        )
    }
    assert violations(modules, LAYER_RULES) == []


def test_the_checker_reads_cython_import_and_cimport_lines() -> None:
    source = (
        "cimport cython\nfrom eoslog import (\n    limits,\n    log,  # why\n)\n"
        "import numpy as np\n"
    )
    imports = cython_imports(source)
    assert {"cython", "eoslog", "eoslog.limits", "eoslog.log", "numpy"} <= imports
    assert violations({"eoslog._ext.codec": imports}, LAYER_RULES) == [
        "eoslog._ext.codec imports eoslog.log (layer eoslog._ext may not use eoslog.log)"
    ]
