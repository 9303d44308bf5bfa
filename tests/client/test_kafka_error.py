"""eoslog.KafkaError is confluent_kafka.KafkaError (docs/api.md "Errors"): the same error-code
constants, the same constructor, and the same name(), str(), flags, repr and comparisons.

confluent-kafka is the oracle: each test builds the same error with both and compares what they
say. It is in the `test` extra; the module is skipped only where it is not installed.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

import eoslog
from eoslog import error_codes
from eoslog.coordinator.producer_ids import ProducerIdsExhaustedError
from eoslog.errors import KafkaError, KafkaException

confluent_kafka = pytest.importorskip("confluent_kafka")
Oracle = confluent_kafka.KafkaError


def constants(cls: type) -> dict[str, int]:
    """The integer class attributes of a KafkaError class: its error-code constants."""
    return {
        name: getattr(cls, name)
        for name in dir(cls)
        if not name.startswith("__") and isinstance(getattr(cls, name), int)
    }


ORACLE_CONSTANTS = constants(Oracle)

# Codes librdkafka has no name for: gaps between its codes, past both ends, and a C int's ends.
UNKNOWN_CODES = [-(2**31), -200, -136, -100, -2, 98, 99, 134, 2**31 - 1]


def observed(error: Any) -> tuple[object, ...]:
    """Everything a KafkaError tells its caller, for comparing an eoslog one with confluent's."""
    return (
        error.code(),
        error.name(),
        error.str(),
        error.fatal(),
        error.retriable(),
        error.txn_requires_abort(),
        repr(error),
        str(error),
    )


def outcome(cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[object, ...]:
    """What constructing cls(*args, **kwargs) gives: what the error says, or the exception
    type it raises."""
    try:
        return observed(cls(*args, **kwargs))
    except (TypeError, OverflowError) as raised:
        return (type(raised),)


# --- the constants ---------------------------------------------------------------------------


def test_confluent_kafka_error_has_the_constants_the_table_was_written_from() -> None:
    # A newer confluent-kafka with new codes fails here: regenerate eoslog/error_codes.py.
    assert len(ORACLE_CONSTANTS) == 188
    assert ORACLE_CONSTANTS["_PARTITION_EOF"] == -191
    assert ORACLE_CONSTANTS["UNKNOWN_TOPIC_OR_PART"] == 3


def test_every_constant_has_confluents_name_and_value_and_there_are_no_others() -> None:
    assert constants(KafkaError) == ORACLE_CONSTANTS


def test_the_constants_are_plain_ints() -> None:
    assert {type(value) for value in constants(KafkaError).values()} == {int}


def test_the_table_names_each_code_once() -> None:
    assert len(error_codes.NAMES) == len(ORACLE_CONSTANTS)
    assert set(error_codes.DESCRIPTIONS) == set(ORACLE_CONSTANTS.values())


@pytest.mark.parametrize("name", sorted(ORACLE_CONSTANTS, key=ORACLE_CONSTANTS.__getitem__))
def test_an_error_built_from_a_code_is_named_and_described_as_confluent_does(name: str) -> None:
    code = ORACLE_CONSTANTS[name]
    assert KafkaError(code).name() == Oracle(code).name() == name
    assert observed(KafkaError(code)) == observed(Oracle(code))


@pytest.mark.parametrize("code", UNKNOWN_CODES)
def test_a_code_librdkafka_does_not_know_is_named_as_confluent_names_it(code: int) -> None:
    assert observed(KafkaError(code)) == observed(Oracle(code))
    assert KafkaError(code).name() == f"ERR_{code}?"


# --- the constructor -------------------------------------------------------------------------

CONSTRUCTIONS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((3,), {}),
    ((3, "boom"), {}),
    ((3, None), {}),
    ((3, ""), {}),
    ((3, 'a "quoted" reason'), {}),
    ((-191,), {}),
    ((KafkaError._FENCED, "fenced by a newer instance"), {}),
    # Flags positionally, in confluent's order: fatal, retriable, txn_requires_abort.
    ((3, "r", True), {}),
    ((3, "r", False, True), {}),
    ((3, "r", False, False, True), {}),
    ((3, "r", 1, 1, 1), {}),
    ((3,), {"fatal": True}),
    ((3,), {"retriable": True}),
    ((3,), {"txn_requires_abort": True}),
    ((3,), {"fatal": 1, "retriable": 0}),
    ((3,), {"reason": "by keyword"}),
    ((), {"error": 3}),
    ((), {"error": 90, "reason": "fenced", "fatal": True}),
    ((True,), {}),
    ((2**31 - 1,), {}),
]


