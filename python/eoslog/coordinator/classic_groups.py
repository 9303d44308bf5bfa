"""Remote members of the broker's consumer groups: Kafka's classic group protocol (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup) for Kafka clients of `eoslog serve`, over the groups the
GroupCoordinator keeps (docs/coordinator.md §13).

The wire handlers (eoslog.serve.group_apis) call these methods on the server's worker
threads. A JoinGroup or SyncGroup that must wait for other members does not hold its thread:
the method returns None and keeps the caller's callback (`on_join`, `on_sync`), which the
coordinator calls under its lock, from whichever thread passes the barrier or hears the
leader's SyncGroup (the callback must only hand the answer over, e.g. to an event loop).
`tick` passes a barrier whose wait ran out (a member late past its rebalance timeout, the
initial delay over); the waiting handler calls it now and then.

Answers carry Kafka's error codes, as the wire wants them: MEMBER_ID_REQUIRED (JoinGroup v4+:
join again with the id given), UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS,
INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, INVALID_GROUP_ID.

Static membership (group.instance.id, KIP-345): a member naming an instance id joins without
MEMBER_ID_REQUIRED; when the instance joins again under a new member id (a restarted process),
the new id takes the old one's place without a rebalance if its subscription is unchanged and
the coordinator assigns (a remote leader's group rebalances), and every later request from
the old id is answered FENCED_INSTANCE_ID. Static members are removed by their session
timeout or a LeaveGroup naming the instance, as in Kafka.

Thread safety: every method may be called from any thread; all serialize on the group
coordinator's lock.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from eoslog.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    decode_subscription,
    encode_assignment,
)
from eoslog.coordinator.group_membership import (
    Group,
    GroupState,
    JoinAnswer,
    Member,
    Remote,
    SyncAnswer,
)
from eoslog.error_codes import ErrorCodes
from eoslog.errors import InconsistentGroupProtocolError

E = ErrorCodes


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """The broker's group.* settings (Kafka's names and defaults)."""

    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """A JoinGroup. `protocols`: (strategy, metadata) in the member's order of preference;
    `require_known_member_id`: JoinGroup v4+, where a member without an id is first given one
    (MEMBER_ID_REQUIRED) and joins with it."""

    group_id: str
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool = True
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # for the group's protocol; empty unless Stable
    assignment: bytes  # empty unless Stable


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """DescribeGroups' view of a group: state is Kafka's name ("Dead" for no group)."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


IN_PROCESS_HOST = "in-process"


