"""The replay of `__transaction_state` at open (docs/coordinator.md §2.3 step 4): the last
record of each transactional id wins and a tombstone removes the id; every record that decides
an end (Prepare*, Complete*) is remembered by (producer id, epoch) for the marker checks.

Per record it does what the checks need and no more: the log is read in natively decoded
chunks (log_replay.chunks), a key's bytes are decoded once (a log holds few ids and many
records of each), every value is decoded (a damaged one fails the open, whichever record it
is) and its state checked, and the metadata is built only for the records that are last for
their key. The last record per key decides, so a log whose superseded records were removed
by compaction (offset gaps, tombstones gone) loads the same state.

Pure: reads the logs, changes nothing. Called once, at load, before any request.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from eoslog.coordinator import log_replay, marker_checks
from eoslog.coordinator.transaction_log import (
    TopicPartitions,
    TransactionLogValue,
    decode_key,
    decode_value,
)
from eoslog.coordinator.transaction_metadata import (
    TransactionMetadata,
    logged_state,
    metadata_from_log,
)
from eoslog.coordinator.transaction_state import PartitionKey, TransactionState
from eoslog.errors import KafkaException

if TYPE_CHECKING:
    from eoslog.log.partition import PartitionLog

S = TransactionState
Decided = dict[tuple[int, int], tuple[bool, frozenset[PartitionKey]]]
_PARTITION_SETS_MAX = 4096  # as transaction_log's cache of decoded arrays
_PREPARED = {S.PREPARE_COMMIT: True, S.PREPARE_ABORT: False}
_DECIDING = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


class Replayed(NamedTuple):
    """What the replay found: each live id's metadata; the Prepare* decisions for the ends
    the data partitions still hold open; every decision, for marker_checks."""

    metadata: dict[str, TransactionMetadata]
    decided: Decided
    ends: marker_checks.DecidedEnds


def replay(state_logs: Iterable[PartitionLog], open_ends: set[tuple[int, int]]) -> Replayed:
    """Replay every state log in order. `open_ends` holds (producer id, epoch + 1) of each
    transaction a data partition holds open. Raises what the records' decoders raise
    (CorruptTransactionLogError, UnknownTransactionLogKeyVersionError) and KafkaException for a
    record without a key."""
    last: dict[str, TransactionLogValue] = {}
    ids: dict[bytes, str] = {}
    decided: Decided = {}
    ends = marker_checks.DecidedEnds()
    sets = _PartitionSets()
    for state_log in state_logs:
        for key, value in _records(state_log):
            transactional_id = ids.get(key)
            if transactional_id is None:
                transactional_id = ids[key] = decode_key(key)
            decoded = decode_value(value)
            if decoded is None:
                last.pop(transactional_id, None)
                continue
            state = logged_state(transactional_id, decoded.transaction_status)
            last[transactional_id] = decoded
            if state not in _DECIDING:
                continue
            end = (decoded.producer_id, decoded.producer_epoch)
            partitions = sets.of(decoded.transaction_partitions)
            ends.record(end, state, partitions)
            commit = _PREPARED.get(state)
            if commit is not None and end in open_ends:
                decided[end] = (commit, partitions)
    metadata = {tid: metadata_from_log(tid, value) for tid, value in last.items()}
    return Replayed(metadata, decided, ends)


class _PartitionSets:
    """The partition set of a record's partitions array, made once per array object (the
    decoder hands out one object for the same bytes, transaction_log._partitions_by_bytes)."""

    def __init__(self) -> None:
        self._made: dict[int, tuple[object, frozenset[PartitionKey]]] = {}

    def of(self, elements: tuple[TopicPartitions, ...] | None) -> frozenset[PartitionKey]:
        made = self._made.get(id(elements))
        if made is not None and made[0] is elements:
            return made[1]
        found = frozenset(
            (element.topic, partition)
            for element in elements or ()
            for partition in element.partition_ids
        )
        if len(self._made) >= _PARTITION_SETS_MAX:
            self._made.clear()
        self._made[id(elements)] = (elements, found)  # holds the object: its id stays its own
        return found


def _records(state_log: PartitionLog) -> Iterator[tuple[bytes, bytes | None]]:
    """Every (key, value) of a `__transaction_state` partition, in log order (control
    records skipped)."""
    for chunk in log_replay.chunks(state_log):
        for key, value, control in zip(chunk.keys, chunk.values, chunk.control, strict=True):
            if control:
                continue
            if key is None:
                raise KafkaException(f"a {state_log.topic} record without a key")
            yield key, value
