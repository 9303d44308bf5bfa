"""`eoslog groups DIR delete|reset-offsets` (kafka-consumer-groups.sh --delete and
--reset-offsets), through the AdminClient's delete_consumer_groups and, for --execute,
alter_consumer_group_offsets on the directory opened with its lock.

reset-offsets works out each partition's new offset as Kafka's tool does (--to-offset and
--shift-by held between the log start offset and the high watermark, --to-datetime and
--by-duration the first offset at or after that time, else the high watermark), prints them,
and commits them only with --execute; a dry run is the default, as in Kafka's tool. A group
with members (state other than Empty or Dead) is refused, as Kafka refuses it.

Where eoslog differs: no --bootstrap-server, no --to-current, --from-file or --export.
"""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import click

from eoslog.cli.output import (
    CommandFailed,
    Row,
    changing_admin,
    json_option,
    kafka_error_text,
    partitions_of,
    reading_admin,
    show,
)
from eoslog.cli.topics import group_state_name, groups, partition_offsets
from eoslog.client.admin import AdminClient
from eoslog.client.admin_types import ConsumerGroupState, ConsumerGroupTopicPartitions, OffsetSpec
from eoslog.client.message import TopicPartition
from eoslog.error_codes import ErrorCodes
from eoslog.errors import KafkaException

# ISO 8601's PnDTnHnMnS, as kafka-consumer-groups.sh's --by-duration takes it.
_DURATION: Final = re.compile(
    r"P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?"
)
# The states in which Kafka lets a group's offsets be reset: nobody is consuming.
_INACTIVE: Final = (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD)
_DRY_RUN_NOTE: Final = "Dry run: nothing committed (--execute commits these offsets)."
_RESET_COLUMNS: Final = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")


@groups.command(help="Delete a group's committed offsets (kafka-consumer-groups.sh --delete).")
@click.pass_obj
@click.option("--group", required=True, help="the group id")
def delete(directory: str, group: str) -> None:
    with changing_admin(directory) as admin:
        try:
            admin.delete_consumer_groups([group])[group].result()
        except KafkaException as error:
            raise CommandFailed(kafka_error_text(error), 1) from None
    click.echo(f"Deletion of requested consumer groups ('{group}') was successful.")


@dataclass(frozen=True)
class _Target:
    """Where reset-offsets moves each partition: one of Kafka's --to-* / --shift-by /
    --by-duration options and its value (a timestamp in ms for the time-based ones)."""

    option: str
    value: int | None = None


@groups.command(
    "reset-offsets",
    help="Move a group's committed offsets (kafka-consumer-groups.sh --reset-offsets): print "
    "the new offsets, and commit them with --execute. The group must have no members.",
)
@click.pass_obj
@click.option("--group", required=True, help="the group id")
@click.option(
    "--topic",
    "topics",
    multiple=True,
    metavar="T[:P,...]",
    help="a topic, or some of its partitions (repeatable)",
)
@click.option("--all-topics", is_flag=True, help="every partition the group committed to")
@click.option("--to-earliest", is_flag=True, help="to the log start offset")
@click.option("--to-latest", is_flag=True, help="to the high watermark")
@click.option("--to-offset", type=int, help="to this offset")
@click.option("--to-datetime", metavar="ISO", help="to the first offset at or after this time")
@click.option("--shift-by", type=int, help="by this many from the committed offset")
@click.option("--by-duration", metavar="PnDTnHnMnS", help="to the first offset this long ago")
@click.option("--dry-run/--execute", default=True, help="print only (default), or commit")
@json_option
def reset_offsets(
    directory: str,
    /,
    group: str,
    topics: Sequence[str],
    all_topics: bool,
    dry_run: bool,
    as_json: bool,
    **targets: object,
) -> None:
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic or --all-topics")
    target = _target(targets)
    # A dry run only reads, so it works on a live directory too; --execute commits.
    with (reading_admin if dry_run else changing_admin)(directory) as admin:
        _check_inactive(admin, group)
        committed = _committed(admin, group)
        partitions = sorted(committed) if all_topics else _named_partitions(admin, topics)
        new_offsets = _new_offsets(admin, partitions, committed, target)
        if not dry_run:
            _commit(admin, group, new_offsets)
    rows: list[Row] = [
        {"GROUP": group, "TOPIC": tp.topic, "PARTITION": tp.partition, "NEW-OFFSET": offset}
        for tp, offset in new_offsets.items()
    ]
    show(f"Consumer group {group}", _RESET_COLUMNS, rows, as_json)
    if not as_json:
        click.echo(_DRY_RUN_NOTE if dry_run else "Committed.")


def _target(given: dict[str, object]) -> _Target:
    """The one target option given (a usage error for none or several), with --to-datetime
    and --by-duration turned into a timestamp in ms."""
    chosen = {
        name: value for name, value in given.items() if value is not None and value is not False
    }
    if len(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, "
            "--shift-by, --by-duration"
        )
    ((option, value),) = chosen.items()
    if option == "to_datetime":
        return _Target(option, _datetime_ms(str(value)))
    if option == "by_duration":
        return _Target(option, int(time.time() * 1000) - _duration_ms(str(value)))
    return _Target(option, value if isinstance(value, int) and value is not True else None)