@pytest.mark.parametrize(("args", "kwargs"), CONSTRUCTIONS, ids=repr)
def test_construction_gives_what_confluent_gives(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    assert outcome(KafkaError, args, kwargs) == outcome(Oracle, args, kwargs)


REFUSED: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}),
    (("3",), {}),
    ((3.0,), {}),
    ((None,), {}),
    ((3, 5), {}),
    ((3, b"bytes"), {}),
    # eoslog's old (code, name, message) form: "message" lands on fatal, and is refused.
    ((3, "UNKNOWN_TOPIC_OR_PART", "message"), {}),
    ((3, "r", 0, 0, 0, 1), {}),
    ((3,), {"fatal": None}),
    ((3,), {"fatal": "yes"}),
    ((3,), {"retriable": 0.5}),
    ((3,), {"name": "UNKNOWN_TOPIC_OR_PART"}),
    ((2**31,), {}),
    ((-(2**31) - 1,), {}),
]


@pytest.mark.parametrize(("args", "kwargs"), REFUSED, ids=repr)
def test_arguments_confluent_refuses_are_refused_with_the_same_exception(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    expected = outcome(Oracle, args, kwargs)
    assert len(expected) == 1, f"confluent-kafka accepts {args} {kwargs}"
    assert outcome(KafkaError, args, kwargs) == expected


# --- comparisons, hashing, pickling -----------------------------------------------------------

OPERANDS: list[Any] = [3, 4, 2, -191, True, 0]


@pytest.mark.parametrize("other", OPERANDS)
def test_comparing_with_an_int_or_another_error_goes_by_code_as_in_confluent(other: int) -> None:
    ours, theirs = KafkaError(3, "x"), Oracle(3, "x")
    for right_ours, right_theirs in ((other, other), (KafkaError(other), Oracle(other))):
        assert (ours == right_ours) == (theirs == right_theirs)
        assert (ours != right_ours) == (theirs != right_theirs)
        assert (ours < right_ours) == (theirs < right_theirs)
        assert (ours <= right_ours) == (theirs <= right_theirs)
        assert (ours > right_ours) == (theirs > right_theirs)
        assert (ours >= right_ours) == (theirs >= right_theirs)
    assert (other == ours) == (other == theirs)


def test_errors_with_one_code_and_different_reasons_are_equal_and_hash_as_the_code() -> None:
    assert KafkaError(3, "one") == KafkaError(3, "two", fatal=True)
    assert hash(KafkaError(3, "one")) == hash(Oracle(3, "one")) == hash(3)
    assert {KafkaError(3): "found"}[3] == "found"


def test_comparing_with_a_non_integer_is_false_where_confluent_fails() -> None:
    # A deliberate difference. confluent-kafka 2.16 turns the other operand into an int and
    # fails for anything else: a TypeError, left set inside its C comparison, so that Python
    # may report it later as a SystemError (not called here for that reason). Python's default
    # keeps `error == None` and `error in [...]` usable.
    assert KafkaError(3) != "3"
    assert KafkaError(3) != None  # noqa: E711 (the comparison itself is under test)
    with pytest.raises(TypeError):
        _ = KafkaError(3) < "3"  # type: ignore[operator]


def test_an_error_survives_pickling_with_its_reason_and_flags() -> None:
    error = KafkaError(KafkaError._FENCED, "fenced", fatal=True, txn_requires_abort=True)
    assert observed(pickle.loads(pickle.dumps(error))) == observed(error)


# --- eoslog's exceptions ---------------------------------------------------------------------


def exception_classes() -> list[type[KafkaException]]:
    found, pending = [], [KafkaException]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    assert ProducerIdsExhaustedError in found
    return sorted(set(found), key=lambda cls: cls.__name__)


@pytest.mark.parametrize("cls", exception_classes(), ids=lambda cls: cls.__name__)
def test_each_eoslog_exception_carries_a_librdkafka_code_named_as_confluent_names_it(
    cls: type[KafkaException],
) -> None:
    assert cls.code in error_codes.NAMES
    error = KafkaError(cls.code)
    assert error.name() == Oracle(cls.code).name()
    assert error.str() == Oracle(cls.code).str()


def test_an_exception_without_a_reason_says_librdkafkas_description_of_its_code() -> None:
    raised = eoslog.UnknownTopicOrPartitionError()
    assert observed(raised.error) == observed(Oracle(Oracle.UNKNOWN_TOPIC_OR_PART, retriable=True))
    assert str(raised) == "Broker: Unknown topic or partition"


def test_an_exception_with_a_reason_keeps_its_class_code_and_flags() -> None:
    raised = eoslog.ProducerFencedError("fenced by epoch 7")
    assert observed(raised.error) == observed(
        Oracle(Oracle.PRODUCER_FENCED, "fenced by epoch 7", fatal=True)
    )
