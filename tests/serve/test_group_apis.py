"""The group APIs of `eoslog serve` (eoslog.serve.group_apis, offset_apis), called as the
server calls them: a kio request entity of one version and a Context over a real broker,
answered with the kio response entity of that version, which must encode (kio's writer)
and decode back the same. Joins that wait are tasks of one event loop; the broker runs on
the test's clock."""

from __future__ import annotations

import asyncio
import datetime
import io
from collections.abc import Coroutine
from typing import Any

from kio.schema.consumer_protocol_assignment.v0.data import ConsumerProtocolAssignment
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v0.request import JoinGroupRequest as JoinGroupRequestV0
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.leave_group.v0.request import LeaveGroupRequest as LeaveGroupRequestV0
from kio.schema.leave_group.v5.request import LeaveGroupRequest, MemberIdentity
from kio.schema.list_groups.v4.request import ListGroupsRequest
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic
from kio.schema.offset_fetch.v8.request import OffsetFetchRequest as OffsetFetchRequestV8
from kio.schema.offset_fetch.v8.request import OffsetFetchRequestGroup, OffsetFetchRequestTopics
from kio.schema.sync_group.v3.request import SyncGroupRequest
from kio.serial import entity_reader, entity_writer

import eoslog
from eoslog import ConsumerGroupMetadata, TopicPartition
from eoslog.coordinator.consumer_protocol import encode_subscription
from eoslog.error_codes import ErrorCodes as E
from eoslog.serve import group_apis, offset_apis
from eoslog.serve.registry import APIS, Context
from tests.support import logtools
from tests.support.logtools import OpenBroker

GROUP = "g"
SESSION = datetime.timedelta(seconds=10)
DEADLINE_S = 10.0  # a wait longer than this fails the test


def _context(broker: eoslog.Broker) -> Context:
    async def call(function: Any, *args: Any) -> Any:
        return await asyncio.to_thread(function, *args)

    async def wait_for_append(generation: int, timeout_s: float) -> bool:
        raise AssertionError("the group APIs never wait for an append")

    return Context(
        broker, 0, "127.0.0.1", 9092, "127.0.0.1:50000", "rdkafka", call, wait_for_append
    )


def _wire(response: Any) -> Any:
    """The response as the client reads it: encoded by kio, decoded again."""
    out = io.BytesIO()
    entity_writer(type(response))(out, response)
    decoded, _ = entity_reader(type(response))(out.getvalue(), 0)
    assert decoded == response
    return decoded


def _run(broker: eoslog.Broker, handler: Any, request: Any) -> Any:
    return _wire(asyncio.run(handler(_context(broker), request)))


async def _within(coroutine: Coroutine[Any, Any, Any]) -> Any:
    return _wire(await asyncio.wait_for(coroutine, DEADLINE_S))


def _join_request(member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=GROUP,
        session_timeout=SESSION,
        rebalance_timeout=datetime.timedelta(seconds=30),
        member_id=member_id,
        protocol_type="consumer",
        protocols=(
            JoinGroupRequestProtocol(name="range", metadata=encode_subscription(["t"])),
            JoinGroupRequestProtocol(name="roundrobin", metadata=encode_subscription(["t"])),
        ),
    )


def _assignment(data: bytes) -> list[tuple[str, int]]:
    assignment, _ = entity_reader(ConsumerProtocolAssignment)(data, 2)  # after the version
    return sorted(
        (tp.topic, int(p)) for tp in assignment.assigned_partitions for p in tp.partitions
    )


async def _member(broker: eoslog.Broker, context: Context) -> str:
    required = await _within(group_apis.join_group(context, _join_request()))
    assert required.error_code == E.MEMBER_ID_REQUIRED
    return str(required.member_id)


def test_every_group_api_is_registered_at_the_versions_clients_negotiate() -> None:
    group_keys = (8, 9, 11, 12, 13, 14, 15, 16, 42)
    served = {key: (APIS[key].min_version, APIS[key].max_version) for key in group_keys}
    assert served == {
        8: (2, 9),  # OffsetCommit
        9: (1, 9),  # OffsetFetch
        11: (0, 9),  # JoinGroup
        12: (0, 4),  # Heartbeat
        13: (0, 5),  # LeaveGroup
        14: (0, 5),  # SyncGroup
        15: (0, 5),  # DescribeGroups
        16: (0, 5),  # ListGroups
        42: (0, 2),  # DeleteGroups
    }


