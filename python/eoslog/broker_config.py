"""The broker's own settings (eoslog.open's config): the broker-level Kafka properties eoslog
understands, with Kafka's defaults, and the log.* keys that set every topic's defaults
(eoslog.log.config.BROKER_KEYS), parsed once here (docs/style.md rule 6)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from eoslog import limits
from eoslog.errors import InvalidConfigError
from eoslog.log.config import BROKER_KEYS, DAY_MS, LogConfig, parse_number

# Broker properties this layer understands, with Kafka's defaults. Kafka spreads its internal
# topics over 50 partitions to balance load across brokers; one embedded node has nothing to
# balance, so eoslog defaults them to 1 (fewer files, faster open); both stay configurable.
# Their segments are 1 MiB where Kafka's are 100 MiB: the cleaner never cleans the active
# segment, so the open replays all of it, and a 100 MiB one holds about 200,000 transactions'
# state records; at 1 MiB the open's replay stays near the live state.
BROKER_DEFAULTS: Final[dict[str, int]] = {
    # A topic a producer (or a consumer allowing it) names before it exists is created with
    # num.partitions partitions and the broker's log defaults (topic_metadata).
    "auto.create.topics.enable": True,
    "num.partitions": 1,
    "log.retention.check.interval.ms": 300_000,
    "transaction.state.log.num.partitions": 1,
    "transaction.state.log.segment.bytes": 1024 * 1024,
    "offsets.topic.num.partitions": 1,
    "offsets.topic.segment.bytes": 1024 * 1024,
    # Used by the transaction coordinator and the broker's timer that aborts timed-out
    # transactions (the transaction keys), and by every partition log's producer state
    # (producer.id.expiration.ms).
    "transaction.max.timeout.ms": 900_000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10_000,
    "transactional.id.expiration.ms": 7 * DAY_MS,
    "producer.id.expiration.ms": DAY_MS,
    # Committed offsets past their retention are tombstoned (coordinator/offset_expiry.py),
    # checked on the maintenance thread's transaction pass at this interval.
    "offsets.retention.minutes": 7 * 24 * 60,
    "offsets.retention.check.interval.ms": 600_000,
    # The wire front end's limits (eoslog.serve.connection): the largest request, the
    # connections open at once, and each connection's read-ahead in requests and bytes.
    "socket.request.max.bytes": limits.request_bytes_max_default,
    "max.connections": limits.connections_max_default,
    "queued.max.requests": limits.queued_requests_max_default,
    "queued.max.request.bytes": limits.queued_request_bytes_max_default,
    # Groups with Kafka clients as members (`eoslog serve`, coordinator/classic_groups.py).
    "group.initial.rebalance.delay.ms": 3000,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1_800_000,
    # The log cleaner's named throughput limit (eoslog.log.cleaner): bytes it reads and
    # writes per second, at most. Kafka's is a double defaulting to Double.MAX_VALUE (no
    # limit); eoslog keeps whole bytes, and its default is limits.cleaner_bytes_per_second_off.
    "log.cleaner.io.max.bytes.per.second": limits.cleaner_bytes_per_second_off,
}

_BOOLEAN_KEYS: Final = frozenset({"auto.create.topics.enable"})
# Kafka's DOUBLE broker settings, kept as whole numbers at least 1.
_RATE_KEYS: Final = frozenset({"log.cleaner.io.max.bytes.per.second"})


def parse_broker_config(config: Mapping[str, object]) -> tuple[dict[str, int], LogConfig]:
    settings = dict(BROKER_DEFAULTS)
    topic_defaults: dict[str, object] = {}
    for key, value in config.items():
        if key in BROKER_KEYS:
            topic_defaults[BROKER_KEYS[key]] = value
        elif key in _BOOLEAN_KEYS:
            # Kafka takes the strings "true" and "false" as well as booleans.
            flag = {"true": True, "false": False}.get(str(value).lower(), value)
            if not isinstance(flag, bool):
                raise InvalidConfigError(f"{key} must be a boolean, not {value!r}")
            settings[key] = flag
        elif key in _RATE_KEYS:
            rate = parse_number(key, value, 1.0, float("inf"))
            settings[key] = min(int(rate), limits.cleaner_bytes_per_second_off)
        elif key in BROKER_DEFAULTS:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidConfigError(f"{key} must be a non-negative integer, not {value!r}")
            settings[key] = value
        else:
            raise InvalidConfigError(f"unknown broker configuration {key!r}")
    return settings, LogConfig().with_properties(topic_defaults)
