"""The transactional producer's state machine (docs/coordinator.md §7; Kafka's client
TransactionManager), as data: the legal transitions (§7.1) and the states each public method
may be called in (§7.2), each a table a test walks pair by pair (docs/style.md rule 10).

Errors for a call in the wrong state, chosen to follow confluent-kafka-python (librdkafka),
whose errors eoslog's are modelled on, while staying typed:

- FATAL_ERROR: every call but close() raises the stored fatal error again (its own type, e.g.
  ProducerFencedError, with fatal() true), as librdkafka does after a fatal error.
- ABORTABLE_ERROR: every call but abort_transaction() raises the stored abortable error again
  (its own type, txn_requires_abort() true): the application must abort first.
- Otherwise: ProducerStateError (librdkafka's _STATE, "Operation not valid in state ...";
  Java's IllegalStateException), naming the method and the state; the state does not change.

The producer's transactions (with transactional.id; docs/coordinator.md §7, §9.4):
init_transactions() takes a producer id and epoch from broker.transactions (fencing older
producers with the id); begin_transaction() opens a transaction locally; its batches are flagged
transactional, and before the first of them reaches a partition the sender adds that partition
to the coordinator's transaction (the implicit add of transactions v2, done by the client).
commit_transaction() flushes, then ends the transaction; abort_transaction() purges what is
queued, then ends it. Every end bumps the epoch (returned by the coordinator) and restarts the
sequences at 0, so a late batch of transaction n cannot land in n+1. Inside a transaction a
failed send (InvalidProducerEpochError, OutOfOrderSequenceError, a delivery timeout, any
non-retriable append error) is abortable: the state goes to ABORTABLE_ERROR, the batches left
fail unsent, and only abort_transaction() is allowed. ProducerFencedError, InvalidTxnStateError
and KafkaStorageError are fatal (FATAL_ERROR: only close()). Inside a transaction the native
fast path appends records to the batches the Python path opened in it; outside one it hands
every record to the Python path, which raises the state's error.

Thread safety: a TransactionManager has no lock of its own; the Producer reads and changes it
under its producer lock only. The functions below take no lock.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from eoslog.client.message import TopicPartition
from eoslog.coordinator.group_coordinator import OffsetToCommit
from eoslog.errors import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    KafkaError,
    KafkaException,
    MessagePurgedError,
    OperationTimedOutError,
    ProducerFencedError,
    ProducerStateError,
)

# Backoff between retries of a coordinator call answered CONCURRENT_TRANSACTIONS (Kafka's
# retry.backoff.ms is 100 ms; the in-process coordinator finishes a transaction sooner).
_CONCURRENT_BACKOFF_S: Final = 0.01
_Result = TypeVar("_Result")


class TxnState(enum.Enum):
    # Members are singletons compared by identity: object's hash, instead of Enum's
    # Python-level one, keeps the table lookups of every transition free of calls.
    __hash__ = object.__hash__

    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING = "COMMITTING_TRANSACTION"
    ABORTING = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


T = TxnState
ALL_STATES: Final = frozenset(TxnState)

# target -> the states it may be entered from (§7.1, Kafka's State.isTransitionValid). FATAL_ERROR
# may be entered from anywhere. INITIALIZING from ABORTING is the re-initialisation after an
# abort whose error was INVALID_PRODUCER_ID_MAPPING (KIP-360, §7.2 abortTransaction).
ALLOWED_FROM: Final[Mapping[TxnState, frozenset[TxnState]]] = {
    T.UNINITIALIZED: frozenset({T.READY, T.ABORTABLE_ERROR}),
    T.INITIALIZING: frozenset({T.UNINITIALIZED, T.ABORTING}),
    T.READY: frozenset({T.INITIALIZING, T.COMMITTING, T.ABORTING}),
    T.IN_TRANSACTION: frozenset({T.READY}),
    T.COMMITTING: frozenset({T.IN_TRANSACTION}),
    T.ABORTING: frozenset({T.IN_TRANSACTION, T.ABORTABLE_ERROR}),
    T.ABORTABLE_ERROR: frozenset(
        {T.IN_TRANSACTION, T.COMMITTING, T.ABORTABLE_ERROR, T.INITIALIZING}
    ),
    T.FATAL_ERROR: ALL_STATES,
}

# method -> the states it may be called in (§7.2). A commit or abort that timed out, or that
# failed with a retriable storage error after the coordinator decided it (§3.6, F6), leaves the
# state COMMITTING / ABORTING and may be called again (only the same call: Kafka refuses an
# abort after a timed-out commit); an init that timed out stays INITIALIZING likewise.
# produce and produce_batch need an open transaction (librdkafka: _STATE outside one).
METHOD_STATES: Final[Mapping[str, frozenset[TxnState]]] = {
    "init_transactions": frozenset({T.UNINITIALIZED, T.INITIALIZING}),
    "begin_transaction": frozenset({T.READY}),
    "produce": frozenset({T.IN_TRANSACTION}),
    "produce_batch": frozenset({T.IN_TRANSACTION}),
    "send_offsets_to_transaction": frozenset({T.IN_TRANSACTION}),
    "commit_transaction": frozenset({T.IN_TRANSACTION, T.COMMITTING}),
    "abort_transaction": frozenset({T.IN_TRANSACTION, T.ABORTING, T.ABORTABLE_ERROR}),
}
METHODS: Final = tuple(METHOD_STATES)


def is_transition_valid(source: TxnState, target: TxnState) -> bool:
    return source in ALLOWED_FROM[target]


def as_abortable(error: KafkaException) -> KafkaException:
    """The error with txn_requires_abort() true (and not fatal, not retriable): what a failed
    send inside a transaction becomes (§7.3; a delivery timeout too, KAFKA-18579)."""
    if error.error.txn_requires_abort() and not error.error.fatal():
        return error
    inner = error.error
    return type(error)(KafkaError(inner.code(), inner.str(), txn_requires_abort=True))


def as_fatal(error: KafkaException) -> KafkaException:
    """The error with fatal() true: what a fencing or a broken coordinator state becomes."""
    if error.error.fatal():
        return error
    inner = error.error
    return type(error)(KafkaError(inner.code(), inner.str(), fatal=True))


class TransactionManager:
    """The state, the last error, and the partitions added to the open transaction.

    `gate` (the producer's RecordAccumulator) gets `in_transaction` set to whether the state
    is IN_TRANSACTION at every transition, so the native produce() path serves records only
    inside a transaction and hands the rest to Producer.produce, which raises."""

    __slots__ = ("_gate", "error", "partitions", "state")

    def __init__(self, gate: Any = None) -> None:
        self._gate = gate
        self.state = TxnState.UNINITIALIZED
        self.error: KafkaException | None = None  # set in ABORTABLE_ERROR and FATAL_ERROR
        self.partitions: set[tuple[str, int]] = set()  # added to the coordinator's transaction

    def check_call(self, method: str) -> None:
        """Raise what `method` raises in the current state (module doc); nothing when it is
        allowed."""
        state = self.state
        if state in METHOD_STATES[method]:
            return
        if state in (T.FATAL_ERROR, T.ABORTABLE_ERROR):
            assert self.error is not None, f"{state.value} without its error"
            raise type(self.error)(self.error.error)
        raise ProducerStateError(
            f"{method}: Operation not valid in state {state.value}"
            + _HINTS.get((method, state), "")
        )

    def failure(self) -> KafkaException | None:
        """The error a batch fails with, unsent, in the current state; None to send it."""
        if self.state is T.ABORTING:
            return MessagePurgedError("purged by abort_transaction()")
        if self.state is T.ABORTABLE_ERROR:
            assert self.error is not None
            return type(self.error)(self.error.error)
        return None

    def transition(self, target: TxnState, error: KafkaException | None = None) -> None:
        """Move to `target`. An invalid transition is a bug of the producer: it fails loudly
        (the state is left unchanged)."""
        if self.state not in ALLOWED_FROM[target]:  # is_transition_valid, without its call
            raise AssertionError(f"invalid transition {self.state.value} -> {target.value}")
        if target in (T.ABORTABLE_ERROR, T.FATAL_ERROR):
            assert error is not None, f"{target.value} needs its error"
            self.error = as_fatal(error) if target is T.FATAL_ERROR else as_abortable(error)
        elif target is not T.ABORTING:
            self.error = None
        self.state = target
        if self._gate is not None:
            self._gate.in_transaction = target is T.IN_TRANSACTION

    def fail(self, error: KafkaException) -> KafkaException:
        """A send or a coordinator call failed with `error`: move to FATAL_ERROR for a fatal
        one, else to ABORTABLE_ERROR. An abortable error while aborting is ignored (§7.1);
        so is anything once fatal. Returns the error as the application should see it."""
        if self.state is T.FATAL_ERROR:
            assert self.error is not None
            return self.error
        if error.error.fatal():
            self.transition(T.FATAL_ERROR, error)
            assert self.error is not None
            return self.error
        if self.state is T.ABORTING:
            return as_abortable(error)
        if is_transition_valid(self.state, T.ABORTABLE_ERROR):
            self.transition(T.ABORTABLE_ERROR, error)
            assert self.error is not None
            return self.error
        # A failure outside a transaction cannot happen (every send of a transaction ends
        # before it does); were it to, the state is poisoned, as Kafka's sender does (§7.1).
        self.transition(T.FATAL_ERROR, error)
        assert self.error is not None
        return self.error


def coordinator_error(error: KafkaException) -> KafkaException:
    """A coordinator call's error as the client raises it: INVALID_PRODUCER_EPOCH from a
    coordinator API means fenced (docs/coordinator.md §7.3), so ProducerFencedError."""
    if isinstance(error, InvalidProducerEpochError):
        return ProducerFencedError(f"fenced: {error.error.str()}")
    return error


def retry_concurrent(
    deadline: float,
    what: str,
    closed: Callable[[], bool],
    call: Callable[..., _Result],
    args: tuple[Any, ...],
) -> _Result:
    """call(*args), retried while the coordinator answers CONCURRENT_TRANSACTIONS (a
    transaction of this id still completing, §7.3), until `deadline` (monotonic s) or until
    closed(). (The arguments come apart, not in a lambda: a commit makes two such calls.)"""
    while True:
        try:
            return call(*args)
        except ConcurrentTransactionsError as error:
            if time.monotonic() >= deadline or closed():
                raise OperationTimedOutError(f"{what}: timed out ({error})") from error
            time.sleep(_CONCURRENT_BACKOFF_S)


def offset_to_commit(tp: TopicPartition) -> OffsetToCommit | None:
    """send_offsets_to_transaction's offset of one partition, or None for a negative offset
    (a logical one, such as the OFFSET_INVALID position of a partition not read yet), which
    librdkafka leaves out of the commit; TypeError for what is not a TopicPartition."""
    if not isinstance(tp, TopicPartition):
        raise TypeError(f"offsets must be TopicPartitions, not {type(tp).__name__}")
    if tp.offset < 0:
        return None
    return OffsetToCommit(tp.topic, tp.partition, tp.offset, tp.metadata or "")


_HINTS: Final[Mapping[tuple[str, TxnState], str]] = {
    **{
        (method, T.UNINITIALIZED): ": call init_transactions() first"
        for method in METHODS
        if method != "init_transactions"
    },
    **{
        (method, T.READY): ": call begin_transaction() first"
        for method in ("produce", "produce_batch", "send_offsets_to_transaction")
    },
    ("abort_transaction", T.COMMITTING): (
        ": an earlier commit_transaction() timed out, or failed after the commit was decided;"
        " retry it"
    ),
    ("commit_transaction", T.ABORTING): (
        ": an earlier abort_transaction() timed out, or failed after the abort was decided;"
        " retry it"
    ),
}
