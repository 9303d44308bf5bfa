"""Producer configuration (docs/api.md "Producer"): Kafka's dotted keys parsed once into a
ProducerSettings, so nothing else in the client spells them out (docs/style.md rule 6).

Keys and defaults follow confluent-kafka-python (librdkafka) where docs/api.md is silent. Unknown
keys raise InvalidConfigError, as librdkafka rejects them ("No such configuration property"),
and a rejected config changes nothing: the Producer is not created.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from eoslog import limits
from eoslog.errors import InvalidConfigError
from eoslog.record import layout
from eoslog.record.compression import CODEC_NAMES

# Kafka's int32 config fields (retries, the timeouts) are bounded by Java's Integer.MAX_VALUE.
_INT32_MAX: Final = (1 << 31) - 1

# Keys confluent-kafka-python users commonly pass that mean nothing for an in-process log;
# accepted so configs carry over, and ignored (documented on Producer).
IGNORED_KEYS: Final = frozenset(
    {"bootstrap.servers", "socket.timeout.ms", "request.timeout.ms", "metadata.max.age.ms"}
)
# librdkafka aliases -> the name used here.
ALIASES: Final = {
    "queue.buffering.max.ms": "linger.ms",
    "compression.codec": "compression.type",
    "message.send.max.retries": "retries",
    "message.timeout.ms": "delivery.timeout.ms",
    "request.required.acks": "acks",
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
    acks: int = -1
    client_id: str = "rdkafka"  # librdkafka's default client.id
    queue_messages_max: int = limits.queue_messages_max_default
    retries: int = _INT32_MAX  # librdkafka's default: retry until delivery.timeout.ms
    retry_backoff_ms: int = limits.retry_backoff_ms_default
    delivery_timeout_ms: int = limits.delivery_timeout_ms_default
    max_block_ms: int = limits.block_ms_max_default
    on_delivery: Callable[[Any, Any], object] | None = None
    # Java's producer default: a topic produced to before it exists is created (when the
    # broker's auto.create.topics.enable allows it).
    auto_create_topics: bool = True


def parse(config: Mapping[str, object]) -> ProducerSettings:
    """ProducerSettings from confluent-style keys; InvalidConfigError naming the first bad
    key. Pure: nothing is created or changed."""
    if not isinstance(config, Mapping):
        raise InvalidConfigError(f"producer config must be a mapping, not {type(config).__name__}")
    values: dict[str, object] = {}
    for raw_key, value in config.items():
        if not isinstance(raw_key, str):
            raise InvalidConfigError(f"configuration keys must be str, not {raw_key!r}")
        key = ALIASES.get(raw_key, raw_key)
        if key in IGNORED_KEYS:
            continue
        if key not in _PARSERS:
            raise InvalidConfigError(f"unknown producer configuration property {raw_key!r}")
        values[key] = _PARSERS[key](raw_key, value)
    transactional_id = values.get("transactional.id")
    idempotent = bool(values.get("enable.idempotence", True))
    if transactional_id is not None and not idempotent:
        raise InvalidConfigError("transactional.id requires enable.idempotence=true")
    acks = values.get("acks", -1)
    if idempotent and acks != -1:
        raise InvalidConfigError(f"enable.idempotence=true requires acks=all (-1), not {acks}")
    in_flight = values.get("max.in.flight.requests.per.connection", 1)
    if (
        idempotent
        and isinstance(in_flight, int)
        and in_flight > limits.in_flight_requests_idempotent_max
    ):
        raise InvalidConfigError(
            "enable.idempotence=true requires max.in.flight.requests.per.connection <= "
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
        linger_ms=values.get("linger.ms", limits.linger_ms_default),  # type: ignore[arg-type]
        compression=values.get("compression.type", layout.COMPRESSION_NONE),  # type: ignore[arg-type]
        acks=acks,  # type: ignore[arg-type]
        client_id=values.get("client.id", "rdkafka"),  # type: ignore[arg-type]
        queue_messages_max=values.get(  # type: ignore[arg-type]
            "queue.buffering.max.messages", limits.queue_messages_max_default
        ),
        retries=values.get("retries", _INT32_MAX),  # type: ignore[arg-type]
        retry_backoff_ms=values.get(  # type: ignore[arg-type]
            "retry.backoff.ms", limits.retry_backoff_ms_default
        ),
        delivery_timeout_ms=values.get(  # type: ignore[arg-type]
            "delivery.timeout.ms", limits.delivery_timeout_ms_default
        ),
        max_block_ms=values.get("max.block.ms", limits.block_ms_max_default),  # type: ignore[arg-type]
        on_delivery=values.get("on_delivery"),  # type: ignore[arg-type]
        auto_create_topics=values.get("allow.auto.create.topics", True),  # type: ignore[arg-type]
    )


# --- one parser per key --------------------------------------------------------------------


def _boolean(key: str, value: object) -> bool:
    # librdkafka takes true/false strings as well as booleans.
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise InvalidConfigError(f"{key} must be a boolean, not {value!r}")


def _integer(low: int, high: int) -> Callable[[str, object], int]:
    def parse_integer(key: str, value: object) -> int:
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidConfigError(f"{key} must be an integer in [{low}, {high}], not {value!r}")
        return value

    return parse_integer


def _linger(key: str, value: object) -> float:
    # librdkafka's linger.ms is a double (fractions of a millisecond are allowed).
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= limits.linger_ms_max
    ):
        raise InvalidConfigError(
            f"{key} must be a number of ms in [0, {limits.linger_ms_max}], not {value!r}"
        )
    return float(value)


def _compression(key: str, value: object) -> int:
    if value not in CODEC_NAMES:
        raise InvalidConfigError(f"{key} must be one of {', '.join(CODEC_NAMES)}, not {value!r}")
    return CODEC_NAMES[value]


def _acks(key: str, value: object) -> int:
    named = {"all": -1, "-1": -1, "0": 0, "1": 1}
    if isinstance(value, str) and value in named:
        return named[value]
    if not isinstance(value, bool) and value in (-1, 0, 1):
        return value
    raise InvalidConfigError(f"{key} must be all, -1, 0 or 1, not {value!r}")


def _text(key: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidConfigError(f"{key} must be a non-empty string, not {value!r}")
    return value


def _optional_text(key: str, value: object) -> str | None:
    return None if value is None else _text(key, value)


def _callback(key: str, value: object) -> object:
    if value is not None and not callable(value):
        raise InvalidConfigError(f"{key} must be callable, not {value!r}")
    return value


_PARSERS: Final[dict[str, Callable[[str, object], object]]] = {
    "enable.idempotence": _boolean,
    "transactional.id": _optional_text,
    "transaction.timeout.ms": _integer(1, _INT32_MAX),
    # A batch needs room for its 61-byte header and a record; librdkafka's upper bound.
    "batch.size": _integer(layout.HEADER_SIZE + 1, min(2_147_483_647, limits.batch_bytes_max)),
    "batch.num.messages": _integer(1, limits.producer_batch_records_max_ceiling),
    "linger.ms": _linger,
    "compression.type": _compression,
    "acks": _acks,
    "client.id": _text,
    "queue.buffering.max.messages": _integer(1, _INT32_MAX),
    "retries": _integer(0, _INT32_MAX),
    "retry.backoff.ms": _integer(1, limits.retry_backoff_ms_max),
    "delivery.timeout.ms": _integer(0, _INT32_MAX),
    "max.block.ms": _integer(0, _INT32_MAX),
    "max.in.flight.requests.per.connection": _integer(1, limits.in_flight_requests_max),
    "enable.gapless.guarantee": _boolean,
    "on_delivery": _callback,
    "allow.auto.create.topics": _boolean,
}
