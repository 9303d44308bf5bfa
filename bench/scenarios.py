"""The scenario tables, one per area, as data: what each bench script and the pytest-benchmark
layer (test_bench.py) measure, at which sizes, and against which docs/bench.md targets.

An area's `Area` gives its command line (default rounds, sizes at full and --quick scale,
paths); its targets are `harness.Target` rows (a bound and a unit, and for a ratio the two
contenders it compares). The timed bodies are in contenders_<area>.py, the data in workload.py,
the prose in prose.py.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from eoslog.record.compression import CODEC_NAMES
from harness import Area, Size, Target
from workload import COMPRESSION_NONE, MIB

# --- codec (write_results.py, test_bench.py) ----------------------------------------------------

# input kinds
CHUNKS = "chunks"  # Workload.chunks (or its slow prefix): records to encode
SEGMENT = "segment"  # the eoslog-built segment (or its slow prefix): bytes to decode
BATCHES = "batches"  # eoslog-built client batches (base offset 0): bytes to validate


# Every codec by name (Kafka's compression.type values), and the names by codec.
CODECS = {name: codec for name, codec in CODEC_NAMES.items() if codec != COMPRESSION_NONE}
COMPRESSION_NAMES = {codec: name for name, codec in CODEC_NAMES.items()}


@dataclass(frozen=True)
class Path:
    key: str
    title: str
    compression: int
    input_kind: str


PATHS = {
    p.key: p
    for p in (
        Path("encode-none", "Batch encode, uncompressed", COMPRESSION_NONE, CHUNKS),
        *(Path(f"encode-{name}", f"Batch encode, {name}", c, CHUNKS) for name, c in CODECS.items()),
        Path("decode", "Decode, uncompressed segment", COMPRESSION_NONE, SEGMENT),
        *(
            Path(f"decode-{name}", f"Decode to Arrow, {name} segment", c, SEGMENT)
            for name, c in CODECS.items()
        ),
        Path("validate", "Validate (append-time check) of every batch", COMPRESSION_NONE, BATCHES),
    )
}

TABLES = {
    "encode-none": "Batch encode, uncompressed (records/s)",
    **{f"encode-{name}": f"Batch encode, {name} (records/s)" for name in CODECS},
    "decode-arrow": "Decode to Arrow (Spark schema), uncompressed segment (records/s)",
    "decode-records": "Per-record decode, uncompressed segment (records/s)",
    **{f"decode-{name}": f"Decode to Arrow, {name} segment (records/s)" for name in CODECS},
    "validate": "Validate every batch (records/s)",
}


def _codec_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--key-bytes", type=int, default=0, choices=(0, 8))


CODEC = Area(
    "codec",
    rounds=7,
    sizes=(Size("records", 1_000_000, 100_000, "records in the workload"),),
    paths=tuple(PATHS),
    options=_codec_options,
)

# docs/bench.md "Targets" (ratios of medians). Encode targets are stated for the batch builder,
# whose like-for-like peer API is the per-record append; append_values is shown against the
# same numbers. Every codec is a variant of the standard workload; the targets hold for lz4,
# whose codec costs little beside the record work. For gzip, snappy and zstd both sides call
# a reference library on the same bytes and the tables are reported without a target.
TARGETS: list[Target] = [
    Target(path, f"{ours} ÷ {peer}", ratio, ours=ours, peer=peer)
    for path, ours, peer, ratio in (
        *(
            (path, ours, peer, ratio)
            for path in ("encode-none", "encode-lz4")
            for ours in ("eoslog append", "eoslog append_values")
            for peer, ratio in (("aiokafka", 1.5), ("kafka-python", 10.0))
        ),
        *(
            (path, "eoslog to_arrow", peer, ratio)
            for path in ("decode", "decode-lz4")
            for peer, ratio in (("aiokafka to_arrow", 4.0), ("aiokafka records", 2.0))
        ),
    )
]


# --- the partition log (log_bench.py, test_bench.py) --------------------------------------------

LOG_READ_BATCH_RECORDS = 1_000
LOG_READ_SEGMENT_BYTES = 256 * MIB
LOG_PATHS = ("append", "read", "recovery", "open")

# docs/bench.md "Targets", as data: the figures are filled in with the run's sizes.
LOG_APPEND_TARGETS = [
    Target(
        "append",
        f"append_batch{suffix} ÷ raw os.write{suffix}",
        0.60,
        "%",
        ours=f"eoslog append_batch{suffix}",
        peer=f"raw os.write{suffix}",
    )
    for suffix in ("", " + fsync")
]
LOG_READ_TARGET = Target("random-offset read", "p99 of `log.read` ({label})", 20.0, "µs", "≤")
LOG_RECOVERY_TARGET = Target(
    "recovery", "GB/s of segment scanned by open + close (page cache warm)", 1.0, "GB/s"
)
LOG_OPEN_TARGET = Target("clean open", "`eoslog.open` of {segments:,} segments", 200.0, "ms", "<")


def _log_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--read-variant-batch-records",
        type=int,
        default=500,
        help="also read a partition of the same records in batches this size (0: skip)",
    )


def _log_validate(args: argparse.Namespace) -> str | None:
    variant = args.read_variant_batch_records
    if args.read_records % LOG_READ_BATCH_RECORDS or (variant and args.read_records % variant):
        return "--read-records must be a multiple of the batch sizes"
    return None


LOG = Area(
    "log",
    rounds=5,
    sizes=(
        Size("append-mib", 256, 64, "1 MiB batches appended per run"),
        Size("read-records", 10_000_000, 1_000_000, "records in the read partition"),
        Size("read-samples", 100_000, 20_000, "random offsets per contender per round"),
        Size("read-round-seconds", 6.0, 2.0, "time budget of one contender's round of reads"),
        Size("segments", 1_000, 1_000, "segments of the clean-open partition"),
    ),
    paths=LOG_PATHS,
    options=_log_options,
    validate=_log_validate,
)


# --- producer (producer_bench.py) -------------------------------------------------------------

CONFLUENT_IDEMPOTENT = "confluent-kafka idempotent (mock)"
CONFLUENT_LAYER = "eoslog.confluent produce() none"
PRODUCER_CONTENDERS = (
    "eoslog produce() none",
    CONFLUENT_LAYER,
    "eoslog produce() commit",
    "eoslog produce_batch() none",
    "eoslog produce_batch() commit",
    CONFLUENT_IDEMPOTENT,
    "SQLite WAL NORMAL",
    "SQLite WAL FULL",
)
PRODUCER = Area(
    "producer",
    rounds=3,
    sizes=(Size("records", 1_000_000, 200_000, "records produced per run"),),
    paths=PRODUCER_CONTENDERS,
)
PRODUCER_TARGETS = [
    Target(
        "eoslog.confluent.Producer (the drop-in, issue 16)",
        "÷ eoslog produce() none",
        0.95,
        ours=CONFLUENT_LAYER,
        peer="eoslog produce() none",
    ),
    Target(
        "produce() per record (idempotent; docs/bench.md states it transactional)",
        f"÷ {CONFLUENT_IDEMPOTENT}",
        2.5,
        ours="eoslog produce() none",
        peer=CONFLUENT_IDEMPOTENT,
    ),
    Target(
        "produce() per record",
        "÷ SQLite WAL NORMAL",
        3.0,
        ours="eoslog produce() none",
        peer="SQLite WAL NORMAL",
    ),
    Target(
        "produce_batch()",
        f"÷ {CONFLUENT_IDEMPOTENT}",
        10.0,
        ours="eoslog produce_batch() none",
        peer=CONFLUENT_IDEMPOTENT,
    ),
    *(
        Target(
            f"{kind} durability commit",
            'of the "none" rate',
            0.80,
            "%",
            ours=f"eoslog {kind} commit",
            peer=f"eoslog {kind} none",
        )
        for kind in ("produce()", "produce_batch()")
    ),
]


# --- consumer (consumer_bench.py) -------------------------------------------------------------

CONFLUENT_CONSUME = "eoslog.confluent consume()"
CONFLUENT_POLL = "eoslog.confluent poll()"
CONSUMER_CONTENDERS = (
    "floor",
    "floor, C loop",
    "consume()",
    CONFLUENT_CONSUME,
    "poll()",
    CONFLUENT_POLL,
    "consume() + value()",
    "consume_arrow()",
    "SQLite scan",
    "memcpy",
)
CONSUMER = Area(
    "consumer",
    rounds=5,
    sizes=(
        Size("records", 1_000_000, 200_000, "records written and read back"),
        Size("latency-samples", 2_000, 300, "hand-offs per contender per wake-up round"),
    ),
    paths=("read", "wakeup"),
)
WAKEUP_QUEUE = "queue.Queue hand-off"
WAKEUP_POLL = "produce() + flush() → poll()"
WAKEUP_ARROW = "produce() + flush() → consume_arrow()"
WAKEUP_COMMITTED = "commit_transaction() → poll(), read_committed"
WAKEUP_CONTENDERS = (WAKEUP_QUEUE, WAKEUP_POLL, WAKEUP_ARROW, WAKEUP_COMMITTED)
WAKEUP_TARGET = Target(
    "produce → poll in another thread of the process",
    "p99 ÷ queue.Queue hand-off p99 (same round)",
    2.0,
    "×",
    "≤",
)
CONSUMER_SEGMENT_BYTES = 32 * MIB
CONSUMER_TARGETS = [
    Target("consume()", "÷ floor", 0.70, "%", ours="consume()", peer="floor"),
    Target(
        "eoslog.confluent.Consumer consume() (the drop-in, issue 16)",
        "÷ eoslog consume()",
        0.95,
        ours=CONFLUENT_CONSUME,
        peer="consume()",
    ),
    Target(
        "eoslog.confluent.Consumer poll() (the drop-in, issue 16)",
        "÷ eoslog poll()",
        0.95,
        ours=CONFLUENT_POLL,
        peer="poll()",
    ),
    Target("consume_arrow()", "÷ SQLite scan", 3.0, ours="consume_arrow()", peer="SQLite scan"),
    Target("consume_arrow()", "payload ÷ memcpy", 0.50, "%", ours="consume_arrow()", peer="memcpy"),
]
# The ratios table of RESULTS-consumer.md: (row, ours, peer, unit).
CONSUMER_RATIOS = [
    ("consume() ÷ floor", "consume()", "floor", "%"),
    ("consume() ÷ floor, C loop", "consume()", "floor, C loop", "%"),
    ("eoslog.confluent consume() ÷ consume()", CONFLUENT_CONSUME, "consume()", "×"),
    ("eoslog.confluent poll() ÷ poll()", CONFLUENT_POLL, "poll()", "×"),
    ("poll() ÷ floor", "poll()", "floor", "%"),
    ("consume() + value() ÷ floor", "consume() + value()", "floor", "%"),
    ("consume_arrow() ÷ SQLite scan", "consume_arrow()", "SQLite scan", "×"),
    ("consume_arrow() payload bandwidth ÷ memcpy", "consume_arrow()", "memcpy", "%"),
]


# --- transactions (txn_bench.py) --------------------------------------------------------------

TXN_PRODUCE_NONE = "eoslog produce() txn none"
TXN_PRODUCE_COMMIT = "eoslog produce() txn commit"
CONFLUENT_TRANSACTIONAL = "confluent-kafka transactional (mock)"
TXN_SQLITE = "SQLite WAL NORMAL"
TXN_PRODUCE_BATCH = "eoslog produce_batch() txn none"
TXN_PRODUCE_CONTENDERS = (
    TXN_PRODUCE_NONE,
    TXN_PRODUCE_COMMIT,
    TXN_PRODUCE_BATCH,
    CONFLUENT_TRANSACTIONAL,
    TXN_SQLITE,
)
TXN_LATENCY_NONE = 'eoslog txn "none"'
TXN_LATENCY_COMMIT = 'eoslog txn "commit"'
TXN_LATENCY_FSYNC = "4 KiB write + fdatasync"
TXN_LATENCY_SQLITE_NORMAL = "SQLite WAL NORMAL, one row"
TXN_LATENCY_SQLITE_FULL = "SQLite WAL FULL, one row"
TXN_LATENCY_FLUSH = 'eoslog produce() + flush(), idempotent, "none"'
TXN_LATENCY_CONTENDERS = (
    TXN_LATENCY_NONE,
    TXN_LATENCY_SQLITE_NORMAL,
    TXN_LATENCY_FLUSH,
    TXN_LATENCY_COMMIT,
    TXN_LATENCY_SQLITE_FULL,
    TXN_LATENCY_FSYNC,
)
# Latency under load (a second thread producing 1,000-record batches meanwhile) and at fixed
# rates (durability, transactions/s), measured from each transaction's scheduled start.
TXN_LATENCY_LOADED = 'eoslog txn "none", batches produced meanwhile'
TXN_LATENCY_RATES = (("none", 1_000), ("none", 5_000), ("none", 10_000), ("commit", 1_000))
TXN_LATENCY_AT_RATE = {
    (durability, rate): f'eoslog txn "{durability}" at {rate:,}/s'
    for durability, rate in TXN_LATENCY_RATES
}
TXN_LOAD_CONTENDERS = (TXN_LATENCY_LOADED, *TXN_LATENCY_AT_RATE.values())
# The "commit" bound's allowance beside its two fsyncs (docs/bench.md: 2 × (4 KiB write +
# fdatasync p99) + 50 µs).
TXN_LATENCY_COMMIT_SLACK_US = 50.0
TXN_READ_CONTENDERS = ("floor", "consume()", "consume_arrow()", "SQLite scan", "memcpy")
TXN_ABORT_EVERY = 3  # every third transaction aborted (docs/bench.md: 1/3)
TXN_SEGMENT_BYTES = 32 * MIB


def _txn_validate(args: argparse.Namespace) -> str | None:
    least = 1_000 * TXN_ABORT_EVERY
    return f"--records must be at least {least}" if args.records < least else None


TXN = Area(
    "txn",
    rounds=3,
    sizes=(
        Size("records", 1_000_000, 200_000, "records per produce run and in the read log"),
        Size("latency-samples", 2_000, 500, "calls per contender per latency round"),
    ),
    paths=("produce", "latency", "read"),
    validate=_txn_validate,
)
_TXN_PRODUCE = 'produce() per record, transactional, "none"'
TXN_PRODUCE_TARGETS = [
    Target(
        _TXN_PRODUCE,
        f"÷ {CONFLUENT_TRANSACTIONAL}",
        2.5,
        ours=TXN_PRODUCE_NONE,
        peer=CONFLUENT_TRANSACTIONAL,
    ),
    Target(_TXN_PRODUCE, f"÷ {TXN_SQLITE}", 3.0, ours=TXN_PRODUCE_NONE, peer=TXN_SQLITE),
    Target(
        'produce() per record, transactional, "commit"',
        'of the "none" rate',
        0.80,
        "%",
        ours=TXN_PRODUCE_COMMIT,
        peer=TXN_PRODUCE_NONE,
    ),
    Target(
        "transactional produce_batch(), 1,000-record transactions",
        f"÷ {CONFLUENT_TRANSACTIONAL}",
        10.0,
        ours=TXN_PRODUCE_BATCH,
        peer=CONFLUENT_TRANSACTIONAL,
    ),
]
# docs/bench.md's latency rows, each the per-round ratio of p99s measured in the same round.
_TXN_NONE = 'single-record transaction, "none"'
_TXN_COMMIT = 'single-record transaction, "commit"'
TXN_LATENCY_TARGETS = [
    Target(_TXN_NONE, f"p99 ÷ {TXN_LATENCY_SQLITE_NORMAL} p99", 1.5, "×", "≤"),
    Target(_TXN_NONE, f"p99 ÷ {TXN_LATENCY_SQLITE_NORMAL} p99 (stretch)", 1.0, "×", "≤"),
    Target(_TXN_COMMIT, "p99 ÷ (2 × fsync p99 + 50 µs)", 1.0, "×", "≤"),
    Target(_TXN_COMMIT, f"p99 ÷ {TXN_LATENCY_SQLITE_FULL} p99 (stretch)", 1.0, "×", "≤"),
]
TXN_FLUSH_TARGET = Target(
    'idempotent produce() + flush(), "none"',
    f"p99 ÷ {TXN_LATENCY_SQLITE_NORMAL} p99",
    1.0,
    "×",
    "≤",
)
TXN_CALLS_TARGET = Target(_TXN_NONE, "Python function calls (cProfile)", 100, "calls", "≤")
TXN_CALLS_COUNT = 500  # transactions counted per round
_TXN_ABORTED = "aborted data present"
TXN_READ_TARGETS = [
    Target(
        f"read_committed consume_arrow(), {_TXN_ABORTED}",
        "÷ SQLite scan",
        3.0,
        ours="consume_arrow()",
        peer="SQLite scan",
    ),
    Target(
        f"read_committed consume_arrow(), {_TXN_ABORTED}",
        "payload ÷ memcpy",
        0.50,
        "%",
        ours="consume_arrow()",
        peer="memcpy",
    ),
    Target(
        f"read_committed consume(), {_TXN_ABORTED}",
        "÷ floor (docs/bench.md's consume() row)",
        0.70,
        "%",
        ours="consume()",
        peer="floor",
    ),
]
TXN_READ_RATIOS = [
    ("consume_arrow() ÷ SQLite scan", "consume_arrow()", "SQLite scan", "×"),
    ("consume_arrow() payload bandwidth ÷ memcpy", "consume_arrow()", "memcpy", "%"),
    ("consume() ÷ SQLite scan", "consume()", "SQLite scan", "×"),
    ("consume() ÷ floor", "consume()", "floor", "%"),
]


# --- Spark scans (spark_bench.py) -------------------------------------------------------------

SPARK_EOSLOG = "eoslog"
SPARK_AIOKAFKA = "aiokafka segments"
SPARK_PREBUILT = "prebuilt Arrow (ceiling)"
SPARK_SOURCES = (SPARK_EOSLOG, SPARK_AIOKAFKA, SPARK_PREBUILT)
SPARK_QUERIES = ("count()", "sum(length(value))")
SPARK_ABORT_EVERY = 3
SPARK_SEGMENT_BYTES = 8 * MIB
SPARK_PLAN_REPEATS = 5


# Segments of the planning bench's one partition: larger than what it writes, so everything is
# in the active segment.
SPARK_ACTIVE_SEGMENT_BYTES = 1 << 30


def _spark_validate(args: argparse.Namespace) -> str | None:
    least = 1_000 * SPARK_ABORT_EVERY * args.partitions
    if args.records < least or 0 < args.scale_records < least:
        return f"--records and --scale-records (unless 0) must be at least {least}"
    if args.scale_rounds < 3:
        return "--scale-rounds must be at least 3"
    return None


SPARK = Area(
    "spark",
    rounds=7,
    sizes=(
        Size("records", 1_000_000, 200_000, "records written, a third of them aborted"),
        Size("partitions", 8, 4, "partitions of the topic (transaction i to i mod P)"),
        Size("scale-records", 10_000_000, 400_000, "the second, larger size (0: none)"),
        Size("scale-rounds", 3, 3, "timed rounds at --scale-records"),
        Size("plan-records", 2_000_000, 100_000, "records of the planning bench's partition"),
    ),
    validate=_spark_validate,
)


def spark_name(query: str, source: str) -> str:
    """A Spark contender: one query over one source."""
    return f"{query} {source}"


def spark_targets(path: str) -> list[Target]:
    """docs/bench.md's Spark targets for each query, under the row `path`."""
    return [
        target
        for query in SPARK_QUERIES
        for target in (
            Target(
                f"{path}: {query}",
                f"÷ {SPARK_AIOKAFKA}",
                2.0,
                ours=spark_name(query, SPARK_EOSLOG),
                peer=spark_name(query, SPARK_AIOKAFKA),
            ),
            Target(
                f"{path}: {query}",
                f"of the {SPARK_PREBUILT}",
                0.80,
                "%",
                ours=spark_name(query, SPARK_EOSLOG),
                peer=spark_name(query, SPARK_PREBUILT),
            ),
        )
    ]


