"""The coordinator's transactions-v1 path (docs/coordinator.md §3.6 "TV0/TV1 rules", §9.4): the
explicit AddPartitionsToTxn and an EndTxn below v5, as Kafka clients over the wire send them
(issue 18). A v1 transaction ends at its own epoch: the producer keeps its id and epoch across
transactions and its sequences go on."""

from __future__ import annotations

import os

import pytest

import eoslog
from eoslog.coordinator.transaction_state import TransactionState
from eoslog.errors import (
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    ProducerFencedError,
    TransactionCoordinatorFencedError,
)
from eoslog.log.partition import PartitionLog
from tests.coordinator.test_transaction_coordinator import (
    committed_values,
    crash_before_markers,
    produce,
)
from tests.support import logtools

TXN = "wire-0"
V1 = 0  # the client transaction version Kafka records for EndTxn below v5
PARTITIONS = [("a", 0), ("b", 1)]


def v1_transaction(
    broker: eoslog.Broker, producer: tuple[int, int], sequence: int, commit: bool, tag: bytes
) -> tuple[int, int]:
    coordinator = broker.transactions
    coordinator.add_partitions(TXN, *producer, PARTITIONS, transaction_version=V1)
    for topic, partition in PARTITIONS:
        produce(broker.log(topic, partition), producer, sequence, [tag])
    return coordinator.end_transaction(TXN, *producer, commit, transaction_version=V1)


def test_v1_transactions_keep_the_epoch_and_end_as_they_were_asked(
    broker: eoslog.Broker,
) -> None:
    producer = broker.transactions.init_producer_id(TXN, 60_000)
    assert v1_transaction(broker, producer, 0, True, b"t1") == producer
    assert v1_transaction(broker, producer, 1, False, b"t2") == producer
    assert v1_transaction(broker, producer, 2, True, b"t3") == producer
    for topic, partition in PARTITIONS:
        log = broker.log(topic, partition)
        assert committed_values(broker, log) == [b"t1", b"t3"]
        assert log.last_stable_offset == log.log_end_offset
    meta = broker.transactions.metadata(TXN)
    assert meta is not None and meta.state is TransactionState.COMPLETE_COMMIT
    assert (meta.producer_id, meta.producer_epoch) == producer


def test_a_retried_v1_end_answers_the_same_and_writes_no_second_marker(
    broker: eoslog.Broker,
) -> None:
    producer = broker.transactions.init_producer_id(TXN, 60_000)
    v1_transaction(broker, producer, 0, True, b"t1")
    end = broker.log("a", 0).log_end_offset
    assert broker.transactions.end_transaction(TXN, *producer, True, transaction_version=V1) == (
        producer
    )
    assert broker.log("a", 0).log_end_offset == end
    with pytest.raises(InvalidTxnStateError):  # an abort of what was committed
        broker.transactions.end_transaction(TXN, *producer, False, transaction_version=V1)


@pytest.mark.parametrize("commit", [True, False])
def test_a_v1_end_with_no_transaction_is_an_invalid_state(
    broker: eoslog.Broker, commit: bool
) -> None:
    """Unlike v2, v1 has no empty abort: an Empty id refuses both ends."""
    producer = broker.transactions.init_producer_id(TXN, 60_000)
    with pytest.raises(InvalidTxnStateError):
        broker.transactions.end_transaction(TXN, *producer, commit, transaction_version=V1)


def test_a_v1_producer_fenced_by_a_new_one_gets_producer_fenced_and_its_data_is_aborted(
    broker: eoslog.Broker,
) -> None:
    coordinator = broker.transactions
    old = coordinator.init_producer_id(TXN, 60_000)
    coordinator.add_partitions(TXN, *old, PARTITIONS, transaction_version=V1)
    produce(broker.log("a", 0), old, 0, [b"zombie"])
    new = coordinator.init_producer_id(TXN, 60_000)
    assert new[0] == old[0] and new[1] > old[1]
    with pytest.raises(ProducerFencedError):
        coordinator.end_transaction(TXN, *old, True, transaction_version=V1)
    with pytest.raises(ProducerFencedError):
        coordinator.add_partitions(TXN, *old, PARTITIONS, transaction_version=V1)
    with pytest.raises(InvalidProducerIdMappingError):
        coordinator.end_transaction(TXN, old[0] + 1, new[1], True, transaction_version=V1)
    assert committed_values(broker, broker.log("a", 0)) == []
    log = broker.log("a", 0)
    assert log.last_stable_offset == log.log_end_offset


def test_a_v1_end_while_its_prepare_is_unfinished_is_a_concurrent_transaction(
    broker: eoslog.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A marker refused as stale leaves the end in PrepareCommit (§3.6 F7): the same commit
    again is CONCURRENT_TRANSACTIONS (the client retries), an abort INVALID_TXN_STATE."""
    coordinator = broker.transactions
    producer = coordinator.init_producer_id(TXN, 60_000)
    coordinator.add_partitions(TXN, *producer, PARTITIONS, transaction_version=V1)
    produce(broker.log("a", 0), producer, 0, [b"x"])

    def refuse(*args: object, **options: object) -> int:
        raise TransactionCoordinatorFencedError("stale")

    monkeypatch.setattr(PartitionLog, "append_marker", refuse)
    coordinator.end_transaction(TXN, *producer, True, transaction_version=V1)
    meta = coordinator.metadata(TXN)
    assert meta is not None and meta.state is TransactionState.PREPARE_COMMIT
    with pytest.raises(ConcurrentTransactionsError):
        coordinator.end_transaction(TXN, *producer, True, transaction_version=V1)
    with pytest.raises(InvalidTxnStateError):
        coordinator.end_transaction(TXN, *producer, False, transaction_version=V1)


@pytest.mark.parametrize("commit", [True, False])
def test_a_v1_end_interrupted_after_prepare_is_finished_at_the_next_open(
    root: str,
    broker: eoslog.Broker,
    clock: logtools.Clock,
    tmp_path: os.PathLike[str],
    monkeypatch: pytest.MonkeyPatch,
    commit: bool,
) -> None:
    """A crash between Prepare* and the markers of the second v1 transaction at one epoch:
    the next open writes its markers at that same epoch, and leaves the first one alone."""
    producer = broker.transactions.init_producer_id(TXN, 60_000)
    v1_transaction(broker, producer, 0, True, b"t1")
    broker.transactions.add_partitions(TXN, *producer, PARTITIONS, transaction_version=V1)
    for topic, partition in PARTITIONS:
        produce(broker.log(topic, partition), producer, 1, [b"t2"])

    copy = crash_before_markers(
        monkeypatch,
        root,
        tmp_path,
        lambda: broker.transactions.end_transaction(TXN, *producer, commit, transaction_version=V1),
    )
    with eoslog.open(copy, background=False, clock_ms=clock) as again:
        meta = again.transactions.metadata(TXN)
        assert meta is not None
        assert meta.state is (
            TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT
        )
        for topic, partition in PARTITIONS:
            log = again.log(topic, partition)
            assert log.last_stable_offset == log.log_end_offset
            assert committed_values(again, log) == [b"t1"] + [b"t2"] * commit
