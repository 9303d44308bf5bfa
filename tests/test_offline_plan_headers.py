"""Planning a read_committed scan of a partition with no producer snapshot replays its batch
headers to find the last stable offset and the aborted transactions (eoslog.log.partition_view).
On a local file the replay reads the 61-byte headers alone and jumps over the records by the
batch length (scan.scan_headers): it must find exactly what a replay over the whole bytes finds,
and read a small fraction of them."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import eoslog
from eoslog import offline
from eoslog._ext import scan
from eoslog.fs import PosixFileSystem, descriptor_of
from eoslog.log.partition_view import PartitionView
from tests.support import logtools, scanlog
from tests.support.logtools import WholeReadsFileSystem


def _without_snapshots(source: str, target: str) -> str:
    """A copy of the log directory with every producer snapshot left out."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.snapshot"))
    return target


def _transactions(
    broker: eoslog.Broker, topic: str, count: int, records: int, value_bytes: int
) -> None:
    """`count` transactions of `records` records over the topic's partitions, every third
    aborted (each written before it ends, so aborted records are in the log), a plain record
    after each; then one transaction left open on partition 0, and a record after it."""
    partitions = broker.list_topics()[topic].num_partitions
    writer = broker.producer({"transactional.id": f"{topic}-writer"})
    writer.init_transactions()
    plain = broker.producer({"enable.idempotence": True})
    for number in range(count):
        writer.begin_transaction()
        for partition in range(partitions):
            value = b"%d-" % number + b"v" * value_bytes
            writer.produce_batch(topic, [value] * records, partition=partition)
        writer.flush()
        if number % 3 == 2:
            writer.abort_transaction()
        else:
            writer.commit_transaction()
        plain.produce(topic, value=b"plain-%d" % number, partition=number % partitions)
        plain.flush()
    scanlog.leave_open(broker, plain, topic, f"{topic}-open")


@pytest.fixture
def unsnapshotted(tmp_path):  # type: ignore[no-untyped-def]
    """Commits, aborts and a transaction open at the tail over several segments, copied while
    the owner holds it open, without its producer snapshots; and the owner."""
    broker = eoslog.open(str(tmp_path / "owned"), durability="none", background=False)
    broker.create_topic(scanlog.TOPIC, scanlog.PARTITIONS, config={"segment.bytes": 4096})
    _transactions(broker, scanlog.TOPIC, count=30, records=5, value_bytes=60)
    path = _without_snapshots(str(tmp_path / "owned"), str(tmp_path / "copy"))
    yield path, broker
    broker.close()


def _view(fs: PosixFileSystem, path: str, partition: int) -> PartitionView:
    directory = os.path.join(path, f"{scanlog.TOPIC}-{partition}")
    return PartitionView(fs, directory, scanlog.TOPIC, partition)


def test_header_walk_finds_the_lso_and_aborted_transactions_of_a_whole_replay(
    unsnapshotted,  # type: ignore[no-untyped-def]
) -> None:
    path, broker = unsnapshotted
    aborted_seen = 0
    for partition in range(scanlog.PARTITIONS):
        with (
            _view(PosixFileSystem(), path, partition) as walked,
            _view(WholeReadsFileSystem(), path, partition) as whole,
        ):
            assert descriptor_of(walked.segment(0).log) is not None
            assert descriptor_of(whole.segment(0).log) is None
            assert walked.last_stable_offset == whole.last_stable_offset
            assert walked.aborted_transactions() == whole.aborted_transactions()
            owner = broker.log(scanlog.TOPIC, partition)
            assert walked.last_stable_offset == owner.last_stable_offset
            aborted_seen += len(walked.aborted_transactions())
    assert aborted_seen > 0
    with _view(PosixFileSystem(), path, 0) as view:
        assert view.last_stable_offset < view.log_end_offset  # the open transaction holds it


def test_header_walk_rows_equal_a_scan_of_the_whole_bytes(unsnapshotted) -> None:  # type: ignore[no-untyped-def]
    path, _ = unsnapshotted
    with _view(PosixFileSystem(), path, 0) as view:
        assert len(view.segment_bases) > 2
        for number in range(len(view.segment_bases)):
            segment = view.segment(number)
            walked = segment.scan_headers_from(0)
            assert len(walked) > 0
            assert np.array_equal(walked, segment.scan_from(0, chunk_bytes=1 << 24))


def test_header_walk_stops_quietly_at_a_torn_tail(tmp_path) -> None:  # type: ignore[no-untyped-def]
    broker = eoslog.open(str(tmp_path), durability="none", background=False)
    broker.create_topic(scanlog.TOPIC, 1)
    _transactions(broker, scanlog.TOPIC, count=4, records=3, value_bytes=20)
    broker.close()
    log = os.path.join(tmp_path, f"{scanlog.TOPIC}-0", "00000000000000000000.log")
    data = logtools.file_bytes(log)
    whole, _, _ = scan.scan_batches(data, verify_crc=False)
    cut = int(whole["position"][-1]) + 70  # inside the last batch: a torn write
    with open(log, "rb") as file:
        rows, stop, status = scan.scan_headers(file.fileno(), 0, cut)
        assert status == 0
        assert stop == int(whole["position"][-1])
        assert np.array_equal(rows, whole[:-1])
        rows, stop, _ = scan.scan_headers(file.fileno(), 0, len(data), max_batches=2)
        assert np.array_equal(rows, whole[:2])
        assert stop == int(whole["position"][2])


def _bytes_read_by_this_process() -> int:
    """Bytes the process has read through read(2)-family calls (/proc/self/io rchar), page
    cache hits included: what native preads cost, counted by the kernel."""
    with open("/proc/self/io") as io:
        for line in io:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux's /proc/self/io")
def test_planning_without_a_snapshot_reads_the_headers_not_the_records(tmp_path) -> None:  # type: ignore[no-untyped-def]
    broker = eoslog.open(str(tmp_path / "owned"), durability="none", background=False)
    broker.create_topic("big", 1, config={"segment.bytes": 64 << 20})
    _transactions(broker, "big", count=64, records=256, value_bytes=1000)
    path = _without_snapshots(str(tmp_path / "owned"), str(tmp_path / "copy"))
    segment_bytes = os.path.getsize(os.path.join(path, "big-0", "00000000000000000000.log"))
    assert segment_bytes > 8 << 20
    owner = broker.log("big", 0)

    def bytes_planning_reads(isolation_level: str) -> tuple[int, offline.ScanRange]:
        before = _bytes_read_by_this_process()
        (planned,) = offline.plan_ranges(path, [("big", 0)], isolation_level=isolation_level)
        return _bytes_read_by_this_process() - before, planned

    # read_uncommitted replays nothing: the same views, indexes and checkpoints.
    without_replay, _ = bytes_planning_reads("read_uncommitted")
    with_replay, planned = bytes_planning_reads("read_committed")

    assert planned.stop == owner.last_stable_offset < owner.log_end_offset
    assert planned.aborted is not None and len(planned.aborted) == 21  # every third of 64
    # 64 transactions of a few batches and a marker each: a few hundred headers, the markers
    # and the .txnindex; reading the records would cost the whole segment.
    replay = with_replay - without_replay
    assert replay < segment_bytes // 100, f"the replay read {replay} of {segment_bytes} bytes"
    broker.close()
