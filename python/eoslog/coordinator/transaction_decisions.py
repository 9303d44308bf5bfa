"""What the coordinator does with InitProducerId, AddPartitionsToTxn and EndTxn, decided
on one transactional id's metadata (docs/coordinator.md §3.2, §3.3, §3.6, §9.3).

Each `decide_*` function either raises the Kafka error the client gets, changing nothing, or
prepares one transition on the metadata and returns a Decision: the target to append to
`__transaction_state` (then complete_transition, or abandon_transition if the append fails),
and the answer to send once it is durable. A Decision with nothing to persist is answered at
once.

Thread safety: call under the transactional id's lock, like every TransactionMetadata method.
`new_producer_id` is called at most once, before anything is prepared, so its failure (for
example ProducerIdsExhaustedError) also changes nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Final, NamedTuple

from eoslog import limits
from eoslog.coordinator.transaction_log import NO_PRODUCER_ID
from eoslog.coordinator.transaction_metadata import TransactionMetadata
from eoslog.coordinator.transaction_state import (
    TRANSACTION_VERSION_EPOCH_BUMP,
    IllegalTransitionError,
    PartitionKey,
    TransactionState,
    TransitionTarget,
    is_epoch_exhausted,
)
from eoslog.errors import (
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KafkaError,
    KafkaException,
    KafkaStorageError,
    ProducerFencedError,
)

S = TransactionState
NewProducerId = Callable[[], int]


class Decision(NamedTuple):
    """What to persist (None: nothing) and what to answer once it is durable: a producer id
    and epoch, or `answer_error` (the fence of an Ongoing transaction answers
    CONCURRENT_TRANSACTIONS even when its abort is written, §3.2 step 7). A NamedTuple, cheap
    to make: a transaction takes two decisions."""

    persist: TransitionTarget | None
    producer_id: int
    producer_epoch: int
    answer_error: type[KafkaException] | None = None


def check_transaction_timeout(
    txn_timeout_ms: int, txn_timeout_ms_max: int = limits.txn_timeout_ms_max
) -> None:
    """InvalidTransactionTimeoutError unless 0 < timeout <= the maximum (§3.2 step 5)."""
    if not 0 < txn_timeout_ms <= txn_timeout_ms_max:
        raise InvalidTransactionTimeoutError(
            f"transaction timeout {txn_timeout_ms} ms is not in (0, {txn_timeout_ms_max}]"
        )


def _check_not_pending(meta: TransactionMetadata) -> None:
    if meta.pending is not None:
        raise ConcurrentTransactionsError(
            f"{meta.transactional_id}: {meta.pending.state.kafka_name} is being written"
        )


def _check_live_state(meta: TransactionMetadata) -> None:
    # Dead and PrepareEpochFence exist only as pending states (§1.1).
    if meta.state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
        raise IllegalTransitionError(f"{meta.transactional_id} is {meta.state.kafka_name}")


# --- InitProducerId (§3.2) ---------------------------------------------------------------------


def decide_init_producer_id(
    meta: TransactionMetadata,
    *,
    txn_timeout_ms: int,
    expected: tuple[int, int] | None,
    now_ms: int,
    new_producer_id: NewProducerId,
) -> Decision:
    """InitProducerId for an existing (or just created, epoch -1) transactional id, step 7.

    `expected` is the request's (producer id, epoch), or None when both are -1. Raises
    ConcurrentTransactionsError while a transition is pending or a transaction completes,
    ProducerFencedError for a stale producer. The timeout is checked by the caller first."""
    _check_not_pending(meta)
    _check_live_state(meta)
    if expected is not None and not _known_producer(meta, *expected):
        raise ProducerFencedError(
            f"{meta.transactional_id}: producer {expected[0]} is not {meta.producer_id}"
        )
    if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        raise ConcurrentTransactionsError(f"{meta.transactional_id}: transaction completing")
    if meta.state is S.ONGOING:
        return fence_ongoing_transaction(meta, now_ms=now_ms, new_producer_id=new_producer_id)
    expected_epoch = None if expected is None else expected[1]
    if is_epoch_exhausted(meta.producer_epoch) and expected_epoch in (None, meta.producer_epoch):
        target = meta.prepare_producer_id_rotation(
            new_producer_id(), txn_timeout_ms, now_ms, record_last_epoch=expected is not None
        )
    else:
        target = meta.prepare_epoch_bump(txn_timeout_ms, expected_epoch, now_ms)
    return Decision(target, target.producer_id, target.producer_epoch)


def _known_producer(meta: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """KIP-360: a request naming a producer is accepted if the metadata was just created,
    names the current producer, or names the previous one at an exhausted epoch (a retry
    after rotation). The epoch itself is checked by prepare_epoch_bump."""
    return (
        meta.producer_epoch == -1
        or producer_id == meta.producer_id
        or (producer_id == meta.previous_producer_id and is_epoch_exhausted(epoch))
    )


def fence_ongoing_transaction(
    meta: TransactionMetadata, *, now_ms: int, new_producer_id: NewProducerId
) -> Decision:
    """Fence the producer of an Ongoing transaction and abort it: PrepareEpochFence, replaced
    at once by PrepareAbort at epoch + 1 (one bump; a new producer id waits in
    next_producer_id if that bump exhausts the epoch). Used by InitProducerId and by the
    timeout reaper (§4.1). The fenced epoch is never handed out: InitProducerId answers
    CONCURRENT_TRANSACTIONS, and the client's retry bumps again once the abort completes."""
    if meta.state is not S.ONGOING:
        raise IllegalTransitionError(f"{meta.transactional_id}: fencing {meta.state.kafka_name}")
    _check_not_pending(meta)
    next_producer_id = (
        new_producer_id() if is_epoch_exhausted(meta.producer_epoch) else NO_PRODUCER_ID
    )
    meta.prepare_epoch_fence()
    try:
        target = meta.prepare_fence_abort(next_producer_id, now_ms)
    except BaseException:
        meta.abandon_transition()
        raise
    return Decision(target, target.producer_id, target.producer_epoch, ConcurrentTransactionsError)


