"""`eoslog verify` over a log directory and its partitions: eoslog.meta (read as an open reads
it, eoslog.log.meta_file), the checkpoint files (read by the decoders an open uses,
eoslog.log.checkpoints), which partition directories eoslog.meta names, and each partition
(verify_partition): its .log files (eoslog.verify.log), its checkpoint entries against the
log (eoslog.log.checkpoint_checks, the checks an open makes) and the files derived from it
(eoslog.verify.derived).

eoslog.meta and the checkpoints are not derived from the log: they hold what the log cannot
tell (the topics, what was durable, what delete_records deleted). Damage to them is an error
where an open refuses it or would then lose, hide or expose records, and a warning where the
open mends it from what it has (each warning says how).

Thread safety: the functions keep no state; one thread runs a verification.
"""

from __future__ import annotations

import os
from typing import Final

from eoslog.errors import CorruptCheckpointError, KafkaStorageError
from eoslog.fs import FileSystem
from eoslog.log import checkpoint_checks, checkpoints, meta_file
from eoslog.log.checkpoints import (
    ABORTED_TXNS_FILE,
    CONFIRMED_LOG_START_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
)
from eoslog.log.config import LogConfig
from eoslog.log.meta_file import META_FILE
from eoslog.log.topic_changes import DELETE_DIRECTORY
from eoslog.verify.derived import WalkedPartition, check_derived_files
from eoslog.verify.facts import (
    ALL_DURABLE,
    PARTITION_DIRECTORY,
    DirectoryFacts,
    PartitionFacts,
    directory_facts,
    partition_key,
)
from eoslog.verify.log import PartitionWalk
from eoslog.verify.report import Report

# What an open does with a checkpoint file it cannot read, and whether that is damage (an
# error): (error, what follows and how it is mended).
_UNREADABLE_CHECKPOINT: Final = {
    RECOVERY_POINT_FILE: (
        True,
        "an open believes none of its entries, so it knows no offset durable: after an "
        "unclean stop it would cut bad bytes at the end of a log as a torn tail even where "
        "they were durable records. With the partitions' logs verified (above), the next "
        "open writes the file again",
    ),
    LOG_START_OFFSET_FILE: (
        False,
        f"an open believes none of its entries and takes the log starts from "
        f"{CONFIRMED_LOG_START_FILE}, which holds the same; it writes the file again",
    ),
    CONFIRMED_LOG_START_FILE: (
        True,
        f"an open believes none of its entries, so a log start delete_records moved inside "
        f"a segment is not believed from {LOG_START_OFFSET_FILE} alone and the records below "
        f"it can be read again. After the next open, run delete_records again for the "
        f"partitions {LOG_START_OFFSET_FILE} names",
    ),
    ABORTED_TXNS_FILE: (
        False,
        "an open believes none of its lines: it rebuilds every .txnindex from the log (a "
        "rescan of every segment), then writes the file again",
    ),
}
_META_REPAIR: Final = (
    "restore eoslog.meta from a backup: it names each topic with its partition count and "
    "configs, the next producer-id block and the coordinator epoch, which no open can "
    "rebuild from the partition directories"
)


def verify_log_directory(fs: FileSystem, report: Report, root: str) -> tuple[int, int]:
    """eoslog.meta, the checkpoints, then every partition directory eoslog.meta names (all
    of them when it cannot be read). Returns (segments, partitions) verified."""
    facts = directory_facts(fs, root)  # before any segment is opened (eoslog.verify.facts)
    for path, error in checkpoints.unreadable_checkpoints(fs, root):
        is_error, consequence = _UNREADABLE_CHECKPOINT[os.path.basename(path)]
        text = f"{error.reason or _without_path(str(error), path)}: {consequence}"
        report.problem(path, error.position or 0, text, error=is_error)
    topics = _check_meta(fs, report, root)
    names = fs.list_directories(root)
    partitions = _partitions_named(report, root, names, topics, facts)
    segments = 0
    for name in partitions:
        directory = os.path.join(root, name)
        segments += verify_partition(fs, report, directory, facts.partition(directory))
    return segments, len(partitions)


def _without_path(text: str, path: str) -> str:
    """An error's message without the file name it starts with (the report names it)."""
    return text.removeprefix(path).removeprefix(":").strip()


def _check_meta(fs: FileSystem, report: Report, root: str) -> dict[str, int] | None:
    """eoslog.meta's topics and partition counts, read as an open reads it; None (an error
    reported) when it is missing or an open would refuse it."""
    path = os.path.join(root, META_FILE)
    if not fs.exists(path):
        text = (
            "missing: an open would take the directory for a new one and ignore every "
            f"partition directory in it; {_META_REPAIR}"
        )
        report.problem(path, 0, text)
        return None
    try:
        meta = meta_file.read(fs, path, LogConfig())
    except KafkaStorageError as error:
        text = f"{_without_path(str(error), path)}: an open refuses the directory; {_META_REPAIR}"
        report.problem(path, 0, text)
        return None
    assert meta is not None, "the file exists"
    return {name: topic.num_partitions for name, topic in meta.topics.items()}


