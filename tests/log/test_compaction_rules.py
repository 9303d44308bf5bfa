"""The cleaner's decisions (eoslog.log.cleaner.clean_segment_bytes) against Kafka's documented
log compaction: the latest record per key stays with its offset; older ones, aborted data and,
after delete.retention.ms, tombstones and markers with no data left go; the last batch of
each producer stays (emptied if need be); a kept batch keeps its base and last offset."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eoslog.log.cleaner import CleaningRules, clean_segment_bytes
from eoslog.record import codec, control, layout
from eoslog.record.types import BatchHeader, Record
from tests.support import logtools

TS = logtools.TS
DAY_MS = 86_400_000
RULES = CleaningRules(now_ms=TS, delete_retention_ms=DAY_MS)


def batch(
    base_offset: int,
    pairs: Sequence[tuple[bytes, bytes | None]],
    *,
    producer_id: int = -1,
    transactional: bool = False,
    compression: int = 0,
) -> bytes:
    builder = codec.BatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_offset if producer_id >= 0 else -1,
        is_transactional=transactional,
        compression=compression,
    )
    for key, value in pairs:
        assert builder.append(TS, key, value)
    return builder.build()


def marker(offset: int, producer_id: int, control_type: int) -> bytes:
    return codec.build_control_batch(
        control_type,
        producer_id=producer_id,
        producer_epoch=0,
        coordinator_epoch=0,
        timestamp=TS,
        base_offset=offset,
    )


def records(segment: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    """The data records (control batches left out), as (offset, key, value)."""
    return [
        (r.offset, r.key, r.value)
        for position in _positions(segment)
        if not codec.read_header(segment, position).attributes & layout.CONTROL_MASK
        for r in codec.batch_records(segment, position)
    ]


def headers(segment: bytes) -> list[BatchHeader]:
    return logtools.headers(segment) if segment else []


def all_records(segment: bytes) -> list[Record]:
    return [r for h_pos in _positions(segment) for r in codec.batch_records(segment, h_pos)]


def _positions(segment: bytes) -> list[int]:
    return [position for position, _ in codec.iter_headers(segment)] if segment else []


def test_only_the_latest_record_of_each_key_stays_at_its_offset() -> None:
    log = batch(0, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")]) + batch(3, [(b"b", b"2")])
    [cleaned] = clean_segment_bytes([log], RULES)
    assert records(cleaned) == [(2, b"a", b"2"), (3, b"b", b"2")]


def test_a_kept_batch_keeps_its_base_offset_and_last_offset_delta() -> None:
    log = batch(10, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1")])
    log += batch(14, [(b"c", b"2")])
    [cleaned] = clean_segment_bytes([log], RULES)
    [first, second] = headers(cleaned)
    assert (first.base_offset, first.last_offset_delta, first.records_count) == (10, 3, 2)
    assert (second.base_offset, second.records_count) == (14, 1)
    assert records(cleaned) == [(11, b"b", b"1"), (12, b"a", b"2"), (14, b"c", b"2")]


def test_keys_are_compared_across_segments_and_segments_stay_apart() -> None:
    first = batch(0, [(b"a", b"1"), (b"b", b"1")])
    second = batch(2, [(b"a", b"2")])
    cleaned = clean_segment_bytes([first, second], RULES)
    assert [records(segment) for segment in cleaned] == [[(1, b"b", b"1")], [(2, b"a", b"2")]]


def test_a_batch_with_every_record_kept_is_copied_byte_for_byte() -> None:
    log = batch(0, [(b"a", b"1"), (b"b", b"1")])
    assert clean_segment_bytes([log], RULES) == [log]


def test_a_compressed_batch_is_rewritten_with_its_codec() -> None:
    log = batch(0, [(b"a", b"1"), (b"a", b"2"), (b"b", b"3")], compression=layout.COMPRESSION_LZ4)
    [cleaned] = clean_segment_bytes([log], RULES)
    assert headers(cleaned)[0].attributes & layout.COMPRESSION_MASK == layout.COMPRESSION_LZ4
    assert records(cleaned) == [(1, b"a", b"2"), (2, b"b", b"3")]


def test_a_tombstone_stays_until_the_horizon_set_at_its_first_cleaning_passes() -> None:
    log = batch(0, [(b"a", b"1")]) + batch(1, [(b"a", None)])
    [once] = clean_segment_bytes([log], RULES)
    assert records(once) == [(1, b"a", None)]
    [header] = headers(once)
    assert header.attributes & layout.DELETE_HORIZON_MASK
    assert header.base_timestamp == TS + DAY_MS
    # The record's own timestamp reads back unchanged against the new base.
    assert [r.timestamp for r in all_records(once)] == [TS]
    just_before = CleaningRules(now_ms=TS + DAY_MS - 1, delete_retention_ms=DAY_MS)
    assert clean_segment_bytes([once], just_before) == [once]
    at_horizon = CleaningRules(now_ms=TS + DAY_MS, delete_retention_ms=DAY_MS)
    assert clean_segment_bytes([once], at_horizon) == [b""]


def test_the_last_batch_of_a_producer_stays_empty_when_all_its_records_go() -> None:
    log = batch(0, [(b"a", b"1")], producer_id=7) + batch(1, [(b"a", b"2")])
    rules = CleaningRules(now_ms=TS, delete_retention_ms=DAY_MS, producer_last_offsets={7: 0})
    [cleaned] = clean_segment_bytes([log], rules)
    [emptied, _kept] = headers(cleaned)
    assert (emptied.base_offset, emptied.last_offset_delta, emptied.records_count) == (0, 0, 0)
    assert (emptied.producer_id, emptied.base_sequence) == (7, 0)
    assert records(cleaned) == [(1, b"a", b"2")]


def test_a_producers_earlier_batch_goes_when_all_its_records_go() -> None:
    log = batch(0, [(b"a", b"1")], producer_id=7) + batch(1, [(b"a", b"2")], producer_id=7)
    rules = CleaningRules(now_ms=TS, delete_retention_ms=DAY_MS, producer_last_offsets={7: 1})
    [cleaned] = clean_segment_bytes([log], rules)
    assert [h.base_offset for h in headers(cleaned)] == [1]


def test_aborted_data_goes_and_counts_for_no_key() -> None:
    log = batch(0, [(b"a", b"committed")])
    log += batch(1, [(b"a", b"aborted")], producer_id=3, transactional=True)
    log += marker(2, 3, control.ABORT)
    [cleaned] = clean_segment_bytes([log], RULES)
    assert records(cleaned) == [(0, b"a", b"committed")]
    # The marker has no data left: it stays, with a delete horizon, until that passes.
    assert [h.base_offset for h in headers(cleaned)] == [0, 2]
    later = CleaningRules(now_ms=TS + DAY_MS, delete_retention_ms=DAY_MS)
    assert [h.base_offset for h in headers(clean_segment_bytes([cleaned], later)[0])] == [0]


def test_data_of_a_transaction_aborted_past_the_range_goes_too() -> None:
    log = batch(0, [(b"a", b"committed")])
    log += batch(1, [(b"a", b"aborted")], producer_id=3, transactional=True)
    rules = CleaningRules(now_ms=TS, delete_retention_ms=DAY_MS, aborted=[(3, 1, 9)])
    assert records(clean_segment_bytes([log], rules)[0]) == [(0, b"a", b"committed")]


def test_a_commit_marker_stays_while_data_of_its_transaction_stays() -> None:
    log = batch(0, [(b"a", b"1"), (b"b", b"1")], producer_id=3, transactional=True)
    log += marker(2, 3, control.COMMIT)
    log += batch(3, [(b"a", b"2")])
    later = CleaningRules(now_ms=TS + 10 * DAY_MS, delete_retention_ms=DAY_MS)
    [cleaned] = clean_segment_bytes([log], later)
    assert [h.base_offset for h in headers(cleaned)] == [0, 2, 3]
    assert records(cleaned) == [(1, b"b", b"1"), (3, b"a", b"2")]


def test_a_commit_marker_goes_a_delete_retention_after_its_data_is_gone() -> None:
    log = batch(0, [(b"a", b"1")], producer_id=3, transactional=True)
    log += marker(1, 3, control.COMMIT)
    log += batch(2, [(b"a", b"2")])
    [once] = clean_segment_bytes([log], RULES)
    assert [h.base_offset for h in headers(once)] == [1, 2]
    later = CleaningRules(now_ms=TS + DAY_MS, delete_retention_ms=DAY_MS)
    assert [h.base_offset for h in headers(clean_segment_bytes([once], later)[0])] == [2]


@st.composite
def keyed_logs(draw: st.DrawFn) -> tuple[list[bytes], list[tuple[int, bytes, bytes | None]]]:
    """Segments of batches of keyed records (a few keys, some tombstones, some compressed)
    and the records in offset order."""
    written: list[tuple[int, bytes, bytes | None]] = []
    segments = []
    offset = 0
    for _ in range(draw(st.integers(1, 4))):
        data = b""
        for _ in range(draw(st.integers(0, 4))):
            pairs = draw(
                st.lists(
                    st.tuples(
                        st.sampled_from([b"a", b"b", b"c", b"d", b"long key " * 3]),
                        st.one_of(st.none(), st.binary(max_size=12)),
                    ),
                    min_size=1,
                    max_size=6,
                )
            )
            compression = draw(st.sampled_from([0, 0, layout.COMPRESSION_LZ4]))
            data += batch(offset, pairs, compression=compression)
            written += [(offset + i, key, value) for i, (key, value) in enumerate(pairs)]
            offset += len(pairs)
        segments.append(data)
    return segments, written


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=keyed_logs(), days=st.integers(0, 2))
def test_cleaning_keeps_the_latest_value_of_every_key_at_its_offset(
    log: tuple[list[bytes], list[tuple[int, bytes, bytes | None]]], days: int
) -> None:
    segments, written = log
    latest = {key: (offset, key, value) for offset, key, value in written}
    expected = sorted(latest.values())
    rules = CleaningRules(now_ms=TS, delete_retention_ms=DAY_MS)
    once = clean_segment_bytes(segments, rules)
    assert [r for segment in once for r in records(segment)] == expected
    # Cleaning again changes nothing until the horizon; after it the tombstones are gone.
    later = CleaningRules(now_ms=TS + days * DAY_MS, delete_retention_ms=DAY_MS)
    twice = clean_segment_bytes(once, later)
    if days == 0:
        assert twice == once
    else:
        assert [r for segment in twice for r in records(segment)] == [
            r for r in expected if r[2] is not None
        ]
    for before, after in zip(segments, twice, strict=True):
        assert {h.base_offset for h in headers(after)} <= {h.base_offset for h in headers(before)}


def test_data_of_a_transaction_whose_marker_is_past_the_range_stays_and_shadows_nothing() -> None:
    log = batch(0, [(b"a", b"committed")])
    log += batch(1, [(b"a", b"undecided"), (b"b", b"undecided")], producer_id=3, transactional=True)
    [cleaned] = clean_segment_bytes([log], RULES)
    assert records(cleaned) == [
        (0, b"a", b"committed"),
        (1, b"a", b"undecided"),
        (2, b"b", b"undecided"),
    ]
