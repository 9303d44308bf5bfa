"""The group membership APIs of `eoslog serve` (docs/coordinator.md §13): JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, ListGroups, DescribeGroups and DeleteGroups, over the broker's
GroupCoordinator and its `classic` part (eoslog.coordinator.classic_groups). The offset APIs
are in eoslog.serve.offset_apis.

A JoinGroup or SyncGroup that must wait for other members awaits an asyncio future, which the
coordinator completes through a callback (from whichever thread passes the barrier); the
handler holds no worker thread while it waits, and asks the coordinator once every
`WAIT_TICK_S` to end the wait if a member's time ran out (`classic.tick`). A client that goes
away while its join waits leaves the member to be answered into the void and then expired, as
in Kafka.

Every handler answers with Kafka's error codes and changes nothing when it answers an error.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Final, TypeVar

from eoslog.coordinator.classic_groups import JoinRequest
from eoslog.coordinator.group_membership import JoinAnswer, SyncAnswer
from eoslog.error_codes import ErrorCodes
from eoslog.errors import KafkaException
from eoslog.serve.messages import (
    NO_THROTTLE,
    build,
    code_of,
    element,
    error_code,
    has_field,
    to_milliseconds,
)
from eoslog.serve.registry import Context, api, response_type

E = ErrorCodes
A = TypeVar("A")

# How often a waiting JoinGroup or SyncGroup asks the coordinator to expire late members and
# pass the barrier (the rebalance timeout and the initial delay need nothing else). 1 s is
# well under any timeout Kafka allows (group.min.session.timeout.ms is 6 s).
WAIT_TICK_S: Final = 1.0
# DescribeGroups' authorized_operations when they were not asked for (Kafka's INT32_MIN).
NO_OPERATIONS: Final = -(2**31)
DEAD: Final = "Dead"
EMPTY: Final = "Empty"
CLASSIC: Final = "classic"  # ListGroups v5's group type of every group here


async def _answer(
    ctx: Context, group_id: str, start: Callable[[Callable[[A], None]], A | None]
) -> A:
    """Run `start(callback)` on a worker thread: its answer, or, when it returns None, the
    answer the coordinator later hands the callback."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[A] = loop.create_future()

    def settle(answer: A) -> None:
        if not future.done():
            future.set_result(answer)

    def deliver(answer: A) -> None:
        # A closed loop: the server stopped and nobody waits for this answer.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, answer)

    answer: A | None = await ctx.call(start, deliver)
    if answer is not None:
        return answer
    while True:
        done, _ = await asyncio.wait({future}, timeout=WAIT_TICK_S)
        if done:
            return future.result()
        await ctx.call(ctx.broker.groups.classic.tick, group_id)


def _client_host(ctx: Context) -> str:
    """Kafka's form of a member's host: "/" and the peer's address."""
    return "/" + ctx.peer.rsplit(":", 1)[0]


@api(11, 0, 9)
async def join_group(ctx: Context, request: Any) -> Any:
    session_ms = to_milliseconds(request.session_timeout)
    rebalance_ms = session_ms  # JoinGroup v0 has no rebalance timeout: Kafka uses the session's
    if (
        has_field(type(request), "rebalance_timeout")
        and to_milliseconds(request.rebalance_timeout) >= 0
    ):
        rebalance_ms = to_milliseconds(request.rebalance_timeout)
    join = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        client_id=ctx.client_id or "",
        client_host=_client_host(ctx),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        require_known_member_id=request.__version__ >= 4,
        instance_id=getattr(request, "group_instance_id", None),
    )
    classic = ctx.broker.groups.classic
    answer: JoinAnswer = await _answer(
        ctx, request.group_id, lambda deliver: classic.join(join, deliver)
    )
    response = response_type(request)
    member_type = element(response, "members")
    # Before v7 the protocol name is not nullable.
    protocol = answer.protocol if request.__version__ >= 7 else answer.protocol or ""
    return build(
        response,
        throttle_time=NO_THROTTLE,
        error_code=error_code(answer.error),
        generation_id=answer.generation_id,
        protocol_type=answer.protocol_type,
        protocol_name=protocol,
        leader=answer.leader,
        member_id=answer.member_id,
        members=tuple(
            build(member_type, member_id=member_id, group_instance_id=instance, metadata=metadata)
            for member_id, instance, metadata in answer.members
        ),
    )


