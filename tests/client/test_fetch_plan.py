"""The read_committed filter in Cython (eoslog._ext.readcommitted, docs/format.md §6.4) against its
readable twin (tests/support/fetch_reference.py plan_fetch_reference): the same plan, and the
same error, for random fetches of transactional, idempotent and plain batches, markers of both
types and random lists of aborted transactions."""

from __future__ import annotations

import random

import pytest

from eoslog._ext import scan
from eoslog.client.fetch import FetchPlan, plan_fetch
from eoslog.errors import CorruptRecordError
from eoslog.record import codec, layout
from tests.support.fetch_reference import plan_fetch_reference

TS = 1_700_000_000_000


def random_fetch(rng: random.Random) -> tuple[bytes, list[tuple[int, int]]]:
    """Whole batches at consecutive offsets from 0, and the aborted transactions among
    them."""
    data = bytearray()
    offset = 0
    open_txns: dict[int, int] = {}
    aborted: list[tuple[int, int]] = []
    for _ in range(rng.randint(0, 25)):
        producer_id = rng.choice([-1, 5, 6, 7])
        if producer_id >= 0 and producer_id in open_txns and rng.random() < 0.3:
            commit = rng.random() < 0.5
            batch = bytearray(
                codec.build_control_batch(
                    1 if commit else 0,
                    producer_id=producer_id,
                    producer_epoch=0,
                    coordinator_epoch=0,
                    timestamp=TS,
                )
            )
            first = open_txns.pop(producer_id)
            if not commit:
                aborted.append((producer_id, first))
            count = 1
        else:
            transactional = producer_id >= 0 and rng.random() < 0.8
            builder = codec.BatchBuilder(
                producer_id=producer_id,
                producer_epoch=0 if producer_id >= 0 else -1,
                base_sequence=0 if producer_id >= 0 else -1,
                is_transactional=transactional,
            )
            count = rng.randint(1, 4)
            for i in range(count):
                builder.append(TS, None, b"v%d" % (offset + i))
            batch = bytearray(builder.build())
            if transactional:
                open_txns.setdefault(producer_id, offset)
        codec.stamp_batch(batch, base_offset=offset, partition_leader_epoch=0)
        data += batch
        offset += count
    return bytes(data), aborted


def outcome(function: object, *args: object) -> object:
    try:
        plan = function(*args)  # type: ignore[operator]
    except Exception as error:  # the errors must match too
        return type(error), str(error)
    assert isinstance(plan, FetchPlan)
    return plan