# --- AddPartitionsToTxn (§3.3) -----------------------------------------------------------------


def decide_add_partitions(
    meta: TransactionMetadata,
    *,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[PartitionKey],
    now_ms: int,
    client_transaction_version: int,
) -> Decision:
    """AddPartitionsToTxn (or a TV2 implicit add): Ongoing with the partitions added, or no
    write when every partition is already in an Ongoing transaction."""
    _check_live_state(meta)
    if producer_id != meta.producer_id:
        raise InvalidProducerIdMappingError(f"{meta.transactional_id}: producer {producer_id}")
    if producer_epoch != meta.producer_epoch:
        raise ProducerFencedError(f"{meta.transactional_id}: epoch {producer_epoch}")
    _check_not_pending(meta)
    if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        raise ConcurrentTransactionsError(f"{meta.transactional_id}: transaction completing")
    added = frozenset(partitions)
    if meta.state is S.ONGOING and added <= meta.partitions:
        return Decision(None, meta.producer_id, meta.producer_epoch)
    target = meta.prepare_add_partitions(added, now_ms, client_transaction_version)
    return Decision(target, target.producer_id, target.producer_epoch)


# --- EndTxn under transactions V2 (§3.6) -------------------------------------------------------


class EpochKind(enum.Enum):
    """How an EndTxn's epoch relates to the stored one under TV2."""

    # Members are singletons compared by identity: object's hash, instead of Enum's
    # Python-level one, keeps the END_TXN_TV2 lookup of every EndTxn free of a call.
    __hash__ = object.__hash__

    CURRENT = "current"  # the stored epoch: this transaction (or, at rest, the next)
    RETRY = "retry"  # stored = request + 1, or the overflow twin: a retry of an end that won
    OTHER = "other"  # anything else: a stale or unknown producer


class EndOutcome(enum.Enum):
    BUMP = "EB"  # write Prepare* at epoch + 1
    NONE = "NONE"  # a retry of an end that completed: answer the stored id and epoch
    FENCED = "PF"
    INVALID_STATE = "ITS"
    CONCURRENT = "CONCURRENT_TRANSACTIONS"  # the end being retried is still completing


_E, _N, _PF, _ITS, _CT = (
    EndOutcome.BUMP,
    EndOutcome.NONE,
    EndOutcome.FENCED,
    EndOutcome.INVALID_STATE,
    EndOutcome.CONCURRENT,
)
_CUR, _RETRY, _OTHER = EpochKind.CURRENT, EpochKind.RETRY, EpochKind.OTHER

