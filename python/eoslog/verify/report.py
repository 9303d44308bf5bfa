"""What `eoslog verify` prints: one line per problem, as it is found, naming the file and the
byte (`FILE: error at byte N: what; how to repair it`), then a summary line per path. An
error is damage: something an open refuses, or that makes it lose, hide or misplace records,
and it makes the exit status 1. A warning is something the next open mends by itself (a torn
tail it cuts, a derived file it rebuilds or discards) or leaves alone, and changes nothing
about the exit status.

With `eoslog verify --json` the same problems and summaries are collected as objects instead
(COLLECTED) and printed as one JSON document at the end.

The repair sentences are here, so that every check words the same repair the same way.

Thread safety: a report is used by the one thread that runs the command.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from eoslog.progress import Advance, no_progress

# How derived files are mended, for the problems that name one. The owner never believes an
# offset- or time-index entry without checking it against the batch it names, so a wrong one
# costs a scan, never a wrong answer; an open after an unclean stop checks every entry, and a
# missing index is rebuilt at the next open.
INDEX_REPAIR = (
    "the owner checks each entry against the .log before using it and rebuilds the index "
    "when one is wrong; to rebuild it now, delete {path} while no process has the directory "
    "open: the next open rebuilds it from the log"
)
TXN_INDEX_REPAIR = "the next open finds it wrong and rebuilds it from the log"
SNAPSHOT_REPAIR = (
    "the next open discards it and rebuilds the producer state from an older snapshot or the log"
)


# Where problems and summaries go: printed as lines (None, the default), or collected as JSON
# objects into this list (`eoslog verify --json`). A context variable: one command per thread.
COLLECTED: ContextVar[list[dict[str, object]] | None] = ContextVar(
    "eoslog_verify_collected", default=None
)


def cut_command(log_path: str, position: int) -> str:
    """The command that cuts a segment's .log at a batch boundary (eoslog.log.repair)."""
    return f"eoslog repair {log_path} --truncate-at {position}"


@dataclass
class Report:
    """What a verification found so far; problems are printed as they are found."""

    batches: int = 0
    records: int = 0
    errors: int = 0
    warnings: int = 0
    # Called with the bytes of each piece walked: the progress bar's (eoslog.progress).
    advance: Advance = no_progress

    def problem(self, path: str, position: int, text: str, *, error: bool = True) -> None:
        severity = "error" if error else "warning"
        collected = COLLECTED.get()
        if collected is None:
            print(f"{path}: {severity} at byte {position}: {text}")
        else:
            collected.append({"file": path, "byte": position, "severity": severity, "text": text})
        if error:
            self.errors += 1
        else:
            self.warnings += 1

    def warning(self, path: str, position: int, text: str) -> None:
        self.problem(path, position, text, error=False)

    def summary(self, what: str, *, batches: bool = True) -> str:
        """The line ending a path's report; with `batches`, the batches and records walked
        (a derived file verified alone walks none)."""
        if self.errors:
            walked = f"{self.batches} valid batches, {self.records} records, " if batches else ""
            return f"{what}: {walked}{self.errors} problems found"
        warnings = f"; {self.warnings} warnings" if self.warnings else ""
        walked = f"{self.batches} batches, {self.records} records, " if batches else ""
        return f"{what}: {walked}all valid{warnings}"

    def finish(self, path: str, what: str, *, batches: bool = True) -> None:
        """Print the summary line of `path` (`what` heads it), or collect it as an object."""
        line = self.summary(what, batches=batches)
        collected = COLLECTED.get()
        if collected is None:
            print(line)
            return
        collected.append(
            {
                "path": path,
                "summary": line,
                "errors": self.errors,
                "warnings": self.warnings,
                "batches": self.batches if batches else None,
                "records": self.records if batches else None,
            }
        )

    def status(self) -> int:
        """The exit status: 1 when an error was found, else 0."""
        return 1 if self.errors else 0
