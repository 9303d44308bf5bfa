"""Family 8 (docs/reliability.md): the history checker on a compacted partition. The log cleaner
may remove an older record of a record key once a later one of that key stands committed, and
an aborted record; passing over such a record is no skip and its absence no loss, and every
other rule stands (tests/support/history_model.py, "cleanable"). Each test plants one anomaly
in a small legal history of a compacted partition, built by hand; the legal history passes.

The legal history, of partition kv/0 (record keys k1, k2, k3):

    offset 0 a k1, 1 b k2   an idempotent send
    offset 2 c k1           an idempotent send: a is now cleanable
    offset 3 d k2           a committed transaction (producer 7): b is now cleanable
    offset 5 e k1           an aborted transaction: e is cleanable
    offset 7 f k3           an idempotent send
    (offset 8 t k3          in some tests: a tombstone, which makes f cleanable)

A read_committed reader read a before c was written; after a clean, a second one reads from
offset 0 and gets c, d, f, and a read_uncommitted reader the same; the log scan holds c, d, its
COMMIT marker and f.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from tests.reliability.f08_history.test_history_checker import History, data, found, marker
from tests.support.history import (
    READ_UNCOMMITTED,
    Recorder,
    ScanRecord,
    Write,
    identity,
    load,
    read_records,
)

KV = "kv/0"
LEGAL_SCAN = [
    data(KV, 2, "c"),
    data(KV, 3, "d", 7, 0),
    marker(KV, 4, 7, 1, "commit"),
    data(KV, 7, "f"),
]


def placed(offset: int, value: str, record_key: str) -> Write:
    return Write(KV, value, offset, record_key)


def reads(*values: str) -> list[tuple[str, int, str]]:
    offsets = {"a": 0, "b": 1, "c": 2, "d": 3, "e": 5, "f": 7, "t": 8}
    return [(KV, offsets[value], value) for value in values]


def compacted(
    *,
    declared: bool = True,
    keys_of_d_and_e: tuple[str, str] = ("k2", "k1"),
    early: Sequence[str] = (),
    late_start: int = 0,
    late: Sequence[str] = ("c", "d", "f"),
    scan: Sequence[ScanRecord] = LEGAL_SCAN,
    tombstone_retention_ms: int | None = None,
    indeterminate: str | None = None,
    e_outcome: str = "fail",
) -> History:
    """The legal history of the module docstring, or a variant: `declared` False leaves out
    that kv/0 is compacted; `keys_of_d_and_e` are d's and e's record keys; `early` what the
    first reader polls again just after c was sent; `late_start` and `late` where the readers
    after the clean start and what they read; `scan` the log scan; `tombstone_retention_ms`
    adds the tombstone t to a partition with that delete.retention.ms; `indeterminate`
    ("before" or "after" f) adds a send of g, k3's too, killed before anyone saw it;
    `e_outcome` is e's transaction's ("info": killed before it ended)."""
    h = History()
    if declared:
        h.add("setup", "compacted", keys=(KV,), delete_retention_ms=tombstone_retention_ms)
    h.add("r0:idem", "send", writes=[placed(0, "a", "k1"), placed(1, "b", "k2")])
    h.assign("r0:aud", {KV: 0})
    h.poll("r0:aud", *reads("a"))
    h.add("r0:idem", "send", writes=[placed(2, "c", "k1")])
    if early:
        h.poll("r0:aud", *reads(*early))
    d_key, e_key = keys_of_d_and_e
    h.txn("r0:txw", producer_id=7).writes.append(placed(3, "d", d_key))
    h.txn("r0:txw", type=e_outcome, producer_id=7).writes.append(placed(5, "e", e_key))
    killed = [Write(KV, "g", None, "k3")]
    if indeterminate == "before":
        h.add("r0:idem2", "send", type="info", writes=killed)
    h.add("r0:idem", "send", writes=[placed(7, "f", "k3")])
    if indeterminate == "after":
        h.add("r0:idem2", "send", type="info", writes=killed)
    if tombstone_retention_ms is not None:
        h.add("r0:idem", "send", writes=[Write(KV, "t", 8, "k3", tombstone=True)])
    h.add("r0:cleaner", "clean")
    h.assign("r1:aud", {KV: late_start})
    h.poll("r1:aud", *reads(*late))
    h.assign("r1:ru", {KV: late_start}, isolation=READ_UNCOMMITTED)
    h.poll("r1:ru", *reads(*late), isolation=READ_UNCOMMITTED)
    h.add("final", "scan", scan=list(scan))
    return h


def test_a_legal_history_of_a_compacted_partition_has_no_anomaly() -> None:
    assert found(compacted()) == set()


def test_on_a_partition_not_compacted_the_same_history_is_skips_and_a_lost_write() -> None:
    # Nothing may be cleaned: b was never read, both late readers passed over a and b, and
    # the read_uncommitted one over e.
    assert found(compacted(declared=False)) == {"poll_skip", "internal_poll_skip", "lost_write"}


def test_the_latest_acknowledged_record_of_a_key_missing_is_a_lost_write() -> None:
    # c is k1's latest committed record (e, later, was aborted): nobody read it, readers read
    # past it, and the scan lost it.
    scan = [record for record in LEGAL_SCAN if record.value != "c"]
    assert found(compacted(late_start=3, late=("d", "f"), scan=scan)) == {"lost_write"}


def test_an_older_record_with_no_later_record_of_its_key_missing_is_lost() -> None:
    # d is k4's: b stays the latest of k2, and the late readers passed over it.
    history = compacted(keys_of_d_and_e=("k4", "k1"))
    assert found(history) == {"lost_write", "poll_skip"}


def test_an_older_record_whose_only_later_record_was_aborted_is_lost() -> None:
    # e is k2's, but aborted: it does not supersede b.
    history = compacted(keys_of_d_and_e=("k4", "k2"))
    assert found(history) == {"lost_write", "poll_skip"}


def test_passing_over_the_latest_record_of_its_key_is_a_poll_skip() -> None:
    h = compacted(late=("c",))
    h.poll("r1:aud", *reads("f"))  # d is k2's latest: the late reader must read it
    h.assign("r2:aud", {KV: 3})
    h.poll("r2:aud", *reads("d", "f"))
    assert found(h) == {"poll_skip"}


def test_passing_over_the_latest_record_of_its_key_within_a_poll_is_an_internal_skip() -> None:
    h = compacted(late=("c", "f"))
    h.assign("r2:aud", {KV: 3})
    h.poll("r2:aud", *reads("d", "f"))
    assert found(h) == {"internal_poll_skip"}


def test_passing_over_a_record_before_its_later_record_was_written_is_a_poll_skip() -> None:
    # Just after c was sent, b is still k2's latest (d comes later): a poll of c skips it.
    assert found(compacted(early=("c",))) == {"poll_skip"}


def test_a_tombstone_past_delete_retention_ms_may_be_gone() -> None:
    # t supersedes f; then t itself goes once delete.retention.ms (here 0) has passed.
    scan = [record for record in LEGAL_SCAN if record.value != "f"]
    history = compacted(late=("c", "d"), scan=scan, tombstone_retention_ms=0)
    assert found(history) == set()


def test_a_tombstone_within_delete_retention_ms_missing_is_unseen() -> None:
    scan = [record for record in LEGAL_SCAN if record.value != "f"]
    history = compacted(late=("c", "d"), scan=scan, tombstone_retention_ms=60_000)
    assert found(history) == {"unseen"}
    kept = compacted(
        late=("c", "d", "t"), scan=[*scan, data(KV, 8, "t")], tombstone_retention_ms=60_000
    )
    assert found(kept) == set()


def test_a_record_may_be_gone_once_an_indeterminate_write_of_its_key_followed_it() -> None:
    scan = [record for record in LEGAL_SCAN if record.value != "f"]
    assert found(compacted(late=("c", "d"), scan=scan, indeterminate="after")) == set()


def test_a_record_of_a_transaction_killed_before_it_ended_may_be_gone() -> None:
    """Its id's next init_transactions() aborts it, and the cleaner may then remove it (compaction
    seed 203 of the soak: a read_uncommitted poll passing over it was called a skip)."""
    assert found(compacted(e_outcome="info")) == set()


def test_an_indeterminate_write_invoked_before_a_record_completed_does_not_excuse_it() -> None:
    # g may have landed before f: f may still be k3's latest.
    scan = [record for record in LEGAL_SCAN if record.value != "f"]
    assert found(compacted(late=("c", "d"), scan=scan, indeterminate="before")) == {"unseen"}


def test_a_record_read_at_two_offsets_of_a_compacted_partition_is_a_duplicate() -> None:
    h = compacted()
    h.poll("r2:peek", (KV, 8, "f"))  # f, at 7, found at 8 too
    assert found(h) == {"duplicate"}


def test_a_cleaned_record_renumbered_is_a_duplicate_and_an_inconsistent_offset() -> None:
    # The scan shows c moved down to offset 0, where a was: offsets are never renumbered (the
    # late readers, which read c at 2, now also passed over a, placed at 0 as well).
    scan = [data(KV, 0, "c") if record.value == "c" else record for record in LEGAL_SCAN]
    assert {"duplicate", "inconsistent_offsets"} <= found(compacted(scan=scan))


def test_record_keys_tombstones_and_compacted_partitions_are_recorded_and_loaded(
    tmp_path: str,
) -> None:
    path = os.path.join(tmp_path, "history.jsonl")
    recorder = Recorder(path)
    with recorder.op("setup", "compacted", keys=[KV], delete_retention_ms=100):
        pass
    with recorder.op("r0:idem", "send") as op:
        op.writing(KV, "a", "k1")
        op.writing(KV, "t", "k1", tombstone=True)
        op.writing("in/0", "b")
        op.delivered("a", 4)
    recorder.close()
    setup, send = load(read_records([path]))
    assert (setup.f, setup.keys, setup.delete_retention_ms) == ("compacted", (KV,), 100)
    assert send.writes == [
        Write(KV, "a", 4, "k1"),
        Write(KV, "t", None, "k1", tombstone=True),
        Write("in/0", "b"),
    ]


def test_a_tombstone_read_is_identified_by_its_header() -> None:
    assert identity(None, [("id", b"t")]) == "t"
    assert identity(b"a", [("id", b"t")]) == "a"
    assert identity(None, None) == ""
