"""eoslog: an embedded, exactly-once, Kafka-format log for Python."""

from __future__ import annotations

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

__version__ = "0.1.0"

__all__ = [
    "CorruptRecordError",
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
    "TransactionTimedOutError",
    "UnknownTopicOrPartitionError",
    "UnstableOffsetCommitError",
    "UnsupportedCompressionTypeError",
    "__version__",
]
