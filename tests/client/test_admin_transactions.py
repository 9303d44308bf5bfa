"""The AdminClient's transaction calls (KIP-664, shaped after Java's AdminClient; docs/api.md
"Drop-in for confluent-kafka"; docs/coordinator.md §4.4): list_transactions,
describe_transactions, describe_producers and abort_transaction, on brokers with a driven
clock, read back by read_committed consumers and across a reopen."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

import eoslog
from eoslog import TopicPartition
from eoslog.client.producer import Producer
from eoslog.confluent import admin as ek_admin
from eoslog.confluent.admin import (
    TRANSACTIONAL_ID_NOT_FOUND,
    AbortTransactionSpec,
    ProducerState,
    TransactionState,
)
from eoslog.errors import InvalidProducerEpochError, KafkaError, KafkaException, ProducerFencedError
from eoslog.record import codec
from tests.support import logtools
from tests.support.logtools import OpenBroker

State = TransactionState
T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
# A producer id no transactional id owns: its batches reach the log directly, as a foreign
# client's (or a wire-protocol front end's) would, and the coordinator never ends them.
FOREIGN_PRODUCER_ID = 900_000


@pytest.fixture
def broker(open_broker: OpenBroker) -> eoslog.Broker:
    broker = open_broker()
    broker.create_topic("t", 2)
    return broker


def error_code(future: Future[Any]) -> int:
    error = future.exception(timeout=0)
    assert isinstance(error, KafkaException)
    return int(error.args[0].code())


def started(broker: eoslog.Broker, tid: str, value: bytes = b"v", partition: int = 0) -> Producer:
    producer = broker.producer({"transactional.id": tid, "linger.ms": 0})
    producer.init_transactions()
    producer.begin_transaction()
    producer.produce("t", value, partition=partition)
    producer.flush()
    return producer


def hang(broker: eoslog.Broker, value: bytes, epoch: int = 3, sequence: int = 0) -> None:
    """A transactional batch of FOREIGN_PRODUCER_ID in t-0 that no marker will ever end."""
    builder = codec.BatchBuilder(
        is_transactional=True,
        producer_id=FOREIGN_PRODUCER_ID,
        producer_epoch=epoch,
        base_sequence=sequence,
    )
    builder.append(logtools.TS, None, value)
    broker.log("t", 0).append_batch(builder.build())


def committed_values(broker: eoslog.Broker) -> list[bytes]:
    """What a read_committed consumer of t-0 reads now."""
    consumer = broker.consumer({"group.id": "reader", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition("t", 0, 0)])
        values = []
        while batch := consumer.consume(1000, timeout=0):
            values += [m.value() for m in batch if m.error() is None]
        return values
    finally:
        consumer.close()


def only_producer(broker: eoslog.Broker, tp: TopicPartition = T0) -> ProducerState:
    (state,) = broker.admin().describe_producers([tp])[tp].result()
    assert isinstance(state, ProducerState)
    return state


def spec_for(state: ProducerState, tp: TopicPartition = T0) -> AbortTransactionSpec:
    """The spec Kafka's kafka-transactions tool builds from describe_producers."""
    return AbortTransactionSpec(
        tp, state.producer_id, state.producer_epoch, state.coordinator_epoch or 0
    )


# --- list_transactions --------------------------------------------------------------------


def test_list_transactions_lists_open_committed_aborted_and_idle_ids(broker: eoslog.Broker) -> None:
    started(broker, "open")
    started(broker, "done").commit_transaction()
    started(broker, "gone").abort_transaction()
    broker.producer({"transactional.id": "idle"}).init_transactions()
    listed = broker.admin().list_transactions().result()
    assert {(x.transactional_id, x.state) for x in listed} == {
        ("open", State.ONGOING),
        ("done", State.COMPLETE_COMMIT),
        ("gone", State.COMPLETE_ABORT),
        ("idle", State.EMPTY),
    }
    open_id = broker.transactions.metadata("open")
    assert open_id is not None
    assert [x.producer_id for x in listed if x.transactional_id == "open"] == [open_id.producer_id]


def test_list_transactions_filters_by_state_producer_id_and_duration(
    broker: eoslog.Broker, clock: logtools.Clock
) -> None:
    started(broker, "old")
    clock.advance(5_000)
    started(broker, "new", partition=1)
    started(broker, "done").commit_transaction()
    clock.advance(1_000)
    admin = broker.admin()

    def ids(**options: Any) -> list[str]:
        return sorted(x.transactional_id for x in admin.list_transactions(**options).result())

    assert ids(state_filters={State.ONGOING}) == ["new", "old"]
    assert ids(state_filters=[State.COMPLETE_COMMIT, State.EMPTY]) == ["done"]
    assert ids(state_filters=set()) == ["done", "new", "old"]  # empty: every state
    old = broker.transactions.metadata("old")
    assert old is not None
    assert ids(producer_id_filters={old.producer_id}) == ["old"]
    # Running longer than the duration: "old" for 6 s, "new" for 1 s, "done" not at all.
    assert ids(duration_filter_ms=3_000) == ["old"]
    assert ids(duration_filter_ms=1_000) == ["old"]  # strictly longer, as Kafka's broker
    assert ids(duration_filter_ms=999) == ["new", "old"]
    assert ids(duration_filter_ms=-1) == ["done", "new", "old"]
    assert ids(state_filters={State.ONGOING}, duration_filter_ms=3_000) == ["old"]


