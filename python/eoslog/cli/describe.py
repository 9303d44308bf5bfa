"""`eoslog describe DIR`: the whole log directory in one report, each part as the command of
its own prints it: every user topic's partitions (`topics describe`'s offsets, with each
partition's size in bytes and segment count) and the configs set on each topic; every
group's state and members and its committed offsets and lag (`groups describe`); every
transactional id (`transactions describe`); every partition's producers
(`transactions describe-producers`, flagged when hanging); and the hanging transactions
(`transactions find-hanging`'s rule and rows). With --json, one object holding each part's
rows under its name.

Where eoslog differs: Kafka has no one command for this; sizes are what kafka-log-dirs.sh
reports (the partition's segment .log bytes), read from the directory's files.
"""

from __future__ import annotations

import json
from typing import Final

import click

from eoslog.broker import Broker
from eoslog.cli.output import Row, json_option, partitions_of, reading_broker, show
from eoslog.cli.topics import (
    GROUP_COLUMNS,
    PARTITION_COLUMNS,
    group_offset_rows,
    group_state_name,
    partition_rows,
)
from eoslog.cli.transactions import (
    HANGING_COLUMNS,
    PRODUCER_COLUMNS,
    description_row,
    hanging_rows,
    max_transaction_timeout_option,
    producer_row,
    wall_clock_ms,
)
from eoslog.client.admin import AdminClient
from eoslog.client.admin_types import ConfigResource, ResourceType
from eoslog.client.message import TopicPartition

_SIZE_COLUMNS: Final = ("SizeBytes", "Segments")
_TRANSACTION_COLUMNS: Final = (
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TopicPartitions",
)


@click.command(
    help="Everything about a log directory (live or offline): topics and partitions "
    "(offsets, size, segments, configs), groups (state, members, offsets, lag), transactional "
    "ids, each partition's producers, and hanging transactions flagged."
)
@click.argument("directory", metavar="DIR")
@max_transaction_timeout_option
@json_option
def describe(directory: str, max_transaction_timeout: int, as_json: bool) -> None:
    with reading_broker(directory) as broker:
        admin = broker.admin()
        now_ms = wall_clock_ms()  # after the open: a live owner may begin one while it runs
        partitions = partitions_of(admin)
        hanging = hanging_rows(admin, partitions, now_ms, max_transaction_timeout)
        parts: dict[str, list[Row]] = {
            "partitions": _partitions(broker, admin, partitions),
            "topic_configs": _topic_configs(admin, sorted({tp.topic for tp in partitions})),
            **_groups(admin),
            "transactions": _transactions(admin, now_ms),
            "producers": _producers(admin, partitions, hanging),
            "hanging_transactions": hanging,
        }
    if as_json:
        click.echo(json.dumps(parts, indent=2))
        return
    titles_and_columns = (
        ("partitions", "Partitions", (*PARTITION_COLUMNS, *_SIZE_COLUMNS)),
        ("topic_configs", "Topic configs (set on the topic)", ("Topic", "Config", "Value")),
        ("groups", "Consumer groups", ("GROUP", "STATE", "MEMBERS")),
        ("group_offsets", "Group offsets", GROUP_COLUMNS),
        ("transactions", "Transactional ids", _TRANSACTION_COLUMNS),
        ("producers", "Producers", ("Topic", "Partition", *PRODUCER_COLUMNS, "Hanging")),
        ("hanging_transactions", "Hanging transactions", HANGING_COLUMNS),
    )
    for number, (name, title, columns) in enumerate(titles_and_columns):
        if number:
            click.echo()
        show(title, columns, parts[name], as_json=False)


def _partitions(broker: Broker, admin: AdminClient, partitions: list[TopicPartition]) -> list[Row]:
    """partition_rows with each partition's segment count and bytes, as kafka-log-dirs.sh sums
    them: the logs' bytes (an open log under "commit" or "always" runs its active segment's
    file ahead in zeros, which are not counted)."""
    rows = partition_rows(admin, partitions)
    for row, tp in zip(rows, partitions, strict=True):
        segments = broker.log(tp.topic, tp.partition).segments
        row["SizeBytes"] = sum(segment.size for segment in segments)
        row["Segments"] = len(segments)
    return rows


def _topic_configs(admin: AdminClient, topics: list[str]) -> list[Row]:
    """The configs set on each topic itself (not the directory's defaults)."""
    if not topics:
        return []
    resources = [ConfigResource(ResourceType.TOPIC, topic) for topic in topics]
    rows: list[Row] = []
    for resource, future in admin.describe_configs(resources).items():
        entries = future.result()
        rows += [
            {"Topic": resource.name, "Config": name, "Value": entry.value}
            for name, entry in sorted(entries.items())
            if not entry.is_default
        ]
    return rows


def _groups(admin: AdminClient) -> dict[str, list[Row]]:
    """ "groups": each group's state and member count; "group_offsets": groups describe's
    rows of every group."""
    listed = admin.list_consumer_groups().result().valid or []
    groups: list[Row] = []
    offsets: list[Row] = []
    for group_id in sorted(listing.group_id for listing in listed):
        description, rows = group_offset_rows(admin, group_id)
        state = group_state_name(description.state)
        groups.append({"GROUP": group_id, "STATE": state, "MEMBERS": len(description.members)})
        offsets += rows
    return {"groups": groups, "group_offsets": offsets}


def _transactions(admin: AdminClient, now_ms: int) -> list[Row]:
    """transactions describe's row of every transactional id."""
    ids = sorted(listing.transactional_id for listing in admin.list_transactions().result())
    if not ids:
        return []
    return [
        description_row(tid, future.result(), now_ms)
        for tid, future in admin.describe_transactions(ids).items()
    ]


def _producers(
    admin: AdminClient, partitions: list[TopicPartition], hanging: list[Row]
) -> list[Row]:
    """describe-producers' rows of every partition, each with its topic and partition, and
    Hanging true for a producer whose open transaction is in the hanging rows."""
    if not partitions:
        return []
    flagged = {(row["Topic"], row["Partition"], row["ProducerId"]) for row in hanging}
    rows: list[Row] = []
    for tp, future in admin.describe_producers(partitions).items():
        for state in future.result():
            where: Row = {"Topic": tp.topic, "Partition": tp.partition}
            row = where | producer_row(state)
            row["Hanging"] = (tp.topic, tp.partition, state.producer_id) in flagged
            rows.append(row)
    return rows
