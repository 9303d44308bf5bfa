"""Family 14 (docs/reliability.md), part 3: the case list, every file kind, clean and unclean.

`catalogue(layouts, seed, random_flips)` names each case `variant/kind/what`; the runner and
the test build the same list from the same pristine layouts and seed. The expectation of each
case follows the rules in tests/support/hostile_damage.py: damage to the last batch of a partition
after an unclean stop may be cut (TAIL), a torn write (a batch truncated after an unclean stop)
must be cut (CUT), everything else is "ok" or a typed error (OK_TYPED).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import replace

from eoslog.fs import PosixFileSystem
from eoslog.log import checkpoints
from tests.support.hostile_damage import (
    ABORTED_COUNTS,
    ABSOLUTE_BAIT,
    CLEAN_MARKER,
    CUT,
    LOG_START,
    META,
    OK_TYPED,
    RECOVERY_POINT,
    REFUSE,
    TAIL,
    Case,
    Damage,
    Target,
    active,
    bit_flip_at,
    checkpoint_with,
    derived_file,
    drop_key,
    extend_log_sparse,
    field_flip,
    field_set,
    flip_in,
    forged_abort_over_committed,
    forged_lz4_garbage,
    forged_marker_type,
    forged_meta,
    forged_snapshot,
    growing,
    in_root,
    is_tail,
    latest_snapshot,
    lz4_bomb,
    pick,
    random_spot,
    record_flip,
    remove,
    rename_topic,
    rewrite,
    set_key,
    set_partitions,
    snapshot_empty,
    snapshot_field,
    snapshot_open_txn,
    snapshot_past_end,
    sparse,
    stray,
    symlink_dir_out,
    symlink_out,
    topics_of,
    truncate_tail,
    txn_entry_field,
)
from tests.support.hostile_dir import Batch

ORDERS0 = "orders-0"
ORDERS1 = "orders-1"
AUDIT0 = "audit-0"
OFFSETS0 = "__consumer_offsets-0"
STATE0 = "__transaction_state-0"
VARIANTS = ("clean", "unclean")
# Header fields flipped once each (one bit, CRC left as is), and those forged (CRC recomputed).
FLIPPED = {
    "base_offset.low": ("base_offset", 0),
    "base_offset.high": ("base_offset", 40),
    "length.low": ("length", 0),
    "length.high": ("length", 20),
    "leader_epoch": ("leader_epoch", 3),
    "magic": ("magic", 1),
    "crc": ("crc", 5),
    "attributes": ("attributes", 4),
    "last_offset_delta": ("last_offset_delta", 0),
    "max_timestamp": ("max_timestamp", 9),
    "records_count": ("records_count", 0),
    "producer_id": ("producer_id", 1),
}
# Not forged: last_offset_delta, since a batch whose last offset delta exceeds its record count
# is what compaction leaves, valid in Kafka.
FORGED = {
    "records_count": ("records_count", 0),
    "producer_id": ("producer_id", 1),
    "producer_epoch": ("producer_epoch", 0),
    "base_sequence": ("base_sequence", 2),
}
CONTROL_FIELDS = ("base_offset.low", "length.low", "crc", "producer_id")


def catalogue(
    layouts: dict[str, dict[str, list[Batch]]],
    roots: dict[str, str],
    seed: int,
    random_flips: int,
) -> list[Case]:
    """Every case for both variants; per variant `random_flips` seeded bit flips anywhere in
    the segments and a quarter as many in any other file of the pristine directory `roots`."""
    cases: list[Case] = []
    for variant in VARIANTS:
        layout = layouts[variant]
        unclean = variant == "unclean"
        cases += log_cases(variant, layout, unclean)
        cases += truncation_cases(variant, layout, unclean)
        cases += derived_cases(variant)
        cases += checkpoint_cases(variant, unclean)
        cases += stray_cases(variant)
        rng = random.Random(f"{seed}/{variant}/files")
        cases += random_file_cases(variant, roots[variant], rng, random_flips // 4)
        cases += random_cases(
            variant,
            layout,
            unclean,
            random.Random(f"{seed}/{variant}"),
            random_flips,
            recovery_points(roots[variant]),
        )
    cases += meta_cases()
    cases += link_cases()
    names = [case.name for case in cases]
    assert len(names) == len(set(names)), "case names are unique"
    return cases


def _case(variant: str, kind: str, what: str, damage: Damage, expect: frozenset[str]) -> Case:
    return Case(f"{variant}/{kind}/{what}", kind, variant, damage, expect)


def log_cases(variant: str, layout: dict[str, list[Batch]], unclean: bool) -> list[Case]:
    def expect(directory: str, which: str) -> frozenset[str]:
        batch = pick(layout, directory, which)
        return TAIL if unclean and is_tail(layout, directory, batch) else OK_TYPED

    cases = []
    for directory, which in ((ORDERS0, "middle"), (ORDERS0, "last")):
        where = f"{directory}.{which}"
        for label, (name, bit) in FLIPPED.items():
            damage = field_flip(directory, which, name, bit, forge=False)
            cases.append(
                _case(variant, ".log", f"{where}.{label}", damage, expect(directory, which))
            )
        for label, (name, bit) in FORGED.items():
            damage = field_flip(directory, which, name, bit, forge=True)
            cases.append(
                _case(variant, ".log", f"{where}.forged.{label}", damage, expect(directory, which))
            )
        cases.append(
            _case(
                variant,
                ".log",
                f"{where}.base_offset=0",
                field_set(directory, which, "base_offset", 0),
                expect(directory, which),
            )
        )
        cases.append(
            _case(
                variant,
                ".log",
                f"{where}.length=2G",
                field_set(directory, which, "length", 2**31 - 1),
                expect(directory, which),
            )
        )
        cases.append(
            _case(
                variant,
                ".log",
                f"{where}.records",
                record_flip(directory, which),
                expect(directory, which),
            )
        )
    for directory, which in (
        (ORDERS0, "middle-control"),
        (AUDIT0, "last"),
        (ORDERS1, "first-control"),
    ):
        where = f"{directory}.{which}"
        for label in CONTROL_FIELDS:
            name, bit = FLIPPED[label]
            damage = field_flip(directory, which, name, bit, forge=False)
            cases.append(
                _case(variant, ".log", f"{where}.{label}", damage, expect(directory, which))
            )
        cases.append(
            _case(
                variant,
                ".log",
                f"{where}.type",
                forged_marker_type(directory, which, forge=False),
                expect(directory, which),
            )
        )
        # A marker forged to name another producer leaves the real producer's transaction
        # without one: recovery writes it again from `__transaction_state`'s decision, one
        # offset more.
        forged_pid = growing(
            field_flip(directory, which, "producer_id", 1, forge=True), directory, 1
        )
        cases.append(
            _case(
                variant, ".log", f"{where}.forged.producer_id", forged_pid, expect(directory, which)
            )
        )
        cases.append(
            _case(
                variant,
                ".log",
                f"{where}.forged.type",
                forged_marker_type(directory, which),
                expect(directory, which),
            )
        )
    for directory in (ORDERS1, OFFSETS0, STATE0):
        for label in ("base_offset.low", "length.low", "crc"):
            name, bit = FLIPPED[label]
            for which in ("first", "last"):
                damage = field_flip(directory, which, name, bit, forge=False)
                cases.append(
                    _case(
                        variant,
                        ".log",
                        f"{directory}.{which}.{label}",
                        damage,
                        expect(directory, which),
                    )
                )
    cases.append(
        _case(
            variant,
            ".log",
            f"{OFFSETS0}.last.base_offset=0",
            field_set(OFFSETS0, "last", "base_offset", 0),
            expect(OFFSETS0, "last"),
        )
    )
    cases.append(
        _case(
            variant, ".log", f"{ORDERS1}.lz4.forged-garbage", forged_lz4_garbage(ORDERS1), OK_TYPED
        )
    )
    cases.append(_case(variant, ".log", f"{ORDERS1}.lz4.bomb-64MiB", lz4_bomb(ORDERS1), OK_TYPED))
    return cases


def truncation_cases(variant: str, layout: dict[str, list[Batch]], unclean: bool) -> list[Case]:
    cases = []
    last = layout[ORDERS0][-1]
    for cut in (1, 2, 7, 8, 12, 21, 30, 45, 60, 61, 62, 100, last.size - 1):
        expect = CUT if unclean else OK_TYPED
        case = _case(variant, ".log", f"{ORDERS0}.tail-{cut}B", truncate_tail(ORDERS0, cut), expect)
        cases.append(replace(case, partial_tail=True))
    # A whole batch gone at a boundary after a crash is indistinguishable from a write that
    # never happened; after a clean shutdown the checkpoints say otherwise.
    if not unclean:
        cases.append(
            _case(
                variant,
                ".log",
                f"{ORDERS0}.tail-whole-batch",
                truncate_tail(ORDERS0, last.size),
                OK_TYPED,
            )
        )
        cases.append(
            _case(
                variant,
                ".log",
                f"{AUDIT0}.tail-whole-marker",
                truncate_tail(AUDIT0, layout[AUDIT0][-1].size),
                OK_TYPED,
            )
        )
    cases.append(
        _case(
            variant,
            ".log",
            f"{ORDERS0}.middle-segment-tail-5B",
            truncate_tail(ORDERS0, 5, segment=1),
            OK_TYPED,
        )
    )
    cases.append(
        _case(
            variant,
            ".log",
            f"{ORDERS0}.sparse-1GiB-tail",
            extend_log_sparse(ORDERS0),
            TAIL if unclean else OK_TYPED,
        )
    )
    return cases


def derived_cases(variant: str) -> list[Case]:
    index = derived_file(ORDERS0, ".index", 2)
    time_index = derived_file(ORDERS0, ".timeindex", 2)
    active_index = derived_file(ORDERS0, ".index", -1)
    txn_index = derived_file(ORDERS0, ".txnindex", 1)
    snapshot = latest_snapshot(ORDERS0)
    table: list[tuple[str, str, Damage]] = [
        (".index", "entry-offset-flip", flip_in(index, 2, 0)),
        (".index", "entry-position-flip", flip_in(index, 6, 1)),
        (
            ".index",
            "forged-mid-batch",
            rewrite(index, lambda d: d[:4] + (5).to_bytes(4, "big") + d[8:]),
        ),
        (".index", "odd-length", rewrite(index, lambda d: d[:5])),
        (".index", "garbage", rewrite(index, lambda d: b"\xfe" * 24)),
        (".index", "missing", remove(index)),
        (".index", "directory-in-its-place", directory_instead(index)),
        (".index", "active-sparse-1GiB", sparse(active_index)),
        (".timeindex", "timestamp-flip", flip_in(time_index, 1, 2)),
        (".timeindex", "offset-flip", flip_in(time_index, 10, 0)),
        (".timeindex", "odd-length", rewrite(time_index, lambda d: d[:7])),
        (".timeindex", "missing", remove(time_index)),
        (".timeindex", "directory-in-its-place", directory_instead(time_index)),
        (".timeindex", "sparse-1GiB", sparse(time_index)),
        (".txnindex", "pid+1", txn_entry_field(txn_index, 1, 1)),
        (".txnindex", "first_offset-2", txn_entry_field(txn_index, 2, -2)),
        (".txnindex", "first_offset+1", txn_entry_field(txn_index, 2, 1)),
        (".txnindex", "last_offset+5", txn_entry_field(txn_index, 3, 5)),
        (".txnindex", "last_offset-1", txn_entry_field(txn_index, 3, -1)),
        (".txnindex", "lso+1", txn_entry_field(txn_index, 4, 1)),
        (".txnindex", "version-flip", flip_in(txn_index, 1, 0)),
        (".txnindex", "forged-abort-over-committed", forged_abort_over_committed(ORDERS0)),
        (".txnindex", "emptied", rewrite(txn_index, lambda d: b"")),
        # Kafka and eoslog create the file with a segment's first aborted transaction, so "no
        # file" is also what a segment without aborts looks like: the aborted-transaction
        # checkpoint's count tells the two apart.
        (".txnindex", "deleted", remove(txn_index)),
        (".txnindex", "odd-length", rewrite(txn_index, lambda d: d[:20])),
        (".txnindex", "sparse-1GiB", sparse(txn_index)),
        (".snapshot", "crc-flip", flip_in(snapshot, 3, 0)),
        (".snapshot", "entry-flip", flip_in(snapshot, 20, 4)),
        (".snapshot", "truncated", rewrite(snapshot, lambda d: d[:30])),
        (".snapshot", "forged-open-txn", forged_snapshot(ORDERS0, snapshot_open_txn(ORDERS0))),
        (".snapshot", "forged-epoch", forged_snapshot(ORDERS0, snapshot_field(8, ">h", 9))),
        (
            ".snapshot",
            "forged-last-offset-past-end",
            forged_snapshot(ORDERS0, snapshot_field(14, ">q", 10**6)),
        ),
        (".snapshot", "forged-empty", forged_snapshot(ORDERS0, snapshot_empty)),
        (".snapshot", "forged-count-huge", forged_snapshot(ORDERS0, snapshot_count_huge)),
        (".snapshot", "copy-past-log-end", snapshot_past_end(ORDERS0)),
        (".snapshot", "sparse-1GiB", sparse(snapshot)),
    ]
    return [_case(variant, kind, what, damage, OK_TYPED) for kind, what, damage in table]


def snapshot_count_huge(data: bytearray, target: Target) -> None:
    data[6:10] = (2**31 - 1).to_bytes(4, "big")


def checkpoint_cases(variant: str, unclean: bool) -> list[Case]:
    table: list[tuple[str, str, Damage]] = [
        (RECOVERY_POINT, "garbled", rewrite(in_root(RECOVERY_POINT), lambda d: b"\x00garbage\xff")),
        (RECOVERY_POINT, "missing", remove(in_root(RECOVERY_POINT))),
        (RECOVERY_POINT, "past-log-end", checkpoint_with(RECOVERY_POINT, {("orders", 0): 10_000})),
        (RECOVERY_POINT, "inside-log", checkpoint_with(RECOVERY_POINT, {("orders", 0): 21})),
        (RECOVERY_POINT, "zero", checkpoint_with(RECOVERY_POINT, {("orders", 0): 0})),
        (RECOVERY_POINT, "negative", checkpoint_with(RECOVERY_POINT, {("orders", 0): -7})),
        (RECOVERY_POINT, "int64-max", checkpoint_with(RECOVERY_POINT, {("orders", 0): 2**63 - 1})),
        (RECOVERY_POINT, "unknown-topic", checkpoint_with(RECOVERY_POINT, {("../x", 0): 3})),
        (LOG_START, "garbled", rewrite(in_root(LOG_START), lambda d: b"0\n1\norders zero 5\n")),
        (LOG_START, "missing", remove(in_root(LOG_START))),
        (LOG_START, "past-log-end", checkpoint_with(LOG_START, {("orders", 0): 400})),
        # eoslog moves the log start only to a segment base (retention deletes whole segments),
        # so 21 cannot be right; a segment base above the first segment could be (a crash
        # between retention's checkpoint and its deletions) and is left out.
        (LOG_START, "inside-log", checkpoint_with(LOG_START, {("orders", 0): 21})),
        (LOG_START, "negative", checkpoint_with(LOG_START, {("orders", 1): -3})),
        (LOG_START, "int64-max", checkpoint_with(LOG_START, {("orders", 1): 2**63 - 1})),
        (LOG_START, "sparse-1GiB", sparse(in_root(LOG_START))),
        (CLEAN_MARKER, "directory", replace_with_directory(CLEAN_MARKER)),
        (ABORTED_COUNTS, "garbled", rewrite(in_root(ABORTED_COUNTS), lambda d: b"0\n1\nx\n")),
        (ABORTED_COUNTS, "missing", remove(in_root(ABORTED_COUNTS))),
        (ABORTED_COUNTS, "no-counts", checkpoint_with(ABORTED_COUNTS, {("orders", 0): 5_000})),
        (ABORTED_COUNTS, "covers-nothing", checkpoint_with(ABORTED_COUNTS, {("orders", 0): 0})),
        (ABORTED_COUNTS, "negative", checkpoint_with(ABORTED_COUNTS, {("orders", 0): -1})),
        (ABORTED_COUNTS, "sparse-1GiB", sparse(in_root(ABORTED_COUNTS))),
    ]
    # The count is what tells a lost .txnindex from a segment without aborts: without a
    # readable one, every .txnindex is rebuilt from the log.
    lost_index = remove(derived_file(ORDERS0, ".txnindex", 1))
    table.append(
        (
            ABORTED_COUNTS,
            "missing+txnindex-deleted",
            both(remove(in_root(ABORTED_COUNTS)), lost_index),
        )
    )
    table.append(
        (
            ABORTED_COUNTS,
            "garbled+txnindex-deleted",
            both(rewrite(in_root(ABORTED_COUNTS), lambda d: d[:-3]), lost_index),
        )
    )
    # Issue 12: a flip in an early batch with the recovery point missing or garbled (every
    # segment rescanned) must not cut the log there.
    forget = remove(in_root(RECOVERY_POINT))
    garble = rewrite(in_root(RECOVERY_POINT), lambda d: b"0\nx\n")
    for label, flip in (
        ("records-of-first-batch", record_flip(ORDERS0, "first")),
        ("crc-of-middle-batch", field_flip(ORDERS0, "middle", "crc", 5, forge=False)),
        ("length-of-middle-batch", field_flip(ORDERS0, "middle", "length", 0, forge=False)),
    ):
        table.append((RECOVERY_POINT, f"missing+{label}", both(forget, flip)))
        table.append((RECOVERY_POINT, f"garbled+{label}", both(garble, flip)))
    if unclean:
        table.append(
            (
                CLEAN_MARKER,
                "forged-on-unclean",
                stray(CLEAN_MARKER, b'{"version":0,"brokerEpoch":0}'),
            )
        )
        table.append(
            (
                CLEAN_MARKER,
                "forged-on-torn-tail",
                both(stray(CLEAN_MARKER, b"{}"), truncate_tail(ORDERS0, 7)),
            )
        )
    else:
        table.append(
            (CLEAN_MARKER, "garbled", rewrite(in_root(CLEAN_MARKER), lambda d: b"\xff\x00{"))
        )
    return [_case(variant, kind, what, damage, OK_TYPED) for kind, what, damage in table]


def directory_instead(locate: Callable[[Target], str]) -> Damage:
    """A directory where a derived file (rebuildable from the log) should be."""

    def damage(target: Target) -> dict[str, int]:
        path = locate(target)
        os.unlink(path)
        os.mkdir(path)
        return {}

    return damage


def both(first: Damage, second: Damage) -> Damage:
    def damage(target: Target) -> dict[str, int]:
        first(target)
        return second(target)

    return damage


def replace_with_directory(name: str) -> Damage:
    def damage(target: Target) -> dict[str, int]:
        path = target.path(name)
        if os.path.lexists(path):
            os.unlink(path)
        os.mkdir(path)
        return {}

    return damage


def stray_cases(variant: str) -> list[Case]:
    first = f"{ORDERS0}/{0:020d}.log"
    table: list[tuple[str, str, Damage]] = [
        ("stray", "junk.log", stray(f"{ORDERS0}/junk.log", b"junk")),
        ("stray", "abc.snapshot", stray(f"{ORDERS0}/abc.snapshot", b"abc")),
        ("stray", "-5.log-empty", stray(f"{ORDERS0}/-5.log")),
        ("stray", "23-digit.log-empty", stray(f"{ORDERS0}/{'9' * 23}.log")),
        ("stray", "23-digit.log-copy", stray(f"{ORDERS0}/{1:023d}.log", copy_of=first)),
        ("stray", "directory-named-.log", stray(f"{ORDERS0}/{99_999:020d}.log", None)),
        ("stray", "directory-named-.index", stray(f"{ORDERS0}/{99_999:020d}.index", None)),
        ("stray", "overlapping-segment-empty", stray(f"{ORDERS0}/{5:020d}.log")),
        ("stray", "overlapping-segment-copy", stray(f"{ORDERS0}/{5:020d}.log", copy_of=first)),
        ("stray", "segment-past-end-copy", stray(f"{ORDERS0}/{99_999:020d}.log", copy_of=first)),
        ("stray", "swap-garbage", stray(f"{ORDERS0}/{0:020d}.log.swap", b"\x00" * 70)),
        ("stray", "deleted-copy", stray(f"{ORDERS0}/{0:020d}.log.deleted", copy_of=first)),
        ("stray", "tmp-file", stray(f"{ORDERS0}/{0:020d}.index.tmp", b"\x01" * 9)),
        ("stray", "unknown-partition-dir", stray("orders-7", None)),
        ("stray", "junk-dir-in-root", stray("junk-0", None)),
    ]
    return [_case(variant, kind, what, damage, OK_TYPED) for kind, what, damage in table]


def meta_cases() -> list[Case]:
    table: list[tuple[str, Damage]] = [
        ("flip", flip_in(in_root(META), 30, 2)),
        ("truncated", rewrite(in_root(META), lambda d: d[:7])),
        ("sparse-1GiB", sparse(in_root(META))),
        ("forged.topic-../x", forged_meta(rename_topic("../x"))),
        ("forged.topic-/tmp/x", forged_meta(rename_topic(ABSOLUTE_BAIT))),
        ("forged.topic-empty", forged_meta(rename_topic(""))),
        ("forged.topic-long", forged_meta(rename_topic("t" * 300))),
        ("forged.missing-topics", forged_meta(drop_key("topics"))),
        ("forged.topics-list", forged_meta(set_key("topics", ["orders"]))),
        ("forged.partitions-text", forged_meta(set_partitions("abc"))),
        ("forged.partitions-negative", forged_meta(set_partitions(-1))),
        ("forged.partitions-zero", forged_meta(set_partitions(0))),
        ("forged.partitions-huge", forged_meta(set_partitions(10**9))),
        ("forged.partition-dropped", forged_meta(set_partitions(1))),
        ("forged.config-list", forged_meta(set_config([1, 2]))),
        ("forged.segment-bytes-tiny", forged_meta(set_config({"segment.bytes": 1}))),
        ("forged.coordinator-epoch-text", forged_meta(set_key("coordinator_epoch", "x"))),
        ("forged.producer-id-block-negative", forged_meta(set_key("next_producer_id_block", -5))),
        ("forged.topic-dropped", forged_meta(drop_topic("audit"))),
        ("forged.internal-dropped", forged_meta(drop_topic("__consumer_offsets"))),
    ]
    # A meta that breaks its own rules (names, types, counts, config ranges) is refused at
    # open; one that is merely different (a topic or partition fewer) cannot be told apart.
    valid = {"forged.partition-dropped", "forged.topic-dropped", "forged.internal-dropped"}
    cases = [
        _case(
            "clean",
            "eoslog.meta",
            what,
            damage,
            REFUSE if what.startswith("forged.") and what not in valid else OK_TYPED,
        )
        for what, damage in table
    ]
    cases.append(_case("unclean", "eoslog.meta", "flip", flip_in(in_root(META), 30, 2), OK_TYPED))
    cases.append(
        _case(
            "unclean",
            "eoslog.meta",
            "forged.topic-../x",
            forged_meta(rename_topic("../x")),
            REFUSE,
        )
    )
    return cases


def set_config(value: object) -> Callable[[dict[str, object]], None]:
    def mutate(body: dict[str, object]) -> None:
        topics_of(body)["orders"]["config"] = value

    return mutate


def drop_topic(name: str) -> Callable[[dict[str, object]], None]:
    def mutate(body: dict[str, object]) -> None:
        del topics_of(body)[name]

    return mutate


def link_cases() -> list[Case]:
    table: list[tuple[str, str, str, Damage]] = [
        ("clean", ".lock", "symlink-out", symlink_out(".lock", copy=False)),
        ("unclean", ".lock", "symlink-out", symlink_out(".lock", copy=False)),
        ("clean", ".lock", "directory", replace_with_directory(".lock")),
        ("clean", "symlink", "active-.log", symlink_out(active(ORDERS0, ".log"))),
        ("unclean", "symlink", "active-.log", symlink_out(active(ORDERS0, ".log"))),
        ("clean", "symlink", "active-.index", symlink_out(active(ORDERS0, ".index"))),
        ("unclean", "symlink", "active-.timeindex", symlink_out(active(ORDERS0, ".timeindex"))),
        ("clean", "symlink", "middle-.log", symlink_out(f"{ORDERS0}/{20:020d}.log")),
        ("clean", "symlink", "recovery-point-checkpoint", symlink_out(RECOVERY_POINT)),
        ("clean", "symlink", "log-start-checkpoint", symlink_out(LOG_START)),
        ("clean", "symlink", "aborted-txn-checkpoint", symlink_out(ABORTED_COUNTS)),
        ("clean", "symlink", "aborted-txn-checkpoint.tmp", symlink_out(ABORTED_COUNTS + ".tmp")),
        ("clean", "symlink", "eoslog.meta", symlink_out(META)),
        ("clean", "symlink", "eoslog.meta.tmp", symlink_out(META + ".tmp")),
        ("clean", "symlink", "recovery-point-checkpoint.tmp", symlink_out(RECOVERY_POINT + ".tmp")),
        ("unclean", "symlink", "partition-dir", symlink_dir_out(ORDERS1)),
    ]
    return [_case(variant, kind, what, damage, OK_TYPED) for variant, kind, what, damage in table]


def recovery_points(root: str) -> dict[str, int]:
    """The pristine directory's recovery point per partition directory name."""
    offsets = checkpoints.read_offsets(PosixFileSystem(), os.path.join(root, RECOVERY_POINT))
    return {f"{topic}-{partition}": offset for (topic, partition), offset in offsets.items()}


