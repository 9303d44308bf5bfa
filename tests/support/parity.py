"""Running one script on confluent-kafka (librdkafka's mock cluster, in this process, no
network) and on eoslog.confluent, and turning what a user observes into comparable values:
return values and their types, KafkaError fields, exception types, delivery reports.

A script is a function `script(module, config)`: `module` is `confluent_kafka` or
`eoslog.confluent`, `config` the client config that reaches the cluster or the log
directory (`bootstrap.servers`). Exception messages are not compared (confluent's name its
C types); an exception that is a KafkaException of the module counts as "KafkaException"
(eoslog raises subclasses of it, which `except KafkaException` catches alike).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

ids = itertools.count()


def error_fields(error: Any) -> tuple[object, ...] | None:
    """A KafkaError as (code, name, retriable, fatal, txn_requires_abort); None for None."""
    if error is None:
        return None
    return (
        error.code(),
        error.name(),
        error.retriable(),
        error.fatal(),
        error.txn_requires_abort(),
    )


def outcome(module: Any, call: Callable[[], Any]) -> tuple[object, ...]:
    """("ok", the result's type name, the result when it is a plain value), or the exception:
    ("KafkaException", its KafkaError's fields), or (its type name,)."""
    try:
        result = call()
    except module.KafkaException as error:
        return ("KafkaException", error_fields(error.args[0]))
    except Exception as error:  # TypeError, ValueError, ...: the type is what is compared
        return (type(error).__name__,)
    plain = result if isinstance(result, (int, str, type(None))) else None
    return ("ok", type(result).__name__, plain)


def report_fields(error: Any, message: Any) -> tuple[object, ...]:
    """A delivery report as the user sees it: the error and the message's fields (the
    timestamp as its shape: the mock cluster answers LogAppendTime for every topic)."""
    timestamp = message.timestamp()
    return (
        error_fields(error),
        message.topic(),
        message.partition(),
        message.key(),
        message.value(),
        (type(timestamp).__name__, len(timestamp), type(timestamp[1]).__name__),
        error_fields(message.error()),
    )


def mock_cluster(confluent_kafka: Any) -> Iterator[str]:
    """A librdkafka mock cluster (one broker) for as long as the generator runs; yields its
    bootstrap address."""
    producer = confluent_kafka.Producer({"bootstrap.servers": "", "test.mock.num.brokers": 1})
    producer.produce("warm-up", b"x")
    producer.flush(15)
    (node,) = producer.list_topics(timeout=15).brokers.values()
    # The cluster lives as long as the producer that made it.
    yield f"{node.host}:{node.port}"
    del producer


class Sides:
    """Both implementations: `run(script)` gives (confluent's observations, eoslog's)."""

    def __init__(self, confluent_kafka: Any, servers: str, eoslog_confluent: Any, path: str):
        self._sides = (
            (confluent_kafka, {"bootstrap.servers": servers}),
            (eoslog_confluent, {"bootstrap.servers": f"eoslog://{path}"}),
        )

    def run(self, script: Callable[[Any, dict[str, object]], Any]) -> tuple[Any, Any]:
        (theirs, their_config), (ours, our_config) = self._sides
        return script(theirs, dict(their_config)), script(ours, dict(our_config))

    def same(self, script: Callable[[Any, dict[str, object]], Any]) -> Any:
        """Run on both, assert equal observations, return eoslog's."""
        theirs, ours = self.run(script)
        assert ours == theirs
        return ours

    def eoslog(self, script: Callable[[Any, dict[str, object]], Any]) -> Any:
        module, config = self._sides[1]
        return script(module, dict(config))


def open_sides(confluent_kafka: Any, eoslog_confluent: Any, path: str) -> Iterator[Sides]:
    """Sides over a fresh mock cluster and the log directory `path`, for a module-scoped
    fixture (one mock cluster per test module keeps the suite fast)."""
    for servers in mock_cluster(confluent_kafka):
        yield Sides(confluent_kafka, servers, eoslog_confluent, path)