# (state, commit?, epoch kind) -> outcome: Kafka's TV2 EndTxn (TransactionCoordinator
# endTransaction, as tabulated in docs/coordinator.md §3.6), with its epoch validity folded in:
# Ongoing and Empty need the current epoch, Prepare* a retry, Complete* either.
END_TXN_TV2: Final[Mapping[tuple[TransactionState, bool, EpochKind], EndOutcome]] = (
    MappingProxyType(
        {
            (S.ONGOING, False, _CUR): _E,
            (S.ONGOING, True, _CUR): _E,
            (S.EMPTY, False, _CUR): _E,  # the empty abort
            (S.EMPTY, True, _CUR): _ITS,
            (S.PREPARE_COMMIT, True, _RETRY): _CT,
            (S.PREPARE_COMMIT, False, _RETRY): _ITS,
            (S.PREPARE_ABORT, False, _RETRY): _CT,
            (S.PREPARE_ABORT, True, _RETRY): _ITS,
            (S.COMPLETE_ABORT, False, _RETRY): _N,
            (S.COMPLETE_ABORT, False, _CUR): _E,
            # A commit retried from the epoch before an abort it did not ask for (a timeout
            # or a fence): the producer was fenced. Kafka answers PRODUCER_FENCED here since
            # KAFKA-20785 (docs/coordinator.md's table, from before it, says INVALID_TXN_STATE).
            (S.COMPLETE_ABORT, True, _RETRY): _PF,
            (S.COMPLETE_ABORT, True, _CUR): _ITS,
            (S.COMPLETE_COMMIT, True, _RETRY): _N,
            (S.COMPLETE_COMMIT, True, _CUR): _ITS,
            (S.COMPLETE_COMMIT, False, _RETRY): _ITS,
            (S.COMPLETE_COMMIT, False, _CUR): _E,
        }
    )
)
# Every (state, result, kind) the table leaves out is a fenced producer.


def end_txn_outcome(state: TransactionState, commit: bool, kind: EpochKind) -> EndOutcome:
    return END_TXN_TV2.get((state, commit, kind), EndOutcome.FENCED)


def epoch_kind(meta: TransactionMetadata, producer_id: int, producer_epoch: int) -> EpochKind:
    """Classify a TV2 EndTxn's (producer id, epoch) against the metadata (§3.6)."""
    retry_on_overflow = (
        producer_id == meta.previous_producer_id
        and producer_epoch == limits.producer_epoch_max - 1
        and meta.producer_epoch == 0
    )
    if producer_id == meta.producer_id and producer_epoch == meta.producer_epoch:
        return EpochKind.CURRENT
    if retry_on_overflow or (
        producer_id == meta.producer_id and meta.producer_epoch == producer_epoch + 1
    ):
        return EpochKind.RETRY
    return EpochKind.OTHER


def decide_end_txn(
    meta: TransactionMetadata,
    *,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    now_ms: int,
    new_producer_id: NewProducerId,
) -> Decision:
    """A TV2 EndTxn (v5+). Checks, in Kafka's order: the producer id
    (InvalidProducerIdMappingError, unless this is a retry across an overflow), a pending
    transition (ConcurrentTransactionsError; before the epoch, KAFKA-18464), then the
    END_TXN_TV2 row. A bump prepares Prepare* at epoch + 1 (and a next producer id if the
    epoch is exhausted); the answer is what the client uses next."""
    _check_live_state(meta)
    kind = epoch_kind(meta, producer_id, producer_epoch)
    if producer_id != meta.producer_id and kind is not EpochKind.RETRY:
        raise InvalidProducerIdMappingError(f"{meta.transactional_id}: producer {producer_id}")
    _check_not_pending(meta)
    outcome = end_txn_outcome(meta.state, commit, kind)
    if outcome is EndOutcome.NONE:
        return Decision(None, meta.producer_id, meta.producer_epoch)
    if outcome is not EndOutcome.BUMP:
        where = f"{meta.transactional_id}: {'commit' if commit else 'abort'} in {meta.state.name}"
        if outcome is EndOutcome.FENCED:
            raise ProducerFencedError(f"{where} at epoch {producer_epoch}")
        if outcome is EndOutcome.INVALID_STATE:
            raise InvalidTxnStateError(where)
        raise ConcurrentTransactionsError(f"{where}: still completing")
    next_producer_id = (
        new_producer_id() if is_epoch_exhausted(meta.producer_epoch) else NO_PRODUCER_ID
    )
    state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
    target = meta.prepare_end(state, TRANSACTION_VERSION_EPOCH_BUMP, next_producer_id, now_ms)
    return Decision(target, *target.answer())


