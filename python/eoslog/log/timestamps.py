"""The leader's timestamp rules for a client batch (docs/format.md §10.2; Kafka's LogValidator
validateTimestamp), applied before any offset is assigned.

On a CreateTime topic a record timestamp other than -1 must lie within
[now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]; every record
out of range is reported (Kafka's RecordValidationException wrapping InvalidTimestampException,
one record error each). A client never claims LogAppendTime: a batch that does is refused too.
Both limits default to Long.MAX_VALUE, which turns the range check off.

The records are decoded only when the batch may break the rule: validate_batch's walk already
found the smallest and largest record timestamps (ValidatedBatch), and when both lie in range
every record does. Only a batch that fails is decoded, to name each record out of range.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np

from eoslog import limits
from eoslog.errors import InvalidTimestampError
from eoslog.log.config import LogConfig
from eoslog.record import codec
from eoslog.record.types import ValidatedBatch

if TYPE_CHECKING:
    from typing_extensions import Buffer

NO_TIMESTAMP: Final = -1


def check_client_timestamps(
    raw: Buffer, validated: ValidatedBatch, config: LogConfig, now_ms: int
) -> None:
    """InvalidTimestampError (with .record_errors: [(record index, message)]) if the batch
    `raw`, which validate_batch returned `validated` for, breaks the timestamp rules; nothing
    else is checked or changed. There is nothing to check unless config.timestamp_range_checked
    or the batch claims LogAppendTime: an append tests both before it calls this."""
    errors: list[tuple[int, str]] = []
    if config.timestamp_range_checked and not _bounds_in_range(validated, config, now_ms):
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
    if not errors and validated.header.timestamp_type == 1:
        raise InvalidTimestampError(
            "Invalid timestamp type in message: the producer should not set the timestamp "
            "type to LogAppendTime"
        )
    if errors:
        shown = "; ".join(message for _, message in errors[: limits.reported_record_errors_max])
        raise InvalidTimestampError(
            f"{len(errors)} record(s) with an invalid timestamp: {shown}", record_errors=errors
        )


def _bounds_in_range(validated: ValidatedBatch, config: LogConfig, now_ms: int) -> bool:
    """Whether every record timestamp t other than -1 surely lies in the allowed range, from
    the batch's smallest and largest alone: now - t <= now - smallest and t - now <=
    largest - now (largest may be a -1 itself, which only widens the bound). Java computes
    the rule in wrapping long arithmetic; when both bounds pass, each lies in
    [-(2**63 - 1), 2**63 - 1] (the limits are longs and the two sum to largest - smallest >=
    0), so no record's difference wraps either and the bounds decide exactly. Otherwise
    False: the caller decodes and checks each record."""
    smallest, largest = validated.min_timestamp, validated.max_timestamp
    if smallest == NO_TIMESTAMP:
        return True  # no record carries a timestamp: nothing is checked
    return (
        now_ms - smallest <= config.timestamp_before_max_ms
        and largest - now_ms <= config.timestamp_after_max_ms
    )
