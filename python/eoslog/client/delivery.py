"""What a producer's on_delivery(err, msg) callback receives (docs/api.md "Producer", "Consumer":
Message accessors).

DeliveryReport has the accessor names of confluent-kafka-python's Message (topic(),
partition(), offset(), key(), value(), headers(), timestamp() -> (type, ms), error()), so
that it can be unified with the consumer's Message later. Immutable; any thread may read it.
"""

from __future__ import annotations

from typing import Final

from eoslog.errors import KafkaError

# confluent_kafka.TIMESTAMP_* (librdkafka's rd_kafka_timestamp_type_t).
TIMESTAMP_NOT_AVAILABLE: Final = 0
TIMESTAMP_CREATE_TIME: Final = 1
TIMESTAMP_LOG_APPEND_TIME: Final = 2
# librdkafka's RD_KAFKA_OFFSET_INVALID: the offset of a message that was not delivered.
OFFSET_INVALID: Final = -1001

Headers = list[tuple[str, bytes | None]]


class DeliveryReport:
    """One produced message and where it landed (or why it did not)."""

    __slots__ = (
        "_error",
        "_headers",
        "_key",
        "_offset",
        "_partition",
        "_timestamp",
        "_topic",
        "_value",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        timestamp: tuple[int, int],
        error: KafkaError | None,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._key = key
        self._value = value
        self._headers = headers
        self._timestamp = timestamp
        self._error = error

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        """The offset the message was written at; OFFSET_INVALID (-1001) if it failed."""
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> Headers | None:
        """list of (str, bytes) as produced, or None."""
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        """(TIMESTAMP_CREATE_TIME, ms) as produced, or (TIMESTAMP_LOG_APPEND_TIME, ms) on a
        LogAppendTime topic."""
        return self._timestamp

    def error(self) -> KafkaError | None:
        return self._error

    def __len__(self) -> int:
        # confluent's len(msg) is the value's length.
        return 0 if self._value is None else len(self._value)

    def __repr__(self) -> str:
        return (
            f"DeliveryReport(topic={self._topic!r}, partition={self._partition}, "
            f"offset={self._offset}, error={self._error!r})"
        )
