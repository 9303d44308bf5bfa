"""Family 8 (docs/reliability.md): minimal regression tests of what the history checker found in
randomized runs, one per finding, each naming the seed and the class that found it.

consume() across a rebalance (seed 1, CI size, classes consumed_twice and
internal_nonmonotonic_poll): a copier's consume(n, timeout) took records, waited for more, and
the group's step inside that wait revoked and re-assigned the partitions; the partitions
restarted at the committed offset and the call returned the records taken before the
revocation and the same records again, so one transaction copied them twice and committed
(its offsets were sent with the new generation, which KIP-447 fencing accepts). Kafka's Java
consumer never holds records across a rebalance (poll returns what it has before the next
one); librdkafka drops the messages a rebalance or seek outdated. Fixed: a rebalance that
comes due while a call holds records ends the call with them, and the next call makes it
(eoslog.client.read_loop.Step.DELIVER_FIRST). Auto-commit is unchanged by this: it commits at
the revocation what was stored for records already delivered. The randomized workload's
copiers wait in consume() again (tests/support/history_workload.py COPIER_CONSUME_TIMEOUT_S).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

import eoslog

Read = Callable[[eoslog.Consumer], list[tuple[int, int]]]


def _consume(consumer: eoslog.Consumer) -> list[tuple[int, int]]:
    return [(m.partition() or 0, m.offset() or 0) for m in consumer.consume(12, timeout=5)]


def _consume_arrow(consumer: eoslog.Consumer) -> list[tuple[int, int]]:
    batch = consumer.consume_arrow(12, timeout=5)
    partitions = batch.column("partition").to_pylist()
    return list(zip(partitions, batch.column("offset").to_pylist(), strict=True))


@pytest.mark.parametrize("read", [_consume, _consume_arrow], ids=["consume", "consume_arrow"])
def test_one_call_never_returns_a_record_twice_across_a_rebalance(
    tmp_path: os.PathLike[str], read: Read
) -> None:
    with eoslog.open(os.fspath(tmp_path), background=False) as broker:
        broker.create_topic("t", 2)
        producer = broker.producer({})
        for number in range(6):
            producer.produce("t", b"%d" % number, partition=number % 2)
        producer.flush()
        consumer = broker.consumer(
            {"group.id": "g", "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        )
        rebalances = []

        def on_assign(consumer: eoslog.Consumer, assigned: list[eoslog.TopicPartition]) -> None:
            rebalances.append(len(assigned))
            if len(rebalances) == 1:
                # Seen by the member's next step, inside the same call, after it took the
                # six records: a new topic the pattern matches, so a rebalance.
                broker.create_topic("t2", 1)

        consumer.subscribe(["^t.*"], on_assign=on_assign)
        delivered = read(consumer)
        assert rebalances[0] == 2
        assert len(delivered) == len(set(delivered)) == 6, f"delivered: {sorted(delivered)}"
        consumer.close()
