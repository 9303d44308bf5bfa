"""Transactions at the partition log (docs/format.md §6-§8; docs/kafka-behaviours.md UL-T 74, 75,
77, 79, LL-T 80, PSM-T 54, 63, 64): markers written for the coordinator, the last stable offset,
read_committed fetches bounded by it with the aborted transactions listed, and the .txnindex
entries rebuilt by recovery."""

from __future__ import annotations

import os
import shutil

import pytest

import eoslog
from eoslog import crashpoints
from eoslog.errors import InvalidProducerEpochError, TransactionCoordinatorFencedError
from eoslog.log.partition import PartitionLog
from eoslog.log.txn_index import AbortedTxn, TransactionIndex
from eoslog.record import codec
from tests.support import logtools
from tests.support.logtools import OpenBroker

TS = logtools.TS
P1, P2 = 101, 202
RC = "read_committed"


class Writer:
    """One producer's batches: consecutive sequences, transactional or not."""

    def __init__(self, log: PartitionLog, producer_id: int, epoch: int = 0) -> None:
        self.log, self.producer_id, self.epoch, self.sequence = log, producer_id, epoch, 0

    def write(self, count: int, *, transactional: bool = True) -> tuple[int, int]:
        builder = codec.BatchBuilder(
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=self.sequence,
            is_transactional=transactional,
        )
        for value in logtools.values(self.sequence, count):
            assert builder.append(TS, None, b"%d:" % self.producer_id + value)
        info = self.log.append_batch(builder.build())
        self.sequence += count
        return info.base_offset, info.last_offset

    def end(self, commit: bool, coordinator_epoch: int = 0) -> int:
        """Transactions v2: the marker carries the next epoch; sequences restart at 0."""
        self.epoch += 1
        self.sequence = 0
        return self.log.append_marker(self.producer_id, self.epoch, coordinator_epoch, commit)


def plain(log: PartitionLog, count: int) -> tuple[int, int]:
    info = log.append_batch(logtools.batch(logtools.values(0, count), timestamps=TS))
    return info.base_offset, info.last_offset


def new_topic(broker: eoslog.Broker, **config: object) -> PartitionLog:
    broker.create_topic("t", 1, config=dict(config))
    return broker.log("t", 0)


def fetched_offsets(log: PartitionLog, offset: int, isolation: str) -> list[int]:
    """Offsets of the data records a read returns (control records left out), read to the end
    of what the fetch bound allows."""
    offsets: list[int] = []
    while True:
        result = log.read(offset, 1 << 20, isolation_level=isolation)
        if not len(result.records):
            return offsets
        for _, header in codec.iter_headers(bytes(result.records)):
            if not header.is_control:
                offsets.extend(range(header.base_offset, header.last_offset + 1))
            offset = header.last_offset + 1


def test_read_committed_stops_at_the_first_open_transaction_until_it_ends(
    open_broker: OpenBroker,
) -> None:
    """testFetchUpToLastStableOffset: p1 txn 0-4, non-txn 5-7, p2 txn 8-9, ..."""
    log = new_topic(open_broker())
    p1, p2 = Writer(log, P1), Writer(log, P2)
    p1.write(5)
    plain(log, 3)
    p2.write(2)
    p1.write(4)
    plain(log, 2)
    p1.write(10)
    assert log.last_stable_offset == 0
    assert fetched_offsets(log, 0, "read_committed") == []
    assert log.read(0, isolation_level="read_committed").last_stable_offset == 0
    p1.end(commit=True)
    assert log.last_stable_offset == 8  # p2's transaction is still open
    assert fetched_offsets(log, 0, "read_committed") == list(range(8))
    p2.end(commit=False)
    assert log.last_stable_offset == log.log_end_offset == log.high_watermark
    assert len(fetched_offsets(log, 0, "read_uncommitted")) == 26


