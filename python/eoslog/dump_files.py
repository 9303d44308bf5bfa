"""`eoslog dump-log FILE...`: each file named, after a `Dumping FILE` line, as Kafka's
kafka-dump-log.sh prints it, chosen by its suffix: a `.log` (eoslog.dump_log), an offset index
(`offset: O position: P` per entry, checked against the .log beside it), a time index
(`timestamp: T offset: O`, checked the same way), a transaction index (one line per aborted
transaction) and a producer snapshot (one line per producer).

Every path is checked before anything is printed (a missing file, a directory, a FIFO: status
2, nothing printed). An unknown suffix is skipped with a line on stderr, as Kafka's tool does,
and makes the exit status 2. Reads are bounded: the indexes a chunk at a time, stopping at the
first zero slot past the first entry (what a preallocated index holds after its entries);
a `.txnindex` and a snapshot through the readers the log uses (eoslog.log.txn_index,
eoslog.log.producer_state), which refuse a file lying about its size.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import numpy as np

from eoslog._ext import index as _index
from eoslog._ext.producer_state import ProducerStateTable
from eoslog.dump_log import DumpOptions, dump_log, emit
from eoslog.errors import CorruptSnapshotError
from eoslog.fs import PosixFileSystem
from eoslog.log.index_checks import (
    BatchCursor,
    TimeEntryProblem,
    TimeProblem,
    index_entries,
    last_offset_at,
    time_entry_problems,
)
from eoslog.log.producer_state import read_snapshot
from eoslog.log.segment_reads import LOG_SUFFIX, offset_from_file_name
from eoslog.log.time_index import NO_TIMESTAMP
from eoslog.log.txn_index import read_entries
from eoslog.verify import check_segment_file

# A file's dumper, by suffix: prints the file, returns the exit status (1: damage found).
Dumper = Callable[[str, DumpOptions], int]


def dump_files(paths: Sequence[str], options: DumpOptions) -> int:
    """Dump each file in order; the exit status is the worst of theirs. OSError (missing
    file) and NotASegmentFileError (not a regular file) before anything is printed."""
    for path in paths:
        check_segment_file(path, segment_name=False)
    status = 0
    for path in paths:
        emit(options, "file", {"path": path}, f"Dumping {path}")
        dumper = _DUMPERS.get(os.path.splitext(path)[1])
        if dumper is None:
            print(f"Ignoring unknown file {path}", file=sys.stderr)
            status = 2
            continue
        status = max(status, dumper(path, options))
    return status


def _base_offset(path: str) -> int:
    """The base offset the file is named after; 0 for a name that is not a segment's."""
    try:
        return offset_from_file_name(os.path.basename(path))
    except ValueError:
        return 0


def _dump_offset_index(path: str, options: DumpOptions) -> int:
    """Each entry, checked against the segment's .log beside it when there is one (as
    Kafka's tool does): the batch at the entry's position must end at the entry's offset.
    Mismatches go to stderr after the entries, and make the status 1."""
    base = _base_offset(path)
    fs = PosixFileSystem()
    log_path = os.path.splitext(path)[0] + LOG_SUFFIX
    log = fs.open(log_path, read_only=True) if os.path.isfile(log_path) else None
    index = fs.open(path, read_only=True)
    mismatches = []
    count = 0
    try:
        for entries in index_entries(index, _index.OFFSET_ENTRY_DTYPE):
            for relative, position in zip(
                entries["relative"].tolist(), entries["position"].tolist(), strict=True
            ):
                fields = {"offset": base + relative, "position": position}
                emit(
                    options, "indexEntry", fields, f"offset: {base + relative} position: {position}"
                )
                found = None if log is None else last_offset_at(log, position)
                if log is not None and found != base + relative:
                    mismatches.append((base + relative, found))
            count += len(entries)
    finally:
        index.close()
        if log is not None:
            log.close()
    if count == 0 and not options.as_json:
        print(f"{path} is empty.")
    if options.as_json:
        for offset, found in mismatches:
            emit(options, "indexMismatch", {"indexOffset": offset, "logOffset": found}, "")
        return 1 if mismatches else 0
    if mismatches:
        print(f"Mismatches in :{path}", file=sys.stderr)
    for offset, found in mismatches:
        text = "no batch there" if found is None else found
        print(f"  Index offset: {offset}, log offset: {text}", file=sys.stderr)
    return 1 if mismatches else 0


