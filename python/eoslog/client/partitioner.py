"""The default partitioner (docs/api.md "Producer": `partition=-1`), as Kafka's clients choose.

- A record with a key goes to `(murmur2(key) & 0x7fffffff) % partitions`, Kafka's
  BuiltInPartitioner / DefaultPartitioner hash (librdkafka's `murmur2_random` partitioner, which
  confluent-kafka-python users set to match the Java client, gives the same answer).
- Records without a key stick to one partition until its batch closes, then a new partition is
  picked at random (Kafka's sticky partitioner, KIP-480), so null-key records fill whole
  batches instead of one small batch per partition.

The hash runs in native code (eoslog._ext.primitives.murmur2, engine/murmur2.h): one call per
produce() key, one call over all keys for produce_batch() (murmur2_spans, no Python object per
key). Thread safety: the functions are pure; StickyPartitioner is guarded by the producer's lock.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from eoslog.record import primitives

if TYPE_CHECKING:
    from typing_extensions import Buffer

_POSITIVE_MASK = 0x7FFFFFFF  # Kafka's Utils.toPositive


def partition_for_key(key: Buffer, num_partitions: int) -> int:
    """Kafka's partition for a non-null key."""
    return (primitives.murmur2(key) & _POSITIVE_MASK) % num_partitions


def partitions_for_spans(
    data: Buffer,
    starts: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int32],
    num_partitions: int,
) -> npt.NDArray[np.int64]:
    """Kafka's partition for each key span data[start : start + length]; -1 for a null key
    (length -1), which the caller sends to the sticky partition."""
    hashes = primitives.murmur2_spans(data, starts, lengths).astype(np.int64)
    partitions = (hashes & _POSITIVE_MASK) % num_partitions
    partitions[lengths < 0] = -1
    return partitions


class StickyPartitioner:
    """Per topic, the partition null-key records go to until its batch closes.
    Not thread-safe: the producer calls it under its lock."""

    def __init__(self, seed: int | None = None) -> None:
        self._random = random.Random(seed)
        # topic -> its sticky partition; the producer reads it directly on its hot path.
        self.current: dict[str, int] = {}

    def partition(self, topic: str, num_partitions: int) -> int:
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
