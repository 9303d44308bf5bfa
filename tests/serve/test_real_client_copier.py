"""Exactly once through `eoslog serve` with a real client killed mid-flight (issue 18 item 5):
a confluent-kafka copier in a subprocess (tests/serve/copier_child.py) copies "in" to "out"
in transactions that commit its group's offsets, and is SIGKILLed several times at arbitrary
points of its work, each time restarted with the same transactional.id (which aborts what the
dead one left open) and the same static group member; in the second test the server (`eoslog
serve` in its own process) is SIGKILLed and restarted too, under a working copier. The output
is the input exactly once, in order per partition, as a read_committed reader and
`eoslog.scan` of the files see it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import eoslog
from eoslog.serve.server import Server
from tests.serve.clients import wait_until

CHILD = os.path.join(os.path.dirname(__file__), "copier_child.py")
RECORDS_PER_PARTITION = 150
KILLS = 3


def committed_total(broker: eoslog.Broker) -> int:
    found = broker.groups.fetch_offsets("copiers", [("in", 0), ("in", 1)], require_stable=False)
    return sum(stored.offset for stored in found.values() if stored is not None)


def values_by_partition(broker: eoslog.Broker, topic: str) -> dict[int, list[bytes | None]]:
    consumer = broker.consumer({"auto.offset.reset": "earliest"})
    consumer.assign([eoslog.TopicPartition(topic, p, 0) for p in range(2)])
    found: dict[int, list[bytes | None]] = {0: [], 1: []}
    while batch := consumer.consume(1000, timeout=0):
        for message in batch:
            found[message.partition()].append(message.value())
    consumer.close()
    return found


def scanned_by_partition(path: str) -> dict[int, list[bytes]]:
    """The committed values of "out" in the files (a live directory too), by partition."""
    found: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}
    for batch in eoslog.scan(path, topics=["out"], isolation_level="read_committed"):
        table = batch.to_pydict()
        for partition, offset, value in zip(
            table["partition"], table["offset"], table["value"], strict=True
        ):
            found[partition].append((offset, value))
    return {p: [value for _, value in sorted(rows)] for p, rows in found.items()}


def write_input(broker: eoslog.Broker) -> None:
    broker.create_topic("in", 2)
    broker.create_topic("out", 2)
    source = broker.producer()
    for index in range(RECORDS_PER_PARTITION):
        for partition in range(2):
            source.produce("in", b"%d-%04d" % (partition, index), partition=partition)
    source.flush()
    source.close()


def start_copier(address: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, CHILD, address], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def test_a_copier_killed_again_and_again_copies_every_record_exactly_once(
    broker: eoslog.Broker, server: Server
) -> None:
    write_input(broker)
    total = 2 * RECORDS_PER_PARTITION
    step = total // (KILLS + 1)
    for kill in range(1, KILLS + 1):
        copier = start_copier(server.address)
        try:
            # Killed once it has committed past a point: anywhere in its next transaction.
            target = kill * step
            wait_until(lambda: committed_total(broker) >= target, f"copy past {target}")  # noqa: B023
        finally:
            copier.send_signal(signal.SIGKILL)
            copier.wait()
    copier = start_copier(server.address)
    try:
        wait_until(lambda: committed_total(broker) == total, "every record copied")
    finally:
        copier.send_signal(signal.SIGKILL)
        copier.wait()
    expected = values_by_partition(broker, "in")
    assert values_by_partition(broker, "out") == expected
    assert scanned_by_partition(broker.path) == expected


LISTENING = "eoslog serve: listening on "


def start_server(directory: str, listen: str) -> tuple[subprocess.Popen[str], str]:
    """`eoslog serve DIR --listen ADDRESS` in its own process; the address it listens on."""
    process = subprocess.Popen(
        [sys.executable, "-m", "eoslog", "serve", directory, "--listen", listen],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith(LISTENING), line
    return process, line[len(LISTENING) :].split()[0]


def copied(directory: str) -> int:
    return sum(len(values) for values in scanned_by_partition(directory).values())


def test_copier_and_server_both_killed_again_and_again_copy_every_record_exactly_once(
    tmp_path: os.PathLike[str],
) -> None:
    directory = os.path.join(tmp_path, "log")
    with eoslog.open(directory) as broker:
        write_input(broker)
        expected = values_by_partition(broker, "in")
    total = 2 * RECORDS_PER_PARTITION
    step = total // (KILLS + 2)
    server, address = start_server(directory, "127.0.0.1:0")
    copier = start_copier(address)
    try:
        for kill in range(1, KILLS + 1):
            target = kill * step
            wait_until(lambda: copied(directory) >= target, f"copy past {target}")  # noqa: B023
            # The server dies under the working copier, which reconnects to its successor.
            server.send_signal(signal.SIGKILL)
            server.wait()
            server, _ = start_server(directory, address)
            wait_until(lambda: copied(directory) >= target + step // 2, "copy on")  # noqa: B023
            copier.send_signal(signal.SIGKILL)
            copier.wait()
            copier = start_copier(address)
        wait_until(lambda: copied(directory) == total, "every record copied")
    finally:
        copier.send_signal(signal.SIGKILL)
        copier.wait()
        server.send_signal(signal.SIGTERM)
        server.wait()
    assert scanned_by_partition(directory) == expected
    with eoslog.open(directory) as broker:
        assert values_by_partition(broker, "out") == expected