@api(14, 0, 5)
async def sync_group(ctx: Context, request: Any) -> Any:
    assignments = {item.member_id: bytes(item.assignment) for item in request.assignments}
    classic = ctx.broker.groups.classic
    answer: SyncAnswer = await _answer(
        ctx,
        request.group_id,
        lambda deliver: classic.sync(
            request.group_id,
            request.member_id,
            request.generation_id,
            assignments,
            deliver,
            protocol_type=getattr(request, "protocol_type", None),
            protocol=getattr(request, "protocol_name", None),
            instance_id=getattr(request, "group_instance_id", None),
        ),
    )
    return build(
        response_type(request),
        throttle_time=NO_THROTTLE,
        error_code=error_code(answer.error),
        protocol_type=answer.protocol_type,
        protocol_name=answer.protocol,
        assignment=answer.assignment,
    )


@api(12, 0, 4)
async def heartbeat(ctx: Context, request: Any) -> Any:
    code = await ctx.call(
        ctx.broker.groups.classic.heartbeat,
        request.group_id,
        request.member_id,
        request.generation_id,
        getattr(request, "group_instance_id", None),
    )
    return build(response_type(request), throttle_time=NO_THROTTLE, error_code=error_code(code))


@api(13, 0, 5)
async def leave_group(ctx: Context, request: Any) -> Any:
    batched = has_field(type(request), "members")  # v3+ (KIP-345): several members at once
    leavers = (
        [(m.member_id, m.group_instance_id) for m in request.members]
        if batched
        else [(request.member_id, None)]
    )
    codes = await ctx.call(ctx.broker.groups.classic.leave, request.group_id, leavers)
    response = response_type(request)
    if not batched:
        return build(response, throttle_time=NO_THROTTLE, error_code=error_code(codes[0]))
    member_type = element(response, "members")
    return build(
        response,
        throttle_time=NO_THROTTLE,
        error_code=error_code(E.NO_ERROR),
        members=tuple(
            build(
                member_type,
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                error_code=error_code(code),
            )
            for member, code in zip(request.members, codes, strict=True)
        ),
    )


def _group_views(ctx: Context, group_ids: list[str]) -> list[tuple[str, Any]]:
    """(group id, its summary or None for a group known only by its offsets), for the known
    groups among `group_ids` (a worker-thread call)."""
    groups = ctx.broker.groups
    known = set(groups.group_ids())
    return [(g, groups.classic.summary(g)) for g in group_ids if g in known]


@api(16, 0, 5)
async def list_groups(ctx: Context, request: Any) -> Any:
    groups = ctx.broker.groups
    views = await ctx.call(lambda: _group_views(ctx, groups.group_ids()))
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    response = response_type(request)
    listed_type = element(response, "groups")
    listed = []
    for group_id, summary in views:
        state = EMPTY if summary is None else summary.state
        if (states and state.lower() not in states) or (types and CLASSIC not in types):
            continue
        protocol_type = "" if summary is None else summary.protocol_type
        listed.append(
            build(
                listed_type,
                group_id=group_id,
                protocol_type=protocol_type,
                group_state=state,
                group_type=CLASSIC,
            )
        )
    return build(
        response, throttle_time=NO_THROTTLE, error_code=error_code(E.NO_ERROR), groups=tuple(listed)
    )


@api(15, 0, 5)
async def describe_groups(ctx: Context, request: Any) -> Any:
    views = dict(await ctx.call(lambda: _group_views(ctx, list(request.groups))))
    response = response_type(request)
    group_type = element(response, "groups")
    member_type = element(group_type, "members")
    described = []
    for group_id in request.groups:
        summary = views.get(group_id)
        members: tuple[Any, ...] = ()
        if summary is not None:
            members = tuple(
                build(
                    member_type,
                    member_id=m.member_id,
                    group_instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata,
                    member_assignment=m.assignment,
                )
                for m in summary.members
            )
        state = DEAD if group_id not in views else EMPTY if summary is None else summary.state
        described.append(
            build(
                group_type,
                error_code=error_code(E.INVALID_GROUP_ID if not group_id else E.NO_ERROR),
                group_id=group_id,
                group_state=state,
                protocol_type="" if summary is None else summary.protocol_type,
                protocol_data="" if summary is None else summary.protocol,
                members=members,
                authorized_operations=NO_OPERATIONS,
            )
        )
    return build(response, throttle_time=NO_THROTTLE, groups=tuple(described))


@api(42, 0, 2)
async def delete_groups(ctx: Context, request: Any) -> Any:
    response = response_type(request)
    result_type = element(response, "results")
    results = []
    for group_id in request.groups_names:
        try:
            await ctx.call(ctx.broker.groups.delete_group, group_id)
            code = E.NO_ERROR
        except KafkaException as error:
            code = code_of(error)
        results.append(build(result_type, group_id=group_id, error_code=error_code(code)))
    return build(response, throttle_time=NO_THROTTLE, results=tuple(results))
