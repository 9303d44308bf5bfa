"""The internal topics' value decoders read the common shape by offsets into the bytes (the
open replays every record, docs/coordinator.md §2.3) and everything else field by field: both
ways give the same value for the same bytes, and damaged bytes the same typed error."""

from __future__ import annotations

import random

import pytest

from eoslog.coordinator import offsets_log, transaction_log
from eoslog.coordinator.offsets_log import OffsetCommitValue
from eoslog.coordinator.transaction_log import TopicPartitions, TransactionLogValue
from eoslog.errors import CorruptOffsetsLogError, CorruptTransactionLogError

SEED = 14


def transaction_values(rng: random.Random) -> list[TransactionLogValue]:
    """Values of every shape: null, empty and long partition arrays (past a one-byte
    varint), non-ASCII and long topics, tagged fields set or default."""
    values = []
    for number in range(60):
        partitions: tuple[TopicPartitions, ...] | None = None
        if number % 5:
            partitions = tuple(
                TopicPartitions(
                    rng.choice(["a", "tópico", "t" * rng.choice([1, 130])]),
                    tuple(rng.randrange(1 << 31) for _ in range(rng.choice([0, 1, 3, 200]))),
                )
                for _ in range(rng.choice([0, 1, 2, 130]))
            )
        values.append(
            TransactionLogValue(
                producer_id=rng.randrange(-1, 1 << 62),
                producer_epoch=rng.randrange(-1, 1 << 15),
                transaction_timeout_ms=rng.randrange(1 << 31),
                transaction_status=rng.randrange(8),
                transaction_partitions=partitions,
                transaction_last_update_timestamp_ms=rng.randrange(1 << 42),
                transaction_start_timestamp_ms=rng.randrange(-1, 1 << 42),
                previous_producer_id=rng.choice([-1, rng.randrange(1 << 40)]),
                next_producer_id=rng.choice([-1, rng.randrange(1 << 40)]),
                client_transaction_version=rng.choice([0, 2]),
            )
        )
    return values


def damaged_copies(encoded: bytes) -> list[bytes]:
    """Every truncation, one trailing byte, and every byte changed to 0x00, 0x7f, 0x80, 0xff."""
    damaged = [encoded[:cut] for cut in range(len(encoded))] + [encoded + b"\x00"]
    for index in range(len(encoded)):
        for byte in (0x00, 0x7F, 0x80, 0xFF):
            damaged.append(encoded[:index] + bytes((byte,)) + encoded[index + 1 :])
    return damaged


def outcome(decode: object, data: bytes) -> object:
    """What `decode(data)` returns, or the type and message of what it raises."""
    try:
        return decode(data)  # type: ignore[operator]
    except (CorruptTransactionLogError, CorruptOffsetsLogError) as error:
        return (type(error), str(error))


def test_every_transaction_state_value_decodes_the_same_both_ways() -> None:
    for value in transaction_values(random.Random(SEED)):
        encoded = transaction_log.encode_value(value)
        assert encoded is not None
        assert transaction_log.decode_value(encoded) == value
        assert transaction_log.decode_value_read(encoded) == value


@pytest.mark.parametrize("number", [0, 1, 2, 3])
def test_damaged_transaction_state_values_decode_or_fail_the_same_both_ways(number: int) -> None:
    values = [v for v in transaction_values(random.Random(SEED)) if v.transaction_partitions]
    encoded = transaction_log.encode_value(
        values[number]._replace(transaction_partitions=(TopicPartitions("ab", (0, 5)),))
    )
    assert encoded is not None
    for data in damaged_copies(encoded):
        assert outcome(transaction_log.decode_value, data) == outcome(
            transaction_log.decode_value_read, data
        ), data.hex()


def offset_values(rng: random.Random) -> list[OffsetCommitValue]:
    return [
        OffsetCommitValue(
            offset=rng.randrange(1 << 62),
            metadata=rng.choice(["", "meta", "métadonnée", "m" * 300]),
            commit_timestamp=rng.randrange(1 << 42),
            leader_epoch=rng.randrange(-1, 1 << 31),
        )
        for _ in range(40)
    ]


def test_the_values_eoslog_writes_decode_by_offsets_into_the_bytes() -> None:
    """The fast paths take the values eoslog writes (a removed one fails here)."""
    transaction = transaction_values(random.Random(SEED))[1]
    offset = offset_values(random.Random(SEED))[0]
    encoded_transaction = transaction_log.encode_value(transaction)
    encoded_offset = offsets_log.encode_offset_value(offset)
    assert encoded_transaction is not None and encoded_offset is not None
    assert transaction_log._decode_common(encoded_transaction) == transaction
    assert offsets_log._decode_written(encoded_offset) == offset


def test_every_offset_commit_value_decodes_the_same_both_ways_and_damage_fails_the_same() -> None:
    for value in offset_values(random.Random(SEED)):
        encoded = offsets_log.encode_offset_value(value)
        assert encoded is not None
        assert offsets_log.decode_offset_value(encoded) == value
        if len(encoded) > 64:
            continue
        for data in damaged_copies(encoded):
            assert outcome(offsets_log.decode_offset_value, data) == outcome(
                offsets_log.decode_offset_value_read, data
            ), data.hex()