# --- EndTxn under transactions V0/V1 (§3.6; the clients that speak EndTxn below v5) ----------

# (state, commit?) -> outcome for the current producer at its current epoch: the end keeps the
# epoch, so a retry looks like the call itself. Kafka's endTransactionWithTV1, as
# docs/coordinator.md §3.6 tabulates it; PrepareEpochFence is never seen here (a fence is
# replaced by its abort under the id's lock).
END_TXN_TV1: Final[Mapping[tuple[TransactionState, bool], EndOutcome]] = MappingProxyType(
    {
        (S.ONGOING, True): _E,  # "BUMP" to the Prepare* state; the epoch stays (prepare_end)
        (S.ONGOING, False): _E,
        (S.COMPLETE_COMMIT, True): _N,
        (S.COMPLETE_ABORT, False): _N,
        (S.COMPLETE_COMMIT, False): _ITS,
        (S.COMPLETE_ABORT, True): _ITS,
        (S.PREPARE_COMMIT, True): _CT,
        (S.PREPARE_ABORT, False): _CT,
        (S.PREPARE_COMMIT, False): _ITS,
        (S.PREPARE_ABORT, True): _ITS,
        (S.EMPTY, True): _ITS,
        (S.EMPTY, False): _ITS,
    }
)


def decide_end_txn_v1(
    meta: TransactionMetadata,
    *,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    client_transaction_version: int,
    now_ms: int,
) -> Decision:
    """An EndTxn below v5 (transactions v0/v1): checks in Kafka's order, the producer id
    (InvalidProducerIdMappingError), the epoch (ProducerFencedError), a pending transition
    (ConcurrentTransactionsError), then the END_TXN_TV1 row. The end keeps the epoch: the
    client, which never learns a new one, goes on with the same producer id and epoch."""
    _check_live_state(meta)
    if producer_id != meta.producer_id:
        raise InvalidProducerIdMappingError(f"{meta.transactional_id}: producer {producer_id}")
    if producer_epoch != meta.producer_epoch:
        raise ProducerFencedError(
            f"{meta.transactional_id}: epoch {producer_epoch} is not {meta.producer_epoch}"
        )
    _check_not_pending(meta)
    outcome = END_TXN_TV1[(meta.state, commit)]
    if outcome is EndOutcome.NONE:
        return Decision(None, meta.producer_id, meta.producer_epoch)
    if outcome is not EndOutcome.BUMP:
        where = f"{meta.transactional_id}: {'commit' if commit else 'abort'} in {meta.state.name}"
        if outcome is EndOutcome.INVALID_STATE:
            raise InvalidTxnStateError(where)
        raise ConcurrentTransactionsError(f"{where}: still completing")
    state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
    target = meta.prepare_end(state, client_transaction_version, NO_PRODUCER_ID, now_ms)
    return Decision(target, target.producer_id, target.producer_epoch)


def is_own_decided_end(
    meta: TransactionMetadata,
    *,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    client_transaction_version: int = TRANSACTION_VERSION_EPOCH_BUMP,
) -> bool:
    """Whether the end left in Prepare* is the one this EndTxn asks for, decided by an
    earlier attempt of the same call: the matching Prepare* at the epoch after the
    request's (a RETRY, §3.6), or at the request's own epoch for a v0/v1 EndTxn."""
    wanted = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
    if client_transaction_version < TRANSACTION_VERSION_EPOCH_BUMP:
        return (
            meta.state is wanted
            and meta.producer_id == producer_id
            and meta.producer_epoch == producer_epoch
        )
    return meta.state is wanted and epoch_kind(meta, producer_id, producer_epoch) is EpochKind.RETRY


def decided_end_failed(error: KafkaStorageError, *, commit: bool) -> KafkaStorageError:
    """The error EndTxn raises when its Prepare* is durable but a marker could not be
    written (§3.6, F6): the outcome is the decision, so the error is retriable and the same
    call, repeated, completes the end once the markers can be written (Kafka's client
    retries such an EndTxn itself, then raises a TimeoutException after which only the same
    call may be made)."""
    what = "commit" if commit else "abort"
    return KafkaStorageError(
        KafkaError(
            error.error.code(),
            f"the {what} is decided but not complete ({error.error.str()}); "
            f"retry {what}_transaction()",
            retriable=True,
        )
    )
