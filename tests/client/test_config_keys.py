"""Every librdkafka configuration key is accepted as confluent-kafka accepts it (docs/api.md
"librdkafka keys"): applied where it means something here, checked and ignored where it does
not; an unknown key is refused, as librdkafka refuses it; a value is read from its text exactly
as librdkafka reads it ("100", "0x64" and 100.5 are all 100).

confluent-kafka is the oracle: each test gives the same config to eoslog's config readers
(producer_config.parse, ConsumerConfig) and to confluent_kafka.Producer/Consumer, and compares
their verdicts. librdkafka refuses a bad key or value when it is set; a refusal at creation
("Failed to create ...") comes from its checks across keys and counts as accepted here. It is
in the `test` extra; the module is skipped only where it is not installed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import eoslog
from eoslog.client import consumer_config, producer_config
from eoslog.client import librdkafka_keys as keys
from eoslog.client.config_reader import CONSUMER, PRODUCER, PYTHON_KEYS
from eoslog.client.consumer_config import ConsumerConfig
from eoslog.errors import InvalidConfigError
from eoslog.record.compression import CODEC_NAMES
from tests.support import logtools

confluent_kafka = pytest.importorskip("confluent_kafka")

ROLES = (PRODUCER, CONSUMER)
ORACLE_LOG = logging.getLogger("confluent_kafka.oracle")
ORACLE_LOG.addHandler(logging.NullHandler())
ORACLE_LOG.propagate = False
# librdkafka refuses this one on Linux ("only valid on Windows"); eoslog accepts it everywhere.
WINDOWS_ONLY = frozenset({"ssl.ca.certificate.stores"})
# Keys whose edge values would change the test process through the oracle (mock clusters of up
# to 10,000 brokers, a signal handler) or load a plugin (confluent-kafka even loads "None" for
# None). Their valid value is still checked with both.
NOT_AT_THE_EDGES = frozenset(
    {"test.mock.num.brokers", "internal.termination.signal", "plugin.library.paths"}
)
# A value librdkafka takes for each key where the first of its range or words will not do.
VALID = {
    "max.in.flight.requests.per.connection": "5",  # idempotence (eoslog's default) needs <= 5
    "plugin.library.paths": "",  # librdkafka would dlopen() a named plugin
    "sasl.mechanisms": "PLAIN",
    "broker.version.fallback": "0.10.0",
    "topic.blacklist": "^skip-.*",
    "group.id": "g",
    "delivery.report.only.error": True,  # a producer takes a bool only (confluent-kafka)
}


def all_properties() -> list[keys.Property]:
    return [*keys.GLOBAL_PROPERTIES.values(), *keys.TOPIC_PROPERTIES.values()]


def settable(prop: keys.Property) -> bool:
    return prop.kind not in (keys.C_API, keys.INTERNAL) or prop.name in PYTHON_KEYS


def valid_value(prop: keys.Property) -> object:
    if prop.name in PYTHON_KEYS:
        return lambda *args: None
    if prop.name in VALID:
        return VALID[prop.name]
    if prop.kind in (keys.INT, keys.FLOAT):
        return prop.default if prop.default.lstrip("-").isdigit() else str(prop.limits[0])
    if prop.kind == keys.BOOL:
        return "true"
    if prop.limits:
        return str(prop.limits[0])
    return prop.default or "x"


def every_name() -> list[tuple[str, keys.Property]]:
    """Each name a config may use, with the property it sets: the names, the aliases and the
    topic properties under their "topic." prefix."""
    named = [(prop.name, prop) for prop in all_properties()]
    for aliases in (keys.GLOBAL_ALIASES, keys.TOPIC_ALIASES):
        named += [(alias, keys.find(alias)) for alias in aliases]  # type: ignore[misc]
    named += [(f"topic.{prop.name}", prop) for prop in keys.TOPIC_PROPERTIES.values()]
    return named


def oracle_refusal(role: str, config: dict[str, object]) -> str | None:
    """What confluent-kafka says to a client of `role` with `config`: None when librdkafka
    set every key (the client was created, or only a check across keys refused it)."""
    # A logger keeps librdkafka's warnings (a deprecated key, another role's key) off stderr.
    base: dict[str, object] = {"bootstrap.servers": "", "logger": ORACLE_LOG}
    if role == CONSUMER:
        base["group.id"] = "oracle"
    kind = confluent_kafka.Producer if role == PRODUCER else confluent_kafka.Consumer
    try:
        client = kind({**base, **config})
    except (confluent_kafka.KafkaException, TypeError, ValueError) as refused:
        text = str(refused)
        return None if "Failed to create" in text else text
    if role == CONSUMER:
        client.close()
    return None


def eoslog_refusal(role: str, config: dict[str, object]) -> str | None:
    """What eoslog says to the same config: None when accepted, else the error's text."""
    try:
        if role == PRODUCER:
            producer_config.parse({"bootstrap.servers": "", **config})
        else:
            ConsumerConfig({"bootstrap.servers": "", "group.id": "g", **config})
    except InvalidConfigError as refused:
        return str(refused)
    return None


