"""eoslog: an embedded, exactly-once, Kafka-format log for Python."""

from __future__ import annotations

from eoslog.broker import Broker, TopicMetadata, open
from eoslog.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTopicError,
    InvalidTxnStateError,
    KafkaError,
    KafkaException,
    LogDirLockedError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    RecordTooLargeError,
    TransactionTimedOutError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
    UnsupportedCompressionTypeError,
)
from eoslog.log.partition import AppendInfo, FetchResult
from eoslog.log.recovery import repair_truncate

__version__ = "0.1.0"

__all__ = [
    "AppendInfo",
    "Broker",
    "CorruptRecordError",
    "FetchResult",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTopicError",
    "InvalidTxnStateError",
    "KafkaError",
    "KafkaException",
    "LogDirLockedError",
    "OutOfOrderSequenceError",
    "ProducerFencedError",
    "RecordTooLargeError",
    "TopicMetadata",
    "TransactionTimedOutError",
    "UnknownTopicOrPartitionError",
    "UnstableOffsetCommitError",
    "UnsupportedCompressionTypeError",
    "__version__",
    "open",
    "repair_truncate",
]
