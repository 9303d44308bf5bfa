"""The coordinator's state machine (docs/coordinator.md §1): the states, the table of legal moves
walked pair by pair, and the two-phase prepare -> complete of TransactionMetadata with the
completion invariants of §1.2 step 3."""

from __future__ import annotations

import itertools

import pytest

from eoslog.coordinator.transaction_metadata import TransactionMetadata, log_value_of
from eoslog.coordinator.transaction_state import (
    LEGAL_TRANSITIONS,
    IllegalTransitionError,
    TransactionState,
    TransitionTarget,
)
from tests.support.txn_helpers import (
    EPOCH,
    NOW_MS,
    PARTITIONS,
    PID,
    START_MS,
    meta_in,
    persist_and_complete,
)

S = TransactionState


def test_state_ids_names_and_expiration_match_kafka() -> None:
    assert [(s.value, s.kafka_name, s.expiration_allowed) for s in S] == [
        (0, "Empty", True),
        (1, "Ongoing", False),
        (2, "PrepareCommit", False),
        (3, "PrepareAbort", False),
        (4, "CompleteCommit", True),
        (5, "CompleteAbort", True),
        (6, "Dead", False),
        (7, "PrepareEpochFence", False),
    ]


def test_the_empty_abort_rows_are_the_only_ones_that_need_transactions_v2() -> None:
    needs_tv2 = {pair for pair, version in LEGAL_TRANSITIONS.items() if version == 2}
    assert needs_tv2 == {
        (S.EMPTY, S.PREPARE_ABORT),
        (S.COMPLETE_COMMIT, S.PREPARE_ABORT),
        (S.COMPLETE_ABORT, S.PREPARE_ABORT),
    }


@pytest.mark.parametrize("tv", [0, 1, 2])
@pytest.mark.parametrize(
    ("current", "target"), list(itertools.product(S, S)), ids=lambda s: s.kafka_name
)
def test_prepare_succeeds_exactly_for_the_legal_transitions_and_changes_nothing_otherwise(
    current: TransactionState, target: TransactionState, tv: int
) -> None:
    meta = meta_in(current, tv=tv)
    before = meta.current()
    wanted = meta.target(target, client_transaction_version=tv)
    minimum = LEGAL_TRANSITIONS.get((current, target))
    if minimum is not None and tv >= minimum:
        assert meta.prepare_transition(wanted) is wanted
        assert meta.pending_state is target
        assert meta.current() == before  # nothing applies before completion
    else:
        with pytest.raises(IllegalTransitionError, match="not a legal transition"):
            meta.prepare_transition(wanted)
        assert meta.pending is None and meta.current() == before


def test_a_second_prepare_while_one_is_pending_is_refused() -> None:
    meta = meta_in(S.ONGOING)
    first = meta.prepare_add_partitions([("u", 0)], NOW_MS, 2)
    with pytest.raises(IllegalTransitionError, match="Ongoing is pending"):
        meta.prepare_transition(meta.target(S.PREPARE_COMMIT))
    assert meta.pending is first


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"producer_id": -1}, "producer id -1"),
        ({"producer_epoch": -1}, "producer epoch -1"),
        ({"producer_epoch": 32768}, "producer epoch 32768"),
    ],
)
def test_prepare_refuses_an_impossible_producer(changes: dict[str, int], message: str) -> None:
    meta = meta_in(S.EMPTY)
    with pytest.raises(IllegalTransitionError, match=message):
        meta.prepare_transition(meta.target(S.EMPTY, **changes))
    assert meta.pending is None


def test_only_dead_may_carry_no_epoch() -> None:
    meta = meta_in(S.EMPTY, epoch=-1)
    assert meta.prepare_dead().producer_epoch == -1


def test_abandon_clears_the_pending_transition_and_nothing_else() -> None:
    meta = meta_in(S.ONGOING)
    before = meta.current()
    meta.prepare_end(S.PREPARE_COMMIT, 2, -1, NOW_MS)
    meta.abandon_transition()
    assert meta.pending is None and meta.current() == before
    meta.abandon_transition()  # a no-op when nothing is pending


def test_complete_refuses_a_target_that_is_not_pending() -> None:
    meta = meta_in(S.ONGOING)
    with pytest.raises(IllegalTransitionError, match="not pending"):
        meta.complete_transition(meta.target(S.PREPARE_COMMIT))
    pending = meta.prepare_end(S.PREPARE_COMMIT, 2, -1, NOW_MS)
    with pytest.raises(IllegalTransitionError, match="not pending"):
        meta.complete_transition(pending._replace(txn_timeout_ms=1))


