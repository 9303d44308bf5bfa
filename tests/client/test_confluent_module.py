"""`import eoslog.confluent as confluent_kafka` (docs/api.md "confluent-kafka drop-in"): clients
built from a config that names a log directory, sharing one broker per directory, which closes
with its last client."""

from __future__ import annotations

import gc
import threading
from pathlib import Path
from typing import Any

import pytest

import eoslog
import eoslog.confluent as confluent_kafka
from eoslog.errors import InvalidConfigError


def servers(path: Path) -> dict[str, object]:
    return {"bootstrap.servers": f"eoslog://{path}"}


def test_a_confluent_style_producer_and_consumer_round_trip(tmp_path: Path) -> None:
    reports: list[Any] = []
    producer = confluent_kafka.Producer(
        {**servers(tmp_path), "eoslog.broker.num.partitions": 2, "linger.ms": 5}
    )
    for number in range(100):
        producer.produce(
            "orders",
            key=b"k%d" % (number % 7),
            value=b"%d" % number,
            on_delivery=lambda error, message: reports.append((error, message)),
        )
    assert producer.flush(10) == 0
    assert len(reports) == 100 and all(error is None for error, _ in reports)
    consumer = confluent_kafka.Consumer(
        {**servers(tmp_path), "group.id": "g", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["orders"])
    got: list[bytes] = []
    while len(got) < 100 and (messages := consumer.consume(100, timeout=5)):
        got.extend(message.value() for message in messages)  # type: ignore[misc]
    consumer.commit()
    assert sorted(got, key=int) == [b"%d" % number for number in range(100)]
    assert {tp.partition for tp in consumer.assignment()} == {0, 1}  # num.partitions applied
    consumer.close()
    producer.close()
    # The last client closed the directory: another owner may open it now.
    with eoslog.open(str(tmp_path)) as broker:
        assert broker.list_topics()["orders"].num_partitions == 2


def test_clients_of_one_directory_share_one_broker(tmp_path: Path) -> None:
    first = confluent_kafka.Producer({"eoslog.dir": str(tmp_path)})
    second = confluent_kafka.Consumer({**servers(tmp_path), "group.id": "g"})
    assert first._broker is second._broker
    first.close()
    with pytest.raises(eoslog.LogDirLockedError):
        eoslog.open(str(tmp_path))  # the consumer still holds it
    second.close()
    eoslog.open(str(tmp_path)).close()


def test_a_client_collected_while_another_opens_its_directory_neither_deadlocks_nor_leaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client dropped without close() gives its directory back from a finalizer, which the
    collector may run in the middle of another client's broker open (it did, in the parity
    suite, and waited forever for the registry's lock)."""
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    abandoned = confluent_kafka.Producer({"eoslog.dir": str(first_dir)})
    opening = confluent_kafka.open_broker

    def open_and_collect(*args: Any, **kwargs: Any) -> eoslog.Broker:
        gc.collect()  # the finalizer of `abandoned` runs here, inside the registry's lock
        return opening(*args, **kwargs)

    monkeypatch.setattr(confluent_kafka, "open_broker", open_and_collect)
    made: list[Any] = []
    del abandoned
    worker = threading.Thread(
        target=lambda: made.append(
            confluent_kafka.Consumer({"eoslog.dir": str(second_dir), "group.id": "g"})
        ),
        daemon=True,
    )
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "opening a second directory deadlocked"
    (consumer,) = made
    eoslog.open(str(first_dir)).close()  # the abandoned producer's broker was closed
    consumer.close()


def test_the_classes_are_eoslogs_own(tmp_path: Path) -> None:
    producer = confluent_kafka.Producer(servers(tmp_path))
    consumer = confluent_kafka.Consumer({**servers(tmp_path), "group.id": "g"})
    assert isinstance(producer, eoslog.Producer) and isinstance(consumer, eoslog.Consumer)
    assert confluent_kafka.KafkaError is eoslog.KafkaError
    assert confluent_kafka.TopicPartition is eoslog.TopicPartition
    assert confluent_kafka.KafkaError._PARTITION_EOF == -191
    consumer.close()
    producer.close()


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"bootstrap.servers": "localhost:9092"},
        {"bootstrap.servers": "eoslog://"},
        {"eoslog.dir": 5},
    ],
)
def test_a_config_that_names_no_directory_is_refused(config: dict[str, object]) -> None:
    with pytest.raises(InvalidConfigError, match="name the log directory"):
        confluent_kafka.Producer(config)


def test_the_config_may_be_given_as_keyword_arguments_as_confluent_takes_it(
    tmp_path: Path,
) -> None:
    """confluent-kafka's examples write Producer(**conf); keywords also join a dict."""
    conf = {**servers(tmp_path), "linger.ms": 0}
    producer = confluent_kafka.Producer(**conf)
    producer.produce("kw", b"v")
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer(
        {**servers(tmp_path), "group.id": "g"}, **{"auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["kw"])
    message = consumer.poll(10)
    assert message is not None and message.value() == b"v"
    consumer.close()
    producer.close()
    with pytest.raises(InvalidConfigError, match="name the log directory"):
        confluent_kafka.Producer()


def test_a_config_that_is_not_a_dict_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        confluent_kafka.Consumer("eoslog:///tmp/x")  # type: ignore[arg-type]


def test_a_bad_durability_is_refused_and_opens_nothing(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match=r"eoslog\.durability"):
        confluent_kafka.Producer({**servers(tmp_path), "eoslog.durability": "sometimes"})
    eoslog.open(str(tmp_path)).close()


def test_a_client_config_error_releases_the_directory(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError):
        confluent_kafka.Producer({**servers(tmp_path), "linger.ms": -5})
    eoslog.open(str(tmp_path)).close()


def test_version_has_confluents_shape() -> None:
    text, number = confluent_kafka.version()
    assert text == eoslog.__version__ and isinstance(number, int) and number > 0
