"""The randomized workload of docs/reliability.md family 8: one run of it is a child process
(started by tests/reliability/f08_history/test_history.py through tests/support/killharness.py,
so a kill -9 is real) that opens one log directory and runs these threads against it, each
recording every operation in the run's history file (tests/support/history.py):

- idem: an idempotent producer sending 1-4 records at a time to any partition of both topics;
- txw: a transactional producer (id "txw-0") whose transactions read a few records of `out`
  (read_committed, assigned) and send 1-5 records to any partitions, a quarter aborted; now and
  then, during a transaction, it replays a produce and an EndTxn of its previous transaction
  with the old epoch, as a delayed request would arrive (process "txw-delayed"; each must be
  refused);
- cp0, cp1: consume-transform-produce copiers in group "copiers" (subscribe to `in`, each
  record copied to `out`, the consumed positions sent with the transaction, a quarter aborted;
  after an abort, committed() and a seek back to it);
- aud: a read_committed consumer of group "auditors" with assigned partitions, started at the
  group's committed offsets, that polls, commits, seeks and reads its committed offsets;
- ru: a read_uncommitted consumer of every partition, seeking back now and then;
- cln (with compaction only): the log cleaner kept running, a pass every few milliseconds
  after rolling a partition of `kv` now and then (Broker.run_maintenance, recorded "clean").

With compaction (the "compact" argument), a third topic, `kv`, is compacted
(cleanup.policy=compact, small segments, min.cleanable.dirty.ratio 0.01 and
min.compaction.lag.ms 0, so each pass cleans what it may); the idempotent and transactional
producers write it too, each record with one of a few record keys per partition, aborts
included, a tenth of them tombstones (a null value; the history's value in a header), and
the auditor and the reader read it, so cleaning overlaps reads, writes, kills
and restarts. The history says which partitions are compacted (operation "compacted",
written by the parent) and each write's record key: the checker's rule for records the
cleaner may remove (tests/support/history_model.py, cleanable) applies there.

Values are "<run>.<role>.<n>", unique across runs. The run ends after each thread did its
operations, or earlier by SIGKILL. Every few operations the child prints a progress line, which
arms the parent's kill timer.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import eoslog
from eoslog.errors import KafkaException
from eoslog.record import codec
from tests.support.history import (
    READ_UNCOMMITTED,
    TOMBSTONE_HEADER,
    Key,
    Recorder,
    Recording,
    identity,
    key_of,
    split_key,
)

# Small segments, so that rolls happen during the run too.
TOPICS = {"in": (3, {"segment.bytes": 16 * 1024}), "out": (2, {"segment.bytes": 16 * 1024})}
COMPACTED = {
    "kv": (
        2,
        {
            "cleanup.policy": "compact",
            "segment.bytes": 2048,
            "min.cleanable.dirty.ratio": 0.01,
            "min.compaction.lag.ms": 0,
            "delete.retention.ms": 200,  # tombstones go within a run
        },
    )
}
RECORD_KEYS = 6  # per partition of a compacted topic: each key is written again and again
TOMBSTONE_FRACTION = 0.1
CLEAN_ROLL_FRACTION = 0.3
CLEAN_PAUSE_S = 0.005  # between the cleaner's passes: a pace, not an order of events
COPIERS = "copiers"
AUDITORS = "auditors"
TRANSACTIONAL_IDS = ("txw-0", "cp0", "cp1")
ABORT_FRACTION = 0.25
DELAYED_FRACTION = 0.1
PROGRESS_EVERY = 10
# A wait, so that a rebalance can come due while a consume() holds records (it once delivered
# them twice: tests/reliability/f08_history/test_history_regressions.py).
COPIER_CONSUME_TIMEOUT_S = 0.01


def topics(compaction: bool = False) -> dict[str, tuple[int, dict[str, Any]]]:
    """The workload's topics: their partition counts and configs."""
    return {**TOPICS, **COMPACTED} if compaction else dict(TOPICS)


def keys(topic: str | None = None, compaction: bool = False) -> list[Key]:
    return [
        key_of(name, partition)
        for name, (count, _) in topics(compaction).items()
        if topic in (None, name)
        for partition in range(count)
    ]


def partitions(keys_: list[Key], offsets: dict[Key, int] | None = None) -> list[Any]:
    found = []
    for key in keys_:
        topic, partition = split_key(key)
        if offsets is None:
            found.append(eoslog.TopicPartition(topic, partition))
        else:
            found.append(eoslog.TopicPartition(topic, partition, offsets[key]))
    return found


def polled(messages: list[Any]) -> list[tuple[Key, int, str]]:
    """The records among `messages` (not the error messages) as a poll records them."""
    found = []
    for message in messages:
        offset = message.offset()
        if message.error() is None and offset is not None:
            key = key_of(message.topic(), message.partition())
            found.append((key, offset, identity(message.value(), message.headers())))
    return found


