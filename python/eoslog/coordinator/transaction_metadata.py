"""The coordinator's metadata for one transactional id, changed in two phases (docs/coordinator.md
§1.2; docs/style.md rule 9), as Kafka's TransactionMetadata is:

1. a `prepare_*` method builds an immutable TransitionTarget, checks it against the table and
   the basic invariants, and records it as the pending transition. A failed check raises and
   leaves the metadata as it was;
2. the caller appends `log_value_of(target)` to `__transaction_state` under the
   transactional id's key; then
3. `complete_transition(target)` re-checks the invariants for the target state and applies it.
   If the append failed, `abandon_transition()` clears the pending transition instead.

Thread safety: none inside. The coordinator calls every method of one TransactionMetadata
under that transactional id's lock, from prepare through complete or abandon, and reads its
fields only under that lock.

Errors: IllegalTransitionError for a move the table or the invariants forbid (our bug);
ProducerFencedError from prepare_epoch_bump (a client's stale epoch); nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from eoslog import limits
from eoslog.coordinator.transaction_log import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartitions,
    TransactionLogValue,
    encode_partitions_v1,
    encode_value_v1,
)
from eoslog.coordinator.transaction_state import (
    NO_TIMESTAMP,
    TRANSACTION_VERSION_EPOCH_BUMP,
    IllegalTransitionError,
    PartitionKey,
    TransactionState,
    TransitionTarget,
    completion_problem,
    is_epoch_exhausted,
    transition_allowed,
)
from eoslog.errors import CorruptTransactionLogError, ProducerFencedError

S = TransactionState
_new_tuple = tuple.__new__
# States with no transaction open: InitProducerId may re-initialise, a TV2 abort is "empty".
_AT_REST = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


class TransactionMetadata:
    """The coordinator's view of one transactional id. Not thread-safe: see the module."""

    __slots__ = (
        "client_transaction_version",
        "last_producer_epoch",
        "next_producer_id",
        "partitions",
        "pending",
        "previous_producer_id",
        "producer_epoch",
        "producer_id",
        "state",
        "transactional_id",
        "txn_last_update_timestamp_ms",
        "txn_start_timestamp_ms",
        "txn_timeout_ms",
    )

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        *,
        txn_timeout_ms: int,
        txn_last_update_timestamp_ms: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        last_producer_epoch: int = NO_PRODUCER_EPOCH,
        previous_producer_id: int = NO_PRODUCER_ID,
        next_producer_id: int = NO_PRODUCER_ID,
        state: TransactionState = TransactionState.EMPTY,
        partitions: Iterable[PartitionKey] = (),
        txn_start_timestamp_ms: int = NO_TIMESTAMP,
        client_transaction_version: int = 0,
    ) -> None:
        """Defaults describe an id InitProducerId has just met: epoch -1, Empty (§3.2 step 6)."""
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.previous_producer_id = previous_producer_id
        self.next_producer_id = next_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.partitions: frozenset[PartitionKey] = frozenset(partitions)
        self.txn_start_timestamp_ms = txn_start_timestamp_ms
        self.txn_last_update_timestamp_ms = txn_last_update_timestamp_ms
        self.client_transaction_version = client_transaction_version
        self.pending: TransitionTarget | None = None

    def __repr__(self) -> str:
        return f"TransactionMetadata({self.transactional_id!r}, {self.current()}, {self.pending})"

    @property
    def pending_state(self) -> TransactionState | None:
        return None if self.pending is None else self.pending.state

    def current(self) -> TransitionTarget:
        """The present values, as a TransitionTarget (nothing is prepared)."""
        return TransitionTarget(
            self.state,
            self.producer_id,
            self.previous_producer_id,
            self.next_producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            self.partitions,
            self.txn_start_timestamp_ms,
            self.txn_last_update_timestamp_ms,
            self.client_transaction_version,
        )

    def target(
        self,
        state: TransactionState,
        *,
        producer_id: int | None = None,
        previous_producer_id: int | None = None,
        next_producer_id: int | None = None,
        producer_epoch: int | None = None,
        last_producer_epoch: int | None = None,
        txn_timeout_ms: int | None = None,
        partitions: frozenset[PartitionKey] | None = None,
        txn_start_timestamp_ms: int | None = None,
        txn_last_update_timestamp_ms: int | None = None,
        client_transaction_version: int | None = None,
    ) -> TransitionTarget:
        """A target that keeps every present value but those given (None: keep). Like
        Kafka, every transition records the present producer id as the previous one."""
        # Keyword arguments, not **changes and a lookup per field, and tuple.__new__, not the
        # NamedTuple's Python-level __new__: this runs three times per transaction
        # (bench/txn_bench.py --profile).
        return _new_tuple(
            TransitionTarget,
            (
                state,
                self.producer_id if producer_id is None else producer_id,
                self.producer_id if previous_producer_id is None else previous_producer_id,
                self.next_producer_id if next_producer_id is None else next_producer_id,
                self.producer_epoch if producer_epoch is None else producer_epoch,
                self.last_producer_epoch if last_producer_epoch is None else last_producer_epoch,
                self.txn_timeout_ms if txn_timeout_ms is None else txn_timeout_ms,
                self.partitions if partitions is None else partitions,
                self.txn_start_timestamp_ms
                if txn_start_timestamp_ms is None
                else txn_start_timestamp_ms,
                self.txn_last_update_timestamp_ms
                if txn_last_update_timestamp_ms is None
                else txn_last_update_timestamp_ms,
                self.client_transaction_version
                if client_transaction_version is None
                else client_transaction_version,
            ),
        )

    # --- the two phases -------------------------------------------------------------------

    def prepare_transition(self, target: TransitionTarget) -> TransitionTarget:
        """Phase 1: check `target` and make it the pending transition (§1.2 step 1).

        IllegalTransitionError, changing nothing, if a transition is already pending, the
        producer id is negative, the epoch is out of range (negative is allowed only for
        Dead), or the table does not allow the move."""
        if self.pending is not None:
            raise IllegalTransitionError(
                f"{self.transactional_id}: preparing {target.state.kafka_name} while "
                f"{self.pending.state.kafka_name} is pending"
            )
        self._check_target(target, self.state)
        self.pending = target
        return target

    def replace_pending_fence(self, target: TransitionTarget) -> TransitionTarget:
        """Swap a pending PrepareEpochFence for the PrepareAbort that carries it out (§1.3:
        the fence is a pending marker only, never persisted). IllegalTransitionError, changing
        nothing, if no fence is pending or the table does not allow the move."""
        if self.pending_state is not TransactionState.PREPARE_EPOCH_FENCE:
            raise IllegalTransitionError(f"{self.transactional_id}: no epoch fence is pending")
        self._check_target(target, TransactionState.PREPARE_EPOCH_FENCE)
        self.pending = target
        return target

    def complete_transition(self, target: TransitionTarget) -> None:
        """Phase 3, once the target's record is durable: re-check the invariants for the
        target state (§1.2 step 3) and apply it. IllegalTransitionError, changing nothing,
        if `target` is not the pending transition or breaks an invariant."""
        if self.pending is None or self.pending is not target:
            raise IllegalTransitionError(
                f"{self.transactional_id}: completing a transition that is not pending"
            )
        # The metadata itself stands for its present values (no current() copy).
        problem = completion_problem(self, target)
        if problem:
            raise IllegalTransitionError(
                f"{self.transactional_id}: {self.state.kafka_name} -> "
                f"{target.state.kafka_name}: {problem}"
            )
        self._apply(target)

    def abandon_transition(self) -> None:
        """Drop the pending transition after its append failed (§1.2 step 4). A no-op when
        nothing is pending."""
        self.pending = None

    # --- the transitions, each a prepare (§1.3) -------------------------------------------

    def prepare_epoch_bump(
        self, txn_timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TransitionTarget:
        """InitProducerId on Empty or Complete*: Empty with the epoch bumped (§3.2 step 7).

        No expected epoch: a new instance, +1, last epoch -1. The current epoch (or none yet):
        the same producer after an error, +1, last epoch = current. The last epoch: a retry of
        a bump that succeeded, so nothing is bumped again. Anything else: ProducerFencedError.
        An exhausted epoch is never bumped: the caller rotates the producer id instead."""
        current = self.producer_epoch
        if expected_epoch is None:
            epoch, last = current + 1, NO_PRODUCER_EPOCH
        elif current == NO_PRODUCER_EPOCH or expected_epoch == current:
            epoch, last = current + 1, current
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = current, self.last_producer_epoch
        else:
            raise ProducerFencedError(
                f"{self.transactional_id}: epoch {expected_epoch} is neither the current "
                f"epoch {current} nor the last one {self.last_producer_epoch}"
            )
        if epoch != current and is_epoch_exhausted(current):
            raise IllegalTransitionError(f"{self.transactional_id}: epoch {current} exhausted")
        return self.prepare_transition(
            self._rest_target(self.producer_id, epoch, last, txn_timeout_ms, now_ms)
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, txn_timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TransitionTarget:
        """InitProducerId on an exhausted epoch: Empty under a new producer id at epoch 0. The
        last epoch is the old one when the client named it (so that its retry is known)."""
        if self.state not in _AT_REST:
            raise IllegalTransitionError(f"{self.transactional_id}: rotation while open")
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self.prepare_transition(
            self._rest_target(new_producer_id, 0, last, txn_timeout_ms, now_ms)
        )

    def prepare_add_partitions(
        self, partitions: Iterable[PartitionKey], now_ms: int, client_transaction_version: int
    ) -> TransitionTarget:
        """Ongoing with `partitions` added. The transaction starts now if none was open."""
        start = now_ms if self.state in _AT_REST else self.txn_start_timestamp_ms
        return self.prepare_transition(
            self.target(
                S.ONGOING,
                partitions=self.partitions | frozenset(partitions),
                txn_start_timestamp_ms=start,
                txn_last_update_timestamp_ms=now_ms,
                client_transaction_version=client_transaction_version,
            )
        )

    def prepare_end(
        self,
        state: TransactionState,
        client_transaction_version: int,
        next_producer_id: int,
        now_ms: int,
    ) -> TransitionTarget:
        """EndTxn: PrepareCommit or PrepareAbort (Kafka's prepareAbortOrCommit). Under TV2 the
        epoch rises by one and the old one becomes the last epoch; `next_producer_id` (or -1)
        is the id the transaction moves to at completion when this bump exhausts the epoch.
        From Empty or Complete* (a TV2 empty abort) the start time is now."""
        if state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalTransitionError(f"prepare_end to {state.kafka_name}")
        epoch, last = self.producer_epoch, self.last_producer_epoch
        if client_transaction_version >= TRANSACTION_VERSION_EPOCH_BUMP:
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        start = now_ms if self.state in _AT_REST else self.txn_start_timestamp_ms
        return self.prepare_transition(
            self.target(
                state,
                producer_epoch=epoch,
                last_producer_epoch=last,
                next_producer_id=next_producer_id,
                txn_start_timestamp_ms=start,
                txn_last_update_timestamp_ms=now_ms,
                client_transaction_version=client_transaction_version,
            )
        )

    def prepare_epoch_fence(self) -> TransitionTarget:
        """The pending-only PrepareEpochFence of an Ongoing transaction, at epoch + 1, to be
        replaced at once by prepare_fence_abort (§1.3). Kafka's hasFailedEpochFence is not
        needed: a failed append leaves no trace here, so the next fence bumps from the same
        epoch and reaches the same value."""
        return self.prepare_transition(
            self.target(S.PREPARE_EPOCH_FENCE, producer_epoch=self.producer_epoch + 1)
        )

    def prepare_fence_abort(self, next_producer_id: int, now_ms: int) -> TransitionTarget:
        """PrepareAbort carrying the pending fence's epoch: the one bump of a fence (KAFKA-19367
        fixed Kafka's second one). TV2 semantics, the only ones eoslog's coordinator runs:
        the fenced epoch is the current one + 1 and the old one becomes the last epoch.
        `next_producer_id` (or -1) rotates the id at completion if the fence exhausts the
        epoch (KAFKA-20090)."""
        fence = self.pending
        if fence is None or fence.state is not S.PREPARE_EPOCH_FENCE:
            raise IllegalTransitionError(f"{self.transactional_id}: no epoch fence is pending")
        return self.replace_pending_fence(
            self.target(
                S.PREPARE_ABORT,
                producer_epoch=fence.producer_epoch,
                last_producer_epoch=self.producer_epoch,
                next_producer_id=next_producer_id,
                txn_last_update_timestamp_ms=now_ms,
                client_transaction_version=TRANSACTION_VERSION_EPOCH_BUMP,
            )
        )

    def prepare_complete(self, now_ms: int) -> TransitionTarget:
        """CompleteCommit or CompleteAbort once every marker is written: the partitions are
        cleared and, after a TV2 overflow, next_producer_id takes over at epoch 0."""
        if self.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalTransitionError(f"{self.transactional_id}: nothing to complete")
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        producer_id, epoch = self.producer_id, self.producer_epoch
        rotates = self.client_transaction_version >= TRANSACTION_VERSION_EPOCH_BUMP
        if rotates and self.next_producer_id != NO_PRODUCER_ID:
            producer_id, epoch = self.next_producer_id, 0
        return self.prepare_transition(
            self.target(
                state,
                producer_id=producer_id,
                producer_epoch=epoch,
                next_producer_id=NO_PRODUCER_ID,
                partitions=frozenset(),
                txn_last_update_timestamp_ms=now_ms,
            )
        )

    def prepare_dead(self) -> TransitionTarget:
        """Dead, pending while the expiration tombstone is appended (§4.3). It is never
        completed: after the append the caller drops this metadata from its cache."""
        return self.prepare_transition(self.target(S.DEAD, partitions=frozenset()))

    def _rest_target(
        self, producer_id: int, epoch: int, last_epoch: int, txn_timeout_ms: int, now_ms: int
    ) -> TransitionTarget:
        return self.target(
            S.EMPTY,
            producer_id=producer_id,
            producer_epoch=epoch,
            last_producer_epoch=last_epoch,
            txn_timeout_ms=txn_timeout_ms,
            partitions=frozenset(),
            txn_start_timestamp_ms=NO_TIMESTAMP,
            txn_last_update_timestamp_ms=now_ms,
        )

    def _check_target(self, target: TransitionTarget, current: TransactionState) -> None:
        if target.producer_id < 0:
            raise IllegalTransitionError(f"illegal new producer id {target.producer_id}")
        epoch_min = NO_PRODUCER_EPOCH if target.state is TransactionState.DEAD else 0
        if not epoch_min <= target.producer_epoch <= limits.producer_epoch_max:
            raise IllegalTransitionError(f"illegal new producer epoch {target.producer_epoch}")
        if not transition_allowed(current, target.state, target.client_transaction_version):
            raise IllegalTransitionError(
                f"{self.transactional_id}: {current.kafka_name} -> {target.state.kafka_name} "
                f"is not a legal transition at transaction version "
                f"{target.client_transaction_version}"
            )

    def _apply(self, target: TransitionTarget) -> None:
        self.state = target.state
        self.producer_id = target.producer_id
        self.previous_producer_id = target.previous_producer_id
        self.next_producer_id = target.next_producer_id
        self.producer_epoch = target.producer_epoch
        self.last_producer_epoch = target.last_producer_epoch
        self.txn_timeout_ms = target.txn_timeout_ms
        self.partitions = target.partitions
        self.txn_start_timestamp_ms = target.txn_start_timestamp_ms
        self.txn_last_update_timestamp_ms = target.txn_last_update_timestamp_ms
        self.client_transaction_version = target.client_transaction_version
        self.pending = None


# --- the log record (§2.1) --------------------------------------------------------------------


def log_value_of(target: TransitionTarget) -> TransactionLogValue:
    """The `__transaction_state` value that persists `target`. Partitions are grouped by
    topic, sorted (Kafka's order is a hash map's and carries no meaning); null for Empty."""
    _check_persisted(target)
    partitions = None if target.state is TransactionState.EMPTY else _grouped(target.partitions)
    return TransactionLogValue(
        target.producer_id,
        target.producer_epoch,
        target.txn_timeout_ms,
        int(target.state),
        partitions,
        target.txn_last_update_timestamp_ms,
        target.txn_start_timestamp_ms,
        target.previous_producer_id,
        target.next_producer_id,
        target.client_transaction_version,
    )


def log_value_bytes(target: TransitionTarget) -> bytes:
    """encode_value(log_value_of(target)), the bytes the coordinator persists, made without
    the intermediate value: five calls where that takes ten, three times per transaction."""
    state, partitions = target.state, target.partitions
    if state is TransactionState.EMPTY or state in _NEVER_PERSISTED:
        _check_persisted(target)
        array = _NULL_ARRAY
    elif not partitions:  # Complete*, and an empty abort's Prepare*
        array = _EMPTY_ARRAY
    else:
        last = _last_array
        array = last[1] if last[0] == partitions else _array_of(partitions)
    return encode_value_v1(
        target.producer_id,
        target.producer_epoch,
        target.txn_timeout_ms,
        state,
        array,
        target.txn_last_update_timestamp_ms,
        target.txn_start_timestamp_ms,
        (target.previous_producer_id, target.next_producer_id, target.client_transaction_version),
    )


_NEVER_PERSISTED: Final = frozenset({TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE})
_NULL_ARRAY: Final = encode_partitions_v1(None)
_EMPTY_ARRAY: Final = encode_partitions_v1(())


def _check_persisted(target: TransitionTarget) -> None:
    """IllegalTransitionError for a target no record may carry."""
    if target.state in _NEVER_PERSISTED:
        raise IllegalTransitionError(f"{target.state.kafka_name} is never persisted")
    if target.state is TransactionState.EMPTY and target.partitions:
        raise IllegalTransitionError("an Empty transaction has no partitions")


def _grouped(partitions: frozenset[PartitionKey]) -> tuple[TopicPartitions, ...]:
    """The partitions grouped by topic, both sorted."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return tuple(TopicPartitions(t, tuple(ids)) for t, ids in by_topic.items())


# The partitions array last encoded, (partitions, bytes): a transaction's Ongoing and Prepare*
# records carry the same partitions, and a producer's next transaction usually does too, so
# those records reuse it (comparing frozensets makes no call). Replaced whole, so threads may
# share it.
_last_array: tuple[frozenset[PartitionKey], bytes] = (frozenset(), _EMPTY_ARRAY)


def _array_of(partitions: frozenset[PartitionKey]) -> bytes:
    global _last_array
    array = encode_partitions_v1(_grouped(partitions))
    _last_array = (partitions, array)
    return array


# The states a record may carry, by their id byte: Dead and PrepareEpochFence are never
# written as a finished state (§1.1).
_LOGGED_STATES: Final = {
    state.value: state
    for state in TransactionState
    if state not in (TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE)
}


def logged_state(transactional_id: str, status: int) -> TransactionState:
    """The state a record's status byte names. CorruptTransactionLogError for an id outside
    0..7, or Dead / PrepareEpochFence."""
    state = _LOGGED_STATES.get(status)
    if state is not None:
        return state
    try:
        unwritten = TransactionState(status)
    except ValueError:
        raise CorruptTransactionLogError(
            f"{transactional_id}: unknown transaction state id {status}"
        ) from None
    raise CorruptTransactionLogError(f"{transactional_id}: {unwritten.kafka_name} in the log")


def metadata_from_log(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    """The metadata a loaded value describes. The last epoch is not persisted, so it loads as
    -1 (Kafka's readTxnRecordValue), and Empty's partitions are ignored, as Kafka does.

    CorruptTransactionLogError for a state id outside 0..7, or Dead / PrepareEpochFence,
    which are never written as a finished state (§1.1)."""
    state = logged_state(transactional_id, value.transaction_status)
    partitions: set[PartitionKey] = set()
    if state is not TransactionState.EMPTY:
        for element in value.transaction_partitions or ():
            partitions.update((element.topic, p) for p in element.partition_ids)
    return TransactionMetadata(
        transactional_id,
        value.producer_id,
        txn_timeout_ms=value.transaction_timeout_ms,
        txn_last_update_timestamp_ms=value.transaction_last_update_timestamp_ms,
        producer_epoch=value.producer_epoch,
        previous_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id,
        state=state,
        partitions=partitions,
        txn_start_timestamp_ms=value.transaction_start_timestamp_ms,
        client_transaction_version=value.client_transaction_version,
    )
