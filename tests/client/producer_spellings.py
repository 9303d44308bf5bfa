"""Both spellings of a producer for the tests of tests/client/test_producer_*.py:
`broker.producer(conf)` and `eoslog.confluent.Producer(conf)` (docs/api.md "Drop-in for
confluent-kafka"), each with the Broker it writes to."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

import eoslog
import eoslog.confluent

SPELLINGS = ["broker.producer", "eoslog.confluent.Producer"]

MakeProducer = Callable[..., tuple[eoslog.Producer, eoslog.Broker]]


@pytest.fixture(params=SPELLINGS)
def make_producer(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[MakeProducer]:
    """make_producer(conf) -> (producer, broker), the producer made in the spelling of the
    test's parameter over one log directory (durability "none")."""
    made: list[eoslog.Producer] = []
    path = str(tmp_path / "log")
    opened: list[eoslog.Broker] = []

    def make(conf: Mapping[str, object] | None = None) -> tuple[eoslog.Producer, eoslog.Broker]:
        conf = dict(conf or {})
        if request.param == "broker.producer":
            if not opened:
                opened.append(eoslog.open(path, durability="none", background=False))
            producer = opened[0].producer(conf)
            broker = opened[0]
        else:
            producer = eoslog.confluent.Producer(
                {"bootstrap.servers": f"eoslog://{path}", "eoslog.durability": "none", **conf}
            )
            broker = producer._broker  # type: ignore[assignment]  # the shared broker
        made.append(producer)
        return producer, broker

    yield make
    for producer in made:
        producer.close()
    for broker in opened:
        broker.close()