def test_two_members_join_sync_and_split_the_topic_and_leave(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    broker.create_topic("t", 4)

    async def scenario() -> None:
        context = _context(broker)
        a, b = await _member(broker, context), await _member(broker, context)
        joins = [
            asyncio.ensure_future(_within(group_apis.join_group(context, _join_request(m))))
            for m in (a, b)
        ]
        await asyncio.sleep(0)  # let both reach the coordinator before the delay is over
        while not all(broker.groups.describe_group(GROUP)[3].get(m) is not None for m in (a, b)):
            await asyncio.sleep(0.01)
        clock.advance(3000)  # group.initial.rebalance.delay.ms: the waiting handlers' tick ends it
        answers = await asyncio.gather(*joins)
        assert {j.generation_id for j in answers} == {1}
        assert {j.leader for j in answers} == {"eoslog-coordinator"}
        assert all(j.members == () and j.protocol_name == "range" for j in answers)
        owned = []
        for member in (a, b):
            sync = SyncGroupRequest(
                group_id=GROUP, generation_id=1, member_id=member, assignments=()
            )
            synced = await _within(group_apis.sync_group(context, sync))
            assert synced.error_code == E.NO_ERROR
            owned.append(_assignment(synced.assignment))
        assert sorted(owned[0] + owned[1]) == [("t", p) for p in range(4)]
        beat = HeartbeatRequest(group_id=GROUP, generation_id=1, member_id=a)
        assert (await _within(group_apis.heartbeat(context, beat))).error_code == E.NO_ERROR
        leave = LeaveGroupRequest(
            group_id=GROUP, members=(MemberIdentity(member_id=b), MemberIdentity(member_id="x"))
        )
        left = await _within(group_apis.leave_group(context, leave))
        assert [m.error_code for m in left.members] == [E.NO_ERROR, E.UNKNOWN_MEMBER_ID]
        beat_again = await _within(group_apis.heartbeat(context, beat))
        assert beat_again.error_code == E.REBALANCE_IN_PROGRESS

    asyncio.run(scenario())


def test_old_clients_join_without_a_member_id_and_leave_one_at_a_time(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    broker.create_topic("t", 1)

    async def scenario() -> None:
        context = _context(broker)
        request = JoinGroupRequestV0(
            group_id=GROUP,
            session_timeout=SESSION,
            member_id="",
            protocol_type="consumer",
            protocols=_join_request().protocols,  # type: ignore[arg-type]
        )
        joining = asyncio.ensure_future(_within(group_apis.join_group(context, request)))
        while not broker.groups.describe_group(GROUP)[3]:
            await asyncio.sleep(0.01)
        clock.advance(3000)
        joined = await joining
        assert joined.error_code == E.NO_ERROR and joined.member_id.startswith("rdkafka-")
        leave = LeaveGroupRequestV0(group_id=GROUP, member_id=joined.member_id)
        assert (await _within(group_apis.leave_group(context, leave))).error_code == E.NO_ERROR
        again = await _within(group_apis.leave_group(context, leave))
        assert again.error_code == E.UNKNOWN_MEMBER_ID

    asyncio.run(scenario())


def _commit(generation: int, member: str, partitions: list[tuple[str, int, int]]) -> Any:
    topics: dict[str, list[OffsetCommitRequestPartition]] = {}
    for topic, partition, offset in partitions:
        topics.setdefault(topic, []).append(
            OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata="m"
            )
        )
    return OffsetCommitRequest(
        group_id=GROUP,
        generation_id_or_member_epoch=generation,
        member_id=member,
        topics=tuple(
            OffsetCommitRequestTopic(name=name, partitions=tuple(items))
            for name, items in topics.items()
        ),
    )


def _fetch(topic: str, partitions: list[int], require_stable: bool = False) -> Any:
    return OffsetFetchRequest(
        group_id=GROUP,
        topics=(OffsetFetchRequestTopic(name=topic, partition_indexes=tuple(partitions)),),
        require_stable=require_stable,
    )


def _offsets(response: Any) -> dict[tuple[str, int], tuple[int, int]]:
    return {
        (topic.name, p.partition_index): (p.committed_offset, p.error_code)
        for topic in response.topics
        for p in topic.partitions
    }


def test_a_commit_answers_each_partition_and_fetch_reads_it_back(open_broker: OpenBroker) -> None:
    broker = open_broker()
    broker.create_topic("t", 2)
    request = _commit(-1, "", [("t", 0, 7), ("t", 5, 1), ("nope", 0, 1)])
    answered = _run(broker, offset_apis.offset_commit, request)
    codes = {
        (t.name, p.partition_index): p.error_code for t in answered.topics for p in t.partitions
    }
    assert codes == {
        ("t", 0): E.NO_ERROR,
        ("t", 5): E.UNKNOWN_TOPIC_OR_PART,
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PART,
    }
    fetched = _run(broker, offset_apis.offset_fetch, _fetch("t", [0, 1]))
    assert _offsets(fetched) == {("t", 0): (7, E.NO_ERROR), ("t", 1): (-1, E.NO_ERROR)}
    everything = OffsetFetchRequestV8(
        groups=(
            OffsetFetchRequestGroup(group_id=GROUP, topics=None),
            OffsetFetchRequestGroup(
                group_id="other",
                topics=(OffsetFetchRequestTopics(name="t", partition_indexes=(0,)),),
            ),
        )
    )
    groups = _run(broker, offset_apis.offset_fetch, everything).groups
    assert [_offsets(g) for g in groups] == [
        {("t", 0): (7, E.NO_ERROR)},
        {("t", 0): (-1, E.NO_ERROR)},
    ]


def test_a_commit_from_a_zombie_is_refused_on_every_partition_and_writes_nothing(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    broker.create_topic("t", 2)
    consumer = broker.consumer({"group.id": GROUP})
    consumer.subscribe(["t"])
    consumer.consume(1, timeout=0)
    generation = consumer.consumer_group_metadata().generation_id
    member = consumer.consumer_group_metadata().member_id
    stale = _commit(generation + 1, member, [("t", 0, 3), ("t", 1, 3)])
    answered = _run(broker, offset_apis.offset_commit, stale)
    assert {p.error_code for p in answered.topics[0].partitions} == {E.ILLEGAL_GENERATION}
    stranger = _commit(generation, "stranger", [("t", 0, 3)])
    answered = _run(broker, offset_apis.offset_commit, stranger)
    assert answered.topics[0].partitions[0].error_code == E.UNKNOWN_MEMBER_ID
    assert broker.groups.committed_partitions(GROUP) == {}
    current = _run(broker, offset_apis.offset_commit, _commit(generation, member, [("t", 0, 3)]))
    assert current.topics[0].partitions[0].error_code == E.NO_ERROR
    consumer.close()


def test_require_stable_answers_unstable_while_a_transaction_holds_the_offsets(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    broker.create_topic("t", 1)
    producer = broker.producer({"transactional.id": "copier"})
    producer.init_transactions()
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition("t", 0, 4)], ConsumerGroupMetadata(GROUP))
    unstable = _run(broker, offset_apis.offset_fetch, _fetch("t", [0], require_stable=True))
    assert _offsets(unstable) == {("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT)}
    unaware = _run(broker, offset_apis.offset_fetch, _fetch("t", [0]))
    assert _offsets(unaware) == {("t", 0): (-1, E.NO_ERROR)}
    producer.commit_transaction()
    stable = _run(broker, offset_apis.offset_fetch, _fetch("t", [0], require_stable=True))
    assert _offsets(stable) == {("t", 0): (4, E.NO_ERROR)}


def test_groups_are_listed_described_and_deleted(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    broker.create_topic("t", 2)
    consumer = broker.consumer({"group.id": "live"})
    consumer.subscribe(["t"])
    consumer.consume(1, timeout=0)
    _run(broker, offset_apis.offset_commit, _commit(-1, "", [("t", 0, 1)]))  # GROUP: offsets only
    listed = _run(broker, group_apis.list_groups, ListGroupsRequest(states_filter=()))
    assert sorted((g.group_id, g.group_state, g.protocol_type) for g in listed.groups) == [
        (GROUP, "Empty", ""),
        ("live", "Stable", "consumer"),
    ]
    stable_only = _run(broker, group_apis.list_groups, ListGroupsRequest(states_filter=("stable",)))
    assert [g.group_id for g in stable_only.groups] == ["live"]
    described = _run(
        broker,
        group_apis.describe_groups,
        DescribeGroupsRequest(groups=("live", GROUP, "ghost"), include_authorized_operations=False),
    ).groups
    assert [(d.group_id, d.group_state) for d in described] == [
        ("live", "Stable"),
        (GROUP, "Empty"),
        ("ghost", "Dead"),
    ]
    (member,) = described[0].members
    assert member.member_id == consumer.consumer_group_metadata().member_id
    assert _assignment(member.member_assignment) == [("t", 0), ("t", 1)]
    deleted = _run(
        broker,
        group_apis.delete_groups,
        DeleteGroupsRequest(groups_names=(GROUP, "live", "ghost")),
    )
    assert [r.error_code for r in deleted.results] == [
        E.NO_ERROR,
        E.NON_EMPTY_GROUP,
        E.GROUP_ID_NOT_FOUND,
    ]
    assert GROUP not in broker.groups.group_ids()
    consumer.close()
