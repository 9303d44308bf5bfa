"""eoslog: an embedded, exactly-once, Kafka-format log for Python."""

from __future__ import annotations

from eoslog.broker import Broker, TopicMetadata, open
from eoslog.client.consumer import Consumer
from eoslog.client.message import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Message,
    TopicPartition,
)
from eoslog.client.producer import Producer
from eoslog.coordinator.group_coordinator import ConsumerGroupMetadata
from eoslog.errors import (
    CommitFailedError,
    CorruptRecordError,
    IllegalGenerationError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTopicError,
    InvalidTxnStateError,
    KafkaError,
    KafkaException,
    LogDirLockedError,
    MessagePurgedError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    ProducerClosedError,
    ProducerFencedError,
    ProducerStateError,
    RecordTooLargeError,
    TransactionTimedOutError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
    UnsupportedCompressionTypeError,
)
from eoslog.log.partition import AppendInfo
from eoslog.log.partition_reads import FetchResult
from eoslog.log.recovery import repair_truncate
from eoslog.offline import scan

__version__ = "0.1.0"

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "OFFSET_STORED",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "AppendInfo",
    "Broker",
    "CommitFailedError",
    "Consumer",
    "ConsumerGroupMetadata",
    "CorruptRecordError",
    "FetchResult",
    "IllegalGenerationError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTopicError",
    "InvalidTxnStateError",
    "KafkaError",
    "KafkaException",
    "LogDirLockedError",
    "Message",
    "MessagePurgedError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "Producer",
    "ProducerClosedError",
    "ProducerFencedError",
    "ProducerStateError",
    "RecordTooLargeError",
    "TopicMetadata",
    "TopicPartition",
    "TransactionTimedOutError",
    "UnknownMemberIdError",
    "UnknownTopicOrPartitionError",
    "UnstableOffsetCommitError",
    "UnsupportedCompressionTypeError",
    "__version__",
    "open",
    "repair_truncate",
    "scan",
]
