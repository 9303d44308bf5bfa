"""Run the Kafka clients' own integration suites against `eoslog serve` (issue 18), by hand:

    .venv/bin/python -m tests.client_suites.run [--client kafka-python] [-k EXPR] [--keep]

For each client installed in this environment (kafka-python, aiokafka, confluent-kafka) the
script downloads the source distribution of the installed version from PyPI into a cache
directory (`--cache`, default ~/.cache/eoslog-client-suites), unpacks it into a scratch
directory, and looks for the integration tests it ships. None of the clients' code is kept in
this repository: it is fetched, pointed at the server and run where it was unpacked.

kafka-python ships test/integration, whose fixtures use an external broker when KAFKA_URI is
set (KafkaFixture(external=True)); KAFKA_VERSION selects the broker features the tests expect.
The sdist leaves out two files those fixtures need, so the script writes stand-ins of its own
into the scratch copy: test/__init__.py (so that `test` is the suite, not the standard
library's package) and test/service.py (ExternalService, the handle an external broker gets; a
SpawnedService that refuses, as no broker process is started). KAFKA_ROOT names an empty
directory (the fixtures check that a Kafka installation exists even for an external broker).
KAFKA_VERSION defaults to the version kafka-python infers from eoslog's ApiVersions, so the
suite expects what the server presents; `--kafka-version 4.2.0` asks for more. Their pytest
options (pytest-timeout's) are dropped; SUITE_SECONDS bounds the run.

aiokafka's and confluent-kafka's sdists ship no tests (aiokafka's live in its repository and
start brokers with docker; confluent-kafka's sdist carries only the kafkatest verifiable
clients), which the table reports.

The server is `broker.serve("127.0.0.1:0")` of a fresh directory in this process, opened with
the broker settings kafka-python's own test brokers use (SUITE_BROKER_CONFIG); the suite runs
in a subprocess, so every request crosses the wire. The output is one line per failing test
with its reason (tests/client_suites/known_failures.py, as docs/api.md "Wire protocol" lists
them), then the table of pass rates. Not part of `make test`: it needs PyPI, takes a few
minutes, and its outcome moves with the clients' releases.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import eoslog
from tests.client_suites.known_failures import reason

CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka")
# The broker settings of kafka-python's own test brokers (its servers/resources kafka.properties):
# the suite's groups use 3 s sessions, and its topics default to four partitions.
SUITE_BROKER_CONFIG = {
    "group.min.session.timeout.ms": 1000,
    "group.initial.rebalance.delay.ms": 0,
    "num.partitions": 4,
}
SUITE_SECONDS = 1800
_PIP_DOWNLOAD = (
    *(sys.executable, "-m", "pip", "download", "-q"),
    *("--no-binary", ":all:", "--no-deps"),
)

_SERVICE_STAND_IN = '''"""Written by eoslog's tests/client_suites/run.py; the sdist lacks it."""


class ExternalService:
    """A broker started elsewhere: nothing to dump or stop."""

    def __init__(self, host, port):
        self.host = host
        self.port = port

    def dump_logs(self):
        pass

    def stop(self):
        pass