SPARK_TARGETS = spark_targets("Spark scan, read_committed, 2 cores")
# The object-storage contenders (spark_scale.py) and docs/bench.md's target for them.
SPARK_LOCAL = "local disk"
SPARK_S3 = "S3 (SeaweedFS, loopback)"
SPARK_STORAGE_READERS = ("eoslog.scan", "Spark count()")


def storage_name(reader: str, where: str) -> str:
    return f"{reader}, {where}"


def storage_targets(path: str) -> list[Target]:
    return [
        Target(
            f"{path}: object storage",
            f"{reader} from {SPARK_S3} ÷ {SPARK_LOCAL}",
            0.50,
            "%",
            ours=storage_name(reader, SPARK_S3),
            peer=storage_name(reader, SPARK_LOCAL),
        )
        for reader in SPARK_STORAGE_READERS
    ]


# --- what the hardening checks cost (checks_bench.py) ---------------------------------------

CHECKS_BUILDS = ("this build", "baseline")
CHECKS_KINDS = ("open", "consume", "consume_arrow")


def _checks_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--baseline-python",
        required=True,
        help="the interpreter of a venv with the older eoslog installed",
    )


CHECKS = Area(
    "checks",
    rounds=5,
    sizes=(
        Size("records", 1_000_000, 200_000, "records read per run"),
        Size("segments", 1_000, 200, "segments of the clean-open partition"),
    ),
    options=_checks_options,
)
# Issue 12's bounds, not rows of docs/bench.md's table: summary.py does not gather them.
CHECKS_TARGETS_HEADING = "## Targets (issue 12, not gathered into RESULTS.md)"
CHECKS_OPEN_TARGET = Target("clean open", "`eoslog.open` (this build)", 200.0, "ms", "<")
CHECKS_READ_TARGETS = [
    Target(
        f"{kind}()",
        "this build ÷ baseline speed (the checks cost ≤ 3%)",
        0.97,
        "%",
        ours=f"{kind} this build",
        peer=f"{kind} baseline",
    )
    for kind in ("consume", "consume_arrow")
]


