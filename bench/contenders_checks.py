"""The hardening checks' contender (checks_bench.py): a clean open or a read_committed read
timed in a child process, so each side of the comparison imports its own eoslog (this tree's
or an older build's)."""

from __future__ import annotations

import harness
from contenders_shared import expect
from workload import (
    READ_TOPIC,
)

# What one child process times, with the eoslog its interpreter imports: "open" (best of five
# clean opens of the log directory), "consume" or "consume_arrow" (read_committed from offset 0
# until N records are read). It prints {"seconds": ..., "records": ...} as JSON.
CHILD = """
import json, sys, time
import eoslog
kind, path, records = sys.argv[1], sys.argv[2], int(sys.argv[3])
if kind == "open":
    times = []
    for _ in range(5):
        start = time.perf_counter()
        broker = eoslog.open(path, background=False)
        times.append(time.perf_counter() - start)
        broker.close()
    print(json.dumps({"seconds": min(times), "records": records}))
else:
    broker = eoslog.open(path, background=False, durability="none")
    consumer = broker.consumer({"auto.offset.reset": "earliest"})
    consumer.assign([eoslog.TopicPartition("%s", 0, 0)])
    taken = 0
    start = time.perf_counter()
    if kind == "consume":
        while taken < records:
            taken += len(consumer.consume(500, timeout=0))
    else:
        while taken < records:
            table = consumer.consume_arrow(100_000, timeout=0)
            taken += 0 if table is None else table.num_rows
    seconds = time.perf_counter() - start
    consumer.close()
    broker.close()
    print(json.dumps({"seconds": seconds, "records": taken}))
"""


def child_contender(
    name: str, python: str, kind: str, path: str, records: int
) -> harness.Contender:
    """Self-timed: `kind` (see CHILD) run by `python` in a fresh child process, so it imports
    its own eoslog; the child's seconds."""
    import json
    import subprocess

    topic = READ_TOPIC if kind != "open" else "segments"

    def run(_: object) -> float:
        done = subprocess.run(
            [python, "-c", CHILD % topic, kind, path, str(records)],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        result = json.loads(done.stdout.strip().splitlines()[-1])
        expect(result["records"] >= records, f"{name} read {result['records']} of {records}")
        return float(result["seconds"])

    return harness.Contender(name, run, timed=False)
