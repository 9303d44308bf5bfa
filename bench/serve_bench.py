"""`eoslog serve` against librdkafka's in-process mock cluster, through the same confluent-kafka
clients in one run (issue 18, item 6), written to bench/RESULTS-serve.md.

    python bench/serve_bench.py [--records N] [--latency-samples S] [--requests R] [--rounds R]
        [--paths produce,latency,fetch,protocol] [--durability commit|always|none] [--quick]

The server is a child process (`eoslog serve DIR --listen 127.0.0.1:0`), as a user runs it;
the mock cluster lives in the client's own process (`test.mock.num.brokers`), with no disk
and no fsync: the ceiling of the client, not a broker. Four sections, each alternating the
two round by round (contenders_serve.py has the bodies): idempotent and transactional
produce of the standard workload's 100 B values (commit every 1,000); single-record
transaction latency; a read_committed Consumer's fetch throughput and Metadata answered one
at a time; and the server side of Metadata and Produce requests profiled per thread inside an
in-process Broker.serve (µs per request in the protocol layer and in the engine).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path as FilePath
from typing import Any

sys.path.insert(0, str(FilePath(__file__).resolve().parent))

import contenders_serve
import eoslog
import harness
import prose
from contenders_producer import TXN_RECORDS, confluent_producer
from harness import median_spread, us, x
from report import Report, Section
from scenarios import (
    MOCK_IDEMPOTENT,
    MOCK_TRANSACTIONAL,
    SERVE,
    SERVE_FETCH_PASSES,
    SERVE_IDEMPOTENT,
    SERVE_PRODUCE_TARGETS,
    SERVE_TRANSACTIONAL,
)
from workload import VALUE_BYTES, make_values

PACKAGES = ("eoslog", "confluent-kafka", "kio")
SERVE_NAME = "eoslog serve"
MOCK_NAME = "mock cluster"


def ratio_line(label: str, ours: list[float], mock: list[float], fmt: Any = x) -> str:
    return f"- {label}: {median_spread(harness.per_round(ours, mock), fmt)}"


def measure_produce(args: argparse.Namespace, address: str) -> Section:
    values = make_values(args.records)
    serve = {"bootstrap.servers": address}
    sides = [
        confluent_producer(SERVE_IDEMPOTENT, values, False, serve, partition=0),
        confluent_producer(MOCK_IDEMPOTENT, values, False, partition=0),
        confluent_producer(SERVE_TRANSACTIONAL, values, True, serve, partition=0),
        confluent_producer(MOCK_TRANSACTIONAL, values, True, partition=0),
    ]
    runs = harness.alternate(sides, args.rounds, args.timer, label="produce")
    names = [side.name for side in sides]
    rows = harness.rate_rows(runs, names, args.records, harness.seconds3)
    lines = [
        f"A confluent-kafka Producer (acks=all, linger.ms 5, batch.num.messages 1,000) writes "
        f"{args.records:,} values of {VALUE_BYTES} B to partition 0 (the mock auto-creates 4 "
        "partitions, eoslog serve 1: one partition on both), flush included: idempotent, and "
        f"transactional with a commit every {TXN_RECORDS:,} records (the commit flushes, inside "
        "the timing). A fresh producer per run, made untimed.",
        "",
        *harness.table(["contender", "median records/s", "min – max", "median s"], rows),
        "",
        "Ratios to the mock cluster (median of per-round ratios; min – max):",
        "",
        *(
            f"- {ours} ÷ {peer}: {median_spread(runs.speedup(ours, peer), x)}"
            for ours, peer in (
                (SERVE_IDEMPOTENT, MOCK_IDEMPOTENT),
                (SERVE_TRANSACTIONAL, MOCK_TRANSACTIONAL),
            )
        ),
    ]
    return Section("Produce", lines, [t.of(runs) for t in SERVE_PRODUCE_TARGETS])


def measure_latency(args: argparse.Namespace, address: str) -> Section:
    names = (f"{SERVE_NAME}, transaction", f"{MOCK_NAME}, transaction")
    clusters = ({"bootstrap.servers": address}, contenders_serve.MOCK)
    sides = [
        contenders_serve.latency_contender(name, cluster, args.latency_samples)
        for name, cluster in zip(names, clusters, strict=True)
    ]
    runs = harness.alternate(sides, args.rounds, args.timer, warmup=False)
    found, rows = harness.latency_rows(runs, names)
    lines = [
        f"Single-record transactions of a transactional confluent Producer (linger.ms 0): "
        f"begin_transaction(), produce() of one {VALUE_BYTES} B value, commit_transaction(), "
        f"each timed alone; {args.latency_samples} per round after "
        f"{contenders_serve.LATENCY_WARMUP} untimed.",
        "",
        *harness.table(["contender", "p50", "p99", "p99.9"], rows),
        "",
        "Ratios to the mock cluster (median of per-round ratios; above 1: slower):",
        "",
        *(
            ratio_line(
                f"{label} ÷ the mock's",
                [float(p[i]) for p in found[names[0]]],
                [float(p[i]) for p in found[names[1]]],
            )
            for i, label in enumerate(("p50", "p99", "p99.9"))
        ),
    ]
    return Section("Single-record transaction latency", lines)


def measure_fetch(args: argparse.Namespace, address: str) -> Section:
    records = args.fetch_records
    values = make_values(records)
    serve = {"bootstrap.servers": address}
    print(f"fetch: {records:,} records into both, transactions of {TXN_RECORDS:,} ...")
    contenders_serve.fill(serve, values)
    mock_producer = contenders_serve.fill(contenders_serve.MOCK, values)
    mock = contenders_serve.mock_address(mock_producer)
    reads = [f"{SERVE_NAME}, consume()", f"{MOCK_NAME}, consume()"]
    sides = [
        contenders_serve.consumer_contender(name, where, records, SERVE_FETCH_PASSES)
        for name, where in zip(reads, (address, mock), strict=True)
    ]
    sides += [
        contenders_serve.metadata_contender(name, where, args.requests)
        for name, where in zip(
            (f"{SERVE_NAME}, Metadata", f"{MOCK_NAME}, Metadata"), (address, mock), strict=True
        )
    ]
    runs = harness.alternate(sides, args.rounds, args.timer, label="fetch")
    rows = harness.rate_rows(runs, reads, records * SERVE_FETCH_PASSES, harness.seconds3)
    mb_s = [
        f"{name}: {median_spread(runs.rates(name, runs[name].checked / 1e6), '{:.1f} MB/s'.format)}"
        for name in reads
    ]
    metadata_names = [side.name for side in sides[2:]]
    found, metadata_rows = harness.latency_rows(runs, metadata_names)
    p50s = [[float(p[0]) for p in found[name]] for name in metadata_names]
    lines = [
        f"A read_committed confluent Consumer (fetch.wait.max.ms 5, no group, consume() of "
        f"up to 10,000; made untimed) reads the {records:,} committed records of a partition "
        f"both were given in transactions of {TXN_RECORDS:,}, {SERVE_FETCH_PASSES} times a run "
        "(assign() at offset 0 each time: the mock keeps about 5 MB per partition, so the "
        "topic is short and read again); the mock's consumer reaches the mock broker over "
        "loopback TCP, as eoslog serve's does.",
        "",
        *harness.table(["contender", "median records/s", "min – max", "median s"], rows),
        "",
        f"Payload (values): {'; '.join(mb_s)}.",
        "",
        ratio_line(
            "consume() records/s ÷ the mock's",
            runs.rates(reads[0], 1.0),
            runs.rates(reads[1], 1.0),
        ),
        "",
        f"Metadata v12 (one topic) answered one at a time on one connection, {args.requests:,} "
        "per round, send to whole answer (the protocol layer plus a loopback round trip):",
        "",
        *harness.table(["contender", "p50", "p99", "p99.9"], metadata_rows),
        "",
        ratio_line("Metadata p50 ÷ the mock's", p50s[0], p50s[1]),
    ]
    mock_producer.flush(10)
    return Section("Fetch (read_committed) and Metadata", lines)


def measure_protocol(args: argparse.Namespace, root: str) -> Section:
    directory = os.path.join(root, "profiled")
    with eoslog.open(directory, durability=args.durability) as broker:
        broker.create_topic(contenders_serve.PRODUCE_TOPIC, 1)
        found = contenders_serve.profile_requests(broker, args.requests)
    rows = [
        [kind, *(us(split[layer]) for layer in contenders_serve.LAYERS), us(sum(split.values()))]
        for kind, split in found.items()
    ]
    lines = [
        "The server side profiled: an in-process `broker.serve()` (durability "
        f"`{args.durability}`) with cProfile on each of its threads; {args.requests:,} of each "
        "request: Metadata sent one at a time on one socket, and Produce requests of one batch "
        "of one 100 B record from an idempotent confluent Producer (linger.ms 0, produce() + "
        "flush() each; its few ApiVersions, Metadata and InitProducerId counted in). Own time "
        "per request, over the loop thread and the worker threads: eoslog.serve's and kio's "
        "functions; asyncio, socket calls and the worker pool's hand-off; the engine (eoslog "
        "outside eoslog.serve, and the builtins a worker calls, the fsync of a durable Produce "
        "among them). Blocking waits (epoll, an idle worker's queue, locks, sleeps) are left "
        "out. "
        "cProfile's overhead inflates every column, the many small calls of the protocol "
        "layer most: read the split, and the unprofiled Metadata round trip above, rather "
        "than the absolute µs.",
        "",
        *harness.table(["request (per one)", *contenders_serve.LAYERS, "total"], rows),
    ]
    return Section("The protocol layer's cost per request (profiled)", lines)


def measure(args: argparse.Namespace, root: str) -> Report:
    sections = []
    server, address = contenders_serve.start_server(os.path.join(root, "log"), args.durability)
    try:
        for path, section in (
            ("produce", measure_produce),
            ("latency", measure_latency),
            ("fetch", measure_fetch),
        ):
            if path in args.paths:
                print(f"measuring {path} ...", flush=True)
                sections.append(section(args, address))
    finally:
        server.terminate()
        server.wait(60)
    if "protocol" in args.paths:
        print("profiling the protocol layer ...", flush=True)
        sections.append(measure_protocol(args, root))
    method = prose.SERVE_METHOD.format(
        durability=args.durability,
        confluent=_version(),
        rounds=args.rounds,
        records=args.records,
        samples=args.latency_samples,
        requests=args.requests,
    )
    return Report(prose.SERVE_TITLE, method, PACKAGES, sections)


def _version() -> str:
    import confluent_kafka

    return f"{confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})"


if __name__ == "__main__":
    sys.exit(harness.main(SERVE, measure, __doc__ or ""))
