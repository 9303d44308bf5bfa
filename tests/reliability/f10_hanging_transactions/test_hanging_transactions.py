"""Family 10 (docs/reliability.md): hanging transactions. A producer process opens a transaction,
writes to it and is killed with SIGKILL. The next owner of the directory keeps the
transaction open (it may still be re-initialized) until its timeout passes; the broker's
background thread then aborts it, and the LSO must reach the log end within
transaction.timeout.ms plus one check interval (plus scheduling slack on a loaded machine),
every trial."""

from __future__ import annotations

import os
import random
import textwrap
import time

import pytest

import eoslog
from tests.support.killharness import run_child

TXN_TIMEOUT_MS = 600
CHECK_INTERVAL_MS = 100
SLACK_S = 1.0  # a shared 2-core machine: thread wake-ups and the abort itself
TRIALS = 3

CHILD = textwrap.dedent(
    """
    import json, sys, time
    import eoslog
    from eoslog.record import codec

    broker = eoslog.open(sys.argv[1], durability="commit", background=False)
    if "t" not in broker.list_topics():
        broker.create_topic("t", 1)
    producer = broker.transactions.init_producer_id("hanging", {timeout})
    broker.transactions.add_partitions("hanging", *producer, [("t", 0)])
    builder = codec.BatchBuilder(
        producer_id=producer[0], producer_epoch=producer[1], base_sequence=0,
        is_transactional=True,
    )
    builder.append(int(time.time() * 1000), None, b"never committed")
    broker.log("t", 0).append_batch(builder.build())
    broker.log("t", 0).flush()
    print(json.dumps({{"open_since_ms": int(time.time() * 1000)}}), flush=True)
    time.sleep(60)
    """
).format(timeout=TXN_TIMEOUT_MS)


@pytest.mark.parametrize("trial", range(TRIALS))
def test_a_killed_producers_transaction_stops_holding_the_lso_after_its_timeout(
    tmp_path: os.PathLike[str], trial: int
) -> None:
    root = os.path.join(tmp_path, "data")
    child = run_child(CHILD, [root], random.Random(trial), kill_after_s=0.0)
    assert child.killed and child.lines, child.stderr
    opened_ms = child.lines[0]["open_since_ms"]
    config = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": CHECK_INTERVAL_MS}
    with eoslog.open(root, config=config) as broker:  # the background thread runs
        log = broker.log("t", 0)
        assert log.last_stable_offset == 0  # the open transaction holds it
        deadline_s = (opened_ms + TXN_TIMEOUT_MS + CHECK_INTERVAL_MS) / 1000 + SLACK_S
        while log.last_stable_offset < log.log_end_offset and time.time() < deadline_s + 5:
            time.sleep(0.01)
        released_s = time.time()
        assert log.last_stable_offset == log.log_end_offset, "the LSO never advanced"
        late_s = released_s - (opened_ms + TXN_TIMEOUT_MS + CHECK_INTERVAL_MS) / 1000
        print(f"\ntrial {trial}: LSO released {late_s * 1000:+.0f} ms after timeout + interval")
        assert released_s <= deadline_s, f"released {late_s:.2f} s after timeout + interval"
        # ...and not before its timeout (it began a few ms before the child said so).
        assert released_s * 1000 >= opened_ms + TXN_TIMEOUT_MS - 100, "aborted too early"
        consumer = broker.consumer({"auto.offset.reset": "earliest"})
        consumer.assign([eoslog.TopicPartition("t", 0, 0)])
        assert consumer.consume(10, timeout=0) == []
        consumer.close()
