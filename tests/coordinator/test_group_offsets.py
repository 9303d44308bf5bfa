"""Committed and pending offsets (docs/coordinator.md §6; eoslog.coordinator.group_coordinator and
offset_store): plain commits, offsets sent in a transaction (invisible until the COMMIT marker,
dropped by ABORT, unstable meanwhile), log order between the two, durability, and the state
rebuilt from `__consumer_offsets` at open, including after crashes at named points."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

import eoslog
from eoslog import ConsumerGroupMetadata, TopicPartition
from eoslog.coordinator.offset_store import OffsetStore
from eoslog.coordinator.offsets_log import OffsetCommitKey, OffsetCommitValue
from eoslog.errors import CorruptOffsetsLogError
from eoslog.record import codec
from tests.support import logtools
from tests.support.logtools import OpenBroker

GROUP = "g1"
TP0 = TopicPartition("in", 0)


def _fill(broker: eoslog.Broker, topic: str, records: int) -> None:
    """`records` records in partition 0 of `topic`, values b"0", b"1", ..."""
    writer = broker.producer({"linger.ms": 0})
    for number in range(records):
        writer.produce(topic, b"%d" % number, partition=0)
    writer.flush()


def _setup(broker: eoslog.Broker) -> None:
    broker.create_topic("in", 2)
    broker.create_topic("out", 1)


def _consumer(broker: eoslog.Broker, isolation: str = "read_committed") -> eoslog.Consumer:
    return broker.consumer(
        {"group.id": GROUP, "enable.auto.commit": False, "isolation.level": isolation}
    )


def _committed(broker: eoslog.Broker, partition: int = 0) -> int | None:
    stored = broker.groups.fetch_offsets(GROUP, [("in", partition)], require_stable=False)
    found = stored[("in", partition)]
    return None if found is None else found.offset


def _transaction_with_offsets(
    broker: eoslog.Broker, transactional_id: str, offset: int, partition: int = 0
) -> eoslog.Producer:
    producer = broker.producer({"transactional.id": transactional_id})
    producer.init_transactions()
    producer.begin_transaction()
    producer.produce("out", b"v", partition=0)
    producer.send_offsets_to_transaction(
        [TopicPartition("in", partition, offset)], ConsumerGroupMetadata(GROUP)
    )
    return producer


def test_a_plain_commit_is_visible_to_committed_at_once(open_broker: OpenBroker) -> None:
    broker = open_broker()
    _setup(broker)
    consumer = _consumer(broker)
    consumer.commit(offsets=[TopicPartition("in", 0, 5, metadata="m")])
    [found] = consumer.committed([TP0])
    assert (found.offset, found.metadata) == (5, "m")
    assert consumer.committed([TopicPartition("in", 1)])[0].offset == eoslog.OFFSET_INVALID


def test_a_plain_commit_returns_only_once_its_record_is_durable(open_broker: OpenBroker) -> None:
    broker = open_broker("commit")
    _setup(broker)
    offsets_log = broker.log(*broker.groups.offsets_partition(GROUP))
    _consumer(broker).commit(offsets=[TopicPartition("in", 0, 5)])
    assert offsets_log.recovery_point == offsets_log.log_end_offset > 0


def test_plain_commits_are_not_synced_under_durability_none(open_broker: OpenBroker) -> None:
    broker = open_broker("none")
    _setup(broker)
    offsets_log = broker.log(*broker.groups.offsets_partition(GROUP))
    _consumer(broker).commit(offsets=[TopicPartition("in", 0, 5)])
    assert offsets_log.recovery_point < offsets_log.log_end_offset


def test_transactional_offsets_are_invisible_until_the_commit_marker(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    _setup(broker)
    _consumer(broker).commit(offsets=[TopicPartition("in", 0, 3)])
    producer = _transaction_with_offsets(broker, "t1", 10)
    assert _committed(broker) == 3
    assert broker.groups.pending_producers(GROUP) == {producer.producer_id}
    producer.commit_transaction()
    assert _committed(broker) == 10
    assert not broker.groups.pending_producers(GROUP)


def test_an_abort_marker_drops_the_pending_offsets(open_broker: OpenBroker) -> None:
    broker = open_broker()
    _setup(broker)
    _consumer(broker).commit(offsets=[TopicPartition("in", 0, 3)])
    producer = _transaction_with_offsets(broker, "t1", 10)
    producer.abort_transaction()
    assert _committed(broker) == 3
    assert not broker.groups.pending_producers(GROUP)
    assert _consumer(broker).committed([TP0], timeout=0)[0].offset == 3


def test_send_offsets_ignores_partitions_without_a_position(open_broker: OpenBroker) -> None:
    """position() of a partition not read yet is OFFSET_INVALID (-1001); librdkafka leaves a
    negative offset out of the commit (issue 16: the README's copier raised ValueError)."""
    broker = open_broker()
    _setup(broker)
    producer = _transaction_with_offsets(broker, "t1", 0)
    producer.send_offsets_to_transaction(
        [TopicPartition("in", 0, 7), TopicPartition("in", 1, eoslog.OFFSET_INVALID)],
        ConsumerGroupMetadata(GROUP),
    )
    producer.commit_transaction()
    assert (_committed(broker, 0), _committed(broker, 1)) == (7, None)


def test_send_offsets_with_no_offset_left_sends_nothing(open_broker: OpenBroker) -> None:
    broker = open_broker()
    _setup(broker)
    offsets_log = broker.log(*broker.groups.offsets_partition(GROUP))
    producer = broker.producer({"transactional.id": "t1"})
    producer.init_transactions()
    end = offsets_log.log_end_offset
    producer.begin_transaction()
    unread = [TopicPartition("in", p, eoslog.OFFSET_INVALID) for p in (0, 1)]
    producer.send_offsets_to_transaction(unread, ConsumerGroupMetadata(GROUP))
    producer.send_offsets_to_transaction([], ConsumerGroupMetadata(GROUP))
    producer.commit_transaction()
    assert offsets_log.log_end_offset == end  # the offsets partition never joined
    assert (_committed(broker, 0), _committed(broker, 1)) == (None, None)


def test_send_offsets_of_a_wrong_type_raise_type_error_and_change_nothing(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    _setup(broker)
    producer = _transaction_with_offsets(broker, "t1", 4)
    not_a_partition: list[Any] = [("in", 0, 9)]
    with pytest.raises(TypeError):
        producer.send_offsets_to_transaction(not_a_partition, ConsumerGroupMetadata(GROUP))
    assert producer.transaction_state == "IN_TRANSACTION"
    producer.commit_transaction()
    assert _committed(broker) == 4


def test_committed_under_read_committed_raises_unstable_while_offsets_are_pending(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    _setup(broker)
    _consumer(broker).commit(offsets=[TopicPartition("in", 0, 3)])
    producer = _transaction_with_offsets(broker, "t1", 10)
    with pytest.raises(eoslog.UnstableOffsetCommitError) as raised:
        _consumer(broker).committed([TP0], timeout=0.05)
    assert raised.value.error.code() == 88 and raised.value.error.retriable()
    # Another partition of the group is stable; read_uncommitted never waits and sees 3.
    assert _consumer(broker).committed([TopicPartition("in", 1)], timeout=0)[0].offset < 0
    assert _consumer(broker, "read_uncommitted").committed([TP0])[0].offset == 3
    producer.commit_transaction()
    assert _consumer(broker).committed([TP0], timeout=0)[0].offset == 10


def test_a_read_committed_consumer_waits_for_pending_offsets_and_starts_at_them(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    _setup(broker)
    _fill(broker, "in", 20)
    producer = _transaction_with_offsets(broker, "t1", 12)
    consumer = broker.consumer(
        {"group.id": GROUP, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    )
    consumer.assign([TopicPartition("in", 0)])
    assert consumer.consume(5, timeout=0.05) == []  # waits: never a stale (or reset) offset
    # The commit lands while (or just before) another thread's consume() waits: either way it
    # must start at the committed offsets, well before its timeout, with no sleep to order them.
    delivered: list[list[int]] = []
    waiting = threading.Thread(
        target=lambda: delivered.append([m.offset() for m in consumer.consume(5, timeout=60)])
    )
    started = time.monotonic()
    waiting.start()
    producer.commit_transaction()
    waiting.join()
    assert delivered == [[12, 13, 14, 15, 16]]
    assert time.monotonic() - started < 60  # woken by the commit, not by the timeout


def test_a_read_uncommitted_consumer_starts_at_the_last_committed_offset(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    _setup(broker)
    _fill(broker, "in", 20)
    _consumer(broker).commit(offsets=[TopicPartition("in", 0, 4)])
    _transaction_with_offsets(broker, "t1", 12)
    consumer = _consumer(broker, "read_uncommitted")
    consumer.assign([TopicPartition("in", 0)])
    assert [m.offset() for m in consumer.consume(2, timeout=1)] == [4, 5]


def test_a_plain_commit_after_transactional_offsets_wins_when_they_commit(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    _setup(broker)
    producer = _transaction_with_offsets(broker, "t1", 10)
    _consumer(broker).commit(offsets=[TopicPartition("in", 0, 7)])  # later in the log
    producer.commit_transaction()
    assert _committed(broker) == 7


def test_transactional_offsets_written_after_a_plain_commit_win_when_they_commit(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    _setup(broker)
    _consumer(broker).commit(offsets=[TopicPartition("in", 0, 7)])
    producer = _transaction_with_offsets(broker, "t1", 10)
    producer.commit_transaction()
    assert _committed(broker) == 7 + 3


def test_log_order_between_plain_and_transactional_commits_survives_reopen(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    _setup(broker)
    first = _transaction_with_offsets(broker, "t1", 10, partition=0)
    _consumer(broker).commit(offsets=[TopicPartition("in", 0, 7), TopicPartition("in", 1, 2)])
    first.commit_transaction()
    second = _transaction_with_offsets(broker, "t2", 30, partition=1)
    second.commit_transaction()
    before = (_committed(broker, 0), _committed(broker, 1))
    broker.close()
    reopened = open_broker()
    assert (_committed(reopened, 0), _committed(reopened, 1)) == before == (7, 30)


def test_pending_offsets_stay_pending_across_reopen_until_the_transaction_is_fenced(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    _setup(broker)
    _consumer(broker).commit(offsets=[TopicPartition("in", 0, 3)])
    _transaction_with_offsets(broker, "t1", 10)  # left open: the process "dies" with it
    logtools.forget_clients(broker)
    broker.close()
    reopened = open_broker()
    assert _committed(reopened) == 3
    with pytest.raises(eoslog.UnstableOffsetCommitError):
        _consumer(reopened).committed([TP0], timeout=0)
    reopened.producer({"transactional.id": "t1"}).init_transactions()  # aborts it
    assert _consumer(reopened).committed([TP0], timeout=0)[0].offset == 3


def test_offsets_outside_any_transaction_partition_are_refused(open_broker: OpenBroker) -> None:
    broker = open_broker()
    _setup(broker)
    producer = broker.producer({"transactional.id": "t1"})
    producer.init_transactions()
    producer.begin_transaction()
    with pytest.raises(eoslog.UnknownTopicOrPartitionError):
        producer.send_offsets_to_transaction(
            [TopicPartition("missing", 0, 1)], ConsumerGroupMetadata(GROUP)
        )
    assert producer.transaction_state == "ABORTABLE_ERROR"
    producer.abort_transaction()
    assert _committed(broker) is None


def test_bad_commits_raise_typed_errors_and_write_nothing(open_broker: OpenBroker) -> None:
    broker = open_broker()
    _setup(broker)
    offsets_log = broker.log(*broker.groups.offsets_partition(GROUP))
    consumer = _consumer(broker)
    end = offsets_log.log_end_offset
    with pytest.raises(eoslog.KafkaException) as raised:
        consumer.commit(offsets=[TopicPartition("in", 0, 1, metadata="x" * 5000)])
    assert raised.value.error.code() == 12  # OFFSET_METADATA_TOO_LARGE
    with pytest.raises(eoslog.UnknownTopicOrPartitionError):
        consumer.commit(offsets=[TopicPartition("in", 0, 1), TopicPartition("in", 9, 1)])
    with pytest.raises(ValueError):
        consumer.commit(offsets=[TopicPartition("in", 0, -5)])
    with pytest.raises(eoslog.KafkaException) as raised:
        consumer.commit()  # nothing assigned: nothing to commit
    assert raised.value.error.name() == "_NO_OFFSET"
    assert offsets_log.log_end_offset == end


def test_a_tombstone_deletes_the_committed_and_the_pending_offsets() -> None:
    store = OffsetStore()
    key = OffsetCommitKey(GROUP, "in", 0)
    store.replay_offset(-1, False, key, OffsetCommitValue(3, "", 0), 0)
    store.replay_offset(7, True, key, OffsetCommitValue(9, "", 0), 1)
    store.replay_offset(-1, False, key, None, 2)
    assert store.committed(GROUP, ("in", 0)) is None
    assert not store.is_unstable(GROUP, ("in", 0))
    store.replay_marker(7, commit=True)
    assert store.committed(GROUP, ("in", 0)) is None


def test_a_marker_for_a_producer_with_nothing_pending_changes_nothing() -> None:
    store = OffsetStore()
    store.replay_offset(-1, False, OffsetCommitKey(GROUP, "in", 0), OffsetCommitValue(3, "", 0), 0)
    store.replay_marker(42, commit=True)
    store.replay_marker(42, commit=False)
    stored = store.committed(GROUP, ("in", 0))
    assert stored is not None and stored.offset == 3


CRASH_CHILD = textwrap.dedent(
    """
    import sys
    import eoslog
    from eoslog import ConsumerGroupMetadata, TopicPartition
    broker = eoslog.open(sys.argv[1])
    if "in" not in broker.list_topics():
        broker.create_topic("in", 1)
        broker.create_topic("out", 1)
    producer = broker.producer({"transactional.id": "crash"})
    producer.init_transactions()
    for number in range(4):
        producer.begin_transaction()
        producer.produce("out", b"%d" % number, partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition("in", 0, 100 + number)], ConsumerGroupMetadata("g1")
        )
        if number == 2:
            producer.abort_transaction()
        else:
            producer.commit_transaction()
    broker.close()
    """
)
CRASH_POINTS = (
    "append.after",
    "fsync.after",
    "coordinator.prepare.after",
    "marker.before",
    "marker.after",
    "coordinator.complete.after",
    "offsets.commit.after",
)


@pytest.mark.parametrize("hit", [1, 3])
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_offsets_are_committed_exactly_when_their_output_is_after_a_crash_point(
    tmp_path: os.PathLike[str], point: str, hit: int
) -> None:
    root = os.path.join(tmp_path, "data")
    env = {**os.environ, "EOSLOG_CRASH_AT": f"{point}:{hit}"}
    process = subprocess.run(
        [sys.executable, "-c", CRASH_CHILD, root], env=env, capture_output=True, timeout=60
    )
    assert process.returncode in (0, -9), process.stderr.decode()[-2000:]
    with eoslog.open(root, background=False) as broker:
        broker.producer({"transactional.id": "crash"}).init_transactions()  # ends an open one
        consumer = broker.consumer({"isolation.level": "read_committed"})
        consumer.assign([TopicPartition("out", 0, 0)])
        values = [m.value() for m in consumer.consume(100, timeout=0)]
        stored = broker.groups.fetch_offsets("g1", [("in", 0)], require_stable=True)[("in", 0)]
    # Transaction n writes b"n" and offset 100 + n; transaction 2 is aborted.
    expected = {(): None, (b"0",): 100, (b"0", b"1"): 101, (b"0", b"1", b"3"): 103}
    assert tuple(values) in expected, f"{point}:{hit}: output {values}"
    found = None if stored is None else stored.offset
    assert found == expected[tuple(values)], f"{point}:{hit}: offset {found} for {values}"


@pytest.mark.parametrize(
    "retention",
    [{"log.retention.ms": 3_600_000}, {"log.retention.bytes": 1024}],
    ids=["retention.ms", "retention.bytes"],
)
def test_committed_offsets_outlive_log_retention_of_old_segments(
    tmp_path: os.PathLike[str], clock: logtools.Clock, retention: dict[str, int]
) -> None:
    """Broker-level retention (by age or by size) applies to user topics, never to
    `__consumer_offsets`, as Kafka's internal topics are compacted, not deleted. Regression
    (issue 14's report): with log.retention.bytes set, a group's committed offset 42 became
    -1001 after retention and a reopen."""
    root = os.path.join(tmp_path, "data")
    # The offsets' own retention (offsets.retention.minutes) is longer than the 8 days.
    month_minutes = 30 * 24 * 60
    config = {
        "offsets.topic.segment.bytes": 1024,
        "offsets.retention.minutes": month_minutes,
        **retention,
    }
    with eoslog.open(root, config=config, clock_ms=clock, background=False) as broker:
        _setup(broker)
        consumer = _consumer(broker)
        consumer.commit(offsets=[TopicPartition("in", 1, 99)])  # never committed again
        for offset in range(40):
            consumer.commit(offsets=[TopicPartition("in", 0, offset)])
        offsets_log = broker.log(*broker.groups.offsets_partition(GROUP))
        assert len(offsets_log.segments) > 3
        clock.advance(8 * 24 * 3_600_000)
        broker.run_maintenance()
        assert offsets_log.log_start_offset == 0
    with eoslog.open(root, config=config, clock_ms=clock, background=False) as broker:
        assert (_committed(broker, 0), _committed(broker, 1)) == (39, 99)


def test_an_undecodable_offsets_record_is_refused_at_open_naming_its_file_and_byte(
    open_broker: OpenBroker,
) -> None:
    # Regression: CorruptOffsetsLogError said what was wrong with the record but not where.
    broker = open_broker()
    _setup(broker)
    _consumer(broker).commit(offsets=[TopicPartition("in", 0, 7)])
    offsets_log = broker.log("__consumer_offsets", 0)
    builder = codec.BatchBuilder()
    assert builder.append(logtools.TS, b"\x00\x09unknown key version", b"value", None)
    info = offsets_log.append_batch(builder.build())
    path = offsets_log.segments[-1].path(".log")
    position = offsets_log.segments[-1].translate_offset(info.base_offset).position
    broker.close()
    with pytest.raises(CorruptOffsetsLogError) as raised:
        open_broker()
    assert str(raised.value).startswith(f"{path}, the batch at byte {position}: ")
    assert "unknown key version 9" in str(raised.value)
