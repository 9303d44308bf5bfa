"""Offset, time and transaction indexes behave as Kafka's (docs/kafka-behaviours.md items 4-22).

Specs: docs/format.md §5.4-§5.8 (offset and time index, preallocation, warm-section search),
§6.1-§6.3 (transaction index), and the byte vectors 5 and 6 of §11. Numbers not stated there come
from Kafka's OffsetIndexTest, TimeIndexTest and TransactionIndexTest (base offset 45, 30 entries).
Every file operation goes through PosixFileSystem.

docs/kafka-behaviours.md item -> test:
  4 test_reopened_txn_index_appends_after_existing_entries
  5 test_txn_index_sanity_check_rejects_an_entry_ending_below_the_base
  6 test_txn_last_offset_must_increase
  7 test_collect_aborted_transactions
  8 test_txn_truncate_to_and_reset
  9 test_aborted_txn_serde_round_trip_with_version_zero
 10 test_flush_of_a_never_created_txn_index_is_a_no_op
 11 test_lookup_returns_largest_entry_at_most_target, test_lookup_extreme_cases
 12 test_entry_out_of_range_raises_index_error
 13 test_append_to_full_index_raises_index_full
 14 test_append_out_of_order_raises_invalid_offset
 15 test_fetch_upper_bound_offset
 16 test_reopen_keeps_entries_and_is_full_after_trim
 17 test_truncate_to_drops_the_target_and_everything_above
 18 test_time_index_lookup
 19 test_time_index_truncate
 20 test_time_index_append_rules
 21 test_time_index_sanity_check_rejects_* (three tests)
 22 test_time_index_is_full_one_slot_early, test_time_index_last_entry_of_an_empty_index_*
"""

from __future__ import annotations

import random
import struct
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eoslog._ext import index as native
from eoslog.errors import (
    CorruptIndexError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
)
from eoslog.fs import PosixFileSystem
from eoslog.log.offset_index import OffsetIndex
from eoslog.log.time_index import TimeIndex
from eoslog.log.txn_index import AbortedTxn, TransactionIndex

BASE_OFFSET = 45
MAX_ENTRIES = 30
FS = PosixFileSystem()

# docs/format.md §11 vectors 5 and 6.
TXN_ENTRY_VECTOR = bytes.fromhex(
    "0000 00000000000003e8 0000000000000000 0000000000000002 0000000000000003"
)
OFFSET_ENTRY_VECTOR = bytes.fromhex("00000005 00001068")
TIME_ENTRY_VECTOR = bytes.fromhex("0000018bcfe56805 00000005")

# The four entries of TransactionIndexTest (pid, first, last, lso).
KAFKA_TXNS = [
    AbortedTxn(0, 0, 10, 11),
    AbortedTxn(1, 5, 15, 13),
    AbortedTxn(2, 18, 35, 25),
    AbortedTxn(3, 32, 50, 40),
]


def offset_index(
    tmp_path: Path, base: int = BASE_OFFSET, entries: int = MAX_ENTRIES
) -> OffsetIndex:
    return OffsetIndex(FS, str(tmp_path / f"{base:020d}.index"), base, max_index_bytes=entries * 8)


def time_index(tmp_path: Path, base: int = BASE_OFFSET, entries: int = MAX_ENTRIES) -> TimeIndex:
    return TimeIndex(
        FS, str(tmp_path / f"{base:020d}.timeindex"), base, max_index_bytes=entries * 12
    )


def txn_index(tmp_path: Path, base: int = 0) -> TransactionIndex:
    return TransactionIndex(FS, str(tmp_path / f"{base:020d}.txnindex"), base)


def fill_time_index(index: TimeIndex, count: int) -> None:
    """TimeIndexTest's appendEntries: (10 * i, base + 10 * i) for i in 1..count."""
    for i in range(1, count + 1):
        index.maybe_append(10 * i, BASE_OFFSET + 10 * i)


# --- The warm-section search (docs/format.md §5.8) ---------------------------------------------

