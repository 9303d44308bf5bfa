"""The Broker: one process's ownership of a log directory (docs/api.md "Opening a log directory").

`eoslog.open(path)` takes the directory's exclusive `.lock`, loads (and after an unclean stop
recovers) every partition, and gives out PartitionLogs. `close()` flushes, writes Kafka's
checkpoints and the clean-shutdown marker, and releases the lock.

Thread safety: every public method may be called from any thread. Topic creation and
deletion serialize on the broker lock; appends and reads go to the partition logs, which have
their own locks.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final, TypeVar

from eoslog import tiering
from eoslog.broker_config import BROKER_DEFAULTS as BROKER_DEFAULTS
from eoslog.broker_config import parse_broker_config
from eoslog.clock import wall_clock_ms
from eoslog.coordinator.classic_groups import GroupSettings
from eoslog.coordinator.group_coordinator import GroupCoordinator
from eoslog.coordinator.producer_ids import ProducerIdManager
from eoslog.coordinator.transaction_coordinator import TransactionCoordinator
from eoslog.errors import (
    InvalidTopicError,
    KafkaException,
    KafkaStorageError,
    LogDirLockedError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from eoslog.fs import FileSystem, PosixFileSystem, make_directories, remove_tree
from eoslog.log import checkpoints, compactor, meta_file, recovery, topic_changes
from eoslog.log.append_signal import AppendSignal
from eoslog.log.checkpoints import AbortedCounts
from eoslog.log.config import LogConfig
from eoslog.log.dir_lock import LOCK_FILE as LOCK_FILE
from eoslog.log.dir_lock import lock_log_directory
from eoslog.log.meta_file import META_FILE, partition_count, validate_topic_name
from eoslog.log.meta_file import (
    TopicMetadata as TopicMetadata,  # re-exported: eoslog.TopicMetadata
)
from eoslog.log.partition import PartitionLog

if TYPE_CHECKING:
    from eoslog.client.admin import AdminClient
    from eoslog.client.consumer import Consumer
    from eoslog.client.producer import Producer
    from eoslog.serve.server import Server

_log = logging.getLogger(__name__)
_Client = TypeVar("_Client", "Consumer", "Producer")

DURABILITY_MODES: Final = ("commit", "always", "none")
TRANSACTION_STATE_TOPIC: Final = "__transaction_state"
CONSUMER_OFFSETS_TOPIC: Final = "__consumer_offsets"
INTERNAL_TOPICS: Final = (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC)
# Kafka compacts its internal topics and never deletes their records by age or size: the
# cleaner keeps each key's latest record (a transactional id's state, a group's committed
# offset) and the tombstones of expired ids and offsets remove them, so the logs, and the
# open's replay of them, follow the live state (log.retention.ms and .bytes apply to user
# topics only, whatever the broker's or an older eoslog.meta's settings).
_INTERNAL_CONFIG: Final[dict[str, int | float | str]] = {
    "cleanup.policy": "compact",
    "retention.ms": -1,
    "retention.bytes": -1,
}


class Broker:
    """An open log directory. Create with eoslog.open()."""

    def __init__(
        self,
        path: str,
        *,
        durability: str = "commit",
        config: Mapping[str, object] | None = None,
        fs: FileSystem | None = None,
        clock_ms: Callable[[], int] | None = None,
        background: bool = True,
        view: bool = False,
        archive: str | None = None,
    ) -> None:
        if durability not in DURABILITY_MODES:
            raise ValueError(f"durability must be one of {DURABILITY_MODES}, not {durability!r}")
        self.path = os.path.abspath(path)
        self.durability = durability
        # Rooted at the directory: nothing below it is reached through a symlink (eoslog.fs).
        # Ours to close: it keeps directory descriptors open (eoslog.fs.DIRECTORY_FDS_MAX).
        self._own_fs: PosixFileSystem | None = None
        if fs is None:
            fs = self._own_fs = PosixFileSystem(self.path)
        self.fs: FileSystem = fs
        self.clock_ms = clock_ms or wall_clock_ms
        # Where the maintenance pass archives the tiered topics (eoslog.tiering), or None.
        self.archive_url = archive
        self.settings, self.default_log_config = parse_broker_config(config or {})
        self._lock = threading.RLock()
        # Serializes the writers of the checkpoint files and the clean-shutdown marker (each
        # writes `<name>.tmp` and renames it; two at once would collide). eoslog.meta's
        # writers hold self._lock instead (_write_meta).
        self._checkpoint_lock = threading.Lock()
        self._checkpoints_final = False  # set by close() once the last checkpoints are written
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        # Every partition log bumps it when it publishes new data; consumers of this broker
        # wait on it instead of sleep-polling (eoslog.log.append_signal).
        self.append_signal = AppendSignal()
        self._topics: dict[str, TopicMetadata] = {}
        # Bumped by every topic creation, deletion and partition addition (under the lock): a
        # client compares it with the value its cached partition counts came from, as a Kafka
        # client refreshes its metadata, and learns a new or deleted topic (or a new partition)
        # at its next call.
        self.topics_version = 0
        self._next_producer_id_block = 0
        self._coordinator_epoch = 0
        self._closed = False
        self._closing = False
        # The consumers and producers this broker made, weakly: close() closes those still
        # alive, so that nothing they hold is dropped without a report.
        self._clients: list[weakref.ref[Consumer | Producer]] = []
        # The wire listeners serving this broker (serve()); close() closes them first.
        self._servers: list[Server] = []
        # Set when the directory may hold what a clean open must not trust (a topic creation
        # that could not be undone): close() then writes no clean-shutdown marker.
        self._storage_failure: KafkaStorageError | None = None
        try:
            make_directories(self.fs, self.path)
            self._dir_lock = lock_log_directory(self.fs, self.path)
        except LogDirLockedError:
            self._close_own_fs()
            raise
        except OSError as error:
            self._close_own_fs()
            raise KafkaStorageError(f"cannot open log directory {self.path}: {error}") from error
        try:
            self._load()
            self._producer_ids = ProducerIdManager(
                self._next_producer_id_block, self._persist_producer_id_block
            )
            self.groups = self._make_group_coordinator()
            self.transactions = self._open_transaction_coordinator(view)
            # After the transaction coordinator finished what a crash left in Prepare*: the
            # markers it wrote are in the log the group coordinator replays.
            self.groups.load()
        except OSError as error:
            self._release_after_failed_open()
            raise KafkaStorageError(f"loading {self.path} failed: {error}") from error
        except BaseException:
            self._release_after_failed_open()
            raise
        self._stop = threading.Event()
        # The last expiry of committed offsets; the first comes an interval after the open.
        self._offsets_checked_ms = self.clock_ms()
        self._maintenance: threading.Thread | None = None
        if background:
            self._maintenance = threading.Thread(
                target=self._maintenance_loop, name="eoslog-maintenance", daemon=True
            )
            self._maintenance.start()

    # --- loading ---------------------------------------------------------------------------

    def _make_group_coordinator(self) -> GroupCoordinator:
        partitions = self._topics[CONSUMER_OFFSETS_TOPIC].num_partitions
        return GroupCoordinator(
            offsets_logs=[self.log(CONSUMER_OFFSETS_TOPIC, p) for p in range(partitions)],
            log_of=self.log,
            partition_counts=self.partition_counts,
            clock_ms=self.clock_ms,
            durability=self.durability,
            offsets_retention_ms=self.settings["offsets.retention.minutes"] * 60_000,
            settings=GroupSettings(
                initial_rebalance_delay_ms=self.settings["group.initial.rebalance.delay.ms"],
                min_session_timeout_ms=self.settings["group.min.session.timeout.ms"],
                max_session_timeout_ms=self.settings["group.max.session.timeout.ms"],
            ),
        )

    def _open_transaction_coordinator(self, view: bool) -> TransactionCoordinator:
        """A coordinator epoch one above the last process's, persisted before any marker can
        carry it (docs/coordinator.md §2.3: each start is a new coordinator), then the state of
        `__transaction_state` loaded and unfinished ends finished (view: the command line's
        read-only view, eoslog.cli.output.reading_admin, whose writes stay in memory)."""
        self._coordinator_epoch += 1
        self._write_meta()
        partitions = self._topics[TRANSACTION_STATE_TOPIC].num_partitions
        coordinator = TransactionCoordinator(
            state_logs=[self.log(TRANSACTION_STATE_TOPIC, p) for p in range(partitions)],
            log_of=self.log,
            all_logs=lambda: list(self._logs.values()),
            producer_ids=self._producer_ids,
            coordinator_epoch=self._coordinator_epoch,
            clock_ms=self.clock_ms,
            durability=self.durability,
            txn_timeout_ms_max=self.settings["transaction.max.timeout.ms"],
            transactional_id_expiration_ms=self.settings["transactional.id.expiration.ms"],
            marker_listener=self.groups.on_marker,
        )
        coordinator.load(view=view)
        return coordinator

    def _load(self) -> None:
        # The metadata first: a malformed or forged file is refused before anything (the
        # clean-shutdown marker, a `-delete` directory) is changed.
        self._topics = self._read_meta()
        clean = checkpoints.take_clean_shutdown(self.fs, self.path)
        for entry in self.fs.list_directories(self.path):
            if topic_changes.DELETE_DIRECTORY.fullmatch(entry):
                remove_tree(self.fs, os.path.join(self.path, entry))
        recovery_points, recovery_problem = checkpoints.read_believed_offsets(
            self.fs, os.path.join(self.path, checkpoints.RECOVERY_POINT_FILE)
        )
        log_starts, log_start_problems = checkpoints.read_believed_log_starts(self.fs, self.path)
        aborted_counts, aborted_problem = checkpoints.read_believed_aborted_counts(
            self.fs, self.path
        )
        cleaned_ends, cleaner_problem = checkpoints.read_believed_offsets(
            self.fs, os.path.join(self.path, checkpoints.CLEANER_OFFSET_FILE)
        )
        problems = [
            p
            for p in (recovery_problem, *log_start_problems, aborted_problem, cleaner_problem)
            if p is not None
        ]
        topic_changes.stray_partition_directories(self.fs.list_directories(self.path), self._topics)
        for name, partitions, segment_key in (
            (
                TRANSACTION_STATE_TOPIC,
                "transaction.state.log.num.partitions",
                "transaction.state.log.segment.bytes",
            ),
            (CONSUMER_OFFSETS_TOPIC, "offsets.topic.num.partitions", "offsets.topic.segment.bytes"),
        ):
            if name not in self._topics:
                self._topics[name] = TopicMetadata(
                    name,
                    self.settings[partitions],
                    {"segment.bytes": self.settings[segment_key], **_INTERNAL_CONFIG},
                )
                self._write_meta()
        for metadata in self._topics.values():
            log_config = self._log_config_of(metadata)
            for partition in range(metadata.num_partitions):
                key = (metadata.name, partition)
                self._logs[key] = self._open_log(
                    metadata.name,
                    partition,
                    log_config,
                    clean,
                    recovery_points.get(key),
                    log_starts.get(key),
                    aborted_counts.get(key),
                    problems,
                    cleaned_ends.get(key, 0),
                )
        if any(key not in recovery_points or key not in aborted_counts for key in self._logs):
            # Every partition has a recovery-point entry and an aborted-transaction count from
            # its creation on, so that a missing one at a later open means a lost or damaged
            # checkpoint, not a young partition (eoslog.log.recovery then trusts no recovery
            # point, or rescans every segment to rebuild its .txnindex).
            self._write_recovery_points()

    def _log_config_of(self, metadata: TopicMetadata) -> LogConfig:
        """The topic's effective config: the broker's defaults, overridden by its own."""
        log_config = self.default_log_config.with_properties(metadata.config)
        if metadata.name in INTERNAL_TOPICS:
            # Whatever the broker's log.retention.* or an older eoslog.meta say.
            log_config = log_config.with_properties(_INTERNAL_CONFIG)
        return log_config

    def _open_log(
        self,
        topic: str,
        partition: int,
        config: LogConfig,
        clean: bool,
        recovery_point: int | None,
        log_start: checkpoints.LogStart | None,
        aborted_counts: AbortedCounts | None,
        checkpoint_problems: list[str] | None = None,
        cleaned_end: int = 0,
    ) -> PartitionLog:
        directory = os.path.join(self.path, f"{topic}-{partition}")
        if not self.fs.exists(directory):
            self.fs.mkdir(directory)
            self.fs.sync_dir(self.path)
        loaded = recovery.load(
            self.fs,
            directory,
            config,
            clean_shutdown=clean,
            recovery_point=recovery_point,
            log_start_offset=log_start,
            now_ms=self.clock_ms(),
            aborted_counts=aborted_counts,
            checkpoint_problems=checkpoint_problems or (),
            cleaned_end=cleaned_end,
        )
        return PartitionLog(
            self.fs,
            directory,
            topic,
            partition,
            config,
            clock_ms=self.clock_ms,
            durability=self.durability,
            loaded=loaded,
            persist_recovery_point=self._write_recovery_points,
            persist_log_start=self._write_log_start_offsets,
            persist_cleaned_end=self._write_cleaner_offsets,
            producer_expiration_ms=self.settings["producer.id.expiration.ms"],
            verify_transaction=self._verify_transaction,
            append_signal=self.append_signal,
        )

    def _read_meta(self) -> dict[str, TopicMetadata]:
        """The topics in eoslog.meta (none if it is missing), and the producer-id block and
        coordinator epoch it holds, every field checked (eoslog.log.meta_file)."""
        meta = meta_file.read(self.fs, os.path.join(self.path, META_FILE), self.default_log_config)
        if meta is None:
            return {}
        self._next_producer_id_block = meta.next_producer_id_block
        self._coordinator_epoch = meta.coordinator_epoch
        return meta.topics

    def _write_meta(self) -> None:
        """Replace eoslog.meta with the broker's state. Holds self._lock, which serializes
        every writer of the file (they share `eoslog.meta.tmp`)."""
        with self._lock:
            meta = meta_file.Meta(
                self._topics, self._next_producer_id_block, self._coordinator_epoch
            )
            meta_file.write(self.fs, os.path.join(self.path, META_FILE), meta)

    def _persist_producer_id_block(self, next_block_start: int) -> None:
        with self._lock:
            self._check_open()
            previous = self._next_producer_id_block
            self._next_producer_id_block = next_block_start
            try:
                self._write_meta()
            except OSError as error:
                self._next_producer_id_block = previous
                raise KafkaStorageError(
                    f"persisting the producer-id block in {self.path} failed: {error}"
                ) from error

    def _verify_transaction(self, producer_id: int, epoch: int, topic: str, partition: int) -> None:
        coordinator: TransactionCoordinator | None = getattr(self, "transactions", None)
        if coordinator is not None:
            coordinator.verify_transaction(producer_id, epoch, (topic, partition))

    def init_producer_id(self) -> tuple[int, int]:
        """(producer id, epoch 0) for an idempotent producer: a new id every call, never
        handed out before (docs/coordinator.md §5; Kafka's InitProducerId without a transactional
        id)."""
        return self._producer_ids.generate(), 0

    # --- topics ----------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        num_partitions: int | None = None,
        config: Mapping[str, object] | None = None,
    ) -> TopicMetadata:
        """Create a topic; TopicAlreadyExistsError if it exists, InvalidTopicError or
        InvalidConfigError for bad input (nothing is created then). KafkaStorageError if
        the storage fails midway: what was made is undone and the creation may be tried
        again; if undoing fails too, the broker fail-stops (close() raises and leaves the
        directory to be recovered at the next open)."""
        validate_topic_name(name)
        partitions = self.settings["num.partitions"] if num_partitions is None else num_partitions
        partition_count(partitions)
        properties = dict(config or {})
        log_config = self.default_log_config.with_properties(properties)
        stored = {
            key: value for key, value in log_config.to_properties().items() if key in properties
        }
        with self._lock:
            self._check_open()
            if name in self._topics:
                raise TopicAlreadyExistsError(f"topic {name!r} already exists")
            metadata = TopicMetadata(name, partitions, stored)
            try:
                self._make_topic(metadata, log_config)
            except BaseException as error:
                cause = KafkaStorageError(f"creating topic {name!r} failed: {error}")
                failure = self._undo_create_topic(name, partitions, cause)
                if isinstance(error, OSError) or failure is not cause:
                    raise failure from error
                raise
            return metadata

    def _make_topic(self, metadata: TopicMetadata, log_config: LogConfig) -> None:
        """eoslog.meta naming the new topic, then its partitions, then their recovery points
        (create_topic's lock held)."""
        name = metadata.name
        for partition in range(metadata.num_partitions):
            # A directory no topic owns (left by a failed create) must not be loaded.
            stale = os.path.join(self.path, f"{name}-{partition}")
            if self.fs.exists(stale):
                remove_tree(self.fs, stale)
        self._topics[name] = metadata
        self.topics_version += 1
        self._write_meta()
        for partition in range(metadata.num_partitions):
            self._logs[(name, partition)] = self._open_log(
                name, partition, log_config, True, 0, None, AbortedCounts(0, {})
            )
        # Recovery points of 0 for the new partitions before anything is written to them
        # (see _load).
        self._write_recovery_points()

    def _undo_create_topic(
        self, name: str, partitions: int, cause: KafkaStorageError
    ) -> KafkaStorageError:
        """Take back what a failed create_topic made: its logs, its eoslog.meta entry, then
        its directories, so that no half-created partition (an index preallocated but never
        written, say) is opened as cleanly shut down, and the creation can be tried again.
        If that fails too, the broker fail-stops: close() writes no clean-shutdown marker,
        and the next open recovers whatever was left (create_topic's lock held). Returns
        the error to raise: `cause`, or the fail-stop naming both failures."""
        for partition in range(partitions):
            log = self._logs.pop((name, partition), None)
            if log is not None:
                with contextlib.suppress(KafkaStorageError):
                    log.close()
        try:
            if self._topics.pop(name, None) is not None:
                self._write_meta()
            # Real directories only: a symlink planted at a partition's name (what refused
            # the creation, say) is not ours to follow or remove.
            directories = set(self.fs.list_directories(self.path))
            for partition in range(partitions):
                if f"{name}-{partition}" in directories:
                    remove_tree(self.fs, os.path.join(self.path, f"{name}-{partition}"))
            self.fs.sync_dir(self.path)
        except (OSError, KafkaStorageError) as error:
            self._storage_failure = KafkaStorageError(f"{cause}; undoing it failed: {error}")
            return self._storage_failure
        return cause

    def topic_metadata(self, name: str, *, auto_create: bool = False) -> TopicMetadata:
        """The topic's metadata (its properties: those set on it), as a Kafka Metadata request
        answers a client. An unknown topic is created first, with num.partitions partitions
        and the broker's log defaults, when the client allows it (`auto_create`: its
        allow.auto.create.topics) and so does the broker (auto.create.topics.enable), as
        Kafka's AutoTopicCreationManager does. Raises InvalidTopicError for an invalid name and
        UnknownTopicOrPartitionError for an unknown topic not created (nothing is created
        then), and create_topic's storage errors. Any thread: concurrent callers naming one
        new topic create it once."""
        with self._lock:
            self._check_open()
            metadata = self._topics.get(name)
            if metadata is not None:
                return metadata
            validate_topic_name(name)
            # The internal topics exist from the open on (_load); none is ever made here with
            # a user topic's settings.
            if not auto_create or not self.settings["auto.create.topics.enable"]:
                raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
            assert name not in INTERNAL_TOPICS, name
            return self.create_topic(name)

    def list_topics(self) -> dict[str, TopicMetadata]:
        with self._lock:
            return {
                name: TopicMetadata(
                    name,
                    meta.num_partitions,
                    self.default_log_config.with_properties(meta.config).to_properties(),
                )
                for name, meta in self._topics.items()
            }

    def partition_counts(self) -> dict[str, int]:
        """{topic: partition count} of the user topics (internal ones left out), cheaply:
        what group assignment and pattern subscriptions read at every rebalance."""
        with self._lock:
            return {
                name: meta.num_partitions
                for name, meta in self._topics.items()
                if name not in INTERNAL_TOPICS
            }

    def _user_topic(self, name: str, change: str) -> TopicMetadata:
        """The metadata of a user topic to change (broker lock held): InvalidTopicError for
        a bad name or an internal topic (the coordinators own those), else
        UnknownTopicOrPartitionError for an unknown one."""
        validate_topic_name(name)
        if name in INTERNAL_TOPICS:
            raise InvalidTopicError(f"{name} is an internal topic and cannot be {change}")
        self._check_open()
        metadata = self._topics.get(name)
        if metadata is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        return metadata

    def create_partitions(
        self, name: str, total: int, *, validate_only: bool = False
    ) -> TopicMetadata:
        """Kafka's CreatePartitions: grow the user topic to `total` partitions, crash-safely
        (eoslog.log.topic_changes); producers and subscribed groups pick them up at their
        next call (topics_version). Returns the new metadata. _user_topic's errors;
        InvalidPartitionsError unless total is above the count now; KafkaStorageError if
        the storage fails (the topic keeps its count). validate_only: check, change nothing."""
        with self._lock:
            current = self._user_topic(name, "given partitions")
            grown = topic_changes.grown_topic(current, total)
            if validate_only:
                return grown
            config = self._log_config_of(grown)

            def commit() -> None:
                self._topics[name] = grown
                try:
                    self._write_meta()
                except BaseException:
                    self._topics[name] = current
                    raise

            logs = topic_changes.add_partitions(
                self.fs,
                self.path,
                grown,
                current.num_partitions,
                lambda p: self._open_log(name, p, config, True, 0, None, AbortedCounts(0, {})),
                commit,
            )
            self._logs.update(((name, partition), log) for partition, log in logs.items())
            self.topics_version += 1
            self._write_recovery_points()  # as for a new topic (see _load)
            return grown

    def alter_topic_config(
        self, name: str, changes: Mapping[str, object | None], *, validate_only: bool = False
    ) -> TopicMetadata:
        """Kafka's IncrementalAlterConfigs for a user topic: each key set to its value, or
        given None, back to the broker's default. Checked as create_topic checks a config
        (InvalidConfigError naming the key; nothing changed), persisted in eoslog.meta (one
        atomic rename), then taken by every partition log at once (PartitionLog.reconfigure).
        Returns the new metadata; _user_topic's errors; KafkaStorageError."""
        with self._lock:
            current = self._user_topic(name, "reconfigured")
            altered, config = topic_changes.altered_config(
                current, self.default_log_config, changes
            )
            if validate_only:
                return altered
            self._topics[name] = altered
            try:
                self._write_meta()
            except OSError as error:
                self._topics[name] = current
                raise KafkaStorageError(f"altering topic {name!r} failed: {error}") from error
            for partition in range(altered.num_partitions):
                self._logs[(name, partition)].reconfigure(config)
            return altered

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """Kafka's DeleteRecords on a user topic's partition (PartitionLog.delete_records):
        its log start moved up to `offset` (-1: the high watermark), durable before this
        returns. Returns the new log start; _user_topic's errors, OffsetOutOfRangeError."""
        with self._lock:
            self._user_topic(topic, "trimmed")
        return self.log(topic, partition).delete_records(offset)

    def delete_topic(self, name: str) -> None:
        """Delete a user topic and its files; internal topics cannot be deleted."""
        with self._lock:
            metadata = self._user_topic(name, "deleted")
            logs = [self._logs.pop((name, p)) for p in range(metadata.num_partitions)]
            for log in logs:
                log.close()
            try:
                # Rename first: a crash from here on leaves `-delete` directories, which the
                # next open sweeps, never a stale directory a re-created topic would load.
                doomed = []
                for log in logs:
                    target = os.path.join(
                        self.path, topic_changes.delete_directory_name(name, log.partition)
                    )
                    self.fs.rename(log.directory, target)
                    doomed.append(target)
                self.fs.sync_dir(self.path)
                del self._topics[name]
                self.topics_version += 1
                self._write_meta()
                for directory in doomed:
                    remove_tree(self.fs, directory)
                self.fs.sync_dir(self.path)
            except OSError as error:
                raise KafkaStorageError(f"deleting topic {name!r} failed: {error}") from error

    def log(self, topic: str, partition: int) -> PartitionLog:
        """The partition's log; UnknownTopicOrPartitionError if there is none."""
        try:
            return self._logs[(topic, partition)]  # a subscript, not get(): no call
        except KeyError:
            raise UnknownTopicOrPartitionError(
                f"unknown topic or partition {topic}-{partition}"
            ) from None

    def consumer(self, config: Mapping[str, object] | None = None) -> Consumer:
        """A Consumer over this broker's partitions (docs/api.md "Consumer"); InvalidConfigError
        for a bad or unknown key. Used from one thread; close it before the broker."""
        # The client layer sits above the broker: imported here, so that eoslog.broker
        # loads without it.
        from eoslog.client.consumer import Consumer

        self._check_open()
        return self._track(Consumer(self, config))

    def producer(self, config: Mapping[str, object] | None = None) -> Producer:
        """A confluent-kafka-style Producer writing to this broker's logs (docs/api.md "Producer";
        keys in eoslog.client.producer_config). InvalidConfigError for a bad config, before
        anything is created."""
        from eoslog.client.producer import Producer

        self._check_open()
        return self._track(Producer(self, config))

    def admin(self, config: Mapping[str, object] | None = None) -> AdminClient:
        """confluent_kafka.admin.AdminClient's calls on this broker (eoslog.client.admin).
        Holds nothing open: it needs no close."""
        from eoslog.client.admin import AdminClient

        self._check_open()
        return AdminClient(self, config)

    def serve(
        self, address: str = "127.0.0.1:9092", config: Mapping[str, object] | None = None
    ) -> Server:
        """Serve this broker to Kafka clients in other processes over the Kafka wire protocol,
        from a background thread, until the Server's close() or this broker's (docs/api.md
        "Wire protocol"); this process keeps its own clients. `address` is "HOST:PORT"
        (port 0: a free one; Server.address says which), optionally prefixed by the
        listener's protocol as in Kafka's `listeners` ("SASL_SSL://0.0.0.0:9093"); `config`
        holds its TLS files and SASL users (eoslog.serve.security). A non-loopback host
        without TLS or SASL logs a warning. Raises ValueError for a malformed address,
        InvalidConfigError for a bad config and OSError when it cannot bind."""
        from eoslog.serve.security import security, split_listener
        from eoslog.serve.server import Server

        protocol, address = split_listener(address)
        settings = security(protocol, config)
        with self._lock:
            self._check_open()
            if self._closing:  # close() has taken the list of servers to close
                raise KafkaStorageError(f"broker for {self.path} is closing")
            server = Server(self, address, settings)
            self._servers.append(server)
            return server

    def _track(self, client: _Client) -> _Client:
        with self._lock:
            self._clients = [ref for ref in self._clients if ref() is not None]
            self._clients.append(weakref.ref(client))
        return client

    # --- maintenance and shutdown -----------------------------------------------------------

    def run_maintenance(self) -> None:
        """One pass of background work: retention, the log cleaner (compacted topics,
        log.cleaner.io.max.bytes.per.second) and the rebuild of index files that lookups
        found wrong, then the recovery-point checkpoint.
        The maintenance thread calls it every log.retention.check.interval.ms; tests call it
        directly with an injected clock. Safe from any thread, concurrently with the
        maintenance thread: the checkpoint writers serialize on the checkpoint lock."""
        with self._lock:
            self._check_open()
            logs = list(self._logs.values())
        if self.archive_url is not None:
            tiering.archive_pass(self.path, self.archive_url, logs)
        throttle = compactor.Throttle(
            self.settings["log.cleaner.io.max.bytes.per.second"], self._stop.wait
        )
        for log in logs:
            log.delete_retained_segments()
            self._clean(log, throttle)
            log.rebuild_suspect_indexes()
            log.remove_expired_producers()
        self.run_transaction_maintenance()
        try:
            written = self._write_checkpoints(logs)
        except OSError as error:
            # A failed fsync is fatal for the broker (docs/design.md "Durability"): stop every
            # partition, so nothing is acknowledged after it.
            failure = KafkaStorageError(f"writing checkpoints in {self.path} failed: {error}")
            for log in logs:
                log.fail_stop(failure)
            raise failure from error
        if not written:
            self._check_open()  # close() ran meanwhile and wrote the final checkpoints

    def _clean(self, log: PartitionLog, throttle: compactor.Throttle) -> None:
        """The log cleaner's pass over one log (eoslog.log.compactor), off the append path.
        Damage in a segment to clean is left for the reads and `eoslog verify` to report."""
        try:
            compactor.clean_log(log, self.clock_ms(), throttle)
        except ValueError as error:  # CorruptRecordError too
            _log.warning("not cleaning %s-%d: %s", log.topic, log.partition, error)

    def run_transaction_maintenance(self) -> None:
        """Abort transactions past their timeout and expire idle transactional ids
        (docs/coordinator.md §4), remove group members past their max.poll.interval.ms, and
        every offsets.retention.check.interval.ms expire committed offsets (§6.5). The
        maintenance thread calls it every
        transaction.abort.timed.out.transaction.cleanup.interval.ms."""
        self._check_open()
        self.transactions.abort_timed_out_transactions()
        self.transactions.expire_transactional_ids()
        self.groups.expire_members()
        now = self.clock_ms()
        if now - self._offsets_checked_ms >= self.settings["offsets.retention.check.interval.ms"]:
            self._offsets_checked_ms = now
            self.groups.expire_offsets()

    def _maintenance_loop(self) -> None:
        """Two schedules on one thread: the log pass every log.retention.check.interval.ms,
        the transaction pass every transaction.abort.timed.out.transaction.cleanup.interval.ms
        (both measured on the broker's clock, so tests can drive them)."""
        log_interval_ms = self.settings["log.retention.check.interval.ms"]
        txn_interval_ms = self.settings[
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"
        ]
        tick_s = min(log_interval_ms, txn_interval_ms, 1000) / 1000
        last_log = last_txn = self.clock_ms()
        while not self._stop.wait(tick_s):
            now = self.clock_ms()
            try:
                if now - last_log >= log_interval_ms:
                    last_log = last_txn = now
                    self.run_maintenance()
                elif now - last_txn >= txn_interval_ms:
                    last_txn = now
                    self.run_transaction_maintenance()
            except KafkaStorageError:
                return  # fail-stop: the failure is reported to the next writer
            except KafkaException:
                continue  # a transaction being changed meanwhile: the next pass retries

    def _write_recovery_points(self) -> None:
        """Write the recovery-point checkpoint from every log's value now. The values are read
        under the checkpoint lock, so a checkpoint written by the maintenance thread can never
        replace a lowered value (truncate_to) with one read before it was lowered."""
        with self._checkpoint_lock:
            if self._checkpoints_final:
                raise KafkaStorageError(f"broker for {self.path} is closed")
            self._write_recovery_points_locked()

    def _write_recovery_points_locked(self) -> None:
        """The aborted-transaction checkpoint first: its counts are taken at recovery points
        read now, so a crash before the recovery-point checkpoint is written leaves counts
        covering at most what the next open trusts or rescans (eoslog.log.recovery)."""
        logs = list(self._logs.values())
        checkpoints.write_aborted_counts(
            self.fs, self.path, {(log.topic, log.partition): log.aborted_counts() for log in logs}
        )
        checkpoints.write_offsets(
            self.fs,
            os.path.join(self.path, checkpoints.RECOVERY_POINT_FILE),
            {(log.topic, log.partition): log.recovery_point for log in logs},
        )

    def _write_checkpoints(self, logs: list[PartitionLog], *, final: bool = False) -> bool:
        """Write both checkpoints, under the checkpoint lock (every writer of either file
        holds it: they share the `.tmp` names). With final (close), then the clean-shutdown
        marker, after which no checkpoint is written again: False, writing nothing, once
        close() got there first."""
        with self._checkpoint_lock:
            if self._checkpoints_final:
                return False
            self._write_recovery_points_locked()
            self._write_log_start_offsets_locked(logs)
            self._write_cleaner_offsets_locked(logs)
            if final:
                checkpoints.write_clean_shutdown(self.fs, self.path)
                self._checkpoints_final = True
            return True

    def _write_log_start_offsets(self) -> None:
        """Write the log-start checkpoint from every log's value now: a log start moved by
        delete_records is durable before the request is answered."""
        with self._checkpoint_lock:
            if self._checkpoints_final:
                raise KafkaStorageError(f"broker for {self.path} is closed")
            self._write_log_start_offsets_locked(list(self._logs.values()))

    def _write_cleaner_offsets(self) -> None:
        """Write the cleaner-offset-checkpoint from every log's value now: the cleaner calls
        it (PartitionLog.raise_cleaned_end) before it swaps in a segment with gaps."""
        with self._checkpoint_lock:
            if self._checkpoints_final:
                raise KafkaStorageError(f"broker for {self.path} is closed")
            self._write_cleaner_offsets_locked(list(self._logs.values()))

    def _write_cleaner_offsets_locked(self, logs: list[PartitionLog]) -> None:
        """Only once some log was cleaned (or the file exists): a broker that never cleans
        writes no such file. Rewritten at each pass so that no entry outlives its topic."""
        path = os.path.join(self.path, checkpoints.CLEANER_OFFSET_FILE)
        cleaned = {(log.topic, log.partition): log.cleaned_end for log in logs if log.cleaned_end}
        if cleaned or self.fs.exists(path):
            checkpoints.write_offsets(self.fs, path, cleaned)

    def _write_log_start_offsets_locked(self, logs: list[PartitionLog]) -> None:
        checkpoints.write_log_starts(
            self.fs,
            self.path,
            {
                (log.topic, log.partition): log.log_start_offset
                for log in logs
                if log.log_start_offset > log.segments[0].base_offset
            },
        )

    def close(self, timeout: float | None = None) -> None:
        """Close the wire listeners (serve()), then the consumers this broker made that are
        still open (auto-committing their positions, leaving their groups), then its
        producers (each aborts an open transaction and flushes within `timeout` seconds,
        None: no limit; what it cannot write is reported to its delivery callbacks with
        KafkaError._PURGE_QUEUE, never dropped silently); then flush every log, write the
        checkpoints and the clean-shutdown marker, release the lock. A broker whose
        storage failed closes without the marker, so the next open recovers. A client's
        failure to close is logged, not raised: the broker still closes."""
        with self._lock:
            if self._closed or self._closing:
                return
            self._closing = True
            clients = [c for c in (ref() for ref in self._clients) if c is not None]
            servers = list(self._servers)
        # The listeners first: no request from another process starts while this closes.
        for server in servers:
            server.close()
        self._close_clients(clients, timeout)
        with self._lock:
            self._closed = True
        self._stop.set()
        if self._maintenance is not None:
            self._maintenance.join()
        logs = list(self._logs.values())
        failure = self._storage_failure
        try:
            # Deferred coordinator records written, and markers made durable before the
            # state logs that report them (each log's close fsyncs it).
            self.transactions.close()
        except KafkaStorageError as error:
            failure = failure or error
        for log in logs:
            try:
                log.close()
            except KafkaStorageError as error:
                failure = failure or error
        try:
            if failure is None:
                self._write_checkpoints(logs, final=True)
        except OSError as error:
            failure = KafkaStorageError(f"closing {self.path} failed: {error}")
        finally:
            # A run_maintenance() in another thread must not write checkpoints into a
            # directory this process no longer owns.
            with self._checkpoint_lock:
                self._checkpoints_final = True
            self._dir_lock.release()
            self._close_own_fs()
        if failure is not None:
            # Not marked clean: the next open recovers. The caller learns that the last
            # writes may not be durable.
            raise failure

    @staticmethod
    def _close_clients(clients: list[Consumer | Producer], timeout: float | None) -> None:
        from eoslog.client.consumer import Consumer

        # Consumers first: their auto-commit and group leave may end what a producer's
        # transaction is waiting on, never the other way round.
        for client in sorted(clients, key=lambda client: not isinstance(client, Consumer)):
            try:
                client.close() if isinstance(client, Consumer) else client.close(timeout)
            except Exception:  # the broker closes whatever one client does
                _log.exception("closing %r with its broker failed", client)

    def _release_after_failed_open(self) -> None:
        for log in self._logs.values():
            with contextlib.suppress(KafkaStorageError):
                log.close()
        self._dir_lock.release()
        self._close_own_fs()

    def _close_own_fs(self) -> None:
        """Release the directory descriptors of the file system this broker made (a reader
        still using it after close reopens what it needs)."""
        if self._own_fs is not None:
            self._own_fs.close()

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"broker for {self.path} is closed")

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def open(
    path: str,
    durability: str = "commit",
    config: Mapping[str, object] | None = None,
    *,
    fs: FileSystem | None = None,
    clock_ms: Callable[[], int] | None = None,
    background: bool = True,
    archive: str | None = None,
) -> Broker:
    """Open (creating if missing) a log directory; LogDirLockedError if another live process
    owns it. fs and clock_ms are seams for tests (a recording file system, a driven clock).
    archive: a path or URL the maintenance pass copies the segments of topics with
    `remote.storage.enable` to (eoslog.tiering; docs/api.md "Command line", eoslog archive)."""
    return Broker(
        path,
        durability=durability,
        config=config,
        fs=fs,
        clock_ms=clock_ms,
        background=background,
        archive=archive,
    )
