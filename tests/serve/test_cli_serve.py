"""`eoslog serve DIR` as a user runs it: it prints the address it listens on, serves real
clients, exits 0 on SIGTERM with the directory closed cleanly, and after a SIGKILL the next
open finds every record a client was told was written."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

import eoslog
from tests.serve.clients import DEADLINE_S

LISTENING = "eoslog serve: listening on "
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
RECORDS = 500


class Served:
    def __init__(self, directory: Path, *options: str, listen: str = "127.0.0.1:0") -> None:
        command = [sys.executable, "-m", "eoslog", "serve", str(directory), "--listen", listen]
        self.process = subprocess.Popen(
            [*command, *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith(LISTENING), (line, self.process.stderr)
        self.address = line[len(LISTENING) :].split()[0]

    def stop(self, signal_number: int) -> int:
        self.process.send_signal(signal_number)
        return self.process.wait(DEADLINE_S)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path / "log")
    yield server
    if server.process.poll() is None:
        server.process.kill()
        server.process.wait(DEADLINE_S)


def _produce_acknowledged(address: str) -> list[bytes]:
    """Produce RECORDS values with acks=all; the values whose delivery was reported."""
    producer = Producer({"bootstrap.servers": address, "acks": "all", "enable.idempotence": False})
    delivered: list[bytes] = []

    def report(error: object, message: object) -> None:
        if error is None:
            delivered.append(message.value())  # type: ignore[attr-defined]

    for i in range(RECORDS):
        producer.produce("acked", value=b"record-%d" % i, on_delivery=report)
    assert producer.flush(DEADLINE_S) == 0
    return delivered


def _values_in(directory: Path) -> list[bytes]:
    """The values of topic "acked", read by a fresh open of the directory."""
    with eoslog.open(str(directory)) as broker:
        consumer = broker.consumer({"group.id": "check", "auto.offset.reset": "earliest"})
        consumer.assign([eoslog.TopicPartition("acked", 0, 0)])
        end = broker.log("acked", 0).high_watermark
        values: list[bytes] = []
        while len(values) < end:
            batch = consumer.consume(end, timeout=DEADLINE_S)
            assert batch, f"read {len(values)} of {end}"
            values.extend(message.value() for message in batch)
        consumer.close()
        return values


def test_serve_exits_0_on_sigterm_and_leaves_the_directory_closed_cleanly(
    served: Served, tmp_path: Path
) -> None:
    delivered = _produce_acknowledged(served.address)
    assert served.stop(signal.SIGTERM) == 0
    assert (tmp_path / "log" / CLEAN_SHUTDOWN_MARKER).exists()
    assert _values_in(tmp_path / "log") == delivered


def test_serve_exits_0_on_sigint(served: Served, tmp_path: Path) -> None:
    assert served.stop(signal.SIGINT) == 0
    assert (tmp_path / "log" / CLEAN_SHUTDOWN_MARKER).exists()


def test_a_sigkilled_server_directory_reopens_with_every_acknowledged_record(
    served: Served, tmp_path: Path
) -> None:
    delivered = _produce_acknowledged(served.address)
    assert served.stop(signal.SIGKILL) == -signal.SIGKILL
    assert not (tmp_path / "log" / CLEAN_SHUTDOWN_MARKER).exists()
    assert _values_in(tmp_path / "log") == delivered


def _run_serve(directory: Path, listen: str) -> subprocess.CompletedProcess[str]:
    """`eoslog serve` run to its end (it must end by itself: it fails to start)."""
    command = [sys.executable, "-m", "eoslog", "serve", str(directory), "--listen", listen]
    return subprocess.run(command, capture_output=True, text=True, timeout=DEADLINE_S, check=False)


def test_serve_on_a_directory_another_process_owns_fails_with_one_line(
    served: Served, tmp_path: Path
) -> None:
    second = _run_serve(tmp_path / "log", "127.0.0.1:0")
    assert second.returncode == 1
    assert second.stdout == ""
    assert second.stderr.startswith("eoslog serve: ")
    assert len(second.stderr.splitlines()) == 1


def test_serve_with_a_malformed_listen_address_is_a_usage_error(tmp_path: Path) -> None:
    done = _run_serve(tmp_path / "log", "9092")
    assert done.returncode == 2
    assert "HOST:PORT" in done.stderr


def test_serve_with_sasl_users_serves_only_a_client_with_a_password_in_the_file(
    tmp_path: Path,
) -> None:
    users = tmp_path / "users"
    users.write_text("alice:alice-secret\n")
    served = Served(
        tmp_path / "log", "--sasl-users", str(users), listen="SASL_PLAINTEXT://127.0.0.1:0"
    )
    try:
        producer = Producer(
            {
                "bootstrap.servers": served.address,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "alice",
                "sasl.password": "alice-secret",
            }
        )
        producer.produce("acked", value=b"v")
        assert producer.flush(DEADLINE_S) == 0
    finally:
        assert served.stop(signal.SIGTERM) == 0
    assert _values_in(tmp_path / "log") == [b"v"]


def test_serve_sasl_without_users_is_a_usage_error_before_the_directory_is_made(
    tmp_path: Path,
) -> None:
    done = _run_serve(tmp_path / "log", "SASL_PLAINTEXT://127.0.0.1:0")
    assert done.returncode == 2
    assert "sasl.plain.users" in done.stderr
    assert not (tmp_path / "log").exists()
