"""The eoslog command line: `eoslog demo`, `eoslog dump-log FILE`, `eoslog verify FILE`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from eoslog import demo, tools


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eoslog", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    demo_parser = commands.add_parser("demo", help="build, write, read back and check batches")
    demo_parser.add_argument("--dir", help="where to write (default: a new temporary directory)")
    demo_parser.add_argument("--records", type=int, default=200_000)

    dump = commands.add_parser("dump-log", help="print the batches and records of a .log file")
    dump.add_argument("file")
    dump.add_argument("--records", action="store_true", help="print every record too")

    verify = commands.add_parser("verify", help="check every batch of a .log file")
    verify.add_argument("file")

    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo.run(args.dir, args.records)
    if args.command == "dump-log":
        return tools.dump_log(args.file, print_records=args.records)
    if args.command == "verify":
        return tools.verify_log(args.file)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