# --- eoslog serve through librdkafka (serve_bench.py) -----------------------------------------


def _serve_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--durability",
        default="commit",
        choices=("commit", "always", "none"),
        help="the durability of the eoslog serve child (default commit)",
    )


SERVE = Area(
    "serve",
    rounds=3,
    sizes=(
        Size("records", 200_000, 20_000, "records per produce run"),
        Size("latency-samples", 500, 100, "single-record transactions per latency round"),
        Size("fetch-records", 25_000, 10_000, "records of the fetched topic (read 8 times a run)"),
        Size("requests", 2_000, 300, "requests per Metadata round and per profiled kind"),
    ),
    paths=("produce", "latency", "fetch", "protocol"),
    options=_serve_options,
)
SERVE_IDEMPOTENT = "eoslog serve, idempotent"
SERVE_TRANSACTIONAL = "eoslog serve, transactional"
MOCK_IDEMPOTENT = "mock cluster, idempotent"
MOCK_TRANSACTIONAL = "mock cluster, transactional"
SERVE_FETCH_PASSES = 8  # reads of the fetched topic per consumer run
SERVE_PRODUCE_TARGETS = [
    Target(
        "`eoslog serve` through librdkafka, idempotent produce",
        "÷ librdkafka's mock cluster",
        1.0,
        ours=SERVE_IDEMPOTENT,
        peer=MOCK_IDEMPOTENT,
    ),
    Target(
        "`eoslog serve` through librdkafka, transactional produce (commit every 1,000)",
        "÷ librdkafka's mock cluster",
        1.0,
        ours=SERVE_TRANSACTIONAL,
        peer=MOCK_TRANSACTIONAL,
    ),
]

# The log cleaner (bench/cleaner_bench.py, issue 14): no docs/bench.md target yet.
CLEANER = Area(
    "cleaner",
    rounds=3,
    sizes=(
        Size("records", 200_000, 20_000, "records in the compacted partition before a round"),
        Size("keys", 20_000, 2_000, "distinct keys they are spread over"),
        Size("appends", 20_000, 2_000, "one-record appends timed per phase"),
    ),
)
