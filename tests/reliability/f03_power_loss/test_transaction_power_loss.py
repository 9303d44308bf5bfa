"""The commit path's fsync order under durability="commit" and what recovery makes of a power
loss between its steps (README.md "The commit path and recovery"; docs/coordinator.md §3.6, §3.7).

A transaction costs two ordered fsyncs: its data, then the `__transaction_state` partition
holding Prepare* (and the transaction's earlier Ongoing record, which is not fsynced of its
own). Markers and Complete* are written without an fsync; the next fsync of the state log
makes the markers durable first. The power-loss images here are built by hand from the fs
twin: every `__transaction_state` file cut back to its last fsync, every other file as
written (their fsyncs ran), which is the state a power loss leaves between the data fsync
and the Prepare* fsync.
"""

from __future__ import annotations

import contextlib
import random

import pytest

import eoslog
from eoslog.client.producer import Producer
from eoslog.coordinator.transaction_state import TransactionState
from eoslog.errors import KafkaException, KafkaStorageError
from eoslog.fs_twin import RecordingFileSystem
from eoslog.record import codec
from tests.support.invariants import copy_twin

ROOT = "/data"
LOG_DIR = "/data/log"
TOPIC = "t"
TXN = "power"
STATE_TOPIC = "__transaction_state"
PRODUCER_CONFIG = {"transactional.id": TXN, "linger.ms": 0}
# Checked with 60 seeds while developing; 8 keep CI short.
WORKLOAD_SEEDS = 8


def open_twin(fs: RecordingFileSystem) -> eoslog.Broker:
    return eoslog.open(LOG_DIR, "commit", fs=fs, background=False)


def new_twin(seed: int) -> tuple[RecordingFileSystem, eoslog.Broker]:
    twin = RecordingFileSystem(seed)
    twin.makedirs(ROOT, durable=True)
    broker = open_twin(twin)
    broker.create_topic(TOPIC, 2)
    return twin, broker


def image_losing_unsynced_state(twin: RecordingFileSystem) -> RecordingFileSystem:
    """A power-loss image: `__transaction_state` files as of their last fsync, every other
    file with its current content (directory entries as they are: none is new here)."""
    return copy_twin(
        twin,
        content_of=lambda path: (
            twin.durable_bytes(path) if f"/{STATE_TOPIC}-" in path else twin.snapshot_bytes(path)
        ),
    )


def initialized_producer(broker: eoslog.Broker) -> Producer:
    producer = broker.producer(PRODUCER_CONFIG)
    producer.init_transactions()
    return producer


def commit_one(producer: Producer, value: bytes, partition: int) -> None:
    producer.begin_transaction()
    producer.produce(TOPIC, value, partition=partition)
    producer.commit_transaction()


def committed_values(broker: eoslog.Broker, partition: int) -> list[bytes]:
    consumer = broker.consumer({"auto.offset.reset": "earliest"})
    consumer.assign([eoslog.TopicPartition(TOPIC, partition, 0)])
    values = []
    while messages := consumer.consume(100, timeout=0):
        values.extend(bytes(message.value()) for message in messages)
    consumer.close()
    return values


def assert_no_lso_held(broker: eoslog.Broker) -> None:
    for partition in range(2):
        log = broker.log(TOPIC, partition)
        assert log.last_stable_offset == log.log_end_offset, f"{TOPIC}-{partition} LSO held"


def test_a_transaction_under_commit_costs_two_ordered_fsyncs_data_then_state() -> None:
    twin, broker = new_twin(1)
    producer = initialized_producer(broker)
    for round_number in range(3):
        start = twin.calls
        commit_one(producer, b"v%d" % round_number, 0)
        syncs = [path for operation, path in twin.recorded_calls()[start:] if operation == "sync"]
        print(f"round {round_number}: fsyncs {syncs}")
        if round_number:  # the first transaction also syncs the files it creates
            assert len(syncs) == 2, syncs
            assert f"/{TOPIC}-0/" in syncs[0] and f"/{STATE_TOPIC}-" in syncs[1], syncs
    producer.close()
    broker.close()