@pytest.mark.parametrize("seed", range(300))
def test_the_cython_filter_plans_exactly_as_its_twin(seed: int) -> None:
    rng = random.Random(seed)
    data, aborted = random_fetch(rng)
    headers = [header for _, header in codec.iter_headers(data)]
    rows = scan.scan_batches(data, verify_crc=False)[0]
    # A fetch starts at or below the last offset the log returned (inside a batch too).
    end = headers[-1].last_offset if headers else 0
    for fetch_offset in (0, rng.randint(0, end)):
        for listed in (aborted, None, aborted[: len(aborted) // 2]):
            for records_max in (None, rng.randint(1, 10)):
                args = (data, fetch_offset, listed, records_max)
                expected = outcome(plan_fetch_reference, *args)
                assert outcome(plan_fetch, *args) == expected, args
                # Planned from the rows a read scanned (FetchResult.batches): the same plan.
                assert outcome(plan_fetch, *args, rows) == expected, args


def test_aborted_batches_are_dropped_and_the_position_passes_the_marker() -> None:
    rng = random.Random(1)
    data, aborted = random_fetch(rng)
    while not aborted:
        data, aborted = random_fetch(rng)
    plan = plan_fetch(data, 0, aborted)
    uncommitted = plan_fetch(data, 0, None)
    assert plan.records < uncommitted.records
    assert plan.next_offset == uncommitted.next_offset


def first_batch_size(data: bytes) -> int:
    """The size of the first batch of `data`."""
    return next(iter(codec.iter_headers(data)))[1].size_in_bytes


def test_rows_that_do_not_tile_the_records_are_refused() -> None:
    """Rows handed to the plan (FetchResult.batches) are trusted for positions only when
    they lie end to end over the records; rows that end where the records end but do not
    tile them are a caller's error."""
    rng = random.Random(7)
    data, aborted = random_fetch(rng)
    while len(list(codec.iter_headers(data))) < 2:
        data, aborted = random_fetch(rng)
    rows = scan.scan_batches(data, verify_crc=False)[0]
    longer_first = rows.copy()
    longer_first["size"][0] += 1
    for bad in (rows[1:], longer_first):
        with pytest.raises(ValueError, match="does not follow"):
            plan_fetch(data, 0, aborted, None, bad)
    # Rows of other bytes (records replaced after the read) are not used: the plan scans,
    # and finds the first batch again, out of order.
    extended = data + data[: first_batch_size(data)]
    scanned = outcome(plan_fetch, extended, 0, aborted, None)
    assert outcome(plan_fetch, extended, 0, aborted, None, rows) == scanned
    assert isinstance(scanned, tuple) and scanned[0] is CorruptRecordError
    with pytest.raises(TypeError):
        plan_fetch(data, 0, aborted, None, rows["position"].copy())


@pytest.mark.parametrize("damage", ["bad length", "short control key"])
def test_damaged_batches_raise_the_same_typed_error(damage: str) -> None:
    builder = codec.BatchBuilder()
    builder.append(TS, None, b"x")
    good = builder.build()
    if damage == "bad length":
        data = good + good[:8] + (10).to_bytes(4, "big") + good[12:]
        listed: list[tuple[int, int]] | None = None
    else:
        data = _control_with_short_key()  # framing and CRC valid, the key 2 bytes
        listed = [(5, 0)]
    native = outcome(plan_fetch, data, 0, listed, None)
    assert native == outcome(plan_fetch_reference, data, 0, listed, None)
    assert isinstance(native, tuple) and issubclass(native[0], ValueError)


def _control_with_short_key() -> bytes:
    builder = codec.BatchBuilder(
        producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    builder.append(TS, b"\x00\x00", b"\x00\x00\x00\x00\x00\x00")
    batch = bytearray(builder.build())
    attributes = int.from_bytes(
        batch[layout.ATTRIBUTES_OFFSET : layout.ATTRIBUTES_OFFSET + 2], "big"
    )
    batch[layout.ATTRIBUTES_OFFSET : layout.ATTRIBUTES_OFFSET + 2] = (
        attributes | layout.CONTROL_MASK
    ).to_bytes(2, "big")
    from kafka.record.util import calc_crc32c

    crc = calc_crc32c(bytes(batch[layout.ATTRIBUTES_OFFSET :]))
    batch[layout.CRC_OFFSET : layout.CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    return bytes(batch)


@pytest.mark.parametrize("plan", [plan_fetch, plan_fetch_reference])
@pytest.mark.parametrize("aborted", [None, [], [(7, 0)]])
def test_a_data_batch_whose_control_bit_flipped_is_refused_not_skipped(
    plan: object, aborted: list[tuple[int, int]] | None
) -> None:
    # The attributes are under the CRC, but a skipped batch was never decoded, so a data batch
    # read as a control batch (or as an aborted one) vanished without an error: a hostile-file
    # corpus find (a flip at byte 22 of a segment's first batch, below the recovery point).
    builder = codec.BatchBuilder(
        is_transactional=True, producer_id=7, producer_epoch=0, base_sequence=0
    )
    for number in range(3):
        builder.append(1_700_000_000_000, None, b"v%d" % number)
    records = bytearray(builder.build())
    control_bit = layout.CONTROL_MASK.bit_length() - 1
    records[layout.ATTRIBUTES_OFFSET + 1] ^= 1 << control_bit
    with pytest.raises(CorruptRecordError, match="CRC"):
        plan(bytes(records), 0, aborted)  # type: ignore[operator]
