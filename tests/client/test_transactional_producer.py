"""The transactional Producer through the public API (docs/api.md "Producer"; docs/coordinator.md
§4.2, §7, §9.4; docs/reliability.md families 7, 9, 10, 11): brokers with a driven clock and no
background threads, read back by Consumers in both isolation levels."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import eoslog
from eoslog import TopicPartition
from eoslog.client.producer import Producer
from eoslog.client.transaction_manager import (
    ALLOWED_FROM,
    METHOD_STATES,
    METHODS,
    TransactionManager,
    TxnState,
)
from eoslog.coordinator.group_coordinator import ConsumerGroupMetadata
from eoslog.errors import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    KafkaException,
    MessagePurgedError,
    OperationTimedOutError,
    ProducerFencedError,
    ProducerStateError,
    RecordTooLargeError,
)
from eoslog.record import pycodec
from tests.support import logtools
from tests.support.logtools import OpenBroker

T = TxnState
LINGER_NEVER_MS = 600_000  # batches close on size, count, commit or abort only


@pytest.fixture
def broker(open_broker: OpenBroker) -> eoslog.Broker:
    broker = open_broker()
    broker.create_topic("t", 2)
    return broker


def transactional(broker: eoslog.Broker, tid: str = "tx", **config: object) -> Producer:
    settings: dict[str, object] = {"transactional.id": tid, "linger.ms": 0}
    settings.update({key.replace("_", "."): value for key, value in config.items()})
    return broker.producer(settings)


def started(broker: eoslog.Broker, tid: str = "tx", **config: object) -> Producer:
    producer = transactional(broker, tid, **config)
    producer.init_transactions()
    producer.begin_transaction()
    return producer


def read(broker: eoslog.Broker, topic: str = "t", isolation: str = "read_committed") -> list[Any]:
    """Every readable value of the topic now, partition by partition in offset order."""
    partitions = broker.list_topics()[topic].num_partitions
    consumer = broker.consumer(
        {"group.id": "reader", "isolation.level": isolation, "auto.offset.reset": "earliest"}
    )
    try:
        values = []
        for partition in range(partitions):
            consumer.assign([TopicPartition(topic, partition, 0)])
            while batch := consumer.consume(100_000, timeout=0):
                values += [message.value() for message in batch if message.error() is None]
        return values
    finally:
        consumer.close()


def both(broker: eoslog.Broker, topic: str = "t") -> tuple[list[Any], list[Any]]:
    return read(broker, topic, "read_committed"), read(broker, topic, "read_uncommitted")


# --- commit, abort, visibility --------------------------------------------------------------


def test_committed_records_become_visible_to_read_committed_only_at_commit(
    broker: eoslog.Broker,
) -> None:
    producer = started(broker)
    producer.produce("t", b"a", partition=0)
    producer.produce("t", b"b", partition=1)
    producer.flush()
    assert both(broker) == ([], [b"a", b"b"])
    producer.commit_transaction()
    assert both(broker) == ([b"a", b"b"], [b"a", b"b"])
    assert producer.transaction_state == "READY"


def test_aborted_records_are_visible_to_read_uncommitted_only(broker: eoslog.Broker) -> None:
    producer = started(broker)
    producer.produce("t", b"a", partition=0)
    producer.flush()
    producer.abort_transaction()
    producer.begin_transaction()
    producer.produce("t", b"b", partition=0)
    producer.commit_transaction()
    assert both(broker) == ([b"b"], [b"a", b"b"])


def test_each_end_bumps_the_epoch_and_restarts_sequences(broker: eoslog.Broker) -> None:
    producer = started(broker)
    epoch = producer.producer_epoch
    for commit in (True, False, True):
        producer.produce("t", b"x", partition=0)
        producer.produce("t", b"y", partition=0)
        producer.commit_transaction() if commit else producer.abort_transaction()
        epoch += 1
        assert producer.producer_epoch == epoch
        producer.begin_transaction()
    producer.produce("t", b"z", partition=0)
    producer.commit_transaction()  # sequence 0 at the new epoch is accepted
    assert read(broker) == [b"x", b"y", b"x", b"y", b"z"]


def test_read_committed_stops_at_an_open_transaction(broker: eoslog.Broker) -> None:
    producer = started(broker)
    plain = broker.producer({"linger.ms": 0})
    plain.produce("t", b"before", partition=0)
    plain.flush()
    producer.produce("t", b"open", partition=0)
    producer.flush()
    plain.produce("t", b"after", partition=0)
    plain.flush()
    log = broker.log("t", 0)
    assert log.last_stable_offset == 1 < log.high_watermark
    assert read(broker) == [b"before"]
    producer.commit_transaction()
    assert read(broker) == [b"before", b"open", b"after"]
    assert log.last_stable_offset == log.log_end_offset


def test_transactional_and_plain_messages_become_visible_in_commit_order(
    broker: eoslog.Broker,
) -> None:
    first = started(broker, "first")
    second = started(broker, "second")
    plain = broker.producer({"linger.ms": 0})
    first.produce("t", b"first", partition=0)
    first.flush()
    plain.produce("t", b"plain", partition=0)
    plain.flush()
    second.produce("t", b"second", partition=0)
    second.commit_transaction()
    assert read(broker) == []  # the first transaction still holds the LSO
    first.commit_transaction()
    assert read(broker) == [b"first", b"plain", b"second"]


def test_an_empty_aborted_transaction_changes_nothing(broker: eoslog.Broker) -> None:
    producer = started(broker)
    epoch = producer.producer_epoch
    producer.abort_transaction()
    assert producer.transaction_state == "READY"
    assert producer.producer_epoch == epoch  # nothing joined, so no EndTxn (§7.1)
    assert broker.log("t", 0).log_end_offset == 0
    producer.begin_transaction()
    producer.produce("t", b"v", partition=0)
    producer.commit_transaction()
    assert read(broker) == [b"v"]


def test_abort_purges_queued_messages_and_reports_them_failed(broker: eoslog.Broker) -> None:
    producer = started(broker, linger_ms=LINGER_NEVER_MS)
    reports: list[Any] = []
    for value in (b"a", b"b", b"c"):
        producer.produce("t", value, partition=0, on_delivery=lambda e, m: reports.append(e))
    producer.abort_transaction()
    assert [error.code() for error in reports] == [MessagePurgedError.code] * 3
    assert len(producer) == 0
    assert broker.log("t", 0).log_end_offset == 0


def test_compressed_aborted_batches_are_skipped_by_read_committed(broker: eoslog.Broker) -> None:
    producer = started(broker, linger_ms=LINGER_NEVER_MS, compression_type="lz4")
    aborted = [b"aborted-%d" % index for index in range(500)]
    for value in aborted:
        producer.produce("t", value, partition=0)
    producer.flush()
    producer.abort_transaction()
    producer.begin_transaction()
    for value in (b"kept-1", b"kept-2"):
        producer.produce("t", value, partition=0)
    producer.commit_transaction()
    assert both(broker) == ([b"kept-1", b"kept-2"], [*aborted, b"kept-1", b"kept-2"])


def test_ten_thousand_aborted_then_a_thousand_committed_across_twenty_partitions_read_exactly(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker(durability="none")
    broker.create_topic("wide", 20)
    producer = started(broker, linger_ms=LINGER_NEVER_MS, batch_num_messages=100)
    for index in range(10_000):
        producer.produce("wide", b"aborted-%d" % index, key=b"%d" % index)
    producer.flush()  # every aborted record is in the log, none purged
    producer.abort_transaction()
    producer.begin_transaction()
    committed = [b"committed-%d" % index for index in range(1_000)]
    for index, value in enumerate(committed):
        producer.produce("wide", value, key=b"%d" % index)
    producer.commit_transaction()
    committed_read, uncommitted_read = both(broker, "wide")
    assert sorted(committed_read) == sorted(committed)
    assert len(uncommitted_read) == 11_000


def test_produce_batch_joins_the_transaction(broker: eoslog.Broker) -> None:
    producer = started(broker)
    producer.produce_batch("t", [b"a", b"b"], partition=1)
    producer.abort_transaction()
    producer.begin_transaction()
    producer.produce_batch("t", [b"c", b"d"], partition=1)
    producer.commit_transaction()
    assert both(broker) == ([b"c", b"d"], [b"a", b"b", b"c", b"d"])


def test_records_produced_from_many_threads_commit_exactly_once(broker: eoslog.Broker) -> None:
    producer = started(broker, linger_ms=1)

    def work(thread: int) -> None:
        for index in range(200):
            producer.produce("t", b"%d-%d" % (thread, index), partition=index % 2)

    threads = [threading.Thread(target=work, args=(thread,)) for thread in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    producer.commit_transaction()
    values = read(broker)
    assert sorted(values) == sorted(b"%d-%d" % (t, i) for t in range(4) for i in range(200))
    producer.close()


# --- failures: abortable and fatal -----------------------------------------------------------


def test_a_failed_delivery_fails_the_commit_abortably_and_abort_recovers(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    broker.create_topic("small", 1, config={"max.message.bytes": 1_000})
    producer = started(broker)
    reports: list[Any] = []
    producer.produce("small", b"x" * 2_000, on_delivery=lambda e, m: reports.append(e))
    with pytest.raises(RecordTooLargeError) as raised:
        producer.commit_transaction()
    assert raised.value.error.txn_requires_abort() and not raised.value.error.fatal()
    assert producer.poll(0) == 1
    assert reports[0].code() == RecordTooLargeError.code
    assert producer.transaction_state == "ABORTABLE_ERROR"
    with pytest.raises(RecordTooLargeError):
        producer.produce("small", b"more")
    producer.abort_transaction()
    producer.begin_transaction()
    producer.produce("small", b"after", partition=0)
    producer.commit_transaction()
    assert read(broker, "small") == [b"after"]


def test_a_second_producer_fences_the_first_on_commit(broker: eoslog.Broker) -> None:
    zombie = started(broker)
    zombie.produce("t", b"zombie", partition=0)
    zombie.flush()
    successor = transactional(broker)
    successor.init_transactions()  # aborts the zombie's transaction
    with pytest.raises(ProducerFencedError) as raised:
        zombie.commit_transaction()
    assert raised.value.error.fatal()
    assert zombie.transaction_state == "FATAL_ERROR"
    for call in (zombie.begin_transaction, zombie.abort_transaction, zombie.flush):
        with pytest.raises(ProducerFencedError):
            call()
    with pytest.raises(ProducerFencedError):
        zombie.produce("t", b"more", partition=0)
    zombie.close()  # the one call left
    successor.begin_transaction()
    successor.produce("t", b"successor", partition=0)
    successor.commit_transaction()
    assert both(broker) == ([b"successor"], [b"zombie", b"successor"])


def test_a_fenced_send_is_abortable_and_the_abort_then_raises_producer_fenced(
    broker: eoslog.Broker,
) -> None:
    zombie = started(broker)
    zombie.produce("t", b"first", partition=0)
    zombie.flush()
    transactional(broker).init_transactions()
    reports: list[Any] = []
    zombie.produce("t", b"late", partition=0, on_delivery=lambda e, m: reports.append(e))
    zombie.flush()  # an abortable error is reported, not raised
    assert reports[0].code() == InvalidProducerEpochError.code
    assert reports[0].txn_requires_abort()
    assert zombie.transaction_state == "ABORTABLE_ERROR"
    with pytest.raises(ProducerFencedError):
        zombie.abort_transaction()
    assert zombie.transaction_state == "FATAL_ERROR"
    assert read(broker) == []


def test_a_fenced_send_to_a_new_partition_is_fatal(broker: eoslog.Broker) -> None:
    zombie = started(broker)
    transactional(broker).init_transactions()
    reports: list[Any] = []
    zombie.produce("t", b"late", partition=1, on_delivery=lambda e, m: reports.append(e))
    with pytest.raises(ProducerFencedError):
        zombie.flush()
    assert reports[0].code() == ProducerFencedError.code
    assert zombie.transaction_state == "FATAL_ERROR"
    assert broker.log("t", 1).log_end_offset == 0


def test_a_second_producer_fences_the_first_on_abort(broker: eoslog.Broker) -> None:
    zombie = started(broker)
    zombie.produce("t", b"zombie", partition=0)
    zombie.flush()
    transactional(broker).init_transactions()
    with pytest.raises(ProducerFencedError):
        zombie.abort_transaction()
    assert zombie.transaction_state == "FATAL_ERROR"


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(
    broker: eoslog.Broker, clock: logtools.Clock
) -> None:
    producer = started(broker, transaction_timeout_ms=1_000)
    producer.produce("t", b"slow", partition=0)
    producer.flush()
    clock.advance(999)
    broker.run_transaction_maintenance()
    assert broker.log("t", 0).last_stable_offset == 0  # not yet
    clock.advance(2)
    broker.run_transaction_maintenance()
    log = broker.log("t", 0)
    assert log.last_stable_offset == log.log_end_offset  # the hanging transaction is gone
    with pytest.raises(ProducerFencedError):
        producer.commit_transaction()
    assert both(broker) == ([], [b"slow"])
    fresh = transactional(broker)
    fresh.init_transactions()
    fresh.begin_transaction()
    fresh.produce("t", b"fresh", partition=0)
    fresh.commit_transaction()
    assert read(broker) == [b"fresh"]


def test_a_delayed_produce_from_the_previous_transaction_is_rejected(
    broker: eoslog.Broker,
) -> None:
    producer = started(broker)
    producer.produce("t", b"n", partition=0)
    producer.flush()
    # The batch a delayed request of transaction n would carry: its epoch, the next sequence.
    stale = pycodec.BatchBuilder(
        is_transactional=True,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        base_sequence=1,
    )
    stale.append(logtools.TS, None, b"stale")
    producer.commit_transaction()
    producer.begin_transaction()
    producer.produce("t", b"n+1", partition=0)
    producer.flush()
    log = broker.log("t", 0)
    end = log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        log.append_batch(stale.build())
    assert log.log_end_offset == end
    producer.commit_transaction()
    assert both(broker) == ([b"n", b"n+1"], [b"n", b"n+1"])


# --- the bank: a transfer is a transaction over two partitions -------------------------------


def test_bank_transfers_keep_the_read_committed_sum_zero(broker: eoslog.Broker) -> None:
    broker.create_topic("bank", 3)
    rng = logtools.seeded(20_260_101)
    producer = started(broker, "bank", linger_ms=LINGER_NEVER_MS)
    committed = 0
    for transfer in range(150):
        source, target = rng.sample(range(3), 2)
        amount = rng.randint(1, 100)
        producer.produce("bank", b"%d" % -amount, partition=source)
        if rng.random() < 0.5:
            producer.flush()  # the debit is in the log while the credit is not
        assert sum(int(value) for value in read(broker, "bank")) == 0
        producer.produce("bank", b"%d" % amount, partition=target)
        if rng.random() < 1 / 3:
            producer.abort_transaction()
        else:
            producer.commit_transaction()
            committed += 1
        assert sum(int(value) for value in read(broker, "bank")) == 0, transfer
        producer.begin_transaction()
    assert len(read(broker, "bank")) == 2 * committed
    assert sum(int(value) for value in read(broker, "bank", "read_uncommitted")) != 0


# --- the state machine (docs/coordinator.md §7.1, §7.2) -------------------------------------------


def test_every_transition_pair_is_allowed_exactly_as_the_table_says() -> None:
    for source in TxnState:
        for target in TxnState:
            manager = TransactionManager()
            manager.state = source
            manager.error = ProducerFencedError("earlier")
            error = InvalidProducerEpochError("now")
            if source in ALLOWED_FROM[target]:
                manager.transition(target, error)
                assert manager.state is target
            else:
                with pytest.raises(AssertionError, match="invalid transition"):
                    manager.transition(target, error)
                assert manager.state is source


def test_error_states_keep_an_error_of_their_kind() -> None:
    manager = TransactionManager()
    manager.state = T.IN_TRANSACTION
    manager.fail(RecordTooLargeError("big"))
    assert manager.state is T.ABORTABLE_ERROR
    assert manager.error is not None and manager.error.error.txn_requires_abort()
    manager.fail(ProducerFencedError("fenced"))
    assert manager.state is T.FATAL_ERROR and manager.error.error.fatal()
    manager.fail(RecordTooLargeError("later"))  # once fatal, always fatal
    assert isinstance(manager.error, ProducerFencedError)


def test_an_abortable_error_while_aborting_is_ignored() -> None:
    manager = TransactionManager()
    manager.state = T.ABORTING
    manager.fail(InvalidProducerEpochError("late"))
    assert manager.state is T.ABORTING


@pytest.mark.parametrize("state", list(TxnState))
@pytest.mark.parametrize("method", METHODS)
def test_every_method_in_every_state_is_allowed_or_raises_its_error(
    state: TxnState, method: str
) -> None:
    manager = TransactionManager()
    manager.state = state
    if state is T.FATAL_ERROR:
        manager.error = ProducerFencedError(
            eoslog.KafkaError(eoslog.KafkaError.PRODUCER_FENCED, "fenced", fatal=True)
        )
    if state is T.ABORTABLE_ERROR:
        manager.error = InvalidProducerEpochError("old epoch")
    if state in METHOD_STATES[method]:
        manager.check_call(method)
        return
    expected: type[KafkaException] = ProducerStateError
    if state is T.FATAL_ERROR:
        expected = ProducerFencedError
    elif state is T.ABORTABLE_ERROR:
        expected = InvalidProducerEpochError
    with pytest.raises(expected) as raised:
        manager.check_call(method)
    assert type(raised.value) is expected
    assert manager.state is state
    if state is T.FATAL_ERROR:
        assert raised.value.error.fatal()
    if state is T.ABORTABLE_ERROR:
        assert raised.value.error.txn_requires_abort()


# Each reachable state through the public API, and every call in it.
def _in_state(broker: eoslog.Broker, state: TxnState, tid: str) -> Producer:
    producer = transactional(broker, tid)
    if state is T.UNINITIALIZED:
        return producer
    producer.init_transactions()
    if state is T.READY:
        return producer
    producer.begin_transaction()
    if state is T.ABORTABLE_ERROR:
        producer.produce("small", b"x" * 2_000)
        producer.flush()
    elif state is T.FATAL_ERROR:
        producer.produce("t", b"x", partition=0)
        producer.flush()
        transactional(broker, tid).init_transactions()
        with pytest.raises(ProducerFencedError):
            producer.commit_transaction()
    assert producer.transaction_state == state.name
    return producer


CALLS: dict[str, Callable[[Producer], object]] = {
    "init_transactions": lambda p: p.init_transactions(),
    "begin_transaction": lambda p: p.begin_transaction(),
    "produce": lambda p: p.produce("t", b"v", partition=0),
    "produce_batch": lambda p: p.produce_batch("t", [b"v"], partition=0),
    "send_offsets_to_transaction": lambda p: p.send_offsets_to_transaction(
        [eoslog.TopicPartition("t", 0, 1)], ConsumerGroupMetadata("walk-group")
    ),
    "commit_transaction": lambda p: p.commit_transaction(),
    "abort_transaction": lambda p: p.abort_transaction(),
}
AFTER: dict[tuple[TxnState, str], TxnState] = {
    (T.UNINITIALIZED, "init_transactions"): T.READY,
    (T.READY, "begin_transaction"): T.IN_TRANSACTION,
    (T.IN_TRANSACTION, "commit_transaction"): T.READY,
    (T.IN_TRANSACTION, "abort_transaction"): T.READY,
    (T.ABORTABLE_ERROR, "abort_transaction"): T.READY,
}
REACHABLE = (T.UNINITIALIZED, T.READY, T.IN_TRANSACTION, T.ABORTABLE_ERROR, T.FATAL_ERROR)


@pytest.mark.parametrize("state", REACHABLE, ids=lambda s: s.name)
@pytest.mark.parametrize("method", [*METHODS, "close"])
def test_every_public_call_in_every_reachable_state(
    open_broker: OpenBroker, state: TxnState, method: str
) -> None:
    broker = open_broker()
    broker.create_topic("t", 1)
    broker.create_topic("small", 1, config={"max.message.bytes": 1_000})
    producer = _in_state(broker, state, f"walk-{state.name}-{method}")
    if method == "close":
        producer.close()  # never raises, in any state
        return
    call = CALLS[method]
    if state in METHOD_STATES[method]:
        call(producer)
        assert producer.transaction_state == AFTER.get((state, method), state).name
        return
    expected: type[KafkaException] = {
        T.FATAL_ERROR: ProducerFencedError,
        T.ABORTABLE_ERROR: RecordTooLargeError,
    }.get(state, ProducerStateError)
    with pytest.raises(expected):
        call(producer)
    assert producer.transaction_state == state.name


# --- CONCURRENT_TRANSACTIONS: retried, then a timeout that leaves the call to retry -----------


def _busy(calls: int, real: Callable[..., Any]) -> Callable[..., Any]:
    """`real`, answering CONCURRENT_TRANSACTIONS to its first `calls` calls."""
    left = [calls]

    def call(*args: Any) -> Any:
        if left[0] > 0:
            left[0] -= 1
            raise ConcurrentTransactionsError("still completing")
        return real(*args)

    return call


def test_init_transactions_retries_concurrent_transactions_then_times_out_retriably(
    broker: eoslog.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    coordinator = broker.transactions
    real = coordinator.init_producer_id
    monkeypatch.setattr(coordinator, "init_producer_id", _busy(3, real))
    producer = transactional(broker)
    producer.init_transactions()  # three busy answers, then success
    assert producer.transaction_state == "READY"
    monkeypatch.setattr(coordinator, "init_producer_id", _busy(1_000_000, real))
    other = transactional(broker, "other")
    with pytest.raises(OperationTimedOutError) as raised:
        other.init_transactions(timeout=0.05)
    assert raised.value.error.retriable()
    assert other.transaction_state == "INITIALIZING"
    with pytest.raises(ProducerStateError):
        other.begin_transaction()
    monkeypatch.setattr(coordinator, "init_producer_id", real)
    other.init_transactions()
    assert other.transaction_state == "READY"


def test_a_commit_that_timed_out_can_only_be_retried(
    broker: eoslog.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    coordinator = broker.transactions
    real = coordinator.end_transaction
    producer = started(broker)
    producer.produce("t", b"v", partition=0)
    monkeypatch.setattr(coordinator, "end_transaction", _busy(1_000_000, real))
    with pytest.raises(OperationTimedOutError):
        producer.commit_transaction(timeout=0.05)
    assert producer.transaction_state == "COMMITTING"
    with pytest.raises(ProducerStateError, match=r"commit_transaction\(\) timed out.*retry it"):
        producer.abort_transaction()
    with pytest.raises(ProducerStateError):
        producer.produce("t", b"late", partition=0)
    monkeypatch.setattr(coordinator, "end_transaction", _busy(2, real))
    producer.commit_transaction()
    assert read(broker) == [b"v"]
