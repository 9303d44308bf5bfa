"""Argument checks for the client methods that follow confluent-kafka-python (docs/api.md
"Consumer"): the same TypeErrors, with the same messages but for the module name, that
confluent's C extension raises before it does anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from eoslog.client.message import TopicPartition
from eoslog.errors import KafkaError, KafkaException


def partition_list(value: object) -> list[TopicPartition]:
    """`value` as a list of TopicPartitions: a list or tuple of them (confluent takes a list
    only; a tuple is accepted here too). TypeError otherwise."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError("requires list of TopicPartition")
    for item in value:
        if not isinstance(item, TopicPartition):
            raise TypeError("expected TopicPartition")
    return list(value)


def timeout_seconds(value: object, name: str = "timeout") -> float:
    """A timeout in seconds (confluent's: any real number, negative meaning forever).
    TypeError otherwise."""
    if not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be real number, not {type(value).__name__}")
    return float(value)


def first_duplicate(partitions: Sequence[TopicPartition]) -> TopicPartition | None:
    """The first partition given a second time, or None."""
    seen: set[tuple[str, int]] = set()
    for tp in partitions:
        if (tp.topic, tp.partition) in seen:
            return tp
        seen.add((tp.topic, tp.partition))
    return None


def check_no_duplicate(partitions: Sequence[TopicPartition]) -> None:
    """librdkafka's refusal of a partition list that names one partition twice."""
    duplicate = first_duplicate(partitions)
    if duplicate is not None:
        raise KafkaException(
            KafkaError(
                KafkaError._INVALID_ARG,
                f"Duplicate {duplicate.topic} [{duplicate.partition}] in input list",
            )
        )
