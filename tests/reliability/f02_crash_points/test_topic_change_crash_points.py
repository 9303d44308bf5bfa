"""Family 2 for topic changes (docs/reliability.md; eoslog.crashpoints.TOPIC_CHANGE_POINTS): a
child adds partitions to a topic, then deletes records, and is killed by SIGKILL at each named
point. The parent reopens the directory and checks the rule of docs/format.md §9.1 and
eoslog.log.topic_changes: a topic has its old partition count or its new one, never a broken
open; every acknowledged record below no deletion is still there; a deletion the child saw
answered holds; and the change can be made again, then everything reopens cleanly."""

from __future__ import annotations

import os
import random
import textwrap

import pytest

import eoslog
from eoslog.crashpoints import ENV, TOPIC_CHANGE_POINTS
from tests.support import logtools
from tests.support.killharness import run_child

RECORDS = 12
DELETE_BELOW = 5

CHILD = textwrap.dedent(
    """
    import json, sys, time
    import eoslog
    from tests.support import logtools

    broker = eoslog.open(sys.argv[1], background=False)
    broker.create_topic("t", 2, {{"segment.bytes": 300}})
    log = broker.log("t", 0)
    for number in range({records}):
        log.append_batch(logtools.batch([b"r%d" % number], timestamps=int(time.time() * 1000)))
    log.flush()
    print(json.dumps({{"acked": {records}}}), flush=True)
    broker.create_partitions("t", 4)
    print(json.dumps({{"partitions": 4}}), flush=True)
    print(json.dumps({{"low_watermark": broker.delete_records("t", 0, {below})}}), flush=True)
    broker.close()
    """
).format(records=RECORDS, below=DELETE_BELOW)


def offsets(log: eoslog.PartitionLog) -> list[int]:
    return [record.offset for record in logtools.read_all(log)]


@pytest.mark.parametrize("point", TOPIC_CHANGE_POINTS)
def test_a_kill_during_a_topic_change_reopens_with_the_old_or_the_new_state(
    tmp_path: os.PathLike[str], point: str
) -> None:
    root = os.path.join(tmp_path, "d")
    os.environ[ENV] = f"{point}:1"
    try:
        child = run_child(CHILD, [root], random.Random(point), None)
    finally:
        os.environ.pop(ENV, None)
    assert child.killed, f"{point} was never hit"
    seen = {key: value for line in child.lines for key, value in line.items()}
    assert seen.get("acked") == RECORDS
    with eoslog.open(root, background=False) as broker:
        count = broker.list_topics()["t"].num_partitions
        expected_count = 2 if point == "partitions.made" else 4
        assert count == expected_count, point
        log = broker.log("t", 0)
        start = DELETE_BELOW if point == "records.deleted" else 0
        assert log.log_start_offset == start
        assert offsets(log) == list(range(start, RECORDS))
        broker.run_maintenance()  # deletes the segments wholly below the log start
        bases = [segment.base_offset for segment in log.segments]
        assert bases[0] <= start and (len(bases) == 1 or bases[1] > start), bases
        assert offsets(log) == list(range(start, RECORDS))
        if count == 2:
            broker.create_partitions("t", 4)
        assert broker.delete_records("t", 0, DELETE_BELOW) == DELETE_BELOW
        for partition in range(4):
            broker.log("t", partition).append_batch(logtools.batch([b"after"]))
    with eoslog.open(root, background=False) as broker:
        assert broker.list_topics()["t"].num_partitions == 4
        assert offsets(broker.log("t", 0)) == [*range(DELETE_BELOW, RECORDS), RECORDS]
        assert [broker.log("t", p).log_end_offset for p in (1, 2, 3)] == [1, 1, 1]
