"""The partitioners (docs/api.md "Producer": `partition=-1`; the producer's `partitioner` key),
as librdkafka names and computes them:

- `murmur2_random` (Java's client; `broker.producer()`'s default): a key to
  `(murmur2(key) & 0x7fffffff) % n`, a null key sticky; `murmur2`: a null key hashed as no
  bytes.
- `consistent_random` (librdkafka's default; `eoslog.confluent.Producer`'s): a key to
  `crc32(key) % n`, an empty key at random, a null key sticky; `consistent`: an empty or null
  key to partition 0 (the crc32 of no bytes).
- `fnv1a_random`: a key to `fnv1a(key) % n`, a null key sticky; `fnv1a`: a null key hashed
  as no bytes.
- `random`: every keyed record at random, a null key sticky.

crc32 is zlib's CRC-32 (unsigned), fnv1a the absolute value of the 32-bit FNV-1a read as an
int32, and murmur2 Kafka's. "Sticky"
is a random partition kept until its batch closes, then another (Kafka's sticky partitioner,
KIP-480), so null-key records fill whole batches instead of one small batch per partition;
with `sticky.partitioning.linger.ms` 0 each null-key record goes to a random partition, as
librdkafka does then.

The hash runs in native code (eoslog._ext.primitives.murmur2, engine/murmur2.h): one call per
produce() key, one call over all keys for produce_batch() (murmur2_spans, no Python object per
key). Thread safety: the functions are pure; StickyPartitioner is guarded by the producer's lock.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from eoslog.record import primitives

if TYPE_CHECKING:
    from typing_extensions import Buffer

_POSITIVE_MASK = 0x7FFFFFFF  # Kafka's Utils.toPositive
# The key hashes the native produce() path computes (pyext/accumulator.pyx: KeyHash).
HASH_NONE: Final = 0  # keyed records are not hashed: the random partitioner
HASH_MURMUR2: Final = 1
HASH_CRC32: Final = 2
HASH_FNV1A: Final = 3
# FNV-1a's 32-bit offset basis and prime.
_FNV1A_OFFSET_BASIS: Final = 0x811C9DC5
_FNV1A_PRIME: Final = 0x01000193
_UINT32_MASK: Final = 0xFFFFFFFF


def murmur2_positive(key: Buffer) -> int:
    return primitives.murmur2(key) & _POSITIVE_MASK


def crc32(key: Buffer) -> int:
    return zlib.crc32(key)


def fnv1a(key: Buffer) -> int:
    """32-bit FNV-1a of the bytes, unsigned."""
    hashed = _FNV1A_OFFSET_BASIS
    for byte in memoryview(key).cast("B"):
        hashed = ((hashed ^ byte) * _FNV1A_PRIME) & _UINT32_MASK
    return hashed


def fnv1a_positive(key: Buffer) -> int:
    """librdkafka's fnv1a partitioner takes the absolute value of the hash read as an int32
    (measured against librdkafka 2.16's rd_kafka_msg_partitioner_fnv1a)."""
    hashed = fnv1a(key)
    return abs(hashed - (1 << 32) if hashed >= 1 << 31 else hashed)


@dataclass(frozen=True)
class Partitioner:
    """One of librdkafka's partitioners (the module docstring's table)."""

    name: str
    key_hash: int  # HASH_*
    null_key_sticky: bool  # a null key goes to the sticky partition, else is hashed as b""
    empty_key_random: bool  # an empty key goes to a random partition (consistent_random)

    def hash_of(self, key: Buffer) -> int:
        return _HASHES[self.key_hash](key)


_HASHES: Final[dict[int, Callable[[Buffer], int]]] = {
    HASH_MURMUR2: murmur2_positive,
    HASH_CRC32: crc32,
    HASH_FNV1A: fnv1a_positive,
}
PARTITIONERS: Final = {
    p.name: p
    for p in (
        Partitioner("random", HASH_NONE, True, False),
        Partitioner("consistent", HASH_CRC32, False, False),
        Partitioner("consistent_random", HASH_CRC32, True, True),
        Partitioner("murmur2", HASH_MURMUR2, False, False),
        Partitioner("murmur2_random", HASH_MURMUR2, True, False),
        Partitioner("fnv1a", HASH_FNV1A, False, False),
        Partitioner("fnv1a_random", HASH_FNV1A, True, False),
    )
}
# broker.producer()'s default is Java's client's (murmur2_random), which eoslog documented
# from the start; eoslog.confluent.Producer's is librdkafka's (consistent_random).
NATIVE_DEFAULT: Final = "murmur2_random"
CONFLUENT_DEFAULT: Final = "consistent_random"


def partition_for_key(
    key: Buffer, num_partitions: int, partitioner: Partitioner = PARTITIONERS[NATIVE_DEFAULT]
) -> int:
    """The partition of a non-null key that is hashed (not an empty key of
    consistent_random, not the random partitioner: the caller picks those at random)."""
    return partitioner.hash_of(key) % num_partitions


def partitions_for_spans(
    data: Buffer,
    starts: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int32],
    num_partitions: int,
    partitioner: Partitioner = PARTITIONERS[NATIVE_DEFAULT],
    rng: random.Random | None = None,
) -> npt.NDArray[np.int64]:
    """The partition for each key span data[start : start + length]; -1 for a null key
    (length -1) that goes to the sticky partition, which the caller picks. murmur2 runs in
    one native call; the other hashes key by key."""
    if partitioner.key_hash == HASH_MURMUR2:
        hashes = primitives.murmur2_spans(data, starts, lengths).astype(np.int64)
        partitions = (hashes & _POSITIVE_MASK) % num_partitions
    else:
        view = memoryview(data).cast("B")
        chosen = rng or random.Random()
        partitions = np.array(
            [
                -1
                if length < 0
                else choose(partitioner, view[start : start + length], num_partitions, chosen)
                for start, length in zip(starts.tolist(), lengths.tolist(), strict=True)
            ],
            dtype=np.int64,
        )
    if partitioner.null_key_sticky:
        partitions[lengths < 0] = -1
    else:
        partitions[lengths < 0] = partitioner.hash_of(b"") % num_partitions
    return partitions