def test_a_marker_is_made_durable_before_the_state_log_that_reports_it() -> None:
    """The transaction after one on partition 0 writes only to partition 1: before its
    Prepare* fsync (which also makes the first's Complete* durable), partition 0 is synced
    for the first transaction's marker."""
    twin, broker = new_twin(2)
    producer = initialized_producer(broker)
    commit_one(producer, b"first", 0)
    start = twin.calls
    commit_one(producer, b"second", 1)
    syncs = [
        path
        for operation, path in twin.recorded_calls()[start:]
        if operation == "sync" and path.endswith(".log")  # the first use of t-1 syncs its indexes
    ]
    order = [
        next(name for name in (f"{TOPIC}-1/", f"{TOPIC}-0/", STATE_TOPIC) if name in path)
        for path in syncs
    ]
    assert order == [f"{TOPIC}-1/", f"{TOPIC}-0/", STATE_TOPIC], syncs
    producer.close()
    broker.close()


@pytest.mark.parametrize("partitions", [(0,), (1,), (0, 1)])
def test_an_orphan_transaction_whose_ongoing_record_was_lost_is_aborted_at_open(
    partitions: tuple[int, ...],
) -> None:
    """Data of the next transaction fsynced, its Ongoing record (and the previous
    transaction's Complete*) lost: the open finishes the previous transaction, fences the
    producer and aborts the orphan, so no LSO stays held; committed data stays."""
    twin, broker = new_twin(3)
    producer = initialized_producer(broker)
    commit_one(producer, b"committed", 0)
    producer.begin_transaction()
    for partition in partitions:
        producer.produce(TOPIC, b"orphan", partition=partition)
    assert producer.flush() == 0  # appended and fsynced; no Prepare* yet
    epoch = producer.producer_epoch
    image = image_losing_unsynced_state(twin)
    reopened = open_twin(image)
    try:
        assert_no_lso_held(reopened)
        assert committed_values(reopened, 0) == [b"committed"]
        assert committed_values(reopened, 1) == []
        meta = reopened.transactions.metadata(TXN)
        assert meta is not None and meta.state is TransactionState.EMPTY
        assert meta.producer_epoch == epoch + 1  # fenced above the orphan's epoch
        again = reopened.producer(PRODUCER_CONFIG)
        again.init_transactions()
        again.begin_transaction()
        again.produce(TOPIC, b"after", partition=1)
        again.commit_transaction()
        assert committed_values(reopened, 1) == [b"after"]
        again.close()
    finally:
        reopened.close()
    # The rule is idempotent: reopening the recovered image changes nothing.
    with open_twin(image_losing_unsynced_state(image)) as third:
        assert_no_lso_held(third)
    producer.close()
    broker.close()


def test_a_partition_whose_add_was_lost_joins_the_ongoing_transaction_at_open() -> None:
    """The Ongoing record with partition 0 is durable, the one adding partition 1 is not,
    and partition 1's data is: the open adds partition 1 to the Ongoing transaction, which
    then ends like any other (here aborted by re-initializing the id)."""
    twin, broker = new_twin(4)
    coordinator = broker.transactions
    producer = coordinator.init_producer_id(TXN, 60_000)
    coordinator.add_partitions(TXN, *producer, [(TOPIC, 0)])
    for partition in range(broker.list_topics()[STATE_TOPIC].num_partitions):
        broker.log(STATE_TOPIC, partition).flush()
    coordinator.add_partitions(TXN, *producer, [(TOPIC, 1)])
    builder = codec.BatchBuilder(
        producer_id=producer[0], producer_epoch=producer[1], base_sequence=0, is_transactional=True
    )
    builder.append(1_700_000_000_000, None, b"orphan")
    broker.log(TOPIC, 1).append_batch(builder.build())
    broker.log(TOPIC, 1).flush()
    image = image_losing_unsynced_state(twin)
    with open_twin(image) as reopened:
        meta = reopened.transactions.metadata(TXN)
        assert meta is not None and meta.state is TransactionState.ONGOING
        assert meta.partitions == {(TOPIC, 0), (TOPIC, 1)}
        assert reopened.log(TOPIC, 1).last_stable_offset == 0  # held until it ends
        reopened.transactions.init_producer_id(TXN, 60_000)  # fences and aborts it
        assert_no_lso_held(reopened)
        assert committed_values(reopened, 1) == []
    broker.close()


