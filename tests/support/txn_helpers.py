"""Shared set-up for the transaction-coordinator tests: metadata in any state, and a
persist-then-complete step that also sends each target through the log codec."""

from __future__ import annotations

from eoslog.coordinator.transaction_log import TransactionLogValue, decode_value, encode_value
from eoslog.coordinator.transaction_metadata import (
    TransactionMetadata,
    log_value_of,
    metadata_from_log,
)
from eoslog.coordinator.transaction_state import TransactionState, TransitionTarget

S = TransactionState
PID = 7
EPOCH = 5
TIMEOUT_MS = 60_000
START_MS = 500
NOW_MS = 10_000
PARTITIONS = frozenset({("t", 0), ("t", 1)})
OPEN_STATES = (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE)
LIVE_STATES = (
    S.EMPTY,
    S.ONGOING,
    S.PREPARE_COMMIT,
    S.PREPARE_ABORT,
    S.COMPLETE_COMMIT,
    S.COMPLETE_ABORT,
)


def meta_in(
    state: TransactionState, *, epoch: int = EPOCH, tv: int = 2, producer_id: int = PID
) -> TransactionMetadata:
    """Metadata as it stands in `state`: an open transaction has partitions and a start time;
    a completed one keeps its start time; Empty has neither."""
    is_open = state in OPEN_STATES
    has_start = is_open or state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
    return TransactionMetadata(
        "txn",
        producer_id,
        txn_timeout_ms=TIMEOUT_MS,
        txn_last_update_timestamp_ms=1_000,
        producer_epoch=epoch,
        last_producer_epoch=epoch - 1,
        previous_producer_id=producer_id,
        state=state,
        partitions=PARTITIONS if is_open else (),
        txn_start_timestamp_ms=START_MS if has_start else -1,
        client_transaction_version=tv,
    )


def persist_and_complete(meta: TransactionMetadata, target: TransitionTarget | None) -> None:
    """What the coordinator does with a decision: append the record, then complete. The
    record must carry everything the log keeps (all but the last epoch)."""
    assert target is not None and meta.pending == target
    loaded = metadata_from_log(meta.transactional_id, decode_or_fail(target))
    assert loaded.current() == _without_last_epoch(target)
    meta.complete_transition(target)
    assert meta.pending is None and meta.current() == target


def decode_or_fail(target: TransitionTarget) -> TransactionLogValue:
    data = encode_value(log_value_of(target))
    assert data is not None
    value = decode_value(data)
    assert value is not None
    return value


def _without_last_epoch(target: TransitionTarget) -> TransitionTarget:
    partitions = frozenset() if target.state is S.EMPTY else target.partitions
    return target._replace(last_producer_epoch=-1, partitions=partitions)
