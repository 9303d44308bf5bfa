"""A confluent-kafka (librdkafka) consumer in a process of its own, for the wire group tests
(tests/serve/test_group_clients.py): `python group_consumer_process.py BOOTSTRAP GROUP TOPIC`.

It joins GROUP with librdkafka's defaults (partition.assignment.strategy "range,roundrobin")
and a short session timeout, and writes one JSON line to stdout per event, flushed at once:
{"assigned": [[topic, partition], ...]} after each rebalance, and {"consumed": [topic,
partition, offset]} for each record once its offset is committed (synchronously; a record
whose commit is refused is not reported, its next owner reads it again). It runs
until it is killed, or until stdin closes (then it closes the consumer, leaving the group).
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

SESSION_TIMEOUT_MS = 6000  # Kafka's group.min.session.timeout.ms: the shortest a broker takes


def _say(event: str, value: Any) -> None:
    sys.stdout.write(json.dumps({event: value}) + "\n")
    sys.stdout.flush()


def main(bootstrap: str, group: str, topic: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": 500,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    closing = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), closing.set()), daemon=True).start()

    def on_assign(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
        _say("assigned", sorted([p.topic, p.partition] for p in partitions))

    consumer.subscribe([topic], on_assign=on_assign)
    while not closing.is_set():
        message = consumer.poll(0.2)
        if message is None or message.error() is not None:
            continue
        try:
            consumer.commit(message=message, asynchronous=False)
        except KafkaException:
            continue  # refused (a rebalance ended the generation): the next owner reads it
        _say("consumed", [message.topic(), message.partition(), message.offset()])
    consumer.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
