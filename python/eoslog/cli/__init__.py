"""The eoslog command line: `eoslog demo`, `eoslog dump-log FILE...`,
`eoslog verify PATH...`, `eoslog repair FILE --truncate-at POSITION`, `eoslog archive DIR URL`,
and the operations on an offline log directory, named after Kafka's tools:
`eoslog transactions DIR ...` (kafka-transactions.sh), `eoslog topics DIR ...`
(kafka-topics.sh), `eoslog groups DIR ...` (kafka-consumer-groups.sh).

Exit status: 0 done (verify: no damage found, warnings allowed); 1 the command ran and found
damage (verify, dump-log) or refused to change anything (repair, abort: a live directory, or
what it names is not there to change); 2 it could not run on what it was given (a missing
path, not a segment file or log directory, bad arguments). Errors are one line on stderr,
never a traceback.
"""

# Built on click (argument parsing, help, usage errors with status 2, `--version`, shell
# completion) and rich (tables); docs/api.md "Command line".

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import click

import eoslog
from eoslog import demo
from eoslog.cli import archive_command, describe, group_changes, topic_changes  # noqa: F401
from eoslog.cli.output import BROKEN_PIPE_STATUS, CommandFailed, error_text, json_option
from eoslog.cli.serve import serve
from eoslog.cli.topics import groups, topics
from eoslog.cli.transactions import transactions
from eoslog.dump_files import dump_files
from eoslog.dump_log import DumpOptions
from eoslog.errors import KafkaException, NotASegmentFileError
from eoslog.log.repair import repair_truncate
from eoslog.verify import check_segment_file
from eoslog.verify import verify as verify_paths


class _Commands(click.Group):
    """The top-level group: turns what a command raises into a one-line error and its exit
    status, so no user mistake ends in a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # The reader of our output went away (`eoslog dump-log FILE | head`): stop
            # quietly. Point stdout at /dev/null so the flush at exit does not fail again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise click.exceptions.Exit(BROKEN_PIPE_STATUS) from None
        except CommandFailed as error:
            _fail(ctx, str(error), error.status)
        except KafkaException as error:
            status = 2 if isinstance(error, NotASegmentFileError) else 1
            _fail(ctx, error_text(error), status)
        except OSError as error:
            where = f": {error.filename}" if error.filename else ""
            _fail(ctx, f"{error.strerror or error}{where}", 2)


def _fail(ctx: click.Context, text: str, status: int) -> None:
    click.echo(f"eoslog {ctx.invoked_subcommand}: {text}", err=True)
    raise click.exceptions.Exit(status)


@click.group(cls=_Commands, help=__doc__)
@click.version_option(eoslog.__version__, prog_name="eoslog", message="%(prog)s %(version)s")
def commands() -> None:
    pass


@commands.command(
    "demo",
    help="The exactly-once pipeline under kill -9, then batches written, read back, checked.",
)
@click.option("--dir", "directory", help="where to write (default: a new temporary directory)")
@click.option("--records", type=int, default=200_000, show_default=True, help="codec demo records")
@click.option(
    "--pipeline-records",
    type=int,
    default=20_000,
    show_default=True,
    help="input records of the pipeline",
)
@click.option("--kills", type=int, default=3, show_default=True, help="SIGKILLs of the copier")
def demo_command(directory: str | None, records: int, pipeline_records: int, kills: int) -> int:
    return demo.run(directory, records, pipeline_records, kills)


@commands.command(
    "dump-log",
    help="Print segment files as kafka-dump-log.sh does: a .log's batches (CRC checked: "
    "isvalid), with --deep-iteration its records, with --print-data-log their keys and "
    "payloads; .index, .timeindex, .txnindex and .snapshot files entry by entry.",
)
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--deep-iteration", is_flag=True, help="print every record too")
@click.option(
    "--print-data-log",
    is_flag=True,
    help="print each record's key and payload (implies --deep-iteration)",
)
@click.option("--records", is_flag=True, hidden=True, help="the same as --print-data-log")
@click.option(
    "--offsets-decoder",
    is_flag=True,
    help="decode __consumer_offsets records (implies --print-data-log; the default for a "
    "file in a __consumer_offsets-N directory)",
)
@click.option(
    "--transaction-log-decoder",
    is_flag=True,
    help="decode __transaction_state records (implies --print-data-log; the default for a "
    "file in a __transaction_state-N directory)",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="one JSON object a line (JSON Lines: file, batch, record, entry, damage), not "
    "Kafka's text",
)
def dump_log(
    files: tuple[str, ...],
    deep_iteration: bool,
    print_data_log: bool,
    records: bool,
    offsets_decoder: bool,
    transaction_log_decoder: bool,
    as_json: bool,
) -> int:
    options = DumpOptions.of(
        deep_iteration=deep_iteration,
        print_data_log=print_data_log or records,
        offsets_decoder=offsets_decoder,
        transaction_log_decoder=transaction_log_decoder,
        as_json=as_json,
    )
    return dump_files(files, options)


@commands.command(
    help="Check log directories, partition directories or segment files as an open would "
    "and more: each .log's framing, CRC, offsets and records; each .index, .timeindex, "
    ".txnindex and .snapshot against the log; the checkpoints and eoslog.meta. Every "
    "problem names its file and byte, and each error how to repair it (exit status 1 if "
    "any; warnings, such as a torn tail the next open cuts, do not count)."
)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@json_option
def verify(paths: tuple[str, ...], as_json: bool) -> int:
    return verify_paths(paths, as_json=as_json)


@commands.command(
    help="Cut a damaged segment at a validated batch boundary and drop the later segments; "
    "the owner must be stopped (a live directory is refused with its pid)."
)
@click.argument("file")
@click.option("--truncate-at", type=int, required=True, metavar="POSITION")
def repair(file: str, truncate_at: int) -> int:
    check_segment_file(file)  # before any open: opening a FIFO blocks
    discarded = repair_truncate(file, truncate_at)
    click.echo(f"cut {file} at byte {truncate_at}; {discarded} bytes discarded")
    return 0


commands.add_command(describe.describe)
commands.add_command(archive_command.archive)
commands.add_command(transactions)
commands.add_command(topics)
commands.add_command(groups)
commands.add_command(serve)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on argv (default: sys.argv[1:]); returns the exit status."""
    try:
        status = commands.main(
            args=list(argv) if argv is not None else None,
            prog_name="eoslog",
            standalone_mode=False,
        )
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.UsageError as error:  # status 2, one line naming the command and its help
        where = error.ctx.command_path if error.ctx is not None else "eoslog"
        text = error.format_message()
        click.echo(f"{where}: {text} (see '{where} --help')", err=True)
        return error.exit_code
    except click.ClickException as error:
        click.echo(f"eoslog: {error.format_message()}", err=True)
        return error.exit_code
    except click.exceptions.Abort:
        click.echo("eoslog: aborted", err=True)
        return 1
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    sys.exit(main())
