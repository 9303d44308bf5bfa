"""Readers of a compacted log (docs/design.md "Compaction"): a consumer (including one whose
position lies in a gap), eoslog.scan, `eoslog verify` and `eoslog dump-log` all take the
cleaner's gaps; a reader holding bytes of a segment before its swap keeps reading them; an
offline scan in another process, running while the owner cleans, never fails and never sees
a half-swapped log."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pyarrow as pa

import eoslog
from eoslog.client.message import TopicPartition
from tests.log.test_compaction import fill, keyed, new_topic, visible
from tests.support import REPO_ROOT, logtools
from tests.support.logtools import OpenBroker


def cleaned(broker: eoslog.Broker) -> list[tuple[int, bytes | None, bytes | None]]:
    log = new_topic(broker)
    fill(log, 10)
    log.roll()
    fill(log, 1)
    broker.run_maintenance()
    return visible(log)


def scanned(path: str, **options: object) -> list[tuple[int, bytes | None, bytes | None]]:
    batches = list(eoslog.scan(path, ["t"], **options))  # type: ignore[arg-type]
    if not batches:
        return []
    table = pa.Table.from_batches(batches)
    return list(
        zip(
            table.column("offset").to_pylist(),
            table.column("key").to_pylist(),
            table.column("value").to_pylist(),
            strict=True,
        )
    )


def test_a_consumer_reads_the_latest_values_across_the_gaps(open_broker: OpenBroker) -> None:
    broker = open_broker()
    expected = cleaned(broker)
    assert expected[0][0] > 0  # offset 0 is in a gap
    consumer = broker.consumer({"group.id": "g", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("t", 0, 0)])
    got = []
    while len(got) < len(expected):
        messages = consumer.consume(100, timeout=5)
        assert messages, f"stopped after {len(got)} of {len(expected)}"
        got += [(m.offset(), m.key(), m.value()) for m in messages]
    assert got == expected
    # A seek into a gap reads on from the next record after it.
    consumer.seek(TopicPartition("t", 0, 1))
    assert consumer.consume(1, timeout=5)[0].offset() == expected[0][0]
    consumer.close()


def test_scan_of_a_cleaned_directory_gives_what_the_owner_serves(open_broker: OpenBroker) -> None:
    broker = open_broker()
    expected = cleaned(broker)
    assert scanned(broker.path) == expected
    assert scanned(broker.path, isolation_level="read_uncommitted") == expected
    broker.close()
    assert scanned(broker.path) == expected


def test_verify_and_dump_log_find_no_damage_in_a_cleaned_directory(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    cleaned(broker)
    first = broker.log("t", 0).segments[0]
    broker.close()
    eoslog_cli = [sys.executable, "-m", "eoslog"]
    verify = subprocess.run([*eoslog_cli, "verify", broker.path], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "all valid" in verify.stdout
    for segment in sorted(os.listdir(os.path.dirname(first.path(".log")))):
        if segment.endswith(".log"):
            path = os.path.join(os.path.dirname(first.path(".log")), segment)
            dump = subprocess.run([*eoslog_cli, "dump-log", path], capture_output=True, text=True)
            assert dump.returncode == 0 and "Damage" not in dump.stdout, dump.stdout


def test_a_read_taken_before_the_swap_keeps_its_bytes(open_broker: OpenBroker) -> None:
    broker = open_broker()
    log = new_topic(broker)
    fill(log, 10)
    log.roll()
    held = log.read(0, max_bytes=1 << 20)
    before = bytes(held.records)
    broker.run_maintenance()
    assert log.cleaned_end > 0
    assert bytes(held.records) == before
    assert [r.offset for r in logtools.records(before)][:1] == [0]


SCANNER = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, {root!r})
    import eoslog
    path, stop_file = sys.argv[1], sys.argv[2]
    scans = 0
    print("ready", flush=True)
    while not os.path.exists(stop_file) or scans == 0:
        last = -1
        for batch in eoslog.scan(path, ["t"]):
            for offset, key, value in zip(
                batch.column("offset").to_pylist(),
                batch.column("key").to_pylist(),
                batch.column("value").to_pylist(),
            ):
                # Offset 4r + k holds value<r>-<k> of key<k>: every record read is one
                # written, at its own offset, once, in order. (A scan plans its range, then
                # reads it: records the cleaner removed meanwhile are rightly missing.)
                assert offset > last, (offset, last)
                assert (key, value) == (
                    b"key%d" % (offset % 4),
                    b"value%d-%d" % (offset // 4, offset % 4),
                ), (offset, key, value)
                last = offset
        scans += 1
    print("scans", scans, flush=True)
    """
).format(root=REPO_ROOT)


def test_an_offline_scan_in_another_process_never_sees_a_half_swapped_log(
    open_broker: OpenBroker, tmp_path: os.PathLike[str]
) -> None:
    broker = open_broker()
    log = new_topic(broker)
    fill(log, 2)
    log.roll()
    stop_file = os.path.join(tmp_path, "stop")
    child = subprocess.Popen(
        [sys.executable, "-c", SCANNER, broker.path, stop_file],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    for round_ in range(30):
        for k in range(4):
            log.append_batch(keyed(f"key{k}".encode(), f"value{round_ + 2}-{k}".encode()))
        log.roll()
        broker.run_maintenance()
    open(stop_file, "w").close()
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert out.startswith("scans ")
