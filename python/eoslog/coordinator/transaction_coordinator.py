"""The transaction coordinator of one Broker (COORDINATOR.md §0-§4; DESIGN.md "Transactions").

It owns one TransactionMetadata per transactional id. Every change is decided on the metadata
(eoslog.coordinator.transaction_decisions), appended to `__transaction_state` in Kafka's record
format and made durable per the broker's durability mode, and only then applied in memory
(two phases: prepare, persist, complete; a failed append abandons the prepared change). The end
of a transaction is Prepare{Commit,Abort} persisted, then a COMMIT or ABORT marker carrying the
coordinator epoch appended to every partition of the transaction, then Complete{Commit,Abort}.

At open the coordinator epoch is one more than the last process's (persisted by the broker),
the state is rebuilt from `__transaction_state` (the last record per id wins; a tombstone
deletes), and every transaction found in Prepare* is finished: its markers are written again
(a marker sent twice is accepted as a retry by the partition log) and Complete* persisted.
Ongoing transactions stay open until they time out or their id re-initializes.

Thread safety: every public method may be called from any thread. Work on one transactional
id serializes on that id's lock, held across the append and the markers, so an id's changes
are applied in the order they are persisted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from eoslog import crashpoints
from eoslog.coordinator import log_replay
from eoslog.coordinator.producer_ids import ProducerIdManager
from eoslog.coordinator.transaction_decisions import (
    Decision,
    check_transaction_timeout,
    decide_add_partitions,
    decide_end_txn,
    decide_init_producer_id,
    fence_ongoing_transaction,
)
from eoslog.coordinator.transaction_log import (
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from eoslog.coordinator.transaction_metadata import (
    TransactionMetadata,
    log_value_of,
    metadata_from_log,
)
from eoslog.coordinator.transaction_state import (
    EXPIRATION_ALLOWED,
    TRANSACTION_VERSION_EPOCH_BUMP,
    TopicPartition,
    TransactionState,
    TransitionTarget,
)
from eoslog.errors import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTxnStateError,
    KafkaException,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
)
from eoslog.record import codec

if TYPE_CHECKING:
    from eoslog.log.partition import PartitionLog

S = TransactionState
LogOf = Callable[[str, int], "PartitionLog"]
# Told of every marker written: (topic, partition, producer id, commit, marker offset).
MarkerListener = Callable[[str, int, int, bool, int], None]


class TransactionCoordinator:
    """Transactions for one broker (see the module doc)."""

    def __init__(
        self,
        *,
        state_logs: list[PartitionLog],
        log_of: LogOf,
        producer_ids: ProducerIdManager,
        coordinator_epoch: int,
        clock_ms: Callable[[], int],
        durability: str,
        txn_timeout_ms_max: int,
        transactional_id_expiration_ms: int,
        marker_listener: MarkerListener | None = None,
    ) -> None:
        self._state_logs = state_logs
        # The group coordinator: a marker in `__consumer_offsets` ends pending offsets.
        self._marker_listener = marker_listener
        self._log_of = log_of
        self._producer_ids = producer_ids
        self.coordinator_epoch = coordinator_epoch
        self._clock_ms = clock_ms
        self._durability = durability
        self._txn_timeout_ms_max = txn_timeout_ms_max
        self._expiration_ms = transactional_id_expiration_ms
        self._lock = threading.Lock()
        # Transaction ends writing markers now; stable_offsets waits for none.
        self._ends_in_progress = 0
        self._ends_changed = threading.Condition()
        self._metadata: dict[str, TransactionMetadata] = {}
        # The metadata by its current producer id, for verify_transaction (lock-free reads).
        self._by_producer: dict[int, TransactionMetadata] = {}
        self._id_locks: dict[str, threading.RLock] = {}

    # --- loading ---------------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild the metadata from `__transaction_state`, then finish every transaction a
        crash left in Prepare*."""
        for state_log in self._state_logs:
            for key, value in _records(state_log):
                transactional_id = decode_key(key)
                decoded = decode_value(value)
                if decoded is None:
                    self._metadata.pop(transactional_id, None)
                else:
                    self._metadata[transactional_id] = metadata_from_log(transactional_id, decoded)
        self._by_producer = {meta.producer_id: meta for meta in self._metadata.values()}
        for transactional_id, meta in list(self._metadata.items()):
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                with self._id_lock(transactional_id):
                    self._complete_end(meta)

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
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and meta.pending is None:
                self._complete_end(meta)  # an end a crash or a failed marker left unfinished
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
        partitions: Iterable[TopicPartition],
    ) -> None:
        """Add partitions to the open transaction, or open one (§3.3; the implicit add of
        transactions v2). UnknownTopicOrPartitionError, adding nothing, for a partition the
        broker does not have."""
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
                client_transaction_version=TRANSACTION_VERSION_EPOCH_BUMP,
            )
            self._persist(meta, decision.persist)

    def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> tuple[int, int]:
        """EndTxn under transactions v2 (§3.6): Prepare* persisted, the markers written, then
        Complete* persisted. Returns the (producer id, epoch) the producer uses next: every
        end bumps the epoch, so nothing from this transaction can land in the next."""
        _check_transactional_id(transactional_id)
        with self._id_lock(transactional_id):
            meta = self._known(transactional_id, producer_id)
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
            self._persist(meta, decision.persist)
            crashpoints.hit("coordinator.prepare.after")
            self._complete_end(meta)
            return decision.producer_id, decision.producer_epoch

    # --- background work (§4) --------------------------------------------------------------

    def abort_timed_out_transactions(self) -> int:
        """Abort, with an epoch bump, every Ongoing transaction older than its timeout
        (§4.1). Returns how many were aborted."""
        now = self._clock_ms()
        aborted = 0
        for transactional_id, meta in self._snapshot():
            with self._id_lock(transactional_id):
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

    # --- partition-leader verification (KIP-890 part 1, COORDINATOR.md §9.2) ---------------

    def verify_transaction(
        self, producer_id: int, producer_epoch: int, partition: TopicPartition
    ) -> None:
        """Check a transactional batch about to open a transaction on `partition`: its
        producer must be the current producer of a transactional id whose Ongoing
        transaction holds the partition. A delayed batch from an earlier transaction (an
        older epoch) raises InvalidProducerEpochError; one for a partition never added, or
        after the transaction ended, InvalidTxnStateError. Producers that are not the
        producer of any transactional id here are not checked. Any thread; takes no lock
        the partition log's writers hold (called under a partition lock), so it reads the
        metadata as it is at that moment."""
        meta = self._by_producer.get(producer_id)
        if meta is None:
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

    def stable_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The last stable offset of each partition, all taken at one moment when no
        transaction end is writing its markers: a consistent read_committed cut across
        partitions. (Markers reach a transaction's partitions one after another, so reading
        partitions one by one can see a transaction committed in one and not yet in another,
        as Kafka consumers can; reading each partition up to these offsets cannot.) Any
        thread; waits while an end is in progress."""
        logs = [(tp, self._log_of(*tp)) for tp in partitions]
        with self._ends_changed:
            while self._ends_in_progress:
                self._ends_changed.wait()
            return {tp: log.last_stable_offset for tp, log in logs}

    def metadata(self, transactional_id: str) -> TransactionMetadata | None:
        """The id's metadata (for inspection and tests; do not change it)."""
        return self._metadata.get(transactional_id)

    # --- internals -------------------------------------------------------------------------

    def _id_lock(self, transactional_id: str) -> threading.RLock:
        with self._lock:
            lock = self._id_locks.get(transactional_id)
            if lock is None:
                lock = self._id_locks[transactional_id] = threading.RLock()
            return lock

    def _snapshot(self) -> list[tuple[str, TransactionMetadata]]:
        with self._lock:
            return list(self._metadata.items())

    def _known(self, transactional_id: str, producer_id: int) -> TransactionMetadata:
        meta = self._metadata.get(transactional_id)
        if meta is None:
            raise InvalidProducerIdMappingError(
                f"{transactional_id}: no producer id is mapped to it (producer {producer_id})"
            )
        return meta

    def _persist(
        self, meta: TransactionMetadata, target: TransitionTarget | None, *, sync: bool = True
    ) -> None:
        """Append the prepared target and (sync) make it durable, then apply it; abandon it
        if the append fails (the failure propagates)."""
        if target is None:
            return
        try:
            self._append(meta.transactional_id, encode_value(log_value_of(target)), sync=sync)
        except BaseException:
            meta.abandon_transition()
            raise
        previous_producer_id = meta.producer_id
        meta.complete_transition(target)
        if self._by_producer.get(previous_producer_id) is meta:
            del self._by_producer[previous_producer_id]
        self._by_producer[meta.producer_id] = meta

    def _append(self, transactional_id: str, value: bytes | None, *, sync: bool = True) -> None:
        state_log = self._state_logs[partition_for(transactional_id, len(self._state_logs))]
        builder = codec.BatchBuilder()
        builder.append(self._clock_ms(), encode_key(transactional_id), value)
        info = state_log.append_batch(builder.build())
        if sync and self._durability == "commit":
            state_log.flush_through(info.last_offset + 1)

    def _complete_end(self, meta: TransactionMetadata) -> None:
        """Write the markers of a transaction in Prepare*, then persist Complete*. A marker
        refused as stale means a newer producer or coordinator owns the transaction: the
        rest are not written and the transaction stays in Prepare* (§3.7)."""
        with self._ends_changed:
            self._ends_in_progress += 1
        try:
            self._write_markers(meta)
        finally:
            with self._ends_changed:
                self._ends_in_progress -= 1
                self._ends_changed.notify_all()

    def _write_markers(self, meta: TransactionMetadata) -> None:
        commit = meta.state is S.PREPARE_COMMIT
        for topic, partition in sorted(meta.partitions):
            try:
                log = self._log_of(topic, partition)
            except UnknownTopicOrPartitionError:
                continue  # a deleted topic counts as done (§3.7 step 2)
            crashpoints.hit("marker.before")
            try:
                marker_offset = log.append_marker(
                    meta.producer_id, meta.producer_epoch, self.coordinator_epoch, commit
                )
            except (InvalidProducerEpochError, TransactionCoordinatorFencedError):
                return
            if self._marker_listener is not None:
                self._marker_listener(topic, partition, meta.producer_id, commit, marker_offset)
            crashpoints.hit("marker.after")
        # Complete* is not synced of its own: until it is durable (the next record of this
        # state partition synced, or a clean close) the durable Prepare* stands for it, and
        # a crash before then is finished at the next open by load(), which writes the
        # markers again (accepted as retries) and persists Complete*. The markers and
        # Prepare* the outcome depends on are durable before this point.
        self._persist(meta, meta.prepare_complete(self._clock_ms()), sync=False)
        crashpoints.hit("coordinator.complete.after")


def _check_transactional_id(transactional_id: object) -> None:
    if not isinstance(transactional_id, str) or not transactional_id:
        raise InvalidRequestError(f"invalid transactional id {transactional_id!r}")


def _records(state_log: PartitionLog) -> Iterator[tuple[bytes, bytes | None]]:
    """Every (key, value) of a `__transaction_state` partition, in log order."""
    for header, records in log_replay.batches(state_log):
        if header.is_control:
            continue
        for record in records:
            if record.key is None:
                raise KafkaException(f"a {state_log.topic} record without a key")
            yield record.key, record.value