def create_topics(broker: eoslog.Broker, compaction: bool = False) -> None:
    for name, (count, config) in topics(compaction).items():
        if name not in broker.list_topics():
            broker.create_topic(name, count, config)


class Worker:
    """One thread of the workload: `ops` operations recorded as process "r<run>:<role>"."""

    role = ""

    def __init__(
        self, broker: eoslog.Broker, recorder: Recorder, run: int, seed: int, compaction: bool
    ) -> None:
        self.broker = broker
        self.compaction = compaction
        self.recorder = recorder
        self.run = run
        self.rng = random.Random(f"{seed}:{self.role}")
        self.process = f"r{run}:{self.role}"
        self.numbers = iter(range(1 << 62))

    def value(self) -> str:
        return f"{self.run}.{self.role}.{next(self.numbers)}"

    def keys(self, topic: str | None = None) -> list[Key]:
        return keys(topic, self.compaction)

    def record_key(self, key: Key) -> str | None:
        """A record key for a write to `key`: one of a few on a compacted topic, else none."""
        return f"k{self.rng.randrange(RECORD_KEYS)}" if split_key(key)[0] in COMPACTED else None

    def op(self, f: str, **fields: Any) -> Recording:
        return self.recorder.op(self.process, f, **fields)

    def start(self) -> None:
        """Set-up before the first operation (a producer initialized, a consumer assigned)."""

    def step(self) -> None:
        raise NotImplementedError

    def read(self, op: Recording, consumer: Any, count: int, timeout: float) -> list[Any]:
        messages = [m for m in consumer.consume(count, timeout) if m.error() is None]
        op.read(polled(messages))
        return messages


class Sender(Worker):
    """Delivery reports collected per value."""

    def produce(self, op: Recording, producer: Any, key: Key, value: str) -> None:
        record_key = self.record_key(key)
        tombstone = record_key is not None and self.rng.random() < TOMBSTONE_FRACTION
        op.writing(key, value, record_key, tombstone)
        topic, partition = split_key(key)

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                op.delivered(value, message.offset())

        producer.produce(
            topic,
            None if tombstone else value.encode(),
            record_key,
            partition=partition,
            on_delivery=delivered,
            headers={TOMBSTONE_HEADER: value} if tombstone else None,
        )


class Idempotent(Sender):
    role = "idem"

    def start(self) -> None:
        self.producer = self.broker.producer({"linger.ms": self.rng.choice([0, 2])})

    def step(self) -> None:
        with self.op("send") as op:
            sends = [
                (self.rng.choice(self.keys()), self.value()) for _ in range(self.rng.randint(1, 4))
            ]
            for key, value in sends:
                self.produce(op, self.producer, key, value)
            self.producer.flush()
            if len(op.written) != len(sends):
                op.type = "info"


class Transactional(Sender):
    """A transactional producer; its transaction() runs `body` inside one."""

    transactional_id = ""

    def start(self) -> None:
        config = {"transactional.id": self.transactional_id, "linger.ms": self.rng.choice([0, 2])}
        self.producer = self.broker.producer(config)
        self.producer.init_transactions()

    def transaction(self, body: Callable[[Recording], None], **fields: Any) -> Recording:
        """One recorded transaction: `body` reads and sends; then it commits (ok), or aborts
        (fail) a quarter of the time or when the body raised an abortable error."""
        producer = self.producer
        with self.op(
            "txn",
            tid=self.transactional_id,
            pid=producer.producer_id,
            epoch=producer.producer_epoch,
            **fields,
        ) as op:
            producer.begin_transaction()
            try:
                body(op)
                if self.rng.random() >= ABORT_FRACTION:
                    # A step, written before the call: a kill inside it leaves it on record.
                    op.step(commit_t=self.recorder.clock())
                    producer.commit_transaction()
                    return op
            except KafkaException as error:
                if not error.args[0].txn_requires_abort():
                    raise
                op.fields["error"] = repr(error)
            producer.abort_transaction()
            op.type = "fail"
        return op


