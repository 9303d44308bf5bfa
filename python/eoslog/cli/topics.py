"""`eoslog topics DIR list|describe` (after kafka-topics.sh) and `eoslog groups DIR
list|describe` (after kafka-consumer-groups.sh), read through the AdminClient on the
directory opened with its lock: each partition's log start, high watermark and last stable
offset; each group's state, members, committed offsets and lag.

Where eoslog differs: kafka-topics' describe prints leaders, replicas and ISR, which are
always broker 0 here; eoslog prints the offsets instead. kafka-consumer-groups' lag is
measured against the high watermark, as here.
"""

from __future__ import annotations

from typing import Final

import click

from eoslog.cli.output import Row, directory_group, json_option, partitions_of, reading_admin, show
from eoslog.client.admin import AdminClient
from eoslog.client.admin_types import (
    ConsumerGroupDescription,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    MemberDescription,
    OffsetSpec,
    TopicCollection,
)
from eoslog.client.message import TopicPartition

# Kafka's names for a group's states (what kafka-consumer-groups.sh --state prints).
_GROUP_STATE_NAMES: Final = {
    ConsumerGroupState.UNKNOWN: "Unknown",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}

PARTITION_COLUMNS: Final = (
    "Topic",
    "Partition",
    "LogStartOffset",
    "HighWatermark",
    "LastStableOffset",
)
GROUP_COLUMNS: Final = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)


topics = directory_group(
    "topics",
    help="List, describe, create, delete and alter topics (kafka-topics.sh). DIR is a log "
    "directory; reads work while a process owns it, changes need it offline.",
)


@topics.command("list", help="Every topic, with its partition count.")
@click.pass_obj
@json_option
def list_topics(directory: str, as_json: bool) -> None:
    with reading_admin(directory) as admin:
        names = sorted(admin.list_topics().topics)
        described = admin.describe_topics(TopicCollection(names)) if names else {}
        rows: list[Row] = []
        for name, future in described.items():
            description = future.result()
            internal = str(description.is_internal).lower()
            rows.append(
                {"Topic": name, "PartitionCount": len(description.partitions), "Internal": internal}
            )
    show("Topics", ("Topic", "PartitionCount", "Internal"), rows, as_json)


@topics.command(help="Each partition's log start offset, high watermark and last stable offset.")
@click.pass_obj
@click.option("--topic", help="this topic only (default: every user topic)")
@json_option
def describe(directory: str, topic: str | None, as_json: bool) -> None:
    with reading_admin(directory) as admin:
        rows = partition_rows(admin, partitions_of(admin, topic))
    show("Partitions", PARTITION_COLUMNS, rows, as_json)


def partition_rows(admin: AdminClient, partitions: list[TopicPartition]) -> list[Row]:
    """A row per partition: its log start offset, high watermark and last stable offset
    (PARTITION_COLUMNS)."""
    start = partition_offsets(admin, partitions, OffsetSpec.earliest())
    high = partition_offsets(admin, partitions, OffsetSpec.latest())
    stable = partition_offsets(
        admin, partitions, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED
    )
    return [
        {
            "Topic": tp.topic,
            "Partition": tp.partition,
            "LogStartOffset": start[tp],
            "HighWatermark": high[tp],
            "LastStableOffset": stable[tp],
        }
        for tp in partitions
    ]


def partition_offsets(
    admin: AdminClient,
    partitions: list[TopicPartition],
    spec: OffsetSpec,
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
) -> dict[TopicPartition, int]:
    """list_offsets' answer for each partition."""
    if not partitions:
        return {}
    answers = admin.list_offsets(dict.fromkeys(partitions, spec), isolation_level=isolation)
    return {tp: future.result().offset for tp, future in answers.items()}


groups = directory_group(
    "groups",
    help="List consumer groups; describe one's members, committed offsets and lag "
    "(kafka-consumer-groups.sh). DIR is a log directory; reads work while a process owns it, "
    "changes need it offline.",
)


@groups.command("list", help="Every group the directory knows, with its state.")
@click.pass_obj
@json_option
def list_groups(directory: str, as_json: bool) -> None:
    with reading_admin(directory) as admin:
        listed = admin.list_consumer_groups().result().valid or []
    rows: list[Row] = [
        {"GROUP": listing.group_id, "STATE": group_state_name(listing.state)}
        for listing in sorted(listed, key=lambda listing: listing.group_id)
    ]
    show("Consumer groups", ("GROUP", "STATE"), rows, as_json)


@groups.command(
    "describe", help="A group's state, members, committed offsets and lag per partition."
)
@click.pass_obj
@click.option("--group", required=True, help="the group id")
@json_option
def describe_group(directory: str, group: str, as_json: bool) -> None:
    with reading_admin(directory) as admin:
        description, rows = group_offset_rows(admin, group)
    state = group_state_name(description.state)
    members = len(description.members)
    show(f"Consumer group {group}: {state}, {members} members", GROUP_COLUMNS, rows, as_json)


def group_offset_rows(admin: AdminClient, group: str) -> tuple[ConsumerGroupDescription, list[Row]]:
    """The group's description, and a row per partition it committed to or is assigned:
    kafka-consumer-groups.sh --describe's columns (GROUP_COLUMNS) and its STATE."""
    description = admin.describe_consumer_groups([group])[group].result()
    request = [ConsumerGroupTopicPartitions(group)]
    listed = admin.list_consumer_group_offsets(request)[group].result().topic_partitions
    committed = {TopicPartition(tp.topic, tp.partition): tp.offset for tp in listed or []}
    owners = _owners(description.members)
    partitions = sorted(committed.keys() | owners.keys())
    end = partition_offsets(admin, partitions, OffsetSpec.latest())
    state = group_state_name(description.state)
    rows = [
        _group_row(group, state, tp, committed.get(tp), end[tp], owners.get(tp))
        for tp in partitions
    ]
    return description, rows


def _owners(members: list[MemberDescription]) -> dict[TopicPartition, MemberDescription]:
    """The member each assigned partition belongs to."""
    return {
        TopicPartition(tp.topic, tp.partition): member
        for member in members
        for tp in member.assignment.topic_partitions
    }


def _group_row(
    group: str,
    state: str,
    tp: TopicPartition,
    committed: int | None,
    end: int,
    owner: MemberDescription | None,
) -> Row:
    current = committed if committed is not None and committed >= 0 else None
    return {
        "GROUP": group,
        "STATE": state,
        "TOPIC": tp.topic,
        "PARTITION": tp.partition,
        "CURRENT-OFFSET": current,
        "LOG-END-OFFSET": end,
        "LAG": None if current is None else end - current,
        "CONSUMER-ID": None if owner is None else owner.member_id,
        "HOST": None if owner is None else owner.host,
        "CLIENT-ID": None if owner is None else owner.client_id,
    }


def group_state_name(state: ConsumerGroupState | None) -> str:
    return "Unknown" if state is None else _GROUP_STATE_NAMES[state]
