"""Cycles in a directed graph, for the checks that look for them: import cycles
(tests/test_layering.py) and write-read cycles between operations of a history
(tests/support/history_process_checks.py, thousands of nodes deep, so nothing here recurses).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

Node = TypeVar("Node", bound="SupportsRichComparison")  # and hashable: modules, operations


def cycles(graph: Mapping[Node, Iterable[Node]]) -> list[list[Node]]:
    """One cycle per strongly connected group of more than one node: a shortest path from the
    group's smallest node back to itself, inside the group (the first node repeated at the
    end). Groups come in the order a depth-first search from each node in sorted order, taking
    successors in sorted order, completes them; [] when there is none."""
    edges = {node: sorted(set(targets)) for node, targets in graph.items()}
    return [_cycle_through(sorted(group), edges) for group in _groups(edges)]


def _groups(edges: Mapping[Node, list[Node]]) -> list[list[Node]]:
    """Tarjan's strongly connected components of more than one node, iteratively."""
    index: dict[Node, int] = {}
    low: dict[Node, int] = {}
    stack: list[Node] = []
    on_stack: set[Node] = set()
    groups: list[list[Node]] = []
    work: list[tuple[Node, Iterator[Node]]] = []  # the search's path, each node's next edges

    def enter(node: Node) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        work.append((node, iter(edges.get(node, ()))))

    for root in sorted(edges):
        if root in index:
            continue
        enter(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    enter(successor)
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    group = [stack.pop()]
                    while group[-1] != node:
                        group.append(stack.pop())
                    on_stack.difference_update(group)
                    if len(group) > 1:
                        groups.append(group)
    return groups


def _cycle_through(group: list[Node], edges: Mapping[Node, list[Node]]) -> list[Node]:
    """A shortest path from the group's first node back to itself, inside the group."""
    members = set(group)
    start = group[0]
    paths: dict[Node, list[Node]] = {start: [start]}
    frontier: list[Node] = [start]
    while frontier:
        following: list[Node] = []
        for here in frontier:
            path = paths[here]
            for target in edges.get(here, ()):
                if target not in members:
                    continue
                if target == start:
                    return [*path, start]
                if target not in paths:
                    paths[target] = [*path, target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"{group} is not strongly connected")
