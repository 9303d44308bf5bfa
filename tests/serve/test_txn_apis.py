"""The transaction APIs of `eoslog serve` (eoslog.serve.txn_apis; issue 18), driven with kio
request entities as a Kafka client sends them, over a real Broker: the answers a client gets,
and what they leave in the coordinator and in the log (a read_committed consumer's view)."""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode

import eoslog
from eoslog.coordinator.transaction_state import TransactionState
from eoslog.errors import KafkaStorageError
from eoslog.record import codec
from tests.serve.handler_calls import answer, nested, request
from tests.support import logtools

TXN = "wire-txn"
MINUTE = datetime.timedelta(minutes=1)


@pytest.fixture
def broker(tmp_path: os.PathLike[str], clock: logtools.Clock) -> Iterator[eoslog.Broker]:
    opened = eoslog.open(os.path.join(tmp_path, "data"), background=False, clock_ms=clock)
    opened.create_topic("out", 2)
    opened.create_topic("in", 1)
    yield opened
    opened.close()


def init(broker: eoslog.Broker, version: int = 4, **fields: object) -> object:
    fields.setdefault("transactional_id", TXN)
    fields.setdefault("transaction_timeout", MINUTE)
    if version >= 3:
        fields.setdefault("producer_id", -1)
        fields.setdefault("producer_epoch", -1)
    return answer(broker, request(22, version, **fields))


def add_partitions(
    broker: eoslog.Broker, producer: tuple[int, int], partitions: dict[str, list[int]], version: int
) -> dict[tuple[str, int], ErrorCode]:
    topic = nested(24, version, "AddPartitionsToTxnTopic")
    response = answer(
        broker,
        request(
            24,
            version,
            v3_and_below_transactional_id=TXN,
            v3_and_below_producer_id=producer[0],
            v3_and_below_producer_epoch=producer[1],
            v3_and_below_topics=tuple(
                topic(name=name, partitions=tuple(indexes)) for name, indexes in partitions.items()
            ),
        ),
    )
    return {
        (result.name, p.partition_index): p.partition_error_code
        for result in response.results_by_topic_v3_and_below
        for p in result.results_by_partition
    }


def end(broker: eoslog.Broker, producer: tuple[int, int], commit: bool, version: int = 1) -> object:
    sent = request(
        26,
        version,
        transactional_id=TXN,
        producer_id=producer[0],
        producer_epoch=producer[1],
        committed=commit,
    )
    return answer(broker, sent).error_code


def produce(broker: eoslog.Broker, producer: tuple[int, int], sequence: int, value: bytes) -> None:
    """What a Produce request hands the partition: the client's transactional batch."""
    builder = codec.BatchBuilder(
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=sequence,
        is_transactional=True,
    )
    builder.append(logtools.TS, None, value)
    broker.log("out", 0).append_batch(builder.build())


def read_committed(broker: eoslog.Broker) -> list[bytes | None]:
    consumer = broker.consumer({"auto.offset.reset": "earliest"})
    consumer.assign([eoslog.TopicPartition("out", 0, 0)])
    found: list[bytes | None] = []
    while batch := consumer.consume(1000, timeout=0):
        found.extend(message.value() for message in batch)
    consumer.close()
    return found


def producer_of(response: object) -> tuple[int, int]:
    assert response.error_code == ErrorCode.none  # type: ignore[attr-defined]
    return int(response.producer_id), int(response.producer_epoch)  # type: ignore[attr-defined]


def test_an_idempotent_producer_gets_a_new_producer_id_at_epoch_0_every_time(
    broker: eoslog.Broker,
) -> None:
    first = producer_of(init(broker, transactional_id=None))
    second = producer_of(init(broker, transactional_id=None, producer_id=first[0]))
    assert first[1] == second[1] == 0 and first[0] != second[0]


def test_v1_transactions_over_the_wire_commit_and_abort_at_one_epoch(
    broker: eoslog.Broker,
) -> None:
    producer = producer_of(init(broker))
    # The sequences go on across the transactions, as the epoch does.
    for sequence, (commit, value) in enumerate(((True, b"t1"), (False, b"t2"), (True, b"t3"))):
        assert add_partitions(broker, producer, {"out": [0]}, 3) == {("out", 0): ErrorCode.none}
        produce(broker, producer, sequence, value)
        assert end(broker, producer, commit) == ErrorCode.none
    assert read_committed(broker) == [b"t1", b"t3"]
    meta = broker.transactions.metadata(TXN)
    assert meta is not None and meta.state is TransactionState.COMPLETE_COMMIT
    assert (meta.producer_id, meta.producer_epoch) == producer  # the client's epoch holds


