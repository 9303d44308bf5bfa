"""The transaction coordinator of one Broker (docs/coordinator.md §0-§4; docs/design.md
"Transactions").

It owns one TransactionMetadata per transactional id. Every change is decided on the metadata
(eoslog.coordinator.transaction_decisions), appended to `__transaction_state` in Kafka's record
format, and only then applied in memory (two phases: prepare, persist, complete; a failed
append abandons the prepared change). The end of a transaction is Prepare{Commit,Abort}
persisted, then a COMMIT or ABORT marker carrying the coordinator epoch appended to every
partition of the transaction, then Complete{Commit,Abort}. Which records are fsynced under
"commit" (InitProducerId's and Prepare*; the Ongoing record, markers and Complete* are made
durable by a later fsync) and why that is safe: README.md "The commit path and recovery".
Complete* is applied at once and its record deferred to the state partition's next append.

At open the coordinator epoch is one more than the last process's (persisted by the broker),
the state is rebuilt from `__transaction_state` (the last record per id wins; a tombstone
deletes), and every transaction found in Prepare* is finished: its markers are written again
(a marker sent twice is accepted as a retry by the partition log) and Complete* persisted.
Then the open transactions the partitions hold are checked against the state: a marker lost
under a later record is written again, an orphan (data without its Ongoing record) joins the
id's Ongoing transaction or is aborted (_end_unaccounted_transactions). Ongoing transactions
stay open until they time out or their id re-initializes.

Thread safety: every public method may be called from any thread. Work on one transactional
id serializes on that id's lock, held across the append and the markers, so an id's changes
are applied in the order they are persisted.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final

from eoslog import crashpoints, limits
from eoslog._ext.producer_state import NO_OFFSET
from eoslog.coordinator import hanging_transactions, marker_checks, transaction_replay
from eoslog.coordinator.marker_writer import MarkerListener, MarkerWriter, marker_applied
from eoslog.coordinator.producer_ids import ProducerIdManager
from eoslog.coordinator.transaction_decisions import (
    Decision,
    check_transaction_timeout,
    decide_add_partitions,
    decide_end_txn,
    decide_end_txn_v1,
    decide_init_producer_id,
    decided_end_failed,
    fence_ongoing_transaction,
    is_own_decided_end,
)
from eoslog.coordinator.transaction_log import (
    encode_key,
    partition_for,
)
from eoslog.coordinator.transaction_metadata import (
    TransactionMetadata,
    log_value_bytes,
)
from eoslog.coordinator.transaction_state import (
    EXPIRATION_ALLOWED,
    TRANSACTION_VERSION_EPOCH_BUMP,
    PartitionKey,
    TransactionState,
    TransitionTarget,
    is_epoch_exhausted,
)
from eoslog.errors import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTxnStateError,
    KafkaStorageError,
    TooManyOpenTransactionsError,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
)
from eoslog.record import codec

if TYPE_CHECKING:
    from eoslog.log.partition import PartitionLog

S = TransactionState
LogOf = Callable[[str, int], "PartitionLog"]

# The states of a transaction in progress: the ids limits.open_transactions_max counts.
_IN_PROGRESS: Final = frozenset(
    {S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE}
)


class TransactionCoordinator:
    """Transactions for one broker (see the module doc)."""

    def __init__(
        self,
        *,
        state_logs: list[PartitionLog],
        log_of: LogOf,
        all_logs: Callable[[], Iterable[PartitionLog]] = list,
        producer_ids: ProducerIdManager,
        coordinator_epoch: int,
        clock_ms: Callable[[], int],
        durability: str,
        txn_timeout_ms_max: int,
        transactional_id_expiration_ms: int,
        marker_listener: MarkerListener | None = None,
    ) -> None:
        self._state_logs = state_logs
        self._log_of = log_of
        self._all_logs = all_logs
        self._producer_ids = producer_ids
        self.coordinator_epoch = coordinator_epoch
        self._clock_ms = clock_ms
        self._durability = durability
        self._txn_timeout_ms_max = txn_timeout_ms_max
        self._expiration_ms = transactional_id_expiration_ms
        self._lock = threading.Lock()
        # Transaction ends writing markers now; stable_offsets waits for none.
        self._ends_in_progress = 0
        # Taken as a plain lock by an end (no Python-level Condition call on its path); a
        # reader waiting for the ends counts itself in _ends_waiters, and an end notifies
        # only when one waits.
        self._ends_lock = threading.Lock()
        self._ends_changed = threading.Condition(self._ends_lock)
        self._ends_waiters = 0
        self._metadata: dict[str, TransactionMetadata] = {}
        # The metadata by its current producer id, for verify_transaction (lock-free reads).
        self._by_producer: dict[int, TransactionMetadata] = {}
        # The ids with a transaction in progress (_IN_PROGRESS), which
        # limits.open_transactions_max caps; kept by _persist as each change is applied.
        self._in_progress: set[str] = set()
        self._id_locks: dict[str, threading.RLock] = {}
        # Each id's `__transaction_state` partition and record key, computed once.
        self._placements: dict[str, tuple[PartitionLog, bytes]] = {}
        # Records (key, value) queued per state log, written ahead of its next record; each
        # state log's queue and appends serialize on its lock.
        self._deferred: dict[PartitionLog, list[tuple[bytes, bytes | None]]] = {}
        self._append_locks = {state_log: threading.Lock() for state_log in state_logs}
        # Every fsync of a state log makes the markers written so far durable first
        # (_sync_state_log), so a Complete* record is never durable before its markers.
        self._markers = MarkerWriter(
            coordinator_epoch=coordinator_epoch,
            durability=durability,
            state_logs=state_logs,
            listener=marker_listener,
        )

    # --- loading ---------------------------------------------------------------------------

    def load(self, *, view: bool = False) -> None:
        """Rebuild the metadata from `__transaction_state`, then finish every transaction a
        crash left in Prepare*, then end the open transactions the partitions hold that
        the metadata does not account for (_end_unaccounted_transactions). With view (the
        command line's read-only view of a directory, whose writes stay in memory), a
        Prepare* the owner finished but for its deferred Complete* record is completed
        first, without a marker (_show_deferred_completes)."""
        open_ends = {(pid, epoch + 1) for _, pid, epoch in self._open_transactions()}
        self._metadata, decided, ends = transaction_replay.replay(self._state_logs, open_ends)
        self._by_producer = {meta.producer_id: meta for meta in self._metadata.values()}
        self._in_progress = {
            transactional_id
            for transactional_id, meta in self._metadata.items()
            if meta.state in _IN_PROGRESS
        }
        marker_checks.check_last_aborts(self._all_logs(), ends)
        if view:
            self._show_deferred_completes()
        # Lost markers of decided ends first: they belong before any marker of the id's
        # later transaction, whose ABORT would otherwise end the older committed data.
        self._rewrite_lost_markers(decided)
        for transactional_id, meta in list(self._metadata.items()):
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                with self._id_lock(transactional_id):
                    self._complete_end(meta, recovering=True)
        self._end_unaccounted_transactions(decided)

    def _show_deferred_completes(self) -> None:
        """A read-only view's load: a Prepare* whose markers are all in the logs is one the
        owner completed with its Complete* record deferred (_write_markers), so it is
        applied as the owner holds it, with no record and no marker (recovery would write
        its markers again: marker_applied cannot tell a TV2 marker was applied once its
        epoch is the producer's)."""
        for meta in list(self._metadata.values()):
            if meta.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                continue
            logs = []
            for topic, partition in meta.partitions:
                with contextlib.suppress(UnknownTopicOrPartitionError):  # a deleted topic: done
                    logs.append(self._log_of(topic, partition))
            bumped = meta.client_transaction_version >= TRANSACTION_VERSION_EPOCH_BUMP
            if not any(
                _still_open(log, meta.producer_id, meta.producer_epoch, bumped) for log in logs
            ):
                previous_producer_id = meta.producer_id
                meta.complete_transition(meta.prepare_complete(self._clock_ms()))
                del self._by_producer[previous_producer_id]
                self._by_producer[meta.producer_id] = meta

    def _rewrite_lost_markers(
        self, decided: dict[tuple[int, int], tuple[bool, frozenset[PartitionKey]]]
    ) -> None:
        """The first rule of _end_unaccounted_transactions, run before the Prepare* ends are
        finished: an open transaction whose end was decided gets its marker again."""
        for log, producer_id, epoch in self._open_transactions():
            end = decided.get((producer_id, epoch + 1))
            if end is not None and (log.topic, log.partition) in end[1]:
                self._markers.write(log, producer_id, epoch + 1, end[0])

    def _open_transactions(self) -> list[tuple[PartitionLog, int, int]]:
        """(log, producer id, epoch) of every transaction open in a partition (at open)."""
        found = []
        for log in list(self._all_logs()):
            table = log.producer_state
            for producer_id in sorted(set(table.open_transactions().values())):
                entry = table.entry(producer_id)
                assert entry is not None, f"{log.topic}-{log.partition}: no producer entry"
                found.append((log, producer_id, entry.epoch))
        return found

    def _end_unaccounted_transactions(
        self, decided: dict[tuple[int, int], tuple[bool, frozenset[PartitionKey]]]
    ) -> None:
        """Recovery after a power loss under "commit" (README.md "The commit path and recovery"),
        where neither the Ongoing record nor the markers are fsynced before later writes,
        so the disk may hold data whose transaction the last state record does not explain:

        * its end was decided (a Prepare* record at the next epoch lists the partition) but
          the marker was lost, while a later record of the id survived: the marker is
          written again;
        * its AddPartitions record was lost (an orphan): if the id's transaction at that
          epoch is Ongoing, the partition joins it (it ends at its timeout or at the next
          InitProducerId, like any other); otherwise it is aborted now, with an ABORT
          marker one epoch above the data's, the id first fenced to at least that epoch.

        Without this rule such a transaction would hold its partition's LSO forever.
        Producers no transactional id here owns (data written to the log directly, which
        verify_transaction does not check) are left to their writer."""
        for log, producer_id, epoch in self._open_transactions():
            partition = (log.topic, log.partition)
            end = decided.get((producer_id, epoch + 1))
            if end is not None and partition in end[1]:
                self._markers.write(log, producer_id, epoch + 1, end[0])
                continue
            meta = self._by_producer.get(producer_id)
            if meta is not None:
                with self._id_lock(meta.transactional_id):
                    self._recover_orphan(meta, log, producer_id, epoch)

    def _recover_orphan(
        self, meta: TransactionMetadata, log: PartitionLog, producer_id: int, epoch: int
    ) -> None:
        """One open transaction of `producer_id` at `epoch` in `log`, `meta` its id's
        metadata (id lock held)."""
        partition = (log.topic, log.partition)
        if meta.state is S.ONGOING and meta.producer_epoch == epoch:
            if partition not in meta.partitions:  # its AddPartitions record was lost
                target = meta.prepare_add_partitions(
                    [partition], self._clock_ms(), meta.client_transaction_version
                )
                self._persist(meta, target)
            return
        if meta.state not in EXPIRATION_ALLOWED:
            return  # Prepare* a stale marker left unfinished: a newer owner decides
        self._abort_left_open(meta, log, producer_id, epoch)

    def _abort_left_open(
        self, meta: TransactionMetadata, log: PartitionLog, producer_id: int, epoch: int
    ) -> None:
        """ABORT the transaction `producer_id` holds open in `log` at `epoch`, which `meta`
        (its id's metadata, id lock held, not Ongoing at that epoch) does not end itself."""
        if meta.producer_id == producer_id and meta.producer_epoch <= epoch:
            # Fence the producer above the orphan's epoch first, as InitProducerId would:
            # the marker's epoch is then never handed out again.
            if is_epoch_exhausted(meta.producer_epoch):
                target = meta.prepare_producer_id_rotation(
                    self._producer_ids.generate(), meta.txn_timeout_ms, self._clock_ms(), False
                )
            else:
                target = meta.prepare_epoch_bump(meta.txn_timeout_ms, None, self._clock_ms())
            self._persist(meta, target)  # durable before the marker is written
        self._markers.write(log, producer_id, epoch + 1, commit=False)

    # --- requests --------------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        txn_timeout_ms: int,
        expected: tuple[int, int] | None = None,
    ) -> tuple[int, int]:
        """InitProducerId for a transactional id (§3.2): (producer id, epoch) for the
        producer that now owns the id; every older producer with it is fenced. A transaction
        the id left Ongoing is aborted first (its markers written), a Prepare* one finished."""
        _check_transactional_id(transactional_id)
        check_transaction_timeout(txn_timeout_ms, self._txn_timeout_ms_max)
        with self._id_lock(transactional_id):
            meta = self._metadata.get(transactional_id)
            if meta is None:
                meta = TransactionMetadata(
                    transactional_id,
                    self._producer_ids.generate(),
                    txn_timeout_ms=txn_timeout_ms,
                    txn_last_update_timestamp_ms=self._clock_ms(),
                )
                self._metadata[transactional_id] = meta
            self._finish_unfinished_end(meta)
            decision = self._decide_init(meta, txn_timeout_ms, expected)
            if decision.answer_error is ConcurrentTransactionsError:
                # The fence of an Ongoing transaction: its abort is persisted; finish it here
                # and answer the retry a Kafka client would send next.
                self._complete_end(meta)
                decision = self._decide_init(meta, txn_timeout_ms, expected)
            return decision.producer_id, decision.producer_epoch

    def _decide_init(
        self, meta: TransactionMetadata, txn_timeout_ms: int, expected: tuple[int, int] | None
    ) -> Decision:
        decision = decide_init_producer_id(
            meta,
            txn_timeout_ms=txn_timeout_ms,
            expected=expected,
            now_ms=self._clock_ms(),
            new_producer_id=self._producer_ids.generate,
        )
        self._persist(meta, decision.persist)
        return decision

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[PartitionKey],
        *,
        transaction_version: int = TRANSACTION_VERSION_EPOCH_BUMP,
    ) -> None:
        """Add partitions to the open transaction, or open one (§3.3; the implicit add of
        transactions v2). UnknownTopicOrPartitionError, adding nothing, for a partition the
        broker does not have. `transaction_version` below 2: a Kafka client's explicit
        AddPartitionsToTxn (v0-v3), whose transaction will end at its own epoch (EndTxn
        below v5)."""
        _check_transactional_id(transactional_id)
        added = frozenset(partitions)
        for topic, partition in added:
            self._log_of(topic, partition)  # raises UnknownTopicOrPartitionError
        with self._id_lock(transactional_id):
            meta = self._known(transactional_id, producer_id)
            decision = decide_add_partitions(
                meta,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                partitions=added,
                now_ms=self._clock_ms(),
                client_transaction_version=transaction_version,
            )
            opens = decision.persist is not None and meta.state not in _IN_PROGRESS
            if opens:
                self._check_room_for_transaction(meta)
            # Not fsynced of its own: the Prepare* record that ends the transaction makes it
            # durable. Data written meanwhile may reach the disk without it; after a power
            # loss load() ends such an orphan (_end_unaccounted_transactions). A v1
            # transaction's opening add is the exception: its data carries the epoch of the
            # id's last end, so that end's deferred Complete* must be durable before it, or
            # recovery, finding that Prepare* last, would end the new data with its marker.
            v1_opens = opens and transaction_version < TRANSACTION_VERSION_EPOCH_BUMP
            self._persist(meta, decision.persist, sync=v1_opens)

    def _check_room_for_transaction(self, meta: TransactionMetadata) -> None:
        """TooManyOpenTransactionsError, abandoning meta's prepared transition (nothing is
        written or applied), when limits.open_transactions_max transactional ids have a
        transaction in progress already (docs/style.md rule 6), as _in_progress counts them;
        ids opening transactions in parallel threads may pass the cap by at most their
        number."""
        in_progress = len(self._in_progress)
        if in_progress >= limits.open_transactions_max:
            meta.abandon_transition()
            raise TooManyOpenTransactionsError(
                f"{meta.transactional_id}: {in_progress} transactional ids have a transaction "
                "in progress (limits.open_transactions_max); a new one opens once one ends"
            )

    def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        transaction_version: int = TRANSACTION_VERSION_EPOCH_BUMP,
    ) -> tuple[int, int]:
        """EndTxn under transactions v2 (§3.6): Prepare* persisted, the markers written, then
        Complete* persisted. Returns the (producer id, epoch) the producer uses next: every
        end bumps the epoch, so nothing from this transaction can land in the next. With
        `transaction_version` below 2 (a Kafka client's EndTxn v0-v4) the v1 rules apply
        (decide_end_txn_v1) and the epoch is kept.
        KafkaStorageError before Prepare* is durable (not retriable): the end was not
        decided and the id stays Ongoing. KafkaStorageError once it is (a marker could not
        be written, F6), retriable: the outcome is the decision, and the same call repeated
        finishes the end once the markers can be written."""
        _check_transactional_id(transactional_id)
        with self._id_lock(transactional_id):
            meta = self._known(transactional_id, producer_id)
            try:
                self._finish_unfinished_end(meta)
            except KafkaStorageError as error:
                if is_own_decided_end(
                    meta,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    commit=commit,
                    client_transaction_version=transaction_version,
                ):  # this call's end, decided by an earlier attempt of it
                    raise decided_end_failed(error, commit=commit) from error
                raise
            if transaction_version < TRANSACTION_VERSION_EPOCH_BUMP:
                decision = decide_end_txn_v1(
                    meta,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    commit=commit,
                    client_transaction_version=transaction_version,
                    now_ms=self._clock_ms(),
                )
            else:
                decision = decide_end_txn(
                    meta,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    commit=commit,
                    now_ms=self._clock_ms(),
                    new_producer_id=self._producer_ids.generate,
                )
            if decision.persist is None:
                return decision.producer_id, decision.producer_epoch  # a retry of a finished end
            # A failure up to here leaves the id Ongoing: the end was not decided (F1, F2).
            self._persist(meta, decision.persist)
            if crashpoints.ARMED:  # a call saved per transaction when no point is armed
                crashpoints.hit("coordinator.prepare.after")
            try:
                self._complete_end(meta)
            except KafkaStorageError as error:  # decided: a retry finishes it (F6)
                raise decided_end_failed(error, commit=commit) from error
            return decision.producer_id, decision.producer_epoch

    # --- background work (§4) --------------------------------------------------------------

    def abort_timed_out_transactions(self) -> int:
        """Abort, with an epoch bump, every Ongoing transaction older than its timeout
        (§4.1), and retry every end a failed marker write left in Prepare* (as Kafka's
        coordinator keeps retrying markers: their partitions' last stable offsets wait on
        them, whether or not the producer ever calls again). Returns how many were
        aborted."""
        now = self._clock_ms()
        aborted = 0
        for transactional_id, meta in self._snapshot():
            with self._id_lock(transactional_id):
                if self._metadata.get(transactional_id) is meta:
                    with contextlib.suppress(KafkaStorageError):
                        # A partition it needs is fail-stopped: the next request for the
                        # id reports that, and the next open finishes the end.
                        self._finish_unfinished_end(meta)
                if (
                    meta.state is not S.ONGOING
                    or meta.pending is not None
                    or meta.txn_start_timestamp_ms + meta.txn_timeout_ms >= now
                    or self._metadata.get(transactional_id) is not meta
                ):
                    continue
                decision = fence_ongoing_transaction(
                    meta, now_ms=now, new_producer_id=self._producer_ids.generate
                )
                self._persist(meta, decision.persist)
                self._complete_end(meta)
                aborted += 1
        return aborted

    def expire_transactional_ids(self) -> int:
        """Remove ids idle past transactional.id.expiration.ms in Empty or Complete*, with a
        tombstone (§4.3). Returns how many."""
        now = self._clock_ms()
        expired = 0
        for transactional_id, meta in self._snapshot():
            with self._id_lock(transactional_id):
                if (
                    meta.state not in EXPIRATION_ALLOWED
                    or meta.pending is not None
                    or meta.txn_last_update_timestamp_ms > now - self._expiration_ms
                    or self._metadata.get(transactional_id) is not meta
                ):
                    continue
                meta.prepare_dead()
                try:
                    self._append(transactional_id, None)
                except BaseException:
                    meta.abandon_transition()
                    raise
                del self._metadata[transactional_id]
                if self._by_producer.get(meta.producer_id) is meta:
                    del self._by_producer[meta.producer_id]
                expired += 1
        return expired

    # --- an admin's abort of one partition's transaction (KIP-664, docs/coordinator.md §4.4) -

    def abort_partition_transaction(
        self, log: PartitionLog, producer_id: int, producer_epoch: int, coordinator_epoch: int
    ) -> None:
        """End the transaction `producer_id` holds open in `log` at `producer_epoch` (Kafka's
        AbortTransaction), once hanging_transactions.open_transaction accepts the request
        (its errors, nothing written). A producer no transactional id here owns gets an
        ABORT marker at the epoch above the data's (every end bumps it), carrying
        `coordinator_epoch`, as a Kafka leader writes an admin's WriteTxnMarkers. A producer
        an id owns is never aborted in one partition while the coordinator may still commit
        the rest: a transaction it tracks is aborted whole, as transaction.timeout.ms would
        (the producer fenced), and one it does not account for here is aborted as the
        orphan rule at load does. Returns once the marker is durable. Any thread."""
        meta = self._by_producer.get(producer_id)
        if meta is None:
            hanging_transactions.open_transaction(
                log, producer_id, producer_epoch, coordinator_epoch
            )
            self._markers.write(
                log, producer_id, producer_epoch + 1, False, coordinator_epoch=coordinator_epoch
            )
        else:
            with self._id_lock(meta.transactional_id):
                owned = self._metadata.get(meta.transactional_id) is meta
                if owned:
                    self._abort_owned(meta, log, producer_id, producer_epoch, coordinator_epoch)
            if not owned:  # the id expired meanwhile: the producer is no longer owned
                self.abort_partition_transaction(
                    log, producer_id, producer_epoch, coordinator_epoch
                )
                return
        self.sync_markers()

    def _abort_owned(
        self,
        meta: TransactionMetadata,
        log: PartitionLog,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
    ) -> None:
        """abort_partition_transaction for a producer `meta`'s id owns (id lock held)."""
        # First what every request for the id does: an end a failed marker write left in
        # Prepare* is finished, and may close the transaction asked about.
        self._finish_unfinished_end(meta)
        hanging_transactions.open_transaction(log, producer_id, producer_epoch, coordinator_epoch)
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            # Its markers are refused somewhere: an ABORT here could contradict a decided
            # commit (marker_checks would then refuse the next open).
            raise ConcurrentTransactionsError(
                f"{meta.transactional_id!r} is ending its transaction ({meta.state.kafka_name})"
            )
        if (
            meta.state is S.ONGOING
            and meta.producer_id == producer_id
            and meta.producer_epoch == producer_epoch
        ):
            decision = fence_ongoing_transaction(
                meta, now_ms=self._clock_ms(), new_producer_id=self._producer_ids.generate
            )
            self._persist(meta, decision.persist)
            self._complete_end(meta)
        if hanging_transactions.is_open(log, producer_id, producer_epoch):
            # Not among the partitions the coordinator knows for it (an orphan).
            self._abort_left_open(meta, log, producer_id, producer_epoch)

    # --- partition-leader verification (KIP-890 part 1, docs/coordinator.md §9.2) ---------------

    def verify_transaction(
        self, producer_id: int, producer_epoch: int, partition: PartitionKey
    ) -> None:
        """Check a transactional batch about to open a transaction on `partition`: its
        producer must be the current producer of a transactional id whose Ongoing
        transaction holds the partition. A delayed batch from an earlier transaction (an
        older epoch) raises InvalidProducerEpochError; one for a partition never added, or
        after the transaction ended, InvalidTxnStateError. Producers that are not the
        producer of any transactional id here are not checked. Any thread; takes no lock
        the partition log's writers hold (called under a partition lock), so it reads the
        metadata as it is at that moment."""
        try:
            meta = self._by_producer[producer_id]
        except KeyError:
            return
        if producer_epoch < meta.producer_epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id}: epoch {producer_epoch} is older than "
                f"{meta.producer_epoch} of {meta.transactional_id!r}"
            )
        if meta.state is not S.ONGOING or partition not in meta.partitions:
            raise InvalidTxnStateError(
                f"{meta.transactional_id!r}: {partition} is not in an ongoing transaction of "
                f"producer {producer_id} epoch {producer_epoch}"
            )

    # --- reading ---------------------------------------------------------------------------

    def stable_offsets(self, partitions: Iterable[PartitionKey]) -> dict[PartitionKey, int]:
        """The last stable offset of each partition, all taken at one moment when no
        transaction end is writing its markers: a consistent read_committed cut across
        partitions. (Markers reach a transaction's partitions one after another, so reading
        partitions one by one can see a transaction committed in one and not yet in another,
        as Kafka consumers can; reading each partition up to these offsets cannot.) Any
        thread; waits while an end is in progress."""
        logs = [(tp, self._log_of(*tp)) for tp in partitions]
        with self._ends_changed:
            self._ends_waiters += 1
            try:
                while self._ends_in_progress:
                    self._ends_changed.wait()
            finally:
                self._ends_waiters -= 1
            return {tp: log.last_stable_offset for tp, log in logs}

    def transaction_snapshots(
        self, transactional_ids: Iterable[str] | None = None
    ) -> dict[str, TransitionTarget]:
        """The present state of every id, or of those named that exist, each copied under its
        id lock, so never half-way through a change (for ListTransactions and
        DescribeTransactions). Any thread; waits while an id's change is being persisted."""
        if transactional_ids is None:
            transactional_ids = [transactional_id for transactional_id, _ in self._snapshot()]
        found = {}
        for transactional_id in transactional_ids:
            if transactional_id not in self._metadata:
                continue  # no lock made for an id never seen
            with self._id_lock(transactional_id):
                meta = self._metadata.get(transactional_id)
                if meta is not None:
                    found[transactional_id] = meta.current()
        return found

    def metadata(self, transactional_id: str) -> TransactionMetadata | None:
        """The id's metadata (for inspection and tests; do not change it)."""
        return self._metadata.get(transactional_id)

    # --- internals -------------------------------------------------------------------------

    def _id_lock(self, transactional_id: str) -> threading.RLock:
        # An id's lock, once made, is never replaced: read without the coordinator lock
        # (a dict read is atomic), which is taken only to make one. A subscript, not get():
        # no call on the path every request of an id takes.
        try:
            return self._id_locks[transactional_id]
        except KeyError:
            pass
        with self._lock:
            lock = self._id_locks.get(transactional_id)
            if lock is None:
                lock = self._id_locks[transactional_id] = threading.RLock()
            return lock

    def _snapshot(self) -> list[tuple[str, TransactionMetadata]]:
        with self._lock:
            return list(self._metadata.items())

    def _known(self, transactional_id: str, producer_id: int) -> TransactionMetadata:
        try:
            return self._metadata[transactional_id]
        except KeyError:
            raise InvalidProducerIdMappingError(
                f"{transactional_id}: no producer id is mapped to it (producer {producer_id})"
            ) from None

    def _persist(
        self,
        meta: TransactionMetadata,
        target: TransitionTarget | None,
        *,
        sync: bool = True,
        defer: bool = False,
    ) -> None:
        """Append the prepared target and (sync) make it durable, then apply it; abandon it
        if the append fails (the failure propagates). With `defer` the record is only
        queued: it is written in one batch with the next record appended to the same state
        partition (or at close), and applied now (see _write_markers for why that is safe
        for Complete*)."""
        if target is None:
            return
        value = log_value_bytes(target)
        if defer:
            state_log, key = self._placement(meta.transactional_id)
            with self._append_locks[state_log]:
                self._deferred.setdefault(state_log, []).append((key, value))
        else:
            try:
                self._append(meta.transactional_id, value, sync=sync)
            except BaseException:
                meta.abandon_transition()
                raise
        previous_producer_id = meta.producer_id
        meta.complete_transition(target)
        if (
            meta.producer_id != previous_producer_id
            and self._by_producer.get(previous_producer_id) is meta
        ):
            del self._by_producer[previous_producer_id]
        self._by_producer[meta.producer_id] = meta
        # Tested before changed: a set method is a call, and most transitions keep the id in
        # (or out of) the set.
        in_progress = self._in_progress
        if target.state in _IN_PROGRESS:
            if meta.transactional_id not in in_progress:
                in_progress.add(meta.transactional_id)
        elif meta.transactional_id in in_progress:
            in_progress.discard(meta.transactional_id)

    def _placement(self, transactional_id: str) -> tuple[PartitionLog, bytes]:
        """The id's `__transaction_state` partition and record key (computed once)."""
        try:
            return self._placements[transactional_id]
        except KeyError:
            state_log = self._state_logs[partition_for(transactional_id, len(self._state_logs))]
            placement = self._placements[transactional_id] = (
                state_log,
                encode_key(transactional_id),
            )
            return placement

    def _append(self, transactional_id: str, value: bytes | None, *, sync: bool = True) -> None:
        state_log, key = self._placement(transactional_id)
        with self._append_locks[state_log]:
            # The deferred records go first, in the same batch: one append for both. The
            # lock is held through the append so that no record of an id can overtake its
            # deferred one.
            deferred = self._deferred.pop(state_log, None)
            records = [(key, value)] if deferred is None else [*deferred, (key, value)]
            builder = codec.BatchBuilder()
            now = self._clock_ms()
            for record_key, record_value in records:
                builder.append(now, record_key, record_value)
            try:
                info = state_log.append_batch(builder.build())
            except BaseException:
                if deferred:
                    self._deferred.setdefault(state_log, [])[:0] = deferred
                raise
        if sync and self._durability == "commit":
            self._sync_state_log(state_log, info.last_offset + 1)

    def _write_deferred(self) -> None:
        """Append every deferred record now (at close)."""
        for state_log, lock in self._append_locks.items():
            with lock:
                records = self._deferred.pop(state_log, None)
                if not records:
                    continue
                builder = codec.BatchBuilder()
                now = self._clock_ms()
                for key, value in records:
                    builder.append(now, key, value)
                try:
                    state_log.append_batch(builder.build())
                except BaseException:
                    self._deferred[state_log] = records
                    raise

    def _sync_state_log(self, state_log: PartitionLog, through: int) -> None:
        """fsync `state_log` below `through`, the markers written so far first: a Complete*
        record in it must not be durable before its markers (group commit: a marker already
        durable costs nothing)."""
        self.sync_markers()
        state_log.flush_through(through)

    def close(self) -> None:
        """Write the deferred Complete* records and make every marker durable (under
        "commit"): the broker calls it before it closes (and so fsyncs) the logs, so no
        state log is made durable at close ahead of the markers it reports."""
        self._write_deferred()
        self.sync_markers()

    def sync_markers(self) -> None:
        """Make every marker written so far durable (under "commit", markers are written
        without an fsync of their own). Any thread."""
        self._markers.sync()

    def _finish_unfinished_end(self, meta: TransactionMetadata) -> None:
        """Finish an end that a crash or a failed marker write left in Prepare* (id lock
        held, so no end of this id is in progress). Kafka's coordinator keeps retrying such
        markers and answers CONCURRENT_TRANSACTIONS meanwhile; here the retry is made now,
        by the next request for the id: after a transient failure it completes and the id is
        usable again, and while a partition it needs is fail-stopped it raises that
        partition's KafkaStorageError at once, instead of CONCURRENT_TRANSACTIONS, which the
        client would retry until its timeout."""
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and meta.pending is None:
            self._complete_end(meta)

    def _complete_end(self, meta: TransactionMetadata, *, recovering: bool = False) -> None:
        """Write the markers of a transaction in Prepare*, then persist Complete*. A marker
        refused as stale means a newer producer or coordinator owns the transaction: the
        rest are not written and the transaction stays in Prepare* (§3.7)."""
        with self._ends_lock:
            self._ends_in_progress += 1
        try:
            self._write_markers(meta, recovering)
        finally:
            with self._ends_lock:
                self._ends_in_progress -= 1
                if self._ends_waiters:
                    self._ends_changed.notify_all()

    def _write_markers(self, meta: TransactionMetadata, recovering: bool) -> None:
        commit = meta.state is S.PREPARE_COMMIT
        bumped = meta.client_transaction_version >= TRANSACTION_VERSION_EPOCH_BUMP
        for topic, partition in sorted(meta.partitions):
            try:
                log = self._log_of(topic, partition)
            except UnknownTopicOrPartitionError:
                continue  # a deleted topic counts as done (§3.7 step 2)
            if recovering and marker_applied(
                log, meta.producer_id, meta.producer_epoch, epoch_bumped=bumped
            ):
                continue
            try:
                self._markers.write(
                    log, meta.producer_id, meta.producer_epoch, commit, epoch_bumped=bumped
                )
            except (InvalidProducerEpochError, TransactionCoordinatorFencedError):
                return
        # The end is decided once Prepare* is durable (Kafka's EndTxn answers then too).
        # Complete* is applied now but its record is deferred to the next append to this
        # state partition (the id's next AddPartitions, usually: one batch for both) or
        # close; under "commit" neither it nor the markers are fsynced here: the next fsync
        # of this state log syncs the markers first (_sync_state_log). Until Complete* is
        # durable the durable Prepare* stands for it: a crash before then is finished at
        # the next open by load(), which writes the missing markers again and persists
        # Complete*; a marker lost under a later surviving record is rewritten from the
        # Prepare* record (_end_unaccounted_transactions).
        self._persist(meta, meta.prepare_complete(self._clock_ms()), defer=True)
        if crashpoints.ARMED:
            crashpoints.hit("coordinator.complete.after")


def _check_transactional_id(transactional_id: object) -> None:
    if type(transactional_id) is str and transactional_id:
        return  # the common case, without isinstance's call
    if not isinstance(transactional_id, str) or not transactional_id:
        raise InvalidRequestError(f"invalid transactional id {transactional_id!r}")


def _still_open(log: PartitionLog, producer_id: int, marker_epoch: int, bumped: bool) -> bool:
    """Whether the producer's transaction in `log` still waits for the marker at
    `marker_epoch`: its data is there and no marker ended it."""
    entry = log.producer_state.entry(producer_id)
    if entry is None or entry.current_txn_first_offset == NO_OFFSET:
        return False
    return not marker_applied(log, producer_id, marker_epoch, epoch_bumped=bumped)
