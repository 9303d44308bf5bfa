"""The error model (docs/api.md "Errors"), shaped like confluent-kafka-python's.

`KafkaException` carries a `KafkaError` whose `code()` is one of librdkafka's error codes, as
confluent_kafka.KafkaError has them (eoslog.error_codes): Kafka's numeric protocol codes
(clients/.../common/protocol/Errors.java, tabulated in docs/coordinator.md §8) and librdkafka's
negative local ones. Named subclasses let callers catch the common cases directly. Corruption
and bad-input errors also subclass ValueError; I/O errors also subclass OSError.
"""

from __future__ import annotations

import builtins
import functools
import operator
from typing import ClassVar, NoReturn

from eoslog import error_codes
from eoslog.error_codes import ErrorCodes
from eoslog.record import status as _status

# librdkafka's rd_kafka_resp_err_t is a C int; confluent-kafka refuses a code outside it.
_CODE_MIN = -(2**31)
_CODE_MAX = 2**31 - 1


@functools.total_ordering
class KafkaError(ErrorCodes):
    """An error value, as confluent_kafka.KafkaError: a librdkafka error code, a reason, and
    how a client should react. Immutable, so any thread may read one.

    `KafkaError(error, reason=None, fatal=False, retriable=False, txn_requires_abort=False)`,
    positionally or by keyword, as in confluent-kafka. `name()` is librdkafka's name for the
    code and `str()` the reason, or librdkafka's description of the code when the reason is
    None; an unknown code is named "ERR_<code>?". Every code is a class constant
    (`KafkaError._PARTITION_EOF`, `KafkaError.UNKNOWN_TOPIC_OR_PART`; eoslog.error_codes).
    Equal to, and ordered against, another KafkaError or an int by code alone.

    Raises TypeError if the code or a flag is not an integer or the reason is neither a str nor
    None, and OverflowError if the code does not fit a C int, as confluent-kafka does.
    """

    __slots__ = ("_code", "_fatal", "_reason", "_retriable", "_txn_requires_abort")

    def __init__(
        self,
        error: int,
        reason: builtins.str | None = None,
        fatal: bool = False,
        retriable: bool = False,
        txn_requires_abort: bool = False,
    ) -> None:
        code = operator.index(error)
        if not _CODE_MIN <= code <= _CODE_MAX:
            raise OverflowError(f"error code {code} does not fit librdkafka's C int")
        if reason is not None and not isinstance(reason, builtins.str):
            raise TypeError(f"reason must be str or None, not {type(reason).__name__}")
        self._code = code
        self._reason = error_codes.description_of(code) if reason is None else reason
        self._fatal = bool(operator.index(fatal))
        self._retriable = bool(operator.index(retriable))
        self._txn_requires_abort = bool(operator.index(txn_requires_abort))

    def code(self) -> int:
        return self._code

    def name(self) -> builtins.str:
        return error_codes.name_of(self._code)

    def str(self) -> builtins.str:
        return self._reason

    def retriable(self) -> bool:
        return self._retriable

    def fatal(self) -> bool:
        return self._fatal

    def txn_requires_abort(self) -> bool:
        return self._txn_requires_abort

    def __repr__(self) -> builtins.str:
        # confluent-kafka's form, which its str() also gives; only fatal is shown.
        fatal = "FATAL," if self._fatal else ""
        return f'KafkaError{{{fatal}code={self.name()},val={self._code},str="{self._reason}"}}'

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        code = _code_of(other)
        return NotImplemented if code is None else self._code == code

    def __lt__(self, other: object) -> bool:
        code = _code_of(other)
        return NotImplemented if code is None else self._code < code

    def __hash__(self) -> int:
        return hash(self._code)


def _code_of(other: object) -> int | None:
    """The code a KafkaError compares against: another error's, or an int itself."""
    if isinstance(other, KafkaError):
        return other._code
    if isinstance(other, int):
        return other
    return None


class KafkaException(Exception):
    """Raised by eoslog; `args[0]` is the KafkaError, as in confluent-kafka-python."""

    # Subclasses fix the Kafka error they stand for; name() follows from the code.
    code: ClassVar[int] = KafkaError.UNKNOWN
    retriable: ClassVar[bool] = False
    fatal: ClassVar[bool] = False
    txn_requires_abort: ClassVar[bool] = False

    def __init__(self, error: KafkaError | str | None = None) -> None:
        """error: the KafkaError to carry, or the reason for one built from the class's code
        and flags (None: librdkafka's description of the code)."""
        if not isinstance(error, KafkaError):
            error = KafkaError(
                type(self).code,
                error,
                fatal=type(self).fatal,
                retriable=type(self).retriable,
                txn_requires_abort=type(self).txn_requires_abort,
            )
        super().__init__(error)

    @property
    def error(self) -> KafkaError:
        error = self.args[0]
        assert isinstance(error, KafkaError)
        return error

    def __str__(self) -> builtins.str:
        return self.error.str()


