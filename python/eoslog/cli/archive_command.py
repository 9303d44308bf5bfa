"""`eoslog archive DIR URL`: copy the closed segments of a log directory to an archive
(object storage or a local directory) under Kafka's names, for scans of the split log
(eoslog.archive; docs/api.md "Command line").

Like the read commands it only reads DIR and takes no lock, so DIR may be live (a process
appending) or stopped. It prints one line: the segments copied, those already archived, and
the objects and bytes written.
"""

from __future__ import annotations

import click

from eoslog import archive as archiving
from eoslog.cli.output import _check_log_directory


@click.command(
    "archive",
    help="Copy each closed segment of DIR wholly below its partition's last stable offset "
    "(.index, .timeindex, .txnindex, the producer snapshot at its end, then the .log) to the "
    "archive at URL (a local path, file://, s3://bucket/prefix?endpoint_override=...&region="
    "..., gs://, hdfs://), under Kafka's names, so that `eoslog.scan(URL)` reads the archive "
    "and `eoslog.scan(DIR, archive=URL)` the directory and the archive as one log. Only reads "
    "DIR (live or stopped); idempotent: a segment archived before is skipped, and a run "
    "stopped mid-copy is completed by the next (a segment without its .log is never read).",
)
@click.argument("directory", metavar="DIR")
@click.argument("url", metavar="URL")
@click.option(
    "--topic",
    "topics",
    multiple=True,
    help="archive this topic only (repeatable; default: every user topic)",
)
def archive(directory: str, url: str, topics: tuple[str, ...]) -> int:
    _check_log_directory(directory)
    try:
        report = archiving.archive(directory, url, topics or None)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    click.echo(
        f"{report.segments_copied} segments copied, {report.segments_present} already "
        f"archived; {report.objects} objects, {report.bytes} bytes written"
    )
    return 0
