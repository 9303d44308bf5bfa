"""What the command line's operations share: their errors and exit statuses, the log
directory opened with its lock, and their output (a rich table for people, `--json` for
machines)."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Final

import click
from rich import box
from rich.console import Console
from rich.table import Table

import eoslog
from eoslog.broker import Broker
from eoslog.client.admin import AdminClient
from eoslog.client.admin_transaction_types import TRANSACTIONAL_ID_NOT_FOUND
from eoslog.client.admin_types import TopicCollection
from eoslog.client.message import TopicPartition
from eoslog.errors import KafkaException, KafkaStorageError, LogDirLockedError
from eoslog.fs_overlay import OverlayFileSystem
from eoslog.log import recovery
from eoslog.log.meta_file import META_FILE
from eoslog.progress import activity_progress

# The status a process killed by SIGPIPE reports through a shell (128 + 13), which is what
# `eoslog dump-log FILE | head` would give had Python not turned the signal into an error.
BROKEN_PIPE_STATUS: Final = 128 + 13

# How often a read opens the directory again after the owner deleted a file it was reading.
_READ_ATTEMPTS: Final = 5

# Output to a pipe or file is never wrapped: a row stays one line for grep and awk.
_PIPED_WIDTH: Final = 10_000

# Kafka's names for the codes librdkafka does not name (its name() is "ERR_<code>?").
_NAMES_LIBRDKAFKA_LACKS: Final = {TRANSACTIONAL_ID_NOT_FOUND: "TRANSACTIONAL_ID_NOT_FOUND"}

Row = dict[str, object]


class CommandFailed(Exception):
    """A command that ran and could not do what was asked: its one-line reason and status."""

    def __init__(self, text: str, status: int) -> None:
        super().__init__(text)
        self.status = status


def error_text(error: KafkaException) -> str:
    """An eoslog error's type and text; for an AdminClient future's plain KafkaException,
    the Kafka error's name instead of the type (INVALID_TXN_STATE: ...), as Kafka's tools
    print it."""
    if type(error) is not KafkaException:
        return f"{type(error).__name__}: {error}"
    return kafka_error_text(error)


def kafka_error_text(error: KafkaException) -> str:
    """The Kafka error's name and message (TOPIC_ALREADY_EXISTS: ...), for an eoslog typed
    error too: how a command that changes state reports a refusal, as Kafka's tools do."""
    kafka_error = error.args[0]
    code = kafka_error.code()
    name = _NAMES_LIBRDKAFKA_LACKS.get(code, kafka_error.name())
    return f"{name}: {kafka_error.str()}"


def _check_log_directory(directory: str) -> None:
    """Status 2 for a path that is not a log directory (nothing is created)."""
    if not os.path.isdir(directory):
        raise CommandFailed(f"{directory} is not a directory", 2)
    if not os.path.isfile(os.path.join(directory, META_FILE)):
        raise CommandFailed(f"{directory} is not an eoslog log directory (no {META_FILE})", 2)


@contextmanager
def reading_admin(directory: str) -> Iterator[AdminClient]:
    """The AdminClient of the log directory as it is on disk now, for a command that only
    reads (reading_broker's broker.admin())."""
    with reading_broker(directory) as broker:
        yield broker.admin()


@contextmanager
def reading_broker(directory: str) -> Iterator[Broker]:
    """A read-only view of the log directory as it is on disk now, for a command that only
    reads: no lock is taken and nothing is written, so the directory may be owned by a live
    process (docs/api.md "Command line"). The broker opens the directory through an
    eoslog.fs_overlay.OverlayFileSystem, which keeps in memory whatever the open would change
    (recovery of a tail being written, checkpoints). A file the owner deletes while the open
    lists and reads the directory makes the open fail; it is then tried again."""
    _check_log_directory(directory)
    for attempt in range(_READ_ATTEMPTS):
        overlay = OverlayFileSystem(directory)
        try:
            with _open_progress(directory):
                broker = Broker(
                    directory,
                    fs=overlay,
                    durability="none",
                    background=False,
                    view=True,
                )
        except KafkaStorageError as error:
            overlay.close()
            if attempt + 1 == _READ_ATTEMPTS or not isinstance(error.__cause__, FileNotFoundError):
                raise
            continue
        try:
            yield broker
        finally:
            broker.close()
            overlay.close()
        return


@contextmanager
def changing_admin(directory: str) -> Iterator[AdminClient]:
    """The AdminClient of the log directory, opened with its lock for the command's length
    and closed after, for a command that changes the directory. A directory a live process
    owns is refused (status 1), naming its pid and how to make the change there."""
    _check_log_directory(directory)
    try:
        with _open_progress(directory):
            broker = eoslog.open(directory, background=False)
    except LogDirLockedError as error:
        raise CommandFailed(
            f"{error}; a command that changes the directory needs it offline: stop that "
            f"process first, or make the change in it through its Python API "
            f'(broker.admin(), docs/api.md "AdminClient")',
            1,
        ) from None
    try:
        yield broker.admin()
    finally:
        broker.close()


@contextmanager
def _open_progress(directory: str) -> Iterator[None]:
    """A spinner on a terminal while an open takes over a second: the segment bytes recovery
    has rescanned so far (eoslog.progress.activity_progress)."""
    with activity_progress(f"opening {directory}") as advance:
        token = recovery.RESCANNED_BYTES.set(advance)
        try:
            yield
        finally:
            recovery.RESCANNED_BYTES.reset(token)


def partitions_of(admin: AdminClient, topic: str | None = None) -> list[TopicPartition]:
    """The partitions of the topic (UNKNOWN_TOPIC_OR_PART if it does not exist), or of every
    user topic when topic is None (internal topics left out, as Kafka's tools list topics)."""
    names = [topic] if topic is not None else sorted(admin.list_topics().topics)
    if not names:
        return []
    partitions = []
    for name, future in admin.describe_topics(TopicCollection(names)).items():
        description = future.result()
        if topic is None and description.is_internal:
            continue
        partitions += [TopicPartition(name, info.id) for info in description.partitions]
    return partitions


def show(title: str, columns: Sequence[str], rows: Sequence[Row], as_json: bool) -> None:
    """Print rows as a table under its title, or with as_json as one JSON array of objects
    (None as null) on stdout."""
    if as_json:
        click.echo(json.dumps(list(rows), indent=2))
        return
    table = Table(*columns, title=title, box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    for row in rows:
        table.add_row(*("-" if row[name] is None else str(row[name]) for name in columns))
    terminal = _is_terminal()
    rendered = io.StringIO()
    width = None if terminal else _PIPED_WIDTH
    Console(file=rendered, width=width, force_terminal=terminal).print(table)
    # rich pads every cell: no line ends in spaces, for diff and for copying.
    click.echo("\n".join(line.rstrip() for line in rendered.getvalue().splitlines()).rstrip())


def _is_terminal() -> bool:
    return sys.stdout.isatty()


def directory_group(name: str, help: str) -> click.Group:
    """A command group whose first argument is the log directory DIR, handed to each of its
    subcommands as their first parameter (they take it with click.pass_obj)."""

    @click.pass_context
    def keep_directory(ctx: click.Context, directory: str) -> None:
        ctx.obj = directory

    directory = click.Argument(["directory"], metavar="DIR")
    return click.Group(name, callback=keep_directory, params=[directory], help=help)


json_option = click.option("--json", "as_json", is_flag=True, help="print JSON, not a table")
