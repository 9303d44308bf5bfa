"""The coordinators' read of an internal topic at open (eoslog.coordinator.log_replay): the
columnar chunks give every record with its batch's fields, as the batch-by-batch walk does,
gaps included; damaged bytes raise the walk's error, naming the file and the byte."""

from __future__ import annotations

import pytest

import eoslog
from eoslog.coordinator import log_replay
from eoslog.errors import CorruptRecordError
from tests.coordinator.test_compacted_replay import history
from tests.support import compaction, logtools
from tests.support.batches import flip_bit


def walked(log: object) -> list[tuple[object, ...]]:
    """(offset, key, value, producer id, transactional, control, batch byte) per record."""
    return [
        (r.offset, r.key, r.value, h.producer_id, h.is_transactional, h.is_control, p.position)
        for h, records, p in log_replay.located_batches(log)  # type: ignore[arg-type]
        for r in records
    ]


def chunked(log: object) -> list[tuple[object, ...]]:
    return [
        row
        for chunk in log_replay.chunks(log)  # type: ignore[arg-type]
        for row in zip(
            chunk.offsets,
            chunk.keys,
            chunk.values,
            chunk.producer_ids,
            chunk.transactional,
            chunk.control,
            chunk.batch_positions,
            strict=True,
        )
    ]


@pytest.mark.parametrize("compacted", [False, True], ids=["full", "compacted"])
def test_chunks_give_every_record_with_its_batch_fields_as_the_batch_walk_does(
    broker: eoslog.Broker, clock: logtools.Clock, compacted: bool
) -> None:
    history(broker, clock).abort_transaction()
    for log in (broker.log("__transaction_state", 0), broker.log("__consumer_offsets", 0)):
        batches = compaction.whole_batches(log)
        kept = (
            compaction.compacted(batches, log.last_stable_offset, past_horizon=True)
            if compacted
            else [batch for _, batch, _ in batches]
        )
        stand_in = compaction.CompactedLog(log, kept)
        assert chunked(stand_in) == walked(stand_in)
        assert any(row[5] for row in chunked(stand_in)) == (log.topic == "__consumer_offsets")


def test_a_damaged_batch_raises_the_batch_walks_error_naming_the_file_and_byte(
    broker: eoslog.Broker, clock: logtools.Clock
) -> None:
    history(broker, clock).abort_transaction()
    log = broker.log("__consumer_offsets", 0)
    batches = [batch for _, batch, _ in compaction.whole_batches(log)]
    batches[7] = flip_bit(batches[7], 8 * len(batches[7]) - 3)  # a record byte: the CRC fails
    stand_in = compaction.CompactedLog(log, batches)
    with pytest.raises(CorruptRecordError) as walking:
        walked(stand_in)
    with pytest.raises(CorruptRecordError) as chunking:
        chunked(stand_in)
    assert str(chunking.value) == str(walking.value)
    assert f"compacted at byte {sum(map(len, batches[:7]))}" in str(chunking.value)
