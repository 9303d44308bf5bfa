"""The transaction coordinator's states and the rules for moving between them (docs/coordinator.md
§1).

`TransactionState` carries Kafka's state ids (the byte in `__transaction_state`);
`LEGAL_TRANSITIONS` is the table of allowed moves, as data (docs/style.md rule 10);
`TransitionTarget` is an immutable description of a transition (Kafka's TxnTransitMetadata);
`completion_problem` holds the invariants a transition must keep when it is applied (§1.2
step 3). TransactionMetadata (transaction_metadata.py) uses all four.

Everything here is immutable and thread-safe. A move the table or the invariants forbid is our
bug (docs/style.md rule 3), raised as IllegalTransitionError and never sent to a client.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final, NamedTuple, Protocol

from eoslog import limits
from eoslog.coordinator.transaction_log import NO_PRODUCER_ID

# A partition as a plain (topic, partition) tuple, the key of per-partition maps; not the
# client's eoslog.TopicPartition class, which also carries an offset.
PartitionKey = tuple[str, int]

# The client transaction version (TransactionVersion feature level) from which every
# transaction end bumps the epoch (KIP-890 part 2, docs/coordinator.md §9.3).
TRANSACTION_VERSION_EPOCH_BUMP: Final = 2
NO_TIMESTAMP: Final = -1


class IllegalTransitionError(RuntimeError):
    """A transition the table or the invariants forbid: a coordinator bug (Kafka's
    IllegalStateException), never a client error."""


class TransactionState(enum.IntEnum):
    """Kafka's states, valued by the id byte stored in `__transaction_state` (§1.1)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions reports: "Empty", "PrepareCommit", ..."""
        return "".join(word.capitalize() for word in self.name.split("_"))

    @property
    def expiration_allowed(self) -> bool:
        """Whether an idle transactional id in this state may expire (§4.3)."""
        return self in EXPIRATION_ALLOWED


S = TransactionState
EXPIRATION_ALLOWED: Final = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})

# (current state, target state) -> the lowest client transaction version that may make the
# move (§1.1). The rows marked TV2 are the "empty abort" of KIP-890, which Kafka's
# TransactionState.PREPARE_ABORT lists unconditionally but only a TV2 EndTxn ever takes.
LEGAL_TRANSITIONS: Final[Mapping[tuple[TransactionState, TransactionState], int]] = (
    MappingProxyType(
        {
            (S.EMPTY, S.EMPTY): 0,
            (S.COMPLETE_COMMIT, S.EMPTY): 0,
            (S.COMPLETE_ABORT, S.EMPTY): 0,
            (S.ONGOING, S.ONGOING): 0,
            (S.EMPTY, S.ONGOING): 0,
            (S.COMPLETE_COMMIT, S.ONGOING): 0,
            (S.COMPLETE_ABORT, S.ONGOING): 0,
            (S.ONGOING, S.PREPARE_COMMIT): 0,
            (S.ONGOING, S.PREPARE_ABORT): 0,
            (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT): 0,
            (S.EMPTY, S.PREPARE_ABORT): TRANSACTION_VERSION_EPOCH_BUMP,
            (S.COMPLETE_COMMIT, S.PREPARE_ABORT): TRANSACTION_VERSION_EPOCH_BUMP,
            (S.COMPLETE_ABORT, S.PREPARE_ABORT): TRANSACTION_VERSION_EPOCH_BUMP,
            (S.PREPARE_COMMIT, S.COMPLETE_COMMIT): 0,
            (S.PREPARE_ABORT, S.COMPLETE_ABORT): 0,
            (S.EMPTY, S.DEAD): 0,
            (S.COMPLETE_COMMIT, S.DEAD): 0,
            (S.COMPLETE_ABORT, S.DEAD): 0,
            (S.ONGOING, S.PREPARE_EPOCH_FENCE): 0,
        }
    )
)


