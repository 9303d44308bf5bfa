"""The history checker of docs/reliability.md family 8: pure Python over a list of operations
(tests/support/history.py), no eoslog import, so planted histories test it in milliseconds.

    report = check(load(read_records(paths)))
    print(report.summary())
    assert report.ok, report.describe()

The anomaly classes are those of Jepsen's Kafka workload (jepsen.tests.kafka), in our words and
adapted to eoslog (one broker, exact offsets, read_committed and read_uncommitted readers),
plus eoslog's own. Orders and fates are tests/support/history_model.py's: a value is
"committed" when the log scan shows it committed (or, without a scan, when its writer completed
ok, or a read_committed reader returned it); "visible" means visible at the reader's isolation
level. Each class counts distinct cases, as its definition says.

duplicate             a value found at more than one offset of its partition (per value).
inconsistent_offsets  one offset of a partition seen holding two values, or a value read from a
                      partition it was not written to, or that nobody wrote (per offset, or per
                      value).
lost_write            an acknowledged write (its send acknowledged, its transaction committed, or
                      shown committed by the log scan though its writer's outcome is unknown)
                      that no read_committed reader ever returned, although some reader returned
                      a record at a later offset of the partition (per value).
unseen                an acknowledged write no read_committed reader returned and none read past
                      (per value): with the final complete read in the history, any is a loss.
aborted_read          (G1a) a read_committed reader returned a value of an aborted transaction or
                      of a send that failed (per value).
intermediate_read     a read_committed reader returned a value of a transaction that had not
                      committed when the poll returned: its own transaction's write (Jepsen's
                      "precommitted read"), a write whose commit_transaction() was invoked only
                      later, or that never was (per reader and writer).
poll_skip             one consumer's successive polls of a partition passed over values visible to
                      it: the next record it returned was not the one after the last it returned
                      (or, after an assign or seek to an offset, not the first visible at or after
                      that offset). Rebalances of the partition inside the poll reset this.
nonmonotonic_poll     the same, going backwards or repeating a value instead (per poll and key).
internal_poll_skip, internal_nonmonotonic_poll
                      the same two between the records of a partition within one operation.
nonmonotonic_send     one producer's sends to a partition took offsets that did not increase in
                      the order it sent them, across its operations; internal_nonmonotonic_send
                      within one. (Jepsen also reports skips between sends; with other producers
                      writing to the same partitions those are normal, and are not counted.)
g1c                   a cycle of write-read dependencies between operations: each read_committed
                      read of a value is an edge from its writer to its reader; a cycle means two
                      transactions each saw the other's writes, impossible if each saw only
                      committed data (per strongly connected component).
delayed_marker        the log scan shows a request of a transaction arriving while a later
                      transaction of the same producer was under way: a data record whose epoch
                      is below that of a marker before it (a produce of transaction n after n
                      ended), a marker after data of its own epoch or later (an EndTxn of n
                      ending n+1's data), or a transaction's records ended by the other decision
                      than its outcome, or by none (per record, marker, or transaction).
committed_offsets     a group's committed offset, as committed() returned it, is none an
                      acknowledged or undecided commit could have left: not the latest one
                      acknowledged before the call, nor one that could still be in flight (per
                      observation and key). Aborted transactions' offsets never count.
consumed_twice        a value read by two committed transactions of a group that sends its
                      offsets in its transactions (consume-transform-produce; per value).
consumed_never        a committed value below the group's final committed offset that no
                      committed transaction of the group read (per value).

Compaction (tests/support/history_model.py, "cleanable"): on a compacted partition, a value the
cleaner may have removed (an older record of a record key with a later committed one, an
aborted record, or a tombstone past delete.retention.ms) is excused from lost_write, unseen
and consumed_never, and a reader passing over it once it became cleanable is no poll skip;
every other rule stands.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from tests.support import history_process_checks
from tests.support.history import Key, Op
from tests.support.history_model import ABORTED, COMMITTED, OPEN, Model

CLASSES = (
    "duplicate",
    "inconsistent_offsets",
    "lost_write",
    "unseen",
    "aborted_read",
    "intermediate_read",
    "poll_skip",
    "nonmonotonic_poll",
    "internal_poll_skip",
    "internal_nonmonotonic_poll",
    "nonmonotonic_send",
    "internal_nonmonotonic_send",
    "g1c",
    "delayed_marker",
    "committed_offsets",
    "consumed_twice",
    "consumed_never",
)
# Enough to diagnose a failure without flooding the output of a long run.
EXAMPLES_PER_CLASS = 5


@dataclass
class Report:
    """A counter per anomaly class, the first few cases of each, and the history's size."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CLASSES, 0))
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    stats: dict[str, int] = field(default_factory=dict)

    def add(self, anomaly: str, message: str) -> None:
        self.counts[anomaly] += 1
        if len(self.examples[anomaly]) < EXAMPLES_PER_CLASS:
            self.examples[anomaly].append(message)

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    def found(self) -> set[str]:
        return {anomaly for anomaly, count in self.counts.items() if count}

    def summary(self) -> str:
        stats = " ".join(f"{name}={value}" for name, value in self.stats.items())
        counts = " ".join(f"{name}={count}" for name, count in self.counts.items())
        return f"{stats}\n{counts}"

    def describe(self) -> str:
        lines = [self.summary()]
        for anomaly in CLASSES:
            lines += [f"  {anomaly}: {message}" for message in self.examples.get(anomaly, [])]
        return "\n".join(lines)


