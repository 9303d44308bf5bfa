"""Progress on stderr for the command line's slow work, only when stderr is a terminal and
the work takes about a second or more; otherwise nothing at all, so output piped or redirected
(and every test's) carries no progress text:
- byte_progress: a bar for reading files of a known size (`eoslog verify`, `eoslog dump-log`);
- activity_progress: a spinner counting what is done so far, of no known total, shown once the
  work has taken ACTIVITY_SECONDS_MIN (opening a directory: the bytes recovery rescans;
  `eoslog demo`: the pipeline's transactions).

Thread safety: one bar per command, advanced by the thread doing the work.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

from rich import filesize
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.text import Text

# Below this many bytes a verify or dump finishes in about a second (verify walks about a GiB
# a second, a dump prints far slower per byte, but a smaller file prints little): no bar.
PROGRESS_BYTES_MIN: Final = 16 * 1024 * 1024

# Work that ends sooner shows no spinner (most opens of a directory: no flicker).
ACTIVITY_SECONDS_MIN: Final = 1.0

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


class _BytesDone(ProgressColumn):
    """The bytes done so far, of no known total (DownloadColumn would print "3.1/? MB")."""

    def render(self, task: Task) -> Text:
        return Text(filesize.decimal(int(task.completed)), style="progress.download")


@contextmanager
def activity_progress(description: str, unit: str = "bytes") -> Iterator[Advance]:
    """A spinner with the amount done so far (bytes, or a count of `unit`) and the time taken,
    on stderr if it is a terminal, from ACTIVITY_SECONDS_MIN into the block to its end, then
    removed; yields the function to call with each amount done (a no-op without a terminal)."""
    if not sys.stderr.isatty():
        yield no_progress
        return
    amount: ProgressColumn = (
        _BytesDone() if unit == "bytes" else TextColumn(f"{{task.completed:,.0f}} {unit}")
    )
    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        amount,
        TimeElapsedColumn(),
        console=Console(file=sys.stderr),
        transient=True,
        redirect_stdout=sys.stdout.isatty(),  # lines printed meanwhile go above the spinner
        redirect_stderr=False,
    )
    task = bar.add_task(description, total=None)
    shown = threading.Timer(ACTIVITY_SECONDS_MIN, bar.start)
    shown.daemon = True
    shown.start()
    try:
        yield lambda done: bar.advance(task, done)
    finally:
        shown.cancel()
        shown.join()
        bar.stop()
