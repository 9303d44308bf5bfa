"""The smaller top-level names of confluent_kafka that eoslog.confluent exports (docs/api.md
"Drop-in for confluent-kafka"): Uuid, the two exception classes, ThrottleEvent and the key
hash functions, and the list of what eoslog leaves out on purpose, with the reason.

tests/client/test_confluent_names.py compares eoslog.confluent and eoslog.confluent.admin
with the installed confluent_kafka, so a name a later confluent release adds shows up there:
it is either built or added to LEFT_OUT with its reason. Plain values; any thread.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Final

from eoslog.client import partitioner

if TYPE_CHECKING:
    from typing_extensions import Buffer

# Top-level names of confluent_kafka eoslog.confluent does not provide, and why.
_SERDES = (
    "the serialization framework (confluent_kafka.serialization and the Schema Registry "
    "clients): eoslog carries bytes; serialize before produce() and after poll()"
)
_SHARE = "share groups (KIP-932, a queue-like consumer): eoslog's groups are classic groups"
LEFT_OUT: Final[dict[str, str]] = {
    "SerializingProducer": _SERDES,
    "DeserializingConsumer": _SERDES,
    "DeserializingShareConsumer": _SHARE,
    "ShareConsumer": _SHARE,
    "AcknowledgeType": _SHARE,
    "Messages": _SHARE + " (ShareConsumer.poll's batch)",
    "aio": "the asyncio clients (confluent_kafka.aio): eoslog's calls do not wait on a network;"
    " call them from a thread executor",
    "kafkatest": "confluent's harness for Kafka's system tests, not a client API",
}
# Names of confluent_kafka.admin eoslog.confluent.admin does not provide: none.
LEFT_OUT_ADMIN: Final[dict[str, str]] = {}


class IllegalStateException(RuntimeError):
    """confluent_kafka.IllegalStateException: a call made in a state that does not allow it."""


class ConcurrentModificationException(RuntimeError):
    """confluent_kafka.ConcurrentModificationException: a client used from two threads where
    only one may use it."""


class Uuid:
    """A 128-bit id (confluent_kafka.Uuid), from its two 64-bit halves; str() is librdkafka's
    form, base64 without padding. Equal and hashed by value."""

    def __init__(self, most_significant_bits: int, least_significant_bits: int) -> None:
        self._most = most_significant_bits & 0xFFFFFFFFFFFFFFFF
        self._least = least_significant_bits & 0xFFFFFFFFFFFFFFFF

    def get_most_significant_bits(self) -> int:
        return self._most - (1 << 64) if self._most >= 1 << 63 else self._most

    def get_least_significant_bits(self) -> int:
        return self._least - (1 << 64) if self._least >= 1 << 63 else self._least

    def __str__(self) -> str:
        raw = ((self._most << 64) | self._least).to_bytes(16, "big")
        return base64.b64encode(raw).rstrip(b"=").decode("ascii")

    __repr__ = __str__

    def __hash__(self) -> int:
        return hash((self._most, self._least))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Uuid):
            return NotImplemented
        return (self._most, self._least) == (other._most, other._least)


class ThrottleEvent:
    """confluent_kafka.ThrottleEvent: a request the broker delayed. A log directory never
    throttles, so eoslog never makes one; the class is here for code that names it."""

    def __init__(self, broker_name: str, broker_id: int, throttle_time: float) -> None:
        self.broker_name = broker_name
        self.broker_id = broker_id
        self.throttle_time = throttle_time

    def __str__(self) -> str:
        return (
            f"{self.broker_name}/{self.broker_id} throttled for {int(self.throttle_time * 1000)} ms"
        )


def murmur2(key: Buffer, partition_count: int) -> int:
    """The partition librdkafka's murmur2 partitioner gives `key` (Java's default hash)."""
    return partitioner.murmur2_positive(key) % partition_count


def consistent(key: Buffer, partition_count: int) -> int:
    """The partition librdkafka's consistent partitioner gives `key` (CRC-32)."""
    return partitioner.crc32(key) % partition_count


def fnv1a(key: Buffer, partition_count: int) -> int:
    """The partition librdkafka's fnv1a partitioner gives `key`."""
    return partitioner.fnv1a_positive(key) % partition_count
