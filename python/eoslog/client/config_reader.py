"""A client config read as confluent-kafka-python and librdkafka read it (docs/api.md
"librdkafka keys"). Every librdkafka key is known (eoslog.client.librdkafka_keys) and every
value is checked as librdkafka checks it; what a key means here is for producer_config and
consumer_config to say.

confluent-kafka hands librdkafka each value as str(value), None as no value, and librdkafka
parses that text. So does this module: "100", 100 and 100.0 are the same integer, True and
"true" the same boolean, and a value librdkafka refuses is an InvalidConfigError naming the key.
A few keys confluent-kafka keeps for itself, as Python objects: the callbacks (error_cb,
throttle_cb, stats_cb, oauth_cb and logger; on_delivery for a producer, on_commit for a
consumer), a producer's delivery.report.only.error and default.topic.config.

Pure: reading changes nothing, so a refused config leaves nothing behind.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final, TypeVar

from eoslog.client import librdkafka_keys as keys
from eoslog.errors import InvalidConfigError

PRODUCER: Final = "P"
CONSUMER: Final = "C"

# A key confluent-kafka takes itself: checks the Python object given and returns what to keep.
Reader = Callable[[str, object], object]

# C's isspace() in the "C" locale: what strtol, strtod and librdkafka's left-trim skip.
_C_SPACE: Final = " \t\n\v\f\r"
# The prefix C's strtol(text, &end, 0) reads; the rest of the text is ignored, as it is there.
_STRTOL: Final = re.compile(r"[ \t\n\v\f\r]*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
# The prefix C's strtod reads: a hexadecimal or decimal number, inf or nan.
_STRTOD_HEX: Final = r"0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?[0-9]+)?"
_STRTOD_DECIMAL: Final = r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?|inf(?:inity)?|nan"
_STRTOD: Final = re.compile(
    rf"[ \t\n\v\f\r]*([+-]?)(?:({_STRTOD_HEX})|({_STRTOD_DECIMAL}))", re.IGNORECASE
)
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1  # strtol saturates here (a 64-bit long)

Number = TypeVar("Number", int, float)


def read_config(
    config: Mapping[str, object], role: str, own_keys: Mapping[str, Reader]
) -> dict[str, tuple[str, object]]:
    """{librdkafka's name (an alias's target) or the Python key: (the key as given, the
    value as read)} for the keys of `role` (PRODUCER or CONSUMER); a key of the other role is
    checked and left out, as librdkafka ignores it (with a warning). `own_keys` are the
    Python-level keys of the role. A later key for the same property wins, as in librdkafka.
    InvalidConfigError names the first key that is unknown or whose value is refused."""
    if not isinstance(config, Mapping):
        raise InvalidConfigError(f"a client config must be a mapping, not {type(config).__name__}")
    found: dict[str, tuple[str, object]] = {}
    for key, value in _expand_default_topic_config(config).items():
        if not isinstance(key, str):
            raise InvalidConfigError(f"configuration keys must be str, not {key!r}")
        reader = own_keys.get(key) or _PYTHON_KEYS.get(key)
        if reader is not None:
            found[key] = (key, reader(key, value))
            continue
        prop = keys.find(key)
        if prop is None:
            reason = keys.JAVA_ONLY.get(key, f'No such configuration property: "{key}"')
            raise InvalidConfigError(reason)
        read = read_value(prop, key, value)
        if prop.role in ("*", role):
            found[prop.name] = (key, read)
    return found


def _expand_default_topic_config(config: Mapping[str, object]) -> Mapping[str, object]:
    """confluent-kafka's deprecated default.topic.config: its keys join the config,
    overriding the same keys given outside it."""
    nested = config.get("default.topic.config")
    if nested is None:
        return config
    if not isinstance(nested, Mapping):
        raise InvalidConfigError(f"default.topic.config must be a dict, not {nested!r}")
    merged = {key: value for key, value in config.items() if key != "default.topic.config"}
    merged.update(nested)
    return merged


def read_value(prop: keys.Property, key: str, value: object) -> object:
    """`value` as librdkafka reads it for `prop` (named `key` in the config): a bool, an
    int, a float, the canonical word of an enum, or text; None where librdkafka restores the
    default (no value, or "" for a string). InvalidConfigError, naming `key`, where
    librdkafka refuses the value."""
    # confluent-kafka passes str(value); librdkafka takes "" as no value at all.
    text = None if value is None else str(value)
    if text == "":
        text = None
    kind = prop.kind
    if kind in (keys.C_API, keys.INTERNAL):
        how = "set through a dedicated function" if kind == keys.C_API else "settable"
        raise InvalidConfigError(f'Property "{key}" cannot be {how}, not by name')
    if text is None:
        if kind in (keys.STR, keys.PATTERNS) and not prop.limits:
            return None
        raise InvalidConfigError(f'Configuration property "{key}" cannot be set to empty value')
    return _READERS[kind](prop, key, text)


def _read_bool(prop: keys.Property, key: str, text: str) -> bool:
    if text.lower() in ("true", "t") or text == "1":
        return True
    if text.lower() in ("false", "f") or text == "0":
        return False
    raise InvalidConfigError(f'Expected bool value for "{key}": true or false, not {text!r}')


def _read_int(prop: keys.Property, key: str, text: str) -> int:
    match = _STRTOL.match(text)
    if match is None:
        words = keys.INT_WORDS.get(prop.name, {})
        if text.lower() not in words:
            raise InvalidConfigError(f'Invalid value for configuration property "{key}": {text}')
        number = words[text.lower()]
    else:
        sign, digits = match.groups()
        if digits[:2].lower() == "0x":
            number = int(digits[2:], 16)
        else:
            number = int(digits, 8 if digits.startswith("0") else 10)
        number = max(_LONG_MIN, min(_LONG_MAX, -number if sign == "-" else number))
        # librdkafka casts strtol's long to an int: the low 32 bits, as a signed number.
        number = (number + (1 << 31)) % (1 << 32) - (1 << 31)
    return _in_range(prop, key, number)


def _read_float(prop: keys.Property, key: str, text: str) -> float:
    match = _STRTOD.match(text)
    if match is None:
        raise InvalidConfigError(f'Invalid value for configuration property "{key}": {text}')
    sign, hexadecimal, decimal = match.groups()
    number = float.fromhex(hexadecimal) if hexadecimal else float(decimal)
    return _in_range(prop, key, -number if sign == "-" else number)


def _in_range(prop: keys.Property, key: str, number: Number) -> Number:
    low, high = prop.limits
    # As librdkafka compares: a NaN is outside no range.
    if number < low or number > high:  # type: ignore[operator]
        raise InvalidConfigError(
            f'Configuration property "{key}" value {number} is outside allowed range {low}..{high}'
        )
    return number


def _read_enum(prop: keys.Property, key: str, text: str) -> str | None:
    word = text.lstrip(_C_SPACE)
    if not word:
        return None  # librdkafka skips an all-space value and keeps the default
    for allowed in prop.limits:
        if word.lower() == str(allowed).lower():
            return str(allowed)
    raise InvalidConfigError(f'Invalid value "{word}" for configuration property "{key}"')


def _read_flags(prop: keys.Property, key: str, text: str) -> str:
    allowed = {str(word).lower() for word in prop.limits}
    for item in text.split(","):
        # Trimmed on the left only, then one + (add) or - (remove) prefix, as librdkafka does.
        word = item.lstrip(_C_SPACE)
        word = word[1:] if word[:1] in ("+", "-") else word
        if word and word.lower() not in allowed:
            raise InvalidConfigError(f'Invalid value "{word}" for configuration property "{key}"')
    return text


def _read_text(prop: keys.Property, key: str, text: str) -> str:
    text = text.lstrip(_C_SPACE)
    # A REQUIRED text is refused only when missing (read_value), not when empty once trimmed.
    refused = (prop.limits and text not in prop.limits) or (
        prop.kind == keys.WORD and ("," in text or " " in text)
    )
    if refused:
        raise InvalidConfigError(f'Invalid value for configuration property "{key}": {text}')
    return text


def _read_patterns(prop: keys.Property, key: str, text: str) -> str:
    for pattern in text.split(","):
        try:
            re.compile(pattern)
        except re.error as error:
            raise InvalidConfigError(
                f'Invalid value for configuration property "{key}": {pattern}: {error}'
            ) from None
    return text


_READERS: Final[dict[str, Callable[[keys.Property, str, str], object]]] = {
    keys.BOOL: _read_bool,
    keys.INT: _read_int,
    keys.FLOAT: _read_float,
    keys.ENUM: _read_enum,
    keys.FLAGS: _read_flags,
    keys.STR: _read_text,
    keys.WORD: _read_text,
    keys.REQUIRED: _read_text,
    keys.PATTERNS: _read_patterns,
}


# --- the keys confluent-kafka reads itself -----------------------------------------------


def callback(key: str, value: object) -> object:
    """A callback: confluent-kafka refuses anything not callable, None included."""
    if not callable(value):
        raise InvalidConfigError(f"{key} requires a callable object, not {value!r}")
    return value


def python_bool(key: str, value: object) -> bool:
    """A Python bool and nothing else (confluent-kafka's delivery.report.only.error)."""
    if not isinstance(value, bool):
        raise InvalidConfigError(f"Expected {key} to be bool type, not {type(value).__name__}")
    return value


def _logger(key: str, value: object) -> object:
    # confluent-kafka calls logger.log(level, ...): None, or an object with a log method.
    if value is not None and not callable(getattr(value, "log", None)):
        raise InvalidConfigError(f"{key} must be a logging.Logger (with a log method)")
    return value


_PYTHON_KEYS: Final[dict[str, Reader]] = {
    "error_cb": callback,
    "throttle_cb": callback,
    "stats_cb": callback,
    "oauth_cb": callback,
    "logger": _logger,
}
PYTHON_KEYS: Final = frozenset(_PYTHON_KEYS)


# --- eoslog's own limits on top of librdkafka's ----------------------------------------------


def within(key: str, value: object, low: float, high: float) -> object:
    """`value`, a number librdkafka read, when eoslog can honour it (low <= value <= high),
    else InvalidConfigError naming `key`. For the keys eoslog applies, where its limits are
    narrower than librdkafka's range."""
    assert isinstance(value, int | float), (key, value)  # read as an INT or FLOAT property
    if not low <= value <= high:
        raise InvalidConfigError(f"{key} must be in [{low}, {high}] here, not {value}")
    return value
