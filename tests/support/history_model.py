"""What the history checker (tests/support/history_checker.py) first learns from a history, before
any anomaly is looked for: who wrote each value, every offset each value was seen at, each
value's fate (committed, aborted, or unknown), and the order of each partition as a reader at
each isolation level must see it.

eoslog is one broker, and every record's offset is exact (delivery reports, polls, the log
scan all report it), so unlike Jepsen's Kafka checker, which has to infer the order of a
partition from what clients happened to see, the order here is the offset order of the values
seen anywhere. Two orders are kept per partition:

- read_uncommitted: every data value seen, in offset order (the log as it is);
- read_committed: only the values whose fate is "committed", in offset order.

A reader's positions are compared as indexes in the order of its isolation level, so the gaps
that control records and (for read_committed) aborted or undecided records leave in the
offsets are not skips.

Compaction: on a partition the history declares compacted (an operation "compacted" naming it),
the log cleaner may remove a record once another record of the same record key stands committed
at a higher offset (a non-transactional record, or one of a committed transaction), and a
record of an aborted transaction at any time (one of unknown fate too: a killed writer's open
transaction is aborted by its id's next init_transactions()), and a tombstone once
delete.retention.ms passed.
A later record whose fate is unknown (an indeterminate write, never seen decided) counts as one
that may stand committed, and so does an indeterminate write nobody saw, invoked after the
record's write completed (if it landed, it landed past it). Such a value is *cleanable* from
the moment the first such later record's write was invoked (from its own writer's invocation if
aborted; that plus delete.retention.ms for a tombstone, as Kafka's delete horizon counts from a
clean after it was written): a reader may pass over it from then on, and its absence from every
read is no loss. It keeps its place in the orders (a reader before the clean still sees it
there), and nothing else changes: a value at two offsets, an offset with two values, a skip
over a value that is the latest committed one of its key, all stand.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from tests.support.history import COMMIT, READ_COMMITTED, Key, Op, Read, ScanRecord, Write

COMMITTED = "committed"
ABORTED = "aborted"
UNKNOWN = "unknown"
# Fates as the log scan shows them: a transactional record whose producer wrote no marker
# after it is still open.
OPEN = "open"


class MalformedHistoryError(ValueError):
    """The history breaks its own rules (a value written twice): a workload bug, not an
    anomaly of the system under test."""


@dataclass
class Order:
    """The values of one partition a reader can see, in offset order."""

    values: list[str] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, placed: Sequence[tuple[int, str]]) -> Order:
        order = cls()
        for offset, value in sorted(placed):
            order.index[value] = len(order.values)
            order.values.append(value)
            order.offsets.append(offset)
        return order

    def first_at_or_after(self, offset: int) -> int:
        """The index of the first value at `offset` or later (len(values) if none)."""
        return bisect.bisect_left(self.offsets, offset)


@dataclass
class Writer:
    op: Op
    write: Write


class Model:
    """Indexes over one history (see the module docstring). Built once; read by the checks."""

    def __init__(self, ops: Sequence[Op]) -> None:
        self.ops = list(ops)
        self.writers: dict[str, Writer] = {}
        # (key, value) -> every offset it was seen at; (key, offset) -> every value seen there.
        self.offsets_of: dict[tuple[Key, str], set[int]] = defaultdict(set)
        self.values_at: dict[tuple[Key, int], set[str]] = defaultdict(set)
        self.committed_reads: dict[tuple[Key, str], list[tuple[Op, Read]]] = defaultdict(list)
        self.scan: dict[Key, list[ScanRecord]] | None = None
        self.scan_fate: dict[tuple[Key, str], str] = {}
        self._index_writes()
        self._index_reads()
        self._index_scan()
        self.fate = {pair: self._fate(pair) for pair in self.offsets_of.keys() | self._written()}
        self.orders = self._orders()
        # compacted partition -> its delete.retention.ms (None: tombstones are kept)
        self.compacted = {
            key: op.delete_retention_ms for op in self.ops if op.f == "compacted" for key in op.keys
        }
        # (key, value) -> the moment from which the cleaner may have removed it.
        self.cleanable = self._cleanable()
        self.last_ns = max((op.complete_ns or op.invoke_ns for op in self.ops), default=0)

    # --- building ---------------------------------------------------------------------------

    def _index_writes(self) -> None:
        for op in self.ops:
            for write in op.writes:
                if write.value in self.writers:
                    raise MalformedHistoryError(f"value {write.value!r} written twice")
                self.writers[write.value] = Writer(op, write)
                if write.offset is not None:
                    self._place(write.key, write.offset, write.value)

    def _index_reads(self) -> None:
        for op in self.ops:
            for read in op.reads:
                self._place(read.key, read.offset, read.value)
                if op.isolation == READ_COMMITTED:
                    self.committed_reads[(read.key, read.value)].append((op, read))

    def _index_scan(self) -> None:
        scans = [op for op in self.ops if op.f == "scan"]
        if not scans:
            return
        self.scan = defaultdict(list)
        for record in scans[-1].scan:
            self.scan[record.key].append(record)
        for key, records in self.scan.items():
            records.sort(key=lambda record: record.offset)
            pending: dict[int, list[str]] = defaultdict(list)
            for record in records:
                if record.marker is not None:
                    fate = COMMITTED if record.marker == COMMIT else ABORTED
                    for value in pending.pop(record.producer_id, []):
                        self.scan_fate.setdefault((key, value), fate)
                    continue
                assert record.value is not None
                self._place(key, record.offset, record.value)
                if record.transactional:
                    pending[record.producer_id].append(record.value)
                else:
                    self.scan_fate.setdefault((key, record.value), COMMITTED)
            for values in pending.values():
                for value in values:
                    self.scan_fate.setdefault((key, value), OPEN)

    def _place(self, key: Key, offset: int, value: str) -> None:
        self.offsets_of[(key, value)].add(offset)
        self.values_at[(key, offset)].add(value)

    def _written(self) -> set[tuple[Key, str]]:
        return {(writer.write.key, value) for value, writer in self.writers.items()}

    def _fate(self, pair: tuple[Key, str]) -> str:
        """The log scan's verdict when the value is in it; else its writer's outcome (a
        value of an undecided writer that a read_committed reader returned must have been
        committed, as Jepsen reasons)."""
        if pair in self.scan_fate:
            found = self.scan_fate[pair]
            return UNKNOWN if found == OPEN else found
        writer = self.writers.get(pair[1])
        if writer is None or writer.write.key != pair[0]:
            return COMMITTED if pair in self.committed_reads else UNKNOWN
        if writer.op.type == "ok":
            return COMMITTED
        if writer.op.type == "fail":
            return ABORTED
        return COMMITTED if pair in self.committed_reads else UNKNOWN

    def _orders(self) -> dict[str, dict[Key, Order]]:
        every: dict[Key, list[tuple[int, str]]] = defaultdict(list)
        committed: dict[Key, list[tuple[int, str]]] = defaultdict(list)
        for (key, value), offsets in self.offsets_of.items():
            placed = (min(offsets), value)
            every[key].append(placed)
            if self.fate[(key, value)] == COMMITTED:
                committed[key].append(placed)
        return {
            "read_uncommitted": {key: Order.of(placed) for key, placed in every.items()},
            READ_COMMITTED: {key: Order.of(placed) for key, placed in committed.items()},
        }

    def _cleanable(self) -> dict[tuple[Key, str], int]:
        """The cleanable values of the compacted partitions (module docstring)."""
        found: dict[tuple[Key, str], int] = {}

        def since(pair: tuple[Key, str], moment: float) -> None:
            if moment != float("inf"):
                found[pair] = min(found.get(pair, int(moment)), int(moment))

        placed: dict[tuple[Key, str], list[tuple[int, str, Writer]]] = defaultdict(list)
        unplaced: dict[tuple[Key, str], list[int]] = defaultdict(list)
        for value, writer in self.writers.items():
            key, record_key = writer.write.key, writer.write.record_key
            if key not in self.compacted:
                continue
            fate = self.fate.get((key, value))
            if fate == ABORTED or (fate == UNKNOWN and writer.op.f == "txn"):
                # A transaction of unknown fate may have been aborted: a kill left it open, and
                # its id's next init_transactions() (or its timeout) ended it with an ABORT.
                since((key, value), writer.op.invoke_ns)
            retention_ms = self.compacted[key]
            if writer.write.tombstone and retention_ms is not None:
                since((key, value), writer.op.invoke_ns + retention_ms * 1_000_000)
            offset = self.offset_of(key, value)
            if record_key is None:
                continue
            if offset is not None:
                placed[(key, record_key)].append((offset, value, writer))
            elif fate == UNKNOWN:  # may have landed past every record written before it
                unplaced[(key, record_key)].append(writer.op.invoke_ns)
        for group, written in placed.items():
            key = group[0]
            later = float("inf")  # the earliest invocation of a record later in the log
            for _, value, writer in sorted(written, key=lambda entry: -entry[0]):
                landed = [t for t in unplaced.get(group, ()) if t > writer.op.end_ns]
                since((key, value), min([later, *landed]))
                if self.fate.get((key, value)) != ABORTED:
                    later = min(later, writer.op.invoke_ns)
        return found

    # --- queries ----------------------------------------------------------------------------

    def order(self, isolation: str, key: Key) -> Order:
        return self.orders[isolation].get(key) or Order()

    def offset_of(self, key: Key, value: str) -> int | None:
        offsets = self.offsets_of.get((key, value))
        return min(offsets) if offsets else None

    def writer_of(self, key: Key, value: str) -> Writer | None:
        """The operation that wrote `value` to `key` (None: nobody did, to that key)."""
        writer = self.writers.get(value)
        return writer if writer is not None and writer.write.key == key else None

    def cleaned_by(self, key: Key, value: str, at: float | None = None) -> bool:
        """Whether the cleaner may have removed `value` from `key` by the moment `at` (by the
        end of the history if None)."""
        at = self.last_ns if at is None else at
        since = self.cleanable.get((key, value))
        return since is not None and since <= at

    def acknowledged(self, key: Key, value: str) -> bool:
        """Whether the write must be in the log for good: its writer completed ok, or the log
        scan shows it committed although its writer's outcome is unknown."""
        writer = self.writer_of(key, value)
        if writer is None or writer.op.f not in ("send", "txn"):
            return False
        if writer.op.type == "ok":
            return True
        return writer.op.type == "info" and self.scan_fate.get((key, value)) == COMMITTED