KINDS = {
    # kind: (entry bytes, struct format of an entry, column of the key)
    native.OFFSET_KEY: (8, ">ii", 0),
    native.POSITION_KEY: (8, ">ii", 1),
    native.TIMESTAMP_KEY: (12, ">qi", 0),
    native.TIME_OFFSET_KEY: (12, ">qi", 1),
}
# Entry counts on either side of the warm sections (1024 offset, 682 time index entries).
WARM_EDGES = [0, 1, 2, 681, 682, 683, 684, 1023, 1024, 1025, 1026, 2049, 3000]


def pack_entries(kind: int, keys: list[int], rng: random.Random) -> bytes:
    """Entries whose `kind` column holds keys; the other column holds noise."""
    _, layout, column = KINDS[kind]
    entries = []
    for key in keys:
        noise = rng.randint(0, 2**31 - 1)
        entries.append(struct.pack(layout, *((key, noise) if column == 0 else (noise, key))))
    return b"".join(entries)


def linear_search(keys: list[int], target: int, upper: bool) -> int:
    """The answer read off a sorted list, with Kafka's one quirk (engine/index.h): an upper
    bound search whose target equals the first key answers the second slot, because Kafka's
    binary search never compares the first slot of its range."""
    if upper:
        if keys and keys[0] == target:
            return 1 if len(keys) > 1 else -1
        return next((slot for slot, key in enumerate(keys) if key >= target), -1)
    return max((slot for slot, key in enumerate(keys) if key <= target), default=-1)


@settings(max_examples=400, deadline=None)
@given(
    kind=st.sampled_from(sorted(KINDS)),
    count=st.one_of(st.sampled_from(WARM_EDGES), st.integers(0, 3000)),
    seed=st.integers(0, 2**32),
    pick=st.integers(0, 2**32),
    nudge=st.sampled_from([-1, 0, 1]),
    upper=st.booleans(),
)
def test_search_equals_a_linear_search_across_the_warm_section(
    kind: int, count: int, seed: int, pick: int, nudge: int, upper: bool
) -> None:
    rng = random.Random(seed)
    key = -rng.randint(0, 1000)
    keys = []
    for _ in range(count):
        key += rng.randint(1, 1000)
        keys.append(key)
    data = pack_entries(kind, keys, rng)
    # Aim at the keys (exact, just below, just above) and past both ends.
    candidates = [*keys, (keys[0] - 5) if keys else 0, (keys[-1] + 5) if keys else 0]
    target = candidates[pick % len(candidates)] + nudge
    assert native.search(data, count, kind, target, upper) == linear_search(keys, target, upper)


def test_upper_bound_search_skips_slot_zero_on_an_exact_match() -> None:
    data = struct.pack(">iiiiii", 0, 100, 1, 200, 2, 300)
    assert native.search(data, 3, native.POSITION_KEY, 100, upper=True) == 1
    assert native.search(data, 1, native.POSITION_KEY, 100, upper=True) == -1
    assert native.search(data, 3, native.POSITION_KEY, 99, upper=True) == 0
    assert native.search(data, 3, native.POSITION_KEY, 200, upper=True) == 1
    assert native.search(data, 3, native.POSITION_KEY, 100, upper=False) == 0


def test_search_rejects_an_unknown_kind_and_a_count_past_the_buffer() -> None:
    data = bytes(16)
    with pytest.raises(ValueError, match="unknown index key kind"):
        native.search(data, 2, 7, 0)
    with pytest.raises(ValueError, match="do not fit"):
        native.search(data, 3, native.OFFSET_KEY, 0)
    with pytest.raises(ValueError, match="do not fit"):
        native.search(data, -1, native.OFFSET_KEY, 0)


def test_native_entries_refuse_an_append_that_breaks_the_sort_order() -> None:
    entries = native.IndexEntries(8)
    entries.attach(bytearray(32), 0)
    entries.append(5, 0)
    with pytest.raises(AssertionError, match="must increase"):
        entries.append(5, 10)
    with pytest.raises(ValueError, match="outside int32"):
        entries.append(6, -1)
    with pytest.raises(ValueError, match="key kind 2 belongs to 12-byte entries"):
        entries.search(native.TIMESTAMP_KEY, 0)
    assert entries.count == 1


# --- Offset index (docs/format.md §5.4, §5.6) --------------------------------------------------