# --- completion invariants (§1.2 step 3) ----------------------------------------------------

# (current state, target state, changes from the present values, expected problem). Each
# target passes the table, so prepare accepts it; completion must refuse it.
BUMPED = {"producer_epoch": EPOCH + 1, "last_producer_epoch": EPOCH}
BROKEN_COMPLETIONS = [
    (S.COMPLETE_COMMIT, S.EMPTY, {"producer_epoch": EPOCH + 2}, "epoch must stay"),
    (S.COMPLETE_COMMIT, S.EMPTY, {"producer_epoch": 0}, "epoch must stay"),  # same id at 0
    (S.EMPTY, S.EMPTY, {"partitions": PARTITIONS}, "no partitions"),
    (S.EMPTY, S.EMPTY, {"txn_start_timestamp_ms": 1}, "no start"),
    (S.ONGOING, S.ONGOING, {"producer_epoch": EPOCH + 1}, "epoch must not change"),
    (S.ONGOING, S.ONGOING, {"producer_id": PID + 1}, "producer id must not change"),
    (S.ONGOING, S.ONGOING, {"partitions": frozenset({("t", 0)})}, "only be added"),
    (S.ONGOING, S.ONGOING, {"txn_timeout_ms": 1}, "timeout must not change"),
    (S.ONGOING, S.PREPARE_COMMIT, {}, "bumped by one"),  # TV2 without the bump
    (S.ONGOING, S.PREPARE_COMMIT, {"producer_epoch": EPOCH + 1}, "bumped by one"),  # no last
    (S.ONGOING, S.PREPARE_ABORT, {"client_transaction_version": 0, "producer_epoch": 6}, "kept"),
    (S.ONGOING, S.PREPARE_ABORT, {"producer_id": PID + 1}, "producer id must not change"),
    (S.ONGOING, S.PREPARE_COMMIT, {**BUMPED, "partitions": frozenset()}, "partitions must not"),
    (S.ONGOING, S.PREPARE_COMMIT, {**BUMPED, "txn_start_timestamp_ms": 1}, "start time"),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT, {"producer_epoch": EPOCH + 1}, "kept, or rotated"),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT, {"producer_id": 99, "producer_epoch": 0}, "rotated"),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT, {"txn_start_timestamp_ms": -1}, "needs a start time"),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT, {"txn_timeout_ms": 1}, "timeout must not change"),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT, {}, "no partitions"),  # partitions left in place
    (S.ONGOING, S.PREPARE_EPOCH_FENCE, {"producer_epoch": EPOCH + 1}, "never completed"),
    (S.EMPTY, S.DEAD, {}, "never completed"),
]


@pytest.mark.parametrize(("current", "target", "changes", "problem"), BROKEN_COMPLETIONS)
def test_complete_enforces_the_invariants_and_changes_nothing_when_they_break(
    current: TransactionState, target: TransactionState, changes: dict[str, object], problem: str
) -> None:
    meta = meta_in(current)
    before = meta.current()
    bad = meta.prepare_transition(meta.target(target, **changes))  # type: ignore[arg-type]
    with pytest.raises(IllegalTransitionError, match=problem):
        meta.complete_transition(bad)
    assert meta.current() == before and meta.pending is bad


def test_a_tv2_prepare_keeps_the_old_epoch_as_the_last_epoch() -> None:
    meta = meta_in(S.ONGOING)
    target = meta.prepare_end(S.PREPARE_ABORT, 2, -1, NOW_MS)
    assert (target.producer_epoch, target.last_producer_epoch) == (EPOCH + 1, EPOCH)
    persist_and_complete(meta, target)


def test_a_tv1_prepare_keeps_the_epoch() -> None:
    meta = meta_in(S.ONGOING, tv=0)
    target = meta.prepare_end(S.PREPARE_COMMIT, 0, -1, NOW_MS)
    assert target.producer_epoch == EPOCH
    persist_and_complete(meta, target)


def test_an_empty_abort_takes_the_update_time_as_its_start() -> None:
    meta = meta_in(S.COMPLETE_COMMIT)
    target = meta.prepare_end(S.PREPARE_ABORT, 2, -1, NOW_MS)
    assert target.txn_start_timestamp_ms == NOW_MS and not target.partitions
    persist_and_complete(meta, target)
    persist_and_complete(meta, meta.prepare_complete(NOW_MS + 1))
    assert meta.state is S.COMPLETE_ABORT and meta.producer_epoch == EPOCH + 1