def test_an_abort_is_indexed_and_listed_for_every_read_committed_fetch_it_overlaps(
    open_broker: OpenBroker,
) -> None:
    """testTransactionIndexUpdated: (pid, first offset, marker offset, LSO at the abort)."""
    log = new_topic(open_broker())
    p1, p2 = Writer(log, P1), Writer(log, P2)
    p1.write(3)  # 0-2
    p2.write(2)  # 3-4
    abort_at = p1.end(commit=False)  # 5
    assert log.segments[-1].txn_index.all_entries() == [AbortedTxn(P1, 0, abort_at, 3)]
    p2.end(commit=True)
    result = log.read(0, isolation_level="read_committed")
    assert result.aborted_transactions == [(P1, 0)]
    assert log.read(6, isolation_level="read_committed").aborted_transactions == []
    assert log.read(0, isolation_level="read_uncommitted").aborted_transactions is None


# --- a read in the middle of an append (regressions: the reverted zero-copy consume() met
# these in tests/client/test_consumer_concurrency.py; each test stops the writer at one point) ----


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_a_read_leaves_out_a_batch_the_log_end_does_not_cover_yet(
    open_broker: OpenBroker, isolation: str
) -> None:
    # An append writes the bytes (the segment's size moves) before the log end moves past
    # them; a read between the two saw the new batch, past its own high watermark, and a
    # consumer moved its position past the log end, then reset and read everything again.
    log = new_topic(open_broker())
    plain(log, 3)
    logtools.append_to_segment(
        log.segments[-1], logtools.batch(logtools.values(3, 2), base_offset=3, timestamps=TS)
    )
    assert log.high_watermark == 3
    assert fetched_offsets(log, 0, isolation) == [0, 1, 2]


