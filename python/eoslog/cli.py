"""The eoslog command line: `eoslog demo`, `eoslog dump-log FILE`, `eoslog verify FILE`,
`eoslog repair FILE --truncate-at POSITION`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from eoslog import demo, tools
from eoslog.log.recovery import repair_truncate


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

    verify = commands.add_parser("verify", help="check every batch of a .log file")
    verify.add_argument("file")

    repair = commands.add_parser(
        "repair",
        help="cut a damaged segment at a byte position and drop the later segments "
        "(only on a directory no process has open)",
    )
    repair.add_argument("file", help="the damaged segment's .log file")
    repair.add_argument("--truncate-at", type=int, required=True, metavar="POSITION")

    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo.run(args.dir, args.records, args.pipeline_records, args.kills)
    if args.command == "dump-log":
        return tools.dump_log(args.file, print_records=args.records)
    if args.command == "verify":
        return tools.verify_log(args.file)
    if args.command == "repair":
        discarded = repair_truncate(args.file, args.truncate_at)
        print(f"cut {args.file} at byte {args.truncate_at}; {discarded} bytes discarded")
        return 0
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
