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

The cleaner and an ABORT marker past the cleanable end (compaction seeds 3 and 10, with
fetches across cleaned gaps allowed locally; classes lost_write and poll_skip): a record of an
aborted transaction whose ABORT marker was not yet below the cleanable end (it landed in the
active segment) counted as the latest record of its key, and the pass removed the committed
record before it, the latest acknowledged one of that key. Fixed: transactional data whose
marker lies past the cleaned range is kept whole and stands for no key until a pass sees its
outcome (eoslog.log.cleaner, `pending`); the compaction power-loss family
(tests/reliability/f03_power_loss/test_compaction_power_loss.py) found the same bug.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

import eoslog
from eoslog.record import codec

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


def test_a_clean_keeps_the_latest_committed_record_when_a_later_one_awaits_its_abort_marker(
    tmp_path: os.PathLike[str],
) -> None:
    config = {
        "cleanup.policy": "compact",
        "min.cleanable.dirty.ratio": 0.01,
        "min.compaction.lag.ms": 0,
    }
    with eoslog.open(os.fspath(tmp_path), background=False) as broker:
        broker.create_topic("t", 1, config)
        log = broker.log("t", 0)
        plain = broker.producer()
        plain.produce("t", b"kept", b"A", partition=0)
        plain.flush()
        transactional = broker.producer({"transactional.id": "x"})
        transactional.init_transactions()
        transactional.begin_transaction()
        transactional.produce("t", b"aborted", b"A", partition=0)
        transactional.flush()
        log.roll()  # the ABORT marker lands in the active segment, past the cleanable end
        transactional.abort_transaction()
        broker.run_maintenance()
        assert log.cleaned_end == 2  # the pass ran over offsets 0 and 1
    with open(os.path.join(tmp_path, "t-0", "00000000000000000000.log"), "rb") as file:
        segment = file.read()
    kept = [
        (record.offset, record.value)
        for position, _ in codec.iter_headers(segment)
        for record in codec.batch_records(segment, position)
    ]
    assert (0, b"kept") in kept, kept