def transition_allowed(
    current: TransactionState, target: TransactionState, client_transaction_version: int
) -> bool:
    """Whether the table allows current -> target for a client at this version."""
    try:  # a subscript, not get(): no call (three per transaction)
        return client_transaction_version >= LEGAL_TRANSITIONS[(current, target)]
    except KeyError:
        return False


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka stops handing out epochs at Short.MAX_VALUE - 1 (§3.2)."""
    return epoch >= limits.producer_epoch_max - 1


class TransitionTarget(NamedTuple):
    """Everything a transition sets: what is persisted, plus `last_producer_epoch` (which
    the log does not carry) and the state. Immutable (Kafka's TxnTransitMetadata); a
    NamedTuple rather than a frozen dataclass, whose construction (a checked set per field)
    cost a microsecond, three times per transaction."""

    state: TransactionState
    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    partitions: frozenset[PartitionKey]
    txn_start_timestamp_ms: int
    txn_last_update_timestamp_ms: int
    client_transaction_version: int

    def answer(self) -> tuple[int, int]:
        """The (producer id, epoch) a client uses after this transition completes: under
        TV2 an overflowing end moves to next_producer_id with epoch 0 (§3.6)."""
        if self.next_producer_id != NO_PRODUCER_ID:
            return self.next_producer_id, 0
        return self.producer_id, self.producer_epoch


class TransactionValues(Protocol):
    """What the invariants read of the present values: a TransitionTarget, or the
    TransactionMetadata itself (whose fields carry the same names)."""

    @property
    def state(self) -> TransactionState: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def next_producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def txn_timeout_ms(self) -> int: ...
    @property
    def partitions(self) -> frozenset[PartitionKey]: ...
    @property
    def txn_start_timestamp_ms(self) -> int: ...


# --- completion invariants (§1.2 step 3) ------------------------------------------------------


def completion_problem(current: TransactionValues, target: TransitionTarget) -> str:
    """What is wrong with applying `target` to metadata whose present values are `current`,
    or "" if nothing is (§1.2 step 3)."""
    try:  # a subscript, not get(): no call (three per transaction)
        problems = COMPLETION_PROBLEMS[target.state]
    except KeyError:
        return "Dead and PrepareEpochFence are never completed"
    return problems(current, target)


# One function per target state, each returning its first broken invariant ("" if none), in
# the order the rows read: one call per completion, which runs three times per transaction.


def _empty_problem(current: TransactionValues, target: TransitionTarget) -> str:
    new_id_at_zero = target.producer_epoch == 0 and target.producer_id != current.producer_id
    kept_or_bumped = target.producer_epoch in (current.producer_epoch, current.producer_epoch + 1)
    if not (new_id_at_zero or (kept_or_bumped and target.producer_id == current.producer_id)):
        return "the epoch must stay, rise by one, or be 0 for a new id"
    if target.partitions:
        return "an Empty transaction has no partitions"
    if target.txn_start_timestamp_ms != NO_TIMESTAMP:
        return "Empty has no start"
    return ""


def _ongoing_problem(current: TransactionValues, target: TransitionTarget) -> str:
    if target.producer_id != current.producer_id:
        return "the producer id must not change"
    if target.producer_epoch != current.producer_epoch:
        return "the epoch must not change"
    if not current.partitions <= target.partitions:
        return "partitions may only be added"
    if target.txn_timeout_ms != current.txn_timeout_ms:
        return "the timeout must not change"
    return ""


def _prepare_problem(current: TransactionValues, target: TransitionTarget) -> str:
    if target.producer_id != current.producer_id:
        return "the producer id must not change"
    if target.client_transaction_version >= TRANSACTION_VERSION_EPOCH_BUMP:
        # TV2 bumps at every end: the previous epoch moves to last_producer_epoch.
        epoch_ok = (
            target.last_producer_epoch == current.producer_epoch
            and target.producer_epoch == current.producer_epoch + 1
        )
    else:
        epoch_ok = target.producer_epoch == current.producer_epoch
    if not epoch_ok:
        return "the epoch must be kept (TV0/1) or bumped by one (TV2)"
    if target.partitions != current.partitions:
        return "the partitions must not change"
    if target.txn_timeout_ms != current.txn_timeout_ms:
        return "the timeout must not change"
    # A TV2 empty abort (from Empty or Complete*) has no start yet and takes the update time.
    if target.txn_start_timestamp_ms != current.txn_start_timestamp_ms and (
        current.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        or target.txn_start_timestamp_ms == NO_TIMESTAMP
    ):
        return "the start time must not change"
    return ""


def _complete_problem(current: TransactionValues, target: TransitionTarget) -> str:
    if target.producer_id != current.producer_id:
        # A TV2 overflow: the Prepare record's next_producer_id takes over at epoch 0.
        epoch_ok = (
            target.client_transaction_version >= TRANSACTION_VERSION_EPOCH_BUMP
            and target.producer_id == current.next_producer_id
            and target.producer_epoch == 0
            and target.previous_producer_id == current.producer_id
        )
    else:
        epoch_ok = target.producer_epoch == current.producer_epoch
    if not epoch_ok:
        return "the producer must be kept, or rotated to next_producer_id at 0"
    if target.txn_timeout_ms != current.txn_timeout_ms:
        return "the timeout must not change"
    if target.txn_start_timestamp_ms == NO_TIMESTAMP:
        return "a completion needs a start time"
    if target.partitions:
        return "a completed transaction has no partitions"
    return ""


# Target state -> its invariants. Dead and PrepareEpochFence have no row: completing either is
# always a bug.
COMPLETION_PROBLEMS: Final[
    Mapping[TransactionState, Callable[[TransactionValues, TransitionTarget], str]]
] = MappingProxyType(
    {
        S.EMPTY: _empty_problem,
        S.ONGOING: _ongoing_problem,
        S.PREPARE_COMMIT: _prepare_problem,
        S.PREPARE_ABORT: _prepare_problem,
        S.COMPLETE_COMMIT: _complete_problem,
        S.COMPLETE_ABORT: _complete_problem,
    }
)
