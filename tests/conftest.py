"""Shared fixtures: every codec test runs against both twins (docs/style.md rule 12), and the
log tests open brokers in a temporary directory with a driven clock (`clock`, `open_broker`).

Codec twins:

`codec` and `primitives` are parametrized with ids "native" (the Cython modules in
eoslog._ext) and "pure" (the pure-Python twins in eoslog.record). Both always run: a native
module that fails to import makes its tests error, never skip, because an installed eoslog must
have its extensions.

EOSLOG_TEST_IMPLS (a comma list such as "pure") narrows the run to some twins. It is a
development aid for working before the extension is built, not a way to ship a green suite.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from types import ModuleType

import pytest

import eoslog
from tests.support import batches, logtools

TS = logtools.TS

# id -> (codec module, primitives module)
IMPLEMENTATIONS: dict[str, tuple[str, str]] = {
    "native": ("eoslog._ext.codec", "eoslog._ext.primitives"),
    "pure": ("eoslog.record.pycodec", "eoslog.record.pyprimitives"),
}


def _selected_implementations() -> list[str]:
    requested = os.environ.get("EOSLOG_TEST_IMPLS", "").strip()
    if not requested:
        return list(IMPLEMENTATIONS)
    names = [name.strip() for name in requested.split(",") if name.strip()]
    unknown = sorted(set(names) - set(IMPLEMENTATIONS))
    if unknown or not names:
        raise ValueError(
            f"EOSLOG_TEST_IMPLS={requested!r}: expected a comma list of {sorted(IMPLEMENTATIONS)}"
        )
    return names


SELECTED_IMPLEMENTATIONS = _selected_implementations()


def pytest_report_header() -> str:
    return "eoslog codec twins under test: " + ", ".join(SELECTED_IMPLEMENTATIONS)


@pytest.fixture(params=SELECTED_IMPLEMENTATIONS)
def implementation(request: pytest.FixtureRequest) -> str:
    """The id of the twin under test; `codec` and `primitives` follow it, so a test asking
    for both gets one matched pair."""
    name: str = request.param
    return name


@pytest.fixture
def codec(implementation: str) -> ModuleType:
    # An ImportError here is a test error, on purpose (module docstring).
    return importlib.import_module(IMPLEMENTATIONS[implementation][0])


@pytest.fixture
def primitives(implementation: str) -> ModuleType:
    return importlib.import_module(IMPLEMENTATIONS[implementation][1])


@pytest.fixture
def make_batch(codec: ModuleType) -> Callable[..., bytes]:
    """make_batch(records, **builder_settings) -> bytes, built by the twin under test."""
    return functools.partial(batches.build, codec)


# --- a broker in a temporary directory with a driven clock ----------------------------------

OpenBroker = logtools.OpenBroker


@pytest.fixture
def data_dir(tmp_path: os.PathLike[str]) -> str:
    """The log directory tests open (and reopen) under tmp_path."""
    return os.path.join(tmp_path, "data")


@pytest.fixture
def clock() -> logtools.Clock:
    return logtools.Clock(TS)


@pytest.fixture
def open_broker(tmp_path: os.PathLike[str], clock: logtools.Clock) -> Iterator[OpenBroker]:
    """open_broker(durability=..., fs=...) opens tmp_path/data with the driven clock; every
    broker opened is closed at teardown."""
    opened: list[eoslog.Broker] = []

    def _open(durability: str = "commit", fs: object = None) -> eoslog.Broker:
        broker = eoslog.open(
            os.path.join(tmp_path, "data"),
            durability,
            fs=fs,  # type: ignore[arg-type]
            clock_ms=clock,
            background=False,
        )
        opened.append(broker)
        return broker

    yield _open
    for broker in opened:
        broker.close()


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One local[2] Spark session for every Spark test (marker spark), with the eoslog source
    registered; pyspark is imported only when a test asks for it."""
    from pyspark.sql import SparkSession

    # Python workers must import the installed eoslog: run them on this interpreter.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    import eoslog_spark

    eoslog_spark.register(session)
    yield session
    session.stop()
