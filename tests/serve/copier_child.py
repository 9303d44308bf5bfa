"""A consume-transform-produce copier in its own process, as a user would write it with
confluent-kafka: it reads "in" in group "copiers" (read_committed, static member
"copier-0"), and copies each record to the same partition of "out" in a transaction that also
commits the group's offsets (send_offsets_to_transaction). It runs until it is killed; the
test kills it with SIGKILL at arbitrary points (tests/serve/test_real_client_copier.py).

Usage: python copier_child.py HOST:PORT
"""

from __future__ import annotations

import sys

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer

TIMEOUT_S = 30.0


def main(address: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": address,
            "group.id": "copiers",
            "group.instance.id": "copier-0",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    producer = Producer(
        {"bootstrap.servers": address, "transactional.id": "copier", "linger.ms": 5}
    )
    consumer.subscribe(["in"])
    producer.init_transactions(TIMEOUT_S)
    while True:
        messages = consumer.consume(50, timeout=0.2)
        if not messages:
            continue
        producer.begin_transaction()
        try:
            for message in messages:
                if message.error() is not None:
                    raise KafkaException(message.error())
                producer.produce("out", message.value(), partition=message.partition())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()),
                consumer.consumer_group_metadata(),
                TIMEOUT_S,
            )
            producer.commit_transaction(TIMEOUT_S)
        except KafkaException as error:
            if not error.args[0].txn_requires_abort():
                raise
            producer.abort_transaction(TIMEOUT_S)
            # Read again from the committed offsets: the aborted copies are gone.
            for tp in consumer.committed(consumer.assignment(), TIMEOUT_S):
                if tp.offset < 0:  # nothing committed yet
                    tp.offset = OFFSET_BEGINNING
                consumer.seek(tp)


if __name__ == "__main__":
    main(sys.argv[1])
