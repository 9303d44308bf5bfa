"""Open time against history length (issue 14, item 5's first half): how long eoslog.open()
takes on a directory after N past transactions, cleanly closed and after a kill -9, and the
on-disk size of the internal topics; writes bench/RESULTS-open.md and bench/RESULTS-open.png.

    python bench/open_bench.py [--points 1000,10000,100000,1000000] [--rounds 3]
                               [--ids 1000] [--groups 100] [--clean-first]
                               [--tmp DIR] [--keep] [--output PATH] [--quick] [--profile]

The history: `--ids` transactional ids (producers) and `--groups` consumer groups; transaction
i, by id i mod ids, produces one 100-byte record to partition i mod 10 of topic "data" and
sends one offset to group i mod groups in the transaction (AddOffsetsToTxn + TxnOffsetCommit),
then commits: per transaction, four `__transaction_state` records (Ongoing twice, PrepareCommit,
CompleteCommit), one offset record and one marker in `__consumer_offsets`, one record and one
marker in "data". It is generated fast by driving the real Producer API with durability
"none" in a child process (no fsync; the page cache holds what the opens read), which exits
with os._exit after the last commit, as a kill -9 would leave the directory. That copy is kept
for the unclean opens (a fresh copy per round, as the first open repairs it); the clean image
is that directory opened once and closed.

Timed: eoslog.open() on the clean image (durability "commit", background thread off),
`--rounds` times, and on a fresh copy of the unclean image each round; median and spread. The
target (docs/bench.md): a clean open after 1,000,000 past transactions within 2x the open
after 1,000. It holds only once `__transaction_state` and `__consumer_offsets` are compacted
(the log cleaner): the report states each internal topic's cleanup.policy as the broker reads
it, and `--clean-first` runs the broker's maintenance pass on the history before the clean
close (with the cleaner, that compacts the internal topics), so the same script measures the
open after compaction once it lands.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path as FilePath

sys.path.insert(0, str(FilePath(__file__).resolve().parent))

import eoslog
import report
from harness import table

PACKAGES = ("eoslog", "matplotlib")
POINTS_DEFAULT = (1_000, 10_000, 100_000, 1_000_000)
POINTS_QUICK = (1_000, 10_000)
DATA_TOPIC = "data"
DATA_PARTITIONS = 10
VALUE = b"v" * 100
INTERNAL = ("__transaction_state", "__consumer_offsets")
STARTED = time.perf_counter()
LOAD_START = report.load()
TARGET_RATIO_MAX = 2.0  # docs/bench.md: open after 1M past transactions <= 2x the open after 1k

GENERATE = """
import os, sys, time
import eoslog
from eoslog import ConsumerGroupMetadata, TopicPartition
path, count, ids, groups, partitions, clean_first = sys.argv[1:7]
count, ids, groups, partitions = int(count), int(ids), int(groups), int(partitions)
broker = eoslog.open(path, durability="none", background=False)
broker.create_topic("data", partitions)
producers = []
started = time.perf_counter()
for number in range(count):
    if number < ids:
        producer = broker.producer({"transactional.id": f"id-{number}", "linger.ms": 0})
        producer.init_transactions()
        producers.append(producer)
    producer = producers[number % ids]
    partition = number % partitions
    producer.begin_transaction()
    producer.produce("data", b"v" * 100, partition=partition)
    producer.send_offsets_to_transaction(
        [TopicPartition("data", partition, number + 1)],
        ConsumerGroupMetadata(f"group-{number % groups}"),
    )
    producer.commit_transaction()
if clean_first == "1":
    broker.run_maintenance()
