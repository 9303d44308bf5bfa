"""The compaction settings (docs/api.md "Opening a log directory", docs/design.md
"Compaction"): cleanup.policy and the cleaner's topic and broker keys are parsed and refused
as Kafka's LogConfig does; a compacted topic refuses a record without a key as Kafka's
LogValidator does (INVALID_RECORD, the whole batch, nothing written); retention by time and
size applies only with "delete" in the policy; a compacted topic's segment rolls by
max.compaction.lag.ms when that is sooner than segment.ms."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import pytest

import eoslog
from eoslog.errors import InvalidConfigError, InvalidRecordError, KafkaError
from eoslog.log.config import LogConfig
from eoslog.log.partition import PartitionLog
from eoslog.record import codec
from tests.support import logtools
from tests.support.logtools import OpenBroker

TS = logtools.TS
HOUR_MS = 3_600_000


def new_topic(broker: eoslog.Broker, config: Mapping[str, object]) -> PartitionLog:
    broker.create_topic("t", 1, config=dict(config))
    return broker.log("t", 0)


def keyed(index: int, timestamp: int = TS, key: bytes | None = b"k") -> bytes:
    return logtools.batch(logtools.values(index, 1), timestamps=timestamp, key=key)


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("compact", "compact"),
        ("delete", "delete"),
        ("compact,delete", "compact,delete"),
        ("delete, compact", "delete,compact"),
        (["compact", "delete"], "compact,delete"),
    ],
)
def test_cleanup_policy_takes_compact_delete_or_both(given: object, stored: str) -> None:
    config = LogConfig().with_properties({"cleanup.policy": given})
    assert config.to_properties()["cleanup.policy"] == stored
    assert (config.compact, config.delete) == ("compact" in stored, "delete" in stored)


@pytest.mark.parametrize("bad", ["", "compacted", "compact,compact", "delete,", 1, None])
def test_cleanup_policy_refuses_other_words_and_repeats(bad: object) -> None:
    with pytest.raises(InvalidConfigError, match=r"cleanup\.policy"):
        LogConfig().with_properties({"cleanup.policy": bad})


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("min.cleanable.dirty.ratio", 1.5),
        ("min.cleanable.dirty.ratio", -0.1),
        ("min.cleanable.dirty.ratio", "half"),
        ("min.cleanable.dirty.ratio", float("nan")),
        ("min.compaction.lag.ms", -1),
        ("max.compaction.lag.ms", 0),
        ("delete.retention.ms", -1),
        ("delete.retention.ms", 1.5),
    ],
)
def test_compaction_settings_out_of_kafkas_ranges_are_refused(key: str, bad: object) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape(key)):
        LogConfig().with_properties({key: bad})


def test_compaction_settings_have_kafkas_defaults_and_read_back() -> None:
    properties = LogConfig().to_properties()
    assert properties["cleanup.policy"] == "delete"
    assert properties["min.cleanable.dirty.ratio"] == 0.5
    assert properties["min.compaction.lag.ms"] == 0
    assert properties["max.compaction.lag.ms"] == (1 << 63) - 1
    assert properties["delete.retention.ms"] == 86_400_000
    changed = LogConfig().with_properties({"min.cleanable.dirty.ratio": "0.25"})
    assert changed.min_cleanable_dirty_ratio == 0.25


def test_broker_keys_set_the_compaction_defaults_of_every_topic(tmp_path: os.PathLike[str]) -> None:
    config = {
        "log.cleanup.policy": "compact",
        "log.cleaner.min.cleanable.ratio": 0.1,
        "log.cleaner.delete.retention.ms": 1000,
        "log.cleaner.io.max.bytes.per.second": 1048576.0,
    }
    with eoslog.open(os.path.join(tmp_path, "d"), config=config, background=False) as broker:
        broker.create_topic("t", 1)
        log = broker.log("t", 0)
        assert log.config.compact and not log.config.delete
        assert log.config.min_cleanable_dirty_ratio == 0.1
        assert log.config.delete_retention_ms == 1000
        assert broker.settings["log.cleaner.io.max.bytes.per.second"] == 1048576


@pytest.mark.parametrize("bad", [0, -5, "fast", True])
def test_the_cleaner_throughput_limit_must_be_a_positive_number(
    tmp_path: os.PathLike[str], bad: object
) -> None:
    path = os.path.join(tmp_path, "d")
    with pytest.raises(InvalidConfigError, match=r"log\.cleaner\.io\.max\.bytes\.per\.second"):
        eoslog.open(path, config={"log.cleaner.io.max.bytes.per.second": bad})
    assert not os.path.exists(path)


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
def test_a_compacted_topic_refuses_a_batch_with_a_record_without_a_key(
    open_broker: OpenBroker, policy: str
) -> None:
    log = new_topic(open_broker(), {"cleanup.policy": policy})
    log.append_batch(keyed(0))
    builder = codec.BatchBuilder()
    builder.append(TS, b"k", b"keyed")
    builder.append(TS, None, b"no key")
    before = logtools.contents(log.directory)
    with pytest.raises(InvalidRecordError, match="without key in topic partition t-0") as refused:
        log.append_batch(builder.build())
    assert refused.value.code == KafkaError.INVALID_RECORD
    assert log.log_end_offset == 1
    assert logtools.contents(log.directory) == before


def test_a_delete_topic_takes_records_without_a_key(open_broker: OpenBroker) -> None:
    log = new_topic(open_broker(), {"cleanup.policy": "delete"})
    assert log.append_batch(keyed(0, key=None)).base_offset == 0


def test_a_producer_to_a_compacted_topic_gets_invalid_record_for_a_null_key(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    new_topic(broker, {"cleanup.policy": "compact"})
    producer = broker.producer({"linger.ms": 0})
    got: list[object] = []
    producer.produce("t", b"v", on_delivery=lambda error, message: got.append(error))
    producer.produce("t", b"v", key=b"k", on_delivery=lambda error, message: got.append(error))
    assert producer.flush() == 0
    refused, taken = got
    assert refused is not None and refused.code() == KafkaError.INVALID_RECORD  # type: ignore[attr-defined]
    assert taken is None
    assert broker.log("t", 0).log_end_offset == 1


def _expire_everything(log: PartitionLog, broker: eoslog.Broker, clock: logtools.Clock) -> None:
    for i in range(3):
        log.append_batch(keyed(i, TS, key=b"k%d" % i))  # distinct keys: nothing to compact
    log.roll()
    clock.now_ms = TS + 10 * HOUR_MS
    broker.run_maintenance()


def test_retention_deletes_nothing_from_a_compact_only_topic(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    log = new_topic(
        broker, {"cleanup.policy": "compact", "retention.ms": HOUR_MS, "retention.bytes": 0}
    )
    _expire_everything(log, broker, clock)
    assert log.log_start_offset == 0
    assert [r.offset for r in logtools.read_all(log)] == [0, 1, 2]


def test_retention_applies_to_a_compact_and_delete_topic(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    log = new_topic(broker, {"cleanup.policy": "compact,delete", "retention.ms": HOUR_MS})
    _expire_everything(log, broker, clock)
    assert log.log_start_offset == 3


def test_a_compacted_topic_rolls_by_max_compaction_lag_when_sooner_than_segment_ms(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    config = {"segment.ms": 10_000, "max.compaction.lag.ms": 1000}
    broker.create_topic("compacted", 1, config={**config, "cleanup.policy": "compact"})
    broker.create_topic("deleted", 1, config=config)
    for name in ("compacted", "deleted"):
        log = broker.log(name, 0)
        log.append_batch(keyed(0, TS))
        log.append_batch(keyed(1, TS + 1001))
    assert [s.base_offset for s in broker.log("compacted", 0).segments] == [0, 1]
    assert [s.base_offset for s in broker.log("deleted", 0).segments] == [0]


def test_compaction_settings_of_a_topic_survive_a_reopen(open_broker: OpenBroker) -> None:
    broker = open_broker()
    settings = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.25}
    broker.create_topic("t", 1, config=settings)
    broker.close()
    reopened = open_broker()
    config = reopened.list_topics()["t"].config
    assert {key: config[key] for key in settings} == settings
    assert reopened.log("t", 0).config.compact
