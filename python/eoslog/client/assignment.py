"""A consumer's assignment (docs/api.md "Consumer"): the partitions it reads, each an
AssignedPartition of the fetcher (position, fetched records), and the order poll, consume and
consume_arrow serve them in: in turn, each call starting one partition further, so that a busy
partition cannot starve the others.

The Consumer decides what is assigned (assign, unassign, its group's rebalances); this module
keeps the result. Thread safety: used from the consumer's thread only, as the Consumer is.
"""

from __future__ import annotations

from eoslog.client.fetcher import AssignedPartition

PartitionKey = tuple[str, int]


class Assignment:
    """The assigned partitions, by (topic, partition), in the order they were assigned."""

    __slots__ = ("_turn", "generation", "partitions")

    def __init__(self) -> None:
        self.partitions: dict[PartitionKey, AssignedPartition] = {}
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

    def rotation(self) -> list[AssignedPartition]:
        """The partitions in serving order for one poll/consume call."""
        order = list(self.partitions.values())
        if not order:
            return []
        turn = self._turn % len(order)
        self._turn = turn + 1
        return order[turn:] + order[:turn]
