"""Log compaction on a live partition (docs/design.md "Compaction"): the maintenance pass runs
the cleaner on topics with "compact" in cleanup.policy, within Kafka's limits (below the LSO
and the active segment, after min.compaction.lag.ms, when the dirty ratio is reached); readers
see the latest value of each key at its original offset, before and after a reopen, clean or
not; gaps are legal only below the cleaner-offset-checkpoint entry."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping

import pytest

import eoslog
from eoslog import limits
from eoslog.errors import CorruptRecordError, OffsetOutOfRangeError
from eoslog.log import checkpoints, compactor
from eoslog.log.partition import PartitionLog
from eoslog.log.segment import LogSegment
from eoslog.record import codec
from tests.support import REPO_ROOT, logtools
from tests.support.logtools import OpenBroker

TS = logtools.TS

COMPACT = {"cleanup.policy": "compact", "segment.bytes": 400, "segment.index.bytes": 4096}


def keyed(key: bytes, value: bytes | None, timestamp: int = TS) -> bytes:
    builder = codec.BatchBuilder()
    builder.append(timestamp, key, value)
    return builder.build()


def new_topic(broker: eoslog.Broker, config: Mapping[str, object] = COMPACT) -> PartitionLog:
    broker.create_topic("t", 1, config=dict(config))
    return broker.log("t", 0)


def fill(log: PartitionLog, rounds: int, keys: int = 4) -> dict[bytes, tuple[int, bytes]]:
    """`rounds` values for each of `keys` keys, in turn; returns each key's latest
    (offset, value)."""
    latest = {}
    for round_ in range(rounds):
        for k in range(keys):
            key, value = f"key{k}".encode(), f"value{round_}-{k}".encode()
            latest[key] = (log.append_batch(keyed(key, value)).base_offset, value)
    return latest


def visible(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in logtools.read_all(log)]


def test_the_maintenance_pass_keeps_the_latest_value_of_each_key_at_its_offset(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    log = new_topic(broker)
    latest = fill(log, 10)
    log.roll()
    before = len(visible(log))
    broker.run_maintenance()
    after = visible(log)
    assert sorted((o, k, v) for k, (o, v) in latest.items()) == after
    assert len(after) < before
    assert log.cleaned_end == log.segments[-1].base_offset
    assert checkpoints.read_offsets(
        broker.fs, os.path.join(broker.path, checkpoints.CLEANER_OFFSET_FILE)
    ) == {("t", 0): log.cleaned_end}


def test_a_delete_topic_is_never_cleaned(open_broker: OpenBroker) -> None:
    broker = open_broker()
    log = new_topic(broker, {**COMPACT, "cleanup.policy": "delete", "retention.ms": -1})
    fill(log, 10)
    log.roll()
    before = visible(log)
    broker.run_maintenance()
    assert visible(log) == before
    assert not os.path.exists(os.path.join(broker.path, checkpoints.CLEANER_OFFSET_FILE))


def test_the_active_segment_is_not_cleaned(open_broker: OpenBroker) -> None:
    broker = open_broker()
    log = new_topic(broker, {**COMPACT, "segment.bytes": 1 << 20})
    fill(log, 10)
    before = visible(log)
    broker.run_maintenance()
    assert visible(log) == before


def test_min_compaction_lag_keeps_young_segments_uncleaned(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    log = new_topic(broker, {**COMPACT, "min.compaction.lag.ms": 60_000})
    fill(log, 10)
    log.roll()
    before = visible(log)
    clock.now_ms = TS + 59_999
    broker.run_maintenance()
    assert visible(log) == before
    clock.now_ms = TS + 60_001
    broker.run_maintenance()
    assert len(visible(log)) < len(before)


def test_a_dirty_ratio_below_min_cleanable_dirty_ratio_waits(open_broker: OpenBroker) -> None:
    broker = open_broker()
    log = new_topic(broker, {**COMPACT, "min.cleanable.dirty.ratio": 0.9})
    fill(log, 10)
    log.roll()
    broker.run_maintenance()  # all dirty: cleaned
    cleaned = visible(log)
    fill(log, 1)  # a little dirt past the cleaned end
    log.roll()
    broker.run_maintenance()
    assert visible(log)[: len(cleaned)] == cleaned
    assert len(visible(log)) == len(cleaned) + 4


def _fill_and_clean(broker: eoslog.Broker) -> PartitionLog:
    log = new_topic(broker)
    fill(log, 10)
    log.roll()
    fill(log, 1)
    broker.run_maintenance()
    return log


def test_a_cleaned_log_reopens_cleanly_with_the_same_records_and_takes_appends(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    log = _fill_and_clean(broker)
    expected, end = visible(log), log.log_end_offset
    broker.close()
    log = open_broker().log("t", 0)
    assert visible(log) == expected
    assert log.append_batch(keyed(b"key0", b"new")).base_offset == end


def test_a_cleaned_log_recovers_after_a_crash_with_the_same_records(
    open_broker: OpenBroker, tmp_path: os.PathLike[str]
) -> None:
    reference = eoslog.open(os.path.join(tmp_path, "reference"), background=False)
    expected = visible(_fill_and_clean(reference))
    reference.close()
    data_dir = os.path.join(tmp_path, "data")
    crash_after(
        data_dir, "from tests.log.test_compaction import _fill_and_clean\n_fill_and_clean(broker)"
    )
    os.unlink(os.path.join(data_dir, checkpoints.RECOVERY_POINT_FILE))  # rescan everything
    log = open_broker().log("t", 0)
    assert log.recovery_report.segments_recovered == len(log.segments)
    assert visible(log) == expected


def crash_after(data_dir: str, body: str) -> None:
    """Run `body` in a child process with `broker` open on data_dir (clock fixed at TS),
    then end it with os._exit: no close, no clean-shutdown marker, no final checkpoints."""
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {REPO_ROOT!r})
        import eoslog
        from tests.support import logtools
        broker = eoslog.open({data_dir!r}, clock_ms=lambda: logtools.TS, background=False)
        """
    )
    subprocess.run([sys.executable, "-c", script + body + "\nos._exit(0)\n"], check=True)


