"""The Producer run side by side on confluent-kafka (librdkafka's mock cluster) and on
eoslog.confluent (a log directory), comparing what a user observes (tests/support/parity.py):
what produce(), flush(), poll() and len() return, the delivery reports' fields, the
exceptions for misuse, and purge(). Each test runs one script on both and asserts equal
observations (docs/api.md "Producer"; issue 16).

Where eoslog differs on purpose, a test_known_difference_* asserts both behaviours, with the
reason; README.md "Coming from confluent-kafka" lists them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import eoslog.confluent
from tests.support.parity import Sides, open_sides, outcome, report_fields

confluent_kafka = pytest.importorskip("confluent_kafka")

LINGER_LONG_MS = 60_000  # messages stay queued until flush() or purge()


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sides]:
    path = tmp_path_factory.mktemp("producer-parity")
    yield from open_sides(confluent_kafka, eoslog.confluent, str(path))


def produce_flush_and_poll(module: Any, config: dict[str, object]) -> object:
    reports: list[object] = []

    def delivered(error: Any, message: Any) -> None:
        reports.append((*report_fields(error, message), message.offset()))

    producer = module.Producer(config)
    observed: list[object] = [
        outcome(module, lambda: producer.produce("basic", b"v", b"k", 0, on_delivery=delivered)),
        outcome(module, lambda: producer.produce("basic", "text", partition=0, callback=delivered)),
        outcome(module, lambda: producer.produce("basic", partition=0, on_delivery=delivered)),
        outcome(module, lambda: len(producer)),
        outcome(module, lambda: producer.flush(15)),
        outcome(module, lambda: len(producer)),
        outcome(module, lambda: producer.poll(0)),
        outcome(module, lambda: producer.flush()),
        reports,
    ]
    return observed


def test_produce_returns_none_flush_and_poll_ints_and_reports_carry_the_same_fields(
    sides: Sides,
) -> None:
    observed = sides.same(produce_flush_and_poll)
    assert observed[:3] == [("ok", "NoneType", None)] * 3


def produce_wrong_types(module: Any, config: dict[str, object]) -> object:
    producer = module.Producer(config)
    calls = [
        lambda: producer.produce(1, b"v"),
        lambda: producer.produce("types", 1),
        lambda: producer.produce("types", b"v", key=1),
        lambda: producer.produce("types", b"v", partition="0"),
        lambda: producer.produce("types", b"v", headers=1),
        lambda: producer.produce("types", b"v", headers={"h": 1}),
        lambda: producer.produce("types", b"v", timestamp="now"),
        lambda: producer.produce("types", b"v", unknown=1),
        lambda: producer.produce(),
        lambda: producer.flush("1"),
        lambda: producer.poll("1"),
    ]
    observed = [outcome(module, call) for call in calls]
    observed.append(outcome(module, lambda: len(producer)))
    return observed


def test_produce_with_wrong_types_raises_type_error_and_queues_nothing(sides: Sides) -> None:
    observed = sides.same(produce_wrong_types)
    assert observed[-1] == ("ok", "int", 0)


def transactional_calls_without_transactional_id(module: Any, config: dict[str, object]) -> object:
    producer = module.Producer(config)
    consumer = module.Consumer({**config, "group.id": "not-transactional"})
    metadata = consumer.consumer_group_metadata()
    observed = [
        outcome(module, lambda: producer.init_transactions(1)),
        outcome(module, producer.begin_transaction),
        outcome(module, lambda: producer.send_offsets_to_transaction([], metadata, 1)),
        outcome(module, lambda: producer.commit_transaction(1)),
        outcome(module, lambda: producer.abort_transaction(1)),
    ]
    consumer.close()
    return observed


def test_transactional_calls_on_a_producer_without_transactional_id_are_not_configured(
    sides: Sides,
) -> None:
    observed = sides.same(transactional_calls_without_transactional_id)
    assert observed[0] == ("KafkaException", (-145, "_NOT_CONFIGURED", False, False, False))


def purge_queued(module: Any, config: dict[str, object]) -> object:
    reports: list[object] = []
    producer = module.Producer({**config, "linger.ms": LINGER_LONG_MS})
    for value in (b"a", b"b"):
        producer.produce(
            "purge",
            value,
            partition=0,
            on_delivery=lambda e, m: reports.append(report_fields(e, m)),
        )
    observed: list[object] = [
        outcome(module, lambda: producer.purge(in_queue=False)),
        outcome(module, lambda: len(producer)),
        outcome(module, producer.purge),
        outcome(module, lambda: producer.flush(15)),
        outcome(module, lambda: len(producer)),
        list(reports),
    ]
    producer.produce(
        "purge", b"c", partition=0, on_delivery=lambda e, m: reports.append(report_fields(e, m))
    )
    observed.append(outcome(module, lambda: producer.flush(15)))
    observed.append(reports[2:])
    return observed


def test_purge_fails_queued_messages_with_purge_queue_and_the_producer_goes_on(
    sides: Sides,
) -> None:
    observed = sides.same(purge_queued)
    assert [report[0] for report in observed[5]] == [
        (-152, "_PURGE_QUEUE", False, False, False)
    ] * 2


# --- differences -------------------------------------------------------------------------------


def produce_with_odd_arguments(module: Any, config: dict[str, object]) -> object:
    reports: list[object] = []
    producer = module.Producer(config)
    observed = [
        outcome(
            module,
            lambda: producer.produce(
                "", b"v", on_delivery=lambda e, m: reports.append(report_fields(e, m)[0])
            ),
        ),
        outcome(module, lambda: producer.purge(in_queue=1)),
        outcome(module, lambda: producer.produce("odd", b"v", on_delivery=1)),
        outcome(module, lambda: producer.flush(15)),
    ]
    return [*observed, reports]


def test_known_difference_odd_arguments_are_refused_at_the_call(sides: Sides) -> None:
    # eoslog checks the arguments at the call (docs/style.md: bad input gets a typed error
    # and changes nothing). confluent queues a message for an empty topic, reads
    # purge()'s flags as truths, and takes a non-callable on_delivery (its flush() then
    # fails with SystemError).
    theirs, ours = sides.run(produce_with_odd_arguments)
    assert theirs == [
        ("ok", "NoneType", None),
        ("ok", "NoneType", None),
        ("ok", "NoneType", None),
        ("SystemError",),
        [(-152, "_PURGE_QUEUE", False, False, False)],  # queued, then purged
    ]
    assert ours == [
        ("KafkaException", (17, "TOPIC_EXCEPTION", False, False, False)),
        ("TypeError",),
        ("TypeError",),
        ("ok", "int", 0),
        [],
    ]


def delivered_headers(module: Any, config: dict[str, object]) -> object:
    headers: list[object] = []
    producer = module.Producer(config)
    producer.produce(
        "headers",
        b"v",
        partition=0,
        headers=[("h", b"1")],
        on_delivery=lambda error, message: headers.append(message.headers()),
    )
    producer.flush(15)
    return headers


def test_known_difference_delivery_reports_carry_the_produced_headers(sides: Sides) -> None:
    # confluent-kafka-python builds the delivery report's Message without the headers.
    theirs, ours = sides.run(delivered_headers)
    assert (theirs, ours) == ([None], [[("h", b"1")]])


def delivered_latency(module: Any, config: dict[str, object]) -> object:
    kinds: list[object] = []
    producer = module.Producer(config)
    producer.produce(
        "latency",
        b"v",
        partition=0,
        on_delivery=lambda error, message: kinds.append(type(message.latency()).__name__),
    )
    producer.flush(15)
    return kinds


def test_delivery_report_latency_is_a_float(sides: Sides) -> None:
    sides.same(delivered_latency)


def produce_to_an_invalid_partition(module: Any, config: dict[str, object]) -> object:
    producer = module.Producer(config)
    producer.produce("bad", b"v", partition=0)
    producer.flush(15)  # the client knows the topic's partitions now
    observed = [outcome(module, lambda: producer.produce("bad", b"v", partition=-2))]
    producer.purge()
    producer.flush(15)
    return observed


def test_produce_to_a_negative_partition_other_than_ua_is_refused(sides: Sides) -> None:
    sides.same(produce_to_an_invalid_partition)