class CorruptRecordError(KafkaException, ValueError):
    """Bytes that fail a checksum or whose length fields cannot be right."""

    code = KafkaError.INVALID_MSG


class InvalidRecordError(KafkaException, ValueError):
    """A well-checksummed batch whose structure breaks Kafka's rules."""

    code = KafkaError.INVALID_RECORD


class InvalidTimestampError(KafkaException, ValueError):
    """Record timestamps outside the topic's allowed range, or a client batch claiming
    LogAppendTime (Kafka's RecordValidationException wrapping InvalidTimestampException).
    record_errors: (record index, message) for each offending record."""

    code = KafkaError.INVALID_TIMESTAMP

    def __init__(
        self,
        error: KafkaError | str | None = None,
        record_errors: list[tuple[int, str]] | None = None,
    ) -> None:
        super().__init__(error)
        self.record_errors = list(record_errors or [])


class RecordTooLargeError(KafkaException, ValueError):
    code = KafkaError.MSG_SIZE_TOO_LARGE


class UnsupportedCompressionTypeError(KafkaException, ValueError):
    code = KafkaError.UNSUPPORTED_COMPRESSION_TYPE


class UnknownTopicOrPartitionError(KafkaException):
    code = KafkaError.UNKNOWN_TOPIC_OR_PART
    retriable = True


class InvalidTopicError(KafkaException, ValueError):
    code = KafkaError.TOPIC_EXCEPTION


class OutOfOrderSequenceError(KafkaException):
    code = KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaException):
    code = KafkaError.INVALID_PRODUCER_EPOCH
    txn_requires_abort = True


class InvalidTxnStateError(KafkaException):
    code = KafkaError.INVALID_TXN_STATE
    fatal = True


class InvalidRequestError(KafkaException, ValueError):
    """A request that cannot be valid (Kafka's INVALID_REQUEST), e.g. an empty
    transactional id."""

    code = KafkaError.INVALID_REQUEST
    fatal = True


class InvalidProducerIdMappingError(KafkaException):
    """The transactional id is unknown to the coordinator, or maps to another producer id
    (Kafka's InvalidPidMappingException). Abortable, not fatal: eoslog's coordinator can bump
    epochs, so the client aborts and re-initialises (docs/coordinator.md §3.3, §7.3)."""

    code = KafkaError.INVALID_PRODUCER_ID_MAPPING
    txn_requires_abort = True


class InvalidTransactionTimeoutError(KafkaException, ValueError):
    """InitProducerId with transaction.timeout.ms <= 0 or above the broker's maximum (Kafka's
    InvalidTxnTimeoutException). The Java client treats it as fatal (docs/coordinator.md §3.2)."""

    code = KafkaError.INVALID_TRANSACTION_TIMEOUT
    fatal = True


class ConcurrentTransactionsError(KafkaException):
    """The transactional id has a state change in flight, or its transaction is still
    completing (Prepare*): the client backs off and retries (docs/coordinator.md §3.2, §3.6)."""

    code = KafkaError.CONCURRENT_TRANSACTIONS
    retriable = True


class TransactionCoordinatorFencedError(KafkaException):
    """A transaction marker from an older coordinator epoch (a zombie coordinator)."""

    code = KafkaError.TRANSACTION_COORDINATOR_FENCED
    fatal = True


class UnstableOffsetCommitError(KafkaException):
    """Committed offsets asked for with require_stable (a read_committed consumer) while a
    transaction holds offsets for the partition that are not yet committed or aborted
    (KIP-447, docs/coordinator.md §6.2). Retriable: ask again once the transaction ends."""

    code = KafkaError.UNSTABLE_OFFSET_COMMIT
    retriable = True


class CommitFailedError(KafkaException):
    """An offset commit the group coordinator refused because the committer is no longer the
    member it claims to be (Kafka's CommitFailedException, docs/coordinator.md §3.5, §6.3): its
    generation is over or it was removed from the group. Inside a transaction the transaction
    must be aborted (abortable, as Kafka's TxnOffsetCommitHandler treats it); a consumer
    rejoins the group at its next poll. The subclasses carry Kafka's codes."""

    code = KafkaError.UNKNOWN
    txn_requires_abort = True


class IllegalGenerationError(CommitFailedError):
    """A commit, or transactional offsets, from a generation of the group that is over (a
    zombie consumer after a rebalance: KIP-447 fencing)."""

    code = KafkaError.ILLEGAL_GENERATION


class UnknownMemberIdError(CommitFailedError):
    """A commit or heartbeat from a member id the group does not have (never joined, left, or
    removed after max.poll.interval.ms without a poll)."""

    code = KafkaError.UNKNOWN_MEMBER_ID


