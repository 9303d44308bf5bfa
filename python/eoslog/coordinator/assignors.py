"""Partition assignment strategies for consumer groups, by the names Kafka and librdkafka give
them in `partition.assignment.strategy`:

* "range" (Kafka's RangeAssignor): topic by topic, the members subscribed to it, sorted by
  member id, take consecutive runs of its partitions; the first (partitions % members)
  members take one partition more.
* "roundrobin" (RoundRobinAssignor): every subscribed partition, sorted by topic then
  partition, is dealt to the members in member-id order, skipping a member not subscribed to
  its topic.

Each is a pure function of the subscriptions and the partition counts: the same input always
gives the same assignment. Thread-safe.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Final

Partition = tuple[str, int]
Subscriptions = Mapping[str, frozenset[str]]  # member id -> subscribed topics
Assignment = dict[str, list[Partition]]  # member id -> partitions, sorted


def range_assign(subscriptions: Subscriptions, partition_counts: Mapping[str, int]) -> Assignment:
    assignment: Assignment = {member: [] for member in subscriptions}
    topics = sorted({topic for topics in subscriptions.values() for topic in topics})
    for topic in topics:
        count = partition_counts.get(topic, 0)
        members = sorted(m for m, subscribed in subscriptions.items() if topic in subscribed)
        share, extra = divmod(count, len(members))
        start = 0
        for index, member in enumerate(members):
            length = share + (1 if index < extra else 0)
            assignment[member].extend((topic, p) for p in range(start, start + length))
            start += length
    return assignment


def round_robin_assign(
    subscriptions: Subscriptions, partition_counts: Mapping[str, int]
) -> Assignment:
    assignment: Assignment = {member: [] for member in subscriptions}
    members = sorted(subscriptions)
    if not members:
        return assignment
    turns = itertools.cycle(members)
    topics = sorted({topic for topics in subscriptions.values() for topic in topics})
    for topic in topics:
        for partition in range(partition_counts.get(topic, 0)):
            # Some member is subscribed to every topic in `topics`: this loop ends.
            member = next(turns)
            while topic not in subscriptions[member]:
                member = next(turns)
            assignment[member].append((topic, partition))
    return assignment


ASSIGNORS: Final[Mapping[str, Callable[[Subscriptions, Mapping[str, int]], Assignment]]] = {
    "range": range_assign,
    "roundrobin": round_robin_assign,
}
