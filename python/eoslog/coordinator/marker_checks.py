"""The transaction coordinator's check of ABORT markers against its own decisions, at load.

Every end of a transaction bumps the producer epoch (transaction version 2), and the
coordinator writes its markers at the bumped epoch, the epoch of its Prepare* and Complete*
records: so (producer id, marker epoch) names one end, and `__transaction_state` holds the
decision for it while the record is there. Once the topic is compacted only each id's last
record stays, so an ABORT marker of an older end finds no decision and is not checked here
(never refused wrongly: a missing decision is "nothing to compare with"). A marker whose
type contradicts that decision was forged (its type is covered by the batch CRC, which a
forger recomputes): believed, it hides committed records or shows aborted ones.

What is checked is kept cheap: for each producer in each partition, the last ABORT marker the
.txnindex of the segments from the recovery point on names (one batch lookup per producer with
an aborted transaction there). Those are the entries an open after an unclean stop has just
rebuilt from the log (an untrusted recovery point rescans every segment, and then only the last
one is checked), the case the owner's open-time check of the .txnindex against the log
(eoslog.log.recovery) cannot cover; and the last transaction is the one a crash leaves
undecided on disk. A COMMIT marker forged from an
ABORT leaves no entry to check here; the owner's open catches it where the .txnindex was kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from eoslog.coordinator.transaction_state import TransactionState as S
from eoslog.errors import CorruptRecordError
from eoslog.log.segment_reads import LOG_SUFFIX, batch_lookup
from eoslog.record import control

if TYPE_CHECKING:
    from eoslog.log.partition import PartitionLog
    from eoslog.log.segment import LogSegment
    from eoslog.log.txn_index import AbortedTxn

# The outcome each deciding state records (a Complete* record lists no partitions; its
# Prepare* at the same epoch does).
_OUTCOME = {
    S.PREPARE_COMMIT: True,
    S.COMPLETE_COMMIT: True,
    S.PREPARE_ABORT: False,
    S.COMPLETE_ABORT: False,
}


class DecidedEnds:
    """What `__transaction_state` decided for each end, by (producer id, epoch): commit or
    abort, and the partitions, as its Prepare* and Complete* records say. An end with records
    of both outcomes (which no coordinator writes) is left out: nothing to compare with."""

    def __init__(self) -> None:
        self._ends: dict[tuple[int, int], tuple[bool, frozenset[tuple[str, int]]] | None] = {}

    def record(
        self, end: tuple[int, int], state: S, partitions: frozenset[tuple[str, int]]
    ) -> None:
        """One replayed record: its (producer id, epoch), state and partitions; a state that
        decides nothing is skipped."""
        commit = _OUTCOME.get(state)
        if commit is None:
            return
        known = self._ends.get(end, (commit, frozenset()))
        if known is None or known[0] != commit:
            self._ends[end] = None
            return
        self._ends[end] = (commit, known[1] | partitions if partitions else known[1])

    def committed(self, producer_id: int, epoch: int, partition: tuple[str, int]) -> bool:
        found = self._ends.get((producer_id, epoch))
        return found is not None and found[0] and partition in found[1]


def check_last_aborts(logs: Iterable[PartitionLog], ends: DecidedEnds) -> None:
    """CorruptRecordError when a partition's last ABORT marker of a producer ends a
    transaction that `__transaction_state` says was committed there (module docstring)."""
    for log in logs:
        last: dict[int, AbortedTxn] = {}
        for segment in _from_recovery_point(log):
            for entry in segment.txn_index.all_entries():
                last[entry.producer_id] = entry
        if not last:
            continue
        batch_at = batch_lookup(log.segments)
        partition = (log.topic, log.partition)
        for producer_id, entry in sorted(last.items()):
            marker = batch_at(entry.last_offset)
            if (
                marker is not None
                and marker.base_offset == entry.last_offset
                and marker.producer_id == producer_id
                and marker.control_type == control.ABORT
                and ends.committed(producer_id, marker.producer_epoch, partition)
            ):
                raise CorruptRecordError(
                    f"{_where(log, entry.last_offset)}: the marker at offset {entry.last_offset} "
                    f"aborts producer {producer_id}'s transaction (epoch "
                    f"{marker.producer_epoch}), but __transaction_state records that end as a "
                    f"commit including this partition: the marker was forged or damaged, and "
                    f"believing it would hide committed records"
                )


def _from_recovery_point(log: PartitionLog) -> list[LogSegment]:
    """The segments holding offsets at or past the log's recovery point: after an unclean
    stop, those whose .txnindex recovery has just rebuilt from the log; after a clean one, the
    last segment. The cost of the check is then bounded by what the open rescanned."""
    segments = log.segments
    keep = len(segments) - 1
    while keep > 0 and segments[keep].base_offset > log.recovery_point:
        keep -= 1
    return segments[keep:]


def _where(log: PartitionLog, offset: int) -> str:
    """The .log file holding `offset` and the byte its batch starts at."""
    holder = max((s for s in log.segments if s.base_offset <= offset), key=_base)
    found = holder.translate_offset(offset)
    return f"{holder.path(LOG_SUFFIX)} (batch at byte {found.position if found else '?'})"


def _base(segment: LogSegment) -> int:
    return segment.base_offset