class ClassicGroups:
    """See the module docstring. Shares the GroupCoordinator's lock and groups."""

    def __init__(
        self,
        lock: threading.RLock,
        groups: dict[str, Group],
        partition_counts: Callable[[], Mapping[str, int]],
        clock_ms: Callable[[], int],
        settings: GroupSettings,
    ) -> None:
        self._lock = lock
        self._groups = groups
        self._partition_counts = partition_counts
        self._clock_ms = clock_ms
        self.settings = settings

    def join(
        self, request: JoinRequest, on_join: Callable[[JoinAnswer], None]
    ) -> JoinAnswer | None:
        """A remote JoinGroup: its answer now, or None when it waits for the barrier (then
        on_join gets the answer, maybe before this returns)."""
        refused = self._check_join(request)
        try:
            subscriptions = _subscriptions(request)
        except InconsistentGroupProtocolError:
            refused = refused or E.INCONSISTENT_GROUP_PROTOCOL
        if refused:
            return JoinAnswer(refused, request.member_id)
        with self._lock:
            now, counts = self._clock_ms(), self._partition_counts()
            group = self._groups.get(request.group_id) or Group(request.group_id)
            group.expire(now, counts)
            member_id = request.member_id
            instance_id = request.instance_id
            if member_id and group.fenced(instance_id, member_id):
                return JoinAnswer(E.FENCED_INSTANCE_ID, member_id)
            if not member_id:
                member_id = f"{request.client_id}-{uuid.uuid4()}"
                if request.require_known_member_id and instance_id is None:
                    group.pending_members[member_id] = now + request.session_timeout_ms
                    self._groups.setdefault(request.group_id, group)
                    return JoinAnswer(E.MEMBER_ID_REQUIRED, member_id)
            elif member_id not in group.members and member_id not in group.pending_members:
                return JoinAnswer(E.UNKNOWN_MEMBER_ID, member_id)
            member = _remote_member(request, subscriptions, member_id, now)
            if not group.accepts(member):
                return JoinAnswer(E.INCONSISTENT_GROUP_PROTOCOL, member_id)
            self._groups.setdefault(request.group_id, group)
            self._take_instance(group, member, now)
            group.join(member, now, counts, self.settings.initial_rebalance_delay_ms)
            if group.state is not GroupState.PREPARING_REBALANCE:
                return group.join_answer(member_id)
            assert member.remote is not None
            member.remote.on_join = on_join
            group.maybe_complete_rebalance(counts, now)
            return None

    @staticmethod
    def _take_instance(group: Group, member: Member, now: int) -> None:
        """Record a static member's instance id; a member already holding it hands its place
        over to `member` (a rebalance follows unless the coordinator assigns)."""
        instance_id = member.instance_id
        if instance_id is None:
            return
        holder = group.static_members.get(instance_id)
        if holder is not None and holder != member.member_id:
            group.replace_static(holder, member.member_id)
            if not group.coordinator_assigns and group.state is not GroupState.EMPTY:
                group.prepare_rebalance(now)
        group.static_members[instance_id] = member.member_id

    def _check_join(self, request: JoinRequest) -> int:
        settings = self.settings
        if not request.group_id:
            return E.INVALID_GROUP_ID
        if not (
            settings.min_session_timeout_ms
            <= request.session_timeout_ms
            <= settings.max_session_timeout_ms
        ):
            return E.INVALID_SESSION_TIMEOUT
        if not request.protocol_type or not request.protocols:
            return E.INCONSISTENT_GROUP_PROTOCOL
        return E.NO_ERROR

    def sync(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        assignments: Mapping[str, bytes],
        on_sync: Callable[[SyncAnswer], None],
        *,
        protocol_type: str | None = None,
        protocol: str | None = None,
        instance_id: str | None = None,
    ) -> SyncAnswer | None:
        """A remote SyncGroup: the member's assignment now, or None when it waits for the
        leader's SyncGroup (on_sync then gets it). `assignments` (member id -> bytes) counts
        only from the leader while the group is CompletingRebalance. protocol_type and
        protocol (SyncGroup v5) must be the group's when given."""
        with self._lock:
            now = self._clock_ms()
            group = self._groups.get(group_id)
            if group is not None and group.fenced(instance_id, member_id):
                return SyncAnswer(E.FENCED_INSTANCE_ID)
            if group is None or member_id not in group.members:
                return SyncAnswer(E.UNKNOWN_MEMBER_ID)
            member = group.members[member_id]
            member.last_seen_ms = now
            if generation_id != group.generation_id:
                return SyncAnswer(E.ILLEGAL_GENERATION)
            if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol is not None and protocol != group.protocol
            ):
                return SyncAnswer(E.INCONSISTENT_GROUP_PROTOCOL)
            if group.state is GroupState.PREPARING_REBALANCE:
                return SyncAnswer(E.REBALANCE_IN_PROGRESS)
            if group.state is GroupState.STABLE:
                return group.sync_answer(member_id)
            assert group.state is GroupState.COMPLETING_REBALANCE and member.remote is not None
            if member_id == group.leader_id:
                group.complete_sync(assignments)
                return group.sync_answer(member_id)
            member.remote.on_sync = on_sync
            return None

    def heartbeat(
        self, group_id: str, member_id: str, generation_id: int, instance_id: str | None = None
    ) -> int:
        """A remote Heartbeat: NO_ERROR, or REBALANCE_IN_PROGRESS (rejoin), UNKNOWN_MEMBER_ID,
        ILLEGAL_GENERATION, FENCED_INSTANCE_ID. Also removes the group's members whose time
        ran out, and starts a rebalance when a topic the coordinator assigned has a new
        partition count."""
        with self._lock:
            now, counts = self._clock_ms(), self._partition_counts()
            group = self._groups.get(group_id)
            if group is not None and group.fenced(instance_id, member_id):
                return E.FENCED_INSTANCE_ID
            if group is None or member_id not in group.members:
                return E.UNKNOWN_MEMBER_ID
            group.members[member_id].last_seen_ms = now
            group.expire(now, counts)
            if member_id not in group.members:
                return E.UNKNOWN_MEMBER_ID  # late for a rebalance: removed just now
            if generation_id != group.generation_id:
                return E.ILLEGAL_GENERATION
            if group.state is GroupState.STABLE and group.counts_changed(counts):
                group.prepare_rebalance(now)
            if group.state is GroupState.PREPARING_REBALANCE:
                return E.REBALANCE_IN_PROGRESS
            return E.NO_ERROR

    def leave(self, group_id: str, leavers: list[tuple[str, str | None]]) -> list[int]:
        """A remote LeaveGroup of one or more members, each (member id, instance id; either
        may be empty): for each, NO_ERROR, UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID. The others
        rebalance."""
        with self._lock:
            now, counts = self._clock_ms(), self._partition_counts()
            group = self._groups.get(group_id)
            errors = []
            for member_id, instance_id in leavers:
                if group is not None and instance_id is not None:
                    if member_id and group.fenced(instance_id, member_id):
                        errors.append(E.FENCED_INSTANCE_ID)
                        continue
                    member_id = group.static_members.get(instance_id, member_id)
                if group is None or member_id not in group.members:
                    errors.append(E.UNKNOWN_MEMBER_ID)
                    continue
                group.remove(member_id, now)
                errors.append(E.NO_ERROR)
            if group is not None:
                group.maybe_complete_rebalance(counts, now)
            return errors

    def tick(self, group_id: str) -> None:
        """Remove the group's members whose time ran out and pass its barrier if it now can
        (a handler waiting for the barrier calls it now and then)."""
        with self._lock:
            group = self._groups.get(group_id)
            if group is not None:
                group.expire(self._clock_ms(), self._partition_counts())

    def summary(self, group_id: str) -> GroupSummary | None:
        """DescribeGroups' view of a group with membership state, None if there is none."""
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                return None
            stable = group.state is GroupState.STABLE and group.protocol is not None
            members = []
            for member in group.members.values():
                metadata = assignment = b""
                if stable and group.protocol is not None:
                    metadata = member.metadata(group.protocol)
                    assignment = (
                        encode_assignment(member.assignment)
                        if member.remote is None
                        else member.remote.assignment
                    )
                client_id, host = (
                    ("eoslog", IN_PROCESS_HOST)
                    if member.remote is None
                    else (member.remote.client_id, member.remote.client_host)
                )
                members.append(
                    MemberSummary(
                        member.member_id, member.instance_id, client_id, host, metadata, assignment
                    )
                )
            return GroupSummary(
                group_id,
                group.state.value,
                group.protocol_type or "",
                (group.protocol or "") if stable else "",
                tuple(members),
            )


def _subscriptions(request: JoinRequest) -> dict[str, frozenset[str]]:
    """The topics each strategy's metadata names (consumer protocol only);
    InconsistentGroupProtocolError for metadata that does not decode."""
    if request.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return {}
    return {name: decode_subscription(metadata) for name, metadata in request.protocols}


def _remote_member(
    request: JoinRequest, subscriptions: dict[str, frozenset[str]], member_id: str, now_ms: int
) -> Member:
    """The Member a JoinGroup describes."""
    first = request.protocols[0][0]
    remote = Remote(
        client_id=request.client_id,
        client_host=request.client_host,
        session_timeout_ms=request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=request.protocols,
        subscriptions=subscriptions,
        instance_id=request.instance_id,
    )
    return Member(
        member_id,
        subscriptions.get(first, frozenset()),
        tuple(name for name, _ in request.protocols),
        request.rebalance_timeout_ms,
        now_ms,
        remote=remote,
    )
