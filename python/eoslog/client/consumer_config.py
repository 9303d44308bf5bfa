"""Consumer configuration (docs/api.md "Consumer"): Kafka's dotted keys parsed once into a
ConsumerConfig, so nothing else in the client spells them out (docs/style.md rule 6). The
defaults and bounds are named in eoslog.limits.

Keys and defaults follow Kafka's ConsumerConfig and confluent-kafka-python (librdkafka) where
docs/api.md is silent. Unknown keys raise InvalidConfigError naming the first bad key, and a
rejected config changes nothing: the Consumer is not created.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from eoslog import limits
from eoslog.coordinator.assignors import ASSIGNORS
from eoslog.errors import InvalidConfigError
from eoslog.log.partition_reads import ISOLATION_LEVELS

RESET_POLICIES: Final = {
    "earliest": "earliest",
    "smallest": "earliest",
    "beginning": "earliest",
    "latest": "latest",
    "largest": "latest",
    "end": "latest",
    "error": "error",
}
# librdkafka's default partition.assignment.strategy; the strategies eoslog has are
# eoslog.coordinator.assignors.ASSIGNORS.
ASSIGNMENT_STRATEGIES_DEFAULT: Final = ("range", "roundrobin")
# Common confluent/librdkafka consumer keys accepted so that configs carry over unchanged,
# with no effect here: there is no network and no background thread.
IGNORED_KEYS: Final = frozenset(
    {
        "bootstrap.servers",
        "client.id",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "enable.auto.offset.store",
        "socket.timeout.ms",
        "request.timeout.ms",
        "fetch.wait.max.ms",
        "fetch.min.bytes",
    }
)


class ConsumerConfig:
    """The parsed consumer properties. InvalidConfigError names the first bad key."""

    __slots__ = (
        "allow_auto_create_topics",
        "assignment_strategies",
        "auto_commit_interval_ms",
        "auto_offset_reset",
        "check_crcs",
        "enable_auto_commit",
        "fetch_bytes_max",
        "group_id",
        "isolation_level",
        "max_poll_interval_ms",
        "partition_fetch_bytes_max",
    )

    def __init__(self, config: Mapping[str, object]) -> None:
        self.group_id: str | None = None
        self.isolation_level = "read_committed"
        # Kafka's default (ConsumerConfig auto.offset.reset = latest).
        self.auto_offset_reset = "latest"
        self.enable_auto_commit = True
        self.auto_commit_interval_ms = limits.auto_commit_interval_ms_default
        self.max_poll_interval_ms = limits.poll_interval_ms_max_default
        self.assignment_strategies: tuple[str, ...] = ASSIGNMENT_STRATEGIES_DEFAULT
        self.check_crcs = True
        self.fetch_bytes_max = limits.fetch_bytes_max_default
        self.partition_fetch_bytes_max = limits.partition_fetch_bytes_max_default
        # librdkafka's consumer default (Java's consumer says true): subscribe() and assign()
        # create no topic unless asked.
        self.allow_auto_create_topics = False
        for key, value in config.items():
            self._set(key, value)

    def _set(self, key: str, value: object) -> None:
        if key == "group.id":
            if not isinstance(value, str) or not value:
                raise InvalidConfigError(f"group.id must be a non-empty string, not {value!r}")
            self.group_id = value
        elif key == "isolation.level":
            if value not in ISOLATION_LEVELS:
                raise InvalidConfigError(f"isolation.level must be one of {ISOLATION_LEVELS}")
            self.isolation_level = str(value)
        elif key == "auto.offset.reset":
            if not isinstance(value, str) or value not in RESET_POLICIES:
                raise InvalidConfigError(
                    f"auto.offset.reset must be one of {sorted(RESET_POLICIES)}, not {value!r}"
                )
            self.auto_offset_reset = RESET_POLICIES[value]
        elif key == "enable.auto.commit":
            self.enable_auto_commit = _boolean(key, value)
        elif key == "auto.commit.interval.ms":
            self.auto_commit_interval_ms = _positive(key, value)
        elif key == "max.poll.interval.ms":
            self.max_poll_interval_ms = _positive(key, value)
        elif key == "partition.assignment.strategy":
            self.assignment_strategies = _strategies(value)
        elif key == "allow.auto.create.topics":
            self.allow_auto_create_topics = _boolean(key, value)
        elif key == "check.crcs":
            self.check_crcs = _boolean(key, value)
        elif key == "fetch.max.bytes":
            self.fetch_bytes_max = _positive(key, value)
        elif key == "max.partition.fetch.bytes":
            self.partition_fetch_bytes_max = _positive(key, value)
        elif key not in IGNORED_KEYS:
            raise InvalidConfigError(f"unknown consumer configuration {key!r}")


def _boolean(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise InvalidConfigError(f"{key} must be a boolean, not {value!r}")


def _strategies(value: object) -> tuple[str, ...]:
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not names:
        raise InvalidConfigError(
            f"partition.assignment.strategy must be a comma-separated list, not {value!r}"
        )
    strategies = tuple(str(name).strip() for name in names)
    unknown = [name for name in strategies if name not in ASSIGNORS]
    if unknown:
        raise InvalidConfigError(
            f"partition.assignment.strategy: {unknown} not supported; use {sorted(ASSIGNORS)}"
            " (cooperative-sticky is not implemented)"
        )
    return strategies


def _positive(key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidConfigError(f"{key} must be a positive integer, not {value!r}")
    return value
