"""The main job of `make demo`: an exactly-once consume-transform-produce pipeline that
survives kill -9.

A parent process fills an input topic, then runs a copier subprocess: a consumer in group
"copier" reads the input, every record is transformed and produced to the output topic (same
partition), and the consumed offsets go into the same transaction
(send_offsets_to_transaction), committed every `records_per_transaction` records; a fraction
of the transactions is aborted on purpose and redone. The parent SIGKILLs the copier in the
middle of its work, several times, and restarts it; each restart fences the killed copier's
transaction (init_transactions aborts it) and resumes from the group's committed offsets.
At the end the parent checks that the output is exactly the transformed input, partition by
partition, in order, with no record lost or duplicated, and that the group's committed
offsets are the input's end offsets.

copy() is the copier's loop; tests/reliability/f06_eos_copier/test_eos_copier.py runs it under
its kill harness.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, Final

import eoslog
from eoslog.client.message import OFFSET_STORED, TopicPartition
from eoslog.progress import Advance, activity_progress

INPUT: Final = "orders"
OUTPUT: Final = "orders-enriched"
GROUP: Final = "copier"
TRANSACTIONAL_ID: Final = "copier-0"
PARTITIONS: Final = 2
PREFIX: Final = b"copied:"


def transform(value: bytes) -> bytes:
    """The pipeline's transformation of one input value."""
    return PREFIX + value


def input_value(partition: int, number: int) -> bytes:
    return b'{"partition":%d,"order":%d}' % (partition, number)


def fill_input(root: str, records: int) -> dict[int, int]:
    """Create both topics and write `records` input records spread over the partitions;
    returns each input partition's end offset."""
    with eoslog.open(root) as broker:
        broker.create_topic(INPUT, PARTITIONS)
        broker.create_topic(OUTPUT, PARTITIONS)
        producer = broker.producer({"linger.ms": 5})
        for number in range(records):
            partition = number % PARTITIONS
            producer.produce(INPUT, input_value(partition, number), partition=partition)
        producer.flush()
        producer.close()
        return {p: broker.log(INPUT, p).high_watermark for p in range(PARTITIONS)}