def test_new_index_file_is_preallocated_to_max_index_bytes_rounded_down(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000045.index"
    index = OffsetIndex(FS, str(path), BASE_OFFSET, max_index_bytes=30 * 8 + 5)
    assert path.stat().st_size == 240
    assert (index.entries, index.max_entries, index.last_offset) == (0, 30, BASE_OFFSET)
    assert not index.is_full
    index.close()
    assert path.stat().st_size == 0


def test_default_index_size_is_segment_index_bytes(tmp_path: Path) -> None:
    offsets = OffsetIndex(FS, str(tmp_path / "0.index"), 0)
    times = TimeIndex(FS, str(tmp_path / "0.timeindex"), 0)
    assert (offsets.length, offsets.max_entries) == (10_485_760, 1_310_720)
    assert (times.length, times.max_entries) == (10_485_756, 873_813)
    offsets.close()
    times.close()


def test_new_index_needs_room_for_one_entry(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot hold one entry"):
        OffsetIndex(FS, str(tmp_path / "0.index"), 0, max_index_bytes=7)


def test_lookup_returns_largest_entry_at_most_target(tmp_path: Path) -> None:
    rng = random.Random(45)
    index = offset_index(tmp_path)
    assert index.lookup(92) == (BASE_OFFSET, 0)
    offset, position, appended = BASE_OFFSET + 1, 0, []
    for _ in range(index.max_entries):
        offset += rng.randint(1, 15)
        position += rng.randint(1, 15)
        index.append(offset, position)
        appended.append((offset, position))
    for entry in appended:
        assert index.lookup(entry[0]) == entry
    for target in range(BASE_OFFSET, appended[-1][0] + 3):
        below = [entry for entry in appended if entry[0] <= target]
        assert index.lookup(target) == (below[-1] if below else (BASE_OFFSET, 0))


def test_lookup_extreme_cases(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    assert index.lookup(BASE_OFFSET) == (BASE_OFFSET, 0)
    for i in range(index.max_entries):
        index.append(BASE_OFFSET + i + 1, i)
    assert index.lookup(BASE_OFFSET) == (BASE_OFFSET, 0)
    last = BASE_OFFSET + index.max_entries
    assert index.lookup(last) == (last, index.max_entries - 1)
    assert index.lookup(2**63 - 1) == (last, index.max_entries - 1)
    assert index.lookup(-(2**63)) == (BASE_OFFSET, 0)


def test_entry_out_of_range_raises_index_error(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    with pytest.raises(IndexError):
        index.entry(0)
    for i in range(index.max_entries):
        index.append(BASE_OFFSET + i, i)
    assert [index.entry(i) for i in range(3)] == [(45, 0), (46, 1), (47, 2)]
    with pytest.raises(IndexError):
        index.entry(index.max_entries)
    with pytest.raises(IndexError):
        index.entry(-1)


def test_append_to_full_index_raises_index_full(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for i in range(index.max_entries):
        index.append(BASE_OFFSET + i + 1, i)
    assert index.is_full
    with pytest.raises(IndexFullError):
        index.append(BASE_OFFSET + index.max_entries + 1, 1)


def test_append_out_of_order_raises_invalid_offset(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(51, 0)
    with pytest.raises(InvalidOffsetError):
        index.append(50, 1)
    with pytest.raises(InvalidOffsetError):
        index.append(51, 1)
    assert (index.entries, index.last_offset) == (1, 51)


def test_append_outside_the_relative_range_raises_index_offset_overflow(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    with pytest.raises(IndexOffsetOverflowError):
        index.append(BASE_OFFSET - 1, 0)
    with pytest.raises(IndexOffsetOverflowError):
        index.append(BASE_OFFSET + 2**31, 0)
    index.append(BASE_OFFSET + 2**31 - 1, 0)
    assert index.entry(0) == (BASE_OFFSET + 2**31 - 1, 0)


def test_fetch_upper_bound_offset(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    first, second, third, fourth = (45, 0), (46, 10), (47, 23), (48, 37)
    assert index.fetch_upper_bound_offset(0, 5) is None
    for offset, position in (first, second, third, fourth):
        index.append(offset, position)
    assert index.fetch_upper_bound_offset(0, 5) == second
    assert index.fetch_upper_bound_offset(0, 10) == second
    assert index.fetch_upper_bound_offset(0, 23) == third
    assert index.fetch_upper_bound_offset(0, 22) == third
    assert index.fetch_upper_bound_offset(10, 24) == fourth
    assert index.fetch_upper_bound_offset(37, 1) is None
    assert index.fetch_upper_bound_offset(0, 200) is None
    assert index.fetch_upper_bound_offset(10, 200) is None
    # A fetch ending exactly at the first entry's position gets the second (Kafka's search).
    assert index.fetch_upper_bound_offset(0, 0) == second


def test_reopen_keeps_entries_and_is_full_after_trim(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(51, 0)
    index.append(52, 1)
    index.close()
    assert Path(index.path).stat().st_size == 16
    reopened = OffsetIndex(FS, index.path, BASE_OFFSET)
    assert reopened.lookup(51) == (51, 0)
    assert reopened.lookup(52) == (52, 1)
    assert (reopened.last_offset, reopened.entries, reopened.max_entries) == (52, 2, 2)
    assert reopened.is_full
    with pytest.raises(IndexFullError):
        reopened.append(53, 1)
    # Re-expanding (the active segment after load, §5.6) makes room again.
    assert reopened.resize(MAX_ENTRIES * 8)
    reopened.append(53, 2)
    assert reopened.lookup(60) == (53, 2)


def test_truncate_to_drops_the_target_and_everything_above(tmp_path: Path) -> None:
    index = OffsetIndex(FS, str(tmp_path / "0.index"), 0, max_index_bytes=10 * 8)
    index.truncate()
    for i in range(1, 10):
        index.append(i, i)
    index.truncate_to(12)
    assert (index.lookup(10), index.last_offset) == ((9, 9), 9)
    index.append(10, 10)
    index.truncate_to(10)
    assert (index.lookup(10), index.last_offset) == ((9, 9), 9)
    index.append(10, 10)
    index.truncate_to(9)
    assert (index.lookup(10), index.last_offset) == ((8, 8), 8)
    index.append(9, 9)
    index.truncate_to(5)
    assert (index.lookup(10), index.last_offset) == ((4, 4), 4)
    index.append(5, 5)
    index.truncate()
    assert (index.entries, index.last_offset) == (0, 0)
    index.append(0, 0)
    assert index.entries == 1


def test_offset_index_sanity_check_accepts_last_offset_equal_to_base(tmp_path: Path) -> None:
    index = offset_index(tmp_path, base=20)
    index.append(20, 0)
    index.sanity_check()


def test_offset_index_sanity_check_rejects_last_offset_below_base(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000045.index"
    path.write_bytes(struct.pack(">iiii", 1, 0, -1, 10))
    index = OffsetIndex(FS, str(path), BASE_OFFSET)
    assert index.last_offset == BASE_OFFSET - 1
    with pytest.raises(CorruptIndexError, match="below the base offset"):
        index.sanity_check()


def test_offset_index_sanity_check_rejects_a_length_not_a_multiple_of_8(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000045.index"
    path.write_bytes(struct.pack(">ii", 1, 0) + b"\x00\x00\x00")
    index = OffsetIndex(FS, str(path), BASE_OFFSET)
    assert index.entries == 1
    with pytest.raises(CorruptIndexError, match="not a multiple of 8"):
        index.sanity_check()


def test_offset_index_entry_is_the_format_vector(tmp_path: Path) -> None:
    index = offset_index(tmp_path, base=1000)
    index.append(1005, 4200)
    index.close()
    assert Path(index.path).read_bytes() == OFFSET_ENTRY_VECTOR


def test_resize_keeps_entries_and_reports_whether_the_size_changed(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for i in range(5):
        index.append(BASE_OFFSET + i, 10 * i)
    assert not index.resize(MAX_ENTRIES * 8 + 3)
    assert index.resize(7 * 8)
    assert (Path(index.path).stat().st_size, index.max_entries) == (56, 7)
    assert index.resize(60 * 8)
    assert (Path(index.path).stat().st_size, index.max_entries) == (480, 60)
    assert [index.entry(i) for i in range(5)] == [(45 + i, 10 * i) for i in range(5)]
    with pytest.raises(ValueError, match="holds 5 entries"):
        index.resize(4 * 8)
    assert index.length == 480


def test_reset_drops_every_entry_and_restores_max_index_bytes(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(50, 0)
    index.trim_to_valid_size()
    assert index.is_full
    index.reset()
    assert (index.entries, index.max_entries, index.length) == (0, MAX_ENTRIES, 240)


def test_read_only_index_reads_the_file_and_refuses_changes(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(50, 7)
    index.close()
    reader = OffsetIndex(FS, index.path, BASE_OFFSET, writable=False)
    assert (reader.entries, reader.lookup(51)) == (1, (50, 7))
    with pytest.raises(OSError):
        reader.append(60, 8)
    with pytest.raises(OSError):
        reader.truncate_to(0)
    reader.close()
    with pytest.raises(FileNotFoundError):
        OffsetIndex(FS, str(tmp_path / "missing.index"), 0, writable=False)


def test_closed_index_refuses_lookups_and_close_is_idempotent(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(50, 7)
    index.close()
    index.close()
    with pytest.raises(ValueError, match="closed"):
        index.lookup(50)
    with pytest.raises(ValueError, match="closed"):
        index.append(51, 8)


def test_delete_removes_the_file_and_reports_whether_it_existed(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(50, 7)
    assert index.delete()
    assert not Path(index.path).exists()
    assert not index.delete()


def test_rename_to_moves_the_file_and_keeps_the_entries(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(50, 7)
    target = str(tmp_path / "00000000000000000045.index.deleted")
    index.rename_to(target)
    assert index.path == target
    index.append(51, 9)
    assert index.lookup(51) == (51, 9)
    index.close()
    assert Path(target).read_bytes() == struct.pack(">iiii", 5, 7, 6, 9)


# --- Time index (docs/format.md §5.5) -------------------------------------------------------------


def test_time_index_lookup(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    assert index.lookup(100) == (-1, BASE_OFFSET)
    fill_time_index(index, MAX_ENTRIES - 1)
    assert index.lookup(9) == (-1, BASE_OFFSET)
    assert index.lookup(25) == (20, 65)
    assert index.lookup(30) == (30, 75)
    assert index.lookup(10_000) == (290, 335)


def test_time_index_entry(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    with pytest.raises(IndexError):
        index.entry(0)
    fill_time_index(index, MAX_ENTRIES - 1)
    assert [index.entry(i) for i in range(4)] == [(10, 55), (20, 65), (30, 75), (40, 85)]


def test_time_index_truncate(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    fill_time_index(index, MAX_ENTRIES - 1)
    index.truncate()
    assert (index.entries, index.last_entry) == (0, (-1, BASE_OFFSET))
    fill_time_index(index, MAX_ENTRIES - 1)
    index.truncate_to(10 + BASE_OFFSET)
    assert index.entries == 0
    fill_time_index(index, 5)
    index.truncate_to(BASE_OFFSET + 31)
    assert (index.entries, index.last_entry) == (3, (30, 75))
    index.truncate_to(BASE_OFFSET + 30)
    assert (index.entries, index.last_entry) == (2, (20, 65))


def test_time_index_append_rules(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    fill_time_index(index, MAX_ENTRIES - 1)
    with pytest.raises(IndexFullError):
        index.maybe_append(10_000, 1_000)
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(10_000, (MAX_ENTRIES - 2) * 10, skip_full_check=True)
    index.maybe_append(10_000, 1_000, skip_full_check=True)
    assert (index.entries, index.last_entry) == (MAX_ENTRIES, (10_000, 1_000))
    with pytest.raises(IndexFullError):
        index.maybe_append(10_001, 1_001, skip_full_check=True)


def test_time_index_skips_an_equal_timestamp_and_rejects_a_lower_one(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    index.maybe_append(-1, BASE_OFFSET)  # batches without timestamps leave the index empty
    assert index.entries == 0
    index.maybe_append(100, BASE_OFFSET + 5)
    index.maybe_append(100, BASE_OFFSET + 9)
    assert (index.entries, index.last_entry) == (1, (100, BASE_OFFSET + 5))
    with pytest.raises(ValueError, match="below the last timestamp"):
        index.maybe_append(99, BASE_OFFSET + 9)
    with pytest.raises(IndexOffsetOverflowError):
        index.maybe_append(200, BASE_OFFSET + 2**31)
    assert index.entries == 1


def test_time_index_sanity_check_rejects_last_timestamp_below_first(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000045.timeindex"
    path.write_bytes(struct.pack(">qiqi", 10, 1, 5, 2))
    index = TimeIndex(FS, str(path), BASE_OFFSET)
    with pytest.raises(CorruptIndexError, match="below its first timestamp"):
        index.sanity_check()


def test_time_index_sanity_check_rejects_last_offset_below_base(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000045.timeindex"
    path.write_bytes(struct.pack(">qiqi", 10, 1, 20, -1))
    index = TimeIndex(FS, str(path), BASE_OFFSET)
    with pytest.raises(CorruptIndexError, match="below the base offset"):
        index.sanity_check()


def test_time_index_sanity_check_rejects_a_length_not_a_multiple_of_12(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    index.sanity_check()
    fill_time_index(index, 5)
    index.sanity_check()
    index.close()
    with open(index.path, "ab") as file:
        file.write(b"\x00")
    reopened = TimeIndex(FS, index.path, BASE_OFFSET)
    assert reopened.entries == 5
    with pytest.raises(CorruptIndexError, match="not a multiple of 12"):
        reopened.sanity_check()


def test_time_index_is_full_one_slot_early(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    assert not index.is_full
    fill_time_index(index, MAX_ENTRIES - 2)
    assert not index.is_full
    index.maybe_append(10_000, 1_000)
    assert index.is_full


def test_time_index_last_entry_of_an_empty_index_is_no_timestamp_at_base(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    assert index.last_entry == (-1, BASE_OFFSET)
    index.maybe_append(1, BASE_OFFSET + 1)
    assert index.last_entry == (1, BASE_OFFSET + 1)


def test_time_index_resize(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    assert not index.resize(MAX_ENTRIES * 12)
    assert index.resize(MAX_ENTRIES // 2 * 12)
    assert index.resize(MAX_ENTRIES * 2 * 12)
    assert index.max_entries == 2 * MAX_ENTRIES


def test_time_index_reopen_finds_its_last_entry(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    fill_time_index(index, 3)
    index.close()
    reopened = TimeIndex(FS, index.path, BASE_OFFSET)
    assert (reopened.entries, reopened.last_entry, reopened.is_full) == (3, (30, 75), True)


def test_time_index_entry_is_the_format_vector(tmp_path: Path) -> None:
    index = time_index(tmp_path, base=1000)
    index.maybe_append(1_700_000_000_005, 1005)
    index.close()
    assert Path(index.path).read_bytes() == TIME_ENTRY_VECTOR


# --- Transaction index (docs/format.md §6) -----------------------------------------------------


def test_aborted_txn_entry_is_the_format_vector(tmp_path: Path) -> None:
    txn = AbortedTxn(producer_id=1000, first_offset=0, last_offset=2, last_stable_offset=3)
    assert txn.encode() == TXN_ENTRY_VECTOR
    index = txn_index(tmp_path)
    index.append(txn)
    assert Path(index.path).read_bytes() == TXN_ENTRY_VECTOR


def test_aborted_txn_serde_round_trip_with_version_zero() -> None:
    txn = AbortedTxn(983_493, 137, 299, 200)
    encoded = txn.encode()
    assert (len(encoded), encoded[:2]) == (34, b"\x00\x00")
    assert AbortedTxn.decode(encoded) == txn
    extreme = AbortedTxn(-1, -(2**63), 2**63 - 1, 0)
    assert AbortedTxn.decode(extreme.encode()) == extreme


def test_aborted_txn_version_is_the_first_byte_read_signed() -> None:
    entry = bytearray(TXN_ENTRY_VECTOR)
    entry[0] = 0x01
    with pytest.raises(CorruptIndexError, match="version 1"):
        AbortedTxn.decode(bytes(entry))
    entry[0] = 0x80  # -128 as a signed byte: not above 0, so Kafka accepts it
    assert AbortedTxn.decode(bytes(entry)).producer_id == 1000
    entry[0], entry[1] = 0x00, 0xFF  # the second byte is never read
    assert AbortedTxn.decode(bytes(entry)).producer_id == 1000


def test_reopened_txn_index_appends_after_existing_entries(tmp_path: Path) -> None:
    index = txn_index(tmp_path)
    for txn in KAFKA_TXNS:
        index.append(txn)
    index.close()
    reopened = txn_index(tmp_path)
    another = AbortedTxn(3, 50, 60, 55)
    reopened.append(another)
    assert reopened.all_entries() == [*KAFKA_TXNS, another]
    assert Path(reopened.path).stat().st_size == 5 * 34


def test_txn_index_sanity_check_rejects_an_entry_ending_below_the_base(tmp_path: Path) -> None:
    index = txn_index(tmp_path)
    for txn in KAFKA_TXNS:
        index.append(txn)
    index.sanity_check()
    index.close()
    reopened = TransactionIndex(FS, index.path, 100)
    with pytest.raises(CorruptIndexError, match="entry 0 ends at offset 10"):
        reopened.sanity_check()


def test_txn_last_offset_must_increase(tmp_path: Path) -> None:
    index = txn_index(tmp_path)
    index.append(AbortedTxn(1, 5, 15, 13))
    with pytest.raises(InvalidOffsetError):
        index.append(AbortedTxn(0, 0, 15, 11))
    with pytest.raises(InvalidOffsetError):
        index.append(AbortedTxn(0, 0, 10, 11))
    assert index.all_entries() == [AbortedTxn(1, 5, 15, 13)]


@pytest.mark.parametrize(
    ("fetch_offset", "upper_bound_offset", "expected", "complete"),
    [
        (0, 100, KAFKA_TXNS, False),
        (0, 32, KAFKA_TXNS[:3], True),
        (0, 35, KAFKA_TXNS, True),
        (10, 35, KAFKA_TXNS, True),
        (11, 35, KAFKA_TXNS[1:], True),
        (20, 41, KAFKA_TXNS[2:], False),
    ],
)
def test_collect_aborted_transactions(
    tmp_path: Path,
    fetch_offset: int,
    upper_bound_offset: int,
    expected: list[AbortedTxn],
    complete: bool,
) -> None:
    index = txn_index(tmp_path)
    for txn in KAFKA_TXNS:
        index.append(txn)
    found, is_complete = index.collect_aborted(fetch_offset, upper_bound_offset)
    assert (found, is_complete) == (expected, complete)
    assert all(type(txn) is AbortedTxn for txn in found)


def test_txn_truncate_to_and_reset(tmp_path: Path) -> None:
    txns = [AbortedTxn(0, 0, 10, 2), AbortedTxn(1, 5, 15, 16), *KAFKA_TXNS[2:]]
    index = txn_index(tmp_path)
    for txn in txns:
        index.append(txn)
    index.truncate_to(51)
    assert index.collect_aborted(0, 100)[0] == txns
    index.truncate_to(50)
    assert index.collect_aborted(0, 100)[0] == txns[:3]
    assert Path(index.path).stat().st_size == 3 * 34
    with pytest.raises(InvalidOffsetError):
        index.append(AbortedTxn(9, 30, 35, 36))  # the order check resumes from the kept entry
    index.append(AbortedTxn(9, 30, 36, 37))
    index.reset()
    assert index.collect_aborted(0, 100) == ([], False)
    assert not Path(index.path).exists()  # never left empty: an empty file is damage
    index.append(AbortedTxn(9, 0, 1, 2))
    assert index.all_entries() == [AbortedTxn(9, 0, 1, 2)]
    index.truncate_to(1)
    assert not Path(index.path).exists()


def test_an_empty_txn_index_file_fails_its_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(b"")
    index = TransactionIndex(FS, str(path), 0)
    with pytest.raises(CorruptIndexError, match="the file is empty"):
        index.sanity_check()
    index.reset()
    index.sanity_check()
    assert not path.exists()


def test_flush_of_a_never_created_txn_index_is_a_no_op(tmp_path: Path) -> None:
    index = txn_index(tmp_path)
    path = Path(index.path)
    index.flush()
    index.reset()
    index.sanity_check()
    assert index.collect_aborted(0, 100) == ([], False)
    assert not path.exists()
    index.append(AbortedTxn(0, 0, 10, 2))
    index.flush()
    assert path.stat().st_size == 34


def test_txn_index_drops_a_partial_trailing_entry_and_overwrites_it(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(KAFKA_TXNS[0].encode() + KAFKA_TXNS[1].encode()[:20])
    index = TransactionIndex(FS, str(path), 0)
    assert index.all_entries() == KAFKA_TXNS[:1]
    index.append(KAFKA_TXNS[1])
    assert path.read_bytes() == KAFKA_TXNS[0].encode() + KAFKA_TXNS[1].encode()


def test_txn_index_reports_an_entry_of_unknown_version(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    bad = bytearray(KAFKA_TXNS[1].encode())
    bad[0] = 2
    path.write_bytes(KAFKA_TXNS[0].encode() + bytes(bad))
    index = TransactionIndex(FS, str(path), 0)
    with pytest.raises(CorruptIndexError, match="entry 1 has version 2"):
        index.all_entries()
    with pytest.raises(CorruptIndexError, match=str(path)):
        index.collect_aborted(0, 100)
    # The walk stops before the bad entry when the first one completes the search (Kafka reads
    # entries one by one).
    assert index.collect_aborted(0, 11) == ([KAFKA_TXNS[0]], True)


def test_txn_index_stays_readable_after_close_and_reopens_on_append(tmp_path: Path) -> None:
    index = txn_index(tmp_path)
    index.append(KAFKA_TXNS[0])
    index.close()
    index.append(KAFKA_TXNS[1])
    assert index.collect_aborted(0, 100)[0] == KAFKA_TXNS[:2]
    index.close()
    assert txn_index(tmp_path).all_entries() == KAFKA_TXNS[:2]


def test_txn_index_rename_and_delete(tmp_path: Path) -> None:
    index = txn_index(tmp_path)
    target = str(tmp_path / "00000000000000000000.txnindex.deleted")
    index.rename_to(target)  # no file yet: only the name changes
    index.append(KAFKA_TXNS[0])
    assert Path(target).exists()
    index.rename_to(str(tmp_path / "renamed.txnindex"))
    index.append(KAFKA_TXNS[1])
    assert index.collect_aborted(0, 100)[0] == KAFKA_TXNS[:2]
    assert index.delete()
    assert not index.delete()
    assert (index.is_empty, index.entries) == (True, 0)


# --- Concurrency (mapped_index.py "Thread safety") ------------------------------------------


def test_lookups_on_other_threads_see_whole_entries_while_the_writer_trims(tmp_path: Path) -> None:
    """Readers keep looking up while the writer appends, truncates, trims the file below the
    old mapping and re-expands it: every answer is an entry that was appended (or the empty
    answer), and nothing faults."""
    index = offset_index(tmp_path, entries=4096)
    stop = threading.Event()
    wrong: list[tuple[int, int]] = []

    def read() -> None:
        rng = random.Random(7)
        while not stop.is_set():
            found = index.lookup(BASE_OFFSET + rng.randint(0, 5000))
            if found != (BASE_OFFSET, 0) and found[1] != 3 * (found[0] - BASE_OFFSET):
                wrong.append(found)

    readers = [threading.Thread(target=read) for _ in range(2)]
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, inside the writer's steps too
    for reader in readers:
        reader.start()
    try:
        for round_ in range(60):
            for i in range(index.entries, 2000 + round_ * 20):
                index.append(BASE_OFFSET + i, 3 * i)
            index.truncate_to(BASE_OFFSET + 500 + round_)
            index.trim_to_valid_size()
            index.resize(4096 * 8)
    finally:
        stop.set()
        for reader in readers:
            reader.join()
        sys.setswitchinterval(switch_interval)
    assert wrong == []