# --- describe_transactions ----------------------------------------------------------------


def test_describe_transactions_gives_state_partitions_and_start_or_not_found(
    broker: eoslog.Broker, clock: logtools.Clock
) -> None:
    open_producer = started(broker, "open")
    open_producer.produce("t", b"w", partition=1)
    open_producer.flush()
    started(broker, "done").commit_transaction()
    answers = broker.admin().describe_transactions(["open", "done", "nope"])
    described = answers["open"].result()
    meta = broker.transactions.metadata("open")
    assert meta is not None
    assert (described.coordinator_id, described.state) == (0, State.ONGOING)
    assert (described.producer_id, described.producer_epoch) == (
        meta.producer_id,
        meta.producer_epoch,
    )
    assert described.transaction_timeout_ms == 60_000
    assert described.transaction_start_time_ms == clock()
    assert described.topic_partitions == [T0, T1]
    done = answers["done"].result()
    assert done.state == State.COMPLETE_COMMIT
    assert (done.transaction_start_time_ms, done.topic_partitions) == (None, [])
    assert error_code(answers["nope"]) == TRANSACTIONAL_ID_NOT_FOUND


# --- describe_producers -------------------------------------------------------------------


def test_describe_producers_reports_open_and_ended_transactions_of_each_producer(
    broker: eoslog.Broker, clock: logtools.Clock
) -> None:
    started(broker, "done", b"a").commit_transaction()  # offsets 0, marker 1
    clock.advance(10)
    started(broker, "open", b"b")  # offset 2
    found = broker.admin().describe_producers([T0])[T0].result()
    done, open_ = (broker.transactions.metadata(tid) for tid in ("done", "open"))
    assert done is not None and open_ is not None
    by_id = {state.producer_id: state for state in found}
    assert set(by_id) == {done.producer_id, open_.producer_id}
    ended, running = by_id[done.producer_id], by_id[open_.producer_id]
    assert ended.current_transaction_start_offset is None
    assert ended.producer_epoch == done.producer_epoch  # the marker's epoch, one above the data
    assert ended.coordinator_epoch == broker.transactions.coordinator_epoch
    assert running.current_transaction_start_offset == 2
    assert (running.producer_epoch, running.last_sequence) == (open_.producer_epoch, 0)
    assert running.coordinator_epoch is None  # no marker for it yet
    assert running.last_timestamp_ms == clock()


def test_describe_producers_of_an_unknown_or_empty_partition(broker: eoslog.Broker) -> None:
    unknown = TopicPartition("nope", 0)
    answers = broker.admin().describe_producers([T1, unknown])
    assert answers[T1].result() == []
    assert error_code(answers[unknown]) == KafkaError.UNKNOWN_TOPIC_OR_PART


# --- abort_transaction --------------------------------------------------------------------


