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

# Kafka's batch.size default (ProducerConfig): bytes per batch before it closes.
BATCH_SIZE_DEFAULT: Final = 16_384
# librdkafka's batch.num.messages default: records per batch before it closes.
BATCH_NUM_MESSAGES_DEFAULT: Final = 10_000
# librdkafka's linger.ms default (5 ms since librdkafka 1.7; Kafka's own since 4.0, KIP-1030).
# 5 ms lets a tight produce() loop fill whole batches (one append and one CRC per batch, not
# per record) while a lone record still lands within a few milliseconds. 0 appends each
# produce() at once, as a batch of one.
LINGER_MS_DEFAULT: Final = 5
# librdkafka's queue.buffering.max.messages: produce() raises BufferError beyond it.
QUEUE_MESSAGES_MAX_DEFAULT: Final = 100_000
# Kafka's delivery.timeout.ms default: how long retriable append errors are retried.
DELIVERY_TIMEOUT_MS_DEFAULT: Final = 120_000
RETRY_BACKOFF_MS_DEFAULT: Final = 100
# Kafka refuses idempotence with more than 5 requests in flight (the broker remembers 5 batches).
IN_FLIGHT_MAX_IDEMPOTENT: Final = 5
TRANSACTION_TIMEOUT_MS_DEFAULT: Final = 60_000
# Kafka's max.block.ms default: how long init/commit/abort_transaction block when not told.
MAX_BLOCK_MS_DEFAULT: Final = 60_000
COMPRESSIONS: Final = {"none": layout.COMPRESSION_NONE, "lz4": layout.COMPRESSION_LZ4}

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
    transaction_timeout_ms: int = TRANSACTION_TIMEOUT_MS_DEFAULT
    batch_bytes_max: int = BATCH_SIZE_DEFAULT
    batch_records_max: int = BATCH_NUM_MESSAGES_DEFAULT
    linger_ms: float = LINGER_MS_DEFAULT
    compression: int = layout.COMPRESSION_NONE
    acks: int = -1
    client_id: str = "rdkafka"  # librdkafka's default client.id
    queue_messages_max: int = QUEUE_MESSAGES_MAX_DEFAULT
    retries: int = (1 << 31) - 1  # librdkafka's default: retry until delivery.timeout.ms
    retry_backoff_ms: int = RETRY_BACKOFF_MS_DEFAULT
    delivery_timeout_ms: int = DELIVERY_TIMEOUT_MS_DEFAULT
    max_block_ms: int = MAX_BLOCK_MS_DEFAULT
    on_delivery: Callable[[Any, Any], object] | None = None


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
    if idempotent and isinstance(in_flight, int) and in_flight > IN_FLIGHT_MAX_IDEMPOTENT:
        raise InvalidConfigError(
            "enable.idempotence=true requires max.in.flight.requests.per.connection <= "
            f"{IN_FLIGHT_MAX_IDEMPOTENT}, not {in_flight}"
        )
    return ProducerSettings(
        idempotent=idempotent,
        transactional_id=transactional_id,  # type: ignore[arg-type]
        transaction_timeout_ms=values.get(  # type: ignore[arg-type]
            "transaction.timeout.ms", TRANSACTION_TIMEOUT_MS_DEFAULT
        ),
        batch_bytes_max=values.get("batch.size", BATCH_SIZE_DEFAULT),  # type: ignore[arg-type]
        batch_records_max=values.get(  # type: ignore[arg-type]
            "batch.num.messages", BATCH_NUM_MESSAGES_DEFAULT
        ),
        linger_ms=values.get("linger.ms", LINGER_MS_DEFAULT),  # type: ignore[arg-type]
        compression=values.get("compression.type", layout.COMPRESSION_NONE),  # type: ignore[arg-type]
        acks=acks,  # type: ignore[arg-type]
        client_id=values.get("client.id", "rdkafka"),  # type: ignore[arg-type]
        queue_messages_max=values.get(  # type: ignore[arg-type]
            "queue.buffering.max.messages", QUEUE_MESSAGES_MAX_DEFAULT
        ),
        retries=values.get("retries", (1 << 31) - 1),  # type: ignore[arg-type]
        retry_backoff_ms=values.get(  # type: ignore[arg-type]
            "retry.backoff.ms", RETRY_BACKOFF_MS_DEFAULT
        ),
        delivery_timeout_ms=values.get(  # type: ignore[arg-type]
            "delivery.timeout.ms", DELIVERY_TIMEOUT_MS_DEFAULT
        ),
        max_block_ms=values.get("max.block.ms", MAX_BLOCK_MS_DEFAULT),  # type: ignore[arg-type]
        on_delivery=values.get("on_delivery"),  # type: ignore[arg-type]
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
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 900_000:
        raise InvalidConfigError(f"{key} must be a number of ms in [0, 900000], not {value!r}")
    return float(value)


def _compression(key: str, value: object) -> int:
    if value not in COMPRESSIONS:
        raise InvalidConfigError(
            f"{key} must be one of {', '.join(COMPRESSIONS)} (eoslog builds no other codec), "
            f"not {value!r}"
        )
    return COMPRESSIONS[value]


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


_INT32_MAX: Final = (1 << 31) - 1
_PARSERS: Final[dict[str, Callable[[str, object], object]]] = {
    "enable.idempotence": _boolean,
    "transactional.id": _optional_text,
    "transaction.timeout.ms": _integer(1, _INT32_MAX),
    # A batch needs room for its 61-byte header and a record; librdkafka's upper bound.
    "batch.size": _integer(layout.HEADER_SIZE + 1, min(2_147_483_647, limits.batch_bytes_max)),
    "batch.num.messages": _integer(1, 1_000_000),
    "linger.ms": _linger,
    "compression.type": _compression,
    "acks": _acks,
    "client.id": _text,
    "queue.buffering.max.messages": _integer(1, _INT32_MAX),
    "retries": _integer(0, _INT32_MAX),
    "retry.backoff.ms": _integer(1, 300_000),
    "delivery.timeout.ms": _integer(0, _INT32_MAX),
    "max.block.ms": _integer(0, _INT32_MAX),
    "max.in.flight.requests.per.connection": _integer(1, 1_000_000),
    "enable.gapless.guarantee": _boolean,
    "on_delivery": _callback,
}