@pytest.mark.parametrize("seed", range(WORKLOAD_SEEDS))
def test_power_loss_images_of_a_transactional_workload_keep_acknowledged_commits(
    seed: int,
) -> None:
    """Random crash images (fs twin) taken at a point of a run of transactions over two
    partitions: every image opens; each transaction is all or nothing; every one whose
    commit_transaction() returned is visible; after re-initializing the id no LSO is held."""
    rng = random.Random(seed)
    print(f"seed {seed}")
    twin, broker = new_twin(seed)
    producer = broker.producer(PRODUCER_CONFIG)
    producer.init_transactions()
    images: list[tuple[RecordingFileSystem, set[bytes]]] = []
    acknowledged: set[bytes] = set()
    written_to: dict[bytes, set[int]] = {}
    for number in range(12):
        tag = b"%d-%d" % (seed, number)
        producer.begin_transaction()
        written_to[tag] = set(rng.sample([0, 1], rng.randint(1, 2)))
        for partition in sorted(written_to[tag]):
            producer.produce(TOPIC, tag, partition=partition)
        if rng.random() < 0.5:
            producer.flush()
            images.append((twin.crash_image(rng), set(acknowledged)))
        if rng.random() < 0.3:
            producer.abort_transaction()
        else:
            producer.commit_transaction()
            acknowledged.add(tag)
        images.append((twin.crash_image(rng), set(acknowledged)))
    producer.close()
    broker.close()
    for index, (image, committed) in enumerate(images):
        with open_twin(image) as reopened:
            reopened.transactions.init_producer_id(TXN, 60_000)
            assert_no_lso_held(reopened)
            by_partition = [committed_values(reopened, partition) for partition in range(2)]
            seen = set(by_partition[0]) | set(by_partition[1])
            assert committed <= seen, f"image {index}: lost {committed - seen}"
            for values in by_partition:
                assert len(values) == len(set(values)), f"image {index}: duplicated"
            for tag in seen:
                where = {p for p in range(2) if tag in by_partition[p]}
                assert where == written_to[tag], f"image {index}: {tag!r} not all or nothing"


def test_an_aborted_transaction_in_a_rolled_segment_survives_a_power_loss() -> None:
    """Group commits leave the active segment's index files unsynced (recovery rescans the
    last segment whole), so a roll must sync them, the .txnindex included, before the
    segment stops being the last: here the aborted transaction's entry lives in a rolled
    segment below the checkpointed recovery point, which the next open does not rescan."""
    twin, broker = new_twin(5)
    producer = initialized_producer(broker)
    producer.begin_transaction()
    producer.produce(TOPIC, b"aborted", partition=0)
    assert producer.flush() == 0
    producer.abort_transaction()
    commit_one(producer, b"committed", 0)
    log = broker.log(TOPIC, 0)
    log.flush()  # the last marker too: the recovery point reaches the log end
    producer_id = log.producer_state.producer_ids()[0]
    log.roll()
    broker.run_maintenance()  # writes the recovery-point checkpoint
    image = copy_twin(twin, content_of=twin.durable_bytes)
    with open_twin(image) as reopened:
        again = reopened.log(TOPIC, 0)
        assert again.recovery_report.segments_recovered == 1, "only the last (empty) one"
        listed = again.read(0, isolation_level="read_committed").aborted_transactions
        assert listed == [(producer_id, 0)]
        assert committed_values(reopened, 0) == [b"committed"]
    producer.close()
    broker.close()


def test_transactional_offsets_are_fsynced_before_prepare_commit() -> None:
    """send_offsets_to_transaction appends to `__consumer_offsets`: those records are data
    of the transaction, so commit_transaction fsyncs them before the Prepare* fsync (a
    power loss in between must not commit a transaction whose offsets are lost)."""
    twin, broker = new_twin(6)
    consumer = broker.consumer({"group.id": "g", "enable.auto.commit": False})
    producer = initialized_producer(broker)
    producer.begin_transaction()
    producer.produce(TOPIC, b"v", partition=0)
    producer.send_offsets_to_transaction(
        [eoslog.TopicPartition(TOPIC, 1, 7)], consumer.consumer_group_metadata()
    )
    start = twin.calls
    producer.commit_transaction()
    syncs = [
        path.split("/")[-2]
        for operation, path in twin.recorded_calls()[start:]
        if operation == "sync" and path.endswith(".log")
    ]
    offsets_dir = "{}-{}".format(*broker.groups.offsets_partition("g"))
    state = next(index for index, name in enumerate(syncs) if name.startswith(STATE_TOPIC))
    assert offsets_dir in syncs[:state], syncs
    consumer.close()
    producer.close()
    broker.close()


