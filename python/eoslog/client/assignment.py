"""A consumer's assignment (docs/api.md "Consumer"): the partitions it reads, each an
AssignedPartition of the fetcher (position, fetched records), the order poll, consume and
consume_arrow serve them in (in turn, each call starting one partition further, so that a busy
partition cannot starve the others), and the partitions the application paused.

The pause belongs to the partition, not to the assignment, as librdkafka's does (a flag of its
toppar, the per-partition object of the client handle, which outlives assignments): a paused
partition stays paused through unassign(), assign() and rebalances until resume(), and one
paused before it is assigned starts paused. (Kafka's Java consumer forgets the pause of a
partition that leaves the assignment; eoslog follows confluent-kafka. librdkafka ignores a
pause of a partition whose topic it has no metadata for yet; eoslog's broker always knows its
topics, so here a pause of any existing partition holds.)

The Consumer decides what is assigned (assign, unassign, its group's rebalances); this module
keeps the result. Thread safety: used from the consumer's thread only, as the Consumer is.
"""

from __future__ import annotations

from collections.abc import Sequence

from eoslog.client.fetcher import AssignedPartition
from eoslog.client.message import OFFSET_INVALID, TopicPartition
from eoslog.errors import KafkaError, KafkaException

PartitionKey = tuple[str, int]


class Assignment:
    """The assigned partitions, by (topic, partition), in the order they were assigned."""

    __slots__ = ("_turn", "generation", "partitions", "paused")

    def __init__(self) -> None:
        self.partitions: dict[PartitionKey, AssignedPartition] = {}
        self.paused: set[PartitionKey] = set()
        self._turn = 0  # where the next round over the partitions starts (fairness)
        # Counts the changes: tells whether an on_assign callback assigned (Consumer).
        self.generation = 0

    def get(self, topic: str, partition: int) -> AssignedPartition | None:
        return self.partitions.get((topic, partition))

    def __bool__(self) -> bool:
        return bool(self.partitions)

    def replace(self, partitions: dict[PartitionKey, AssignedPartition]) -> None:
        """Make `partitions` the whole assignment (an empty dict: nothing assigned)."""
        self.partitions = partitions
        self._turn = 0
        self.generation += 1

    def add(self, partitions: dict[PartitionKey, AssignedPartition]) -> None:
        """Assign these partitions too (none of them assigned yet), after the others."""
        assert not self.partitions.keys() & partitions.keys()
        self.partitions = {**self.partitions, **partitions}
        self.generation += 1

    def remove(self, keys: list[PartitionKey]) -> None:
        """Stop reading these partitions (each assigned); their buffered records go."""
        assert all(key in self.partitions for key in keys)
        gone = set(keys)
        self.partitions = {k: v for k, v in self.partitions.items() if k not in gone}
        self.generation += 1

    def resume(self, key: PartitionKey) -> None:
        """Deliver from this partition again if it is paused. Its end is reported again
        (_PARTITION_EOF) once reached, as librdkafka reports it after a resume."""
        assigned = self.partitions.get(key)
        if key in self.paused and assigned is not None:
            assigned.eof_offset = OFFSET_INVALID
        self.paused.discard(key)

    def check_addable(self, partitions: Sequence[TopicPartition]) -> None:
        """incremental_assign's refusals, librdkafka's: KafkaException _INVALID_ARG for a
        partition given twice, _CONFLICT for one already assigned."""
        _check_no_duplicate(partitions)
        for tp in partitions:
            if (tp.topic, tp.partition) in self.partitions:
                raise KafkaException(
                    KafkaError(
                        KafkaError._CONFLICT,
                        f"{tp.topic} [{tp.partition}] is already part of the current assignment",
                    )
                )

    def check_removable(self, partitions: Sequence[TopicPartition]) -> list[PartitionKey]:
        """incremental_unassign's refusals, librdkafka's: KafkaException _INVALID_ARG for a
        partition given twice or not assigned. The partitions' keys."""
        _check_no_duplicate(partitions)
        for tp in partitions:
            if (tp.topic, tp.partition) not in self.partitions:
                raise KafkaException(
                    KafkaError(
                        KafkaError._INVALID_ARG,
                        f"{tp.topic} [{tp.partition}] can't be unassigned since it is not in "
                        "the current assignment",
                    )
                )
        return [(tp.topic, tp.partition) for tp in partitions]

    def rotation(self) -> list[AssignedPartition]:
        """The partitions that are not paused, in serving order for one poll/consume call."""
        order = list(self.partitions.values())
        if self.paused:
            order = [p for p in order if (p.topic, p.partition) not in self.paused]
        if not order:
            return []
        turn = self._turn % len(order)
        self._turn = turn + 1
        return order[turn:] + order[:turn]


def first_duplicate(partitions: Sequence[TopicPartition]) -> TopicPartition | None:
    """The first partition given a second time, or None."""
    seen: set[PartitionKey] = set()
    for tp in partitions:
        if (tp.topic, tp.partition) in seen:
            return tp
        seen.add((tp.topic, tp.partition))
    return None


def _check_no_duplicate(partitions: Sequence[TopicPartition]) -> None:
    """librdkafka's refusal of a partition list that names one partition twice."""
    duplicate = first_duplicate(partitions)
    if duplicate is not None:
        raise KafkaException(
            KafkaError(
                KafkaError._INVALID_ARG,
                f"Duplicate {duplicate.topic} [{duplicate.partition}] in input list",
            )
        )