class TransactionalWriter(Transactional):
    role = transactional_id = "txw-0"

    def start(self) -> None:
        super().start()
        self.consumer = self.broker.consumer(
            {"isolation.level": "read_committed", "enable.auto.commit": False}
        )
        starts = dict.fromkeys(keys("out"), 0)
        with self.op("assign", keys=list(starts), o=starts):
            self.consumer.assign(partitions(list(starts), starts))
        self.previous: tuple[int, int, bool] | None = None  # pid, epoch, committed

    def step(self) -> None:
        pid, epoch = self.producer.producer_id, self.producer.producer_epoch
        op = self.transaction(self.body)
        if self.producer.producer_epoch > epoch:  # it reached the coordinator, which ended it
            self.previous = (pid, epoch, op.type == "ok")

    def body(self, op: Recording) -> None:
        if self.rng.random() < 0.5:
            self.read(op, self.consumer, self.rng.randint(1, 5), 0)
        for _ in range(self.rng.randint(1, 5)):
            self.produce(op, self.producer, self.rng.choice(self.keys()), self.value())
        if self.previous is not None and self.rng.random() < DELAYED_FRACTION:
            self.producer.flush()  # this transaction is under way on its partitions
            self.delayed_requests(*self.previous)

    def delayed_requests(self, pid: int, epoch: int, committed: bool) -> None:
        """A produce and an EndTxn of the previous transaction, arriving now: both must be
        refused (docs/reliability.md family 9)."""
        zombie = f"r{self.run}:txw-delayed"
        key, value = self.rng.choice(self.keys()), self.value()
        record_key = self.record_key(key)
        with self.recorder.op(zombie, "send", epoch=epoch) as op:
            op.writing(key, value, record_key)
            builder = codec.BatchBuilder(
                producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True
            )
            encoded_key = None if record_key is None else record_key.encode()
            builder.append(int(time.time() * 1000), encoded_key, value.encode())
            try:
                info = self.broker.log(*split_key(key)).append_batch(builder.build())
                if info.duplicate:  # taken for a retry of a batch already there: not appended
                    op.type, op.fields["error"] = "fail", f"duplicate of {info.base_offset}"
                else:
                    op.delivered(value, info.base_offset)
            except KafkaException as error:  # a typed refusal appends nothing
                op.type, op.fields["error"] = "fail", repr(error)
        with self.recorder.op(zombie, "end", epoch=epoch) as op:
            try:
                self.broker.transactions.end_transaction(
                    self.transactional_id, pid, epoch, committed
                )
            except KafkaException as error:
                op.type, op.fields["error"] = "fail", repr(error)


