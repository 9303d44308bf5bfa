"""Message and TopicPartition (docs/api.md "Consumer"), shaped like confluent-kafka-python's,
and FetchedRecords, the decoded fetch consume_arrow slices.

A consume() makes one Message per record and nothing else per record: the records of a fetch
are indexed in C (eoslog._ext.message.index_records: references into the fetched bytes, no
copy) into one MessageBatch, and each Message (a C type) holds the MessageBatch and an index.
An accessor makes its Python object from the record's bytes when called, so a consumer that
reads only values never pays for keys or headers.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final

from eoslog import arguments
from eoslog._ext.message import (
    Message,
    MessageBatch,
    RecordRefs,
    error_message,
    index_records,
    make_messages,
)
from eoslog.errors import KafkaError

if TYPE_CHECKING:
    import pyarrow as pa

    from eoslog.record.columns import ColumnarRecords

# Special offsets, with librdkafka's values (rdkafka.h RD_KAFKA_OFFSET_*), as
# confluent_kafka exports them.
OFFSET_BEGINNING: Final = -2
OFFSET_END: Final = -1
OFFSET_STORED: Final = -1000
OFFSET_INVALID: Final = -1001

# Message.timestamp() types, as confluent_kafka numbers them (Kafka's timestamp type + 1).
TIMESTAMP_NOT_AVAILABLE: Final = 0
TIMESTAMP_CREATE_TIME: Final = 1
TIMESTAMP_LOG_APPEND_TIME: Final = 2

Header = tuple[str, bytes | None]

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "OFFSET_STORED",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "FetchedRecords",
    "Message",
    "MessageBatch",
    "RecordRefs",
    "TopicPartition",
    "error_message",
    "index_records",
    "make_messages",
]


class TopicPartition:
    """A topic, a partition and an offset (confluent_kafka.TopicPartition).

    `offset` is a real offset or one of OFFSET_BEGINNING, OFFSET_END, OFFSET_STORED,
    OFFSET_INVALID. Equality, ordering and hashing use (topic, partition) only, as in
    confluent-kafka-python, so a TopicPartition works as a dict key for its partition."""

    __slots__ = ("error", "leader_epoch", "metadata", "offset", "partition", "topic")

    def __init__(
        self,
        topic: str,
        partition: int = -1,
        offset: int = OFFSET_INVALID,
        metadata: str | None = None,
        leader_epoch: int | None = None,
    ) -> None:
        """TypeError for a topic that is not a str, a partition or offset that is not an
        integer, a metadata that is not a str or None, as confluent-kafka checks them."""
        self.topic = arguments.text("topic", topic)
        self.partition = arguments.integer("partition", partition)
        self.offset = arguments.integer("offset", offset)
        if metadata is not None:
            arguments.text("metadata", metadata)
        self.metadata = metadata
        self.leader_epoch = (
            None if leader_epoch is None else arguments.integer("leader_epoch", leader_epoch)
        )
        self.error: KafkaError | None = None

    def _key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicPartition):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: TopicPartition) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"TopicPartition{{topic={self.topic},partition={self.partition},"
            f"offset={self.offset},leader_epoch={self.leader_epoch},error={self.error}}}"
        )


class FetchedRecords:
    """The decoded records of one fetch of one partition as Arrow-layout columns, which
    consume_arrow slices into RecordBatches.

    Thread safety: built and read by the one thread that owns the Consumer."""

    __slots__ = ("columns", "count", "next_offset", "partition", "topic")

    def __init__(
        self, topic: str, partition: int, columns: ColumnarRecords, next_offset: int
    ) -> None:
        assert columns.count > 0, "a fetch with no records is never buffered"
        self.topic = topic
        self.partition = partition
        self.columns = columns
        self.count = columns.count
        # Where the consumer's position goes once every record here is consumed: past the
        # last batch these records came from, and past control or aborted batches after them.
        self.next_offset = next_offset
        assert next_offset > int(columns.offset[-1])

    def offset_at(self, index: int) -> int:
        return int(self.columns.offset[index])

    def to_arrow(self, start: int, stop: int, include_headers: bool) -> pa.RecordBatch:
        """Records [start, stop) in the Spark Kafka source's schema (docs/api.md "Spark")."""
        columns = self.columns
        if not include_headers and columns.headers is not None:
            columns = dataclasses.replace(columns, headers=None)
        batch = columns.to_arrow(self.topic, self.partition)
        return batch if start == 0 and stop == self.count else batch.slice(start, stop - start)


def topic_partitions(name: str, value: object) -> list[TopicPartition]:
    """A list (or tuple) of TopicPartition, as confluent's calls take them; TypeError
    otherwise (a lone TopicPartition or a topic name included)."""
    if not isinstance(value, list | tuple) or not all(
        isinstance(item, TopicPartition) for item in value
    ):
        raise TypeError(f"{name} must be a list of TopicPartition, not {type(value).__name__}")
    return list(value)


def topic_partition(name: str, value: object) -> TopicPartition:
    if not isinstance(value, TopicPartition):
        raise TypeError(f"{name} must be a TopicPartition, not {type(value).__name__}")
    return value