# --- the names -------------------------------------------------------------------------------


def test_every_name_in_the_table_is_a_name_librdkafka_knows() -> None:
    unknown = [
        (role, name)
        for name, prop in every_name()
        for role in ROLES
        if "No such configuration property"
        in (oracle_refusal(role, {name: valid_value(prop)}) or "")
    ]
    assert unknown == []


def test_every_settable_key_is_accepted_by_eoslog_and_by_confluent_kafka() -> None:
    verdicts = {}
    for name, prop in every_name():
        if not settable(prop):
            continue
        for role in ROLES:
            config = {name: valid_value(prop)}
            eoslog_says = eoslog_refusal(role, config)
            oracle_says = None if name in WINDOWS_ONLY else oracle_refusal(role, config)
            if eoslog_says or oracle_says:
                verdicts[(role, name)] = (eoslog_says, oracle_says)
    assert verdicts == {}


def test_keys_librdkafka_sets_only_through_its_c_functions_are_refused_by_both() -> None:
    c_only = [p.name for p in all_properties() if not settable(p)] + list(keys.JAVA_ONLY)
    assert "dr_msg_cb" in c_only and "interceptors" in c_only and "error_cb" not in c_only
    for name in c_only:
        for role in ROLES:
            assert oracle_refusal(role, {name: "x"}) is not None, name
            assert name in (eoslog_refusal(role, {name: "x"}) or "") or name in keys.JAVA_ONLY


@pytest.mark.parametrize(
    "name", ["no.such.key", "bootstrap.server", "Bootstrap.Servers", "linger_ms", "topic.nope"]
)
@pytest.mark.parametrize("role", ROLES)
def test_a_made_up_key_is_refused_by_both(role: str, name: str) -> None:
    assert "No such configuration property" in (oracle_refusal(role, {name: "1"}) or "")
    assert eoslog_refusal(role, {name: "1"}) == f'No such configuration property: "{name}"'


@pytest.mark.parametrize(("role", "name"), [(PRODUCER, "on_commit"), (CONSUMER, "on_delivery")])
def test_a_python_callback_of_the_other_role_is_unknown_as_in_confluent_kafka(
    role: str, name: str
) -> None:
    assert "No such configuration property" in (oracle_refusal(role, {name: print}) or "")
    assert "No such configuration property" in (eoslog_refusal(role, {name: print}) or "")


def test_a_key_of_the_other_role_is_checked_and_then_has_no_effect() -> None:
    consumer_keys = {"group.id": "g", "auto.offset.reset": "earliest", "enable.auto.commit": "0"}
    assert producer_config.parse(consumer_keys) == producer_config.parse({})
    producer_keys = {"transactional.id": "t", "linger.ms": 1, "acks": "1"}
    assert attributes(ConsumerConfig(producer_keys)) == attributes(ConsumerConfig({}))
    for role, config in ((PRODUCER, {"session.timeout.ms": "soon"}), (CONSUMER, {"acks": 7e9})):
        assert oracle_refusal(role, config) is not None
        assert next(iter(config)) in (eoslog_refusal(role, config) or "")


def attributes(config: ConsumerConfig) -> dict[str, object]:
    return {name: getattr(config, name) for name in ConsumerConfig.__slots__}


# --- the values ------------------------------------------------------------------------------

