"""Tiered storage inside the broker (eoslog.tiering; KIP-405's `remote.storage.enable`): a
broker opened with an archive copies its tiered topics' archivable segments there at each
maintenance pass, local retention (`local.retention.ms|bytes`) then deletes only what the
archive holds, never a segment it does not, and the directory with its archive still scans as
the whole log."""

from __future__ import annotations

import os
from typing import Any

import pytest

import eoslog
from eoslog import archive
from eoslog.errors import InvalidConfigError
from tests.support import tieredlog
from tests.support.tieredlog import TOPIC, TieredLog

# Kept whole in the archive, RETENTION_MS locally.
TIERED = {
    "remote.storage.enable": "true",
    "retention.ms": -1,
    "local.retention.ms": tieredlog.RETENTION_MS,
}


def _all_segments(path: str) -> list[list[int]]:
    return [tieredlog.segment_bases(path, partition) for partition in range(tieredlog.PARTITIONS)]


def test_maintenance_archives_a_tiered_topic_and_local_retention_deletes_only_what_is_archived(
    tmp_path: Any,
) -> None:
    target = str(tmp_path / "archive")
    log = TieredLog(str(tmp_path / "log"), archive=target, topic_config=TIERED)
    try:
        committed, uncommitted = log.view(), log.view("read_uncommitted")
        starts = log.expire()
        for partition, start in enumerate(starts):
            archived = tieredlog.segment_bases(target, partition)
            local = tieredlog.segment_bases(log.path, partition)
            assert archived[0] == 0 and local[0] == start > 0
            # Everything deleted locally is archived.
            assert archive.archived_ends(target)[(TOPIC, partition)] >= start
        tieredlog.check_whole_log(log.path, target, committed, "read_committed")
        tieredlog.check_whole_log(log.path, target, uncommitted, "read_uncommitted")
    finally:
        log.close()


def test_local_retention_keeps_every_segment_the_archive_does_not_hold(tmp_path: Any) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_bytes(b"")  # the archive cannot be made under a regular file
    log = TieredLog(str(tmp_path / "log"), archive=str(blocked / "archive"), topic_config=TIERED)
    try:
        before = _all_segments(log.path)
        log.now_ms += 10 * tieredlog.RETENTION_MS  # everything expired locally
        log.broker.run_maintenance()
        assert _all_segments(log.path) == before, "deleted segments no archive holds"
        # Once the archive can be written, the next pass archives them, then deletes them.
        target = str(tmp_path / "archive")
        log.broker.archive_url = target
        log.broker.run_maintenance()
        after = _all_segments(log.path)
        for partition in range(tieredlog.PARTITIONS):
            archived = tieredlog.segment_bases(target, partition)
            assert after[partition][0] > 0
            assert set(before[partition]) - set(after[partition]) <= set(archived)
    finally:
        log.close()


def test_a_topic_without_remote_storage_is_not_archived(tmp_path: Any) -> None:
    target = str(tmp_path / "archive")
    log = TieredLog(str(tmp_path / "log"), archive=target)
    try:
        log.expire()  # retention as without an archive
        assert not os.path.exists(os.path.join(target, f"{TOPIC}-0"))
    finally:
        log.close()


@pytest.mark.parametrize(
    "config",
    [
        {"remote.storage.enable": "maybe"},
        {"local.retention.ms": -3},
        {"local.retention.bytes": "x"},
    ],
)
def test_bad_tiering_configs_are_refused(tmp_path: Any, config: dict[str, object]) -> None:
    with eoslog.open(str(tmp_path / "log"), durability="none") as broker:
        with pytest.raises(InvalidConfigError):
            broker.create_topic("t", 1, config=config)
        assert "t" not in broker.list_topics()


def test_tiering_configs_default_as_kafka_and_show_as_set(tmp_path: Any) -> None:
    with eoslog.open(str(tmp_path / "log"), durability="none") as broker:
        broker.create_topic("plain", 1)
        broker.create_topic("tiered", 1, config={"remote.storage.enable": True})
        plain = broker.log("plain", 0).config
        tiered = broker.log("tiered", 0).config
    assert plain.to_properties()["remote.storage.enable"] == "false"
    assert plain.to_properties()["local.retention.ms"] == -2
    assert tiered.to_properties()["remote.storage.enable"] == "true"
    assert tiered.local_retention() == (tiered.retention_ms, tiered.retention_bytes)
