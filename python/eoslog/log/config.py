"""Topic (log) configuration: Kafka's dotted property names parsed once, here, into named
fields with units (docs/style.md rule 6). Defaults are Kafka's (docs/format.md §5.2)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from eoslog import limits
from eoslog.errors import InvalidConfigError

DAY_MS: Final = 24 * 60 * 60 * 1000
# Long.MAX_VALUE: a message.timestamp.{before,after}.max.ms that turns its check off.
TIMESTAMP_LIMIT_OFF_MS: Final = (1 << 63) - 1
# Kafka's -2 for local.retention.ms|bytes: the same as retention.ms|bytes.
LOCAL_RETENTION_AS_TOTAL: Final = -2
# Long.MAX_VALUE: max.compaction.lag.ms's default, no upper bound on a record's wait.
COMPACTION_LAG_OFF_MS: Final = (1 << 63) - 1
_FLAGS: Final = {"remote_storage_enable"}
# cleanup.policy's words (Kafka's TopicConfig.CLEANUP_POLICY_*): a list of one or both.
CLEANUP_POLICIES: Final = ("compact", "delete")


@dataclass(frozen=True)
class LogConfig:
    """The settings of one topic's partition logs."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * DAY_MS
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * DAY_MS  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    max_message_bytes: int = limits.message_bytes_default
    log_append_time: bool = False  # message.timestamp.type=LogAppendTime
    # How far a CreateTime record may lie before / after the append time; Long.MAX_VALUE (the
    # default, Kafka's) turns the check off.
    timestamp_before_max_ms: int = TIMESTAMP_LIMIT_OFF_MS
    timestamp_after_max_ms: int = TIMESTAMP_LIMIT_OFF_MS
    # Tiered storage (KIP-405's names; eoslog.tiering): a broker opened with an archive copies
    # this topic's archivable segments there at each maintenance pass, and local retention
    # (local.retention.ms|bytes; -2, the default: retention.ms|bytes) deletes only segments
    # the archive holds.
    remote_storage_enable: bool = False
    local_retention_ms: int = LOCAL_RETENTION_AS_TOTAL
    local_retention_bytes: int = LOCAL_RETENTION_AS_TOTAL
    # Compaction (eoslog.log.cleaner; docs/design.md "Compaction"). cleanup.policy as given,
    # normalized to comma-separated words: "delete", "compact" or both. Retention by time and
    # size applies only with "delete"; the cleaner cleans only with "compact", whose topics
    # refuse a record without a key (INVALID_RECORD, as Kafka's LogValidator).
    cleanup_policy: str = "delete"
    # The cleaner picks a log whose dirty bytes (past the cleaner-offset checkpoint) reach this
    # share of its cleanable bytes, or one holding a record older than max.compaction.lag.ms.
    min_cleanable_dirty_ratio: float = 0.5
    # A record stays uncompacted for at least this long after its timestamp.
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = COMPACTION_LAG_OFF_MS
    # A tombstone (and a transaction's control batch with no data left) stays readable this
    # long after the cleaning that first saw it (Kafka's delete horizon, KIP-534).
    delete_retention_ms: int = DAY_MS
    # Derived: whether an append checks CreateTime record timestamps against the range above
    # (eoslog.log.timestamps), i.e. a limit is on (not Long.MAX_VALUE) on a CreateTime topic.
    # Computed once here, so an append with nothing to check makes no call for it.
    timestamp_range_checked: bool = field(init=False, repr=False, compare=False)
    # Derived: the policy's two words, and the age at which the active segment rolls: a
    # compacted topic's segment rolls no later than max.compaction.lag.ms (Kafka's
    # LogConfig.maxSegmentMs), so that its records can become cleanable in time.
    compact: bool = field(init=False, repr=False, compare=False)
    delete: bool = field(init=False, repr=False, compare=False)
    roll_ms: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        words = self.cleanup_policy.split(",")
        object.__setattr__(self, "compact", "compact" in words)
        object.__setattr__(self, "delete", "delete" in words)
        roll_ms = self.segment_ms
        if self.compact:
            roll_ms = min(roll_ms, self.max_compaction_lag_ms)
        object.__setattr__(self, "roll_ms", roll_ms)
        object.__setattr__(
            self,
            "timestamp_range_checked",
            not self.log_append_time
            and (
                self.timestamp_before_max_ms != TIMESTAMP_LIMIT_OFF_MS
                or self.timestamp_after_max_ms != TIMESTAMP_LIMIT_OFF_MS
            ),
        )

    def to_properties(self) -> dict[str, int | float | str]:
        """Kafka's property names and values, as list_topics reports them."""
        return {key: self._property(field) for key, field in TOPIC_KEYS.items()}

    def _property(self, field: str) -> int | float | str:
        value = getattr(self, field)
        if field in ("cleanup_policy", "min_cleanable_dirty_ratio"):
            return value  # type: ignore[no-any-return]
        if field == "log_append_time":
            return "LogAppendTime" if value else "CreateTime"
        if field in _FLAGS:
            return "true" if value else "false"
        return int(value)

    def local_retention(self) -> tuple[int, int]:
        """(ms, bytes) local retention applies: local.retention.* for a tiered topic (-2:
        retention.*), retention.* otherwise; (-1, -1), nothing, without "delete" in
        cleanup.policy (a compacted topic loses records only to the cleaner)."""
        if not self.delete:
            return -1, -1
        if not self.remote_storage_enable:
            return self.retention_ms, self.retention_bytes
        ms, size = self.local_retention_ms, self.local_retention_bytes
        return (
            self.retention_ms if ms == LOCAL_RETENTION_AS_TOTAL else ms,
            self.retention_bytes if size == LOCAL_RETENTION_AS_TOTAL else size,
        )

    def with_properties(self, properties: Mapping[str, object]) -> LogConfig:
        """These settings overridden by Kafka-named properties; InvalidConfigError for an
        unknown key or a value out of range (nothing is changed then)."""
        changes: dict[str, object] = {}
        for key, value in properties.items():
            field = TOPIC_KEYS.get(key)
            if field is None:
                raise InvalidConfigError(f"unknown topic configuration {key!r}")
            changes[field] = _parse(key, field, value)
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