def test_an_open_transaction_is_unstable_as_soon_as_the_log_end_covers_its_first_batch(
    open_broker: OpenBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = new_topic(open_broker())
    plain(log, 2)
    seen: list[tuple[int, int, list[int]]] = []

    def at_append_after(point: str) -> None:
        if point == "append.after":
            seen.append((log.high_watermark, log.last_stable_offset, fetched_offsets(log, 0, RC)))

    # The append path calls the crash points' HOOK (hit, when a point is armed) natively.
    monkeypatch.setattr(crashpoints, "HOOK", at_append_after)
    Writer(log, P1).write(3)
    # Written, producer state not yet told: the log end must not cover the batch yet.
    assert seen == [(2, 2, [0, 1])]
    assert (log.high_watermark, log.last_stable_offset) == (5, 2)


def test_an_aborted_transaction_stays_hidden_while_its_index_entry_is_written(
    open_broker: OpenBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = new_topic(open_broker())
    writer = Writer(log, P1)
    writer.write(3)
    seen: list[tuple[int, list[int]]] = []
    append = TransactionIndex.append

    def append_watched(index: TransactionIndex, entry: AbortedTxn) -> None:
        # The producer state has closed the transaction; the entry is not written yet.
        seen.append((log.last_stable_offset, fetched_offsets(log, 0, RC)))
        append(index, entry)

    monkeypatch.setattr(TransactionIndex, "append", append_watched)
    marker = writer.end(commit=False)
    assert seen == [(0, [])]
    assert log.last_stable_offset == marker + 1
    assert log.read(0, 1 << 20, isolation_level=RC).aborted_transactions == [(P1, 0)]


def test_a_transaction_spanning_segments_is_listed_once(open_broker: OpenBroker) -> None:
    """testAbortedTransactionSpanningMultipleSegments."""
    log = new_topic(open_broker(), **{"segment.bytes": 250})
    p1 = Writer(log, P1)
    for _ in range(6):
        p1.write(2)
    assert len(log.segments) > 2
    p1.end(commit=False)
    assert log.read(0, isolation_level="read_committed").aborted_transactions == [(P1, 0)]


def test_a_marker_without_an_open_transaction_adds_no_entry_and_opens_nothing(
    open_broker: OpenBroker,
) -> None:
    """testSkipEmptyTransactions / testAppendEmptyControlBatch at the log level."""
    log = new_topic(open_broker())
    p1 = Writer(log, P1)
    p1.end(commit=False)
    p1.end(commit=True)
    assert log.segments[-1].txn_index.all_entries() == []
    assert log.last_stable_offset == log.log_end_offset == 2


def test_stale_markers_are_refused_and_write_nothing(open_broker: OpenBroker) -> None:
    """testZombieCoordinatorFenced / testEndTxnWithFencedProducerEpoch /
    testOldEpochForControlRecord."""
    log = new_topic(open_broker())
    p1 = Writer(log, P1, epoch=3)
    p1.write(2)
    end = log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(P1, 2, 0, True)  # older than the data
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(P1, 3, 0, True)  # v2: the open transaction's marker must bump
    log.append_marker(P1, 4, 5, False)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_marker(P1, 4, 4, False)  # an older coordinator
    assert log.log_end_offset == end + 1
    log.append_marker(P1, 4, 5, False)  # the same marker again: an idempotent retry
    with pytest.raises(InvalidProducerEpochError):
        Writer(log, P1, epoch=3).write(1)  # the fenced epoch cannot write any more


@pytest.mark.parametrize("damage", ["unclean stop", "txnindex deleted"])
def test_recovery_rebuilds_the_transaction_index_exactly(
    open_broker: OpenBroker, tmp_path: os.PathLike[str], damage: str
) -> None:
    """testFullTransactionIndexRecovery / testRebuildTransactionalState."""
    broker = open_broker()
    log = new_topic(broker, **{"segment.bytes": 700})
    p1, p2 = Writer(log, P1), Writer(log, P2)
    for _ in range(3):
        p1.write(2)
        p2.write(1)
        p1.end(commit=False)
        p2.end(commit=p2.epoch % 2 == 0)
    p2.write(3)  # still open at the stop
    expected = [s.txn_index.all_entries() for s in log.segments]
    assert sum(map(len, expected)) == 4  # three aborts by p1, one by p2
    stable, end = log.last_stable_offset, log.log_end_offset
    listed = log.read(0, isolation_level="read_committed").aborted_transactions
    assert listed
    log.flush()
    copy = os.path.join(tmp_path, "copy")
    shutil.copytree(log.directory.rsplit("/", 1)[0], copy, ignore=shutil.ignore_patterns(".lock"))
    broker.close()
    if damage == "txnindex deleted":
        partition = os.path.join(copy, "t-0")
        for name in os.listdir(partition):
            if name.endswith((".txnindex", ".snapshot")):
                os.unlink(os.path.join(partition, name))
    reopened = eoslog.open(copy, background=False, clock_ms=lambda: TS)
    try:
        again = reopened.log("t", 0)
        assert [s.txn_index.all_entries() for s in again.segments] == expected
        assert (again.last_stable_offset, again.log_end_offset) == (stable, end)
        assert (
            again.read(0, isolation_level="read_committed").aborted_transactions
            == [
                (entry.producer_id, entry.first_offset)
                for entries in expected
                for entry in entries
                if entry.first_offset < stable
            ][: len(again.read(0, isolation_level="read_committed").aborted_transactions or [])]
        )
    finally:
        reopened.close()


def test_the_last_stable_offset_survives_a_clean_reopen(
    open_broker: OpenBroker, tmp_path: os.PathLike[str]
) -> None:
    broker = open_broker()
    log = new_topic(broker)
    p1 = Writer(log, P1)
    plain(log, 2)
    p1.write(3)
    broker.close()
    reopened = eoslog.open(os.path.join(tmp_path, "data"), background=False, clock_ms=lambda: TS)
    try:
        again = reopened.log("t", 0)
        assert again.last_stable_offset == 2
        again.append_marker(P1, 1, 0, True)
        assert again.last_stable_offset == again.log_end_offset
    finally:
        reopened.close()