def _partitions_named(
    report: Report,
    root: str,
    names: list[str],
    topics: dict[str, int] | None,
    facts: DirectoryFacts,
) -> list[str]:
    """The partition directories to verify: those eoslog.meta names (every `topic-N` one
    when it cannot be read). A named one that is missing is an error when the partition
    existed (the recovery-point checkpoint names it: the next open makes it again, empty);
    a directory no topic names is what an open ignores (a warning)."""
    present = [name for name in names if PARTITION_DIRECTORY.fullmatch(name)]
    if topics is None:
        return present
    named = {
        f"{topic}-{partition}" for topic, count in topics.items() for partition in range(count)
    }
    for name in sorted(named - set(present)):
        _report_missing_partition(report, root, name, names, facts)
    for name in sorted(set(present) - named):
        key = partition_key(name)
        assert key is not None, "a partition directory's name"
        count = topics.get(key[0])
        why = f"no topic {key[0]}" if count is None else f"{key[0]} has {count} partitions"
        held = segment_bytes(os.path.join(root, name))
        text = f"eoslog.meta names no such partition ({why}): an open ignores the directory"
        if held:
            text += f", and the {held} bytes of segments in it are never read"
        report.warning(os.path.join(root, name), 0, text)
    return sorted(named & set(present))


def _report_missing_partition(
    report: Report, root: str, name: str, names: list[str], facts: DirectoryFacts
) -> None:
    path = os.path.join(root, name)
    key = partition_key(name)
    assert key is not None, "eoslog.meta's topic and partition"
    renamed = [
        other
        for other in names
        if other.startswith(f"{name}.") and DELETE_DIRECTORY.fullmatch(other)
    ]
    if renamed:
        text = (
            f"missing, renamed to {renamed[0]} by a topic deletion a crash interrupted: the "
            f"next open removes the renamed directory and makes the partition again, empty"
        )
        report.warning(path, 0, text)
    elif key in facts.recovery_points:
        text = (
            f"missing, but {RECOVERY_POINT_FILE} names the partition: it existed, and its "
            f"records are lost (the next open makes it again, empty). Restore the directory "
            f"from a backup while no process has the log directory open"
        )
        report.problem(path, 0, text)
    else:
        text = (
            "missing and never checkpointed: what a topic creation a crash interrupted "
            "leaves; the next open makes the partition, empty"
        )
        report.warning(path, 0, text)


def segment_bytes(directory: str) -> int:
    """The bytes of a partition directory's segment .log files."""
    with os.scandir(directory) as entries:
        return sum(
            entry.stat(follow_symlinks=False).st_size
            for entry in entries
            if entry.name.endswith(".log") and entry.is_file(follow_symlinks=False)
        )


def verify_partition(fs: FileSystem, report: Report, directory: str, facts: PartitionFacts) -> int:
    """One partition: its .log files, its checkpoint entries against them, then the files
    derived from them. Returns how many segments it has."""
    errors_before = report.errors
    segments = PartitionWalk(fs, report, directory, facts).walk_all()
    log_end: int | None = None
    if report.errors == errors_before:
        log_end = segments[-1].end_offset if segments else 0
    first_base = segments[0].base_offset if segments else 0
    log_start = first_base
    if log_end is not None:
        log_start = _check_checkpoint_entries(fs, report, directory, facts, first_base, log_end)
    partition = WalkedPartition(
        directory,
        segments,
        log_start,
        log_end,
        settled=facts.durable_to(fs) == ALL_DURABLE,
        aborted_counts=facts.aborted_counts,
    )
    check_derived_files(fs, report, partition)
    return len(segments)


def _check_checkpoint_entries(
    fs: FileSystem,
    report: Report,
    directory: str,
    facts: PartitionFacts,
    first_base: int,
    log_end: int,
) -> int:
    """The partition's recovery point and log start against its log, as an open checks them
    (checkpoint_checks: past the log end, an open refuses; a log start inside a segment that
    eoslog's checkpoint does not confirm, it ignores). Returns the log start an open
    believes."""
    try:
        checkpoint_checks.check_recovery_point(directory, facts.recovery_point, log_end)
    except CorruptCheckpointError as error:
        _report_entry(fs, report, directory, RECOVERY_POINT_FILE, f"{error}")
    try:
        log_start, note = checkpoint_checks.believed_log_start(
            directory, first_base, facts.log_start, log_end
        )
    except CorruptCheckpointError as error:
        _report_entry(fs, report, directory, LOG_START_OFFSET_FILE, f"{error}")
        return first_base
    if note is not None:
        _report_entry(fs, report, directory, LOG_START_OFFSET_FILE, note, error=False)
    return log_start


def _report_entry(
    fs: FileSystem,
    report: Report,
    directory: str,
    checkpoint: str,
    text: str,
    *,
    error: bool = True,
) -> None:
    """A problem with the partition's line in a checkpoint file, at the byte the line
    starts."""
    path, _ = checkpoint_checks.checkpoint_entry(directory, checkpoint, 0)
    key = partition_key(directory)
    position = checkpoints.entry_positions(fs, path).get(key, 0) if key else 0
    report.problem(path, position, _without_path(text, path), error=error)
