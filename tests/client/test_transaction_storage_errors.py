"""A storage error while a transaction ends (docs/coordinator.md §3.6, failure points F2 and F6;
§7.2): before the coordinator's decision (Prepare*) is durable the transaction is abortable;
once it is, the outcome is the decision, the error is retriable and only the same call may be
made again, which finishes the end, as Kafka's client handles a commit it must retry. Faults
come from the recording file-system twin (eoslog.fs_twin), as in
tests/reliability/f05_io_faults, or, for a failure that leaves the partition writable (every
I/O error of a partition log itself fail-stops it), from a call that fails once."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

import eoslog
from eoslog import TopicPartition
from eoslog.client.producer import Producer
from eoslog.coordinator.transaction_state import TransactionState
from eoslog.errors import KafkaStorageError, ProducerStateError
from eoslog.fs_twin import RecordingFileSystem
from tests.client.test_transactional_producer import read, started, transactional
from tests.support.invariants import copy_twin
from tests.support.logtools import OpenBroker

# Long enough that a call answered CONCURRENT_TRANSACTIONS until it gives up (what a failed
# marker once caused) raises OperationTimedOutError rather than the storage error asserted.
MARKER_FAULT_TIMEOUT_S = 5.0


@pytest.fixture
def broker(open_broker: OpenBroker) -> eoslog.Broker:
    broker = open_broker()
    broker.create_topic("t", 2)
    return broker


def _one_open_transaction(twin: RecordingFileSystem) -> tuple[eoslog.Broker, Producer]:
    twin.makedirs("/data", durable=True)
    broker = eoslog.open("/data/log", "commit", fs=twin, background=False)
    broker.create_topic("t", 1)
    producer = started(broker)
    producer.produce("t", b"v", partition=0)
    producer.flush()
    return broker, producer


def _commit_write_call(directory: str) -> int:
    """The first twin call of commit_transaction in _one_open_transaction's workload that
    writes to `directory` (the twin is deterministic: the same workload makes the same
    calls): "t-0" for the COMMIT marker, "__transaction_state" for the Prepare* record."""
    twin = RecordingFileSystem(seed=0)
    broker, producer = _one_open_transaction(twin)
    start = twin.calls
    producer.commit_transaction()
    broker.close()
    return next(
        index
        for index, (operation, path) in enumerate(twin.recorded_calls())
        if index >= start and operation == "pwrite" and f"/{directory}" in path
    )


def _fails_once(target: Any, method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next call of target.method raises KafkaStorageError without doing anything, so
    without stopping the partition: a transient failure."""
    real = getattr(target, method)
    failures = [KafkaStorageError(f"{method}: the write failed")]

    def fails_once(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return real(*args, **kwargs)

    monkeypatch.setattr(target, method, fails_once)


def _marker_fails_next(
    broker: eoslog.Broker, value: bytes, monkeypatch: pytest.MonkeyPatch
) -> Producer:
    """A producer whose open transaction holds `value` (delivered) in t-0, where the next
    marker write fails once."""
    producer = started(broker)
    producer.produce("t", value, partition=0)
    producer.flush()
    _fails_once(broker.log("t", 0), "append_marker", monkeypatch)
    return producer


def _read_after_restart(twin: RecordingFileSystem) -> list[Any]:
    """The read_committed values of t after the directory is opened again from what the
    process left (a process crash keeps every written byte)."""
    broker = eoslog.open("/data/log", "commit", fs=twin, background=False)
    try:
        return read(broker)
    finally:
        broker.close()


# --- after the decision (F6): retriable, only the same call -------------------------------------


def test_a_storage_error_after_the_commit_is_decided_is_retriable_and_the_retry_completes_it(
    broker: eoslog.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    producer = _marker_fails_next(broker, b"committed", monkeypatch)
    with pytest.raises(KafkaStorageError) as raised:
        producer.commit_transaction(MARKER_FAULT_TIMEOUT_S)
    error = raised.value.error
    assert (error.retriable(), error.fatal(), error.txn_requires_abort()) == (True, False, False)
    assert producer.transaction_state == "COMMITTING"
    producer.commit_transaction(MARKER_FAULT_TIMEOUT_S)
    assert producer.transaction_state == "READY"
    assert read(broker) == [b"committed"]
    producer.begin_transaction()
    producer.produce("t", b"next", partition=1)
    producer.commit_transaction(MARKER_FAULT_TIMEOUT_S)
    assert read(broker) == [b"committed", b"next"]


def test_abort_after_a_decided_commit_failed_is_a_state_error_and_changes_nothing(
    broker: eoslog.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kafka's client: "the previous call to commitTransaction ... must be retried".
    producer = _marker_fails_next(broker, b"committed", monkeypatch)
    with pytest.raises(KafkaStorageError):
        producer.commit_transaction(MARKER_FAULT_TIMEOUT_S)
    with pytest.raises(ProducerStateError, match="failed after the commit was decided") as raised:
        producer.abort_transaction(MARKER_FAULT_TIMEOUT_S)
    assert not raised.value.error.fatal()
    assert producer.transaction_state == "COMMITTING"
    producer.commit_transaction(MARKER_FAULT_TIMEOUT_S)
    assert read(broker) == [b"committed"]


def test_a_storage_error_after_the_abort_is_decided_is_retriable_and_the_retry_completes_it(
    broker: eoslog.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    producer = _marker_fails_next(broker, b"aborted", monkeypatch)
    with pytest.raises(KafkaStorageError) as raised:
        producer.abort_transaction(MARKER_FAULT_TIMEOUT_S)
    assert raised.value.error.retriable()
    assert producer.transaction_state == "ABORTING"
    with pytest.raises(ProducerStateError, match="failed after the abort was decided"):
        producer.commit_transaction(MARKER_FAULT_TIMEOUT_S)
    producer.abort_transaction(MARKER_FAULT_TIMEOUT_S)
    meta = broker.transactions.metadata("tx")
    assert meta is not None and meta.state is TransactionState.COMPLETE_ABORT
    producer.begin_transaction()
    producer.produce("t", b"committed", partition=0)
    producer.commit_transaction(MARKER_FAULT_TIMEOUT_S)
    assert read(broker) == [b"committed"]


def test_a_failed_marker_write_stops_the_partition_and_the_decided_commit_lands_at_next_open() -> (
    None
):
    # The marker's failed write stops t-0: the commit cannot be finished while this broker
    # runs. Each later call for the id says so at once, typed, instead of being answered
    # CONCURRENT_TRANSACTIONS until its timeout; the commit stays the outcome.
    twin = RecordingFileSystem(seed=0)
    twin.fail_at(_commit_write_call("t-0/"), "EIO")
    broker, producer = _one_open_transaction(twin)
    for _ in range(2):
        with pytest.raises(KafkaStorageError) as raised:
            producer.commit_transaction(MARKER_FAULT_TIMEOUT_S)
        assert raised.value.error.retriable()
    with pytest.raises(ProducerStateError):
        producer.abort_transaction(MARKER_FAULT_TIMEOUT_S)
    assert producer.transaction_state == "COMMITTING"
    successor = transactional(broker)
    with pytest.raises(KafkaStorageError):
        successor.init_transactions(MARKER_FAULT_TIMEOUT_S)
    meta = broker.transactions.metadata("tx")
    assert meta is not None and meta.state is TransactionState.PREPARE_COMMIT
    with contextlib.suppress(KafkaStorageError):  # close reports t-0's failure again
        broker.close()
    assert _read_after_restart(copy_twin(twin)) == [b"v"]


def test_transaction_maintenance_finishes_an_end_a_transient_marker_failure_left_unfinished(
    broker: eoslog.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The producer never calls again: the coordinator retries the marker itself, so the
    # partition's last stable offset does not wait on the transaction forever.
    producer = _marker_fails_next(broker, b"committed", monkeypatch)
    with pytest.raises(KafkaStorageError):
        producer.commit_transaction(MARKER_FAULT_TIMEOUT_S)
    assert read(broker) == []
    broker.run_transaction_maintenance()
    meta = broker.transactions.metadata("tx")
    assert meta is not None and meta.state is TransactionState.COMPLETE_COMMIT
    assert read(broker) == [b"committed"]
    producer.commit_transaction(MARKER_FAULT_TIMEOUT_S)  # the retry answers the outcome
    assert producer.transaction_state == "READY"


# --- before the decision (F1, F2): abortable -----------------------------------------------------


def test_a_storage_error_before_the_commit_is_decided_is_abortable_and_the_abort_works(
    broker: eoslog.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    producer = started(broker)
    producer.produce("t", b"aborted", partition=0)
    producer.flush()
    state_log, _ = broker.transactions._placement("tx")
    _fails_once(state_log, "append_batch", monkeypatch)
    with pytest.raises(KafkaStorageError) as raised:
        producer.commit_transaction(MARKER_FAULT_TIMEOUT_S)
    error = raised.value.error
    assert (error.retriable(), error.fatal(), error.txn_requires_abort()) == (False, False, True)
    assert producer.transaction_state == "ABORTABLE_ERROR"
    producer.abort_transaction(MARKER_FAULT_TIMEOUT_S)
    assert read(broker) == []
    producer.begin_transaction()
    producer.produce("t", b"committed", partition=0)
    producer.commit_transaction(MARKER_FAULT_TIMEOUT_S)
    assert read(broker) == [b"committed"]


def test_a_failed_prepare_write_is_abortable_and_stops_the_id_until_the_next_open() -> None:
    # An I/O error on the Prepare* record stops the id's __transaction_state partition: the
    # abort is refused with the storage error too, and the transaction is decided at the
    # next open (here it never reached the file: aborted).
    twin = RecordingFileSystem(seed=0)
    twin.fail_at(_commit_write_call("__transaction_state"), "EIO")
    broker, producer = _one_open_transaction(twin)
    with pytest.raises(KafkaStorageError) as raised:
        producer.commit_transaction(MARKER_FAULT_TIMEOUT_S)
    assert not raised.value.error.retriable() and raised.value.error.txn_requires_abort()
    with pytest.raises(KafkaStorageError):
        producer.abort_transaction(MARKER_FAULT_TIMEOUT_S)
    meta = broker.transactions.metadata("tx")
    assert meta is not None and meta.state is TransactionState.ONGOING
    with contextlib.suppress(KafkaStorageError):  # close reports the failure again
        broker.close()
    after = eoslog.open("/data/log", "commit", fs=copy_twin(twin), background=False)
    try:
        after.transactions.init_producer_id("tx", 60_000)  # ends what was left open
        assert read(after) == []
        assert read(after, isolation="read_uncommitted") == [b"v"]
    finally:
        after.close()


def test_a_read_committed_consumer_sees_a_commit_retried_after_a_storage_error(
    broker: eoslog.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    consumer = broker.consumer({"group.id": "g", "isolation.level": "read_committed"})
    consumer.assign([TopicPartition("t", 0, 0)])
    producer = _marker_fails_next(broker, b"committed", monkeypatch)
    with pytest.raises(KafkaStorageError):
        producer.commit_transaction(MARKER_FAULT_TIMEOUT_S)
    assert consumer.consume(10, timeout=0) == []
    producer.commit_transaction(MARKER_FAULT_TIMEOUT_S)
    assert [m.value() for m in consumer.consume(10, timeout=0)] == [b"committed"]
    consumer.close()