class SpawnedService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("eoslog's run points the suite at an external broker (KAFKA_URI)")
'''


@dataclass
class Outcome:
    """One suite's counts; `failed` holds (test id, first line of its error) for each."""

    client: str
    version: str
    note: str = ""
    passed: int = 0
    skipped: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)

    @property
    def rate(self) -> str:
        ran = self.passed + len(self.failed)
        return f"{100 * self.passed / ran:.0f}%" if ran else "-"


def fetch_sdist(client: str, version: str, cache: Path) -> Path:
    """The sdist of client==version in the cache, downloaded by pip when absent."""
    cache.mkdir(parents=True, exist_ok=True)
    stem = client.replace("-", "_")
    found = sorted(cache.glob(f"{stem}-{version}.tar.gz"))
    if not found:
        subprocess.run(
            [*_PIP_DOWNLOAD, "--dest", str(cache), f"{client}=={version}"],
            check=True,
        )
        found = sorted(cache.glob(f"{stem}-{version}.tar.gz"))
    if not found:
        raise SystemExit(f"pip download left no {stem}-{version}.tar.gz in {cache}")
    return found[0]


def unpack(sdist: Path, scratch: Path) -> Path:
    with tarfile.open(sdist) as archive:
        archive.extractall(scratch, filter="data")
    return scratch / sdist.name.removesuffix(".tar.gz")


@contextmanager
def eoslog_serve(directory: Path) -> Iterator[str]:
    """Broker.serve of a fresh directory on a free loopback port, in this process (the suite
    runs in a subprocess, so everything crosses the wire); yields HOST:PORT."""
    broker = eoslog.open(str(directory), config=SUITE_BROKER_CONFIG)
    try:
        yield broker.serve("127.0.0.1:0").address
    finally:
        broker.close()


def inferred_kafka_version(address: str) -> str:
    """The broker version kafka-python infers from the server's ApiVersions."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=address)
    try:
        return ".".join(str(part) for part in consumer.config["api_version"])
    finally:
        consumer.close()


def junit_outcome(report: Path, outcome: Outcome) -> Outcome:
    """Counts and failures read from pytest's junit XML report."""
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            message = (problem.get("message") or problem.text or "").strip()
            outcome.failed.append((name, message.splitlines()[0] if message else ""))
        elif case.find("skipped") is not None:
            outcome.skipped += 1
        else:
            outcome.passed += 1
    return outcome


def kafka_python_suite(source: Path, address: str, args: argparse.Namespace) -> Outcome:
    """test/integration of kafka-python's sdist, pointed at `address` (KAFKA_URI)."""
    version = source.name.rsplit("-", 1)[1]
    tests = source / "test"
    (tests / "__init__.py").touch()
    if not (tests / "service.py").exists():
        (tests / "service.py").write_text(_SERVICE_STAND_IN)
    empty_kafka_root = source / "no-kafka-installation"
    empty_kafka_root.mkdir(exist_ok=True)
    kafka_version = args.kafka_version or inferred_kafka_version(address)
    environment = dict(
        os.environ,
        KAFKA_URI=f"PLAINTEXT://{address}",
        KAFKA_VERSION=kafka_version,
        KAFKA_ROOT=str(empty_kafka_root),
    )
    report = source / "junit.xml"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += ["-o", "addopts=", "-o", "log_level=WARNING", "--junitxml", str(report)]
    command += ["-k", args.k] if args.k else []
    subprocess.run(
        [*command, "test/integration"],
        cwd=source,
        env=environment,
        timeout=SUITE_SECONDS,
        stdout=None if args.verbose else subprocess.DEVNULL,
        check=False,
    )
    note = f"KAFKA_VERSION={kafka_version}"
    return junit_outcome(report, Outcome("kafka-python", version, note))


def no_suite(client: str, source: Path) -> Outcome:
    version = source.name.rsplit("-", 1)[1]
    shipped = sorted(p.name for p in source.rglob("test*") if p.is_dir())
    note = "sdist ships no tests" + (f" (only {', '.join(shipped)})" if shipped else "")
    return Outcome(client, version, note)


def run_client(client: str, args: argparse.Namespace, scratch: Path) -> Outcome:
    version = importlib.metadata.version(client)
    source = unpack(fetch_sdist(client, version, args.cache), scratch)
    if not (source / "test" / "integration").is_dir():
        return no_suite(client, source)
    with eoslog_serve(scratch / f"log-{client}") as address:
        return kafka_python_suite(source, address, args)


def print_report(outcomes: list[Outcome]) -> None:
    for outcome in outcomes:
        for name, message in outcome.failed:
            test = name.rsplit("::", 1)[-1]
            print(f"{outcome.client} {test}: {reason(test, message)}")
    print()
    print("| client | version | passed | failed | skipped | pass rate | note |")
    print("|---|---|---:|---:|---:|---:|---|")
    for o in outcomes:
        row = [o.client, o.version, o.passed, len(o.failed), o.skipped, o.rate, o.note]
        print("| " + " | ".join(str(cell) for cell in row) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", choices=CLIENTS, action="append")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache/eoslog-client-suites")
    parser.add_argument("--kafka-version", help="KAFKA_VERSION (default: as inferred)")
    parser.add_argument("-k", help="pytest -k expression passed to the suite")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--verbose", action="store_true", help="show the suite's own output")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="eoslog-client-suites-"))
    try:
        outcomes = [run_client(client, args, scratch) for client in args.client or CLIENTS]
    finally:
        if args.keep:
            print(f"scratch directory kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    print_report(outcomes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