def copy(
    root: str,
    *,
    records_per_transaction: int,
    abort_fraction: float = 0.0,
    seed: int = 0,
    report: Callable[[dict[str, Any]], None],
    broker: eoslog.Broker | None = None,
) -> None:
    """Copy the input to the output exactly once, until the group's position reaches the
    input's end. report() gets {"ready": True} once the producer is initialized (a killed
    copier's open transaction aborted), {"committed": records, "offsets": {partition: next
    offset}} after each commit returned, and {"aborted": records} after each abort."""
    rng = random.Random(seed)
    own = broker is None
    broker = broker or eoslog.open(root)
    try:
        ends = {p: broker.log(INPUT, p).high_watermark for p in range(PARTITIONS)}
        producer = broker.producer({"transactional.id": TRANSACTIONAL_ID, "linger.ms": 100})
        producer.init_transactions()
        report({"ready": True})
        consumer = broker.consumer(
            {
                "group.id": GROUP,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        consumer.subscribe([INPUT])
        while True:
            messages = consumer.consume(records_per_transaction, timeout=0.05)
            # A partition not read from yet has no position (OFFSET_INVALID): nothing to send.
            positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
            if not messages:
                if len(positions) == PARTITIONS and all(
                    tp.offset >= ends[tp.partition] for tp in positions
                ):
                    break
                continue
            producer.begin_transaction()
            for message in messages:
                producer.produce(
                    OUTPUT, transform(message.value() or b""), partition=message.partition()
                )
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata())
            if rng.random() < abort_fraction:
                producer.abort_transaction()
                # Back to the committed offsets: the aborted records are read again.
                for tp in positions:
                    consumer.seek(TopicPartition(tp.topic, tp.partition, OFFSET_STORED))
                report({"aborted": len(messages)})
            else:
                producer.commit_transaction()
                offsets = {tp.partition: tp.offset for tp in positions}
                report({"committed": len(messages), "offsets": offsets})
        consumer.close()
        producer.close()
    finally:
        if own:
            broker.close()


def read_partition(broker: eoslog.Broker, topic: str, partition: int) -> list[tuple[int, bytes]]:
    """Every committed record of a partition as (offset, value), read_committed."""
    consumer = broker.consumer({"isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, partition, 0)])
    found: list[tuple[int, bytes]] = []
    while messages := consumer.consume(10_000, timeout=0):
        # No error messages here: enable.partition.eof is off and the offsets are explicit.
        found.extend((m.offset() or 0, m.value() or b"") for m in messages)
    consumer.close()
    return found


def check(root: str, records: int) -> list[str]:
    """Compare the output with the transformed input, partition by partition; returns the
    problems found (none when the pipeline was exactly-once)."""
    problems = []
    with eoslog.open(root) as broker:
        committed = broker.groups.fetch_offsets(
            GROUP, [(INPUT, p) for p in range(PARTITIONS)], require_stable=True
        )
        for partition in range(PARTITIONS):
            wanted = [v for _, v in read_partition(broker, INPUT, partition)]
            got = [v for _, v in read_partition(broker, OUTPUT, partition)]
            if got != [transform(v) for v in wanted]:
                duplicates = len(got) - len(set(got))
                problems.append(
                    f"partition {partition}: {len(got)} output records for {len(wanted)} input "
                    f"records ({duplicates} duplicates)"
                )
            stored = committed[(INPUT, partition)]
            end = broker.log(INPUT, partition).high_watermark
            if stored is None or stored.offset != end:
                problems.append(f"partition {partition}: committed offset {stored} is not {end}")
    return problems


_CHILD: Final = """
import json, sys
from eoslog.demo_pipeline import copy
copy(sys.argv[1], records_per_transaction=int(sys.argv[2]), abort_fraction=float(sys.argv[3]),
     seed=int(sys.argv[4]), report=lambda line: print(json.dumps(line), flush=True))
print(json.dumps({"done": True}), flush=True)
"""


def _run_copier(
    root: str,
    args: list[str],
    kill_after_commits: int | None,
    kill_delay_s: float,
    advance: Advance,
) -> tuple[int, int, bool]:
    """Run one copier; SIGKILL it kill_delay_s after it reported `kill_after_commits` commits
    (in the middle of its next transaction; None: let it finish). Returns (commits seen,
    aborts seen, whether it finished)."""
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, root, *args], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    commits = aborts = 0
    finished = False
    for line in child.stdout:
        report = json.loads(line)
        commits += "committed" in report
        aborts += "aborted" in report
        advance(("committed" in report) + ("aborted" in report))
        finished = finished or "done" in report
        if kill_after_commits is not None and commits >= kill_after_commits:
            time.sleep(kill_delay_s)
            os.kill(child.pid, signal.SIGKILL)
            break
    if child.wait() not in (0, -signal.SIGKILL):
        raise RuntimeError(f"the copier failed with exit code {child.returncode}")
    return commits, aborts, finished


def run(directory: str | None, records: int = 20_000, kills: int = 3) -> int:
    root = directory or tempfile.mkdtemp(prefix="eoslog-pipeline-")
    # About 40 transactions in all: enough for every planned kill to land mid-run.
    per_transaction = max(20, min(500, records // 40))
    print(
        f"exactly-once pipeline: {INPUT} ({PARTITIONS} partitions) -> transform -> {OUTPUT}, "
        f"offsets committed in each transaction of up to {per_transaction} records, about 1 "
        f"in 4 transactions aborted on purpose, the copier killed with SIGKILL {kills} times"
    )
    started = time.perf_counter()
    ends = fill_input(root, records)
    print(f"wrote {sum(ends.values()):,} input records ({ends}) in {root}")
    rng = random.Random(records)
    runs = commits_total = aborts_total = 0
    finished = False
    with activity_progress("copying", unit="transactions") as advance:
        while not finished:
            kill_after = rng.randint(1, 4) if runs < kills else None
            args = [str(per_transaction), "0.25", str(runs)]
            delay_s = rng.uniform(0, 0.05)
            commits, aborts, finished = _run_copier(root, args, kill_after, delay_s, advance)
            runs += 1
            commits_total += commits
            aborts_total += aborts
            state = "finished" if finished else "killed (SIGKILL) in its next transaction"
            print(f"copier run {runs}: {commits} transactions committed, {aborts} aborted, {state}")
            if runs > kills + 3 and not finished:
                print("ERROR: the copier does not finish")
                return 1
    problems = check(root, records)
    elapsed = time.perf_counter() - started
    with eoslog.open(root) as broker:
        output = sum(len(read_partition(broker, OUTPUT, p)) for p in range(PARTITIONS))
    print(
        f"input {sum(ends.values()):,} records, output {output:,} records; "
        f"{commits_total} transactions committed, {aborts_total} aborted, {runs - 1} kills; "
        f"{elapsed:.1f} s in all"
    )
    if problems:
        for problem in problems:
            print(f"ERROR: {problem}")
        return 1
    print("output = transformed input in every partition, in order: no record lost, none twice")
    return 0