print(f"{time.perf_counter() - started:.3f}", flush=True)
os._exit(0)  # as a kill -9 leaves the directory: no close, no clean-shutdown marker
"""


def generate(path: str, count: int, args: argparse.Namespace) -> float:
    """Write the history into `path` in a child process; returns its seconds."""
    command = [
        sys.executable,
        "-c",
        GENERATE,
        path,
        str(count),
        str(args.ids),
        str(args.groups),
        str(DATA_PARTITIONS),
        "1" if args.clean_first else "0",
    ]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return float(done.stdout.split()[-1])


def timed_open(path: str) -> float:
    started = time.perf_counter()
    broker = eoslog.open(path, background=False)
    seconds = time.perf_counter() - started
    broker.close()
    return seconds


def directory_bytes(path: str, prefix: str) -> int:
    total = 0
    for entry in os.scandir(path):
        if entry.is_dir() and entry.name.startswith(prefix + "-"):
            total += sum(f.stat().st_size for f in os.scandir(entry.path) if f.is_file())
    return total


def topic_policy(broker: eoslog.Broker, topic: str) -> str:
    """The topic's cleanup.policy (Kafka's default, delete, when unset) and retention."""
    config = broker.list_topics()[topic].config
    policy = config.get("cleanup.policy", "delete")
    return (
        f"{policy} (retention.ms {config.get('retention.ms', 'default')}, "
        f"retention.bytes {config.get('retention.bytes', 'default')})"
    )


def measure_point(count: int, args: argparse.Namespace, root: str) -> dict[str, object]:
    unclean = os.path.join(root, f"unclean-{count}")
    clean = os.path.join(root, f"clean-{count}")
    print(f"{count:,} transactions: generating ...", flush=True)
    generated_s = generate(unclean, count, args)
    shutil.copytree(unclean, clean)
    timed_open(clean)  # the clean image: opened once (recovering) and closed
    with eoslog.open(clean, background=False) as broker:
        policies = {name: topic_policy(broker, name) for name in INTERNAL}
    clean_s = [timed_open(clean) for _ in range(args.rounds)]
    unclean_s = []
    for number in range(args.rounds):
        work = os.path.join(root, f"unclean-{count}-{number}")
        shutil.copytree(unclean, work)
        unclean_s.append(timed_open(work))
        shutil.rmtree(work)
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(lambda: eoslog.open(clean, background=False).close())
        pstats.Stats(profile).sort_stats("tottime").print_stats(20)
    sizes = {name: directory_bytes(clean, name) for name in INTERNAL}
    if not args.keep:
        shutil.rmtree(unclean)
        shutil.rmtree(clean)
    point = {
        "count": count,
        "generated_s": generated_s,
        "clean_s": clean_s,
        "unclean_s": unclean_s,
        "sizes": sizes,
        "policies": policies,
    }
    print(
        f"  generated in {generated_s:.1f} s; clean open {statistics.median(clean_s):.3f} s, "
        f"unclean {statistics.median(unclean_s):.3f} s",
        flush=True,
    )
    return point


def seconds_cell(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def render(points: list[dict[str, object]], args: argparse.Namespace, plot: str) -> str:
    rows = []
    for point in points:
        count = int(point["count"])  # type: ignore[call-overload]
        clean = list(point["clean_s"])  # type: ignore[call-overload]
        unclean = list(point["unclean_s"])  # type: ignore[call-overload]
        sizes = dict(point["sizes"])  # type: ignore[call-overload]
        rows.append(
            [
                f"{count:,}",
                seconds_cell(clean),
                f"{statistics.median(clean) / count * 1e6:.1f}",
                seconds_cell(unclean),
                f"{sizes['__transaction_state'] / 2**20:.1f}",
                f"{sizes['__consumer_offsets'] / 2**20:.1f}",
                f"{count / float(point['generated_s']):,.0f}",  # type: ignore[arg-type]
            ]
        )
    first_s: list[float] = list(points[0]["clean_s"])  # type: ignore[call-overload]
    last_s: list[float] = list(points[-1]["clean_s"])  # type: ignore[call-overload]
    ratio = statistics.median(last_s) / statistics.median(first_s)
    spread = f"{min(last_s) / max(first_s):.1f}× – {max(last_s) / min(first_s):.1f}×"
    verdict = "met" if ratio <= TARGET_RATIO_MAX else "not met"
    first_count, last_count = int(points[0]["count"]), int(points[-1]["count"])  # type: ignore[call-overload]
    policies = points[-1]["policies"]
    lines = [
        "# Open time against history length",
        "",
        f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; wall time "
        f"{time.perf_counter() - STARTED:.0f} s  ",
        f"Command: `{report.command_line(sys.argv[1:])}` (issue 14, item 5's first half); the "
        "history, the method and the flags are in bench/open_bench.py's docstring. "
        f"{args.ids:,} transactional ids, {args.groups} groups, each transaction one record "
        f"and one offset commit; {args.rounds} rounds per open, median (min-max).",
        "",
        *report.machine_lines(PACKAGES),
        f"- load average (1, 5, 15 min) at the start: {LOAD_START}; at the end: {report.load()} "
        "(the machine is shared: opens are timed in rounds, and the ratio is per run)",
        "- internal topics' cleanup.policy as the broker reads it: "
        + "; ".join(f"`{name}` {policy}" for name, policy in policies.items())  # type: ignore[attr-defined]
        + (
            "; maintenance run before the clean close (`--clean-first`)" if args.clean_first else ""
        ),
        "",
        *table(
            [
                "past transactions",
                "clean open s",
                "µs per past txn",
                "unclean open s",
                "`__transaction_state` MiB",
                "`__consumer_offsets` MiB",
                "generated txn/s",
            ],
            rows,
        ),
        "",
        report.TARGETS_HEADING,
        "",
        "| path | figure | target | measured (median; min – max) | status |",
        "|---|---|---|---|---|",
        f"| open | clean open after {last_count:,} ÷ after {first_count:,} past transactions | "
        f"≤ {TARGET_RATIO_MAX:.0f}× | {ratio:.1f}× ({spread}) | {verdict} |",
        "",
        plot,
        "",
    ]
    return "\n".join(lines)


def draw(points: list[dict[str, object]], path: str) -> str:
    """The plot as a Markdown line: an image, or why there is none."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "No plot: matplotlib is not installed."
    counts = [int(p["count"]) for p in points]  # type: ignore[call-overload]
    figure, axes = plt.subplots(figsize=(6, 4))
    for key, label in (("clean_s", "clean open"), ("unclean_s", "unclean open")):
        medians = [statistics.median(p[key]) for p in points]  # type: ignore[arg-type]
        axes.plot(counts, medians, marker="o", label=label)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("past transactions")
    axes.set_ylabel("eoslog.open() seconds (median)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return f"![open time against history length]({os.path.basename(path)})"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", default=None, help="past transactions, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ids", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--clean-first", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--tmp", default=tempfile.gettempdir())
    here = FilePath(__file__).resolve().parent
    parser.add_argument("--output", default=str(here / "RESULTS-open.md"))
    args = parser.parse_args(argv)
    default = POINTS_QUICK if args.quick else POINTS_DEFAULT
    args.points = [int(p) for p in args.points.split(",")] if args.points else list(default)
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    root = tempfile.mkdtemp(prefix="eoslog-open-bench-", dir=args.tmp)
    try:
        points = [measure_point(count, args, root) for count in args.points]
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    plot = draw(points, str(FilePath(args.output).with_suffix(".png")))
    FilePath(args.output).write_text(render(points, args, plot))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