# (key, value given, what the setting holds): text read as librdkafka reads it.
PRODUCER_VALUES: list[tuple[str, object, str, object]] = [
    ("batch.size", "4096", "batch_bytes_max", 4096),
    ("batch.size", "0x1000", "batch_bytes_max", 4096),  # strtol in base 0: hexadecimal
    ("batch.size", "010000", "batch_bytes_max", 4096),  # and octal
    ("batch.size", " 4096 bytes", "batch_bytes_max", 4096),  # the number's prefix is read
    ("batch.size", 4096.9, "batch_bytes_max", 4096),  # str(4096.9), then strtol
    ("linger.ms", "2.5", "linger_ms", 2.5),
    ("queue.buffering.max.ms", "1e2", "linger_ms", 100.0),
    ("enable.idempotence", "T", "idempotent", True),
    ("enable.idempotence", "1", "idempotent", True),
    ("enable.idempotence", "FALSE", "idempotent", False),
    ("enable.idempotence", "f", "idempotent", False),
    ("acks", "ALL", "acks", -1),
    ("request.required.acks", "-1", "acks", -1),
    ("compression.type", "LZ4", "compression", CODEC_NAMES["lz4"]),
    ("compression.codec", "  zstd", "compression", CODEC_NAMES["zstd"]),
    ("retries", "7", "retries", 7),
    ("message.timeout.ms", "1000", "delivery_timeout_ms", 1000),
    ("topic.message.timeout.ms", "2000", "delivery_timeout_ms", 2000),
    ("transaction.timeout.ms", "90000", "transaction_timeout_ms", 90_000),
    ("client.id", "", "client_id", "rdkafka"),  # "" is no value: the default
    ("transactional.id", "  copier", "transactional_id", "copier"),  # trimmed on the left
]
CONSUMER_VALUES: list[tuple[str, object, str, object]] = [
    ("fetch.max.bytes", "1048576", "fetch_bytes_max", 1 << 20),
    ("max.partition.fetch.bytes", "0x10000", "partition_fetch_bytes_max", 1 << 16),
    ("enable.auto.commit", "false", "enable_auto_commit", False),
    ("check.crcs", "0", "check_crcs", False),
    ("auto.offset.reset", "EARLIEST", "auto_offset_reset", "earliest"),
    ("topic.auto.offset.reset", "smallest", "auto_offset_reset", "earliest"),
    ("isolation.level", "Read_Uncommitted", "isolation_level", "read_uncommitted"),
    ("max.poll.interval.ms", "60000ms", "max_poll_interval_ms", 60_000),
    ("auto.commit.interval.ms", 0, "auto_commit_interval_ms", 0),
    ("allow.auto.create.topics", "t", "allow_auto_create_topics", True),
]


@pytest.mark.parametrize(("key", "value", "attribute", "expected"), PRODUCER_VALUES)
def test_a_producer_value_is_read_from_its_text_as_librdkafka_reads_it(
    key: str, value: object, attribute: str, expected: object
) -> None:
    config = {key: value, **({"acks": "all"} if key == "enable.idempotence" else {})}
    assert oracle_refusal(PRODUCER, config) is None
    assert getattr(producer_config.parse(config), attribute) == expected


@pytest.mark.parametrize(("key", "value", "attribute", "expected"), CONSUMER_VALUES)
def test_a_consumer_value_is_read_from_its_text_as_librdkafka_reads_it(
    key: str, value: object, attribute: str, expected: object
) -> None:
    assert oracle_refusal(CONSUMER, {key: value}) is None
    assert getattr(ConsumerConfig({key: value}), attribute) == expected


def edge_values(prop: keys.Property) -> list[object]:
    """Values at and past the edges of what librdkafka takes for `prop`."""
    common: list[object] = ["", None]
    if prop.kind in (keys.INT, keys.FLOAT):
        low, high = prop.limits
        out = [*common, "abc", True, f"{low}", f"{high}", f"{low - 1}", f"{high + 1}"]
        if prop.kind == keys.INT:
            return [*out, "99999999999", "-0x1", "0x", "1.9", " +7"]
        return [*out, "inf", "nan", "0x10", "1e3x"]
    if prop.kind == keys.BOOL:
        return [*common, "yes", "2", " true", "TRUE", "F", 1, 0.0]
    if prop.kind in (keys.ENUM, keys.FLAGS):
        first = str(prop.limits[0])
        out = [*common, "nope", " ", first.upper(), f"{first} ", f" {first}"]
        return [*out, f"+{first},-{first}", f"{first},nope", f"{first} ,{first}", ","]
    if prop.kind == keys.WORD:
        return [*common, "A,B", "A B", " PLAIN"]
    if prop.kind == keys.PATTERNS:
        return [*common, "(", "^ok$,^also$"]
    if prop.limits:
        return [*common, "nope", str(prop.limits[0]).upper(), f" {prop.limits[0]}"]
    return [*common, "  "]