class FencedInstanceIdError(CommitFailedError):
    """A commit from a static member (group.instance.id) whose instance another process has
    joined the group with since (KIP-345): this one is a zombie."""

    code = KafkaError.FENCED_INSTANCE_ID


class RebalanceInProgressError(CommitFailedError):
    """A commit from a member while its group waits for the leader's assignment
    (CompletingRebalance, a group of Kafka clients whose leader assigns): rejoin, then commit."""

    code = KafkaError.REBALANCE_IN_PROGRESS


class InconsistentGroupProtocolError(KafkaException, ValueError):
    """A member joining a group with no assignment strategy in common with its members
    (partition.assignment.strategy)."""

    code = KafkaError.INCONSISTENT_GROUP_PROTOCOL


class InvalidGroupIdError(KafkaException, ValueError):
    """An empty or missing group id where a group is needed (commit, subscribe,
    send_offsets_to_transaction)."""

    code = KafkaError.INVALID_GROUP_ID


class OffsetMetadataTooLargeError(KafkaException, ValueError):
    """Commit metadata longer than offset.metadata.max.bytes (Kafka's default 4096)."""

    code = KafkaError.OFFSET_METADATA_TOO_LARGE


class CorruptOffsetsLogError(KafkaException, ValueError):
    """A `__consumer_offsets` record that cannot be decoded (bad bytes or an unknown key
    version): its loader stops with this rather than guess (UNKNOWN_SERVER_ERROR on the
    wire, as for `__transaction_state`)."""

    code = KafkaError.UNKNOWN


class ProducerFencedError(KafkaException):
    code = KafkaError.PRODUCER_FENCED
    fatal = True


class TransactionTimedOutError(KafkaException):
    """The transaction passed transaction.timeout.ms and was aborted by the coordinator.

    Kafka never shipped a separate code for this (KIP-588, docs/coordinator.md §8): on the wire a
    timed-out producer sees PRODUCER_FENCED, so this carries code 90 and stays fatal.
    """

    code = KafkaError.PRODUCER_FENCED
    fatal = True


class LogDirLockedError(KafkaException, OSError):
    """Another live process owns the log directory."""

    code = KafkaError.KAFKA_STORAGE_ERROR


_BY_NAME: dict[str, type[KafkaException]] = {
    cls.__name__: cls
    for cls in (
        CorruptRecordError,
        InvalidRecordError,
        RecordTooLargeError,
        UnsupportedCompressionTypeError,
    )
}


def error_for_status(code: int, position: int) -> KafkaException:
    """The exception for a codec status code; the one place codes become exceptions."""
    class_name, text = _status.MESSAGES[code]
    return _BY_NAME[class_name](f"{text} (batch at byte {position})")


def raise_for_status(code: int, position: int) -> NoReturn:
    """Raise the exception for a non-OK codec status (docs/style.md rule 4)."""
    raise error_for_status(code, position)


class KafkaStorageError(KafkaException, OSError):
    """A file operation failed (EIO, ENOSPC, a failed fsync). The broker stops writing
    (fail-stop): nothing is acknowledged after it."""

    code = KafkaError.KAFKA_STORAGE_ERROR


class CorruptIndexError(KafkaException, ValueError):
    """An offset, time or transaction index file whose bytes cannot be right (Kafka's
    CorruptIndexException); recovery rebuilds the index from the log."""

    code = KafkaError.KAFKA_STORAGE_ERROR


class OffsetOutOfRangeError(KafkaException):
    """A read from an offset below the log start or above the log end."""

    code = KafkaError.OFFSET_OUT_OF_RANGE


