"""Consumer groups of real Kafka clients against `Broker.serve` (docs/coordinator.md §13):
librdkafka consumers in two processes split a topic, and when one is killed the other takes
its partitions over after the session timeout, from the committed offsets; commit() and
committed() round trip; an in-process eoslog consumer and a confluent consumer share a group;
kafka-python's and aiokafka's group consumers with their defaults; cooperative-sticky, which
a client assigns; and the AdminClient's group calls. Every wait ends at a deadline that fails
the test."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import aiokafka
import kafka
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

import eoslog
from eoslog.broker import Broker
from eoslog.serve.server import Server
from tests.serve.clients import DEADLINE_S

GROUP = "workers"
TOPIC = "jobs"
PARTITIONS = 4
TAKEOVER_DEADLINE_S = 60.0  # the session timeout (6 s), the heartbeats and a rebalance
SESSION_CONFIG = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
MEMBER_SCRIPT = os.path.join(os.path.dirname(__file__), "group_consumer_process.py")


def _produce(broker: Broker, per_partition: int) -> None:
    producer = broker.producer({"linger.ms": 0})
    for partition in range(PARTITIONS):
        for _ in range(per_partition):
            producer.produce(TOPIC, b"job", partition=partition)
    producer.flush()
    producer.close()


def _committed(broker: Broker) -> dict[int, int]:
    """The group's committed offset of each partition of the topic, as the broker holds it."""
    stored = broker.groups.committed_partitions(GROUP)
    return {p: stored[(t, p)].offset for t, p in stored if t == TOPIC}


