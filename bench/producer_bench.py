"""Measure eoslog's idempotent Producer against its peers, in one run, and write
bench/RESULTS-producer.md.

    python bench/producer_bench.py [--records N] [--rounds R] [--paths ...] [--tmp DIR] [--quick]

The docs/bench.md standard workload (value 100 B of JSON-like text, key null, 1,000 records per
batch, one partition), produced by eoslog's `produce()` and `produce_batch()` (durability
"none" and "commit"), confluent-kafka's idempotent producer on librdkafka's mock cluster, and
SQLite in WAL mode (synchronous NORMAL and FULL); the contenders are in
contenders_producer.py, the scenario table (contenders, sizes, targets) in scenarios.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path as FilePath

sys.path.insert(0, str(FilePath(__file__).resolve().parent))

import harness
import prose
from contenders_producer import confluent_producer, eoslog_producer, sqlite_insert
from harness import median_spread, x
from report import Report, Section
from scenarios import CONFLUENT_IDEMPOTENT, CONFLUENT_LAYER, PRODUCER, PRODUCER_TARGETS
from workload import BATCH_RECORDS, VALUE_BYTES, make_values

PACKAGES = ("eoslog", "confluent-kafka", "numpy")


def scenario(root: str, values: list[bytes]) -> dict[str, harness.Contender]:
    """PRODUCER_CONTENDERS, each bound to its contender of contenders_producer.py."""
    return {
        c.name: c
        for c in (
            *(
                eoslog_producer(f"eoslog {kind} {durability}", root, values, durability, batch=b)
                for kind, b in (("produce()", False), ("produce_batch()", True))
                for durability in ("none", "commit")
            ),
            eoslog_producer(CONFLUENT_LAYER, root, values, "none", confluent_layer=True),
            confluent_producer(CONFLUENT_IDEMPOTENT, values, transactional=False),
            *(sqlite_insert(f"SQLite WAL {s}", root, values, s) for s in ("NORMAL", "FULL")),
        )
    }


def measure(args: argparse.Namespace, root: str) -> Report:
    values = make_values(args.records)
    table = scenario(root, values)
    runs = harness.alternate(
        [table[name] for name in args.paths], args.rounds, args.timer, label="produce"
    )
    rows = harness.rate_rows(runs, list(runs), args.records, harness.seconds3)
    ratios = [
        f"- {ours} ÷ {peer}: {median_spread(runs.speedup(ours, peer), x)}"
        for ours in runs
        if ours.startswith("eoslog")
        for peer in runs
        if not peer.startswith("eoslog")
    ]
    header = ["contender", "median records/s", "min – max", "median s"]
    targets = [t.of(runs) for t in PRODUCER_TARGETS]
    sections = [
        Section("Records per second", harness.table(header, rows), targets),
        Section("Ratios (eoslog ÷ peer, records/s)", ratios),
    ]
    method = prose.PRODUCER_METHOD.format(
        records=args.records,
        value_bytes=VALUE_BYTES,
        batch_records=BATCH_RECORDS,
        rounds=args.rounds,
        gc=args.gc,
    )
    return Report(prose.PRODUCER_TITLE, method, PACKAGES, sections)


if __name__ == "__main__":
    sys.exit(harness.main(PRODUCER, measure, __doc__ or ""))
