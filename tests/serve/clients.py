"""Helpers of the wire tests that drive real Kafka clients (confluent-kafka) against a server."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition

DEADLINE_S = 30.0  # a test fails rather than wait past this


def confluent_consumer(address: str, **config: Any) -> Consumer:
    """A confluent Consumer for assign(): no group is joined (group.id is only required)."""
    settings = {
        "bootstrap.servers": address,
        "group.id": "unused-by-assign",
        "enable.auto.commit": False,
        "enable.partition.eof": False,
    }
    settings.update(config)
    return Consumer(settings)


def read_assigned(
    consumer: Consumer, topic: str, partitions: int, count: int
) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Assign every partition from its beginning and read `count` records:
    (partition, offset, key, value) each; fails the test at the deadline."""
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int, int, bytes | None, bytes | None]] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < count:
        assert time.monotonic() < deadline, f"read {len(got)} of {count} records"
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert message.error() is None, message.error()
        got.append((message.partition(), message.offset(), message.key(), message.value()))
    return got


def wait_until(predicate: Any, what: str) -> None:
    """Wait for a state another thread reaches; fails the test at the deadline."""
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.005)
