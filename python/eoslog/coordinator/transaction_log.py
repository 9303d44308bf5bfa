"""The `__transaction_state` records: key and value bytes (docs/coordinator.md §2.1).

Kafka writes both with its generated-message encoding, prefixed by an int16 version
(MessageUtil.toVersionPrefixedBytes), from TransactionLogKey.json and TransactionLogValue.json
in transaction-coordinator/src/main/resources/common/message/:

* key, version 0 (not flexible): TransactionalId as an int16 length and UTF-8 bytes;
* value, version 0 (not flexible): strings with int16 lengths, arrays with int32 counts
  (-1 = null), no tagged fields;
* value, version 1 (the first flexible version): strings and arrays as an unsigned varint of
  length + 1 (0 = null), and a tagged-field section closing every struct: the top level and
  each TransactionPartitions element. A tagged field is written only when it differs from its
  default, in ascending tag order, as varint tag, varint size, then the value.

The layout is written down once, as the field tables below, and both the encoder and the
decoder walk them (docs/style.md rule 1). Encoding writes value version 1 (eoslog always runs with
transaction.version 2, which implies the flexible record); decoding reads versions 0 and 1.

Every function here is pure and thread-safe. Bad bytes raise CorruptTransactionLogError (a
ValueError); bad arguments to an encoder raise ValueError. Both change nothing.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from operator import attrgetter
from typing import Final, NamedTuple

from eoslog.coordinator.message_fields import (
    INT8,
    INT16,
    INT32,
    INT64,
    Reader,
    array_count,
    pack,
    string,
    uvarint,
)
from eoslog.errors import CorruptTransactionLogError, UnknownTransactionLogKeyVersionError

TRANSACTION_STATE_TOPIC: Final = "__transaction_state"
# transaction.state.log.num.partitions (TransactionLogConfig); fixed once a log exists.
TRANSACTION_STATE_PARTITIONS_DEFAULT: Final = 50

KEY_VERSION: Final = 0
VALUE_VERSION_NOT_FLEXIBLE: Final = 0
VALUE_VERSION_FLEXIBLE: Final = 1
VALUE_VERSION_WRITTEN: Final = VALUE_VERSION_FLEXIBLE

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    """One TransactionPartitions element (PartitionsSchema): a topic and its partition ids."""

    topic: str
    partition_ids: tuple[int, ...]


class TransactionLogValue(NamedTuple):
    """One `__transaction_state` value, field for field as TransactionLogValue.json names it.

    `transaction_status` is the TransactionState id byte (docs/coordinator.md §1.1); this module
    does not interpret it. `transaction_partitions` is None for an Empty transaction. A
    NamedTuple: every state change makes one, and a frozen dataclass cost a microsecond."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    transaction_partitions: tuple[TopicPartitions, ...] | None
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0


# The value's fields in wire order, after the version: (attribute, fixed-size type), with
# None standing for the TransactionPartitions array. Shared by encoder and decoder.
_VALUE_FIELDS: Final[tuple[tuple[str, struct.Struct | None], ...]] = (
    ("producer_id", INT64),
    ("producer_epoch", INT16),
    ("transaction_timeout_ms", INT32),
    ("transaction_status", INT8),
    ("transaction_partitions", None),
    ("transaction_last_update_timestamp_ms", INT64),
    ("transaction_start_timestamp_ms", INT64),
)
# The value's tagged fields (version 1+): (tag, attribute, type, default), ascending by tag.
_VALUE_TAGGED_FIELDS: Final[tuple[tuple[int, str, struct.Struct, int], ...]] = (
    (0, "previous_producer_id", INT64, NO_PRODUCER_ID),
    (1, "next_producer_id", INT64, NO_PRODUCER_ID),
    (2, "client_transaction_version", INT16, 0),
)


# The fixed-size fields before and after the partitions array, each run packed by one Struct
# (derived from _VALUE_FIELDS, so the table stays the one definition): the encoder's fast path.
_ARRAY_AT: Final = next(i for i, (_, kind) in enumerate(_VALUE_FIELDS) if kind is None)


def _run(
    fields: tuple[tuple[str, struct.Struct | None], ...],
) -> tuple[struct.Struct, attrgetter[tuple[int, ...]]]:
    kinds = [kind for _, kind in fields]
    assert all(kind is not None for kind in kinds), "a run holds fixed-size fields only"
    pattern = ">" + "".join(kind.format.lstrip(">") for kind in kinds if kind is not None)
    return struct.Struct(pattern), attrgetter(*(name for name, _ in fields))


_HEAD, _HEAD_VALUES = _run(_VALUE_FIELDS[:_ARRAY_AT])
_TAIL, _TAIL_VALUES = _run(_VALUE_FIELDS[_ARRAY_AT + 1 :])
_VERSION_FLEXIBLE_BYTES: Final = INT16.pack(VALUE_VERSION_FLEXIBLE)