def test_an_overflowing_completion_moves_to_the_next_producer_id_at_epoch_0() -> None:
    meta = meta_in(S.ONGOING, epoch=32766)
    persist_and_complete(meta, meta.prepare_end(S.PREPARE_COMMIT, 2, 99, NOW_MS))
    assert (meta.producer_id, meta.producer_epoch, meta.next_producer_id) == (PID, 32767, 99)
    target = meta.prepare_complete(NOW_MS)
    assert (target.producer_id, target.producer_epoch) == (99, 0)
    assert (target.previous_producer_id, target.next_producer_id) == (PID, -1)
    assert target.last_producer_epoch == 32766  # the last epoch the client saw
    persist_and_complete(meta, target)


def test_a_transaction_lives_through_init_add_commit_and_complete() -> None:
    meta = TransactionMetadata("txn", PID, txn_timeout_ms=60_000, txn_last_update_timestamp_ms=0)
    persist_and_complete(meta, meta.prepare_epoch_bump(60_000, None, 1))
    persist_and_complete(meta, meta.prepare_add_partitions([("t", 0)], 2, 2))
    persist_and_complete(meta, meta.prepare_add_partitions([("u", 3)], 3, 2))
    assert meta.txn_start_timestamp_ms == 2  # set by the first add only
    persist_and_complete(meta, meta.prepare_end(S.PREPARE_COMMIT, 2, -1, 4))
    persist_and_complete(meta, meta.prepare_complete(5))
    assert (meta.state, meta.producer_epoch, meta.partitions) == (S.COMPLETE_COMMIT, 1, set())
    assert meta.txn_start_timestamp_ms == 2 and meta.txn_last_update_timestamp_ms == 5


def test_prepare_complete_and_rotation_refuse_the_wrong_states() -> None:
    with pytest.raises(IllegalTransitionError, match="nothing to complete"):
        meta_in(S.ONGOING).prepare_complete(NOW_MS)
    with pytest.raises(IllegalTransitionError, match="rotation while open"):
        meta_in(S.ONGOING).prepare_producer_id_rotation(99, 1, NOW_MS, False)
    with pytest.raises(IllegalTransitionError, match="prepare_end to Ongoing"):
        meta_in(S.ONGOING).prepare_end(S.ONGOING, 2, -1, NOW_MS)
    with pytest.raises(IllegalTransitionError, match="no epoch fence"):
        meta_in(S.ONGOING).prepare_fence_abort(-1, NOW_MS)


def test_the_fence_is_pending_only_and_is_replaced_by_its_abort() -> None:
    meta = meta_in(S.ONGOING)
    fence = meta.prepare_epoch_fence()
    assert (fence.state, fence.producer_epoch) == (S.PREPARE_EPOCH_FENCE, EPOCH + 1)
    abort = meta.prepare_fence_abort(-1, NOW_MS)
    assert meta.pending is abort
    assert (abort.state, abort.producer_epoch, abort.last_producer_epoch) == (
        S.PREPARE_ABORT,
        EPOCH + 1,
        EPOCH,
    )
    assert abort.partitions == PARTITIONS and abort.txn_start_timestamp_ms == START_MS
    persist_and_complete(meta, abort)


def test_dead_and_the_fence_are_never_persisted() -> None:
    meta = meta_in(S.EMPTY)
    target = meta.prepare_dead()
    with pytest.raises(IllegalTransitionError, match="never persisted"):
        log_value_of(target)
    with pytest.raises(IllegalTransitionError, match="never persisted"):
        log_value_of(target._replace(state=S.PREPARE_EPOCH_FENCE))


def test_loading_forgets_the_last_epoch_as_kafka_does() -> None:
    meta = meta_in(S.COMPLETE_ABORT)
    target = meta.prepare_epoch_bump(60_000, EPOCH, NOW_MS)
    assert target.last_producer_epoch == EPOCH
    persist_and_complete(meta, target)  # checks the loaded copy has last epoch -1


def test_targets_are_immutable() -> None:
    target: TransitionTarget = meta_in(S.EMPTY).current()
    with pytest.raises(AttributeError):
        target.producer_epoch = 1  # type: ignore[misc]
