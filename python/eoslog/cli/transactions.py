"""`eoslog transactions DIR list|describe|describe-producers|find-hanging|abort`, after
Kafka's kafka-transactions.sh (KIP-664): the same subcommands, options and columns, acting
through the AdminClient's KIP-664 calls on the directory opened with its lock, so the shell
and a Python caller share one implementation (eoslog.client.admin_transactions).

Where eoslog differs: there is one broker, so there is no --bootstrap-server and no
--broker-id, and find-hanging searches every user topic when given no --topic; abort finds
the producer by --start-offset only (Kafka's tool also takes the producer's id and epochs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

import click

from eoslog.cli.output import (
    CommandFailed,
    Row,
    changing_admin,
    directory_group,
    json_option,
    partitions_of,
    reading_admin,
    show,
)
from eoslog.client.admin import AdminClient
from eoslog.client.admin_transaction_types import (
    TRANSACTIONAL_ID_NOT_FOUND,
    AbortTransactionSpec,
    ProducerState,
    TransactionDescription,
)
from eoslog.client.message import TopicPartition
from eoslog.errors import KafkaException

# kafka-transactions.sh find-hanging's default --max-transaction-timeout: the broker's
# default transaction.max.timeout.ms, in minutes.
DEFAULT_MAX_TRANSACTION_TIMEOUT_MINUTES: Final = 15

_MS_PER_MINUTE: Final = 60_000

PRODUCER_COLUMNS: Final = (
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
)
HANGING_COLUMNS: Final = (
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
)


max_transaction_timeout_option = click.option(
    "--max-transaction-timeout",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MINUTES,
    show_default=True,
    metavar="MINUTES",
    help="hanging: only transactions whose producer last wrote longer ago than this",
)

transactions = directory_group(
    "transactions",
    help="List and describe transactions and producers; find and abort hanging transactions "
    "(kafka-transactions.sh). DIR is a log directory; reads work while a process owns it, "
    "abort needs it offline.",
)


@transactions.command("list", help="Every transactional id the coordinator holds.")
@click.pass_obj
@json_option
def list_command(directory: str, as_json: bool) -> None:
    with reading_admin(directory) as admin:
        listings = admin.list_transactions().result()
    rows: list[Row] = [
        {
            "TransactionalId": listing.transactional_id,
            "Coordinator": 0,
            "ProducerId": listing.producer_id,
            "TransactionState": listing.state.value,
        }
        for listing in sorted(listings, key=lambda listing: listing.transactional_id)
    ]
    show(
        "Transactions",
        ("TransactionalId", "Coordinator", "ProducerId", "TransactionState"),
        rows,
        as_json,
    )


@transactions.command(help="The state of one transactional id and its transaction, if open.")
@click.pass_obj
@click.option("--transactional-id", required=True, help="the transactional id to describe")
@json_option
def describe(directory: str, transactional_id: str, as_json: bool) -> None:
    with reading_admin(directory) as admin:
        description = admin.describe_transactions([transactional_id])[transactional_id].result()
    row = description_row(transactional_id, description, wall_clock_ms())
    show(f"Transaction {transactional_id}", tuple(row), [row], as_json)


def description_row(tid: str, description: TransactionDescription, now_ms: int) -> Row:
    start = description.transaction_start_time_ms
    return {
        "CoordinatorId": description.coordinator_id,
        "TransactionalId": tid,
        "ProducerId": description.producer_id,
        "ProducerEpoch": description.producer_epoch,
        "TransactionState": description.state.value,
        "TransactionTimeoutMs": description.transaction_timeout_ms,
        "CurrentTransactionStartTimeMs": start,
        "TransactionDurationMs": None if start is None else now_ms - start,
        "TopicPartitions": ",".join(
            f"{tp.topic}-{tp.partition}" for tp in description.topic_partitions
        ),
    }


@transactions.command(
    "describe-producers",
    help="The active producers of one partition (KIP-664's DescribeProducers).",
)
@click.pass_obj
@click.option("--topic", required=True)
@click.option("--partition", type=int, required=True)
@json_option
def describe_producers(directory: str, topic: str, partition: int, as_json: bool) -> None:
    tp = TopicPartition(topic, partition)
    with reading_admin(directory) as admin:
        states = admin.describe_producers([tp])[tp].result()
    rows = [producer_row(state) for state in states]
    show(f"Producers of {topic}-{partition}", PRODUCER_COLUMNS, rows, as_json)


def producer_row(state: ProducerState) -> Row:
    return {
        "ProducerId": state.producer_id,
        "ProducerEpoch": state.producer_epoch,
        "LatestCoordinatorEpoch": state.coordinator_epoch,
        "LastSequence": state.last_sequence,
        "LastTimestamp": state.last_timestamp_ms,
        "CurrentTransactionStartOffset": state.current_transaction_start_offset,
    }


@dataclass(frozen=True)
class _OpenTransaction:
    partition: TopicPartition
    state: ProducerState


@transactions.command(
    "find-hanging",
    help="Open transactions older than --max-transaction-timeout whose producer no "
    "transactional id owns, or whose partition the owner's transaction does not list: nothing "
    "will end them, and read_committed readers wait at their start.",
)
@click.pass_obj
@click.option("--topic", help="search this topic only (default: every user topic)")
@click.option("--partition", type=int, help="with --topic: this partition only")
@max_transaction_timeout_option
@json_option
def find_hanging(
    directory: str,
    topic: str | None,
    partition: int | None,
    max_transaction_timeout: int,
    as_json: bool,
) -> None:
    if partition is not None and topic is None:
        raise click.UsageError("--partition needs --topic")
    with reading_admin(directory) as admin:
        now_ms = wall_clock_ms()  # after the open: a live owner may begin one while it runs
        if topic is not None and partition is not None:
            partitions = [TopicPartition(topic, partition)]
        else:
            partitions = partitions_of(admin, topic)
        rows = hanging_rows(admin, partitions, now_ms, max_transaction_timeout)
    show("Hanging transactions", HANGING_COLUMNS, rows, as_json)


def hanging_rows(
    admin: AdminClient, partitions: list[TopicPartition], now_ms: int, timeout_minutes: int
) -> list[Row]:
    """find-hanging's rows: the transactions open on these partitions that nothing will end
    (Kafka's rule, below), whose producer last wrote more than timeout_minutes ago."""
    candidates = _open_transactions(admin, partitions, now_ms, timeout_minutes)
    return [_hanging_row(found, now_ms) for found in _hanging(admin, candidates)]


def _open_transactions(
    admin: AdminClient, partitions: list[TopicPartition], now_ms: int, timeout_minutes: int
) -> list[_OpenTransaction]:
    """Kafka's candidates: each producer with a transaction open on a partition whose last
    write there is more than the timeout ago."""
    if not partitions:
        return []
    answers = admin.describe_producers(partitions)
    return [
        _OpenTransaction(tp, state)
        for tp, future in answers.items()
        for state in future.result()
        if state.current_transaction_start_offset is not None
        and now_ms - state.last_timestamp_ms > timeout_minutes * _MS_PER_MINUTE
    ]


def _hanging(admin: AdminClient, candidates: list[_OpenTransaction]) -> list[_OpenTransaction]:
    """The candidates nothing will end (kafka-transactions.sh's rule): no transactional id
    holds the producer id, the id is unknown, or its transaction does not list the
    partition (so the coordinator will write no marker there)."""
    if not candidates:
        return []
    producer_ids = {found.state.producer_id for found in candidates}
    listings = admin.list_transactions(producer_id_filters=producer_ids).result()
    owners = {listing.producer_id: listing.transactional_id for listing in listings}
    hanging = []
    for found in candidates:
        owner = owners.get(found.state.producer_id)
        listed = owner is not None and found.partition in _partitions_of_transaction(admin, owner)
        if not listed:
            hanging.append(found)
    return hanging


def _partitions_of_transaction(admin: AdminClient, transactional_id: str) -> list[TopicPartition]:
    """The partitions the id's transaction lists; none if the id is not found."""
    try:
        return (
            admin.describe_transactions([transactional_id])[transactional_id]
            .result()
            .topic_partitions
        )
    except KafkaException as error:
        if error.args[0].code() == TRANSACTIONAL_ID_NOT_FOUND:
            return []
        raise


def _hanging_row(found: _OpenTransaction, now_ms: int) -> Row:
    state = found.state
    return {
        "Topic": found.partition.topic,
        "Partition": found.partition.partition,
        "ProducerId": state.producer_id,
        "ProducerEpoch": state.producer_epoch,
        "CoordinatorEpoch": -1 if state.coordinator_epoch is None else state.coordinator_epoch,
        "StartOffset": state.current_transaction_start_offset,
        "LastTimestamp": state.last_timestamp_ms,
        "Duration(min)": (now_ms - state.last_timestamp_ms) // _MS_PER_MINUTE,
    }


@transactions.command(
    help="Abort the transaction open on a partition from --start-offset (its producer looked "
    "up with describe-producers): an ABORT marker, durable, so read_committed readers move on."
)
@click.pass_obj
@click.option("--topic", required=True)
@click.option("--partition", type=int, required=True)
@click.option("--start-offset", type=int, required=True, help="the open transaction's first offset")
def abort(directory: str, topic: str, partition: int, start_offset: int) -> None:
    tp = TopicPartition(topic, partition)
    with changing_admin(directory) as admin:
        states = admin.describe_producers([tp])[tp].result()
        opened = [s for s in states if s.current_transaction_start_offset == start_offset]
        if not opened:
            raise CommandFailed(
                f"no transaction open on {topic}-{partition} starts at offset {start_offset} "
                f"(see `eoslog transactions {directory} describe-producers`)",
                1,
            )
        (state,) = opened
        coordinator_epoch = 0 if state.coordinator_epoch is None else state.coordinator_epoch
        spec = AbortTransactionSpec(tp, state.producer_id, state.producer_epoch, coordinator_epoch)
        admin.abort_transaction(spec).result()
    click.echo(
        f"aborted the transaction of producer {state.producer_id} (epoch "
        f"{state.producer_epoch}) open on {topic}-{partition} from offset {start_offset}"
    )


def wall_clock_ms() -> int:
    """The wall clock, as Kafka's tool reads it: producers stamp their writes with it."""
    return int(time.time() * 1000)