def test_values_are_accepted_and_refused_as_librdkafka_does() -> None:
    applied = producer_config.APPLIED | consumer_config.APPLIED
    differences = []
    for prop in all_properties():
        skipped = PYTHON_KEYS | WINDOWS_ONLY | NOT_AT_THE_EDGES
        if not settable(prop) or prop.name in skipped:
            continue
        for value in edge_values(prop):
            for role in ROLES:
                if role == CONSUMER and prop.name == "group.id":
                    continue  # a consumer without a group aborts librdkafka's process
                config = {prop.name: value}
                oracle_says, eoslog_says = (
                    oracle_refusal(role, config),
                    eoslog_refusal(role, config),
                )
                if eoslog_says is not None and prop.name not in eoslog_says:
                    differences.append((role, prop.name, value, "unnamed", eoslog_says))
                # eoslog may refuse more of what it applies (its own limits), never less.
                stricter_allowed = prop.name in applied and oracle_says is None
                if (oracle_says is None) != (eoslog_says is None) and not stricter_allowed:
                    differences.append((role, prop.name, value, oracle_says, eoslog_says))
    assert differences == []


def test_librdkafka_reads_an_int_as_a_c_long_cast_to_an_int() -> None:
    # strtol saturates at 2**63 - 1; the cast keeps the low 32 bits: 4294967396 is 100.
    assert producer_config.parse({"batch.size": 4_294_967_396}).batch_bytes_max == 100
    assert oracle_refusal(PRODUCER, {"batch.size": 4_294_967_396}) is None
    for past in ("9" * 30, str(1 << 31)):  # -1 and -2**31 after the cast: out of range
        assert oracle_refusal(PRODUCER, {"batch.size": past}) is not None
        assert "batch.size" in (eoslog_refusal(PRODUCER, {"batch.size": past}) or "")


@pytest.mark.parametrize(
    ("role", "config"),
    [
        (PRODUCER, {"linger.ms": "nan"}),  # librdkafka compares NaN with its range: no refusal
        (PRODUCER, {"batch.size": 32}),  # no room for the 61-byte batch header
        (PRODUCER, {"acks": 2}),  # one log is every replica there is
        (PRODUCER, {"queue.buffering.max.messages": 0}),
        (CONSUMER, {"fetch.max.bytes": 0}),
        (CONSUMER, {"group.id": ""}),
        (CONSUMER, {"partition.assignment.strategy": "cooperative-sticky"}),
    ],
)
def test_eoslog_refuses_values_of_the_keys_it_applies_that_it_cannot_honour(
    role: str, config: dict[str, object]
) -> None:
    assert next(iter(config)) in (eoslog_refusal(role, config) or "")


# --- the keys confluent-kafka reads itself ---------------------------------------------------


@pytest.mark.parametrize("name", ["error_cb", "throttle_cb", "stats_cb", "oauth_cb"])
@pytest.mark.parametrize("role", ROLES)
def test_callbacks_must_be_callable_in_both(role: str, name: str) -> None:
    assert eoslog_refusal(role, {name: print}) is None
    for value in (None, "print"):
        assert oracle_refusal(role, {name: value}) is not None
        assert name in (eoslog_refusal(role, {name: value}) or "")


def test_the_producers_python_keys_are_read_as_confluent_kafka_reads_them() -> None:
    for refused in ({"on_delivery": None}, {"delivery.report.only.error": "true"}):
        assert oracle_refusal(PRODUCER, refused) is not None
        assert next(iter(refused)) in (eoslog_refusal(PRODUCER, refused) or "")
    assert eoslog_refusal(PRODUCER, {"delivery.report.only.error": True}) is None
    # On a consumer it is librdkafka's own boolean key, read from text.
    assert oracle_refusal(CONSUMER, {"delivery.report.only.error": "true"}) is None
    assert eoslog_refusal(CONSUMER, {"delivery.report.only.error": "true"}) is None


def test_a_logger_is_an_object_with_a_log_method() -> None:
    assert eoslog_refusal(PRODUCER, {"logger": logging.getLogger("eoslog")}) is None
    assert "logger" in (eoslog_refusal(CONSUMER, {"logger": 3}) or "")


