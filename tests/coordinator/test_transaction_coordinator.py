"""The transaction coordinator wired into the broker (docs/coordinator.md §1-§4; issue 5 items 1,
2, 4, 6): state persisted to `__transaction_state` before it is applied, markers on every
partition of a transaction, fencing, recovery of unfinished ends at open, timeouts and id
expiry on the broker clock."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable

import pytest

import eoslog
from eoslog import limits
from eoslog.broker import TRANSACTION_STATE_TOPIC
from eoslog.coordinator import log_replay
from eoslog.coordinator.transaction_state import TransactionState
from eoslog.errors import (
    InvalidProducerEpochError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
    TooManyOpenTransactionsError,
)
from eoslog.log.partition import PartitionLog
from eoslog.record import codec
from tests.support import logtools

TS = logtools.TS
TXN = "copier-0"


def produce(
    log: PartitionLog, producer: tuple[int, int], sequence: int, values: list[bytes]
) -> int:
    builder = codec.BatchBuilder(
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=sequence,
        is_transactional=True,
    )
    for value in values:
        assert builder.append(TS, None, value)
    return log.append_batch(builder.build()).base_offset


def committed_values(broker: eoslog.Broker, log: PartitionLog) -> list[bytes]:
    """What a read_committed consumer sees (the Consumer applies the aborted list)."""
    consumer = broker.consumer({"auto.offset.reset": "earliest"})
    consumer.assign([eoslog.TopicPartition(log.topic, log.partition, 0)])
    found = []
    while batch := consumer.consume(1000, timeout=0):
        found.extend(message.value() for message in batch)
    consumer.close()
    return found


def transaction(
    broker: eoslog.Broker, producer: tuple[int, int], commit: bool, tag: bytes
) -> tuple[int, int]:
    """One transaction over a-0 and b-1: add, write, end. Returns the next (pid, epoch)."""
    coordinator = broker.transactions
    coordinator.add_partitions(TXN, *producer, [("a", 0), ("b", 1)])
    for topic, partition in (("a", 0), ("b", 1)):
        log = broker.log(topic, partition)
        produce(log, producer, 0, [tag + b"-1", tag + b"-2"])
    return coordinator.end_transaction(TXN, *producer, commit)


def test_commit_and_abort_are_visible_only_as_they_ended(broker: eoslog.Broker) -> None:
    producer = broker.transactions.init_producer_id(TXN, 60_000)
    producer = transaction(broker, producer, True, b"t1")
    producer = transaction(broker, producer, False, b"t2")
    producer = transaction(broker, producer, True, b"t3")
    for topic, partition in (("a", 0), ("b", 1)):
        log = broker.log(topic, partition)
        assert committed_values(broker, log) == [b"t1-1", b"t1-2", b"t3-1", b"t3-2"]
        assert log.last_stable_offset == log.log_end_offset
    meta = broker.transactions.metadata(TXN)
    assert meta is not None and meta.state is TransactionState.COMPLETE_COMMIT
    assert meta.producer_epoch == producer[1] == 3  # every end bumps the epoch (v2)


def test_an_open_transaction_holds_the_lso_of_its_partitions(broker: eoslog.Broker) -> None:
    producer = broker.transactions.init_producer_id(TXN, 60_000)
    broker.transactions.add_partitions(TXN, *producer, [("a", 0)])
    first = produce(broker.log("a", 0), producer, 0, [b"x"])
    assert broker.log("a", 0).last_stable_offset == first
    assert broker.log("b", 0).last_stable_offset == broker.log("b", 0).log_end_offset


def test_a_new_producer_with_the_id_fences_the_old_one_and_aborts_its_transaction(
    broker: eoslog.Broker,
) -> None:
    old = broker.transactions.init_producer_id(TXN, 60_000)
    broker.transactions.add_partitions(TXN, *old, [("a", 0)])
    log = broker.log("a", 0)
    produce(log, old, 0, [b"zombie"])
    new = broker.transactions.init_producer_id(TXN, 60_000)
    assert new[0] == old[0] and new[1] > old[1]
    assert committed_values(broker, log) == []  # the zombie's transaction was aborted
    assert log.last_stable_offset == log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        produce(log, old, 1, [b"late"])  # its epoch is below the abort marker's
    with pytest.raises(ProducerFencedError):
        broker.transactions.add_partitions(TXN, *old, [("b", 0)])
    with pytest.raises(ProducerFencedError):
        broker.transactions.end_transaction(TXN, *old, True)


def test_a_retried_end_returns_the_same_answer_and_writes_nothing(
    broker: eoslog.Broker,
) -> None:
    producer = broker.transactions.init_producer_id(TXN, 60_000)
    after = transaction(broker, producer, True, b"t1")
    ends = broker.log("a", 0).log_end_offset
    assert broker.transactions.end_transaction(TXN, *producer, True) == after
    assert broker.log("a", 0).log_end_offset == ends


def test_a_timeout_above_the_maximum_is_refused(broker: eoslog.Broker) -> None:
    with pytest.raises(InvalidTransactionTimeoutError):
        broker.transactions.init_producer_id(TXN, 900_001)
    assert broker.transactions.metadata(TXN) is None


def test_a_transaction_older_than_its_timeout_is_aborted_and_its_producer_fenced(
    broker: eoslog.Broker, clock: logtools.Clock
) -> None:
    producer = broker.transactions.init_producer_id(TXN, 10_000)
    broker.transactions.add_partitions(TXN, *producer, [("a", 0)])
    log = broker.log("a", 0)
    produce(log, producer, 0, [b"slow"])
    clock.advance(10_000)
    broker.run_transaction_maintenance()
    assert log.last_stable_offset == 0  # still open at exactly its timeout
    clock.advance(1)
    broker.run_transaction_maintenance()
    assert log.last_stable_offset == log.log_end_offset
    assert committed_values(broker, log) == []
    with pytest.raises(ProducerFencedError):
        broker.transactions.end_transaction(TXN, *producer, True)
    with pytest.raises(InvalidProducerEpochError):
        produce(log, producer, 1, [b"after"])


def test_an_idle_transactional_id_expires_with_a_tombstone(
    root: str, broker: eoslog.Broker, clock: logtools.Clock
) -> None:
    producer = broker.transactions.init_producer_id(TXN, 60_000)
    transaction(broker, producer, True, b"t1")
    clock.advance(7 * 86_400_000 - 1)
    broker.run_transaction_maintenance()
    assert broker.transactions.metadata(TXN) is not None
    clock.advance(1)
    broker.run_transaction_maintenance()
    assert broker.transactions.metadata(TXN) is None
    broker.close()
    with eoslog.open(root, background=False, clock_ms=clock) as again:
        assert again.transactions.metadata(TXN) is None


def test_the_state_survives_a_reopen_and_the_coordinator_epoch_grows(
    root: str, broker: eoslog.Broker, clock: logtools.Clock
) -> None:
    producer = broker.transactions.init_producer_id(TXN, 60_000)
    first_epoch = broker.transactions.coordinator_epoch
    broker.transactions.add_partitions(TXN, *producer, [("a", 0)])
    broker.close()
    with eoslog.open(root, background=False, clock_ms=clock) as again:
        meta = again.transactions.metadata(TXN)
        assert meta is not None and meta.state is TransactionState.ONGOING
        assert meta.partitions == frozenset({("a", 0)})
        assert again.transactions.coordinator_epoch == first_epoch + 1
        again.transactions.end_transaction(TXN, *producer, True)


@pytest.mark.parametrize(
    "retention",
    [{"log.retention.ms": 3_600_000}, {"log.retention.bytes": 1024}],
    ids=["retention.ms", "retention.bytes"],
)
def test_the_state_outlives_broker_level_retention(
    root: str, clock: logtools.Clock, retention: dict[str, int]
) -> None:
    """`__transaction_state` is never cut by the broker's log.retention.* (Kafka compacts it):
    after many transactions, retention and a reopen, the id keeps its producer id and epoch,
    so its next InitProducerId bumps the epoch instead of starting over (which would unfence
    a zombie of the old epoch)."""
    config = {"transaction.state.log.segment.bytes": 1024, **retention}
    with eoslog.open(root, config=config, background=False, clock_ms=clock) as broker:
        broker.create_topic("a", 1)
        producer_id, epoch = broker.transactions.init_producer_id(TXN, 60_000)
        for _ in range(30):
            broker.transactions.add_partitions(TXN, producer_id, epoch, [("a", 0)])
            broker.transactions.end_transaction(TXN, producer_id, epoch, True)
            meta = broker.transactions.metadata(TXN)
            assert meta is not None
            producer_id, epoch = meta.producer_id, meta.producer_epoch
        state_log = broker.log(TRANSACTION_STATE_TOPIC, 0)
        assert len(state_log.segments) > 3
        # Past retention.ms, within transactional.id.expiration.ms (7 days: the id stays).
        clock.advance(2 * 3_600_000)
        broker.run_maintenance()
        assert state_log.log_start_offset == 0
    with eoslog.open(root, config=config, background=False, clock_ms=clock) as again:
        meta = again.transactions.metadata(TXN)
        assert meta is not None and (meta.producer_id, meta.producer_epoch) == (producer_id, epoch)
        assert again.transactions.init_producer_id(TXN, 60_000) == (producer_id, epoch + 1)


def crash_before_markers(
    monkeypatch: pytest.MonkeyPatch,
    root: str,
    tmp_path: os.PathLike[str],
    end: Callable[[], object],
) -> str:
    """Run `end` (an EndTxn) with a crash at its first marker append, and return a copy of the
    directory as a kill -9 there would leave it (the files as they are)."""

    class Crash(Exception):
        pass

    def crash(*args: object, **options: object) -> int:
        raise Crash

    monkeypatch.setattr(PartitionLog, "append_marker", crash)
    with pytest.raises(Crash):
        end()
    monkeypatch.undo()
    copy = os.path.join(tmp_path, "copy")
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".lock"))
    return copy


@pytest.mark.parametrize("commit", [True, False])
def test_an_end_interrupted_after_prepare_is_finished_at_the_next_open(
    root: str,
    broker: eoslog.Broker,
    clock: logtools.Clock,
    tmp_path: os.PathLike[str],
    monkeypatch: pytest.MonkeyPatch,
    commit: bool,
) -> None:
    """A crash between Prepare* and the markers (a kill -9 leaves the files as they are)."""
    producer = broker.transactions.init_producer_id(TXN, 60_000)
    broker.transactions.add_partitions(TXN, *producer, [("a", 0), ("b", 1)])
    produce(broker.log("a", 0), producer, 0, [b"a"])
    produce(broker.log("b", 1), producer, 0, [b"b"])
    copy = crash_before_markers(
        monkeypatch,
        root,
        tmp_path,
        lambda: broker.transactions.end_transaction(TXN, *producer, commit),
    )
    with eoslog.open(copy, background=False, clock_ms=clock) as again:
        meta = again.transactions.metadata(TXN)
        assert meta is not None
        assert meta.state is (
            TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT
        )
        for topic, partition in (("a", 0), ("b", 1)):
            log = again.log(topic, partition)
            assert log.last_stable_offset == log.log_end_offset
            assert committed_values(again, log) == ([b"a"] if topic == "a" else [b"b"]) * commit


def test_stable_offsets_never_cut_through_a_transaction_whose_markers_are_being_written(
    broker: eoslog.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    producer = broker.transactions.init_producer_id(TXN, 60_000)
    broker.transactions.add_partitions(TXN, *producer, [("a", 0), ("b", 1)])
    produce(broker.log("a", 0), producer, 0, [b"debit"])
    produce(broker.log("b", 1), producer, 0, [b"credit"])
    first_marker_written, release = threading.Event(), threading.Event()
    real = PartitionLog.append_marker

    def slow_marker(log: PartitionLog, *args: object, **options: bool) -> int:
        offset = real(log, *args, **options)  # type: ignore[arg-type]
        first_marker_written.set()
        assert release.wait(10)
        return offset

    monkeypatch.setattr(PartitionLog, "append_marker", slow_marker)
    ending = threading.Thread(
        target=broker.transactions.end_transaction, args=(TXN, *producer, True)
    )
    ending.start()
    assert first_marker_written.wait(10)
    # a-0 already has its marker (its LSO moved), b-1 not yet: no cut may show that.
    assert broker.log("a", 0).last_stable_offset == broker.log("a", 0).log_end_offset
    assert broker.log("b", 1).last_stable_offset == 0
    cuts: list[dict[tuple[str, int], int]] = []
    cutter = threading.Thread(
        target=lambda: cuts.append(broker.transactions.stable_offsets([("a", 0), ("b", 1)]))
    )
    cutter.start()
    cutter.join(0.2)
    assert not cuts, "a cut was taken while the markers were half written"
    release.set()
    ending.join(10)
    cutter.join(10)
    assert cuts == [{("a", 0): 2, ("b", 1): 2}]


def test_a_delayed_batch_from_the_previous_transaction_is_refused_everywhere(
    broker: eoslog.Broker,
) -> None:
    """Issue 5: a produce from transaction n arriving during n+1 is rejected, also on a
    partition neither transaction had touched (the partition asks the coordinator, KIP-890)."""
    first = broker.transactions.init_producer_id(TXN, 60_000)
    second = transaction(broker, first, True, b"n")  # a-0 and b-1; the end bumps the epoch
    broker.transactions.add_partitions(TXN, *second, [("a", 1)])
    produce(broker.log("a", 1), second, 0, [b"n+1"])
    for topic, partition in (("b", 0), ("a", 1), ("a", 0)):
        log = broker.log(topic, partition)
        end = log.log_end_offset
        with pytest.raises(InvalidProducerEpochError):
            produce(log, first, 5, [b"delayed from n"])
        assert log.log_end_offset == end


def test_a_batch_for_a_partition_not_in_the_transaction_is_refused(
    broker: eoslog.Broker,
) -> None:
    producer = broker.transactions.init_producer_id(TXN, 60_000)
    with pytest.raises(InvalidTxnStateError):
        produce(broker.log("a", 0), producer, 0, [b"no transaction is open"])
    broker.transactions.add_partitions(TXN, *producer, [("a", 0)])
    with pytest.raises(InvalidTxnStateError):
        produce(broker.log("b", 0), producer, 0, [b"b-0 was never added"])
    produce(broker.log("a", 0), producer, 0, [b"fine"])
    assert broker.log("b", 0).log_end_offset == 0


def test_a_transaction_past_open_transactions_max_is_refused_and_records_nothing(
    broker: eoslog.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/style.md rule 6: with the cap lowered to 2, a third transactional id cannot open
    a transaction (a typed error; its state and `__transaction_state` unchanged) until one of
    the two ends; adding partitions to an open transaction is never refused."""
    monkeypatch.setattr(limits, "open_transactions_max", 2)
    coordinator = broker.transactions
    producers = {name: coordinator.init_producer_id(name, 60_000) for name in ("x", "y", "z")}
    coordinator.add_partitions("x", *producers["x"], [("a", 0)])
    coordinator.add_partitions("y", *producers["y"], [("a", 1)])
    coordinator.add_partitions("x", *producers["x"], [("b", 0)])  # x's transaction is open
    state_logs = [broker.log(TRANSACTION_STATE_TOPIC, 0)]
    ends = [log.log_end_offset for log in state_logs]
    with pytest.raises(TooManyOpenTransactionsError, match="open_transactions_max") as refused:
        coordinator.add_partitions("z", *producers["z"], [("b", 1)])
    assert refused.value.error.code() == 89
    meta = coordinator.metadata("z")
    assert meta is not None and meta.state is TransactionState.EMPTY and meta.pending is None
    assert not meta.partitions
    assert [log.log_end_offset for log in state_logs] == ends
    coordinator.end_transaction("y", *producers["y"], commit=True)
    coordinator.add_partitions("z", *producers["z"], [("b", 1)])
    meta = coordinator.metadata("z")
    assert meta is not None and meta.state is TransactionState.ONGOING