class Copier(Transactional):
    """Consume `in`, copy each record to `out`, offsets in the transaction."""

    def start(self) -> None:
        super().start()
        self.moved: set[Key] = set()
        self.consumer = self.broker.consumer(
            {
                "group.id": COPIERS,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        with self.op("subscribe", keys=keys("in"), group=COPIERS):
            self.consumer.subscribe(["in"], on_assign=self.rebalanced, on_revoke=self.rebalanced)

    def rebalanced(self, consumer: Any, moved: list[Any]) -> None:
        self.moved.update(key_of(tp.topic, tp.partition) for tp in moved)

    def step(self) -> None:
        self.moved = set()
        op = self.transaction(self.body, group=COPIERS)
        if op.type == "fail":
            self.rewind()

    def body(self, op: Recording) -> None:
        count = self.rng.randint(1, 20)
        messages = self.read(op, self.consumer, count, COPIER_CONSUME_TIMEOUT_S)
        if self.moved:  # a rebalance inside consume(): on record before anything else
            op.step(rebalanced=sorted(self.moved))
        for message in messages:
            out = key_of("out", message.partition() % TOPICS["out"][0])
            self.produce(op, self.producer, out, self.value())
        positions = [tp for tp in self.consumer.position(self.consumer.assignment())]
        offsets = {key_of(tp.topic, tp.partition): tp.offset for tp in positions if tp.offset >= 0}
        if offsets:
            op.step(o=offsets)
            self.producer.send_offsets_to_transaction(
                partitions(list(offsets), offsets), self.consumer.consumer_group_metadata()
            )

    def rewind(self) -> None:
        """Back to the committed offsets, after an abort: the aborted records are read again."""
        assigned = [key_of(tp.topic, tp.partition) for tp in self.consumer.assignment()]
        if not assigned:
            return
        committed = observe_committed(self.recorder, self.process, self.consumer, COPIERS, assigned)
        starts = {key: 0 if offset is None else offset for key, offset in committed.items()}
        with self.op("seek", o=starts):
            for tp in partitions(list(starts), starts):
                self.consumer.seek(tp)


class Copier0(Copier):
    role = transactional_id = "cp0"


class Copier1(Copier):
    role = transactional_id = "cp1"


def observe_committed(
    recorder: Recorder, process: str, consumer: Any, group: str, keys_: list[Key]
) -> dict[Key, int | None]:
    """committed(), recorded as a "committed" operation."""
    with recorder.op(process, "committed", group=group) as op:
        found = consumer.committed(partitions(keys_), timeout=30)
        offsets = {key_of(tp.topic, tp.partition): tp.offset for tp in found}
        committed = {key: (offset if offset >= 0 else None) for key, offset in offsets.items()}
        op.step(o=committed)
    return committed


class Auditor(Worker):
    role = "aud"

    def start(self) -> None:
        self.consumer = self.broker.consumer(
            {
                "group.id": AUDITORS,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        every = self.keys()
        committed = observe_committed(self.recorder, self.process, self.consumer, AUDITORS, every)
        self.seen: list[tuple[Key, int]] = []
        starts = {key: 0 if offset is None else offset for key, offset in committed.items()}
        with self.op("assign", keys=list(starts), o=starts, group=AUDITORS):
            self.consumer.assign(partitions(list(starts), starts))

    def step(self) -> None:
        choice = self.rng.random()
        if choice < 0.7:
            with self.op("poll", group=AUDITORS) as op:
                for m in self.read(op, self.consumer, self.rng.randint(1, 50), 0.01):
                    self.seen.append((key_of(m.topic(), m.partition()), m.offset()))
        elif choice < 0.8:
            positions = self.consumer.position(self.consumer.assignment())
            offsets = {key_of(tp.topic, tp.partition): tp.offset for tp in positions}
            offsets = {key: offset for key, offset in offsets.items() if offset >= 0}
            if offsets:
                # Given, not the stored offsets: what a commit killed in flight may have left
                # must be on record before the call.
                with self.op("commit", group=AUDITORS, o=offsets):
                    self.consumer.commit(offsets=partitions(list(offsets), offsets))
        elif choice < 0.9 and self.seen:
            key, offset = self.rng.choice(self.seen[-200:])
            with self.op("seek", o={key: offset}):
                self.consumer.seek(partitions([key], {key: offset})[0])
        else:
            observe_committed(self.recorder, self.process, self.consumer, AUDITORS, self.keys())


class Uncommitted(Worker):
    role = "ru"

    def start(self) -> None:
        self.consumer = self.broker.consumer({"isolation.level": READ_UNCOMMITTED})
        starts = dict.fromkeys(self.keys(), 0)
        self.seen: list[tuple[Key, int]] = []
        with self.op("assign", keys=list(starts), o=starts, isolation=READ_UNCOMMITTED):
            self.consumer.assign(partitions(list(starts), starts))

    def step(self) -> None:
        if self.rng.random() < 0.1 and self.seen:
            key, offset = self.rng.choice(self.seen[-200:])
            with self.op("seek", o={key: offset}, isolation=READ_UNCOMMITTED):
                self.consumer.seek(partitions([key], {key: offset})[0])
            return
        with self.op("poll", isolation=READ_UNCOMMITTED) as op:
            for m in self.read(op, self.consumer, self.rng.randint(1, 100), 0.01):
                self.seen.append((key_of(m.topic(), m.partition()), m.offset()))


class Cleaner(Worker):
    """Keeps the log cleaner running (module docstring); with compaction only."""

    role = "cln"

    def start(self) -> None:
        self.pause = threading.Event()  # never set: its wait() paces the passes

    def step(self) -> None:
        self.pause.wait(CLEAN_PAUSE_S)
        rolled = None
        if self.rng.random() < CLEAN_ROLL_FRACTION:
            rolled = self.rng.choice(self.keys("kv"))
        with self.op("clean", keys=[] if rolled is None else [rolled]):
            if rolled is not None:
                self.broker.log(*split_key(rolled)).roll()
            self.broker.run_maintenance()


WORKERS: tuple[type[Worker], ...] = (
    Idempotent,
    TransactionalWriter,
    Copier0,
    Copier1,
    Auditor,
    Uncommitted,
)


def main(argv: list[str]) -> None:
    """One run: argv = root, seed, run, history path, operations per thread, and "compact"
    for the compacted topic and the cleaner (module docstring)."""
    root, seed, run, path, ops = argv[0], int(argv[1]), int(argv[2]), argv[3], int(argv[4])
    compaction = argv[5:] == ["compact"]
    threading.excepthook = _die
    printing = threading.Lock()
    broker = eoslog.open(root, durability="commit")
    recorder = Recorder(path)

    def work(worker: Worker) -> None:
        worker.start()
        for number in range(ops):
            worker.step()
            if number % PROGRESS_EVERY == 0:
                with printing:
                    print(json.dumps({"process": worker.process, "ops": number}), flush=True)

    kinds = (*WORKERS, Cleaner) if compaction else WORKERS
    workers = [kind(broker, recorder, run, seed, compaction) for kind in kinds]
    threads = [threading.Thread(target=work, args=(worker,)) for worker in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    broker.close()
    recorder.close()
    print(json.dumps({"done": True}), flush=True)


def _die(arguments: threading.ExceptHookArgs) -> None:
    """A thread that fails fails the run: the parent sees a non-zero exit with the traceback."""
    traceback.print_exception(arguments.exc_type, arguments.exc_value, arguments.exc_traceback)
    sys.stderr.flush()
    os._exit(3)


if __name__ == "__main__":
    main(sys.argv[1:])
