"""The coordinator's decisions on one transactional id: InitProducerId (docs/coordinator.md §3.2
step 7), AddPartitionsToTxn (§3.3) and EndTxn under transactions V2 (§3.6), row by row. A
refused request raises the client's error and changes nothing."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from eoslog.coordinator.transaction_decisions import (
    Decision,
    EpochKind,
    check_transaction_timeout,
    decide_add_partitions,
    decide_end_txn,
    decide_init_producer_id,
    epoch_kind,
    fence_ongoing_transaction,
)
from eoslog.coordinator.transaction_metadata import TransactionMetadata
from eoslog.coordinator.transaction_state import IllegalTransitionError, TransactionState
from eoslog.errors import (
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KafkaException,
    ProducerFencedError,
)
from tests.support.txn_helpers import EPOCH, LIVE_STATES, NOW_MS, PID, meta_in, persist_and_complete

S = TransactionState
NEW_PID = 99


def ids_from(*values: int) -> Callable[[], int]:
    pool = iter(values)
    return lambda: next(pool)


def no_new_id() -> int:
    raise AssertionError("no producer id should be allocated")


def init(
    meta: TransactionMetadata,
    expected: tuple[int, int] | None = None,
    new_producer_id: Callable[[], int] = no_new_id,
) -> Decision:
    return decide_init_producer_id(
        meta,
        txn_timeout_ms=60_000,
        expected=expected,
        now_ms=NOW_MS,
        new_producer_id=new_producer_id,
    )


def end(
    meta: TransactionMetadata,
    pid: int,
    epoch: int,
    commit: bool,
    new_producer_id: Callable[[], int] = no_new_id,
) -> Decision:
    return decide_end_txn(
        meta,
        producer_id=pid,
        producer_epoch=epoch,
        commit=commit,
        now_ms=NOW_MS,
        new_producer_id=new_producer_id,
    )


def refused(
    error: type[KafkaException], meta: TransactionMetadata, call: Callable[[], object]
) -> None:
    """`call` raises `error` and leaves `meta` exactly as it was."""
    before, pending = meta.current(), meta.pending
    with pytest.raises(error):
        call()
    assert meta.current() == before and meta.pending == pending


# --- InitProducerId ---------------------------------------------------------------------------


def test_a_new_transactional_id_starts_at_epoch_0() -> None:
    meta = TransactionMetadata("txn", PID, txn_timeout_ms=60_000, txn_last_update_timestamp_ms=0)
    decision = init(meta)
    assert (decision.producer_id, decision.producer_epoch, decision.answer_error) == (PID, 0, None)
    persist_and_complete(meta, decision.persist)
    assert meta.state is S.EMPTY and meta.last_producer_epoch == -1


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_a_new_instance_bumps_the_epoch_and_fences_the_old_one(state: TransactionState) -> None:
    meta = meta_in(state)
    decision = init(meta)
    assert decision.producer_epoch == EPOCH + 1
    persist_and_complete(meta, decision.persist)
    assert (meta.state, meta.last_producer_epoch, meta.partitions) == (S.EMPTY, -1, set())
    refused(ProducerFencedError, meta, lambda: init(meta, (PID, EPOCH)))


def test_the_same_producer_bumps_and_its_retry_of_a_successful_bump_gets_the_same_epoch() -> None:
    meta = meta_in(S.COMPLETE_ABORT)
    first = init(meta, (PID, EPOCH))
    persist_and_complete(meta, first.persist)
    assert (first.producer_epoch, meta.last_producer_epoch) == (EPOCH + 1, EPOCH)
    retry = init(meta, (PID, EPOCH))  # the answer to the first was lost
    assert retry.producer_epoch == EPOCH + 1
    persist_and_complete(meta, retry.persist)
    assert meta.producer_epoch == EPOCH + 1


def test_a_stale_epoch_is_fenced() -> None:
    meta = meta_in(S.EMPTY)
    refused(ProducerFencedError, meta, lambda: init(meta, (PID, EPOCH - 3)))


def test_an_unknown_producer_id_is_fenced_unless_the_id_was_just_created() -> None:
    meta = meta_in(S.EMPTY)
    refused(ProducerFencedError, meta, lambda: init(meta, (PID + 1, EPOCH)))
    fresh = TransactionMetadata("txn", PID, txn_timeout_ms=1, txn_last_update_timestamp_ms=0)
    assert init(fresh, (1234, 17)).producer_epoch == 0  # KIP-360 after expiry


def test_an_exhausted_epoch_rotates_the_producer_id() -> None:
    meta = meta_in(S.COMPLETE_COMMIT, epoch=32766)
    decision = init(meta, (PID, 32766), new_producer_id=ids_from(NEW_PID))
    assert (decision.producer_id, decision.producer_epoch) == (NEW_PID, 0)
    persist_and_complete(meta, decision.persist)
    assert (meta.previous_producer_id, meta.last_producer_epoch) == (PID, 32766)
    # The answer was lost: the retry names the old id at the exhausted epoch.
    retry = init(meta, (PID, 32766))
    assert (retry.producer_id, retry.producer_epoch) == (NEW_PID, 0)


def test_an_exhausted_epoch_without_an_expected_epoch_rotates_and_records_no_last_epoch() -> None:
    meta = meta_in(S.EMPTY, epoch=32766)
    decision = init(meta, new_producer_id=ids_from(NEW_PID))
    persist_and_complete(meta, decision.persist)
    assert (meta.producer_id, meta.producer_epoch, meta.last_producer_epoch) == (NEW_PID, 0, -1)


def test_an_ongoing_transaction_is_fenced_and_aborted_and_the_client_retries() -> None:
    meta = meta_in(S.ONGOING)
    decision = init(meta)
    assert decision.answer_error is ConcurrentTransactionsError
    assert decision.persist is not None and decision.persist.state is S.PREPARE_ABORT
    assert decision.persist.producer_epoch == EPOCH + 1  # one bump (KAFKA-19367)
    persist_and_complete(meta, decision.persist)
    refused(ConcurrentTransactionsError, meta, lambda: init(meta))  # markers in flight
    persist_and_complete(meta, meta.prepare_complete(NOW_MS))
    retry = init(meta)
    assert retry.producer_epoch == EPOCH + 2 and retry.answer_error is None
    persist_and_complete(meta, retry.persist)


def test_fencing_at_an_exhausted_epoch_rotates_at_completion() -> None:
    meta = meta_in(S.ONGOING, epoch=32766)
    decision = fence_ongoing_transaction(meta, now_ms=NOW_MS, new_producer_id=ids_from(NEW_PID))
    assert decision.persist is not None
    assert (decision.persist.producer_epoch, decision.persist.next_producer_id) == (32767, NEW_PID)
    persist_and_complete(meta, decision.persist)
    persist_and_complete(meta, meta.prepare_complete(NOW_MS))
    assert (meta.producer_id, meta.producer_epoch, meta.state) == (NEW_PID, 0, S.COMPLETE_ABORT)


def test_a_failed_fence_append_leaves_no_trace_and_the_next_fence_reaches_the_same_epoch() -> None:
    meta = meta_in(S.ONGOING)
    first = init(meta)
    meta.abandon_transition()
    assert meta.current() == meta_in(S.ONGOING).current()
    assert init(meta).persist == first.persist


def test_a_failed_id_allocation_changes_nothing() -> None:
    def broken() -> int:
        raise KafkaException("no ids")

    meta = meta_in(S.ONGOING, epoch=32766)
    refused(KafkaException, meta, lambda: init(meta, new_producer_id=broken))


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_init_waits_while_a_transaction_completes(state: TransactionState) -> None:
    meta = meta_in(state)
    refused(ConcurrentTransactionsError, meta, lambda: init(meta))


def test_init_waits_while_a_transition_is_pending() -> None:
    meta = meta_in(S.EMPTY)
    meta.prepare_dead()
    refused(ConcurrentTransactionsError, meta, lambda: init(meta))


@pytest.mark.parametrize("state", [S.DEAD, S.PREPARE_EPOCH_FENCE])
def test_a_state_that_only_exists_as_pending_is_a_bug(state: TransactionState) -> None:
    with pytest.raises(IllegalTransitionError):
        init(meta_in(state))
    with pytest.raises(IllegalTransitionError):
        end(meta_in(state), PID, EPOCH, True)


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
def test_a_timeout_outside_the_limits_is_refused(timeout_ms: int) -> None:
    with pytest.raises(InvalidTransactionTimeoutError):
        check_transaction_timeout(timeout_ms)
    check_transaction_timeout(900_000)
    check_transaction_timeout(1)


# --- AddPartitionsToTxn -----------------------------------------------------------------------


def add(meta: TransactionMetadata, pid: int = PID, epoch: int = EPOCH) -> Decision:
    return decide_add_partitions(
        meta,
        producer_id=pid,
        producer_epoch=epoch,
        partitions=[("t", 0)],
        now_ms=NOW_MS,
        client_transaction_version=2,
    )


def test_adding_partitions_opens_a_transaction_and_a_repeat_writes_nothing() -> None:
    meta = meta_in(S.COMPLETE_COMMIT)
    decision = add(meta)
    persist_and_complete(meta, decision.persist)
    assert meta.state is S.ONGOING and meta.txn_start_timestamp_ms == NOW_MS
    assert add(meta).persist is None


@pytest.mark.parametrize(
    ("state", "pid", "epoch", "error"),
    [
        (S.ONGOING, PID + 1, EPOCH, InvalidProducerIdMappingError),
        (S.ONGOING, PID, EPOCH - 1, ProducerFencedError),
        (S.PREPARE_COMMIT, PID, EPOCH, ConcurrentTransactionsError),
        (S.PREPARE_ABORT, PID, EPOCH, ConcurrentTransactionsError),
    ],
)
def test_adding_partitions_is_refused(
    state: TransactionState, pid: int, epoch: int, error: type[KafkaException]
) -> None:
    meta = meta_in(state)
    refused(error, meta, lambda: add(meta, pid, epoch))


# --- EndTxn under transactions V2 -----------------------------------------------------------

# docs/coordinator.md §3.6, written out as the spec: (state, result, epoch kind) -> outcome.
# CURRENT = the stored epoch, RETRY = stored - 1, OTHER = anything else (stored - 2).
SPEC = {
    (S.EMPTY, "abort"): {"retry": "PF", "current": "EB", "other": "PF"},
    (S.EMPTY, "commit"): {"retry": "PF", "current": "ITS", "other": "PF"},
    (S.ONGOING, "abort"): {"retry": "PF", "current": "EB", "other": "PF"},
    (S.ONGOING, "commit"): {"retry": "PF", "current": "EB", "other": "PF"},
    (S.PREPARE_COMMIT, "commit"): {"retry": "CT", "current": "PF", "other": "PF"},
    (S.PREPARE_COMMIT, "abort"): {"retry": "ITS", "current": "PF", "other": "PF"},
    (S.PREPARE_ABORT, "abort"): {"retry": "CT", "current": "PF", "other": "PF"},
    (S.PREPARE_ABORT, "commit"): {"retry": "ITS", "current": "PF", "other": "PF"},
    (S.COMPLETE_ABORT, "abort"): {"retry": "NONE", "current": "EB", "other": "PF"},
    # retry: PF, not the table's ITS (KAFKA-20785; see END_TXN_TV2)
    (S.COMPLETE_ABORT, "commit"): {"retry": "PF", "current": "ITS", "other": "PF"},
    (S.COMPLETE_COMMIT, "commit"): {"retry": "NONE", "current": "ITS", "other": "PF"},
    (S.COMPLETE_COMMIT, "abort"): {"retry": "ITS", "current": "EB", "other": "PF"},
}
REQUEST_EPOCH = {"current": EPOCH, "retry": EPOCH - 1, "other": EPOCH - 2}
ERRORS: dict[str, type[KafkaException]] = {
    "PF": ProducerFencedError,
    "ITS": InvalidTxnStateError,
    "CT": ConcurrentTransactionsError,
}
ROWS = [
    (state, result, kind)
    for state, result, kind in itertools.product(LIVE_STATES, ("abort", "commit"), REQUEST_EPOCH)
]


@pytest.mark.parametrize(("state", "result", "kind"), ROWS, ids=lambda v: getattr(v, "name", v))
def test_end_txn_follows_the_tv2_table(state: TransactionState, result: str, kind: str) -> None:
    meta = meta_in(state)
    outcome = SPEC[(state, result)][kind]
    call = lambda: end(meta, PID, REQUEST_EPOCH[kind], result == "commit")  # noqa: E731
    if outcome in ERRORS:
        refused(ERRORS[outcome], meta, call)
        return
    decision = call()
    if outcome == "NONE":
        assert decision.persist is None
        assert (decision.producer_id, decision.producer_epoch) == (PID, EPOCH)
        return
    target = decision.persist
    assert target is not None
    prepare = S.PREPARE_COMMIT if result == "commit" else S.PREPARE_ABORT
    assert (target.state, target.producer_epoch, target.last_producer_epoch) == (
        prepare,
        EPOCH + 1,
        EPOCH,
    )
    assert (decision.producer_id, decision.producer_epoch) == (PID, EPOCH + 1)
    persist_and_complete(meta, target)


def test_the_epoch_kinds_are_classified_as_the_table_expects() -> None:
    meta = meta_in(S.COMPLETE_COMMIT)
    assert epoch_kind(meta, PID, EPOCH) is EpochKind.CURRENT
    assert epoch_kind(meta, PID, EPOCH - 1) is EpochKind.RETRY
    assert epoch_kind(meta, PID, EPOCH + 1) is EpochKind.OTHER


def test_a_commit_bumps_and_its_retry_after_completion_succeeds_without_a_write() -> None:
    meta = meta_in(S.ONGOING)
    decision = end(meta, PID, EPOCH, True)
    persist_and_complete(meta, decision.persist)
    refused(ConcurrentTransactionsError, meta, lambda: end(meta, PID, EPOCH, True))
    persist_and_complete(meta, meta.prepare_complete(NOW_MS))
    retry = end(meta, PID, EPOCH, True)
    assert retry.persist is None and (retry.producer_id, retry.producer_epoch) == (PID, EPOCH + 1)
    refused(InvalidTxnStateError, meta, lambda: end(meta, PID, EPOCH, False))


def test_an_overflowing_commit_moves_to_a_new_producer_id_and_its_retries_are_known() -> None:
    meta = meta_in(S.ONGOING, epoch=32766)
    decision = end(meta, PID, 32766, True, new_producer_id=ids_from(NEW_PID))
    assert (decision.producer_id, decision.producer_epoch) == (NEW_PID, 0)
    assert decision.persist is not None and decision.persist.producer_epoch == 32767
    persist_and_complete(meta, decision.persist)
    refused(ConcurrentTransactionsError, meta, lambda: end(meta, PID, 32766, True))
    persist_and_complete(meta, meta.prepare_complete(NOW_MS))
    assert (meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (NEW_PID, 0, PID)
    retry = end(meta, PID, 32766, True)  # retryOnOverflow
    assert retry.persist is None and (retry.producer_id, retry.producer_epoch) == (NEW_PID, 0)
    refused(InvalidTxnStateError, meta, lambda: end(meta, PID, 32766, False))
    refused(InvalidProducerIdMappingError, meta, lambda: end(meta, PID, 32765, True))
    # The next transaction runs under the new id.
    persist_and_complete(meta, end(meta, NEW_PID, 0, False).persist)
    assert (meta.state, meta.producer_epoch) == (S.PREPARE_ABORT, 1)


def test_an_empty_abort_after_a_commit_waits_instead_of_fencing_itself() -> None:
    # KAFKA-18464: the commit's answer (epoch + 1) arrives while CompleteCommit is pending.
    meta = meta_in(S.ONGOING)
    persist_and_complete(meta, end(meta, PID, EPOCH, True).persist)
    meta.prepare_complete(NOW_MS)
    refused(ConcurrentTransactionsError, meta, lambda: end(meta, PID, EPOCH + 1, False))


def test_end_txn_for_another_producer_id_is_a_mapping_error() -> None:
    meta = meta_in(S.ONGOING)
    refused(InvalidProducerIdMappingError, meta, lambda: end(meta, PID + 1, EPOCH, True))
