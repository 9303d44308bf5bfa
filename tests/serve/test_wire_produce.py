"""Produce over the wire at the edges a real client reaches less often: acks=0, invalid acks,
internal and unknown topics, a damaged batch. Each partition's answer carries the Kafka error
code of what the engine raised; nothing is appended for a refused batch."""

from __future__ import annotations

import pytest

from eoslog.broker import Broker
from eoslog.serve.server import Server
from tests.serve import wire


def _produce(server: Server, topic: str, records: bytes | None, acks: int = -1) -> tuple[int, int]:
    with wire.connect(server.address) as sock:
        response = wire.call(sock, wire.produce_request(topic, 0, records, acks))
    (partition,) = response.responses[0].partition_responses
    return int(partition.error_code), int(partition.base_offset)


def test_acks_0_gets_no_answer_and_the_batch_is_appended(broker: Broker, server: Server) -> None:
    broker.create_topic("t", 1)
    with wire.connect(server.address) as sock:
        sock.sendall(wire.frame(wire.produce_request("t", 0, wire.batch(b"a", b"b"), acks=0), 1))
        # The next answer on the connection is the Metadata's: the Produce had none.
        wire.call(sock, wire.metadata_request("t"), correlation_id=2)
    assert broker.log("t", 0).log_end_offset == 2


def test_acks_1_and_all_answer_the_offset_appended(broker: Broker, server: Server) -> None:
    broker.create_topic("t", 1)
    assert _produce(server, "t", wire.batch(b"a", b"b"), acks=1) == (0, 0)
    assert _produce(server, "t", wire.batch(b"c"), acks=-1) == (0, 2)


@pytest.mark.parametrize(
    ("topic", "code"),
    [("__consumer_offsets", 17), ("missing", 3)],  # INVALID_TOPIC_EXCEPTION, UNKNOWN_TOPIC
)
def test_a_batch_for_an_internal_or_unknown_topic_is_refused(
    broker: Broker, server: Server, topic: str, code: int
) -> None:
    before = broker.log("__consumer_offsets", 0).log_end_offset
    assert _produce(server, topic, wire.batch(b"x"))[0] == code
    assert broker.log("__consumer_offsets", 0).log_end_offset == before
    assert "missing" not in broker.list_topics()


def test_invalid_acks_are_refused_with_invalid_required_acks(
    broker: Broker, server: Server
) -> None:
    broker.create_topic("t", 1)
    assert _produce(server, "t", wire.batch(b"x"), acks=2)[0] == 21
    assert broker.log("t", 0).log_end_offset == 0


def test_a_batch_with_a_bad_crc_is_refused_as_corrupt_and_not_appended(
    broker: Broker, server: Server
) -> None:
    broker.create_topic("t", 1)
    damaged = bytearray(wire.batch(b"x"))
    damaged[-1] ^= 0xFF
    assert _produce(server, "t", bytes(damaged))[0] == 2  # CORRUPT_MESSAGE
    assert broker.log("t", 0).log_end_offset == 0


def test_a_partition_with_null_records_is_refused_as_invalid_record(
    broker: Broker, server: Server
) -> None:
    broker.create_topic("t", 1)
    assert _produce(server, "t", None)[0] == 87  # INVALID_RECORD


def test_pipelined_produce_requests_are_applied_and_answered_in_order(
    broker: Broker, server: Server
) -> None:
    broker.create_topic("t", 1)
    requests = [wire.produce_request("t", 0, wire.batch(b"%d" % i)) for i in range(20)]
    with wire.connect(server.address) as sock:
        sock.sendall(
            b"".join(wire.frame(r, correlation_id) for correlation_id, r in enumerate(requests))
        )
        offsets = []
        for correlation_id in range(len(requests)):
            data = wire.read_frame(sock)
            assert data is not None
            response = wire.decode(0, wire.PRODUCE_VERSION, data, correlation_id)
            (partition,) = response.responses[0].partition_responses
            offsets.append(int(partition.base_offset))
    assert offsets == list(range(20))
    assert broker.log("t", 0).log_end_offset == 20
