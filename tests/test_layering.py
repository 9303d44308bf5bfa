"""Imports point down only (docs/design.md "Layers", docs/style.md rule 17).

Every import in python/eoslog, spark_udfs and pyext/*.pyx|pxd|pxi is collected (Python files
with an ast walk, Cython files with a regex over import and cimport lines) and checked against
LAYER_RULES. A new layer adds a row. Beside the rows, no module of eoslog may import itself
through others: test_no_import_cycle_among_eoslog_modules walks the run-time imports (those
under `if TYPE_CHECKING:` left out) and names any cycle it finds.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from tests.support import graphs

ROOT = Path(__file__).resolve().parents[1]

# Layers above the codec, top first (docs/design.md "Layers").
ABOVE_CODEC = ("eoslog.cli", "eoslog.client", "eoslog.broker", "eoslog.coordinator", "eoslog.log")

# (module prefix, import prefixes it may not use). Prefixes match whole dotted components:
# "eoslog.log" covers eoslog.log and eoslog.log.segment, not eoslog.logging.
LAYER_RULES: list[tuple[str, tuple[str, ...]]] = [
    # confluent_kafka is the tests' oracle for the drop-in (tests/client/test_kafka_error.py),
    # never a run-time dependency.
    ("eoslog", ("eoslog_spark", "confluent_kafka")),
    ("eoslog._ext", ABOVE_CODEC),
    ("eoslog.record", ABOVE_CODEC),
    ("eoslog.errors", ABOVE_CODEC),
    # The error-code table is data under the errors.
    ("eoslog.error_codes", (*ABOVE_CODEC, "eoslog.errors")),
    ("eoslog.limits", ABOVE_CODEC),
    # The fs seam sits under the log: it knows nothing of segments, brokers or clients.
    ("eoslog.fs", ABOVE_CODEC),
    ("eoslog.fs_twin", ABOVE_CODEC),
    ("eoslog.fs_overlay", ABOVE_CODEC),
    # Object storage through pyarrow, read-only: a file system under the log like the others.
    ("eoslog.fs_arrow", ABOVE_CODEC),
    ("eoslog.fs_readonly", ABOVE_CODEC),
    # The partition log is used by the broker and the coordinator, never the other way.
    ("eoslog.log", ("eoslog.cli", "eoslog.client", "eoslog.broker", "eoslog.coordinator")),
    # The wire front end sits on top of the broker: nothing under it serves the wire.
    ("eoslog.log", ("eoslog.serve",)),
    ("eoslog.coordinator", ("eoslog.serve",)),
    ("eoslog.client", ("eoslog.serve",)),
    ("eoslog.offline", ("eoslog.serve",)),
    # Offline scans read the files through the log layer alone: no broker, no client.
    ("eoslog.offline", ("eoslog.cli", "eoslog.client", "eoslog.broker", "eoslog.coordinator")),
    # Tiering reads the files as offline scans do, and writes only the archive.
    ("eoslog.archive", ("eoslog.cli", "eoslog.client", "eoslog.broker", "eoslog.coordinator")),
    ("eoslog.archive_store", ABOVE_CODEC),
    # The broker's archive pass: above the archiver, under the broker that calls it.
    ("eoslog.tiering", ("eoslog.cli", "eoslog.client", "eoslog.broker", "eoslog.coordinator")),
    (
        "eoslog.archive_view",
        ("eoslog.cli", "eoslog.client", "eoslog.broker", "eoslog.coordinator", "eoslog.offline"),
    ),
    # The default clock sits under everything that reads it (the broker and the producer).
    ("eoslog.clock", ABOVE_CODEC),
    # The coordinators serve the broker and the clients; they know neither.
    ("eoslog.coordinator", ("eoslog.cli", "eoslog.client", "eoslog.broker")),
    # The clients see the broker through Protocols (client/consumer.py LogSource,
    # client/producer.py ProducerBroker): the broker creates them, never the other way round.
    ("eoslog.client", ("eoslog.cli", "eoslog.broker")),
    # The parts of a client (config, fetcher, group member; batches, sender, transactions)
    # never import the API that drives them, not even for annotations.
    (
        "eoslog.client.consumer_config",
        ("eoslog.client.consumer", "eoslog.client.producer"),
    ),
    # The AdminClient's parts (types, group calls) never import the clients.
    ("eoslog.client.admin", ("eoslog.client.consumer", "eoslog.client.producer")),
    ("eoslog.client.assignment", ("eoslog.client.consumer", "eoslog.client.producer")),
    ("eoslog.client.fetcher", ("eoslog.client.consumer", "eoslog.client.producer")),
    ("eoslog.client.fetch", ("eoslog.client.consumer", "eoslog.client.producer")),
    ("eoslog.client.group_member", ("eoslog.client.consumer", "eoslog.client.producer")),
    ("eoslog.client.metadata", ("eoslog.client.consumer", "eoslog.client.producer")),
    ("eoslog.client.offset_store", ("eoslog.client.consumer", "eoslog.client.producer")),
    ("eoslog.client.producer_config", ("eoslog.client.consumer", "eoslog.client.producer")),
    # librdkafka's keys are data: they import nothing of eoslog; the config reader reads them.
    ("eoslog.client.librdkafka_keys", ("eoslog",)),
    ("eoslog.client.config_reader", ("eoslog.client.consumer", "eoslog.client.producer")),
    ("eoslog.client.read_loop", ("eoslog.client.consumer", "eoslog.client.producer")),
    ("eoslog.client.record_accumulator", ("eoslog.client.consumer", "eoslog.client.producer")),
    ("eoslog.client.sender", ("eoslog.client.consumer", "eoslog.client.producer")),
    (
        "eoslog.client.transaction_manager",
        ("eoslog.client.consumer", "eoslog.client.producer"),
    ),
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


def _is_type_checking(test: ast.expr) -> bool:
    """`TYPE_CHECKING` or `typing.TYPE_CHECKING`."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _run_time_statements(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements under `node`, those in an `if TYPE_CHECKING:` body left out (its
    else branch runs, so it stays)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for branch in child.orelse:
                yield from _run_time_statements(ast.Module(body=[branch], type_ignores=[]))
        else:
            yield from _run_time_statements(child)