def _new_offsets(
    admin: AdminClient,
    partitions: list[TopicPartition],
    committed: dict[TopicPartition, int],
    target: _Target,
) -> dict[TopicPartition, int]:
    """Each partition's new offset, held between its log start offset and high watermark
    (as Kafka's tool holds --to-offset and --shift-by)."""
    start = partition_offsets(admin, partitions, OffsetSpec.earliest())
    end = partition_offsets(admin, partitions, OffsetSpec.latest())
    at_time: dict[TopicPartition, int] = {}
    if target.option in ("to_datetime", "by_duration"):
        assert target.value is not None
        at_time = partition_offsets(admin, partitions, OffsetSpec.for_timestamp(target.value))
    new_offsets = {}
    for tp in partitions:
        if target.option == "to_earliest":
            wanted = start[tp]
        elif target.option == "to_latest":
            wanted = end[tp]
        elif target.option == "to_offset":
            wanted = int(target.value or 0)
        elif target.option == "shift_by":
            wanted = _committed_offset(committed, tp) + int(target.value or 0)
        else:  # no record at or after the time: the high watermark, as Kafka's tool
            wanted = end[tp] if at_time[tp] < 0 else at_time[tp]
        new_offsets[tp] = min(max(wanted, start[tp]), end[tp])
    return new_offsets


def _check_inactive(admin: AdminClient, group: str) -> None:
    """Kafka's refusal of a reset while the group has members; an unknown group is Dead,
    which Kafka resets (creating its offsets)."""
    try:
        state = admin.describe_consumer_groups([group])[group].result().state
    except KafkaException as error:
        if error.args[0].code() == ErrorCodes.GROUP_ID_NOT_FOUND:
            return
        raise
    if state not in _INACTIVE:
        raise CommandFailed(
            f"Assignments can only be reset if the group '{group}' is inactive, but the "
            f"current state is {group_state_name(state)}.",
            1,
        )


def _committed(admin: AdminClient, group: str) -> dict[TopicPartition, int]:
    """The group's committed offsets (none for a group unknown here)."""
    request = [ConsumerGroupTopicPartitions(group)]
    listed = admin.list_consumer_group_offsets(request)[group].result().topic_partitions
    return {
        TopicPartition(tp.topic, tp.partition): tp.offset for tp in listed or [] if tp.offset >= 0
    }


def _committed_offset(committed: dict[TopicPartition, int], tp: TopicPartition) -> int:
    if tp not in committed:
        raise CommandFailed(
            f"Cannot shift offset for partition {tp.topic}-{tp.partition} since there is no "
            f"current committed offset",
            1,
        )
    return committed[tp]


def _named_partitions(admin: AdminClient, topics: Sequence[str]) -> list[TopicPartition]:
    """The partitions --topic T (all of T's) or --topic T:P,... names; each must exist."""
    partitions = []
    for spec in topics:
        name, colon, numbers = spec.partition(":")
        every = partitions_of(admin, name)
        if not colon:
            partitions += every
            continue
        try:
            wanted = [TopicPartition(name, int(number)) for number in numbers.split(",")]
        except ValueError:
            raise click.UsageError(f"--topic takes T or T:P,P,..., not {spec!r}") from None
        for tp in wanted:
            if tp not in every:
                raise CommandFailed(
                    f"UNKNOWN_TOPIC_OR_PART: topic {name} has no partition {tp.partition}", 1
                )
        partitions += wanted
    return sorted(set(partitions))


def _commit(admin: AdminClient, group: str, offsets: dict[TopicPartition, int]) -> None:
    partitions = [TopicPartition(tp.topic, tp.partition, offset) for tp, offset in offsets.items()]
    request = [ConsumerGroupTopicPartitions(group, partitions)]
    try:
        admin.alter_consumer_group_offsets(request)[group].result()
    except KafkaException as error:
        raise CommandFailed(kafka_error_text(error), 1) from None


def _datetime_ms(text: str) -> int:
    """--to-datetime's ISO 8601 time in ms; without a zone it is local time, as Kafka's."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise click.UsageError(f"--to-datetime takes an ISO 8601 time, not {text!r}") from None
    return int(moment.timestamp() * 1000)


def _duration_ms(text: str) -> int:
    """--by-duration's PnDTnHnMnS in ms."""
    match = _DURATION.fullmatch(text)
    if match is None or text in ("P", "PT") or text.endswith("T"):
        raise click.UsageError(f"--by-duration takes PnDTnHnMnS, not {text!r}")
    parts = {name: float(value or 0) for name, value in match.groupdict().items()}
    seconds = (parts["days"] * 24 + parts["hours"]) * 3600 + parts["minutes"] * 60
    return int((seconds + parts["seconds"]) * 1000)
