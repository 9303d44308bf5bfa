"""The leader's timestamp rules for a client batch (docs/format.md §10.2; Kafka's LogValidator
validateTimestamp), applied before any offset is assigned.

On a CreateTime topic a record timestamp other than -1 must lie within
[now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]; every record
out of range is reported (Kafka's RecordValidationException wrapping InvalidTimestampException,
one record error each). A client never claims LogAppendTime: a batch that does is refused too.
Both limits default to Long.MAX_VALUE, which turns the range check off; the records are then
not decoded at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np

from eoslog import limits
from eoslog.errors import InvalidTimestampError
from eoslog.log.config import LogConfig
from eoslog.record import codec
from eoslog.record.types import BatchHeader

if TYPE_CHECKING:
    from typing_extensions import Buffer

NO_TIMESTAMP: Final = -1
TIMESTAMP_LIMIT_OFF_MS: Final = (1 << 63) - 1


def check_client_timestamps(
    raw: Buffer, header: BatchHeader, config: LogConfig, now_ms: int
) -> None:
    """InvalidTimestampError (with .record_errors: [(record index, message)]) if the batch
    breaks the timestamp rules; nothing else is checked or changed."""
    errors: list[tuple[int, str]] = []
    if not config.log_append_time and (
        config.timestamp_before_max_ms != TIMESTAMP_LIMIT_OFF_MS
        or config.timestamp_after_max_ms != TIMESTAMP_LIMIT_OFF_MS
    ):
        timestamps = codec.decode_columns(raw, verify_crc=False).timestamp_ms
        stamped = np.asarray(timestamps, dtype=np.int64)
        too_old = (stamped != NO_TIMESTAMP) & (now_ms - stamped > config.timestamp_before_max_ms)
        too_new = (stamped != NO_TIMESTAMP) & (stamped - now_ms > config.timestamp_after_max_ms)
        for index in np.flatnonzero(too_old | too_new):
            errors.append(
                (
                    int(index),
                    f"timestamp {int(stamped[index])} of record {int(index)} is out of range "
                    f"[{now_ms} - {config.timestamp_before_max_ms}, "
                    f"{now_ms} + {config.timestamp_after_max_ms}]",
                )
            )
    if not errors and header.timestamp_type == 1:
        raise InvalidTimestampError(
            "Invalid timestamp type in message: the producer should not set the timestamp "
            "type to LogAppendTime"
        )
    if errors:
        shown = "; ".join(message for _, message in errors[: limits.reported_record_errors_max])
        raise InvalidTimestampError(
            f"{len(errors)} record(s) with an invalid timestamp: {shown}", record_errors=errors
        )
