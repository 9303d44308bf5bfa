"""The `__transaction_state` records (docs/coordinator.md §2.1): Kafka's generated-message encoding
of TransactionLogKey v0 and TransactionLogValue v0/v1, checked against byte vectors derived by
hand from the JSON schemas, round trips for every state, and damaged bytes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from eoslog.coordinator.transaction_log import (
    TopicPartitions,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    java_string_hash,
    partition_for,
)
from eoslog.coordinator.transaction_metadata import (
    log_value_bytes,
    log_value_of,
    metadata_from_log,
)
from eoslog.coordinator.transaction_state import IllegalTransitionError, TransactionState
from eoslog.errors import CorruptTransactionLogError, UnknownTransactionLogKeyVersionError


def hexbytes(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


# Derived by hand from TransactionLogKey.json: int16 version 0, int16 length, UTF-8.
KEY_TXN_1 = hexbytes("0000 0005 74786e2d31")

# TransactionLogValue v1 (flexible), Empty: pid 1000, epoch 0, timeout 60000, status 0,
# partitions null (compact 0), last update 1000, start -1, no tagged fields (all default).
VALUE_V1_EMPTY = hexbytes(
    """
    0001
    00000000000003e8  0000  0000ea60  00
    00
    00000000000003e8  ffffffffffffffff
    00
    """
)
EMPTY = TransactionLogValue(
    producer_id=1000,
    producer_epoch=0,
    transaction_timeout_ms=60000,
    transaction_status=0,
    transaction_partitions=None,
    transaction_last_update_timestamp_ms=1000,
    transaction_start_timestamp_ms=-1,
)

# v1, Ongoing with partitions a-0 and a-1: the array is compact (1 element + 1), the topic a
# compact string (1 + 1, "a"), the ids a compact array (2 + 1) of int32, then the element's
# empty tagged section. The top-level tagged section has two fields, in tag order:
# tag 0 (PreviousProducerId, size 8) = 7 and tag 2 (ClientTransactionVersion, size 2) = 2.
VALUE_V1_ONGOING = hexbytes(
    """
    0001
    0000000000000007  0003  0000ea60  01
    02  0261  03 00000000 00000001  00
    00000000000007d0  00000000000005dc
    02  00 08 0000000000000007  02 02 0002
    """
)
ONGOING = TransactionLogValue(
    producer_id=7,
    producer_epoch=3,
    transaction_timeout_ms=60000,
    transaction_status=1,
    transaction_partitions=(TopicPartitions("a", (0, 1)),),
    transaction_last_update_timestamp_ms=2000,
    transaction_start_timestamp_ms=1500,
    previous_producer_id=7,
    client_transaction_version=2,
)

# v0 (not flexible), PrepareCommit with partition a-0: int32 array count, int16 string length.
VALUE_V0_PREPARE_COMMIT = hexbytes(
    """
    0000
    0000000000000007  0003  0000ea60  02
    00000001  0001 61  00000001 00000000
    00000000000007d0  00000000000005dc
    """
)
PREPARE_COMMIT_V0 = TransactionLogValue(
    producer_id=7,
    producer_epoch=3,
    transaction_timeout_ms=60000,
    transaction_status=2,
    transaction_partitions=(TopicPartitions("a", (0,)),),
    transaction_last_update_timestamp_ms=2000,
    transaction_start_timestamp_ms=1500,
)


def test_key_encodes_to_the_hand_derived_bytes() -> None:
    assert encode_key("txn-1") == KEY_TXN_1
    assert decode_key(KEY_TXN_1) == "txn-1"


@pytest.mark.parametrize(
    ("value", "data", "version"),
    [
        (EMPTY, VALUE_V1_EMPTY, 1),
        (ONGOING, VALUE_V1_ONGOING, 1),
        (PREPARE_COMMIT_V0, VALUE_V0_PREPARE_COMMIT, 0),
    ],
    ids=["v1-empty", "v1-ongoing-tagged", "v0-prepare-commit"],
)
def test_value_encodes_to_the_hand_derived_bytes_and_back(
    value: TransactionLogValue, data: bytes, version: int
) -> None:
    assert encode_value(value, version) == data
    assert decode_value(data) == value


def test_encode_writes_version_1_by_default() -> None:
    assert encode_value(EMPTY) == VALUE_V1_EMPTY


def test_a_tombstone_is_a_null_value_both_ways() -> None:
    assert encode_value(None) is None
    assert decode_value(None) is None


def test_next_producer_id_is_tag_1_between_the_others() -> None:
    value = TransactionLogValue(
        producer_id=7,
        producer_epoch=32767,
        transaction_timeout_ms=60000,
        transaction_status=2,
        transaction_partitions=(),
        transaction_last_update_timestamp_ms=2000,
        transaction_start_timestamp_ms=1500,
        previous_producer_id=7,
        next_producer_id=8,
        client_transaction_version=2,
    )
    data = encode_value(value)
    assert data is not None
    assert data.endswith(hexbytes("03  00 08 0000000000000007  01 08 0000000000000008  02 02 0002"))
    assert decode_value(data) == value


def test_an_empty_partition_list_is_not_null() -> None:
    value = TransactionLogValue(7, 3, 60000, 4, (), 2000, 1500)
    data = encode_value(value)
    assert data is not None and data[17] == 0x01  # compact array: 0 elements + 1
    assert decode_value(data) == value


def test_an_empty_partition_list_encodes_right_as_a_processes_first_value() -> None:
    """Regression: the encoder's last-array cache started keyed on the empty tuple, so the
    first value a process encoded with no partitions (a Complete* finished at open) lost
    its array count and could not be decoded. A fresh interpreter, so no test ran before."""
    program = (
        "from eoslog.coordinator.transaction_log import TransactionLogValue as V, "
        "encode_value, decode_value\n"
        "value = V(7, 3, 60000, 4, (), 2000, 1500)\n"
        "assert decode_value(encode_value(value)) == value\n"
    )
    subprocess.run([sys.executable, "-c", program], check=True, cwd="/")


def test_unknown_tagged_fields_are_skipped() -> None:
    # A later Kafka adds fields as tags (KIP-915); tag 5 with 3 bytes is read past.
    data = VALUE_V1_EMPTY[:-1] + hexbytes("01 05 03 aabbcc")
    assert decode_value(data) == EMPTY


def test_version_0_cannot_carry_a_non_default_tagged_field() -> None:
    with pytest.raises(ValueError, match="previous_producer_id"):
        encode_value(ONGOING, version=0)


@pytest.mark.parametrize("state", list(TransactionState)[:6], ids=lambda s: s.kafka_name)
@pytest.mark.parametrize("version", [0, 1])
def test_every_persisted_state_round_trips_through_both_versions(
    state: TransactionState, version: int
) -> None:
    partitions = None if state is TransactionState.EMPTY else (TopicPartitions("t", (2, 5)),)
    value = TransactionLogValue(11, 4, 30000, int(state), partitions, 9000, 8000)
    data = encode_value(value, version)
    assert data is not None and data[:2] == version.to_bytes(2, "big")
    assert decode_value(data) == value
    loaded = metadata_from_log("id", value)
    assert loaded.state is state
    assert log_value_of(loaded.current()) == value


def test_the_bytes_the_coordinator_persists_are_the_encoding_of_the_log_value() -> None:
    # Partitions sets in an order that reuses, replaces and skips the last array encoded.
    sets = [{("t", 2), ("t", 5)}, {("t", 2), ("t", 5)}, set(), {("u", 0), ("t", 1)}, {("t", 2)}]
    tagged = [(-1, -1, 0), (7, -1, 2), (7, 9, 2), (-1, 4, 1)]
    for index, state in enumerate(list(TransactionState)[:6]):
        for number, partitions in enumerate(sets):
            chosen = set() if state is TransactionState.EMPTY else partitions
            previous, following, version = tagged[(index + number) % len(tagged)]
            value = TransactionLogValue(
                11, 4, 30000, int(state), None, 9000, 8000, previous, following, version
            )
            target = (
                metadata_from_log("id", value)
                .current()
                ._replace(partitions=frozenset(chosen), last_producer_epoch=3)
            )
            assert log_value_bytes(target) == encode_value(log_value_of(target))


def test_a_target_no_record_carries_is_refused_by_the_persisted_bytes_too() -> None:
    value = TransactionLogValue(11, 4, 30000, 1, (TopicPartitions("t", (2,)),), 9000, 8000)
    target = metadata_from_log("id", value).current()
    for state in (TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE):
        with pytest.raises(IllegalTransitionError, match="never persisted"):
            log_value_bytes(target._replace(state=state))
    with pytest.raises(IllegalTransitionError, match="no partitions"):
        log_value_bytes(target._replace(state=TransactionState.EMPTY))


def test_a_field_out_of_range_in_the_persisted_bytes_is_named() -> None:
    value = TransactionLogValue(11, 4, 30000, 1, (TopicPartitions("t", (2,)),), 9000, 8000)
    target = metadata_from_log("id", value).current()
    with pytest.raises(ValueError, match="producer_epoch"):
        log_value_bytes(target._replace(producer_epoch=40000))


def test_a_key_with_a_non_ascii_id_round_trips() -> None:
    assert decode_key(encode_key("zäh-€-🙂")) == "zäh-€-🙂"


def test_a_transactional_id_longer_than_an_int16_length_cannot_be_encoded() -> None:
    with pytest.raises(ValueError, match="longer than 32767"):
        encode_key("x" * 32768)


def test_a_field_out_of_range_cannot_be_encoded() -> None:
    with pytest.raises(ValueError, match="producer_epoch"):
        encode_value(TransactionLogValue(1, 40000, 1, 0, None, 0, -1))


# --- damaged bytes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data", [VALUE_V1_EMPTY, VALUE_V1_ONGOING, VALUE_V0_PREPARE_COMMIT], ids=["e", "o", "pc"]
)
def test_every_truncation_of_a_value_raises_the_typed_error(data: bytes) -> None:
    for length in range(len(data)):
        with pytest.raises(CorruptTransactionLogError):
            decode_value(data[:length])


def test_every_truncation_of_a_key_raises_the_typed_error() -> None:
    for length in range(len(KEY_TXN_1)):
        with pytest.raises(CorruptTransactionLogError):
            decode_key(KEY_TXN_1[:length])


def test_trailing_bytes_raise_the_typed_error() -> None:
    with pytest.raises(CorruptTransactionLogError, match="1 trailing bytes"):
        decode_value(VALUE_V1_EMPTY + b"\x00")
    with pytest.raises(CorruptTransactionLogError, match="trailing"):
        decode_key(KEY_TXN_1 + b"!")


def test_an_unknown_value_version_raises_the_typed_error() -> None:
    with pytest.raises(CorruptTransactionLogError, match="unknown value version 2"):
        decode_value(b"\x00\x02" + VALUE_V1_EMPTY[2:])


def test_an_unknown_key_version_raises_the_error_a_loader_may_skip() -> None:
    with pytest.raises(UnknownTransactionLogKeyVersionError):
        decode_key(b"\x00\x01" + KEY_TXN_1[2:])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ((18, 0x00), "null or negative length"),  # topic as a null compact string
        ((19, 0xFF), "not UTF-8"),  # the topic's only byte
        ((20, 0x00), "null PartitionIds"),
        ((48, 0x07), "has size 7, not 8"),  # PreviousProducerId's size
    ],
    ids=["null-topic", "bad-utf8", "null-ids", "tag-size"],
)
def test_damaged_flexible_fields_raise_the_typed_error(
    damage: tuple[int, int], message: str
) -> None:
    position, byte = damage
    data = bytearray(VALUE_V1_ONGOING)
    data[position] = byte
    with pytest.raises(CorruptTransactionLogError, match=message):
        decode_value(bytes(data))


def test_tagged_fields_out_of_order_raise_the_typed_error() -> None:
    data = VALUE_V1_EMPTY[:-1] + hexbytes("02  02 02 0002  00 08 0000000000000007")
    with pytest.raises(CorruptTransactionLogError, match="tagged field 0 after tag 2"):
        decode_value(data)


def test_a_negative_array_count_raises_the_typed_error() -> None:
    data = bytearray(VALUE_V0_PREPARE_COMMIT)
    data[17:21] = (-2).to_bytes(4, "big", signed=True)
    with pytest.raises(CorruptTransactionLogError, match="negative array length"):
        decode_value(bytes(data))


def test_an_array_count_past_the_bytes_left_raises_the_typed_error() -> None:
    data = bytearray(VALUE_V0_PREPARE_COMMIT)
    data[17:21] = (1 << 30).to_bytes(4, "big")
    with pytest.raises(CorruptTransactionLogError, match="longer than the bytes left"):
        decode_value(bytes(data))


def test_an_overlong_varint_raises_the_typed_error() -> None:
    data = VALUE_V1_EMPTY[:17] + b"\xff" * 6
    with pytest.raises(CorruptTransactionLogError, match="malformed unsigned varint"):
        decode_value(data)


def test_an_unknown_or_unpersisted_state_id_is_refused_on_load() -> None:
    for status in (6, 7, 8, -1):
        value = TransactionLogValue(1, 0, 1, status, None, 0, -1)
        with pytest.raises(CorruptTransactionLogError):
            metadata_from_log("id", value)


# --- placement (§2.2) -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("transactional_id", "hash_code", "partition"),
    [
        ("", 0, 0),
        ("a", 97, 47),  # 97 % 50
        ("ab", 3105, 5),  # 31 * 97 + 98
        ("polygenelubricants", -(1 << 31), 0),  # Integer.MIN_VALUE: Utils.abs gives 0
        ("\U0001f642", 31 * 0xD83D + 0xDE42, (31 * 0xD83D + 0xDE42) % 50),  # two UTF-16 units
    ],
)
def test_partition_for_uses_java_string_hash_code(
    transactional_id: str, hash_code: int, partition: int
) -> None:
    assert java_string_hash(transactional_id) == hash_code
    assert partition_for(transactional_id) == partition


def test_a_negative_hash_code_is_placed_by_its_absolute_value() -> None:
    # The polynomial sum of the code units, reduced to a signed 32-bit int, is negative.
    text = "my-transactional-id"
    total = sum(ord(c) * 31 ** (len(text) - 1 - i) for i, c in enumerate(text)) % (1 << 32)
    assert java_string_hash(text) == total - (1 << 32) == -959806496
    assert partition_for(text) == 959806496 % 50 == 46
