"""TLS and SASL/PLAIN listeners of `eoslog serve` (docs/api.md "Wire protocol", "Security"),
driven by confluent-kafka and kafka-python: the right credentials produce and consume, a wrong
password or none gets no request served and changes nothing."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import kafka
import pytest
from confluent_kafka import KafkaError, Producer

from eoslog.broker import Broker
from eoslog.errors import InvalidConfigError
from eoslog.serve.security import security
from tests.serve import wire
from tests.serve.clients import DEADLINE_S, confluent_consumer, read_assigned
from tests.serve.tls import Certificates, make_certificates

USERS = {"alice": "alice-secret", "bob": "b0b"}


@pytest.fixture
def certificates(tmp_path: Path) -> Certificates:
    return make_certificates(tmp_path)


def _produce(address: str, values: list[bytes], **config: Any) -> None:
    producer = Producer({"bootstrap.servers": address, **config})
    for value in values:
        producer.produce("t", value=value)
    assert producer.flush(DEADLINE_S) == 0


def _refused(address: str, **config: Any) -> Any:
    """The error a confluent producer reports when the server refuses it; nothing of its
    record is delivered."""
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": address, "error_cb": errors.append, **config})
    producer.produce("t", value=b"must not arrive")
    deadline = time.monotonic() + DEADLINE_S
    while not errors:  # error_cb runs inside poll()
        assert time.monotonic() < deadline, "the client never reported a refusal"
        producer.poll(0.1)
    producer.purge()
    producer.flush(0)
    return errors[0]


def test_an_ssl_listener_serves_a_client_that_trusts_its_ca(
    broker: Broker, certificates: Certificates
) -> None:
    config = {
        "ssl.certificate.location": certificates.certificate,
        "ssl.key.location": certificates.key,
    }
    server = broker.serve("SSL://127.0.0.1:0", config)
    tls = {"security.protocol": "SSL", "ssl.ca.location": certificates.ca}
    _produce(server.address, [b"a", b"b"], **tls)
    consumer = confluent_consumer(server.address, **tls)
    try:
        got = read_assigned(consumer, "t", 1, 2)
    finally:
        consumer.close()
    assert [value for *_, value in got] == [b"a", b"b"]


def test_sasl_plaintext_with_the_right_password_produces(broker: Broker) -> None:
    server = broker.serve("SASL_PLAINTEXT://127.0.0.1:0", {"sasl.plain.users": USERS})
    sasl = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "bob",
        "sasl.password": "b0b",
    }
    _produce(server.address, [b"x"], **sasl)
    assert broker.log("t", 0).log_end_offset == 1


def test_sasl_ssl_reads_its_users_from_a_file(
    broker: Broker, certificates: Certificates, tmp_path: Path
) -> None:
    users = tmp_path / "users"
    users.write_text("# user:password\nalice:alice-secret\n\nbob:b0b\n")
    config = {
        "ssl.certificate.location": certificates.certificate,
        "ssl.key.location": certificates.key,
        "sasl.plain.users.file": str(users),
    }
    server = broker.serve("SASL_SSL://127.0.0.1:0", config)
    _produce(
        server.address,
        [b"y"],
        **{
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": certificates.ca,
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        },
    )
    assert broker.log("t", 0).log_end_offset == 1


def test_a_wrong_password_is_refused_and_changes_nothing(broker: Broker) -> None:
    server = broker.serve("SASL_PLAINTEXT://127.0.0.1:0", {"sasl.plain.users": USERS})
    error = _refused(
        server.address,
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secreT",
        },
    )
    assert error.code() == KafkaError._AUTHENTICATION, error
    assert "t" not in broker.list_topics()


def test_a_client_without_credentials_gets_nothing_but_api_versions(broker: Broker) -> None:
    server = broker.serve("SASL_PLAINTEXT://127.0.0.1:0", {"sasl.plain.users": USERS})
    with wire.connect(server.address) as sock:
        versions = wire.call(
            sock, wire.request_type(18, 3)(client_software_name="t", client_software_version="1")
        )
        assert {key.api_key for key in versions.api_keys} >= {17, 36}
        sock.sendall(wire.frame(wire.produce_request("t", 0, wire.batch(b"v")), 2))
        assert wire.read_frame(sock) is None  # closed, unanswered
    assert "t" not in broker.list_topics()


def test_a_plaintext_client_of_a_sasl_listener_is_refused(broker: Broker) -> None:
    server = broker.serve("SASL_PLAINTEXT://127.0.0.1:0", {"sasl.plain.users": USERS})
    _refused(server.address)
    assert "t" not in broker.list_topics()


@pytest.mark.parametrize(
    ("token", "user"),
    [
        (b"\0alice\0alice-secret", "alice"),
        (b"alice\0alice\0alice-secret", "alice"),  # asking for its own identity
        (b"bob\0alice\0alice-secret", None),  # asking to act as another user
        (b"\0alice\0alice-secre", None),
        (b"\0alice\0alice-secrets", None),
        (b"\0carol\0alice-secret", None),
        (b"\0alice\0alice-secret\0", None),
        (b"alice-secret", None),
        (b"\0\xff\0x", None),
    ],
)
def test_a_plain_token_names_its_user_only_with_the_right_password(
    token: bytes, user: str | None
) -> None:
    assert security("SASL_PLAINTEXT", {"sasl.plain.users": USERS}).plain_user(token) == user


def _sasl_call(sock: Any, api_key: int, version: int, correlation_id: int, **fields: Any) -> Any:
    return wire.call(sock, wire.request_type(api_key, version)(**fields), correlation_id)


_HANDSHAKE = (17, 1, {"mechanism": "PLAIN"}, KafkaError.NO_ERROR)


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param(
            [(36, 1, {"auth_bytes": b"\0alice\0alice-secret"}, KafkaError.ILLEGAL_SASL_STATE)],
            id="authenticate-before-handshake",
        ),
        pytest.param(
            [(17, 1, {"mechanism": "SCRAM-SHA-256"}, KafkaError.UNSUPPORTED_SASL_MECHANISM)],
            id="unknown-mechanism",
        ),
        pytest.param(
            [
                _HANDSHAKE,
                (36, 2, {"auth_bytes": b"\0bob\0bob"}, KafkaError.SASL_AUTHENTICATION_FAILED),
            ],
            id="wrong-password",
        ),
        pytest.param(
            [_HANDSHAKE, (*_HANDSHAKE[:3], KafkaError.ILLEGAL_SASL_STATE)], id="two-handshakes"
        ),
    ],
)
def test_a_failed_sasl_step_is_answered_with_its_error_and_closes(
    broker: Broker, steps: list[tuple[int, int, dict[str, Any], int]]
) -> None:
    server = broker.serve("SASL_PLAINTEXT://127.0.0.1:0", {"sasl.plain.users": USERS})
    with wire.connect(server.address) as sock:
        for number, (api_key, version, fields, code) in enumerate(steps, 1):
            answer = _sasl_call(sock, api_key, version, number, **fields)
            assert answer.error_code == code
        if api_key == 17:
            assert answer.mechanisms == ("PLAIN",)
        assert wire.closed_by_server(sock)


def test_sasl_requests_on_a_plaintext_listener_answer_illegal_state(server: Any) -> None:
    with wire.connect(server.address) as sock:
        answer = _sasl_call(sock, 17, 1, 1, mechanism="PLAIN")
        assert answer.error_code == KafkaError.ILLEGAL_SASL_STATE
        assert wire.closed_by_server(sock)


@pytest.mark.parametrize(
    ("listener", "config", "message"),
    [
        ("SASL_PLAINTEXT://127.0.0.1:0", {}, "sasl.plain.users"),
        ("SASL_PLAINTEXT://127.0.0.1:0", {"sasl.plain.users": {}}, "sasl.plain.users"),
        ("SSL://127.0.0.1:0", {}, "ssl.certificate.location"),
        ("127.0.0.1:0", {"sasl.plain.users": USERS}, "PLAINTEXT"),
        ("127.0.0.1:0", {"ssl.key.location": "k"}, "PLAINTEXT"),
        ("127.0.0.1:0", {"sasl.jaas.config": "x"}, "unknown"),
        (
            "SASL_PLAINTEXT://127.0.0.1:0",
            {"sasl.plain.users": USERS, "sasl.enabled.mechanisms": "SCRAM-SHA-512"},
            "PLAIN",
        ),
        ("SASL_PLAINTEXT://127.0.0.1:0", {"sasl.plain.users.file": "/nonexistent"}, "read"),
    ],
)
def test_a_bad_security_config_is_refused_before_listening(
    broker: Broker, listener: str, config: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        broker.serve(listener, config)
    assert not broker._servers


def test_an_unknown_listener_protocol_is_a_value_error(broker: Broker) -> None:
    with pytest.raises(ValueError, match="SASL_SSL"):
        broker.serve("HTTPS://127.0.0.1:0")


def test_a_non_loopback_listener_without_tls_or_sasl_logs_a_warning(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="eoslog.serve")
    broker.serve("0.0.0.0:0").close()
    assert "neither TLS nor SASL" in caplog.text
    caplog.clear()
    broker.serve("SASL_PLAINTEXT://0.0.0.0:0", {"sasl.plain.users": USERS}).close()
    broker.serve("127.0.0.1:0").close()
    assert "neither TLS nor SASL" not in caplog.text


def test_kafka_python_authenticates_with_sasl_plain(broker: Broker) -> None:
    server = broker.serve("SASL_PLAINTEXT://127.0.0.1:0", {"sasl.plain.users": USERS})
    producer = kafka.KafkaProducer(
        bootstrap_servers=server.address,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
        enable_idempotence=False,
    )
    try:
        producer.send("kp", b"v").get(timeout=DEADLINE_S)
    finally:
        producer.close()
    assert broker.log("kp", 0).log_end_offset == 1