def choose(partitioner: Partitioner, key: Buffer, num_partitions: int, rng: random.Random) -> int:
    """The partition of a non-null key under `partitioner`."""
    if partitioner.key_hash == HASH_NONE or (
        partitioner.empty_key_random and memoryview(key).nbytes == 0
    ):
        return rng.randrange(num_partitions)
    return partitioner.hash_of(key) % num_partitions


class StickyPartitioner:
    """Per topic, the partition null-key records go to until its batch closes (with
    `sticky` false, none: each call picks at random). Not thread-safe: the producer calls
    it under its lock."""

    def __init__(self, seed: int | None = None, *, sticky: bool = True) -> None:
        self._random = random.Random(seed)
        self.random = self._random  # the producer's random choices share the seed
        self._sticky = sticky
        # topic -> its sticky partition; the producer reads it directly on its hot path.
        self.current: dict[str, int] = {}

    def partition(self, topic: str, num_partitions: int) -> int:
        if not self._sticky:
            return self._random.randrange(num_partitions)
        current = self.current.get(topic)
        if current is None or current >= num_partitions:
            current = self._random.randrange(num_partitions)
            self.current[topic] = current
        return current

    def batch_closed(self, topic: str, partition: int, num_partitions: int) -> None:
        """The batch of `partition` closed: if null-key records were sticking to it, move them
        to another partition (never the same one again when there is a choice, as Kafka's
        StickyPartitionCache.nextPartition does)."""
        if self.current.get(topic) != partition:
            return
        if num_partitions <= 1:
            return
        choice = self._random.randrange(num_partitions - 1)
        self.current[topic] = choice if choice < partition else choice + 1