def test_a_gap_above_the_cleaner_checkpoint_is_still_damage(open_broker: OpenBroker) -> None:
    broker = open_broker()
    log = new_topic(broker, {**COMPACT, "cleanup.policy": "delete", "retention.ms": -1})
    fill(log, 10)
    log.roll()
    first = log.segments[0]
    broker.close()
    # Remove the second batch of the first segment by hand: a gap nothing cleaned.
    path = first.path(".log")
    data = logtools.file_bytes(path)
    headers = list(codec.iter_headers(data))
    (second_at, _), (third_at, _) = headers[1], headers[2]
    with open(path, "wb") as file:
        file.write(data[:second_at] + data[third_at:])
    for suffix in (".index", ".timeindex"):
        os.unlink(first.path(suffix))
    with pytest.raises(CorruptRecordError, match="gap"):
        open_broker()


def test_a_truncation_into_the_cleaned_range_is_refused_and_changes_nothing(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    log = _fill_and_clean(broker)
    before = visible(log)
    with pytest.raises(OffsetOutOfRangeError, match="log cleaner"):
        log.truncate_to(log.cleaned_end - 1)
    assert visible(log) == before
    log.truncate_to(log.cleaned_end + 1)  # above it, as before
    assert log.log_end_offset == log.cleaned_end + 1


def test_the_throttle_waits_so_the_cleaners_bytes_stay_under_the_rate() -> None:
    now = [0.0]
    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    throttle = compactor.Throttle(1000, wait, lambda: now[0])
    throttle.spend(500)  # 0.5 s worth at once
    now[0] += 0.2  # work took 0.2 s
    throttle.spend(500)  # 1 s worth in total after 0.7 s
    assert waits == pytest.approx([0.5, 0.3])
    unlimited = compactor.Throttle(limits.cleaner_bytes_per_second_off, wait, lambda: 0.0)
    unlimited.spend(1 << 40)
    assert len(waits) == 2


def test_a_segment_retention_takes_while_its_indexes_are_built_is_not_swapped_back(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    log = new_topic(broker, {**COMPACT, "cleanup.policy": "compact,delete"})
    fill(log, 10)
    log.roll()
    old = log.segments[0]
    following = log.segments[1].base_offset
    with open(old.path(".log.cleaned"), "wb") as file:
        file.write(logtools.file_bytes(old.path(".log")))

    def indexed_while_retention_runs() -> LogSegment:
        broker.delete_records("t", 0, following)  # takes `old` meanwhile
        return compactor._indexed(log, old)  # the step under test

    replace = functools.partial(compactor._replace_files, log, old)
    assert not log.swap_segment(old, replace, indexed_while_retention_runs)
    assert log.segments[0].base_offset == following
    assert next(r.offset for r in logtools.read_all(log)) == following
    broker.close()
    reopened = open_broker().log("t", 0)
    assert reopened.segments[0].base_offset == following


def test_max_compaction_lag_cleans_a_log_below_the_dirty_ratio(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    config = {**COMPACT, "min.cleanable.dirty.ratio": 0.99, "max.compaction.lag.ms": 60_000}
    log = new_topic(broker, config)
    fill(log, 10)
    log.roll()
    broker.run_maintenance()  # all dirty: cleaned
    cleaned = visible(log)
    for k in range(4):  # a little dirt, written at TS
        log.append_batch(keyed(b"key%d" % k, b"late-%d" % k, TS))
    log.roll()
    clock.now_ms = TS + 60_000
    broker.run_maintenance()
    assert len(visible(log)) == len(cleaned) + 4  # not overdue yet: below the ratio
    clock.now_ms = TS + 60_001
    broker.run_maintenance()
    assert [value for _, _, value in visible(log)] == [b"late-%d" % k for k in range(4)]