class _DamageInFile(KafkaException):
    """A file whose bytes are wrong, with `position` (the byte where the file goes wrong) and
    `reason` (what is wrong, without the file's name) when the reader knows them, for a
    report that names the file itself (`eoslog verify`)."""

    def __init__(
        self,
        error: KafkaError | str | None = None,
        *,
        position: int | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(error)
        self.position = position
        self.reason = reason


class CorruptSnapshotError(_DamageInFile, ValueError):
    """A producer-state snapshot that cannot be read (Kafka's CorruptSnapshotException, which
    has no wire code): its loader falls back to an older snapshot or a replay of the log."""

    code = KafkaError.UNKNOWN


class CorruptTransactionLogError(KafkaException, ValueError):
    """A `__transaction_state` key or value that cannot be read: truncated, trailing bytes, an
    unknown value version, a bad length or an unknown state id (docs/coordinator.md §2.1). Kafka has
    no wire code for it; its loader logs and stops, so this is UNKNOWN_SERVER_ERROR."""

    code = KafkaError.UNKNOWN


class UnknownTransactionLogKeyVersionError(CorruptTransactionLogError):
    """A `__transaction_state` key whose version this build does not know. Kafka's loader skips
    such records ("a left over from an aborted upgrade"), so a loader may catch this one alone
    and go on; every other CorruptTransactionLogError stops the load."""


class RecordBatchTooLargeError(KafkaException, ValueError):
    """A batch larger than the topic's segment.bytes."""

    code = KafkaError.RECORD_LIST_TOO_LARGE


class InvalidConfigError(KafkaException, ValueError):
    code = KafkaError.INVALID_CONFIG


class TopicAlreadyExistsError(KafkaException, ValueError):
    code = KafkaError.TOPIC_ALREADY_EXISTS


class InvalidPartitionsError(KafkaException, ValueError):
    """A partition count a topic cannot take: below 1 at creation, or not above the current
    count when partitions are added (Kafka's InvalidPartitionsException)."""

    code = KafkaError.INVALID_PARTITIONS


# Index invariants: an index append that breaks them is our bug (docs/style.md rule 3), so these
# are plain exceptions, not Kafka errors a client would see.
class InvalidOffsetError(ValueError):
    """An index append whose offset is not above the last entry's (Kafka's
    InvalidOffsetException)."""


class IndexFullError(ValueError):
    """An append to an index with no free slot."""


class IndexOffsetOverflowError(ValueError):
    """An offset that cannot be stored relative to the segment base (0 .. 2**31 - 1)."""


class LimitExceededError(KafkaException):
    """A request refused, changing nothing, because granting it would pass one of eoslog's
    named limits (eoslog.limits) that bound memory and Kafka does not have. Kafka's code for a
    request refused to bound a broker's resources, THROTTLING_QUOTA_EXCEEDED; not retriable,
    as in Kafka, since only time (expiry, transactions ending) frees room."""

    code = KafkaError.THROTTLING_QUOTA_EXCEEDED


class TooManyProducersError(LimitExceededError):
    """An idempotent or transactional batch from a producer new to a partition that keeps
    limits.producers_per_partition_max producers' state already; nothing is written."""


class TooManyOpenTransactionsError(LimitExceededError):
    """A transaction opened while limits.open_transactions_max transactional ids have one
    in progress; the coordinator records nothing."""


class ProducerStateError(KafkaException):
    """A call the producer's state does not allow: it is closed, or an earlier fatal error
    stopped it (librdkafka's RD_KAFKA_RESP_ERR__STATE)."""

    code = KafkaError._STATE


class ProducerClosedError(ProducerStateError, RuntimeError):
    """A call on a closed producer. Also a RuntimeError, which confluent-kafka raises for a
    producer that has been closed (as after `with Producer(conf) as p:`)."""


class MessagePurgedError(KafkaException):
    """A queued message dropped before it was sent: abort_transaction() purges the batches of
    the transaction it aborts, and their delivery callbacks get this (librdkafka's
    RD_KAFKA_RESP_ERR__PURGE_QUEUE, "Local: Purged in queue")."""

    code = KafkaError._PURGE_QUEUE


class OperationTimedOutError(KafkaException):
    """A blocking call ran out of time before it could finish (librdkafka's
    RD_KAFKA_RESP_ERR__TIMED_OUT): init_transactions, commit_transaction or
    abort_transaction after `timeout` (or max.block.ms). Retriable: the same call may be made
    again, and the outcome is not known until it succeeds (docs/coordinator.md §7.2)."""

    code = KafkaError._TIMED_OUT
    retriable = True


class NotASegmentFileError(KafkaException, ValueError):
    """A path given to `eoslog verify`, `eoslog repair` or repair_truncate that is not a
    segment's .log (a name other than 20 digits and `.log`, or not a regular file), or a
    directory given to `eoslog verify` that holds no segments or partitions."""


class RepairRefusedError(KafkaException, ValueError):
    """repair_truncate was asked to cut a segment where no validated batch boundary lies;
    nothing was changed. `boundary` is the nearest position at or below the one asked that a
    walk over valid batches from the segment start reaches."""

    def __init__(self, message: str, boundary: int) -> None:
        super().__init__(message)
        self.boundary = boundary


class CorruptCheckpointError(_DamageInFile, ValueError):
    """A checkpoint file (recovery point, log start offset) that cannot be read, or whose
    value the log on disk contradicts: a value past the log end, which no eoslog write leaves
    (docs/format.md §9.1). The message names the file, the byte or the entry, and the values.
    Nothing is deleted because of a checkpoint: the open refuses instead. A malformed file's
    error has its `position` and `reason`."""

    code = KafkaError.UNKNOWN


class UnsafePathError(KafkaStorageError):
    """A path eoslog refuses to act on: a symbolic link inside the log directory (it never
    follows one there, so a planted link cannot redirect a write), something other than a
    regular file where a file belongs, or a path that leaves the log directory."""
