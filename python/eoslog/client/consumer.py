"""The Consumer (docs/api.md "Consumer"): confluent-kafka-python's assign / poll / consume / seek /
position / get_watermark_offsets over one Broker's partition logs, consume_arrow for columnar
reads in the Spark Kafka source's schema, and consumer groups: subscribe / commit / committed
/ consumer_group_metadata.

The Consumer is the API; its parts are modules of their own, along the seams of Kafka's Java
consumer: the configuration (eoslog.client.consumer_config), the fetcher, which holds the
assigned partitions' positions and fetched records and reads the logs (eoslog.client.fetcher,
docs/design.md "Fetch"), the assignment, which keeps those partitions and the order they are
served in (eoslog.client.assignment), the loop poll(), consume() and consume_arrow() run, which
also waits for new data without sleep-polling (eoslog.client.read_loop), and the group
membership (eoslog.client.group_member), whose steps return the Rebalance the consumer
applies.

Thread safety: like confluent's, a Consumer is used from one thread. Appends from other
threads (or the same one) are safe: reads take no lock and see only whole batches.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa

from eoslog import arguments, limits
from eoslog.client import offset_store
from eoslog.client.assignment import Assignment, PartitionKey, first_duplicate
from eoslog.client.consumer_config import ConsumerConfig
from eoslog.client.fetcher import AssignedPartition, Fetcher
from eoslog.client.group_member import GroupMember, Rebalance, RebalanceCallback
from eoslog.client.message import (
    OFFSET_INVALID,
    Message,
    TopicPartition,
    topic_partition,
    topic_partitions,
)
from eoslog.client.metadata import ClusterMetadata, MetadataSource, cluster_metadata
from eoslog.client.read_loop import ReadLoop, Step
from eoslog.coordinator.group_coordinator import ConsumerGroupMetadata
from eoslog.errors import (
    InvalidGroupIdError,
    KafkaError,
    KafkaException,
    UnknownTopicOrPartitionError,
)

if TYPE_CHECKING:
    from eoslog.coordinator.group_coordinator import GroupCoordinator
    from eoslog.log.append_signal import AppendSignal
    from eoslog.log.meta_file import TopicMetadata
    from eoslog.log.partition import PartitionLog


class LogSource(MetadataSource, Protocol):
    """What the consumer needs of the Broker."""

    groups: GroupCoordinator
    append_signal: AppendSignal

    def log(self, topic: str, partition: int) -> PartitionLog: ...

    def partition_counts(self) -> dict[str, int]: ...

    def topic_metadata(self, name: str, *, auto_create: bool = False) -> TopicMetadata: ...

    def clock_ms(self) -> int: ...


class Consumer:
    """Reads records from assigned or subscribed partitions (confluent_kafka.Consumer).

    Create with Broker.consumer(config). Config keys: `group.id` (needed by subscribe,
    commit, committed and consumer_group_metadata), `isolation.level` (read_committed, the
    default, or read_uncommitted), `auto.offset.reset` (earliest | latest | error, and Kafka's
    aliases smallest, beginning, largest, end; default latest as in Kafka; used where the group
    has no committed offset), `enable.auto.commit` (default true: the stored offsets are
    committed every `auto.commit.interval.ms`, default 5000, at a poll, before partitions are
    revoked or unassigned and at close), `enable.auto.offset.store` (default true: each
    delivered record's offset + 1 is stored; false: only store_offsets() stores),
    `max.poll.interval.ms` (default 300000: a member that does not poll for
    that long is removed from its group), `partition.assignment.strategy` ("range",
    "roundrobin" or a comma-separated preference list; default "range,roundrobin"),
    `allow.auto.create.topics` (default false, as librdkafka's: when true, subscribe() and
    assign() create a named topic that does not exist yet, with the broker's num.partitions,
    if its auto.create.topics.enable allows), `check.crcs` (default true), `fetch.max.bytes`,
    `max.partition.fetch.bytes`, `on_commit` (called after each automatic or asynchronous
    commit). Every other librdkafka key is accepted and ignored (network, security, ...;
    docs/api.md "librdkafka keys"); an unknown key raises InvalidConfigError.

    Under read_committed a partition that starts at the group's committed offset waits while
    a transaction holds offsets for it (KIP-447: never a stale offset); committed() likewise
    waits up to its timeout, then raises UnstableOffsetCommitError.

    Used from one thread. After close() every method raises RuntimeError."""

    def __init__(self, broker: LogSource, config: Mapping[str, object] | None = None) -> None:
        arguments.refuse_config_as_broker("Consumer", broker)
        self._broker = broker
        self._config = ConsumerConfig(config or {})
        self._assignment = Assignment()
        self._closed = False
        self._group: GroupMember | None = None
        self._deferred_revoke: Rebalance | None = None  # for the next step (_step_group)
        if self._config.group_id is not None:
            self._group = GroupMember(
                self._config,
                broker.groups,
                broker.partition_counts,
                broker.clock_ms,
            )
        self._fetcher = Fetcher(broker, self._config, self._group_id)
        self._read_loop = ReadLoop(
            broker.append_signal,
            self._assignment,
            self._fetcher,
            self._step_if_grouped,
            self._group_errors,
            auto_store=self._config.enable_auto_offset_store,
        )

    @property
    def config(self) -> ConsumerConfig:
        return self._config

    # --- assignment -------------------------------------------------------------------------

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        """Replace the assignment. Each partition starts at its offset: a real offset,
        OFFSET_BEGINNING (the log start), OFFSET_END (the LSO under read_committed, the high
        watermark under read_uncommitted), or OFFSET_STORED / OFFSET_INVALID (the group's
        committed offset, looked up at the first fetch; without one, or without a group.id,
        the auto.offset.reset policy). An offset outside the log is reset by the policy at
        the first fetch. UnknownTopicOrPartitionError for a partition that does
        not exist (nothing changes then, but a topic allow.auto.create.topics created stays);
        ValueError for a partition given twice. With enable.auto.commit, the stored offsets of
        the partitions replaced are committed first, as unassign() commits them."""
        self._check_open()
        partitions = topic_partitions("partitions", partitions)
        duplicate = first_duplicate(partitions)
        if duplicate is not None:
            raise ValueError(f"partition {duplicate.topic}-{duplicate.partition} is assigned twice")
        started = self._started(partitions)
        self._auto_commit_removed(list(self._assignment.partitions))
        self._assignment.replace(started)

    def unassign(self) -> None:
        """Drop the whole assignment (buffered records and stored offsets are discarded).
        With enable.auto.commit and a group.id, the stored offsets that moved are committed
        first, as librdkafka commits a removed partition's (a refused commit is dropped, as
        auto-commit drops it)."""
        self._check_open()
        self._auto_commit_removed(list(self._assignment.partitions))
        self._assignment.replace({})

    def incremental_assign(self, partitions: Sequence[TopicPartition]) -> None:
        """Add these partitions to the assignment, each starting at its offset as assign()
        starts it; the others keep their positions and buffered records. Refused, with
        nothing changed, as librdkafka refuses it: KafkaException _STATE while subscribed
        (the group's range and roundrobin strategies are eager: its assignment changes by
        assign()), _INVALID_ARG for a partition given twice, _CONFLICT for one already
        assigned; UnknownTopicOrPartitionError for a partition that does not exist (librdkafka
        takes it and waits for it). TypeError unless a list of TopicPartition."""
        self._check_open()
        partitions = topic_partitions("partitions", partitions)
        self._check_not_eager()
        self._assignment.check_addable(partitions)
        self._assignment.add(self._started(partitions))

    def incremental_unassign(self, partitions: Sequence[TopicPartition]) -> None:
        """Remove these partitions from the assignment (their buffered records are
        discarded; with enable.auto.commit their stored offsets are committed first, as
        unassign() commits them); the others go on undisturbed. Refused, with nothing changed:
        KafkaException _STATE while subscribed (as incremental_assign), _INVALID_ARG for a
        partition given twice or not assigned. TypeError unless a list of TopicPartition."""
        self._check_open()
        partitions = topic_partitions("partitions", partitions)
        self._check_not_eager()
        removed = self._assignment.check_removable(partitions)
        self._auto_commit_removed(removed)
        self._assignment.remove(removed)

    def assignment(self) -> list[TopicPartition]:
        """The assigned partitions (offsets are not reported here, as in confluent)."""
        self._check_open()
        return [TopicPartition(p.topic, p.partition) for p in self._assignment.partitions.values()]

    def pause(self, partitions: Sequence[TopicPartition]) -> None:
        """Stop delivering from these partitions: poll, consume and consume_arrow return
        nothing from them until resume(), and their positions stay where they are (records
        already fetched stay buffered). As in librdkafka the pause belongs to the partition,
        not the assignment (eoslog.client.assignment): it outlasts unassign(), assign() and
        rebalances, and a partition paused before it is assigned starts paused. A partition
        the broker does not have is ignored, as librdkafka ignores it. TypeError unless a list
        of TopicPartition."""
        self._check_open()
        for tp in topic_partitions("partitions", partitions):
            if self._exists(tp):
                self._assignment.paused.add((tp.topic, tp.partition))

    def resume(self, partitions: Sequence[TopicPartition]) -> None:
        """Deliver from these paused partitions again, from their positions; a partition
        that is not paused is left as it is. TypeError unless a list of TopicPartition."""
        self._check_open()
        for tp in topic_partitions("partitions", partitions):
            self._assignment.resume((tp.topic, tp.partition))

    def seek(self, partition: TopicPartition) -> None:
        """Move an assigned partition's position to partition.offset (special offsets as in
        assign()); the next poll/consume starts there. Records already fetched past it are
        discarded. KafkaException (_STATE) if the partition is not assigned or was halted
        by auto.offset.reset=error (assign() restarts it, as in librdkafka)."""
        self._check_open()
        topic_partition("partition", partition)
        assigned = self._assignment.get(partition.topic, partition.partition)
        if assigned is None:
            raise KafkaException(
                KafkaError(
                    KafkaError._STATE,
                    f"seek: {partition.topic}-{partition.partition} is not assigned",
                )
            )
        self._fetcher.seek_to(assigned, partition.offset)

    def position(self, partitions: Sequence[TopicPartition]) -> list[TopicPartition]:
        """For each partition, a TopicPartition whose offset is the offset of the next record
        to deliver (the last consumed record's offset + 1, or past skipped control batches);
        OFFSET_INVALID for a partition not assigned or not yet resolved."""
        self._check_open()
        partitions = topic_partitions("partitions", partitions)
        out = []
        for tp in partitions:
            assigned = self._assignment.get(tp.topic, tp.partition)
            offset = OFFSET_INVALID if assigned is None else assigned.current_position()
            known = offset if offset >= 0 else OFFSET_INVALID
            out.append(TopicPartition(tp.topic, tp.partition, known))
        return out

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        """(low, high): the log start offset and, under read_committed, the last stable
        offset (the high watermark under read_uncommitted). Any partition of the broker may be
        asked, assigned or not; timeout and cached are accepted for confluent compatibility
        (the answer is always current). UnknownTopicOrPartitionError if it does not exist."""
        self._check_open()
        topic_partition("partition", partition)
        log = self._broker.log(partition.topic, partition.partition)
        return log.log_start_offset, self._fetcher.bound(log)

    def offsets_for_times(
        self, partitions: Sequence[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        """For each partition, whose offset field holds a timestamp in milliseconds, a
        TopicPartition whose offset is the earliest offset with a record timestamp at or
        after it, or -1 (OFFSET_END) when no such record is readable under this consumer's
        isolation level (Kafka's ListOffsets; eoslog.client.fetcher Fetcher.offsets_for_times).
        The special timestamps -1 and -2 give the bound (LSO or high watermark) and the log
        start. Any partition of the broker may be asked, assigned or not; the answer is
        always current (timeout is accepted for confluent compatibility). KafkaException, as
        librdkafka's: _INVALID_ARG for an empty list or another negative timestamp,
        _UNKNOWN_PARTITION for a partition that does not exist. TypeError unless a list of
        TopicPartition, or for a timeout that is not a number."""
        self._check_open()
        partitions = topic_partitions("partitions", partitions)
        arguments.optional_real("timeout", timeout)
        return self._fetcher.offsets_for_times(partitions)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The cluster's metadata (eoslog.client.metadata): every topic, internal ones
        included, or only `topic`, which is reported with error UNKNOWN_TOPIC_OR_PART and no
        partitions when it does not exist. The answer is always current; timeout is accepted
        for confluent compatibility. TypeError for a topic that is not a str or None, or a
        timeout that is not a number."""
        self._check_open()
        if topic is not None:
            arguments.text("topic", topic)
        arguments.real("timeout", timeout)
        return cluster_metadata(self._broker, topic)

    # --- reading ----------------------------------------------------------------------------

    def poll(self, timeout: float | None = None) -> Message | None:
        """The next record of the assigned partitions, or None if none arrives within
        `timeout` seconds (None or a negative value: wait indefinitely; 0: do not wait).
        As confluent's, it may return an error message instead of a record, whose error()
        is set (consume() too): _PARTITION_EOF with enable.partition.eof, _AUTO_OFFSET_RESET
        under auto.offset.reset=error, UNKNOWN_TOPIC_OR_PART for a subscribed topic that
        does not exist (eoslog.client.fetcher Fetcher.report). Raises KafkaException for
        the errors librdkafka raises (from a callback, ...) and for damage in the directory,
        which no retry cures (CorruptRecordError, KafkaStorageError: docs/reliability.md)."""
        timeout = arguments.optional_real("timeout", timeout)
        found = self.consume(1, -1 if timeout is None else timeout)
        return found[0] if found else None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Up to num_messages records (1 .. 1,000,000). Like confluent's, it returns once
        num_messages are collected or the timeout expires (negative: wait indefinitely; 0:
        return what is readable now), so the list may be short or empty; it also returns once
        the records taken keep limits.decompressed_batch_bytes_max of decompressed data alive
        (so batches that each decompress to just under the limit cannot add up). Partitions
        are served in turn, each delivering in offset order; an error message (see poll())
        comes after its partition's records and counts as one of num_messages. A fetch that
        fails after records were collected ends the call with those records; the next call
        raises the error. So does a rebalance that comes due while the call holds records:
        the next call makes it, and no call delivers a record twice."""
        self._check_open()
        num_messages = arguments.integer("num_messages", num_messages)
        timeout = arguments.real("timeout", timeout)
        if not 1 <= num_messages <= limits.consume_messages_max:
            raise ValueError(f"num_messages must be in 1..{limits.consume_messages_max}")
        return self._read_loop.messages(num_messages, timeout)

    def consume_arrow(
        self, max_records: int = 100_000, timeout: float = -1, *, include_headers: bool = False
    ) -> pa.RecordBatch:
        """Up to max_records records as one pyarrow.RecordBatch in the Spark Kafka source's
        schema (docs/api.md "Spark"; with a `headers` column when include_headers), made without
        a Python object per record. Waits like consume(): until max_records are collected or
        the timeout expires; returns earlier once the pieces collected hold
        limits.decompressed_batch_bytes_max bytes, as consume() does. Moves the same positions
        poll() and consume() move. The error messages poll() delivers have no row here:
        _PARTITION_EOF is not reported (a short batch already says the records ran out), and
        the others are raised as KafkaException."""
        self._check_open()
        if max_records < 1:
            raise ValueError("max_records must be at least 1")
        return self._read_loop.arrow(max_records, timeout, include_headers)

    # --- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Auto-commit the stored offsets (if enabled), leave the group (its other members
        rebalance), drop the assignment and release the buffered records. Idempotent; any
        other call afterwards raises RuntimeError."""
        if self._group is not None and not self._closed:
            # The consumer has no group from here on: callbacks run by the leaving see none.
            group, self._group = self._group, None
            if not self._leave_group(group) and group.auto_commit:
                self._auto_commit(group)
        self._assignment.replace({})
        self._closed = True

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- groups -----------------------------------------------------------------------------

    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Join the group (group.id) with these topics: names, or regular expressions
        starting with "^" matched against the broker's topics (new matching topics join the
        subscription at a later poll). Partitions are assigned at the next poll, once every
        member has rejoined: on_assign(consumer, partitions) is called then, and
        on_revoke(consumer, partitions) before partitions are taken away (on_lost, if given,
        instead when the member was removed for not polling within max.poll.interval.ms).
        An on_assign that does not call assign() gets the partitions assigned after it
        returns, each at the group's committed offset. Replaces an earlier subscription or
        assign(). With allow.auto.create.topics, each named topic (not a pattern) that does
        not exist is created here. InvalidGroupIdError without a group.id; re.error for a bad
        pattern; InvalidTopicError for a bad name under allow.auto.create.topics."""
        group = self._require_group("subscribe")
        for name, callback in (
            ("on_assign", on_assign),
            ("on_revoke", on_revoke),
            ("on_lost", on_lost),
        ):
            arguments.callable_or_none(name, callback)
        group.subscribe(topics, on_assign, on_revoke, on_lost)
        for topic in topics:
            if not topic.startswith("^"):
                self._maybe_create_topic(topic)
        if self._assignment:
            self.unassign()

    def unsubscribe(self) -> None:
        """Give up the partitions (on_revoke) and leave the group."""
        self._check_open()
        if self._group is not None:
            self._leave_group(self._group)
        if self._assignment:
            self.unassign()

    def commit(
        self,
        message: Message | None = None,
        offsets: Sequence[TopicPartition] | None = None,
        asynchronous: bool = False,
    ) -> list[TopicPartition] | None:
        """Commit offsets for the group: `offsets` as given (each the offset of the next
        record to read, with its metadata), or `message`'s offset + 1, or by default the
        stored offsets of the assigned partitions (librdkafka's rule; with the default
        enable.auto.offset.store, where each partition was delivered up to:
        eoslog.client.offset_store). Returns once the commit is durable (durability "commit"
        and "always": fsynced), with the committed list; None when asynchronous (the commit
        is made before it returns all the same, then on_commit is called). By default only
        the stored offsets that moved since this consumer last committed them are written,
        and all of them are returned: a commit() with nothing new succeeds without writing
        (librdkafka raises _NO_OFFSET there; eoslog's commit is synchronous by default, and a
        consume/commit loop would then raise whenever it is idle). Raises InvalidGroupIdError
        without a group.id; ValueError when both message and offsets are given;
        KafkaException _NO_OFFSET, unless asynchronous, when nothing is stored or given;
        CommitFailedError (UnknownMemberIdError, IllegalGenerationError) when the group has
        moved on without this member (it rejoins at the next poll)."""
        group = self._require_group("commit")
        moved, reported = offset_store.commit_request(self._assignment, message, offsets)
        if not reported:
            if asynchronous:
                return None  # librdkafka reports it to an offset_commit_cb, not to the caller
            raise KafkaException(
                KafkaError(KafkaError._NO_OFFSET, "Commit failed: no offset stored")
            )
        if moved:
            group.commit(moved)
            offset_store.committed(self._assignment, moved)
        if asynchronous:
            group.report_commit(reported)  # on_commit, as confluent reports an async commit
            return None
        return reported

    def store_offsets(
        self, message: Message | None = None, offsets: Sequence[TopicPartition] | None = None
    ) -> None:
        """Store offsets for the next commit() without arguments, or auto-commit: `message`'s
        offset + 1, or each of `offsets` as given (with its metadata; a logical offset
        clears the partition's stored offset). Only with enable.auto.offset.store false, as in
        librdkafka, else KafkaException _INVALID_ARG. As librdkafka's, it stores what it can
        and raises only when it could store nothing, with the last error: _UNKNOWN_PARTITION
        for a partition the broker does not have, _STATE for one not assigned. ValueError
        unless exactly one of message and offsets is given; TypeError for a message that is
        not a Message or offsets that are not a list of TopicPartition."""
        self._check_open()
        wanted = offset_store.store_request(
            message, offsets, automatic=self._config.enable_auto_offset_store
        )
        offset_store.store(self._assignment, self._exists, wanted)

    def committed(
        self, partitions: Sequence[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        """The group's committed offset of each partition (OFFSET_INVALID where none was
        committed), with its metadata. Under read_committed (require_stable, KIP-447) this
        waits up to `timeout` seconds (None: as long as it takes) while a transaction holds
        offsets for one of them, then raises UnstableOffsetCommitError; under
        read_uncommitted pending offsets are not seen and it never waits."""
        group = self._require_group("committed")
        partitions = topic_partitions("partitions", partitions)
        wanted = [(tp.topic, tp.partition) for tp in partitions]
        coordinator = self._broker.groups
        if self._config.isolation_level == "read_committed":
            found = coordinator.fetch_stable_offsets(group.group_id, wanted, timeout)
        else:
            found = coordinator.fetch_offsets(group.group_id, wanted, require_stable=False)
        out = []
        for topic, partition in wanted:
            stored = found[(topic, partition)]
            if stored is None:
                out.append(TopicPartition(topic, partition, OFFSET_INVALID))
            else:
                out.append(TopicPartition(topic, partition, stored.offset, stored.metadata))
        return out

    def memberid(self) -> str | None:
        """The member id the group coordinator gave this consumer, or None while it has
        none: before its first join, after it left, and for a consumer without a group.id or
        that only assign()s."""
        self._check_open()
        if self._group is None or not self._group.member_id:
            return None
        return self._group.member_id

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """The group, member id and generation this consumer reads under, for
        Producer.send_offsets_to_transaction: the coordinator refuses offsets sent with it
        once the group has moved to a newer generation or dropped the member (zombie
        fencing, KIP-447). A consumer that only assign()s reports generation -1, no member.
        InvalidGroupIdError without a group.id."""
        return self._require_group("consumer_group_metadata").metadata()

    # --- the group's steps ------------------------------------------------------------------

    def _step_if_grouped(self, holding: bool) -> Step:
        """The read loop's step: the group's, if the consumer has one."""
        return Step.READ if self._group is None else self._step_group(self._group, holding)

    def _step_group(self, group: GroupMember, holding: bool) -> Step:
        """Heartbeat, rebalance if needed, auto-commit when due (eoslog.client.group_member).
        A rebalance the heartbeat calls for while the read loop is `holding` records it has
        not delivered is kept for the next step (Step.DELIVER_FIRST)."""
        if group.subscribed:
            revoke, self._deferred_revoke = self._deferred_revoke, None
            if revoke is None:
                revoke = group.heartbeat()
            if revoke is not None:
                if holding:
                    self._deferred_revoke = revoke
                    return Step.DELIVER_FIRST
                self._apply_rebalance(group, revoke)
                joined = group.join()
                self._apply_rebalance(group, joined)
                if joined.assigned is None:
                    return Step.REBALANCING
        if group.auto_commit_due():
            self._auto_commit(group)
        return Step.READ

    def _group_errors(self, count_max: int) -> list[Message]:
        """The error messages of the group's step (GroupMember.take_errors)."""
        return [] if self._group is None else self._group.take_errors(count_max)

    def _leave_group(self, group: GroupMember) -> bool:
        """Give up the partitions (auto-commit, on_revoke, unassign) and leave the group;
        False when the member was not subscribed (nothing done)."""
        self._deferred_revoke = None  # leaving() gives up what the member holds
        leaving = group.leaving()
        if leaving is None:
            return False
        self._apply_rebalance(group, leaving)
        group.leave()
        return True

    def _apply_rebalance(self, group: GroupMember, rebalance: Rebalance) -> None:
        """Carry out what a step of the member decided, in order: give up the revoked
        partitions (auto-commit first when asked, then the callback, then unassign), let the
        member forget a membership it lost (the callback still saw it), then take the assigned
        ones: on_assign, and assign() unless the callback assigned itself."""
        if rebalance.revoked:
            if rebalance.commit_first:
                self._auto_commit(group)
            if rebalance.on_revoke is not None:
                rebalance.on_revoke(self, list(rebalance.revoked))
            # Not unassign(): auto-commit ran above, or must not run (a lost membership).
            self._assignment.replace({})
        group.revoked()
        if rebalance.assigned is not None:
            before = self._assignment.generation
            if rebalance.on_assign is not None:
                rebalance.on_assign(self, list(rebalance.assigned))
            if self._assignment.generation == before:
                # The callback did not assign: start each partition at its committed offset.
                self.assign(list(rebalance.assigned))

    # --- internals --------------------------------------------------------------------------

    def _maybe_create_topic(self, topic: str) -> None:
        """Under allow.auto.create.topics, the broker's metadata request that creates `topic`
        if it is missing (and the broker allows it): librdkafka's subscribe and assign."""
        if self._config.allow_auto_create_topics:
            with contextlib.suppress(UnknownTopicOrPartitionError):
                self._broker.topic_metadata(topic, auto_create=True)

    def _require_group(self, name: str) -> GroupMember:
        self._check_open()
        if self._group is None:
            raise InvalidGroupIdError(f"Consumer.{name} needs a group.id in the configuration")
        return self._group

    def _started(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[tuple[str, int], AssignedPartition]:
        """An AssignedPartition for each partition (each given once), positioned at its offset
        as assign() says; under allow.auto.create.topics a missing topic is created first.
        UnknownTopicOrPartitionError for a partition that does not exist."""
        started = {}
        for tp in partitions:
            self._maybe_create_topic(tp.topic)
            log = self._broker.log(tp.topic, tp.partition)
            started[(tp.topic, tp.partition)] = AssignedPartition(log, OFFSET_INVALID)
        for tp, assigned in zip(partitions, started.values(), strict=True):
            self._fetcher.seek_to(assigned, tp.offset)
        return started

    def _auto_commit(self, group: GroupMember, keys: list[PartitionKey] | None = None) -> None:
        """Auto-commit the stored offsets that moved (of `keys` alone, when given)."""
        moved = offset_store.to_commit(self._assignment, keys)[0]
        if group.auto_commit_offsets(moved):
            offset_store.committed(self._assignment, moved)

    def _auto_commit_removed(self, keys: list[PartitionKey]) -> None:
        """Before partitions leave the assignment: with enable.auto.commit, commit their
        stored offsets, as librdkafka does for removed partitions."""
        group = self._group
        if group is not None and group.auto_commit and keys:
            self._auto_commit(group, keys)

    def _check_not_eager(self) -> None:
        """librdkafka's refusal of incremental changes to an eager group's assignment."""
        if self._group is not None and self._group.subscribed:
            raise KafkaException(
                KafkaError(
                    KafkaError._STATE,
                    "Changes to the current assignment must be made using assign() when "
                    "rebalance protocol type is EAGER",
                )
            )

    def _exists(self, partition: TopicPartition) -> bool:
        try:
            self._broker.log(partition.topic, partition.partition)
        except UnknownTopicOrPartitionError:
            return False
        return True

    def _group_id(self) -> str | None:
        """The group whose committed offsets start a partition (none once closed)."""
        return None if self._group is None else self._group.group_id

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Consumer closed")
