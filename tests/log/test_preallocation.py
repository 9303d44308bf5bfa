"""Preallocation (docs/design.md "Durability"; Kafka's `preallocate`): under durability "commit"
and "always" an append that reaches the end of the active segment's .log first extends the file
with zeros (limits.preallocate_bytes, capped at segment.bytes), so the fsyncs of the appends
after it need not make a new file length durable. The log still ends at its last batch: the
roll and a clean close cut the file back to it, and after an unclean stop recovery cuts the
zeros as it cuts a torn tail (reported as log.recovery_report.zeros_cut). The crash-point and
power-loss families (tests/reliability f02, f03) run every write and sync of this order under
"commit" and "always".
"""

from __future__ import annotations

import os
import shutil

import pytest

import eoslog
from eoslog import limits
from eoslog.log.partition import PartitionLog
from tests.support import logtools
from tests.support.logtools import OpenBroker


def _single(index: int) -> bytes:
    return logtools.batch(logtools.values(index, 1), timestamps=logtools.TS)


SINGLE_BYTES = len(_single(0))


def _topic(broker: eoslog.Broker, segment_bytes: int = 1 << 30) -> PartitionLog:
    broker.create_topic("t", 1, config={"segment.bytes": segment_bytes})
    return broker.log("t", 0)


def _file_size(log: PartitionLog, index: int = -1) -> int:
    return os.path.getsize(log.segments[index].path(".log"))


def _tail(log: PartitionLog) -> bytes:
    """The active segment's bytes past the log's end."""
    segment = log.segments[-1]
    with open(segment.path(".log"), "rb") as file:
        file.seek(segment.size)
        return file.read()


@pytest.mark.parametrize("durability", ["commit", "always"])
def test_an_append_under_a_syncing_durability_extends_the_active_segment_ahead_in_zeros(
    open_broker: OpenBroker, durability: str
) -> None:
    log = _topic(open_broker(durability))
    for index in range(3):
        log.append_batch(_single(index))
    assert log.segments[-1].size == 3 * SINGLE_BYTES
    assert _file_size(log) == SINGLE_BYTES + limits.preallocate_bytes
    assert _tail(log) == bytes(limits.preallocate_bytes - 2 * SINGLE_BYTES)
    assert [record.offset for record in logtools.read_all(log)] == [0, 1, 2]


def test_under_durability_none_the_file_ends_with_the_log(open_broker: OpenBroker) -> None:
    log = _topic(open_broker("none"))
    for index in range(3):
        log.append_batch(_single(index))
    assert _file_size(log) == log.segments[-1].size == 3 * SINGLE_BYTES


def test_the_extension_is_capped_at_segment_bytes(open_broker: OpenBroker) -> None:
    log = _topic(open_broker("commit"), segment_bytes=4 * SINGLE_BYTES)
    log.append_batch(_single(0))
    assert _file_size(log) == SINGLE_BYTES + 4 * SINGLE_BYTES


def test_a_roll_cuts_the_segment_it_leaves_back_to_its_last_batch(
    open_broker: OpenBroker,
) -> None:
    log = _topic(open_broker("commit"), segment_bytes=3 * SINGLE_BYTES)
    for index in range(7):
        log.append_batch(_single(index))
    assert [segment.base_offset for segment in log.segments] == [0, 3, 6]
    assert [_file_size(log, index) for index in (0, 1)] == [3 * SINGLE_BYTES] * 2
    assert _file_size(log) > log.segments[-1].size  # the active one runs ahead


def test_a_clean_close_cuts_the_active_segment_back_and_the_reopen_rescans_nothing(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker("commit")
    log = _topic(broker)
    for index in range(3):
        log.append_batch(_single(index))
    path = log.segments[-1].path(".log")
    log_end = log.segments[-1].size
    broker.close()
    assert os.path.getsize(path) == log_end
    reopened = open_broker("commit").log("t", 0)
    assert reopened.recovery_report.segments_recovered == 0
    assert reopened.recovery_report.bytes_truncated == 0
    assert [record.offset for record in logtools.read_all(reopened)] == [0, 1, 2]


def test_after_an_unclean_stop_recovery_cuts_the_zeros_and_keeps_every_batch(
    open_broker: OpenBroker, tmp_path: os.PathLike[str]
) -> None:
    broker = open_broker("commit")
    log = _topic(broker)
    for index in range(3):
        log.append_batch(_single(index))
    log.flush()
    zeros = _file_size(log) - log.segments[-1].size
    assert zeros > 0
    # The directory as a kill -9 leaves it: the owner never closed it.
    crashed = os.path.join(tmp_path, "crashed")
    shutil.copytree(broker.path, crashed, ignore=shutil.ignore_patterns(".lock"))
    with eoslog.open(crashed, "commit", background=False) as reopened:
        recovered = reopened.log("t", 0)
        # Every byte cut was such a zero (not data), as the report tells.
        assert recovered.recovery_report.bytes_truncated == zeros
        assert recovered.recovery_report.zeros_cut == zeros
        assert [record.offset for record in logtools.read_all(recovered)] == [0, 1, 2]
        recovered.append_batch(_single(3))  # and appends go on from the last batch
        assert [record.offset for record in logtools.read_all(recovered)] == [0, 1, 2, 3]
