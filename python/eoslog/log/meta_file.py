"""eoslog.meta: eoslog's own metadata file at the log-directory root (its one definition,
docs/style.md rule 1): magic, version, CRC-32C of the payload, then the payload, JSON holding the
topics (partition count and the config given at creation), the next producer-id block and the
transaction coordinator's epoch.

Every field read back is checked exactly as user input is (topic names by the rule that keeps
paths inside the directory, partition counts, config through LogConfig, integers in range),
since a name read here becomes a path: a malformed or forged file, even one with a valid CRC,
raises KafkaStorageError naming the file, before any of it is used.

Thread safety: the functions keep no state; the broker serializes the writers of the file.
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass
from typing import Final, NamedTuple, NoReturn

from eoslog import limits
from eoslog.errors import InvalidConfigError, InvalidTopicError, KafkaStorageError
from eoslog.fs import FileSystem
from eoslog.log.checkpoints import read_small_file, write_atomically
from eoslog.log.config import LogConfig
from eoslog.record import primitives

META_FILE: Final = "eoslog.meta"
# The most partitions a topic may have: create_topic's bound, applied to eoslog.meta too.
PARTITIONS_MAX: Final = 1_000_000
# Kafka's coordinator epoch is an int32 (in every marker), and each open adds one.
COORDINATOR_EPOCH_MAX: Final = (1 << 31) - 2
PRODUCER_ID_MAX: Final = (1 << 63) - 1
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_HEADER = struct.Struct(">4shI")  # magic, version, CRC-32C of the payload
_MAGIC: Final = b"EOSM"
_VERSION: Final = 1


class TopicMetadata(NamedTuple):
    name: str
    num_partitions: int
    config: dict[str, int | float | str]


@dataclass
class Meta:
    """What eoslog.meta holds."""

    topics: dict[str, TopicMetadata]
    # docs/coordinator.md §5: the first producer id of the next block; ids below it may have been
    # handed out and are never reused.
    next_producer_id_block: int = 0
    # The transaction coordinator's epoch, one higher at every open (§2.3).
    coordinator_epoch: int = 0


def validate_topic_name(name: object) -> str:
    """Kafka's rule (1-249 of [a-zA-Z0-9._-], not "." or ".."), checked before any path is
    built from the name, so no name can reach outside the log directory."""
    if not isinstance(name, str) or not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
        raise InvalidTopicError(
            f"invalid topic name {name!r}: use 1-249 characters of [a-zA-Z0-9._-], not '.' or '..'"
        )
    return name


def partition_count(partitions: object) -> int:
    """A topic's partition count, from a caller or from eoslog.meta: 1..PARTITIONS_MAX."""
    if (
        isinstance(partitions, bool)
        or not isinstance(partitions, int)
        or not (1 <= partitions <= PARTITIONS_MAX)
    ):
        raise InvalidConfigError(
            f"num_partitions must be a positive integer up to {PARTITIONS_MAX}, not {partitions!r}"
        )
    return partitions


def encode(meta: Meta) -> bytes:
    body = {
        "topics": {
            name: {"partitions": topic.num_partitions, "config": topic.config}
            for name, topic in sorted(meta.topics.items())
        },
        "next_producer_id_block": meta.next_producer_id_block,
        "coordinator_epoch": meta.coordinator_epoch,
    }
    payload = json.dumps(body, sort_keys=True).encode()
    return _HEADER.pack(_MAGIC, _VERSION, primitives.crc32c(payload)) + payload


def write(fs: FileSystem, path: str, meta: Meta) -> None:
    """Replace the file at path with `meta`, encoded (temp file, fsync, rename:
    checkpoints.write_atomically). The caller serializes writers: they share `<path>.tmp`."""
    write_atomically(fs, path, encode(meta))


def read(fs: FileSystem, path: str, log_config: LogConfig) -> Meta | None:
    """The file at path, checked (module docstring); None if there is none. Topic configs
    are checked as overrides of log_config."""
    if not fs.exists(path):
        return None
    handle = fs.open(path, read_only=True)
    try:
        data = read_small_file(handle, path, limits.metadata_file_bytes_max)
    except ValueError as error:
        raise KafkaStorageError(str(error)) from None
    finally:
        handle.close()
    return decode(path, data, log_config)