def _damage_the_second_batch(log_path: str, log_end: int) -> int:
    """Flip a bit in the records of the second batch of the .log at log_path, whose log ends
    at byte log_end (the file may run ahead in zeros; inside its CRC); returns the byte where
    that batch begins."""
    data = logtools.file_bytes(log_path)[:log_end]
    positions = [position for position, _ in codec.iter_headers(data)]
    assert len(positions) > 3
    logtools.flip_bit(log_path, positions[2] - 1, 0)
    return positions[1]


def test_a_damaged_transaction_log_batch_raises_in_the_replay_naming_its_file_and_byte(
    broker: eoslog.Broker,
) -> None:
    # Regression: the replay (what the coordinator runs at open) raised "CRC-32C mismatch ...
    # (batch at byte 0)": the byte in the buffer it read, and no file.
    for _ in range(4):
        producer = broker.transactions.init_producer_id(TXN, 60_000)
        broker.transactions.add_partitions(TXN, *producer, [("a", 0)])
        broker.transactions.end_transaction(TXN, *producer, True)
    state_log = broker.log("__transaction_state", 0)
    path = state_log.segments[-1].path(".log")
    # The mapped segment sees the damage.
    position = _damage_the_second_batch(path, state_log.segments[-1].size)
    with pytest.raises(eoslog.CorruptRecordError) as raised:
        list(log_replay.batches(state_log))
    assert str(raised.value) == f"{path} at byte {position}: CRC-32C mismatch: the batch is corrupt"
