"""What a producer's on_delivery(err, msg) callback receives (docs/api.md "Producer", "Consumer":
Message accessors).

DeliveryReport has the accessor names of confluent-kafka-python's Message (topic(),
partition(), offset(), key(), value(), headers(), timestamp() -> (type, ms), leader_epoch(),
latency(), error()) and its setters (set_topic(), set_key(), set_value(), set_headers(),
set_error()), so that it can be unified with the consumer's Message later. Any thread may
read it; the setters are for the thread the callback runs on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from eoslog.errors import KafkaError, KafkaException, UnknownTopicOrPartitionError
from eoslog.record import accumulator

if TYPE_CHECKING:
    from eoslog.client.record_accumulator import ProducerBatch

# confluent_kafka.TIMESTAMP_* (librdkafka's rd_kafka_timestamp_type_t).
TIMESTAMP_NOT_AVAILABLE: Final = 0
TIMESTAMP_CREATE_TIME: Final = 1
TIMESTAMP_LOG_APPEND_TIME: Final = 2
# librdkafka's RD_KAFKA_OFFSET_INVALID: the offset of a message that was not delivered.
OFFSET_INVALID: Final = -1001

Headers = list[tuple[str, bytes | None]]
# Each record's report in a batch's reports list: callback, key, value, headers, timestamp.
_REPORT_STRIDE: Final = accumulator.REPORT_STRIDE


class DeliveryReport:
    """One produced message and where it landed (or why it did not)."""

    __slots__ = (
        "_error",
        "_headers",
        "_key",
        "_latency",
        "_offset",
        "_partition",
        "_timestamp",
        "_topic",
        "_value",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        timestamp: tuple[int, int],
        error: KafkaError | None,
        latency: float | None = None,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._key = key
        self._value = value
        self._headers = headers
        self._timestamp = timestamp
        self._error = error
        self._latency = latency

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int | None:
        """The offset the message was written at; None if it failed, as confluent's
        offset() answers for librdkafka's OFFSET_INVALID."""
        return None if self._offset < 0 else self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> Headers | None:
        """list of (str, bytes) as produced, or None."""
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        """(TIMESTAMP_CREATE_TIME, ms) as produced, or (TIMESTAMP_LOG_APPEND_TIME, ms) on a
        LogAppendTime topic."""
        return self._timestamp

    def error(self) -> KafkaError | None:
        return self._error

    def leader_epoch(self) -> int | None:
        """None, as librdkafka reports for a delivered message."""
        return None

    def latency(self) -> float | None:
        """Seconds from produce() to the making of this report in poll()/flush(), as
        confluent's (librdkafka's rd_kafka_message_latency, read when its Message is made)."""
        return self._latency

    # confluent's setters: any object, kept as given.

    def set_topic(self, topic: str, /) -> None:
        self._topic = topic

    def set_key(self, key: object, /) -> None:
        self._key = key  # type: ignore[assignment]

    def set_value(self, value: object, /) -> None:
        self._value = value  # type: ignore[assignment]

    def set_headers(self, headers: Headers | None, /) -> None:
        self._headers = headers

    def set_error(self, error: KafkaError | None, /) -> None:
        self._error = error

    def __len__(self) -> int:
        # confluent's len(msg) is the value's length (whatever set_value() set).
        return 0 if self._value is None else len(self._value)

    def __repr__(self) -> str:
        return (
            f"DeliveryReport(topic={self._topic!r}, partition={self._partition}, "
            f"offset={self._offset}, error={self._error!r})"
        )


def deliver(
    topic: str, partition: int, batch: ProducerBatch, outcome: Any, *, only_errors: bool = False
) -> None:
    """Run the batch's per-record callbacks with their DeliveryReports (the sender's
    serve(); `outcome` is the batch's AppendInfo or its KafkaException). `only_errors`
    (delivery.report.only.error): callbacks run for a failed batch only."""
    assert batch.reports is not None
    failed = isinstance(outcome, KafkaException)
    if only_errors and not failed:
        return
    now_s = time.monotonic()
    error = outcome.error if failed else None
    base_offset = OFFSET_INVALID if failed else outcome.base_offset
    append_time = -1 if failed else outcome.log_append_time_ms
    reports = batch.reports
    for index in range(len(reports) // _REPORT_STRIDE):
        callback, key, value, headers, timestamp, enqueued_s = reports[
            index * _REPORT_STRIDE : (index + 1) * _REPORT_STRIDE
        ]
        if callback is None:
            continue
        stamp = (
            (TIMESTAMP_LOG_APPEND_TIME, append_time)
            if append_time >= 0
            else (TIMESTAMP_CREATE_TIME, timestamp)
        )
        offset = OFFSET_INVALID if failed else base_offset + index
        report = DeliveryReport(
            topic, partition, offset, key, value, headers, stamp, error, now_s - enqueued_s
        )
        callback(error, report)


def made_durable(
    log: Callable[[str, int], Any],
    reports: list[Any],
    set_fatal: Callable[[KafkaException], KafkaException],
) -> list[Any]:
    """The reports to serve, each successful one now covered by an fsync (no lock held).

    A delivery callback without error is an acknowledgement (docs/reliability.md), so under
    durability "commit" it may run only after the fsync that covers its record. Group
    commit keeps that cheap: one flush_through per partition covers every report of this
    round (and every append made so far), and a partition already durable that far costs
    nothing. The fsync runs here, on the thread that serves the reports, rather than in
    the sender: appends (produce() with linger.ms 0, a full batch) never wait for a
    disk, and a poll() loop pays one fsync per round however many batches it serves
    (the linger thread syncs what it appends ahead of poll(), Sender._sync_sent). Measured
    roughly on a produce()+poll(0) loop of 100-byte records with a callback on a shared
    2-core box: linger.ms 5 went from ~560k to ~150-240k records/s (one fsync per full
    16 KiB batch), linger.ms 0 from ~56k to ~3-4k (one fsync per record, the price of
    acknowledging each record durably). Waiting for a later fsync instead would need a
    background syncer woken per batch; flush() and commit_transaction() pay one round.
    Reports without a callback need no fsync here (nothing is acknowledged to anyone;
    flush() fsyncs them). Under "always" every append was durable when it returned.
    A failed fsync turns the partition's successes into that error (the producer is now
    fatal, as after any storage error), so no callback reports a record that may be lost.
    """
    through: dict[tuple[str, int], int] = {}
    for topic, state, batch, outcome in reports:
        if batch.reports is not None and not isinstance(outcome, KafkaException):
            key = (topic, state.partition)
            through[key] = max(through.get(key, 0), outcome.last_offset + 1)
    failed: dict[tuple[str, int], KafkaException] = {}
    for (topic, partition), offset in sorted(through.items()):
        try:
            log(topic, partition).flush_through(offset)
        except UnknownTopicOrPartitionError:
            continue  # deleted since: nothing of it can be read back, lost or not
        except KafkaException as error:
            failed[(topic, partition)] = set_fatal(error)
    if not failed:
        return reports
    return [
        (topic, state, batch, failed.get((topic, state.partition), outcome))
        if not isinstance(outcome, KafkaException)
        else (topic, state, batch, outcome)
        for topic, state, batch, outcome in reports
    ]
