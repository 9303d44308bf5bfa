"""Producer-id allocation (docs/coordinator.md §5): blocks of 1,000, the end of a block durable
before any id in it is used, so that no id is handed out twice, across reopens, crashes and
power losses."""

from __future__ import annotations

import os
import random

import pytest

import eoslog
from eoslog.coordinator.producer_ids import PRODUCER_ID_BLOCK_SIZE, ProducerIdManager
from eoslog.errors import KafkaStorageError
from eoslog.fs_twin import RecordingFileSystem

ROOT = "/data"
LOG_DIR = "/data/log"


def test_ids_are_consecutive_within_a_block_and_the_block_end_is_persisted_first() -> None:
    persisted: list[int] = []
    manager = ProducerIdManager(0, persisted.append)
    ids = [manager.generate() for _ in range(PRODUCER_ID_BLOCK_SIZE + 1)]
    assert ids == list(range(PRODUCER_ID_BLOCK_SIZE + 1))
    assert persisted == [PRODUCER_ID_BLOCK_SIZE, 2 * PRODUCER_ID_BLOCK_SIZE]


def test_a_failed_persist_hands_out_no_id_and_the_next_call_tries_again() -> None:
    attempts: list[int] = []

    def persist(end: int) -> None:
        attempts.append(end)
        if len(attempts) == 1:
            raise KafkaStorageError("disk full")

    manager = ProducerIdManager(3000, persist)
    with pytest.raises(KafkaStorageError):
        manager.generate()
    assert manager.generate() == 3000
    assert attempts == [4000, 4000]


def test_a_reopened_broker_never_reuses_an_id(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "data")
    seen: set[int] = set()
    for _ in range(3):
        with eoslog.open(path, background=False) as broker:
            ids = [broker.init_producer_id() for _ in range(7)]
        assert all(epoch == 0 for _, epoch in ids)
        fresh = {producer_id for producer_id, _ in ids}
        assert not fresh & seen
        seen |= fresh
    # Each open started a new block: the rest of the previous one is skipped.
    assert sorted(seen)[::7] == [0, PRODUCER_ID_BLOCK_SIZE, 2 * PRODUCER_ID_BLOCK_SIZE]


@pytest.mark.parametrize("seed", range(20))
def test_no_power_loss_image_reuses_an_id_handed_out_before_it(seed: int) -> None:
    twin = RecordingFileSystem(seed)
    twin.makedirs(ROOT, durable=True)
    broker = eoslog.open(LOG_DIR, "commit", fs=twin, background=False)
    handed_out = [broker.init_producer_id()[0] for _ in range(PRODUCER_ID_BLOCK_SIZE + 5)]
    image = twin.crash_image(random.Random(seed))
    reopened = eoslog.open(LOG_DIR, "commit", fs=image, background=False)
    try:
        assert reopened.init_producer_id()[0] > max(handed_out)
    finally:
        reopened.close()


def test_a_failed_block_write_is_a_storage_error_and_hands_out_nothing() -> None:
    twin = RecordingFileSystem(7)
    twin.makedirs(ROOT, durable=True)
    broker = eoslog.open(LOG_DIR, "commit", fs=twin, background=False)
    twin.fail_at(twin.calls, "EIO")  # the first call of the block write
    with pytest.raises(KafkaStorageError):
        broker.init_producer_id()
    assert broker.init_producer_id()[0] == 0
