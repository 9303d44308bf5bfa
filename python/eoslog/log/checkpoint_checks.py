"""The checkpoints checked against the log at open (eoslog.log.recovery): a recovery point or
log start must lie inside the segments that exist, and a value that disagrees with them never
causes a deletion (docs/format.md §9.1). Also what a repair does to the recovery-point checkpoint.
"""

from __future__ import annotations

import os

from eoslog.errors import CorruptCheckpointError
from eoslog.log.checkpoints import (
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
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
    directory: str, first_base: int, checkpointed: int | None, log_end: int
) -> int:
    """The log start offset: the checkpointed value when it lies inside the segments, else the
    first segment's base (`first_base`), as Kafka's max(checkpoint, first base). Retention
    moves the log start to a segment base; delete_records (Kafka's DeleteRecords) moves it
    anywhere up to the high watermark and writes the checkpoint before it answers, so a value
    inside a segment is a deletion the user asked for: the records below it stay deleted
    after a crash (the segments wholly below it go at the next retention pass). One past the
    log end is refused (CorruptCheckpointError), never used to delete segments."""
    if checkpointed is None or checkpointed <= first_base:
        return first_base
    if checkpointed > log_end:
        path, entry = checkpoint_entry(directory, LOG_START_OFFSET_FILE, checkpointed)
        raise CorruptCheckpointError(
            f"{path} says the log of {directory} starts at offset {checkpointed}, past its "
            f"end at offset {log_end} (its segments hold {first_base}..{log_end}): the "
            f"checkpoint is wrong or segments are missing. Nothing was deleted. To open with "
            f"the segments on disk, close every process using the directory and remove the "
            f"line {entry!r} from {path}."
        )
    return checkpointed


def checkpoint_entry(directory: str, checkpoint: str, value: int) -> tuple[str, str]:
    """The checkpoint file beside a partition directory, and the line naming it."""
    root, name = os.path.split(directory)
    topic, _, partition = name.rpartition("-")
    return os.path.join(root, checkpoint), f"{topic} {partition} {value}"
