"""An acknowledgement means durable (docs/reliability.md; README "Durability"): under durability
"commit" and "always" a delivery callback without error, a flush() return,
commit_transaction() and a consumer commit() happen only after the fsync that covers them.

Each test runs on the recording fs twin (eoslog.fs_twin) and takes power-loss images at the
very moment of the acknowledgement (inside the delivery callback, or right after the call
returns): the worst image (every file cut back to its last fsync) and a few random ones
(unsynced writes applied, dropped or torn). Every acknowledged record, offset or transaction
must be in every image. Under "none" nothing is promised across a power loss; the test for it
pins that poll() stays free of fsyncs there.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

import eoslog
from eoslog.errors import KafkaError, KafkaStorageError
from eoslog.fs_twin import RecordingFileSystem
from tests.support.invariants import copy_twin

ROOT = "/data"
LOG_DIR = "/data/log"
TOPIC = "t"
GROUP = "g"
DURABLE_MODES = ("commit", "always")
# Random images per acknowledgement, besides the worst one (everything unsynced dropped).
RANDOM_IMAGES = 3
# linger.ms for the poll tests: 0 appends each record at once on the producing thread (no
# linger thread), so each poll() serves the report of a fresh, unsynced append.
LINGER_MS = 0


def new_broker(seed: int, durability: str) -> tuple[RecordingFileSystem, eoslog.Broker]:
    twin = RecordingFileSystem(seed)
    twin.makedirs(ROOT, durable=True)
    broker = eoslog.open(LOG_DIR, durability, fs=twin, background=False)
    broker.create_topic(TOPIC, 2)
    return twin, broker


def power_loss_images(twin: RecordingFileSystem, rng: random.Random) -> list[RecordingFileSystem]:
    """The worst image (every file as of its last fsync) and RANDOM_IMAGES random ones."""
    worst = copy_twin(twin, content_of=twin.durable_bytes)
    return [worst, *(twin.crash_image(rng) for _ in range(RANDOM_IMAGES))]


def values_by_offset(broker: eoslog.Broker, partition: int, isolation: str) -> dict[int, bytes]:
    consumer = broker.consumer({"auto.offset.reset": "earliest", "isolation.level": isolation})
    consumer.assign([eoslog.TopicPartition(TOPIC, partition, 0)])
    found: dict[int, bytes] = {}
    while messages := consumer.consume(100, timeout=0):
        found.update((message.offset(), bytes(message.value())) for message in messages)
    consumer.close()
    return found


def missing_from(
    image: RecordingFileSystem,
    acked: dict[tuple[int, int], bytes],
    isolation: str = "read_uncommitted",
) -> dict[tuple[int, int], bytes]:
    """The acknowledged (partition, offset) -> value that the image does not hold."""
    with eoslog.open(LOG_DIR, "commit", fs=image, background=False) as reopened:
        present = {p: values_by_offset(reopened, p, isolation) for p in range(2)}
    return {
        where: value for where, value in acked.items() if present[where[0]].get(where[1]) != value
    }


class CallbackLedger:
    """Records each successful delivery and takes power-loss images at that moment."""

    def __init__(self, twin: RecordingFileSystem, seed: int) -> None:
        self._twin = twin
        self._rng = random.Random(seed)
        self.acked: dict[tuple[int, int], bytes] = {}
        self.images: list[tuple[RecordingFileSystem, dict[tuple[int, int], bytes]]] = []

    def __call__(self, error: KafkaError | None, report: Any) -> None:
        if error is not None:
            return
        self.acked[(report.partition(), report.offset())] = report.value()
        for image in power_loss_images(self._twin, self._rng):
            self.images.append((image, dict(self.acked)))


def check_images(images: list[tuple[RecordingFileSystem, dict[Any, bytes]]], **kw: Any) -> None:
    assert images, "no acknowledgement was observed"
    for index, (image, acked) in enumerate(images):
        lost = missing_from(image, acked, **kw)
        assert not lost, f"image {index} of {len(images)}: acknowledged records lost {lost}"


@pytest.mark.parametrize("durability", DURABLE_MODES)
def test_a_delivery_callback_served_by_poll_reports_only_durable_records(durability: str) -> None:
    seed = 11
    print(f"seed {seed}")
    twin, broker = new_broker(seed, durability)
    ledger = CallbackLedger(twin, seed)
    producer = broker.producer({"linger.ms": LINGER_MS, "on_delivery": ledger})
    for number in range(6):
        producer.produce(TOPIC, b"poll-%d" % number, partition=number % 2)
        producer.poll(0)
    print(f"{len(ledger.images)} images at {len(ledger.acked)} callbacks")
    check_images(ledger.images)
    producer.close()
    broker.close()


@pytest.mark.parametrize("durability", DURABLE_MODES)
def test_a_delivery_callback_served_by_flush_and_the_flush_return_are_durable(
    durability: str,
) -> None:
    seed = 12
    print(f"seed {seed}")
    twin, broker = new_broker(seed, durability)
    ledger = CallbackLedger(twin, seed)
    producer = broker.producer({"linger.ms": 60_000, "on_delivery": ledger})
    for number in range(5):
        producer.produce(TOPIC, b"flush-%d" % number, partition=number % 2)
    assert producer.flush() == 0
    images = ledger.images + [
        (image, dict(ledger.acked)) for image in power_loss_images(twin, random.Random(seed))
    ]
    check_images(images)
    producer.close()
    broker.close()


@pytest.mark.parametrize("durability", DURABLE_MODES)
def test_a_flush_return_without_callbacks_is_durable(durability: str) -> None:
    seed = 13
    twin, broker = new_broker(seed, durability)
    producer = broker.producer({"linger.ms": 60_000})
    for number in range(4):
        producer.produce(TOPIC, b"plain-%d" % number, partition=0)
    assert producer.flush() == 0
    acked = {(0, offset): b"plain-%d" % offset for offset in range(4)}
    check_images([(image, acked) for image in power_loss_images(twin, random.Random(seed))])
    producer.close()
    broker.close()


@pytest.mark.parametrize("durability", DURABLE_MODES)
def test_a_returned_commit_transaction_survives_every_power_loss_image(durability: str) -> None:
    seed = 14
    twin, broker = new_broker(seed, durability)
    producer = broker.producer({"transactional.id": "ack", "linger.ms": 0})
    producer.init_transactions()
    rng = random.Random(seed)
    images = []
    acked: dict[tuple[int, int], bytes] = {}
    for number in range(3):
        producer.begin_transaction()
        offsets = {}

        def delivered(
            error: KafkaError | None, report: Any, offsets: dict[Any, Any] = offsets
        ) -> None:
            assert error is None, error
            offsets[(report.partition(), report.offset())] = report.value()

        for partition in range(2):
            producer.produce(
                TOPIC,
                b"txn-%d-%d" % (number, partition),
                partition=partition,
                on_delivery=delivered,
            )
        producer.commit_transaction()
        acked.update(offsets)
        images.extend((image, dict(acked)) for image in power_loss_images(twin, rng))
    check_images(images, isolation="read_committed")
    producer.close()
    broker.close()


@pytest.mark.parametrize("durability", DURABLE_MODES)
def test_a_returned_consumer_commit_survives_every_power_loss_image(durability: str) -> None:
    seed = 15
    twin, broker = new_broker(seed, durability)
    consumer = broker.consumer({"group.id": GROUP, "enable.auto.commit": False})
    rng = random.Random(seed)
    for offset in (3, 9, 27):
        consumer.commit(offsets=[eoslog.TopicPartition(TOPIC, 1, offset)])
        for index, image in enumerate(power_loss_images(twin, rng)):
            with eoslog.open(LOG_DIR, "commit", fs=image, background=False) as reopened:
                stored = reopened.groups.fetch_offsets(GROUP, [(TOPIC, 1)], require_stable=False)
                found = stored[(TOPIC, 1)]
                assert found is not None and found.offset == offset, (offset, index, found)
    consumer.close()
    broker.close()


def test_poll_under_durability_none_makes_no_fsync() -> None:
    """ "none" promises survival of a process crash only: serving reports costs no fsync."""
    twin, broker = new_broker(16, "none")
    delivered: list[int] = []
    producer = broker.producer(
        {
            "linger.ms": LINGER_MS,
            "on_delivery": lambda error, report: delivered.append(report.offset()),
        }
    )
    start = twin.calls
    for number in range(4):
        producer.produce(TOPIC, b"none-%d" % number, partition=0)
        producer.poll(0)
    syncs = [call for call in twin.recorded_calls()[start:] if call[0] == "sync"]
    assert delivered == [0, 1, 2, 3] and syncs == []
    producer.close()
    broker.close()


def test_a_failed_fsync_before_a_callback_reports_the_error_not_success() -> None:
    """Under "commit" the fsync that poll() runs for a delivery report fails: the callback gets
    KafkaStorageError (never success), and the producer stops (fatal)."""
    twin, broker = new_broker(17, "commit")
    outcomes: list[Any] = []
    producer = broker.producer(
        {"linger.ms": LINGER_MS, "on_delivery": lambda error, report: outcomes.append(error)}
    )
    producer.produce(TOPIC, b"x", partition=0)  # appended at once (linger.ms 0)
    twin.fail_after(twin.calls, "EIO")
    producer.poll(0)
    assert len(outcomes) == 1 and outcomes[0] is not None, outcomes
    assert outcomes[0].code() == KafkaStorageError.code, outcomes
    with pytest.raises(KafkaStorageError):
        producer.produce(TOPIC, b"y", partition=0)
