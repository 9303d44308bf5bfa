"""Progress bars for the command-line tools that read large files (`eoslog verify`,
`eoslog dump-log`): a rich bar on stderr, counting bytes, only when stderr is a terminal and
the work is large enough to take about a second; otherwise nothing at all, so output piped or
redirected (and every test's) carries no progress text.

Thread safety: one bar per command, advanced by the thread that reads the files.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

# Below this many bytes a verify or dump finishes in about a second (verify walks about a GiB
# a second, a dump prints far slower per byte, but a smaller file prints little): no bar.
PROGRESS_BYTES_MIN: Final = 16 * 1024 * 1024

# Adds the bytes just read to the bar.
Advance = Callable[[int], None]


def no_progress(_: int) -> None:
    """The Advance of no bar."""


@contextmanager
def byte_progress(description: str, total_bytes: int) -> Iterator[Advance]:
    """A bar for reading total_bytes, shown on stderr while the block runs if stderr is a
    terminal and total_bytes is at least PROGRESS_BYTES_MIN; yields the function to call
    with each piece's byte count (a no-op when there is no bar). The bar is removed at the
    end, so the terminal keeps only the command's own output."""
    if total_bytes < PROGRESS_BYTES_MIN or not sys.stderr.isatty():
        yield no_progress
        return
    console = Console(file=sys.stderr)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    # Lines printed on stdout go above the bar when stdout is the same terminal; to a pipe
    # or file they go straight there, never through the bar's console (stderr).
    terminal = sys.stdout.isatty()
    with Progress(
        *columns,
        console=console,
        transient=True,
        redirect_stdout=terminal,
        redirect_stderr=False,
    ) as bar:
        task = bar.add_task(description, total=total_bytes)
        yield lambda done: bar.advance(task, done)