def test_a_second_init_fences_the_first_producer_with_the_code_its_version_knows(
    broker: eoslog.Broker,
) -> None:
    old = producer_of(init(broker))
    assert add_partitions(broker, old, {"out": [0]}, 3) == {("out", 0): ErrorCode.none}
    produce(broker, old, 0, b"zombie")
    new = producer_of(init(broker))
    assert new == (old[0], old[1] + 2)  # one bump fences and aborts, one is the new producer's
    assert end(broker, old, True, version=2) == ErrorCode.producer_fenced
    assert end(broker, old, True, version=1) == ErrorCode.invalid_producer_epoch
    assert add_partitions(broker, old, {"out": [0]}, 2) == {("out", 0): ErrorCode.producer_fenced}
    assert add_partitions(broker, old, {"out": [0]}, 1) == {
        ("out", 0): ErrorCode.invalid_producer_epoch
    }
    assert read_committed(broker) == []
    log = broker.log("out", 0)
    assert log.last_stable_offset == log.log_end_offset


def test_kip_360_init_with_the_current_producer_bumps_its_epoch_and_a_stale_one_is_fenced(
    broker: eoslog.Broker,
) -> None:
    producer = producer_of(init(broker))
    bumped = producer_of(init(broker, producer_id=producer[0], producer_epoch=producer[1]))
    assert bumped == (producer[0], producer[1] + 1)
    # The same request again is a retry of that bump (KAFKA-8710): the same answer.
    retried = producer_of(init(broker, producer_id=producer[0], producer_epoch=producer[1]))
    assert retried == bumped
    producer_of(init(broker, producer_id=bumped[0], producer_epoch=bumped[1]))
    stale = init(broker, producer_id=producer[0], producer_epoch=producer[1])
    assert stale.error_code == ErrorCode.producer_fenced  # type: ignore[attr-defined]
    assert (stale.producer_id, stale.producer_epoch) == (-1, -1)  # type: ignore[attr-defined]
    stale_v3 = init(broker, 3, producer_id=producer[0], producer_epoch=producer[1])
    assert stale_v3.error_code == ErrorCode.invalid_producer_epoch  # type: ignore[attr-defined]


def test_a_partition_the_broker_lacks_fails_the_add_and_nothing_is_added(
    broker: eoslog.Broker,
) -> None:
    producer = producer_of(init(broker))
    assert add_partitions(broker, producer, {"out": [0, 7], "nope": [0]}, 3) == {
        ("out", 0): ErrorCode.operation_not_attempted,
        ("out", 7): ErrorCode.unknown_topic_or_partition,
        ("nope", 0): ErrorCode.unknown_topic_or_partition,
    }
    meta = broker.transactions.metadata(TXN)
    assert meta is not None and meta.state is TransactionState.EMPTY and not meta.partitions


@pytest.mark.parametrize("commit", [True, False])
def test_an_end_with_no_transaction_is_an_invalid_txn_state(
    broker: eoslog.Broker, commit: bool
) -> None:
    producer = producer_of(init(broker))
    assert end(broker, producer, commit) == ErrorCode.invalid_txn_state


def test_a_bad_timeout_and_an_unknown_id_get_kafkas_codes(broker: eoslog.Broker) -> None:
    too_long = init(broker, transaction_timeout=datetime.timedelta(days=30))
    assert too_long.error_code == ErrorCode.invalid_transaction_timeout  # type: ignore[attr-defined]
    assert broker.transactions.metadata(TXN) is None
    assert init(broker, transactional_id="").error_code == ErrorCode.invalid_request  # type: ignore[attr-defined]
    assert end(broker, (5, 0), True) == ErrorCode.invalid_producer_id_mapping


def txn_offset_commit(
    broker: eoslog.Broker,
    producer: tuple[int, int],
    offset: int,
    version: int = 3,
    **member: object,
) -> ErrorCode:
    topic = nested(28, version, "TxnOffsetCommitRequestTopic")
    partition = nested(28, version, "TxnOffsetCommitRequestPartition")
    response = answer(
        broker,
        request(
            28,
            version,
            transactional_id=TXN,
            group_id="copiers",
            producer_id=producer[0],
            producer_epoch=producer[1],
            topics=(
                topic(
                    name="in",
                    partitions=(
                        partition(
                            partition_index=0, committed_offset=offset, committed_metadata=None
                        ),
                    ),
                ),
            ),
            **member,
        ),
    )
    (result,) = response.topics
    (code,) = {p.error_code for p in result.partitions}
    return code  # type: ignore[no-any-return]


def committed_offset(broker: eoslog.Broker) -> int | None:
    found = broker.groups.fetch_offsets("copiers", [("in", 0)], require_stable=False)
    stored = found[("in", 0)]
    return None if stored is None else stored.offset


def add_offsets(broker: eoslog.Broker, producer: tuple[int, int]) -> ErrorCode:
    sent = request(
        25,
        3,
        transactional_id=TXN,
        producer_id=producer[0],
        producer_epoch=producer[1],
        group_id="copiers",
    )
    return answer(broker, sent).error_code  # type: ignore[no-any-return]


def test_offsets_sent_in_a_transaction_are_committed_with_it_and_dropped_by_an_abort(
    broker: eoslog.Broker,
) -> None:
    producer = producer_of(init(broker))
    assert add_offsets(broker, producer) == ErrorCode.none
    assert txn_offset_commit(broker, producer, 10) == ErrorCode.none
    assert committed_offset(broker) is None  # pending until the commit
    assert end(broker, producer, True) == ErrorCode.none
    assert committed_offset(broker) == 10
    assert add_offsets(broker, producer) == ErrorCode.none
    assert txn_offset_commit(broker, producer, 20, version=0) == ErrorCode.none
    assert end(broker, producer, False) == ErrorCode.none
    assert committed_offset(broker) == 10