def run_time_imports(
    source: str, module: str, is_package: bool, known: set[str] | frozenset[str]
) -> set[str]:
    """The modules among `known` that importing `module` imports, at once or later (an import
    inside a function counts), leaving out `if TYPE_CHECKING:` imports. `from X import y`
    imports X.y when that is a module, else X; a package's __init__ reached only on the way to
    a submodule of it is not counted, so `from eoslog import limits` in eoslog.client is no
    cycle with eoslog/__init__.py."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _run_time_statements(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
            continue
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            anchor = ".".join(parts[: len(parts) - node.level + 1])
            base = f"{anchor}.{base}" if base else anchor
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            if submodule in known:
                found.add(submodule)
            elif base in known:
                found.add(base)
    found.discard(module)
    return found


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a list of modules, the first repeated at the end) per strongly connected
    group of `graph` (module -> modules it imports) that has one; [] when there is none."""
    return graphs.cycles(graph)


def cython_run_time_imports(source: str, module: str, known: frozenset[str]) -> set[str]:
    """run_time_imports for a Cython file (whose imports all run)."""
    found: set[str] = set()
    for match in _CYTHON_FROM.finditer(source):
        base = match.group(1)
        for name in _names(match.group(2)):
            if f"{base}.{name}" in known:
                found.add(f"{base}.{name}")
            elif base in known:
                found.add(base)
    for match in _CYTHON_IMPORT.finditer(source):
        found.update(name for name in _names(match.group(1)) if name in known)
    found.discard(module)
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


def _python_sources(root: Path, package_dir: Path) -> Iterator[tuple[str, bool, str]]:
    """(module, is_package, source) of every Python file of the package."""
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        yield ".".join(parts), is_package, path.read_text()


def _python_modules(root: Path, package_dir: Path) -> Iterator[tuple[str, set[str]]]:
    for module, is_package, source in _python_sources(root, package_dir):
        yield module, python_imports(source, module, is_package)


def eoslog_import_graph() -> dict[str, set[str]]:
    """module -> the eoslog modules it imports at run time (python/eoslog and the Cython
    modules installed as eoslog._ext)."""
    sources = list(_python_sources(ROOT / "python", ROOT / "python" / "eoslog"))
    cython = [
        (f"eoslog._ext.{path.stem}", path.read_text())
        for pattern in ("*.pyx", "*.pxd", "*.pxi")
        for path in sorted((ROOT / "pyext").glob(pattern))
    ]
    known = frozenset({module for module, _, _ in sources} | {module for module, _ in cython})
    graph = {
        module: run_time_imports(source, module, is_package, known)
        for module, is_package, source in sources
    }
    for module, source in cython:  # a .pyx and its .pxd are one module
        graph.setdefault(module, set()).update(cython_run_time_imports(source, module, known))
    return graph


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


def test_no_import_cycle_among_eoslog_modules() -> None:
    graph = eoslog_import_graph()
    assert "eoslog.client.producer" in graph and "eoslog._ext.accumulator" in graph
    cycles = import_cycles(graph)
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_cycle_finder_names_a_cycle_and_ignores_type_checking_imports() -> None:
    known = frozenset({"eoslog.a", "eoslog.b", "eoslog.c", "eoslog.x"})
    sources = {
        "eoslog.a": "from eoslog import b\n",
        "eoslog.b": "def f():\n    from eoslog.c import thing\n",
        "eoslog.c": "import eoslog.a\n",
        "eoslog.x": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from eoslog import a\n"
            "else:\n    from eoslog import c\n"
        ),
    }
    graph = {name: run_time_imports(text, name, False, known) for name, text in sources.items()}
    assert graph["eoslog.x"] == {"eoslog.c"}
    assert import_cycles(graph) == [["eoslog.a", "eoslog.b", "eoslog.c", "eoslog.a"]]
    del graph["eoslog.c"]
    assert import_cycles(graph) == []


def test_the_layer_rows_catch_the_cycles_issue_13_cut() -> None:
    """The producer importing the broker, and the group member importing the consumer (even
    for annotations), are refused by the rows, not only by the cycle test."""
    for module, source, expected in [
        ("eoslog.client.producer", "from eoslog.broker import wall_clock_ms\n", "eoslog.broker"),
        (
            "eoslog.client.group_member",
            "if TYPE_CHECKING:\n    from eoslog.client.consumer import Consumer\n",
            "eoslog.client.consumer",
        ),
        (
            "eoslog.coordinator.x",
            "from eoslog.client.message import TopicPartition\n",
            "eoslog.client",
        ),
    ]:
        found = violations({module: python_imports(source, module, False)}, LAYER_RULES)
        assert any(f"imports {expected}" in violation for violation in found), found
