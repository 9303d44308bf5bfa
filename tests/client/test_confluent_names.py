"""eoslog.confluent and eoslog.confluent.admin have every public name of the installed
confluent_kafka and confluent_kafka.admin, of the same kind (module, enum, class, function,
constant) and, for enums and constants, with the same members and values, except what
eoslog.confluent.compat.LEFT_OUT lists with its reason. A name a later confluent release adds
fails here until it is built or listed (docs/api.md "Drop-in for confluent-kafka")."""

from __future__ import annotations

import enum
import inspect
import types
from typing import Any

import pytest

import eoslog.confluent
import eoslog.confluent.admin
from eoslog.confluent.compat import LEFT_OUT, LEFT_OUT_ADMIN

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")


MODULE_PAIRS = pytest.mark.parametrize(
    ("theirs", "ours", "left_out"),
    [
        (confluent_kafka, eoslog.confluent, LEFT_OUT),
        (confluent_admin, eoslog.confluent.admin, LEFT_OUT_ADMIN),
    ],
    ids=["confluent_kafka", "confluent_kafka.admin"],
)


def public_names(module: types.ModuleType) -> set[str]:
    """The module's API: __all__ when it has one, plus every other name not starting with
    an underscore that is not a module or an import from typing or builtins (helpers
    confluent's admin module imports for itself)."""
    names = set(getattr(module, "__all__", ()))
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        if getattr(value, "__module__", None) == "typing" or value in (str, bytes):
            continue
        names.add(name)
    return names


def kind(value: Any) -> str:
    if isinstance(value, types.ModuleType):
        return "module"
    if inspect.isclass(value) and issubclass(value, enum.Enum):
        return "enum"
    if inspect.isclass(value):
        return "class"
    if callable(value):
        return "function"
    return f"constant {type(value).__name__}"


def members(value: Any) -> Any:
    if kind(value) == "enum":
        return {name: member.value for name, member in value.__members__.items()}
    if kind(value).startswith("constant"):
        return value
    return None


@MODULE_PAIRS
def test_every_confluent_name_exists_with_the_same_kind_and_values(
    theirs: types.ModuleType, ours: types.ModuleType, left_out: dict[str, str]
) -> None:
    wanted = sorted(public_names(theirs) - set(left_out))
    missing = [name for name in wanted if not hasattr(ours, name)]
    assert missing == []
    different = [
        (name, kind(getattr(theirs, name)), kind(getattr(ours, name)))
        for name in wanted
        if kind(getattr(theirs, name)) != kind(getattr(ours, name))
    ]
    assert different == []
    unequal = [
        name
        for name in wanted
        if members(getattr(theirs, name)) is not None
        and members(getattr(theirs, name)) != members(getattr(ours, name))
    ]
    assert unequal == []


@MODULE_PAIRS
def test_left_out_names_are_confluent_s_with_a_reason_and_absent_here(
    theirs: types.ModuleType, ours: types.ModuleType, left_out: dict[str, str]
) -> None:
    for name, reason in left_out.items():
        assert name in public_names(theirs), f"{name} is no longer confluent's: drop it"
        assert not hasattr(ours, name), f"{name} is built now: drop it from the list"
        assert len(reason) > 20


def test_every_exported_name_is_in_all() -> None:
    for module in (eoslog.confluent, eoslog.confluent.admin):
        for name in public_names(
            confluent_kafka if module is eoslog.confluent else confluent_admin
        ):
            if hasattr(module, name) and name != "admin":
                assert name in module.__all__, (module.__name__, name)


@pytest.mark.parametrize("key", [b"", b"k", b"abc", b"hello world", bytes(range(64))])
@pytest.mark.parametrize("count", [1, 7, 1000])
def test_key_hash_functions_give_librdkafka_s_partitions(key: bytes, count: int) -> None:
    for name in ("murmur2", "consistent", "fnv1a"):
        assert getattr(eoslog.confluent, name)(key, count) == getattr(confluent_kafka, name)(
            key, count
        ), name


@pytest.mark.parametrize("halves", [(1, 2), (0, 0), (-1, 5), (2**63 - 1, -(2**63))])
def test_uuid_prints_as_confluent_s_and_keeps_its_halves(halves: tuple[int, int]) -> None:
    ours, theirs = eoslog.confluent.Uuid(*halves), confluent_kafka.Uuid(*halves)
    assert str(ours) == str(theirs)
    assert ours.get_most_significant_bits() == theirs.get_most_significant_bits()
    assert ours.get_least_significant_bits() == theirs.get_least_significant_bits()
    assert ours == eoslog.confluent.Uuid(*halves)
    assert hash(ours) == hash(eoslog.confluent.Uuid(*halves))


def test_exception_classes_are_runtime_errors() -> None:
    assert issubclass(eoslog.confluent.IllegalStateException, RuntimeError)
    assert issubclass(eoslog.confluent.ConcurrentModificationException, RuntimeError)
    event = eoslog.confluent.ThrottleEvent("b", 1, 0.25)
    assert str(event) == str(confluent_kafka.ThrottleEvent("b", 1, 0.25))
