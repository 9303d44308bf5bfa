"""The group offset APIs of `eoslog serve`: OffsetCommit and OffsetFetch, over the broker's
GroupCoordinator (docs/coordinator.md §3.5, §6, §13).

OffsetCommit answers each partition: a partition of no topic, or with metadata longer than
offset.metadata.max.bytes, gets its own error and the others are committed; a refusal of the
committer (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS: KIP-447 fencing by
generation and member id) or of the group id applies to every partition, and nothing is
written. A commit is answered once it is durable per the broker's durability.

OffsetFetch answers the committed offset of each partition asked (-1 for none), or every
committed offset of the group when no topics are named; with require_stable (v7+, a
read_committed consumer) a partition for which an open transaction holds offsets is answered
UNSTABLE_OFFSET_COMMIT, which the client retries (§6.2). v8+ asks for several groups at once.
"""

from __future__ import annotations

from typing import Any, Final

from eoslog.coordinator.group_coordinator import (
    ConsumerGroupMetadata,
    GroupCoordinator,
    OffsetToCommit,
)
from eoslog.coordinator.offset_store import StoredOffset
from eoslog.error_codes import ErrorCodes
from eoslog.errors import KafkaException
from eoslog.serve.messages import NO_THROTTLE, build, code_of, element, error_code, has_field
from eoslog.serve.registry import Context, api, response_type

E = ErrorCodes
NO_OFFSET: Final = -1
NO_LEADER_EPOCH: Final = -1


def _commit(
    groups: GroupCoordinator, committer: ConsumerGroupMetadata, items: list[OffsetToCommit]
) -> list[int]:
    """Commit the items that can be (a worker-thread call): each item's error code."""
    codes = []
    for item in items:
        try:
            groups.check_offset(item)
            codes.append(E.NO_ERROR)
        except KafkaException as error:
            codes.append(code_of(error))
        except ValueError:
            codes.append(E.INVALID_REQUEST)  # a negative offset
    try:
        groups.commit_offsets(committer, [i for i, c in zip(items, codes, strict=True) if not c])
    except KafkaException as error:
        refused = code_of(error)
        codes = [code or refused for code in codes]
    return codes


@api(8, 2, 9)
async def offset_commit(ctx: Context, request: Any) -> Any:
    committer = ConsumerGroupMetadata(
        request.group_id,
        request.generation_id_or_member_epoch,
        request.member_id,
        getattr(request, "group_instance_id", None),
    )
    items = [
        OffsetToCommit(
            topic.name,
            item.partition_index,
            item.committed_offset,
            item.committed_metadata or "",
            getattr(item, "committed_leader_epoch", NO_LEADER_EPOCH),
        )
        for topic in request.topics
        for item in topic.partitions
    ]
    answers = iter(await ctx.call(_commit, ctx.broker.groups, committer, items))
    response = response_type(request)
    topic_type = element(response, "topics")
    partition_type = element(topic_type, "partitions")
    return build(
        response,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(
                topic_type,
                name=topic.name,
                partitions=tuple(
                    build(
                        partition_type,
                        partition_index=item.partition_index,
                        error_code=error_code(next(answers)),
                    )
                    for item in topic.partitions
                ),
            )
            for topic in request.topics
        ),
    )


@api(9, 1, 9)
async def offset_fetch(ctx: Context, request: Any) -> Any:
    response = response_type(request)
    require_stable = bool(getattr(request, "require_stable", False))
    if has_field(type(request), "groups"):  # v8+
        group_type = element(response, "groups")
        answers = []
        for group in request.groups:
            code, topics = await _group_offsets(ctx, group.group_id, group.topics, require_stable)
            topic_type = element(group_type, "topics")
            answers.append(
                build(
                    group_type,
                    group_id=group.group_id,
                    error_code=error_code(code),
                    topics=_topics(topic_type, topics),
                )
            )
        return build(response, throttle_time=NO_THROTTLE, groups=tuple(answers))
    code, topics = await _group_offsets(ctx, request.group_id, request.topics, require_stable)
    return build(
        response,
        throttle_time=NO_THROTTLE,
        error_code=error_code(code),
        topics=_topics(element(response, "topics"), topics),
    )


Answered = dict[str, list[tuple[int, StoredOffset | None, int]]]


async def _group_offsets(
    ctx: Context, group_id: str, topics: Any, require_stable: bool
) -> tuple[int, Answered]:
    """(group error code, topic -> [(partition, offset or None, partition error code)])."""
    wanted = None
    if topics is not None:
        wanted = [(t.name, int(p)) for t in topics for p in t.partition_indexes]
    try:
        offsets, unstable = await ctx.call(
            ctx.broker.groups.fetch_offsets_marking_unstable, group_id, wanted
        )
    except KafkaException as error:
        return code_of(error), {}
    answered: Answered = {}
    for (topic, partition), stored in offsets.items():
        code = E.UNSTABLE_OFFSET_COMMIT if require_stable and (topic, partition) in unstable else 0
        answered.setdefault(topic, []).append((partition, None if code else stored, code))
    return E.NO_ERROR, answered


def _topics(topic_type: type[Any], answered: Answered) -> tuple[Any, ...]:
    partition_type = element(topic_type, "partitions")
    return tuple(
        build(
            topic_type,
            name=topic,
            partitions=tuple(
                build(
                    partition_type,
                    partition_index=partition,
                    committed_offset=NO_OFFSET if stored is None else stored.offset,
                    committed_leader_epoch=(
                        NO_LEADER_EPOCH if stored is None else stored.leader_epoch
                    ),
                    metadata="" if stored is None else stored.metadata,
                    error_code=error_code(code),
                )
                for partition, stored, code in entries
            ),
        )
        for topic, entries in answered.items()
    )
