"""A Hypothesis stateful model of producer, transaction and consumer-offset state, with crash
and restart steps (docs/reliability.md family 12).

A broker runs on the fs twin under durability "commit". Rules drive it: idempotent produce
(acknowledged by flush()), transactions (begin, produce, send offsets, commit, abort), plain
consumer offset commits, a re-init that fences the previous producer, a fenced producer's
attempt to commit, a clean close and reopen, a process crash (the broker abandoned: every
written byte survives) and a power loss (the twin's crash image: only what was fsynced
survives, torn at random). The model holds, per partition, the records in offset order with
their fate (committed, pending in the open transaction, aborted), the committed offsets and
the producer epochs. After every step the invariants compare the broker with the model:

- a read_committed consumer returns exactly the model's committed records up to the first
  pending one (the last stable offset), in strictly increasing offsets;
- the group's committed offsets are the model's;
- producer epochs only grow, and a fenced producer stays fenced;
- log end offsets never move backwards.

Everything acknowledged is acknowledged only once its call returned (flush(),
commit_transaction(), commit()), each of which returns after the fsync under "commit", so a
power loss may not lose any of it. derandomize=True: a failing run replays the same steps,
and Hypothesis prints them (the crash seeds are rule arguments, printed with them).
"""

from __future__ import annotations

import gc
import random
from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

import eoslog
from eoslog import ConsumerGroupMetadata, TopicPartition
from eoslog.errors import KafkaException
from eoslog.fs_twin import RecordingFileSystem

ROOT = "/data"
LOG_DIR = "/data/log"
TOPIC = "t"
PARTITIONS = 2
GROUP = "g"
TXN_ID = "model"
COMMITTED, PENDING, ABORTED = "committed", "pending", "aborted"
# Small preallocated indexes: the twin holds them in memory, and every open resizes them.
BROKER_CONFIG = {"log.index.size.max.bytes": 4096}


@dataclass
class Entry:
    value: bytes
    fate: str


@dataclass
class Model:
    records: dict[int, list[Entry]] = field(
        default_factory=lambda: {p: [] for p in range(PARTITIONS)}
    )
    offsets: dict[int, int] = field(default_factory=dict)
    pending_offsets: dict[int, int] = field(default_factory=dict)
    in_transaction: bool = False

    def visible(self, partition: int) -> list[bytes]:
        """What read_committed returns: committed records below the first pending one."""
        out = []
        for entry in self.records[partition]:
            if entry.fate == PENDING:
                break
            if entry.fate == COMMITTED:
                out.append(entry.value)
        return out

    def end_transaction(self, committed: bool) -> None:
        for entries in self.records.values():
            for entry in entries:
                if entry.fate == PENDING:
                    entry.fate = COMMITTED if committed else ABORTED
        if committed:
            self.offsets.update(self.pending_offsets)
        self.pending_offsets.clear()
        self.in_transaction = False


partitions = st.integers(0, PARTITIONS - 1)
offsets = st.integers(0, 50)


class BrokerModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.twin = RecordingFileSystem(seed=0)
        self.twin.makedirs(ROOT, durable=True)
        self.model = Model()
        self.sequence = 0
        self.epochs: list[tuple[int, int]] = []
        self.log_ends = [0] * PARTITIONS
        self.zombie: eoslog.Producer | None = None
        self.broker = eoslog.open(LOG_DIR, "commit", BROKER_CONFIG, fs=self.twin, background=False)
        self.broker.create_topic(TOPIC, PARTITIONS)
        self.start_clients()

    # --- clients --------------------------------------------------------------------------

    def start_clients(self) -> None:
        """Fresh clients on the open broker; the transactional producer's init aborts any
        transaction its previous incarnation left open."""
        self.idempotent = self.broker.producer({"enable.idempotence": True, "linger.ms": 0})
        self.consumer = self.broker.consumer(
            {"group.id": GROUP, "enable.auto.commit": False, "isolation.level": "read_uncommitted"}
        )
        self.transactional = self.new_transactional()
        self.model.end_transaction(committed=False)

    def new_transactional(self) -> eoslog.Producer:
        producer = self.broker.producer({"transactional.id": TXN_ID, "linger.ms": 0})
        producer.init_transactions()
        identity = (producer.producer_id, producer.producer_epoch)
        if self.epochs and identity[0] == self.epochs[-1][0]:
            assert identity[1] > self.epochs[-1][1], (
                f"epoch went from {self.epochs[-1]} to {identity}"
            )
        self.epochs.append(identity)
        return producer

    def next_value(self) -> bytes:
        self.sequence += 1
        return b"v%d" % self.sequence

    def abandon(self) -> None:
        """Drop every client and the broker without closing them (a killed process)."""
        self.zombie = None
        del self.idempotent, self.transactional, self.consumer, self.broker

    def reopen(self, twin: RecordingFileSystem) -> None:
        self.twin = twin
        self.broker = eoslog.open(LOG_DIR, "commit", BROKER_CONFIG, fs=twin, background=False)
        self.start_clients()

    # --- rules ----------------------------------------------------------------------------

    @rule(partition=partitions)
    def produce_idempotent(self, partition: int) -> None:
        value = self.next_value()
        self.idempotent.produce(TOPIC, value, partition=partition)
        self.idempotent.flush()
        self.model.records[partition].append(Entry(value, COMMITTED))

    @precondition(lambda self: not self.model.in_transaction)
    @rule()
    def begin(self) -> None:
        self.transactional.begin_transaction()
        self.model.in_transaction = True

    @precondition(lambda self: self.model.in_transaction)
    @rule(partition=partitions)
    def produce_in_transaction(self, partition: int) -> None:
        value = self.next_value()
        self.transactional.produce(TOPIC, value, partition=partition)
        self.transactional.flush()  # appended now, so offsets follow the model's order
        self.model.records[partition].append(Entry(value, PENDING))

    @precondition(lambda self: self.model.in_transaction)
    @rule(partition=partitions, offset=offsets)
    def send_offsets(self, partition: int, offset: int) -> None:
        self.transactional.send_offsets_to_transaction(
            [TopicPartition(TOPIC, partition, offset)], ConsumerGroupMetadata(GROUP)
        )
        self.model.pending_offsets[partition] = offset

    @precondition(lambda self: self.model.in_transaction)
    @rule()
    def commit(self) -> None:
        self.transactional.commit_transaction()
        self.model.end_transaction(committed=True)

    @precondition(lambda self: self.model.in_transaction)
    @rule()
    def abort(self) -> None:
        self.transactional.abort_transaction()
        self.model.end_transaction(committed=False)

    @precondition(lambda self: not self.model.pending_offsets)
    @rule(partition=partitions, offset=offsets)
    def commit_consumer_offset(self, partition: int, offset: int) -> None:
        self.consumer.commit(offsets=[TopicPartition(TOPIC, partition, offset)])
        self.model.offsets[partition] = offset

    @rule()
    def reinit_fencing_the_previous_producer(self) -> None:
        """A new incarnation of the transactional id: its init aborts the open transaction
        and fences the previous producer, which is kept as a zombie."""
        self.zombie = self.transactional
        self.transactional = self.new_transactional()
        self.model.end_transaction(committed=False)

    @precondition(lambda self: self.zombie is not None)
    @rule(partition=partitions)
    def fenced_producer_tries_to_commit(self, partition: int) -> None:
        zombie, self.zombie = self.zombie, None
        assert zombie is not None
        try:
            if zombie.transaction_state != "IN_TRANSACTION":
                zombie.begin_transaction()
            zombie.produce(TOPIC, self.next_value(), partition=partition)
            zombie.commit_transaction()
        except KafkaException as error:
            print(f"fenced producer refused: {error}")
        else:
            raise AssertionError("a fenced producer committed a transaction")

    @rule()
    def close_and_reopen(self) -> None:
        self.broker.close()
        twin = self.twin
        self.abandon()
        self.reopen(twin)

    @rule()
    def process_crash_and_reopen(self) -> None:
        """A killed process: every written byte stays (unsynced ones in the page cache, where
        a later power loss may still take them), and the kernel drops its lock."""
        lock = self.broker._dir_lock
        self.abandon()
        gc.collect()  # its mappings die with the process
        lock.release()
        self.reopen(self.twin)

    @rule(seed=st.integers(0, 2**32 - 1))
    def power_loss_and_reopen(self, seed: int) -> None:
        image = self.twin.crash_image(random.Random(seed))
        self.abandon()
        self.reopen(image)

    # --- invariants -----------------------------------------------------------------------

    @invariant()
    def read_committed_view_is_the_model(self) -> None:
        reader = self.broker.consumer(
            {"auto.offset.reset": "earliest", "isolation.level": "read_committed"}
        )
        reader.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        found: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        last = dict.fromkeys(range(PARTITIONS), -1)
        while messages := reader.consume(1000, timeout=0):
            for message in messages:
                partition, offset = message.partition(), message.offset()
                assert offset > last[partition], f"offset {offset} after {last[partition]}"
                last[partition] = offset
                found[partition].append(bytes(message.value()))
        reader.close()
        for partition in range(PARTITIONS):
            assert found[partition] == self.model.visible(partition), partition

    @invariant()
    def committed_offsets_are_the_model(self) -> None:
        stored = self.broker.groups.fetch_offsets(
            GROUP, [(TOPIC, p) for p in range(PARTITIONS)], require_stable=False
        )
        actual = {p: found.offset for (_, p), found in stored.items() if found is not None}
        assert actual == self.model.offsets

    @invariant()
    def log_ends_never_move_backwards(self) -> None:
        for partition in range(PARTITIONS):
            end = self.broker.log(TOPIC, partition).log_end_offset
            assert end >= self.log_ends[partition], (partition, end, self.log_ends)
            self.log_ends[partition] = end

    def teardown(self) -> None:
        if hasattr(self, "broker"):
            self.broker.close()


BrokerModel.TestCase.settings = settings(
    # About 15 s on a quiet core (60 x 40 steps, each checked by every invariant).
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
test_broker_state_matches_the_model_through_crashes_and_restarts = BrokerModel.TestCase
