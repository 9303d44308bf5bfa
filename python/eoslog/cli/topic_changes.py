"""`eoslog topics DIR create|delete|alter` (kafka-topics.sh's --create, --delete and --alter
--partitions; kafka-configs.sh's --alter --add-config / --delete-config), through the
AdminClient's create_topics, delete_topics, create_partitions and incremental_alter_configs on
the directory opened with its lock. A refusal is one line with Kafka's error name and message,
exit status 1, and changes nothing.

Where eoslog differs: there is no --bootstrap-server and no --replica-assignment (a log
directory is the only replica of everything); --replication-factor is accepted, and only 1 is
valid. kafka-configs.sh's --entity-type topics --entity-name T is `eoslog topics DIR alter
--topic T` here, so topic changes live under one command.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Final

import click

from eoslog.cli.output import CommandFailed, changing_admin, kafka_error_text
from eoslog.cli.topics import topics
from eoslog.client.admin_types import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from eoslog.errors import KafkaException

# kafka-configs.sh's --add-config list: k=v pairs split at commas outside square brackets,
# so a list value is written k=[a,b].
_CONFIG_PAIR: Final = re.compile(r"([^=,\[\]]+)=(\[[^\]]*\]|[^,]*)(?:,|$)")


@topics.command(help="Create a topic (kafka-topics.sh --create).")
@click.pass_obj
@click.option("--topic", required=True, help="the topic's name")
@click.option(
    "--partitions",
    type=int,
    default=-1,
    help="its partition count (default: the directory's num.partitions)",
)
@click.option(
    "--replication-factor",
    type=int,
    default=-1,
    help="accepted for kafka-topics.sh's sake: a log directory holds one replica, so only 1",
)
@click.option(
    "--config",
    "configs",
    multiple=True,
    metavar="KEY=VALUE",
    help="a topic config, e.g. retention.ms=60000 (repeatable)",
)
def create(
    directory: str, topic: str, partitions: int, replication_factor: int, configs: Sequence[str]
) -> None:
    config = dict(_pair(setting) for setting in configs)
    new_topic = NewTopic(topic, partitions, replication_factor, config=config)
    with changing_admin(directory) as admin:
        _only_answer(admin.create_topics([new_topic]))
    click.echo(f"Created topic {topic}.")


@topics.command(help="Delete a topic and its records (kafka-topics.sh --delete).")
@click.pass_obj
@click.option("--topic", required=True, help="the topic's name")
def delete(directory: str, topic: str) -> None:
    with changing_admin(directory) as admin:
        _only_answer(admin.delete_topics([topic]))
    click.echo(f"Deleted topic {topic}.")


@topics.command(
    help="Add partitions to a topic (kafka-topics.sh --alter --partitions), or set or delete "
    "its configs (kafka-configs.sh --alter --add-config / --delete-config); each change "
    "applies whole or not at all."
)
@click.pass_obj
@click.option("--topic", required=True, help="the topic's name")
@click.option("--partitions", type=int, help="the new partition count (only ever grows)")
@click.option(
    "--add-config",
    metavar="K=V,...",
    help="configs to set, comma-separated (a list value as k=[a,b])",
)
@click.option(
    "--delete-config",
    metavar="K,...",
    help="configs to put back to the directory's default, comma-separated",
)
def alter(
    directory: str,
    topic: str,
    partitions: int | None,
    add_config: str | None,
    delete_config: str | None,
) -> None:
    if partitions is None and add_config is None and delete_config is None:
        raise click.UsageError("give --partitions, --add-config or --delete-config")
    if partitions is not None and (add_config is not None or delete_config is not None):
        raise click.UsageError("--partitions and --add-config/--delete-config are separate alters")
    if partitions is not None:
        with changing_admin(directory) as admin:
            _only_answer(admin.create_partitions([NewPartitions(topic, partitions)]))
        click.echo(f"Topic {topic} now has {partitions} partitions.")
        return
    changes = _config_changes(add_config, delete_config)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=changes)
    with changing_admin(directory) as admin:
        _only_answer(admin.incremental_alter_configs([resource]))
    click.echo(f"Completed updating config for topic {topic}.")


def _config_changes(add_config: str | None, delete_config: str | None) -> list[ConfigEntry]:
    """The SET entries of --add-config then the DELETE entries of --delete-config."""
    changes = [
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
        for key, value in _pairs(add_config or "")
    ]
    for key in (delete_config or "").split(","):
        if key.strip():
            entry = ConfigEntry(key.strip(), None, incremental_operation=AlterConfigOpType.DELETE)
            changes.append(entry)
    if not changes:
        raise click.UsageError("no config named")
    return changes


def _pairs(text: str) -> list[tuple[str, str]]:
    """kafka-configs.sh's --add-config list as (key, value) pairs; a usage error (exit 2)
    for text that is not such a list."""
    pairs = []
    position = 0
    while position < len(text):
        match = _CONFIG_PAIR.match(text, position)
        if match is None:
            raise click.UsageError(f"not a KEY=VALUE list: {text!r} (at character {position})")
        pairs.append((match.group(1).strip(), match.group(2).strip("[]")))
        position = match.end()
    return pairs


def _pair(setting: str) -> tuple[str, str]:
    """One --config KEY=VALUE; a usage error (exit 2) without its '='."""
    key, equals, value = setting.partition("=")
    if not equals or not key.strip():
        raise click.UsageError(f"--config takes KEY=VALUE, not {setting!r}")
    return key.strip(), value.strip()


def _only_answer(answers: dict[str, Future[None]] | dict[ConfigResource, Future[None]]) -> None:
    """The one answer of a call made for one topic: None, or its KafkaException raised (the
    command line turns it into one line and exit status 1)."""
    (future,) = answers.values()
    try:
        future.result()
    except KafkaException as error:
        raise CommandFailed(kafka_error_text(error), 1) from None