# --- encoding -------------------------------------------------------------------------------


def _encode_partitions(value: tuple[TopicPartitions, ...] | None, flexible: bool) -> bytes:
    out = bytearray(array_count(None if value is None else len(value), flexible))
    for element in value or ():
        out += string(element.topic, flexible)
        out += array_count(len(element.partition_ids), flexible)
        for partition in element.partition_ids:
            out += pack(INT32, partition, "partition id")
        if flexible:
            out += uvarint(0)  # the element's own tagged fields: none
    return bytes(out)


# The tagged sections encoded so far, by the tagged fields' values: they repeat for every
# record of a producer (a dict is safe to share between threads). Bounded: cleared when full.
_tagged_sections: dict[tuple[int, ...], bytes] = {}
_TAGGED_SECTIONS_MAX: Final = 1024
_TAGGED_VALUES: Final = attrgetter(*(name for _, name, _, _ in _VALUE_TAGGED_FIELDS))


def _tagged_section(values: tuple[int, ...]) -> bytes:
    """The top-level tagged section for the tagged fields' `values`, in tag order."""
    section = _tagged_sections.get(values)
    if section is None:
        fields = []
        for (tag, name, kind, default), field in zip(_VALUE_TAGGED_FIELDS, values, strict=True):
            if field != default:
                fields.append(uvarint(tag) + uvarint(kind.size) + pack(kind, field, name))
        section = uvarint(len(fields)) + b"".join(fields)
        if len(_tagged_sections) >= _TAGGED_SECTIONS_MAX:
            _tagged_sections.clear()
        _tagged_sections[values] = section
    return section


def encode_key(transactional_id: str) -> bytes:
    """The record key for `transactional_id`: version 0, then the id. ValueError if its
    UTF-8 form is longer than 32767 bytes."""
    return INT16.pack(KEY_VERSION) + string(transactional_id, flexible=False)


def encode_value(
    value: TransactionLogValue | None, version: int = VALUE_VERSION_WRITTEN
) -> bytes | None:
    """The record value; None (a tombstone) for None. Version 0 cannot carry the tagged
    fields, so a non-default one raises ValueError there, as Kafka's generated writer does."""
    if value is None:
        return None
    if version == VALUE_VERSION_FLEXIBLE:
        try:
            head = _HEAD.pack(*_HEAD_VALUES(value))
            tail = _TAIL.pack(*_TAIL_VALUES(value))
        except struct.error:
            pass  # out of range: the field-by-field path below names the field
        else:
            return b"".join(
                (
                    _VERSION_FLEXIBLE_BYTES,
                    head,
                    _encode_partitions(value.transaction_partitions, True),
                    tail,
                    _tagged_section(_TAGGED_VALUES(value)),
                )
            )
    if version not in (VALUE_VERSION_NOT_FLEXIBLE, VALUE_VERSION_FLEXIBLE):
        raise ValueError(f"transaction log value version {version} is not 0 or 1")
    flexible = version >= VALUE_VERSION_FLEXIBLE
    out = bytearray(INT16.pack(version))
    for name, kind in _VALUE_FIELDS:
        if kind is None:
            out += _encode_partitions(value.transaction_partitions, flexible)
        else:
            out += pack(kind, getattr(value, name), name)
    if flexible:
        out += _tagged_section(_TAGGED_VALUES(value))
    else:
        for _, name, _, default in _VALUE_TAGGED_FIELDS:
            if getattr(value, name) != default:
                raise ValueError(f"value version 0 cannot carry a non-default {name}")
    return bytes(out)


def encode_value_v1(
    producer_id: int,
    producer_epoch: int,
    timeout_ms: int,
    status: int,
    partitions: bytes,
    last_update_timestamp_ms: int,
    start_timestamp_ms: int,
    tagged: tuple[int, int, int],
) -> bytes:
    """encode_value of a value with these fields at version 1, in four calls instead of
    ten (the coordinator persists three values per transaction): `partitions` is the array
    already encoded (encode_partitions_v1) and `tagged` the tagged fields' values in tag
    order (previous, next producer id, client transaction version). ValueError, as
    encode_value raises it, for a field out of range."""
    try:
        head = _HEAD.pack(producer_id, producer_epoch, timeout_ms, status)
        tail = _TAIL.pack(last_update_timestamp_ms, start_timestamp_ms)
    except struct.error:  # the field-by-field path names the field
        fields = (producer_id, producer_epoch, timeout_ms, status, None)
        value = TransactionLogValue(*fields, last_update_timestamp_ms, start_timestamp_ms, *tagged)
        encode_value(value)
        raise AssertionError("encode_value took what _HEAD and _TAIL refused") from None
    section = _tagged_sections.get(tagged)
    if section is None:
        section = _tagged_section(tagged)
    return _VERSION_FLEXIBLE_BYTES + head + partitions + tail + section


