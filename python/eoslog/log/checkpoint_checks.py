"""The checkpoints checked against the log at open (eoslog.log.recovery): a recovery point or
log start must lie inside the segments that exist, and a value that disagrees with them never
causes a deletion (docs/format.md §9.1). Also what a repair does to the recovery-point checkpoint.
"""

from __future__ import annotations

import os

from eoslog.errors import CorruptCheckpointError
from eoslog.log.checkpoints import (
    CONFIRMED_LOG_START_FILE,
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    LogStart,
)


def check_recovery_point(directory: str, recovery_point: int | None, log_end: int) -> None:
    """A recovery point is written only after an fsync of everything below it, so the log
    on disk must reach it: one past the end means durable records are missing (or the
    checkpoint lies). Refused, naming the values, before anything is cut or deleted."""
    if recovery_point is None or recovery_point <= log_end:
        return
    path, entry = checkpoint_entry(directory, RECOVERY_POINT_FILE, recovery_point)
    raise CorruptCheckpointError(
        f"{path} says {directory} is durable up to offset {recovery_point}, but its log "
        f"ends at offset {log_end}: durable records are missing, or the checkpoint is wrong. "
        f"Nothing was changed. To open with the records on disk, close every process using "
        f"the directory and remove the line {entry!r} from {path}."
    )


def believed_log_start(
    directory: str, first_base: int, checkpointed: LogStart | None, log_end: int
) -> tuple[int, str | None]:
    """The log start offset, and a note for the recovery report when a checkpointed value was
    ignored. Retention moves the log start to a segment's base; delete_records (Kafka's
    DeleteRecords) anywhere up to the high watermark, durably in both log-start checkpoints
    before it answers. So a value inside the segments is believed when eoslog's checksummed
    checkpoint confirms it (the records below it stay deleted after a crash; the segments
    wholly below go at the next retention pass); one it does not confirm is ignored and
    reported, never used to hide records, and the log starts at the first segment's base
    (`first_base`). One past the log end is refused (CorruptCheckpointError), never used to
    delete segments."""
    if checkpointed is None or checkpointed.offset <= first_base:
        return first_base, None
    offset = checkpointed.offset
    path, entry = checkpoint_entry(directory, LOG_START_OFFSET_FILE, offset)
    if offset > log_end:
        raise CorruptCheckpointError(
            f"{path} says the log of {directory} starts at offset {offset}, past its "
            f"end at offset {log_end} (its segments hold {first_base}..{log_end}): the "
            f"checkpoint is wrong or segments are missing. Nothing was deleted. To open with "
            f"the segments on disk, close every process using the directory and remove the "
            f"line {entry!r} from {path}."
        )
    if checkpointed.confirmed:
        return offset, None
    return first_base, (
        f"{path}: log start {offset} of {directory} ignored: it is inside the segments "
        f"({first_base}..{log_end}) and {CONFIRMED_LOG_START_FILE} does not confirm it (a "
        f"delete_records writes both); the log starts at {first_base}"
    )


def checkpoint_entry(directory: str, checkpoint: str, value: int) -> tuple[str, str]:
    """The checkpoint file beside a partition directory, and the line naming it."""
    root, name = os.path.split(directory)
    topic, _, partition = name.rpartition("-")
    return os.path.join(root, checkpoint), f"{topic} {partition} {value}"