def _until(condition: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


class MemberProcess:
    """A librdkafka consumer in a child process (group_consumer_process.py): its latest
    assignment and the records it consumed and committed, as it reports them."""

    def __init__(self, address: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, MEMBER_SCRIPT, address, GROUP, TOPIC],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.assigned: list[tuple[str, int]] = []
        self.consumed: list[tuple[str, int, int]] = []
        self._events: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._events.put(json.loads(line))

    def update(self) -> None:
        while not self._events.empty():
            event = self._events.get()
            if "assigned" in event:
                self.assigned = [tuple(p) for p in event["assigned"]]  # type: ignore[misc]
            else:
                self.consumed.append(tuple(event["consumed"]))  # type: ignore[arg-type]

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(DEADLINE_S)

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()  # the consumer closes and leaves the group
            try:
                self.process.wait(DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.kill()


def test_librdkafka_consumers_in_two_processes_split_a_topic_and_a_killed_ones_partitions_move(
    broker: Broker, server: Server
) -> None:
    broker.create_topic(TOPIC, PARTITIONS)
    _produce(broker, 10)
    survivor, victim = MemberProcess(server.address), MemberProcess(server.address)
    try:
        members = (survivor, victim)

        def split_and_done() -> bool:
            for member in members:
                member.update()
            owned = survivor.assigned + victim.assigned
            consumed = len(survivor.consumed) + len(victim.consumed)
            return len(set(owned)) == len(owned) == PARTITIONS and consumed == 10 * PARTITIONS

        _until(split_and_done, "the two members split the topic and consumed it")
        assert survivor.assigned and victim.assigned
        victims_partitions = victim.assigned
        victim.kill()  # idle: everything it consumed is committed
        _produce(broker, 10)

        def taken_over() -> bool:
            survivor.update()
            return (
                len(survivor.assigned) == PARTITIONS
                and len(survivor.consumed) + len(victim.consumed) == 20 * PARTITIONS
            )

        _until(taken_over, "the survivor took every partition over", TAKEOVER_DEADLINE_S)
        # Every record was consumed once, by one member: the survivor went on from the
        # offsets the killed member had committed.
        consumed = survivor.consumed + victim.consumed
        expected = [(TOPIC, p, o) for p in range(PARTITIONS) for o in range(20)]
        assert sorted(consumed) == expected
        resumed = [o for t, p, o in survivor.consumed if (t, p) in victims_partitions]
        assert min(resumed) == 10
        state, _, protocol, _ = broker.groups.describe_group(GROUP)
        assert (state.value, protocol) == ("Stable", "range")
    finally:
        for member in (survivor, victim):
            member.stop()


def _confluent(address: str, **config: Any) -> Consumer:
    settings: dict[str, Any] = {
        "bootstrap.servers": address,
        "group.id": GROUP,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **SESSION_CONFIG,
    }
    settings.update(config)
    return Consumer(settings)


def test_commit_and_committed_round_trip_through_the_group_coordinator(
    broker: Broker, server: Server
) -> None:
    broker.create_topic(TOPIC, PARTITIONS)
    _produce(broker, 3)
    consumer = _confluent(server.address)
    consumer.subscribe([TOPIC])
    seen = 0
    deadline = time.monotonic() + DEADLINE_S
    while seen < 3 * PARTITIONS:
        assert time.monotonic() < deadline, f"consumed {seen}"
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            seen += 1
    consumer.commit(asynchronous=False)
    wanted = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    committed = consumer.committed(wanted, timeout=DEADLINE_S)
    assert [(tp.partition, tp.offset) for tp in committed] == [(p, 3) for p in range(PARTITIONS)]
    assert _committed(broker) == dict.fromkeys(range(PARTITIONS), 3)
    # An offset committed for a partition of no topic is refused for that partition alone.
    with pytest.raises(KafkaException) as refused:
        consumer.commit(offsets=[TopicPartition("no-such-topic", 0, 1)], asynchronous=False)
    assert refused.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    consumer.close()


def test_an_in_process_consumer_and_a_confluent_consumer_share_a_group(
    broker: Broker, server: Server
) -> None:
    broker.create_topic(TOPIC, PARTITIONS)
    _produce(broker, 5)
    remote = _confluent(server.address)
    remote.subscribe([TOPIC])
    local = broker.consumer(
        {"group.id": GROUP, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    local.subscribe([TOPIC])
    got: list[tuple[int, int]] = []

    def poll_both() -> None:
        for message in local.consume(10, timeout=0):
            got.append((message.partition(), message.offset()))
        message = remote.poll(0.05)
        if message is not None and message.error() is None:
            got.append((message.partition(), message.offset()))

    def split() -> bool:
        poll_both()
        mine = {tp.partition for tp in local.assignment()}
        theirs = {tp.partition for tp in remote.assignment()}
        return (
            bool(mine and theirs)
            and mine | theirs == set(range(PARTITIONS))
            and not (mine & theirs)
        )

    _until(split, "the in-process and the remote member split the topic")
    _until(lambda: (poll_both(), len(set(got)) == 5 * PARTITIONS)[1], "every record consumed")
    summary = broker.groups.classic.summary(GROUP)
    assert summary is not None
    assert sorted(m.client_host for m in summary.members) == ["/127.0.0.1", "in-process"]
    remote.close()  # it leaves: the in-process member gets everything at its next polls
    _until(
        lambda: (local.consume(1, timeout=0), len(local.assignment()) == PARTITIONS)[1],
        "the in-process member took every partition",
    )
    local.close()


def test_a_kafka_python_group_consumer_with_its_defaults_consumes_and_commits(
    broker: Broker, server: Server
) -> None:
    broker.create_topic(TOPIC, PARTITIONS)
    _produce(broker, 5)
    consumer = kafka.KafkaConsumer(
        TOPIC,
        bootstrap_servers=server.address,
        group_id=GROUP,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got = 0
    deadline = time.monotonic() + DEADLINE_S
    while got < 5 * PARTITIONS:
        assert time.monotonic() < deadline, f"consumed {got}"
        got += sum(len(records) for records in consumer.poll(timeout_ms=200).values())
    consumer.commit()
    assert {tp.partition for tp in consumer.assignment()} == set(range(PARTITIONS))
    consumer.close()
    assert _committed(broker) == dict.fromkeys(range(PARTITIONS), 5)


async def _aiokafka_group_consume(address: str, count: int) -> set[int]:
    consumer = aiokafka.AIOKafkaConsumer(
        TOPIC,
        bootstrap_servers=address,
        group_id=GROUP,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        got = 0
        async with asyncio.timeout(DEADLINE_S):
            while got < count:
                batches = await consumer.getmany(timeout_ms=200)
                got += sum(len(records) for records in batches.values())
        await consumer.commit()
        return {tp.partition for tp in consumer.assignment()}
    finally:
        await consumer.stop()


def test_an_aiokafka_group_consumer_with_its_defaults_consumes_and_commits(
    broker: Broker, server: Server
) -> None:
    broker.create_topic(TOPIC, PARTITIONS)
    _produce(broker, 5)
    owned = asyncio.run(_aiokafka_group_consume(server.address, 5 * PARTITIONS))
    assert owned == set(range(PARTITIONS))
    assert _committed(broker) == dict.fromkeys(range(PARTITIONS), 5)
    assert broker.groups.describe_group(GROUP)[2] is None  # it left: the group is Empty


def test_cooperative_sticky_consumers_run_the_group_with_a_client_as_leader(
    broker: Broker, server: Server
) -> None:
    broker.create_topic(TOPIC, PARTITIONS)
    sticky = {"partition.assignment.strategy": "cooperative-sticky"}
    first, second = _confluent(server.address, **sticky), _confluent(server.address, **sticky)
    first.subscribe([TOPIC])
    second.subscribe([TOPIC])

    def split() -> bool:
        first.poll(0.05)
        second.poll(0.05)
        a = {tp.partition for tp in first.assignment()}
        b = {tp.partition for tp in second.assignment()}
        return bool(a and b) and a | b == set(range(PARTITIONS)) and not a & b

    _until(split, "the two sticky members split the topic")
    state, _, protocol, _ = broker.groups.describe_group(GROUP)
    assert (state.value, protocol) == ("Stable", "cooperative-sticky")
    # An in-process consumer offers only eoslog's strategies: it cannot join this group.
    local = broker.consumer({"group.id": GROUP})
    local.subscribe([TOPIC])
    with pytest.raises(eoslog.KafkaException) as refused:
        local.consume(1, timeout=0)
    assert refused.value.args[0].code() == eoslog.KafkaError.INCONSISTENT_GROUP_PROTOCOL
    local.close()
    first.close()
    second.close()


def test_the_admin_client_lists_describes_and_deletes_groups(
    broker: Broker, server: Server
) -> None:
    broker.create_topic(TOPIC, PARTITIONS)
    _produce(broker, 1)
    consumer = _confluent(server.address)
    consumer.subscribe([TOPIC])
    _until(lambda: (consumer.poll(0.1), len(consumer.assignment()) == PARTITIONS)[1], "joined")
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
    admin = AdminClient({"bootstrap.servers": server.address})
    listed = admin.list_consumer_groups().result(timeout=DEADLINE_S)
    assert [(g.group_id, g.state.name) for g in listed.valid] == [(GROUP, "STABLE")]
    described = admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=DEADLINE_S)
    assert (described.state.name, described.partition_assignor) == ("STABLE", "range")
    assert not described.is_simple_consumer_group
    (member,) = described.members
    assert member.host == "/127.0.0.1"
    assert sorted(tp.partition for tp in member.assignment.topic_partitions) == list(
        range(PARTITIONS)
    )
    with pytest.raises(KafkaException) as refused:
        admin.delete_consumer_groups([GROUP])[GROUP].result(timeout=DEADLINE_S)
    assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    consumer.close()
    admin.delete_consumer_groups([GROUP])[GROUP].result(timeout=DEADLINE_S)
    assert broker.groups.committed_partitions(GROUP) == {}
    assert admin.list_consumer_groups().result(timeout=DEADLINE_S).valid == []


def test_a_static_librdkafka_member_restarting_gets_its_partitions_back_without_a_rebalance(
    broker: Broker, server: Server
) -> None:
    broker.create_topic(TOPIC, PARTITIONS)
    steady = _confluent(server.address, **{"group.instance.id": "steady"})
    restarting = _confluent(server.address, **{"group.instance.id": "restarting"})
    for consumer in (steady, restarting):
        consumer.subscribe([TOPIC])

    def split(members: tuple[Consumer, Consumer]) -> bool:
        owned = []
        for consumer in members:
            consumer.poll(0.05)
            owned += [tp.partition for tp in consumer.assignment()]
        return sorted(owned) == list(range(PARTITIONS)) and all(m.assignment() for m in members)

    _until(lambda: split((steady, restarting)), "the two static members split the topic")
    generation = broker.groups.describe_group(GROUP)[1]
    before = sorted(tp.partition for tp in restarting.assignment())
    restarting.close()  # a static member sends no LeaveGroup: its place waits for it
    again = _confluent(server.address, **{"group.instance.id": "restarting"})
    again.subscribe([TOPIC])
    _until(lambda: split((steady, again)), "the restarted member got partitions")
    assert sorted(tp.partition for tp in again.assignment()) == before
    assert broker.groups.describe_group(GROUP)[1] == generation  # nobody rebalanced
    steady.close()
    again.close()


def test_kafka_python_members_split_a_topic_and_one_takes_over_when_the_other_leaves(
    broker: Broker, server: Server
) -> None:
    broker.create_topic(TOPIC, PARTITIONS)

    def member() -> kafka.KafkaConsumer:
        return kafka.KafkaConsumer(
            TOPIC,
            bootstrap_servers=server.address,
            group_id=GROUP,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )

    staying, leaving = member(), member()

    def owned(consumer: kafka.KafkaConsumer) -> set[int]:
        consumer.poll(timeout_ms=50)
        return {tp.partition for tp in consumer.assignment()}

    def split() -> bool:
        mine, theirs = owned(staying), owned(leaving)
        return (
            bool(mine and theirs)
            and mine | theirs == set(range(PARTITIONS))
            and not (mine & theirs)
        )

    _until(split, "the two kafka-python members split the topic")
    leaving.close()  # LeaveGroup: the other rejoins at its next heartbeat
    _until(lambda: owned(staying) == set(range(PARTITIONS)), "the other took every partition")
    staying.close()