def encode_partitions_v1(value: tuple[TopicPartitions, ...] | None) -> bytes:
    """The TransactionPartitions array as value version 1 encodes it (None: null)."""
    return _encode_partitions(value, True)


# --- decoding -------------------------------------------------------------------------------


def _read_partitions(reader: Reader, flexible: bool) -> tuple[TopicPartitions, ...] | None:
    count = reader.array_count(flexible)
    if count is None:
        return None
    elements = []
    for _ in range(count):
        topic = reader.string(flexible)
        ids_count = reader.array_count(flexible)
        if ids_count is None:
            raise reader.corrupt("null PartitionIds array")
        ids = tuple(reader.fixed(INT32) for _ in range(ids_count))
        if flexible:
            reader.skip_tagged_fields()
        elements.append(TopicPartitions(topic, ids))
    return tuple(elements)


def _read_tagged_fields(reader: Reader) -> dict[str, int]:
    """The top-level tagged fields. Unknown tags are skipped, as Kafka keeps them unread
    (KIP-915: new fields are added as tags); tags must ascend (KIP-482)."""
    known = {tag: (name, kind) for tag, name, kind, _ in _VALUE_TAGGED_FIELDS}
    found: dict[str, int] = {}
    last_tag = -1
    for _ in range(reader.uvarint()):
        tag, size = reader.uvarint(), reader.uvarint()
        if tag <= last_tag:
            raise reader.corrupt(f"tagged field {tag} after tag {last_tag}")
        last_tag = tag
        if tag not in known:
            reader.take(size)
            continue
        name, kind = known[tag]
        if size != kind.size:
            raise reader.corrupt(f"tagged field {tag} has size {size}, not {kind.size}")
        found[name] = reader.fixed(kind)
    return found


def decode_key(data: bytes) -> str:
    """The transactional id in a record key. UnknownTransactionLogKeyVersionError for a key
    version other than 0 (Kafka's loader skips those); CorruptTransactionLogError otherwise."""
    reader = Reader(data, "transaction log key", CorruptTransactionLogError)
    version = reader.fixed(INT16)
    if version != KEY_VERSION:
        raise UnknownTransactionLogKeyVersionError(f"transaction log key version {version}")
    transactional_id = reader.string(flexible=False)
    reader.finish()
    return transactional_id


def decode_value(data: bytes | None) -> TransactionLogValue | None:
    """The value in a record, or None for a tombstone (a null value)."""
    if data is None:
        return None
    return _decode_common(data) or decode_value_read(data)


def decode_value_read(data: bytes) -> TransactionLogValue:
    """decode_value's field-by-field walk, for every shape and every damage (the twin that
    tests hold the common shape's fast path against)."""
    reader = Reader(data, "transaction log value", CorruptTransactionLogError)
    version = reader.fixed(INT16)
    if version not in (VALUE_VERSION_NOT_FLEXIBLE, VALUE_VERSION_FLEXIBLE):
        raise reader.corrupt(f"unknown value version {version}")
    flexible = version >= VALUE_VERSION_FLEXIBLE
    fields: dict[str, object] = {}
    for name, kind in _VALUE_FIELDS:
        fields[name] = _read_partitions(reader, flexible) if kind is None else reader.fixed(kind)
    if flexible:
        fields.update(_read_tagged_fields(reader))
    reader.finish()
    return TransactionLogValue(**fields)  # type: ignore[arg-type]


# The common value, version 1 with every count and size under 128 (one-byte varints), decoded
# by offsets into the bytes: the open replays every record of the log, and the Reader's
# field-by-field walk cost 40 us a record there (docs/coordinator.md §2.3). The layout is still
# _VALUE_FIELDS' and _VALUE_TAGGED_FIELDS' (the Structs are derived from them); anything else,
# damage included, goes the Reader's way, which names the problem.
_VERSION_AND_HEAD: Final = struct.Struct(">h" + _HEAD.format.lstrip(">"))
_TAGGED_KINDS: Final = {tag: (name, kind) for tag, name, kind, _ in _VALUE_TAGGED_FIELDS}
_PARTITION_IDS: Final = tuple(struct.Struct(f">{count}i") for count in range(0x7F))
_ONE_BYTE: Final = 0x80


def _decode_common(data: bytes) -> TransactionLogValue | None:
    """The value in `data` if it has the common shape and decodes cleanly; None otherwise."""
    try:
        version, producer_id, epoch, timeout_ms, status = _VERSION_AND_HEAD.unpack_from(data)
        if version != VALUE_VERSION_FLEXIBLE:
            return None
        position = _VERSION_AND_HEAD.size
        partitions, position = _common_partitions(data, position)
        last_update_ms, start_ms = _TAIL.unpack_from(data, position)
        tagged, position = _common_tagged(data, position + _TAIL.size)
    except (struct.error, IndexError, UnicodeDecodeError, _NotCommon):
        return None
    if position != len(data):
        return None
    return TransactionLogValue(
        producer_id, epoch, timeout_ms, status, partitions, last_update_ms, start_ms, **tagged
    )