def _dump_time_index(path: str, options: DumpOptions) -> int:
    """Each entry, checked against the segment's .log beside it when there is one (as
    Kafka's tool does, eoslog.log.index_checks): a batch must end at the entry's offset, its
    largest timestamp be the entry's, and timestamps increase. What does not hold goes to
    stderr after the entries, under Kafka's headings, and makes the status 1."""
    base = _base_offset(path)
    fs = PosixFileSystem()
    log_path = os.path.splitext(path)[0] + LOG_SUFFIX
    log = fs.open(log_path, read_only=True) if os.path.isfile(log_path) else None
    cursor = None if log is None else BatchCursor(log, log.size())
    index = fs.open(path, read_only=True)
    problems: list[TimeEntryProblem] = []
    previous = NO_TIMESTAMP
    try:
        for entries in index_entries(index, _index.TIME_ENTRY_DTYPE):
            for timestamp, relative in zip(
                entries["timestamp"].tolist(), entries["relative"].tolist(), strict=True
            ):
                offset = base + relative
                text = f"timestamp: {timestamp} offset: {offset}"
                emit(options, "timeIndexEntry", {"timestamp": timestamp, "offset": offset}, text)
                if cursor is not None:
                    batch = cursor.batch_ending_at(offset)
                    problems += time_entry_problems(offset, timestamp, batch, previous)
                previous = timestamp
    finally:
        index.close()
        if log is not None:
            log.close()
    if options.as_json:
        for problem in problems:
            fields = {
                "problem": problem.kind.name.lower(),
                "timestamp": problem.timestamp,
                "offset": problem.offset,
                "found": problem.found,
            }
            emit(options, "timeIndexProblem", fields, "")
        return 1 if problems else 0
    return _report_time_problems(path, problems)


def _report_time_problems(path: str, problems: list[TimeEntryProblem]) -> int:
    """The problems on stderr, grouped under Kafka's headings in Kafka's order."""
    lines = []
    for kind in (TimeProblem.MISMATCH, TimeProblem.OUT_OF_ORDER, TimeProblem.NOT_FOUND):
        found = [problem for problem in problems if problem.kind is kind]
        if found:
            lines.append(kind.value.format(path=path))
        for problem in found:
            if kind is TimeProblem.MISMATCH:
                line = f"  Index timestamp: {problem.timestamp}, log timestamp: {problem.found}"
            elif kind is TimeProblem.OUT_OF_ORDER:
                line = (
                    f"  Index timestamp: {problem.timestamp}, "
                    f"Previously indexed timestamp: {problem.found}"
                )
            else:
                line = f"Indexed offset: {problem.offset}, found log offset: {problem.found}"
            lines.append(line)
    for line in lines:
        print(line, file=sys.stderr)
    return 1 if lines else 0


def _dump_txn_index(path: str, options: DumpOptions) -> int:
    handle = PosixFileSystem().open(path, read_only=True)
    try:
        loaded = read_entries(handle)
    finally:
        handle.close()
    entries = np.frombuffer(loaded.image, dtype=_index.TXN_ENTRY_DTYPE)
    for version, producer_id, first, last, stable in entries.tolist():
        fields = {
            "version": version,
            "producerId": producer_id,
            "firstOffset": first,
            "lastOffset": last,
            "lastStableOffset": stable,
        }
        emit(options, "abortedTransaction", fields, _kafka_line(fields))
    if loaded.damaged_at is None:
        return 0
    description = "not an aborted transaction entry"
    damage = {"byte": loaded.damaged_at, "description": description, "resumeAt": None}
    emit(options, "damage", damage, f"Damage at byte {loaded.damaged_at}: {description}")
    return 1


def _kafka_line(fields: Mapping[str, object]) -> str:
    """`name: value` pairs, space-separated, as Kafka's dump tool prints an entry."""
    return " ".join(f"{name}: {value}" for name, value in fields.items())


def _dump_snapshot(path: str, options: DumpOptions) -> int:
    """One line per producer, by producer id; Kafka's currentTxnFirstOffset is printed as
    the file holds it (-1 for none) rather than as Java's OptionalLong."""
    handle = PosixFileSystem().open(path, read_only=True)
    table = ProducerStateTable()
    try:
        table.load_snapshot(read_snapshot(handle, path), _base_offset(path))
    except CorruptSnapshotError as error:
        damage = {"byte": error.position, "description": str(error), "resumeAt": None}
        emit(options, "damage", damage, f"Damage: {error}")
        return 1
    finally:
        handle.close()
    for producer_id in sorted(table.producer_ids()):
        entry = table.entry(producer_id)
        assert entry is not None, "producer_ids lists only entries"
        fields: dict[str, object] = {
            "producerId": producer_id,
            "producerEpoch": entry.epoch,
            "coordinatorEpoch": entry.coordinator_epoch,
            "currentTxnFirstOffset": entry.current_txn_first_offset,
            "lastTimestamp": entry.last_timestamp,
        }
        if entry.batch_metadata:
            first_sequence, last_sequence, first, last, timestamp = entry.batch_metadata[-1]
            fields.update(
                firstSequence=first_sequence,
                lastSequence=last_sequence,
                lastOffset=last,
                offsetDelta=last - first,
                timestamp=timestamp,
            )
        emit(options, "producer", fields, _kafka_line(fields))
    return 0


_DUMPERS: Final[dict[str, Dumper]] = {
    ".log": dump_log,
    ".index": _dump_offset_index,
    ".timeindex": _dump_time_index,
    ".txnindex": _dump_txn_index,
    ".snapshot": _dump_snapshot,
}