def test_abort_transaction_clears_a_hanging_transaction_and_the_marker_survives_reopen(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    broker.create_topic("t", 2)
    hang(broker, b"hanging")
    started(broker, "later", b"committed").commit_transaction()
    assert committed_values(broker) == []  # held back by the hanging transaction
    log = broker.log("t", 0)
    assert log.last_stable_offset == 0
    states = broker.admin().describe_producers([T0])[T0].result()
    (hanging,) = [s for s in states if s.producer_id == FOREIGN_PRODUCER_ID]
    assert hanging.current_transaction_start_offset == 0
    spec = AbortTransactionSpec(T0, FOREIGN_PRODUCER_ID, hanging.producer_epoch, 7)
    assert broker.admin().abort_transaction(spec).result() is None
    assert log.last_stable_offset == log.log_end_offset
    assert committed_values(broker) == [b"committed"]
    after = broker.admin().describe_producers([T0])[T0].result()
    (aborted,) = [s for s in after if s.producer_id == FOREIGN_PRODUCER_ID]
    # The marker carries the epoch above the data's and the coordinator epoch given.
    assert (aborted.current_transaction_start_offset, aborted.coordinator_epoch) == (None, 7)
    assert aborted.producer_epoch == hanging.producer_epoch + 1
    with pytest.raises(InvalidProducerEpochError):  # its old epoch is fenced here
        hang(broker, b"late", sequence=1)
    broker.close()
    reopened = open_broker()
    log = reopened.log("t", 0)
    assert log.last_stable_offset == log.log_end_offset
    assert committed_values(reopened) == [b"committed"]


def test_abort_transaction_of_a_live_transaction_aborts_it_whole_and_fences_its_producer(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    broker.create_topic("t", 2)
    started(broker, "tx", b"before").commit_transaction()
    producer = started(broker, "tx", b"p0")
    producer.produce("t", b"p1", partition=1)
    producer.flush()
    state = only_producer(broker)
    assert state.current_transaction_start_offset is not None
    assert broker.admin().abort_transaction(spec_for(state)).result() is None
    for partition in (0, 1):
        log = broker.log("t", partition)
        assert log.last_stable_offset == log.log_end_offset
    # Both partitions aborted, not one: the coordinator cannot commit the rest any more.
    with pytest.raises(ProducerFencedError):
        producer.commit_transaction()
    described = broker.admin().describe_transactions(["tx"])["tx"].result()
    assert described.state == State.COMPLETE_ABORT
    assert committed_values(broker) == [b"before"]
    broker.close()
    reopened = open_broker()  # __transaction_state and the markers agree: the open succeeds
    assert committed_values(reopened) == [b"before"]
    fresh = started(reopened, "tx", b"after")
    fresh.commit_transaction()
    assert committed_values(reopened) == [b"before", b"after"]


def test_abort_transaction_refuses_what_is_not_an_open_transaction_and_writes_nothing(
    broker: eoslog.Broker,
) -> None:
    started(broker, "tx", b"a").commit_transaction()
    started(broker, "tx", b"b")
    state = only_producer(broker)
    epoch, producer_id = state.producer_epoch, state.producer_id
    coordinator_epoch = broker.transactions.coordinator_epoch
    admin = broker.admin()
    log_end = broker.log("t", 0).log_end_offset
    refusals = {
        AbortTransactionSpec(T0, producer_id + 1, epoch, coordinator_epoch): (
            KafkaError.INVALID_TXN_STATE
        ),
        AbortTransactionSpec(T0, producer_id, epoch - 1, coordinator_epoch): (
            KafkaError.INVALID_PRODUCER_EPOCH
        ),
        AbortTransactionSpec(T0, producer_id, epoch + 1, coordinator_epoch): (
            KafkaError.INVALID_PRODUCER_EPOCH
        ),
        AbortTransactionSpec(T0, producer_id, epoch, coordinator_epoch - 1): (
            KafkaError.TRANSACTION_COORDINATOR_FENCED
        ),
        AbortTransactionSpec(TopicPartition("nope", 0), producer_id, epoch, 0): (
            KafkaError.UNKNOWN_TOPIC_OR_PART
        ),
        AbortTransactionSpec(T1, producer_id, epoch, coordinator_epoch): (
            KafkaError.INVALID_TXN_STATE
        ),
    }
    for spec, code in refusals.items():
        assert error_code(admin.abort_transaction(spec)) == code, spec
    assert broker.log("t", 0).log_end_offset == log_end
    assert only_producer(broker).current_transaction_start_offset is not None
    assert admin.describe_transactions(["tx"])["tx"].result().state == State.ONGOING


# --- arguments and exports ----------------------------------------------------------------


def test_bad_arguments_raise_type_or_value_errors_at_the_call(broker: eoslog.Broker) -> None:
    admin = broker.admin()
    bad: list[tuple[type[Exception], Any]] = [
        (TypeError, lambda: admin.list_transactions(state_filters="Ongoing")),
        (TypeError, lambda: admin.list_transactions(state_filters={"Ongoing"})),
        (TypeError, lambda: admin.list_transactions(producer_id_filters=["1"])),
        (TypeError, lambda: admin.list_transactions(duration_filter_ms="5")),
        (TypeError, lambda: admin.list_transactions(states={State.ONGOING})),
        (TypeError, lambda: admin.describe_transactions("tx")),
        (TypeError, lambda: admin.describe_transactions([1])),
        (ValueError, lambda: admin.describe_transactions([])),
        (TypeError, lambda: admin.describe_transactions(["tx"], timeout=1)),
        (TypeError, lambda: admin.describe_producers(T0)),
        (TypeError, lambda: admin.describe_producers(["t"])),
        (ValueError, lambda: admin.describe_producers([])),
        (ValueError, lambda: admin.describe_producers([TopicPartition("t", -1)])),
        (TypeError, lambda: admin.describe_producers([T0], request_timeout="1")),
        (TypeError, lambda: admin.abort_transaction((T0, 1, 0, 0))),
        (TypeError, lambda: AbortTransactionSpec(("t", 0), 1, 0, 0)),  # type: ignore[arg-type]
        (TypeError, lambda: AbortTransactionSpec(T0, "1", 0, 0)),  # type: ignore[arg-type]
        (TypeError, lambda: AbortTransactionSpec(T0, 1, None, 0)),  # type: ignore[arg-type]
    ]
    for error, call in bad:
        with pytest.raises(error):
            call()
    assert broker.log("t", 0).log_end_offset == 0


def test_the_confluent_admin_module_exports_the_transaction_types() -> None:
    for name in (
        "TransactionState",
        "TransactionListing",
        "TransactionDescription",
        "ProducerState",
        "AbortTransactionSpec",
        "TRANSACTIONAL_ID_NOT_FOUND",
    ):
        assert name in ek_admin.__all__
        assert hasattr(ek_admin, name)
