"""Fetch and ListOffsets for `eoslog serve` (docs/design.md "Fetch", "Wire protocol").
ListOffsets is the in-process AdminClient's list_offsets on the wire.

A Fetch answers with the batches PartitionLog.read returns, as they lie in the segment: the
read's view of the mapped file goes into the response unchanged (one copy, into the frame;
no per-record work), with the aborted transactions of the .txnindex for read_committed, the
high watermark, the last stable offset and the log start. With fewer than min_bytes to
return it waits, up to max_wait_ms, for the broker's AppendSignal (Context.wait_for_append),
then reads again: an append anywhere wakes it at once, and nothing polls.

Fetch sessions (KIP-227) are not kept: every answer is a full one with session id 0, which
tells a client that the broker keeps no session, and a request naming a session gets
FETCH_SESSION_ID_NOT_FOUND.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from eoslog.client.admin_types import IsolationLevel, OffsetSpec
from eoslog.client.message import TopicPartition
from eoslog.errors import KafkaError, KafkaException
from eoslog.serve.messages import (
    NO_THROTTLE,
    build,
    by_topic,
    code_of,
    error_code,
    response_module,
    to_milliseconds,
)
from eoslog.serve.registry import Context, api

if TYPE_CHECKING:
    from eoslog.broker import Broker
    from eoslog.client.admin import AdminClient

_READ_COMMITTED: Final = 1
_NO_SESSION: Final = 0


class PartitionRead(NamedTuple):
    """One partition's part of a Fetch answer."""

    partition: int
    error: int
    records: memoryview | bytes
    aborted: list[tuple[int, int]] | None
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int


def _read_partition(
    broker: Broker, topic: str, partition: Any, bytes_max: int, committed: bool
) -> PartitionRead:
    index = partition.partition
    try:
        log = broker.log(topic, index)
    except KafkaException as error:
        return PartitionRead(index, code_of(error), b"", None, -1, -1, -1)
    isolation = "read_committed" if committed else "read_uncommitted"
    try:
        found = log.read(partition.fetch_offset, max(bytes_max, 1), isolation)
    except KafkaException as error:
        hw, lso, start = log.high_watermark, log.last_stable_offset, log.log_start_offset
        return PartitionRead(index, code_of(error), b"", [] if committed else None, hw, lso, start)
    return PartitionRead(
        index,
        0,
        found.records,
        found.aborted_transactions,
        found.high_watermark,
        found.last_stable_offset,
        found.log_start_offset,
    )


def read_all(
    broker: Broker, request: Any, committed: bool
) -> tuple[list[list[PartitionRead]], int, bool]:
    """Every partition's read, the bytes read in all, and whether any partition failed.
    Past the request's max_bytes a partition's read is skipped (its offsets still given);
    a read returns at least one whole batch, so the first partition with data gets its
    batch however large (KIP-74). Blocking: a worker thread's."""
    budget = request.max_bytes if hasattr(request, "max_bytes") else 2**31 - 1
    total = 0
    failed = False
    answers: list[list[PartitionRead]] = []
    for topic in request.topics:
        row = []
        for partition in topic.partitions:
            room = min(partition.partition_max_bytes, budget - total)
            if room <= 0 and total > 0:
                read = _read_partition(broker, topic.topic, partition, 0, committed)
                read = read._replace(records=b"", aborted=[] if committed else None)
            else:
                read = _read_partition(broker, topic.topic, partition, room, committed)
            total += len(read.records)
            failed = failed or read.error != 0
            row.append(read)
        answers.append(row)
    return answers, total, failed


@api(1, 4, 12)
async def fetch(ctx: Context, request: Any) -> Any:
    module = response_module(1, request.__version__)
    if getattr(request, "session_id", _NO_SESSION) != _NO_SESSION:
        return build(
            module.FetchResponse,
            throttle_time=NO_THROTTLE,
            error_code=error_code(KafkaError.FETCH_SESSION_ID_NOT_FOUND),
            session_id=_NO_SESSION,
            responses=(),
        )
    committed = request.isolation_level == _READ_COMMITTED
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, to_milliseconds(request.max_wait)) / 1000
    signal = ctx.broker.append_signal
    while True:
        generation = signal.generation
        answers, total, failed = await ctx.call(read_all, ctx.broker, request, committed)
        remaining = deadline - loop.time()
        if failed or total >= request.min_bytes or remaining <= 0:
            break
        if not await ctx.wait_for_append(generation, remaining):
            break  # max_wait passed (or the server is stopping): answer with what there is
    return _fetch_response(module, request, answers)


def _fetch_response(module: Any, request: Any, answers: list[list[PartitionRead]]) -> Any:
    def answer(_partition: Any, read: PartitionRead) -> Any:
        aborted = read.aborted
        return build(
            module.PartitionData,
            partition_index=read.partition,
            error_code=error_code(read.error),
            high_watermark=read.high_watermark,
            last_stable_offset=read.last_stable_offset,
            log_start_offset=read.log_start_offset,
            aborted_transactions=None
            if aborted is None
            else tuple(
                build(module.AbortedTransaction, producer_id=pid, first_offset=first)
                for pid, first in aborted
            ),
            records=read.records,
        )

    topics = by_topic(
        module.FetchableTopicResponse, request.topics, answers, answer, name_field="topic"
    )
    return build(
        module.FetchResponse,
        throttle_time=NO_THROTTLE,
        error_code=error_code(0),
        session_id=_NO_SESSION,
        responses=topics,
    )


# --- ListOffsets ----------------------------------------------------------------------------

# Kafka's ListOffsets timestamps with a meaning of their own: latest, earliest, the largest
# timestamp (KIP-734, from v7); any other negative one is not a time.
_SPECIAL_TIMESTAMPS: Final = (OffsetSpec.LATEST, OffsetSpec.EARLIEST, OffsetSpec.MAX_TIMESTAMP)


def _list_offsets(admin: AdminClient, request: Any) -> list[list[tuple[int, int, int]]]:
    """(error code, offset, timestamp) per partition, by the AdminClient's list_offsets."""
    committed = getattr(request, "isolation_level", 0) == _READ_COMMITTED
    isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    answers = []
    for topic in request.topics:
        row = []
        for partition in topic.partitions:
            timestamp = partition.timestamp
            if timestamp < 0 and timestamp not in _SPECIAL_TIMESTAMPS:
                row.append((KafkaError.INVALID_REQUEST, -1, -1))
                continue
            tp = TopicPartition(topic.name, partition.partition_index)
            future = admin.list_offsets({tp: OffsetSpec(timestamp)}, isolation_level=isolation)
            try:
                found = future[tp].result()
            except KafkaException as error:
                row.append((code_of(error), -1, -1))
                continue
            row.append((0, found.offset, found.timestamp))
        answers.append(row)
    return answers


@api(2, 1, 7)
async def list_offsets(ctx: Context, request: Any) -> Any:
    module = response_module(2, request.__version__)
    answers = await ctx.call(_list_offsets, ctx.broker.admin(), request)

    def answer(partition: Any, found: tuple[int, int, int]) -> Any:
        code, offset, timestamp = found
        return build(
            module.ListOffsetsPartitionResponse,
            partition_index=partition.partition_index,
            error_code=error_code(code),
            timestamp=timestamp,
            offset=offset,
            leader_epoch=-1,
        )

    topics = by_topic(module.ListOffsetsTopicResponse, request.topics, answers, answer)
    return build(module.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=topics)