def commit_with_offsets_then_consumer_commit(
    seed: int, fail_sync: int | None
) -> tuple[RecordingFileSystem, eoslog.Broker, Producer, eoslog.Consumer, list[int]]:
    """Commit a transaction with offsets (its markers unsynced), then a plain consumer commit
    to the same `__consumer_offsets` partition, failing file-system call `fail_sync` if
    given. Returns the twin, the broker and the calls the consumer commit made that were
    fsyncs of the offsets partition's .log."""
    twin, broker = new_twin(seed)
    consumer = broker.consumer({"group.id": "g", "enable.auto.commit": False})
    producer = initialized_producer(broker)
    producer.begin_transaction()
    producer.produce(TOPIC, b"v", partition=0)
    producer.send_offsets_to_transaction(
        [eoslog.TopicPartition(TOPIC, 1, 7)], consumer.consumer_group_metadata()
    )
    producer.commit_transaction()
    start = twin.calls
    if fail_sync is not None:
        twin.fail_at(fail_sync, "EIO")
        with pytest.raises(KafkaStorageError):
            consumer.commit(offsets=[eoslog.TopicPartition(TOPIC, 0, 3)])
    else:
        consumer.commit(offsets=[eoslog.TopicPartition(TOPIC, 0, 3)])
    syncs = [
        start + index
        for index, (operation, path) in enumerate(twin.recorded_calls()[start:])
        if operation == "sync" and "/__consumer_offsets-" in path and path.endswith(".log")
    ]
    return twin, broker, producer, consumer, syncs


def test_a_failed_marker_fsync_keeps_complete_from_becoming_durable_over_the_lost_marker() -> None:
    """A committed transaction's markers are written without an fsync; the Prepare* record
    stands for them until Complete* is durable. When the fsync that should make a marker
    durable fails (here: a consumer commit's fsync of the same `__consumer_offsets` file),
    the marker may be lost, so the state log must never be fsynced again in this process:
    close() fsynced it anyway, Complete* became durable, and the next open took the
    transaction as finished without its marker: the committed offsets were gone."""
    _, clean, *_, syncs = commit_with_offsets_then_consumer_commit(7, None)
    clean.close()
    assert len(syncs) == 1, syncs
    twin, broker, producer, consumer, _ = commit_with_offsets_then_consumer_commit(7, syncs[0])
    # The id's next transaction, with offsets too, aborts: recovery finishes its
    # PrepareAbort with an ABORT marker in the offsets partition, which ends whatever
    # transaction is open there: the committed one, if its COMMIT marker was lost.
    producer.begin_transaction()
    producer.produce(TOPIC, b"after", partition=0)
    with contextlib.suppress(KafkaException):
        producer.send_offsets_to_transaction(
            [eoslog.TopicPartition(TOPIC, 1, 9)], consumer.consumer_group_metadata(), 0.2
        )
    with contextlib.suppress(KafkaException):
        producer.abort_transaction(0.2)
    with pytest.raises(KafkaStorageError):
        broker.close()
    with open_twin(copy_twin(twin, content_of=twin.durable_bytes)) as reopened:
        stored = reopened.groups.fetch_offsets("g", [(TOPIC, 1)], require_stable=False)
        found = stored[(TOPIC, 1)]
        assert found is not None and found.offset == 7, found
        assert committed_values(reopened, 0) == [b"v"]


def test_a_lost_commit_marker_is_rewritten_before_a_later_prepare_abort_is_finished() -> None:
    """Transaction 1 commits (its marker in t-0 not fsynced); transaction 2 adds t-0 and
    aborts. A power loss after a failed marker fsync may keep the state log's later
    records (Complete of 1, PrepareAbort of 2: unsynced writes land in any order) and drop
    the marker. Recovery finished PrepareAbort first: its ABORT marker ended the open
    transaction in t-0, which was transaction 1's committed data, before the lost COMMIT
    marker was rewritten from transaction 1's Prepare record."""
    twin, broker = new_twin(8)
    producer = initialized_producer(broker)
    commit_one(producer, b"committed", 0)
    data_path = next(
        path
        for path in (f"{LOG_DIR}/{TOPIC}-0/{name}" for name in twin.listdir(f"{LOG_DIR}/{TOPIC}-0"))
        if path.endswith(".log")
    )
    without_marker = twin.durable_bytes(data_path)
    # The marker is written but not durable (inside the preallocated file: same length).
    assert without_marker != twin.snapshot_bytes(data_path), "marker already durable"
    producer.begin_transaction()
    producer.produce(TOPIC, b"aborted", partition=0)
    producer.abort_transaction()
    image = copy_twin(
        twin,
        content_of=lambda path: without_marker if path == data_path else twin.snapshot_bytes(path),
    )
    producer.close()
    broker.close()
    with open_twin(image) as reopened:
        assert committed_values(reopened, 0) == [b"committed"]
