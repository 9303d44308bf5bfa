"""The partition-log part of `make demo`: a topic written across several segments by a
process that is killed (SIGKILL) in the middle of writing a batch, reopened with the torn
tail cut and reported, and read back whole."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import eoslog
from eoslog.record import codec

TOPIC = "demo"
BATCHES = 60
RECORDS_PER_BATCH = 1000
SEGMENT_BYTES = 1 << 20

# The child appends BATCHES batches, then starts writing one more batch but stops halfway
# (standing in for a write the kill interrupts), says so, and waits to be killed: no close,
# no checkpoint, no clean-shutdown marker.
_CHILD = """
import os, sys, time
import eoslog
from eoslog.demo_crash import batch
broker = eoslog.open(sys.argv[1], durability="none")
log = broker.log({topic!r}, 0)
for number in range({batches}):
    log.append_batch(batch(number))
torn = bytearray(batch({batches}))
active = log.segments[-1]
active.log.pwrite(torn[: len(torn) // 2], active.size)
print("ready", flush=True)
time.sleep(60)
"""


def batch(number: int) -> bytes:
    builder = codec.BatchBuilder()
    first = number * RECORDS_PER_BATCH
    values = [b'{"id":%d,"note":"%s"}' % (i, b"x" * 80) for i in range(first, first + 1000)]
    builder.append_values(values, timestamp=1_700_000_000_000 + number)
    return builder.build()


def run(root: str) -> int:
    with eoslog.open(root) as broker:
        if TOPIC not in broker.list_topics():
            broker.create_topic(TOPIC, 1, {"segment.bytes": SEGMENT_BYTES})
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD.format(topic=TOPIC, batches=BATCHES), root],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    if child.stdout.readline().strip() != "ready":
        print("ERROR: the writer did not start")
        return 1
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    segments = sorted(n for n in os.listdir(os.path.join(root, f"{TOPIC}-0")) if n.endswith(".log"))
    print(
        f"a writer appended {BATCHES * RECORDS_PER_BATCH:,} records in {BATCHES} batches across "
        f"{len(segments)} segments of at most {SEGMENT_BYTES:,} bytes, then was killed "
        f"(SIGKILL) halfway through writing one more batch"
    )

    started = time.perf_counter()
    with eoslog.open(root) as broker:
        log = broker.log(TOPIC, 0)
        report = log.recovery_report
        opened_ms = (time.perf_counter() - started) * 1000
        print(
            f"reopened in {opened_ms:.0f} ms: unclean shutdown detected, "
            f"{report.segments_recovered} segment(s) rescanned, torn tail of "
            f"{report.bytes_truncated:,} bytes cut at byte {report.truncated_at:,} of "
            f"{os.path.basename(report.truncated_file or '?')}"
        )
        offset, records = log.log_start_offset, 0
        while offset < log.high_watermark:
            fetched = log.read(offset, max_bytes=4 << 20)
            columns = codec.decode_columns(fetched.records)
            records += columns.count
            offset = int(columns.offset[-1]) + 1
        print(
            f"read back {records:,} records at offsets 0..{log.log_end_offset - 1}, every batch "
            f"CRC-checked; the half-written batch is gone, nothing acknowledged was lost"
        )
        if records != BATCHES * RECORDS_PER_BATCH or report.bytes_truncated == 0:
            print("ERROR: the log did not recover as expected")
            return 1
    return 0
