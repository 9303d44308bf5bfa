"""Writing a transaction's COMMIT and ABORT markers (docs/coordinator.md §3.7; Kafka's
TransactionMarkerChannelManager, in process: the partition leader is the partition log).

A marker carries the producer id, the epoch it ends and the coordinator epoch, and goes to one
partition of the transaction. Under durability "commit" it is written without an fsync of its
own; the writer keeps it until sync() makes it durable, which the coordinator calls before any
fsync of a state log, so a Complete* record never becomes durable ahead of its markers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from eoslog import crashpoints
from eoslog._ext.producer_state import NO_OFFSET
from eoslog.errors import KafkaStorageError

if TYPE_CHECKING:
    from eoslog.log.partition import PartitionLog

# Told of every marker written: (topic, partition, producer id, commit, marker offset).
MarkerListener = Callable[[str, int, int, bool, int], None]


class MarkerWriter:
    """Appends markers and makes them durable. Any thread."""

    def __init__(
        self,
        *,
        coordinator_epoch: int,
        durability: str,
        state_logs: list[PartitionLog],
        listener: MarkerListener | None = None,
    ) -> None:
        self._coordinator_epoch = coordinator_epoch
        self._durability = durability
        self._state_logs = state_logs
        # The group coordinator: a marker in `__consumer_offsets` ends pending offsets.
        self._listener = listener
        # Under "commit": markers written but not yet fsynced, as (log, offset).
        self._unsynced: list[tuple[PartitionLog, int]] = []
        self._lock = threading.Lock()

    def write(
        self,
        log: PartitionLog,
        producer_id: int,
        marker_epoch: int,
        commit: bool,
        coordinator_epoch: int | None = None,
        *,
        epoch_bumped: bool = True,
    ) -> int:
        """Append the marker ending `producer_id`'s transaction at `marker_epoch` to `log`;
        its offset. It carries this coordinator's epoch, or `coordinator_epoch` when given (an
        admin's abort of a producer no transactional id owns, Kafka's AbortTransaction).
        `epoch_bumped` false: a transactions-v1 end, whose marker carries the data's epoch.
        Raises what PartitionLog.append_marker raises (a stale epoch:
        InvalidProducerEpochError or TransactionCoordinatorFencedError)."""
        if crashpoints.ARMED:  # a call saved per marker when no point is armed
            crashpoints.hit("marker.before")
        offset = log.append_marker(
            producer_id,
            marker_epoch,
            self._coordinator_epoch if coordinator_epoch is None else coordinator_epoch,
            commit,
            # Under "always" every append is durable at once; under "commit" sync() does it.
            sync=self._durability == "always",
            epoch_bumped=epoch_bumped,
        )
        if self._durability == "commit":
            with self._lock:
                self._unsynced.append((log, offset))
        if self._listener is not None:
            self._listener(log.topic, log.partition, producer_id, commit, offset)
        if crashpoints.ARMED:
            crashpoints.hit("marker.after")
        return offset

    def sync(self) -> None:
        """Make every marker written so far durable."""
        with self._lock:
            pending, self._unsynced = self._unsynced, []
        try:
            for log, offset in pending:
                log.flush_through(offset + 1)
        except BaseException as error:
            with self._lock:
                self._unsynced[:0] = pending
            if isinstance(error, KafkaStorageError):
                # A marker may now be lost for good, and only its Prepare* record stands for
                # it: no state log may become durable past it (its close or a roll would
                # fsync the deferred Complete*, and recovery would take the transaction as
                # finished without the marker). Fail-stop them; the next open recovers.
                for state_log in self._state_logs:
                    state_log.fail_stop(error)
            raise


def marker_applied(
    log: PartitionLog, producer_id: int, marker_epoch: int, *, epoch_bumped: bool = True
) -> bool:
    """Whether the marker at `marker_epoch` already reached `log`, as recovery can tell: the
    producer's entry there is past it, or at it with a newer transaction open. Only data
    of a later transaction carries the marker's epoch (every TV2 end bumps the epoch), and
    the coordinator writes every marker of an end before the producer learns that epoch; a
    partition file is durable as a prefix, so that data survives only with the marker.

    A transactions-v1 end (`epoch_bumped` false) marks data at its own epoch: its marker is
    applied when the entry is past that epoch or at it with nothing open. No later
    transaction's data can be open at that epoch while the end's Prepare* is the id's last
    durable record: the first add of a v1 transaction is fsynced with the Complete* record
    before it (TransactionCoordinator.add_partitions)."""
    entry = log.producer_state.entry(producer_id)
    if entry is None:
        return False
    if not epoch_bumped:
        return entry.epoch > marker_epoch or (
            entry.epoch == marker_epoch and entry.current_txn_first_offset == NO_OFFSET
        )
    return entry.epoch > marker_epoch or (
        entry.epoch == marker_epoch and entry.current_txn_first_offset != NO_OFFSET
    )
