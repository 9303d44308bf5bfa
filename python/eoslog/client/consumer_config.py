"""Consumer configuration (docs/api.md "Consumer", "librdkafka keys"): Kafka's dotted keys
parsed once into a ConsumerConfig, so nothing else in the client spells them out
(docs/style.md rule 6). The defaults and bounds are named in eoslog.limits.

Every librdkafka key is accepted and checked as librdkafka checks it
(eoslog.client.config_reader); the keys in APPLIED set the ConsumerConfig, and every other key
(network, security, statistics, a producer's key, ...) is accepted and ignored. Keys and
defaults follow Kafka's ConsumerConfig and confluent-kafka-python (librdkafka) where
docs/api.md is silent. An unknown key raises InvalidConfigError naming it, as librdkafka
refuses it, and a refused config changes nothing: the Consumer is not created.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from eoslog import limits
from eoslog.client.config_reader import CONSUMER, Reader, callback, read_config, within
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
# The keys only a consumer takes, read from the Python object as confluent-kafka reads them.
_OWN_KEYS: Final[dict[str, Reader]] = {"on_commit": callback}


class ConsumerConfig:
    """The parsed consumer properties. InvalidConfigError names the first bad key."""

    __slots__ = (
        "allow_auto_create_topics",
        "assignment_strategies",
        "auto_commit_interval_ms",
        "auto_offset_reset",
        "check_crcs",
        "enable_auto_commit",
        "enable_auto_offset_store",
        "enable_partition_eof",
        "fetch_bytes_max",
        "group_id",
        "isolation_level",
        "max_poll_interval_ms",
        "on_commit",
        "partition_fetch_bytes_max",
    )

    def __init__(self, config: Mapping[str, object]) -> None:
        self.group_id: str | None = None
        self.isolation_level = "read_committed"
        # Kafka's default (ConsumerConfig auto.offset.reset = latest).
        self.auto_offset_reset = "latest"
        self.enable_auto_commit = True
        # librdkafka's default: poll() stores each delivered message's offset + 1
        # (eoslog.client.offset_store), and commits commit what is stored.
        self.enable_auto_offset_store = True
        # librdkafka's default: reaching a partition's end is not reported.
        self.enable_partition_eof = False
        # 0 turns the periodic commit off (librdkafka): stored offsets are still committed
        # before partitions are revoked and at close.
        self.auto_commit_interval_ms = limits.auto_commit_interval_ms_default
        self.max_poll_interval_ms = limits.poll_interval_ms_max_default
        self.assignment_strategies: tuple[str, ...] = ASSIGNMENT_STRATEGIES_DEFAULT
        self.check_crcs = True
        self.fetch_bytes_max = limits.fetch_bytes_max_default
        self.partition_fetch_bytes_max = limits.partition_fetch_bytes_max_default
        # librdkafka's consumer default (Java's consumer says true): subscribe() and assign()
        # create no topic unless asked.
        self.allow_auto_create_topics = False
        # confluent's on_commit(err, partitions), called after each automatic or asynchronous
        # commit (eoslog.client.group_member).
        self.on_commit: Callable[[Any, Any], object] | None = None
        for name, (key, value) in read_config(config, CONSUMER, _OWN_KEYS).items():
            apply = _APPLIED.get(name)
            if apply is not None:
                attribute, parse = apply
                setattr(self, attribute, parse(key, value))


# --- what each applied key means here --------------------------------------------------------
# Each takes the key as given and the value as librdkafka read it (config_reader: a bool, an
# int, an enum's canonical word, text, or None for the default), and adds eoslog's own limits
# where they are narrower than librdkafka's range.


def _group_id(key: str, value: object) -> str:
    # librdkafka takes "" as no group; here a group.id given must name a group.
    if not value:
        raise InvalidConfigError(f"{key} must be a non-empty string, not {value!r}")
    return str(value)


def _isolation_level(key: str, value: object) -> str:
    if value not in ISOLATION_LEVELS:  # None: an all-space value, librdkafka's default
        return "read_committed"
    return str(value)


def _auto_offset_reset(key: str, value: object) -> str:
    return RESET_POLICIES[str(value)] if value is not None else "latest"


def _strategies(key: str, value: object) -> tuple[str, ...]:
    names = str(value or "").split(",")
    strategies = tuple(name.strip() for name in names)
    unknown = [name for name in strategies if name not in ASSIGNORS]
    if unknown:
        raise InvalidConfigError(
            f"{key}: {unknown} not supported; use {sorted(ASSIGNORS)}"
            " (cooperative-sticky is not implemented)"
        )
    return strategies


def _as_given(key: str, value: object) -> object:
    return value


def _at_least_one(key: str, value: object) -> object:
    # librdkafka's fetch.max.bytes range starts at 0 (and refuses 0 when the consumer is
    # created, below message.max.bytes); a fetch here returns at least a byte.
    return within(key, value, 1, _FETCH_BYTES_MAX)


_FETCH_BYTES_MAX: Final = 2_147_483_135  # librdkafka's upper bound for fetch.max.bytes


# librdkafka's name (an alias's target) -> (ConsumerConfig attribute, what the value becomes).
_APPLIED: Final[dict[str, tuple[str, Callable[[str, object], object]]]] = {
    "group.id": ("group_id", _group_id),
    "isolation.level": ("isolation_level", _isolation_level),
    "auto.offset.reset": ("auto_offset_reset", _auto_offset_reset),
    "enable.auto.commit": ("enable_auto_commit", _as_given),
    "enable.auto.offset.store": ("enable_auto_offset_store", _as_given),
    "enable.partition.eof": ("enable_partition_eof", _as_given),
    "auto.commit.interval.ms": ("auto_commit_interval_ms", _as_given),
    "max.poll.interval.ms": ("max_poll_interval_ms", _as_given),
    "partition.assignment.strategy": ("assignment_strategies", _strategies),
    "allow.auto.create.topics": ("allow_auto_create_topics", _as_given),
    "check.crcs": ("check_crcs", _as_given),
    "fetch.max.bytes": ("fetch_bytes_max", _at_least_one),
    "fetch.message.max.bytes": ("partition_fetch_bytes_max", _as_given),
    "on_commit": ("on_commit", _as_given),
}
APPLIED: Final = frozenset(_APPLIED)