def check(ops: Sequence[Op]) -> Report:
    """Every anomaly class of the module docstring over `ops`. Raises
    MalformedHistoryError for a history that breaks its own rules."""
    model = Model(ops)
    report = Report(stats=_stats(model))
    check_values(model, report)
    check_lost_writes(model, report)
    check_reads(model, report)
    check_markers(model, report)
    history_process_checks.check_sends(model, report)
    history_process_checks.check_polls(model, report)
    history_process_checks.check_cycles(model, report)
    history_process_checks.check_group_offsets(model, report)
    history_process_checks.check_consumption(model, report)
    return report


def _stats(model: Model) -> dict[str, int]:
    ops = model.ops
    txns = [op for op in ops if op.f == "txn"]
    return {
        "ops": len(ops),
        "txns": len(txns),
        "committed": sum(op.type == "ok" for op in txns),
        "aborted": sum(op.type == "fail" for op in txns),
        "indeterminate": sum(op.type == "info" for op in ops),
        "writes": len(model.writers),
        "reads": sum(len(op.reads) for op in ops),
        "log_records": sum(len(op.scan) for op in ops),
    }


def check_values(model: Model, report: Report) -> None:
    """duplicate and inconsistent_offsets."""
    for (key, value), offsets in model.offsets_of.items():
        if len(offsets) > 1:
            report.add("duplicate", f"{value!r} at offsets {sorted(offsets)} of {key}")
    for (key, offset), values in model.values_at.items():
        if len(values) > 1:
            report.add("inconsistent_offsets", f"{key} offset {offset} held {sorted(values)}")
    strays: set[tuple[Key, str]] = set()
    for op in model.ops:
        for read in op.reads:
            pair = (read.key, read.value)
            if model.writer_of(*pair) is None and pair not in strays:
                strays.add(pair)
                writer = model.writers.get(read.value)
                where = "nobody wrote" if writer is None else f"written to {writer.write.key}"
                report.add(
                    "inconsistent_offsets",
                    f"{op.describe()} read {read.value!r} from {read.key} ({where})",
                )


def check_lost_writes(model: Model, report: Report) -> None:
    """lost_write and unseen."""
    reach: dict[Key, int] = {}
    for (key, _), readers in model.committed_reads.items():
        reach[key] = max([reach.get(key, -1)] + [read.offset for _, read in readers])
    for value, writer in model.writers.items():
        key = writer.write.key
        if (key, value) in model.committed_reads or not model.acknowledged(key, value):
            continue
        if model.cleaned_by(key, value):
            continue  # the cleaner may have removed it
        offset = model.offset_of(key, value)
        where = f"{value!r} ({writer.op.describe()}) at {key} offset {offset}"
        if offset is not None and offset <= reach.get(key, -1):
            report.add("lost_write", f"{where}, read_committed readers reached {reach[key]}")
        else:
            report.add("unseen", where)


def check_reads(model: Model, report: Report) -> None:
    """aborted_read and intermediate_read, over every read_committed read."""
    intermediate: set[tuple[int, int]] = set()
    for (key, value), readers in model.committed_reads.items():
        writer = model.writer_of(key, value)
        failed = writer is not None and writer.op.type == "fail"
        if model.fate.get((key, value)) == ABORTED or failed:
            reader = readers[0][0]
            report.add("aborted_read", f"{reader.describe()} read aborted {value!r} of {key}")
            continue
        if writer is None or writer.op.f != "txn":
            continue
        for reader, read in readers:
            at = read.at_ns or reader.complete_ns
            own = reader is writer.op
            never = writer.op.commit_ns is None and writer.op.type == "info"
            early = writer.op.commit_ns is not None and at is not None and at < writer.op.commit_ns
            pair = (reader.index, writer.op.index)
            if (own or never or early) and pair not in intermediate:
                intermediate.add(pair)
                why = "its own" if own else "never committed" if never else "before its commit"
                report.add(
                    "intermediate_read",
                    f"{reader.describe()} read {value!r} of {writer.op.describe()} ({why})",
                )


def check_markers(model: Model, report: Report) -> None:
    """delayed_marker, from the log scan (nothing to check without one)."""
    if model.scan is None:
        return
    for key, records in model.scan.items():
        marker_epoch: dict[int, int] = {}  # producer id -> the newest marker's epoch so far
        data_epoch: dict[int, int] = {}  # producer id -> newest data epoch since its marker
        for record in records:
            pid, epoch = record.producer_id, record.producer_epoch
            if record.marker is not None:
                newest = data_epoch.pop(pid, None)
                if newest is not None and newest >= epoch:
                    report.add(
                        "delayed_marker",
                        f"{key} offset {record.offset}: {record.marker} marker of producer "
                        f"{pid} epoch {epoch} after its data of epoch {newest}",
                    )
                marker_epoch[pid] = max(marker_epoch.get(pid, epoch), epoch)
            elif record.transactional:
                ended = marker_epoch.get(pid)
                if ended is not None and epoch < ended:
                    report.add(
                        "delayed_marker",
                        f"{key} offset {record.offset}: {record.value!r} of producer {pid} "
                        f"epoch {epoch} after its marker of epoch {ended}",
                    )
                data_epoch[pid] = max(data_epoch.get(pid, epoch), epoch)
    for op in model.ops:
        if op.f == "txn" and op.type in ("ok", "fail"):
            _check_decision(model, report, op)


def _check_decision(model: Model, report: Report, op: Op) -> None:
    """A decided transaction's records in the log are ended by its decision."""
    wanted = COMMITTED if op.type == "ok" else ABORTED
    for write in op.writes:
        found = model.scan_fate.get((write.key, write.value))
        if found is not None and found != wanted:
            ended = {OPEN: "no marker", COMMITTED: "a COMMIT marker"}.get(found, "an ABORT marker")
            report.add(
                "delayed_marker",
                f"{op.describe()}: {write.value!r} in {write.key} ended by {ended}",
            )
            return
