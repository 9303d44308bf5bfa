"""The transactional Producer run side by side on confluent-kafka (librdkafka's mock cluster,
which supports idempotence and transactions) and on eoslog.confluent, comparing what a user
observes (tests/support/parity.py): which calls each transaction state allows and the
KafkaError each refusal carries, send_offsets_to_transaction's argument checks, purge() inside
a transaction, and what read_committed consumers and committed() see after commit and abort
(docs/coordinator.md §7.2; issue 16).

The mock cluster does not fence: a second producer with the same transactional.id leaves the
first one working (its commit succeeds). Fencing is therefore asserted on eoslog alone, against
librdkafka's documented behaviour, in test_known_difference_*.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

import eoslog.confluent
from tests.support.parity import Sides, ids, open_sides, outcome, report_fields

confluent_kafka = pytest.importorskip("confluent_kafka")

STATE = ("KafkaException", (-172, "_STATE", False, False, False))
OK = ("ok", "NoneType", None)
CALL_TIMEOUT_S = 10


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sides]:
    path = tmp_path_factory.mktemp("transaction-parity")
    yield from open_sides(confluent_kafka, eoslog.confluent, str(path))


def transactional(module: Any, config: dict[str, object]) -> Any:
    return module.Producer({**config, "transactional.id": f"parity-{next(ids)}"})


def calls_in_the_wrong_state(module: Any, config: dict[str, object]) -> object:
    producer = transactional(module, config)
    consumer = module.Consumer({**config, "group.id": "wrong-state"})
    metadata = consumer.consumer_group_metadata()
    offsets = [module.TopicPartition("wrong-state", 0, 1)]

    def each(*calls: Any) -> list[object]:
        return [outcome(module, call) for call in calls]

    observed = {
        "before init": each(
            producer.begin_transaction,
            lambda: producer.produce("wrong-state", b"v", partition=0),
            lambda: producer.send_offsets_to_transaction(offsets, metadata, 1),
            lambda: producer.commit_transaction(1),
            lambda: producer.abort_transaction(1),
        ),
        "init": each(lambda: producer.init_transactions(CALL_TIMEOUT_S)),
        "ready": each(
            lambda: producer.init_transactions(1),
            lambda: producer.produce("wrong-state", b"v", partition=0),
            lambda: producer.send_offsets_to_transaction(offsets, metadata, 1),
            lambda: producer.commit_transaction(1),
            lambda: producer.abort_transaction(1),
            lambda: len(producer),
        ),
        "in transaction": each(
            producer.begin_transaction,
            producer.begin_transaction,
            lambda: producer.init_transactions(1),
        ),
        "after commit": each(
            lambda: producer.commit_transaction(CALL_TIMEOUT_S),
            lambda: producer.commit_transaction(1),
            lambda: producer.abort_transaction(1),
        ),
    }
    consumer.close()
    return observed


def test_each_transactional_call_in_the_wrong_state_raises_state_and_changes_nothing(
    sides: Sides,
) -> None:
    observed = sides.same(calls_in_the_wrong_state)
    assert observed["before init"] == [STATE] * 5
    assert observed["ready"][:5] == [STATE] * 5
    assert observed["in transaction"] == [OK, STATE, STATE]
    assert observed["after commit"] == [OK, STATE, STATE]


def send_offsets_arguments(module: Any, config: dict[str, object]) -> object:
    producer = transactional(module, config)
    consumer = module.Consumer({**config, "group.id": "send-offsets"})
    metadata = consumer.consumer_group_metadata()
    producer.init_transactions(CALL_TIMEOUT_S)
    producer.begin_transaction()
    tp = module.TopicPartition
    observed = [
        outcome(module, lambda: producer.send_offsets_to_transaction([tp("o", 0, 1)], "g", 1)),
        outcome(module, lambda: producer.send_offsets_to_transaction([tp("o", 0, 1)], None, 1)),
        outcome(module, lambda: producer.send_offsets_to_transaction("o", metadata, 1)),
        outcome(module, lambda: producer.send_offsets_to_transaction([("o", 0)], metadata, 1)),
        outcome(module, lambda: producer.send_offsets_to_transaction([], metadata, 1)),
        outcome(
            module,
            lambda: producer.send_offsets_to_transaction([tp("o", 0, -1001)], metadata, 1),
        ),
        outcome(module, lambda: producer.commit_transaction(CALL_TIMEOUT_S)),
    ]
    consumer.close()
    return observed


def test_send_offsets_to_transaction_checks_its_arguments_alike(sides: Sides) -> None:
    observed = sides.same(send_offsets_arguments)
    assert observed[:4] == [("TypeError",)] * 4
    assert observed[4:] == [OK] * 3


def purge_in_a_transaction(module: Any, config: dict[str, object]) -> object:
    reports: list[object] = []
    producer = module.Producer(
        {**config, "transactional.id": f"parity-{next(ids)}", "linger.ms": 10_000}
    )
    producer.init_transactions(CALL_TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(
        "purged", b"v", partition=0, on_delivery=lambda e, m: reports.append(report_fields(e, m))
    )
    observed: list[object] = [
        outcome(module, producer.purge),
        outcome(module, lambda: producer.flush(CALL_TIMEOUT_S)),
        reports,
    ]
    failed = outcome(module, lambda: producer.commit_transaction(CALL_TIMEOUT_S))
    observed += [
        failed[0],
        failed[1][-1] if len(failed) > 1 else None,  # txn_requires_abort()
        outcome(module, lambda: producer.abort_transaction(CALL_TIMEOUT_S)),
        outcome(module, producer.begin_transaction),
        outcome(module, lambda: producer.abort_transaction(CALL_TIMEOUT_S)),
    ]
    return observed, failed[1][0] if len(failed) > 1 else None  # and the commit's code


def test_purge_in_a_transaction_reports_purge_queue_and_the_commit_requires_abort(
    sides: Sides,
) -> None:
    (theirs, their_code), (ours, our_code) = sides.run(purge_in_a_transaction)
    assert ours == theirs
    assert ours[3:] == ["KafkaException", True, OK, OK, OK]
    # Known difference: librdkafka's commit says _INCONSISTENT ("message(s) failed
    # delivery"); eoslog's raises the first failed delivery's own error, as Kafka's Java
    # client does, which says why. Both have txn_requires_abort() true.
    assert (their_code, our_code) == (-149, -152)


def read_committed_values(module: Any, config: dict[str, object], topic: str) -> list[object]:
    consumer = module.Consumer(
        {
            **config,
            "group.id": f"reader-{next(ids)}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([module.TopicPartition(topic, 0, 0)])
    values: list[object] = []
    deadline = time.monotonic() + CALL_TIMEOUT_S
    while b"end" not in values and time.monotonic() < deadline:
        values += [m.value() for m in consumer.consume(10, 0.2) if m.error() is None]
    consumer.close()
    return values


def commit_and_abort_seen_by_read_committed(module: Any, config: dict[str, object]) -> object:
    topic = "committed-only"
    producer = transactional(module, config)
    producer.init_transactions(CALL_TIMEOUT_S)
    for values, end in (
        ([b"c1", b"c2"], producer.commit_transaction),
        ([b"a1"], producer.abort_transaction),
        ([b"c3", b"end"], producer.commit_transaction),
    ):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value, partition=0)
        end(CALL_TIMEOUT_S)
    return read_committed_values(module, config, topic)


def test_a_read_committed_consumer_sees_committed_records_and_not_aborted_ones(
    sides: Sides,
) -> None:
    assert sides.same(commit_and_abort_seen_by_read_committed) == [b"c1", b"c2", b"c3", b"end"]


def offsets_committed_with_the_transaction(module: Any, config: dict[str, object]) -> object:
    group = f"eos-{next(ids)}"
    consumer = module.Consumer({**config, "group.id": group, "enable.auto.commit": False})
    producer = transactional(module, config)
    producer.init_transactions(CALL_TIMEOUT_S)
    tp = module.TopicPartition("offsets-in", 0)
    creator = module.Producer(config)
    creator.produce("offsets-in", b"input", partition=0)  # creates the input topic
    creator.flush(CALL_TIMEOUT_S)
    observed: list[object] = []

    def committed() -> object:
        (found,) = consumer.committed([tp], CALL_TIMEOUT_S)
        return found.offset

    for offset, end in ((5, producer.abort_transaction), (7, producer.commit_transaction)):
        producer.begin_transaction()
        producer.produce("offsets-out", b"out", partition=0)
        producer.send_offsets_to_transaction(
            [module.TopicPartition("offsets-in", 0, offset)],
            consumer.consumer_group_metadata(),
            CALL_TIMEOUT_S,
        )
        end(CALL_TIMEOUT_S)
        observed.append(committed())
    consumer.close()
    return observed


def test_offsets_sent_in_a_transaction_are_committed_only_when_it_commits(
    sides: Sides,
) -> None:
    # The mock cluster takes TxnOffsetCommit and never stores the offsets, so committed()
    # there shows neither transaction's; a Kafka broker shows the committed one, as eoslog.
    theirs, ours = sides.run(offsets_committed_with_the_transaction)
    assert theirs == [-1001, -1001]
    assert ours == [-1001, 7]


def fenced_by_a_second_producer(module: Any, config: dict[str, object]) -> object:
    reports: list[object] = []
    transactional_id = f"parity-{next(ids)}"
    first = module.Producer({**config, "transactional.id": transactional_id})
    first.init_transactions(CALL_TIMEOUT_S)
    first.begin_transaction()
    first.produce("fenced", b"before", partition=0)
    first.flush(CALL_TIMEOUT_S)
    second = module.Producer({**config, "transactional.id": transactional_id})
    second.init_transactions(CALL_TIMEOUT_S)
    first.produce(
        "fenced", b"after", partition=0, on_delivery=lambda e, m: reports.append(e and e.code())
    )
    observed: list[object] = [
        outcome(module, lambda: first.flush(CALL_TIMEOUT_S)),
        reports,
        outcome(module, lambda: first.commit_transaction(CALL_TIMEOUT_S)),
        outcome(module, lambda: first.abort_transaction(CALL_TIMEOUT_S)),
        outcome(module, first.begin_transaction),
        outcome(module, lambda: first.init_transactions(1)),
    ]
    second.begin_transaction()
    second.produce("fenced", b"second", partition=0)
    observed.append(outcome(module, lambda: second.commit_transaction(CALL_TIMEOUT_S)))
    return observed


def test_known_difference_a_fenced_producer_gets_producer_fenced_where_librdkafka_says_fenced(
    sides: Sides,
) -> None:
    # The mock cluster does not fence: the first producer goes on as if alone. Against Kafka,
    # librdkafka turns PRODUCER_FENCED and INVALID_PRODUCER_EPOCH from a transactional call
    # into its fatal _FENCED (-144), after which every call raises it. eoslog keeps Kafka's
    # codes: the fenced send fails with INVALID_PRODUCER_EPOCH (abortable, as Kafka's Java
    # client has it), the commit with it, and the abort then finds the producer fenced:
    # PRODUCER_FENCED (90), fatal, raised again by every later call. The new producer
    # commits on both.
    theirs, ours = sides.run(fenced_by_a_second_producer)
    assert theirs[2:] == [OK, STATE, OK, STATE, OK]
    abortable = (47, "INVALID_PRODUCER_EPOCH", False, False, True)
    fenced = ("KafkaException", (90, "PRODUCER_FENCED", False, True, False))
    assert ours == [
        ("ok", "int", 0),
        [47],
        ("KafkaException", abortable),
        fenced,
        fenced,
        fenced,
        OK,
    ]