def test_txn_offset_commit_outside_the_transaction_or_from_a_stale_generation_fails(
    broker: eoslog.Broker,
) -> None:
    producer = producer_of(init(broker))
    # The group's partition was never added: the offsets are no part of a transaction.
    assert txn_offset_commit(broker, producer, 10) == ErrorCode.invalid_txn_state
    assert add_offsets(broker, producer) == ErrorCode.none
    # KIP-447: a generation the group does not have fences the sender.
    fenced = txn_offset_commit(broker, producer, 10, generation_id=3, member_id="m-1")
    assert fenced == ErrorCode.illegal_generation
    assert end(broker, producer, True) == ErrorCode.none
    assert committed_offset(broker) is None


def test_describe_and_list_transactions_show_the_coordinators_state(
    broker: eoslog.Broker, clock: logtools.Clock
) -> None:
    producer = producer_of(init(broker))
    add_partitions(broker, producer, {"out": [1, 0]}, 3)
    described = answer(broker, request(65, 0, transactional_ids=(TXN, "unknown")), decode=False)
    ongoing, unknown = described.transaction_states
    assert (ongoing.transaction_state, ongoing.producer_id) == ("Ongoing", producer[0])
    assert [(t.topic, t.partitions) for t in ongoing.topics] == [("out", (0, 1))]
    assert ongoing.transaction_timeout == MINUTE
    assert ongoing.transaction_start_time.timestamp() * 1000 == clock()
    assert unknown.error_code == ErrorCode.transactional_id_not_found
    listed = answer(
        broker,
        request(66, 1, state_filters=("Ongoing", "Sleeping"), producer_id_filters=()),
    )
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
        (TXN, "Ongoing")
    ]
    assert listed.unknown_state_filters == ("Sleeping",)
    nothing = answer(broker, request(66, 0, state_filters=("Empty",), producer_id_filters=()))
    assert nothing.transaction_states == ()


def test_describe_producers_shows_the_open_transaction_of_a_partition(
    broker: eoslog.Broker,
) -> None:
    producer = producer_of(init(broker))
    add_partitions(broker, producer, {"out": [0]}, 3)
    produce(broker, producer, 0, b"open")
    topic = nested(61, 0, "TopicRequest")
    response = answer(
        broker,
        request(61, 0, topics=(topic(name="out", partition_indexes=(0, 9)),)),
    )
    (result,) = response.topics
    found, missing = result.partitions
    (state,) = found.active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (*producer, 0)
    assert state.current_txn_start_offset == 0
    assert missing.error_code == ErrorCode.unknown_topic_or_partition


def test_a_coordinator_write_failing_on_storage_answers_not_coordinator(
    broker: eoslog.Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's mapping of a failed `__transaction_state` append (docs/coordinator.md §3.8):
    the client finds the coordinator again and retries."""
    producer = producer_of(init(broker))
    add_partitions(broker, producer, {"out": [0]}, 3)

    def fail(*args: object, **options: object) -> None:
        raise KafkaStorageError("the state partition is fail-stopped")

    monkeypatch.setattr(broker.transactions, "end_transaction", fail)
    assert end(broker, producer, True) == ErrorCode.not_coordinator


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced_on_the_wire(
    broker: eoslog.Broker, clock: logtools.Clock
) -> None:
    """The coordinator's timeout pass aborts an Ongoing v1 transaction with an epoch bump
    (docs/coordinator.md §4.1); the producer's next call is fenced."""
    producer = producer_of(init(broker, transaction_timeout=datetime.timedelta(seconds=1)))
    add_partitions(broker, producer, {"out": [0]}, 3)
    produce(broker, producer, 0, b"late")
    clock.advance(2_000)
    assert broker.transactions.abort_timed_out_transactions() == 1
    assert end(broker, producer, True, version=2) == ErrorCode.producer_fenced
    assert end(broker, producer, True, version=0) == ErrorCode.invalid_producer_epoch
    assert read_committed(broker) == []


def test_list_transactions_v2_keeps_the_ids_a_pattern_matches_whole(
    broker: eoslog.Broker,
) -> None:
    for transactional_id in ("copier-1", "copier-22", "loader-1"):
        producer_of(init(broker, transactional_id=transactional_id))

    def listed(pattern: str | None) -> object:
        sent = request(
            66, 2, state_filters=(), producer_id_filters=(), transactional_id_pattern=pattern
        )
        return answer(broker, sent)

    found = listed("copier-[0-9]")
    assert [t.transactional_id for t in found.transaction_states] == ["copier-1"]  # type: ignore[attr-defined]
    assert len(listed(None).transaction_states) == 3  # type: ignore[attr-defined]
    bad = listed("copier-(")
    assert bad.error_code == ErrorCode.invalid_regular_expression  # type: ignore[attr-defined]