def test_default_topic_config_joins_the_config_and_wins_over_it() -> None:
    config = {"message.timeout.ms": 5000, "default.topic.config": {"message.timeout.ms": "1000"}}
    assert oracle_refusal(PRODUCER, config) is None
    assert producer_config.parse(config).delivery_timeout_ms == 1000
    assert "default.topic.config" in (eoslog_refusal(PRODUCER, {"default.topic.config": 1}) or "")


def test_the_last_of_two_names_for_one_property_wins() -> None:
    assert producer_config.parse({"linger.ms": 1, "queue.buffering.max.ms": 2}).linger_ms == 2
    assert producer_config.parse({"queue.buffering.max.ms": 2, "linger.ms": 1}).linger_ms == 1


# --- on_commit and auto.commit.interval.ms -----------------------------------------------------


@pytest.fixture
def broker(tmp_path: os.PathLike[str], clock: logtools.Clock) -> Iterator[eoslog.Broker]:
    opened = eoslog.open(
        os.path.join(tmp_path, "data"), durability="none", background=False, clock_ms=clock
    )
    opened.create_topic("t", 1)
    producer = opened.producer({"linger.ms": 0})
    for index in range(10):
        producer.produce("t", value=b"%d" % index)
    assert producer.flush() == 0
    yield opened
    opened.close()


def subscribed(broker: eoslog.Broker, **config: object) -> tuple[eoslog.Consumer, list[Any]]:
    """A consumer of group g subscribed to t, its first 3 records read, and what its on_commit
    heard: (err, [(topic, partition, offset)])."""
    heard: list[Any] = []

    def on_commit(err: object, partitions: list[eoslog.TopicPartition]) -> None:
        heard.append((err, [(tp.topic, tp.partition, tp.offset) for tp in partitions]))

    settings = {"group.id": "g", "auto.offset.reset": "earliest", "on_commit": on_commit}
    consumer = broker.consumer({**settings, **config})
    consumer.subscribe(["t"])
    assert len(consumer.consume(3, timeout=1)) == 3
    return consumer, heard


def test_on_commit_hears_of_asynchronous_commits_and_not_of_synchronous_ones(
    broker: eoslog.Broker,
) -> None:
    # As confluent-kafka (checked against its mock cluster): a synchronous commit returns
    # its result and calls nothing; an asynchronous one is reported to on_commit.
    consumer, heard = subscribed(broker, **{"enable.auto.commit": False})
    consumer.commit(asynchronous=False)
    assert heard == []
    consumer.commit(offsets=[eoslog.TopicPartition("t", 0, 2)], asynchronous=True)
    assert heard == [(None, [("t", 0, 2)])]
    consumer.close()
    assert len(heard) == 1  # no auto-commit at close


def test_on_commit_hears_of_each_auto_commit_that_commits_something(
    broker: eoslog.Broker, clock: logtools.Clock
) -> None:
    # An auto-commit runs at the start of a poll, with the positions of the records read so far.
    consumer, heard = subscribed(broker, **{"auto.commit.interval.ms": "1000"})
    clock.advance(1_000)
    assert len(consumer.consume(1, timeout=0)) == 1
    assert heard == [(None, [("t", 0, 3)])]
    assert len(consumer.consume(10, timeout=0)) == 6  # not due yet: no commit
    assert len(heard) == 1
    clock.advance(1_000)
    assert consumer.poll(0) is None
    assert heard[-1] == (None, [("t", 0, 10)])
    clock.advance(1_000)
    consumer.poll(0)  # nothing read since: nothing to commit, nothing reported
    consumer.close()
    assert len(heard) == 2


def test_an_auto_commit_interval_of_0_turns_the_periodic_commit_off(
    broker: eoslog.Broker, clock: logtools.Clock
) -> None:
    consumer, heard = subscribed(broker, **{"auto.commit.interval.ms": 0})
    clock.advance(10**9)
    consumer.consume(1, timeout=0)
    assert heard == []
    assert consumer.committed([eoslog.TopicPartition("t", 0)])[0].offset < 0
    consumer.close()  # at close the positions are committed all the same, as librdkafka does
    assert heard == [(None, [("t", 0, 4)])]


# --- the docs --------------------------------------------------------------------------------


def test_docs_api_lists_every_key_eoslog_applies() -> None:
    api = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    section = api.split("## librdkafka keys", 1)[1].split("\n## ", 1)[0]
    applied = producer_config.APPLIED | consumer_config.APPLIED
    assert sorted(name for name in applied if f"`{name}`" not in section) == []