# Kafka's topic-level names -> LogConfig fields.
TOPIC_KEYS: Final = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "log_append_time",
    "message.timestamp.before.max.ms": "timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "timestamp_after_max_ms",
    "remote.storage.enable": "remote_storage_enable",
    "local.retention.ms": "local_retention_ms",
    "local.retention.bytes": "local_retention_bytes",
    "cleanup.policy": "cleanup_policy",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "delete.retention.ms": "delete_retention_ms",
}
# Broker-level names (eoslog.open config) that set the default of a topic-level field.
BROKER_KEYS: Final = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
}

# (smallest, largest) allowed, from Kafka's LogConfig definitions; the segment limits keep
# every relative offset and position inside a segment within int32.
_RANGES: Final = {
    "segment_bytes": (14, (1 << 31) - 1),
    "segment_ms": (1, (1 << 63) - 1),
    "segment_index_bytes": (12, (1 << 31) - 1),
    "index_interval_bytes": (0, (1 << 31) - 1),
    "retention_ms": (-1, (1 << 63) - 1),
    "retention_bytes": (-1, (1 << 63) - 1),
    "timestamp_before_max_ms": (0, (1 << 63) - 1),
    "timestamp_after_max_ms": (0, (1 << 63) - 1),
    "max_message_bytes": (0, limits.batch_bytes_max),
    "local_retention_ms": (LOCAL_RETENTION_AS_TOTAL, (1 << 63) - 1),
    "local_retention_bytes": (LOCAL_RETENTION_AS_TOTAL, (1 << 63) - 1),
    "min_compaction_lag_ms": (0, (1 << 63) - 1),
    "max_compaction_lag_ms": (1, (1 << 63) - 1),
    "delete_retention_ms": (0, (1 << 63) - 1),
}


def _parse(key: str, field: str, value: object) -> object:
    if field == "cleanup_policy":
        return _parse_cleanup_policy(key, value)
    if field == "min_cleanable_dirty_ratio":
        return parse_number(key, value, 0.0, 1.0)
    if field == "log_append_time":
        if value not in ("CreateTime", "LogAppendTime"):
            raise InvalidConfigError(f"{key} must be CreateTime or LogAppendTime, not {value!r}")
        return value == "LogAppendTime"
    if field in _FLAGS:
        flag = {"true": True, "false": False}.get(str(value).lower())
        if flag is None or not isinstance(value, bool | str):
            raise InvalidConfigError(f"{key} must be true or false, not {value!r}")
        return flag
    try:
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise InvalidConfigError(f"{key} must be an integer, not {value!r}") from None
    if isinstance(value, bool) or (isinstance(value, float) and value != number):
        raise InvalidConfigError(f"{key} must be an integer, not {value!r}")
    low, high = _RANGES[field]
    if not low <= number <= high:
        raise InvalidConfigError(f"{key} must be in [{low}, {high}], not {number}")
    return number


def _parse_cleanup_policy(key: str, value: object) -> str:
    """cleanup.policy as Kafka's ValidList takes it: a comma-separated list (or a list of
    strings) of "compact" and "delete", each at most once, normalized to "a,b"."""
    if isinstance(value, list | tuple):
        words = [str(word).strip() for word in value]
    elif isinstance(value, str):
        words = [word.strip() for word in value.split(",")]
    else:
        raise InvalidConfigError(f"Invalid value {value!r} for configuration {key}")
    if words == [""] or not all(word in CLEANUP_POLICIES for word in words):
        raise InvalidConfigError(
            f"Invalid value {value} for configuration {key}: String must be one of: "
            + ", ".join(CLEANUP_POLICIES)
        )
    if len(set(words)) != len(words):
        raise InvalidConfigError(f"Configuration '{key}' values must not be duplicated.")
    return ",".join(words)


def parse_number(key: str, value: object, low: float, high: float) -> float:
    """A Kafka DOUBLE setting: an int, a float or a numeric string within [low, high]."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidConfigError(f"{key} must be a number, not {value!r}") from None
    if not low <= number <= high:  # also refuses NaN
        raise InvalidConfigError(f"{key} must be in [{low}, {high}], not {number}")
    return number
