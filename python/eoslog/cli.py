"""The eoslog command line: `eoslog demo`, `eoslog dump-log FILE`, `eoslog verify PATH`,
`eoslog repair FILE --truncate-at POSITION`.

Exit status: 0 done (verify: every batch valid); 1 the command ran and found damage (verify,
dump-log) or refused to change anything (repair: a live directory, or a position that is not
a validated batch boundary); 2 it could not run on what it was given (a missing path, not a
segment file, bad arguments). Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from eoslog import demo, tools
from eoslog.errors import KafkaException, NotASegmentFileError
from eoslog.log.repair import repair_truncate

# The status a process killed by SIGPIPE reports through a shell (128 + 13), which is what
# `eoslog dump-log FILE | head` would give had Python not turned the signal into an error.
_BROKEN_PIPE_STATUS = 128 + 13


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eoslog", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    demo_parser = commands.add_parser(
        "demo",
        help="the exactly-once pipeline under kill -9, then batches written, read back, checked",
    )
    demo_parser.add_argument("--dir", help="where to write (default: a new temporary directory)")
    demo_parser.add_argument("--records", type=int, default=200_000, help="codec demo records")
    demo_parser.add_argument(
        "--pipeline-records", type=int, default=20_000, help="input records of the pipeline"
    )
    demo_parser.add_argument("--kills", type=int, default=3, help="SIGKILLs of the copier")

    dump = commands.add_parser("dump-log", help="print the batches and records of a .log file")
    dump.add_argument("file")
    dump.add_argument("--records", action="store_true", help="print every record too")

    verify = commands.add_parser(
        "verify",
        help="check framing, CRC, offset continuity and records of a segment .log, of every "
        "segment of a partition directory or of a whole log directory; every problem is "
        "reported with its byte position (exit status 1 if any)",
    )
    verify.add_argument("path", help="a segment's .log, a partition or a log directory")

    repair = commands.add_parser(
        "repair",
        help="cut a damaged segment at a validated batch boundary and drop the later "
        "segments; the owner must be stopped (a live directory is refused with its pid)",
    )
    repair.add_argument("file", help="the damaged segment's .log file")
    repair.add_argument("--truncate-at", type=int, required=True, metavar="POSITION")

    args = parser.parse_args(argv)
    try:
        return _run(parser, args)
    except BrokenPipeError:
        # The reader of our output went away (`eoslog dump-log FILE | head`): stop quietly.
        # Point stdout at /dev/null so the flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _BROKEN_PIPE_STATUS
    except KafkaException as error:
        status = 2 if isinstance(error, NotASegmentFileError) else 1
        print(f"eoslog {args.command}: {type(error).__name__}: {error}", file=sys.stderr)
        return status
    except OSError as error:
        where = f": {error.filename}" if error.filename else ""
        print(f"eoslog {args.command}: {error.strerror or error}{where}", file=sys.stderr)
        return 2


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command == "demo":
        return demo.run(args.dir, args.records, args.pipeline_records, args.kills)
    if args.command == "dump-log":
        return tools.dump_log(args.file, print_records=args.records)
    if args.command == "verify":
        return tools.verify(args.path)
    if args.command == "repair":
        tools.check_segment_file(args.file)  # before any open: opening a FIFO blocks
        discarded = repair_truncate(args.file, args.truncate_at)
        print(f"cut {args.file} at byte {args.truncate_at}; {discarded} bytes discarded")
        return 0
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
