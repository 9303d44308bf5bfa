"""Producer configuration (docs/api.md "Producer", "librdkafka keys"): Kafka's dotted keys
parsed once into a ProducerSettings, so nothing else in the client spells them out
(docs/style.md rule 6).

Every librdkafka key is accepted and checked as librdkafka checks it
(eoslog.client.config_reader); the keys in APPLIED set what a ProducerSettings holds, within
eoslog's limits where those are narrower, and every other key (network, security, statistics,
a consumer's key, ...) is accepted and ignored. Defaults follow confluent-kafka-python
(librdkafka) where docs/api.md is silent. An unknown key raises InvalidConfigError, as librdkafka
refuses it ("No such configuration property"), and a refused config changes nothing: the
Producer is not created.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from eoslog import limits
from eoslog.client import librdkafka_keys as keys
from eoslog.client.config_reader import (
    PRODUCER,
    Reader,
    callback,
    python_bool,
    read_config,
    read_value,
    within,
)
from eoslog.errors import InvalidConfigError
from eoslog.record import layout
from eoslog.record.compression import CODEC_NAMES, LEVEL_DEFAULT

# Kafka's int32 config fields (retries, the timeouts) are bounded by Java's Integer.MAX_VALUE.
_INT32_MAX: Final = (1 << 31) - 1
# max.block.ms is the Java producer's key (librdkafka has none), read as librdkafka reads ints.
_MAX_BLOCK_MS: Final = keys.Property("max.block.ms", "P", keys.INT, (0, _INT32_MAX))

# The keys only a producer takes, read from the Python object as confluent-kafka reads them.
_OWN_KEYS: Final[dict[str, Reader]] = {
    "on_delivery": callback,
    # Only failed deliveries get their callbacks (the others are still counted as served).
    "delivery.report.only.error": python_bool,
    "max.block.ms": lambda key, value: read_value(_MAX_BLOCK_MS, key, value),
}


@dataclass(frozen=True)
class ProducerSettings:
    idempotent: bool = True
    transactional_id: str | None = None
    transaction_timeout_ms: int = limits.transaction_timeout_ms_default
    batch_bytes_max: int = limits.producer_batch_bytes_max_default
    batch_records_max: int = limits.producer_batch_records_max_default
    linger_ms: float = limits.linger_ms_default
    compression: int = layout.COMPRESSION_NONE
    compression_level: int = LEVEL_DEFAULT  # -1: the codec's default
    acks: int = -1
    client_id: str = "rdkafka"  # librdkafka's default client.id
    queue_messages_max: int = limits.queue_messages_max_default
    queue_kbytes_max: int = limits.queue_kbytes_max_default
    retries: int = _INT32_MAX  # librdkafka's default: retry until delivery.timeout.ms
    retry_backoff_ms: int = limits.retry_backoff_ms_default
    delivery_timeout_ms: int = limits.delivery_timeout_ms_default
    max_block_ms: int = limits.block_ms_max_default
    on_delivery: Callable[[Any, Any], object] | None = None
    message_bytes_max: int = limits.producer_message_bytes_max_default
    report_only_errors: bool = False
    partitioner: str | None = None  # None: the producer's default (eoslog.client.partitioner)
    sticky_linger_ms: int = limits.sticky_linger_ms_default
    # Java's producer default: a topic produced to before it exists is created (when the
    # broker's auto.create.topics.enable allows it).
    auto_create_topics: bool = True


def parse(config: Mapping[str, object]) -> ProducerSettings:
    """ProducerSettings from confluent-style keys; InvalidConfigError naming the first bad
    key. Pure: nothing is created or changed."""
    read = read_config(config, PRODUCER, _OWN_KEYS)
    values: dict[str, object] = {}
    for name, (key, value) in read.items():
        apply = _APPLIED.get(name)
        if apply is not None and value is not None:
            values[name] = apply(key, value)
    transactional_id = values.get("transactional.id")
    idempotent = bool(values.get("enable.idempotence", True))
    if transactional_id is not None and not idempotent:
        raise InvalidConfigError("transactional.id requires enable.idempotence=true")
    acks = values.get("request.required.acks", -1)
    if idempotent and acks != -1:
        key = read["request.required.acks"][0]
        raise InvalidConfigError(f"enable.idempotence=true requires {key}=all (-1), not {acks}")
    in_flight = values.get("max.in.flight.requests.per.connection", 1)
    if (
        idempotent
        and isinstance(in_flight, int)
        and in_flight > limits.in_flight_requests_idempotent_max
    ):
        key = read["max.in.flight.requests.per.connection"][0]
        raise InvalidConfigError(
            f"enable.idempotence=true requires {key} <= "
            f"{limits.in_flight_requests_idempotent_max}, not {in_flight}"
        )
    return ProducerSettings(
        idempotent=idempotent,
        transactional_id=transactional_id,  # type: ignore[arg-type]
        transaction_timeout_ms=values.get(  # type: ignore[arg-type]
            "transaction.timeout.ms", limits.transaction_timeout_ms_default
        ),
        batch_bytes_max=values.get("batch.size", limits.producer_batch_bytes_max_default),  # type: ignore[arg-type]
        batch_records_max=values.get(  # type: ignore[arg-type]
            "batch.num.messages", limits.producer_batch_records_max_default
        ),
        linger_ms=values.get("queue.buffering.max.ms", limits.linger_ms_default),  # type: ignore[arg-type]
        compression=values.get("compression.codec", layout.COMPRESSION_NONE),  # type: ignore[arg-type]
        compression_level=values.get("compression.level", LEVEL_DEFAULT),  # type: ignore[arg-type]
        acks=acks,  # type: ignore[arg-type]
        client_id=values.get("client.id", "rdkafka"),  # type: ignore[arg-type]
        queue_messages_max=values.get(  # type: ignore[arg-type]
            "queue.buffering.max.messages", limits.queue_messages_max_default
        ),
        queue_kbytes_max=values.get(  # type: ignore[arg-type]
            "queue.buffering.max.kbytes", limits.queue_kbytes_max_default
        ),
        retries=values.get("message.send.max.retries", _INT32_MAX),  # type: ignore[arg-type]
        retry_backoff_ms=values.get(  # type: ignore[arg-type]
            "retry.backoff.ms", limits.retry_backoff_ms_default
        ),
        delivery_timeout_ms=values.get(  # type: ignore[arg-type]
            "message.timeout.ms", limits.delivery_timeout_ms_default
        ),
        max_block_ms=values.get("max.block.ms", limits.block_ms_max_default),  # type: ignore[arg-type]
        on_delivery=values.get("on_delivery"),  # type: ignore[arg-type]
        auto_create_topics=values.get("allow.auto.create.topics", True),  # type: ignore[arg-type]
        message_bytes_max=values.get(  # type: ignore[arg-type]
            "message.max.bytes", limits.producer_message_bytes_max_default
        ),
        report_only_errors=values.get("delivery.report.only.error", False),  # type: ignore[arg-type]
        partitioner=values.get("partitioner"),  # type: ignore[arg-type]
        sticky_linger_ms=values.get(  # type: ignore[arg-type]
            "sticky.partitioning.linger.ms", limits.sticky_linger_ms_default
        ),
    )


# --- what each applied key means here --------------------------------------------------------
# Each takes the key as given and the value as librdkafka read it (config_reader), and adds
# eoslog's own limits where they are narrower than librdkafka's range.


def _as_given(key: str, value: object) -> object:
    return value


def _compression(key: str, value: object) -> int:
    # librdkafka's enum has Kafka's five codecs, every one of which eoslog writes.
    return CODEC_NAMES[str(value)]


def _acks(key: str, value: object) -> int:
    # librdkafka takes -1 (all) up to 1000 replicas; one log here is every replica there is.
    if not isinstance(value, int) or value not in (-1, 0, 1):
        raise InvalidConfigError(f"{key} must be all, -1, 0 or 1, not {value!r}")
    return value


def _text_or_default(default: str | None) -> Callable[[str, object], object]:
    # librdkafka keeps an empty string as given; here it means the default, as None does.
    return lambda key, value: value or default


def _between(low: int | float, high: int | float) -> Callable[[str, object], object]:
    return lambda key, value: within(key, value, low, high)


# librdkafka's name (an alias's target) -> what the value becomes in ProducerSettings.
_APPLIED: Final[dict[str, Callable[[str, object], object]]] = {
    "enable.idempotence": _as_given,
    "transactional.id": _text_or_default(None),
    "transaction.timeout.ms": _as_given,
    # A batch needs room for its 61-byte header and a record, and fits eoslog's largest batch.
    "batch.size": _between(layout.HEADER_SIZE + 1, min(_INT32_MAX, limits.batch_bytes_max)),
    "batch.num.messages": _between(1, limits.producer_batch_records_max_ceiling),
    "queue.buffering.max.ms": _between(0, limits.linger_ms_max),  # linger.ms; refuses NaN
    "compression.codec": _compression,
    # librdkafka's range (-1 .. 12) is checked as it reads the value; a level past the codec's
    # highest is lowered to it (eoslog.record.compression.codec_level).
    "compression.level": _as_given,
    "request.required.acks": _acks,
    "client.id": _text_or_default("rdkafka"),
    # librdkafka also takes 0 here; eoslog's queue holds at least one message.
    "queue.buffering.max.messages": _between(1, _INT32_MAX),
    # librdkafka's range (1 .. 2147483647 KiB) is checked as it reads the value.
    "queue.buffering.max.kbytes": _as_given,
    "message.send.max.retries": _as_given,
    "retry.backoff.ms": _between(1, limits.retry_backoff_ms_max),
    "message.timeout.ms": _as_given,
    "max.block.ms": _as_given,
    "max.in.flight.requests.per.connection": _between(1, limits.in_flight_requests_max),
    "on_delivery": _as_given,
    "delivery.report.only.error": _as_given,
    "allow.auto.create.topics": _as_given,
    # librdkafka's range (1000 .. 1e9) is checked as it reads the value.
    "message.max.bytes": _as_given,
    # librdkafka's seven names (eoslog.client.partitioner), checked as it reads the value.
    "partitioner": lambda key, value: str(value).lower(),
    # Only 0 (no sticky partition: each null-key record at random) against any other value
    # (sticky until the batch closes, Kafka's rule) changes what eoslog does.
    "sticky.partitioning.linger.ms": _as_given,
}
APPLIED: Final = frozenset(_APPLIED)