def decode(path: str, data: bytes, log_config: LogConfig) -> Meta:
    """The checked content of eoslog.meta's bytes; KafkaStorageError naming path otherwise."""
    if len(data) < _HEADER.size:
        raise KafkaStorageError(f"{path} is truncated")
    magic, version, crc = _HEADER.unpack_from(data)
    payload = data[_HEADER.size :]
    if magic != _MAGIC or version != _VERSION:
        raise KafkaStorageError(f"{path} is not an eoslog metadata file of version 1")
    if primitives.crc32c(payload) != crc:
        raise KafkaStorageError(f"{path} fails its CRC-32C check")
    body, entries = _body(path, payload)
    topics = {}
    for name, entry in entries.items():
        topic = _topic(path, name, entry, log_config)
        topics[topic.name] = topic
    return Meta(
        topics,
        _integer(path, body, "next_producer_id_block", PRODUCER_ID_MAX),
        _integer(path, body, "coordinator_epoch", COORDINATOR_EPOCH_MAX),
    )


class _NotOurs(ValueError):
    pass


def _no_float(text: str) -> NoReturn:
    raise _NotOurs(f"the non-integer number {text[:40]!r}")


def _finite_float(text: str) -> float:
    """A JSON number with a fraction or exponent: eoslog writes one for a Kafka DOUBLE
    setting (min.cleanable.dirty.ratio), always finite; 1e400 reads as infinity, not ours."""
    number = float(text)
    if not math.isfinite(number):
        _no_float(text)
    return number


def _body(path: str, payload: bytes) -> tuple[dict[str, object], dict[object, object]]:
    """The JSON object and the `topics` object in it; KafkaStorageError naming the file (and
    the byte, for a JSON syntax error) otherwise."""
    try:
        # eoslog writes integers, strings and finite floats only (LogConfig checks each
        # value's type and range after): an infinite float or a NaN/Infinity constant is no
        # value of ours.
        body = json.loads(payload, parse_float=_finite_float, parse_constant=_no_float)
    except _NotOurs as error:
        raise KafkaStorageError(f"{path} holds {error}, which eoslog never writes") from None
    except json.JSONDecodeError as error:
        raise KafkaStorageError(
            f"{path} is not valid JSON at byte {_HEADER.size + error.pos}: {error.msg}"
        ) from None
    except (UnicodeDecodeError, RecursionError) as error:
        raise KafkaStorageError(f"{path} is not valid JSON: {error}") from None
    topics = body.get("topics") if isinstance(body, dict) else None
    if not isinstance(topics, dict):
        raise KafkaStorageError(f"{path} holds no `topics` object")
    return body, topics


def _topic(path: str, name: object, entry: object, log_config: LogConfig) -> TopicMetadata:
    """One topic, checked as create_topic checks its arguments."""
    try:
        validate_topic_name(name)
        if not isinstance(entry, dict) or set(entry) != {"partitions", "config"}:
            raise InvalidConfigError("a topic entry holds exactly partitions and config")
        partitions = partition_count(entry["partitions"])
        config = entry["config"]
        if not isinstance(config, dict):
            raise InvalidConfigError(f"config must be an object, not {config!r}")
        log_config.with_properties(config)
    except (InvalidTopicError, InvalidConfigError) as error:
        raise KafkaStorageError(f"{path}: topic {name!r} is malformed: {error}") from None
    assert isinstance(name, str)
    return TopicMetadata(name, partitions, config)


def _integer(path: str, body: dict[str, object], key: str, value_max: int) -> int:
    """An integer field in [0, value_max]; 0 when missing (older files)."""
    value = body.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not (0 <= value <= value_max):
        raise KafkaStorageError(
            f"{path}: {key} must be an integer in [0, {value_max}], not {value!r}"
        )
    return value