def random_cases(
    variant: str,
    layout: dict[str, list[Batch]],
    unclean: bool,
    rng: random.Random,
    count: int,
    recovered_to: dict[str, int],
) -> list[Case]:
    """Seeded bit flips anywhere in the segments. After an unclean stop, damage to a batch
    at or past its partition's recovery point lies in data never known durable, which
    recovery cuts (with everything after it), as Kafka does: that is a tail too."""
    cases = []
    for number in range(count):
        directory, batch, spot = random_spot(layout, rng)
        unsynced = batch.base_offset >= recovered_to.get(directory, 1 << 63)
        tail = is_tail(layout, directory, batch) or unsynced
        expect = TAIL if unclean and tail else OK_TYPED
        where = f"{batch.file}@{batch.position + spot // 8}.{spot % 8}"
        cases.append(
            _case(
                variant,
                ".log",
                f"random-{number}:{where}",
                bit_flip_at(directory, batch, spot),
                expect,
            )
        )
    return cases


def random_file_cases(variant: str, root: str, rng: random.Random, count: int) -> list[Case]:
    """One bit flip anywhere in a file other than a segment (indexes, snapshots, checkpoints,
    the clean-shutdown marker, eoslog.meta)."""
    files = sorted(
        os.path.relpath(os.path.join(directory, name), root)
        for directory, _, names in os.walk(root)
        for name in names
        if not name.endswith(".log") and name != ".lock"
    )
    files = [f for f in files if os.path.getsize(os.path.join(root, f)) > 0]
    cases = []
    for number in range(count):
        relative = files[rng.randrange(len(files))]
        spot = rng.randrange(os.path.getsize(os.path.join(root, relative)) * 8)
        kind = os.path.splitext(relative)[1] if "/" in relative else os.path.basename(relative)
        damage = flip_in(in_root(relative), spot // 8, spot % 8)
        name = f"random-file-{number}:{relative}@{spot // 8}.{spot % 8}"
        cases.append(_case(variant, kind, name, damage, OK_TYPED))
    return cases