class _NotCommon(Exception):
    """The bytes are not the common shape (_decode_common)."""


def _small(data: bytes, position: int) -> int:
    """A one-byte unsigned varint at `position`."""
    value = data[position]
    if value & _ONE_BYTE:
        raise _NotCommon
    return value


# The partitions arrays and tagged sections decoded so far, by their bytes: a producer's
# records repeat them transaction after transaction, so most are a dict lookup. Bounded:
# cleared when full. Dicts are safe to share between threads; the values are never changed.
_DECODED_PARTS_MAX: Final = 4096
_partitions_by_bytes: dict[bytes, tuple[TopicPartitions, ...] | None] = {}
_tagged_by_bytes: dict[bytes, dict[str, int]] = {}


def _common_partitions(
    data: bytes, position: int
) -> tuple[tuple[TopicPartitions, ...] | None, int]:
    end = _partitions_end(data, position)
    raw = data[position:end]
    if raw in _partitions_by_bytes:
        return _partitions_by_bytes[raw], end
    partitions = _decode_partitions(data, position)
    if len(_partitions_by_bytes) >= _DECODED_PARTS_MAX:
        _partitions_by_bytes.clear()
    _partitions_by_bytes[raw] = partitions
    return partitions, end


def _partitions_end(data: bytes, position: int) -> int:
    """Where the partitions array at `position` ends, walking its lengths only."""
    count = _small(data, position) - 1
    position += 1
    for _ in range(count):
        length = _small(data, position) - 1
        if length < 0:
            raise _NotCommon
        position += 1 + length
        ids_count = _small(data, position) - 1
        if ids_count < 0:
            raise _NotCommon
        position += 1 + 4 * ids_count
        if _small(data, position) != 0:
            raise _NotCommon  # the element has tagged fields
        position += 1
    if position > len(data):
        raise _NotCommon  # cut short
    return position


def _decode_partitions(data: bytes, position: int) -> tuple[TopicPartitions, ...] | None:
    """The partitions array at `position`, which _partitions_end has walked."""
    count = data[position] - 1
    position += 1
    if count < 0:
        return None
    elements = []
    for _ in range(count):
        end = position + data[position]
        topic = data[position + 1 : end].decode("utf-8")
        ids_count = data[end] - 1
        ids: tuple[int, ...] = _PARTITION_IDS[ids_count].unpack_from(data, end + 1)
        position = end + 1 + 4 * ids_count + 1
        elements.append(TopicPartitions(topic, ids))
    return tuple(elements)


def _common_tagged(data: bytes, position: int) -> tuple[dict[str, int], int]:
    """The tagged section at `position`, which ends the value: (fields, the value's end)."""
    raw = data[position:]
    found = _tagged_by_bytes.get(raw)
    if found is not None:
        return found, len(data)
    found, end = _decode_tagged(data, position)
    if end == len(data):
        if len(_tagged_by_bytes) >= _DECODED_PARTS_MAX:
            _tagged_by_bytes.clear()
        _tagged_by_bytes[raw] = found
    return found, end


def _decode_tagged(data: bytes, position: int) -> tuple[dict[str, int], int]:
    found: dict[str, int] = {}
    last_tag = -1
    count = _small(data, position)
    position += 1
    for _ in range(count):
        tag, size = _small(data, position), _small(data, position + 1)
        known = _TAGGED_KINDS.get(tag)
        if tag <= last_tag or known is None or known[1].size != size:
            raise _NotCommon
        found[known[0]] = known[1].unpack_from(data, position + 2)[0]
        last_tag = tag
        position += 2 + size
    return found, position


# --- placement ------------------------------------------------------------------------------


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: h = 31*h + c over UTF-16 code units, as a signed 32-bit int."""
    data = text.encode("utf-16-be", "surrogatepass")
    value = 0
    for index in range(0, len(data), 2):
        value = (31 * value + ((data[index] << 8) | data[index + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def partition_for(
    transactional_id: str, partitions: int = TRANSACTION_STATE_PARTITIONS_DEFAULT
) -> int:
    """The `__transaction_state` partition Kafka places `transactional_id` in:
    Utils.abs(hashCode) % partitions, where Utils.abs maps Integer.MIN_VALUE to 0."""
    if partitions <= 0:
        raise ValueError(f"partition count {partitions} is not positive")
    value = java_string_hash(transactional_id)
    return 0 if value == -(1 << 31) else abs(value) % partitions
