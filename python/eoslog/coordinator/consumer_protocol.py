"""The bytes of Kafka's consumer protocol (protocol type "consumer"), which group members
exchange through JoinGroup and SyncGroup: a member's subscription (ConsumerProtocolSubscription,
the metadata of each assignment strategy it offers) and a member's assignment
(ConsumerProtocolAssignment, what SyncGroup hands it). Each is an int16 version followed by
that version's fields; the schemas are kio's, generated from Kafka's JSON.

A version above the newest kio knows is read as the newest (Kafka's rule for this data: a new
version only appends fields). eoslog writes version 0 of both, which every client reads.
Thread-safe (pure functions).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable
from typing import Any, Final

from kio.schema.consumer_protocol_assignment.v0 import data as assignment_v0
from kio.schema.consumer_protocol_assignment.v3 import data as assignment_v3
from kio.schema.consumer_protocol_subscription.v0 import data as subscription_v0
from kio.schema.consumer_protocol_subscription.v1 import data as subscription_v1
from kio.schema.consumer_protocol_subscription.v2 import data as subscription_v2
from kio.schema.consumer_protocol_subscription.v3 import data as subscription_v3
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.primitive import i32

from eoslog.coordinator.assignors import Partition
from eoslog.errors import InconsistentGroupProtocolError

CONSUMER_PROTOCOL_TYPE: Final = "consumer"

_VERSION = struct.Struct(">h")
_SUBSCRIPTIONS: Final[tuple[Any, ...]] = (
    subscription_v0.ConsumerProtocolSubscription,
    subscription_v1.ConsumerProtocolSubscription,
    subscription_v2.ConsumerProtocolSubscription,
    subscription_v3.ConsumerProtocolSubscription,
)
_SUBSCRIPTION_READERS: Final = tuple(entity_reader(entity) for entity in _SUBSCRIPTIONS)
_ASSIGNMENT_READER: Final = entity_reader(assignment_v3.ConsumerProtocolAssignment)
_write_subscription: Final = entity_writer(subscription_v0.ConsumerProtocolSubscription)
_write_assignment: Final = entity_writer(assignment_v0.ConsumerProtocolAssignment)


def decode_subscription(metadata: bytes) -> frozenset[str]:
    """The topics of a ConsumerProtocolSubscription. InconsistentGroupProtocolError (writing
    nothing) for bytes that are not one."""
    version, body = _split(metadata, "subscription")
    reader = _SUBSCRIPTION_READERS[min(version, len(_SUBSCRIPTION_READERS) - 1)]
    try:
        subscription, _ = reader(body, 0)
    except (SerialError, ValueError) as error:
        raise InconsistentGroupProtocolError(f"bad consumer subscription: {error}") from error
    return frozenset(subscription.topics)


def encode_subscription(topics: Iterable[str]) -> bytes:
    """A version 0 ConsumerProtocolSubscription of `topics` (sorted)."""
    out = io.BytesIO()
    out.write(_VERSION.pack(0))
    entity = subscription_v0.ConsumerProtocolSubscription(topics=tuple(sorted(topics)))
    _write_subscription(out, entity)
    return out.getvalue()


def encode_assignment(partitions: Iterable[Partition]) -> bytes:
    """A version 0 ConsumerProtocolAssignment of `partitions`, topic by topic."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    assigned = tuple(
        assignment_v0.TopicPartition(
            topic=TopicName(topic), partitions=tuple(i32(p) for p in numbers)
        )
        for topic, numbers in by_topic.items()
    )
    out = io.BytesIO()
    out.write(_VERSION.pack(0))
    _write_assignment(out, assignment_v0.ConsumerProtocolAssignment(assigned_partitions=assigned))
    return out.getvalue()


def decode_assignment(data: bytes) -> tuple[Partition, ...]:
    """The partitions of a ConsumerProtocolAssignment, sorted (empty bytes: none).
    InconsistentGroupProtocolError for bytes that are not one."""
    if not data:
        return ()
    _, body = _split(data, "assignment")
    try:
        assignment, _ = _ASSIGNMENT_READER(body, 0)
    except (SerialError, ValueError) as error:
        raise InconsistentGroupProtocolError(f"bad consumer assignment: {error}") from error
    return tuple(
        sorted(
            (item.topic, int(p)) for item in assignment.assigned_partitions for p in item.partitions
        )
    )


def _split(data: bytes, what: str) -> tuple[int, bytes]:
    if len(data) < _VERSION.size:
        raise InconsistentGroupProtocolError(f"consumer {what} of {len(data)} bytes")
    (version,) = _VERSION.unpack_from(data)
    if version < 0:
        raise InconsistentGroupProtocolError(f"consumer {what} version {version}")
    return version, bytes(data[_VERSION.size :])
