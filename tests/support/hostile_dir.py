"""Family 14 (docs/reliability.md), part 1: the realistic log directory the hostile-file corpus
damages, its layout, and the attempt that reads a damaged copy.

The directory holds two user topics (`orders` with two partitions, `audit` with one) in
600-byte segments, written by idempotent producers (plain and lz4) and two transactional
producers (one lz4) whose transactions commit and abort in turn, so every partition has
control batches and `.txnindex` entries; a consumer group commits offsets plainly
(`g-plain`) and inside transactions (`g-tx`); rolls leave producer snapshots. `orders` ends
on data batches, `audit` on a COMMIT marker. The writer runs in a subprocess and either closes
the broker (a clean shutdown) or leaves with os._exit (an unclean stop: no clean-shutdown
marker, untrimmed indexes, a stale recovery point).

`attempt(root)` is what a user would do with a damaged copy: scan it offline (Spark's path),
open it, read every user partition from the beginning with a read_committed consumer, read
the committed offsets of both groups, append one record, and close. It records what it saw
and the first error, which the runner (tests/support/hostile_runner.py) classifies.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from dataclasses import asdict, dataclass
from typing import Any

USER_TOPICS = {"orders": 2, "audit": 1}
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
GROUPS = ("g-plain", "g-tx")
TS = 1_700_000_000_000
# Small segments for every topic, internal ones included, so that each has several.
BROKER_CONFIG: dict[str, object] = {
    "log.index.size.max.bytes": 4096,
    "offsets.topic.segment.bytes": 2048,
    "transaction.state.log.segment.bytes": 2048,
}
TOPIC_CONFIG: dict[str, object] = {
    "segment.bytes": 600,
    "index.interval.bytes": 1,
    "segment.index.bytes": 1024,
    "retention.ms": -1,
}
# A consumer that has read this many records more than the partition holds is looping.
READ_SLACK = 200
VALUE_BYTES_SHOWN = 256
APPENDED = b"appended after the attempt"


def user_partitions() -> list[tuple[str, int]]:
    return [(topic, p) for topic, count in USER_TOPICS.items() for p in range(count)]


def partition_key(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


# --- writing ------------------------------------------------------------------------------


class _Writer:
    """Writes the workload and keeps the ledger: every value with whether it committed, and
    the offsets each group committed last."""

    def __init__(self, broker: Any, earlier: _Writer | None = None) -> None:
        import eoslog

        self.eoslog = eoslog
        self.broker = broker
        # topic, partition, value, committed
        self.values: list[tuple[str, int, str, bool]] = earlier.values if earlier else []
        self.committed: dict[str, dict[str, int]] = (
            earlier.committed if earlier else {group: {} for group in GROUPS}
        )
        self.plain = broker.producer({"linger.ms": 10_000})
        self.lz4 = broker.producer({"linger.ms": 10_000, "compression.type": "lz4"})
        self.txn = broker.producer({"transactional.id": "tx-0", "linger.ms": 10_000})
        self.txn_lz4 = broker.producer(
            {"transactional.id": "tx-1", "linger.ms": 10_000, "compression.type": "lz4"}
        )
        self.txn.init_transactions()
        self.txn_lz4.init_transactions()
        self.group_tx = broker.consumer({"group.id": "g-tx", "enable.auto.commit": False})
        self.group_plain = broker.consumer({"group.id": "g-plain", "enable.auto.commit": False})

    def produce(self, producer: Any, tag: str, partitions: list[tuple[str, int]], n: int) -> None:
        for topic, partition in partitions:
            for i in range(n):
                value = f"{tag}|{topic}-{partition}|{i}"
                producer.produce(topic, value.encode(), key=f"k{i}".encode(), partition=partition)
                self.values.append((topic, partition, value, True))

    def idempotent_round(self, number: int, partitions: list[tuple[str, int]]) -> None:
        producer = self.lz4 if number % 2 else self.plain
        self.produce(producer, f"idem{number}", partitions, 3)
        producer.flush()

    def transaction(self, number: int, commit: bool, offsets: dict[str, int] | None) -> None:
        producer = self.txn_lz4 if number % 3 == 2 else self.txn
        producer.begin_transaction()
        start = len(self.values)
        self.produce(producer, f"txn{number}", user_partitions(), 3)
        if offsets is not None:
            TopicPartition = self.eoslog.TopicPartition
            wanted = [TopicPartition("orders", int(p), o) for p, o in offsets.items()]
            producer.send_offsets_to_transaction(wanted, self.group_tx.consumer_group_metadata())
        if commit:
            producer.commit_transaction()
            if offsets is not None:
                self.committed["g-tx"].update({f"orders-{p}": o for p, o in offsets.items()})
        else:
            # Flushed first: an abort purges what is still queued, and the aborted records
            # must reach the log for the markers and `.txnindex` entries to mean something.
            producer.flush()
            producer.abort_transaction()
            for index in range(start, len(self.values)):
                topic, partition, value, _ = self.values[index]
                self.values[index] = (topic, partition, value, False)

    def close(self) -> None:
        for producer in (self.plain, self.lz4, self.txn, self.txn_lz4):
            producer.close()
        self.group_tx.close()
        self.group_plain.close()

    def plain_commit(self, offsets: dict[str, int]) -> None:
        TopicPartition = self.eoslog.TopicPartition
        wanted = []
        for key, offset in offsets.items():
            topic, partition = key.rsplit("-", 1)
            wanted.append(TopicPartition(topic, int(partition), offset))
        self.group_plain.commit(offsets=wanted)
        self.committed["g-plain"].update(offsets)


def write_directory(root: str, clean: bool) -> dict[str, Any]:
    """Write the workload into `root` and close the broker; unless `clean`, open it again,
    write a little more and return with that broker still open (the caller exits without
    closing: an unclean stop with checkpoints from the earlier close). Returns the ledger."""
    import eoslog

    broker = eoslog.open(root, "commit", BROKER_CONFIG, clock_ms=lambda: TS, background=False)
    for topic, count in USER_TOPICS.items():
        broker.create_topic(topic, count, TOPIC_CONFIG)
    writer = _Writer(broker)
    writer.idempotent_round(0, user_partitions())
    writer.idempotent_round(1, user_partitions())
    outcomes = [True, False, True, True, False, True, False, True]
    for number, commit in enumerate(outcomes):
        offsets = {"0": 2 + number, "1": 3 + number} if number % 2 == 0 else None
        writer.transaction(number, commit, offsets)
        writer.idempotent_round(2 + number, user_partitions())
        if number == 3:
            writer.plain_commit({"orders-0": 5, "audit-0": 7})
    writer.plain_commit({"orders-0": 11, "orders-1": 4})
    _write_ending(writer, 20)
    writer.close()
    broker.close()
    if not clean:
        broker = eoslog.open(root, "commit", BROKER_CONFIG, clock_ms=lambda: TS, background=False)
        after = _Writer(broker, writer)
        after.idempotent_round(30, user_partitions())
        after.plain_commit({"orders-1": 9})
        _write_ending(after, 31)
    return {
        "values": writer.values,
        "committed": writer.committed,
        "log_end": {
            partition_key(t, p): broker.log(t, p).log_end_offset for t, p in user_partitions()
        },
    }


def _write_ending(writer: _Writer, number: int) -> None:
    """`orders` ends on data batches, `audit` on the COMMIT marker of a transaction."""
    writer.idempotent_round(number, [("orders", 0), ("orders", 1)])
    writer.txn.begin_transaction()
    writer.produce(writer.txn, f"last{number}", [("audit", 0)], 2)
    writer.txn.commit_transaction()
    for producer in (writer.plain, writer.lz4, writer.txn, writer.txn_lz4):
        producer.flush()


def writer_main() -> None:
    """`python -c 'from tests.support import hostile_dir; hostile_dir.writer_main()' ROOT
    clean|unclean` (REPO_ROOT on PYTHONPATH): write, print the ledger, then close or stop
    uncleanly (os._exit with the broker open)."""
    root, mode = sys.argv[1], sys.argv[2]
    ledger = write_directory(root, clean=mode == "clean")
    sys.stdout.write(json.dumps(ledger) + "\n")
    sys.stdout.flush()
    if mode != "clean":
        os._exit(0)


# --- layout -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    """One batch of a partition as the pristine directory holds it."""

    file: str  # relative to the log directory
    position: int
    size: int
    base_offset: int
    last_offset: int
    control: bool
    transactional: bool
    producer_id: int
    compression: int


def _log_bytes(data: bytes) -> bytes:
    """A .log's bytes up to where its log ends: an open log under "commit" runs its active
    segment's file ahead in zeros, and a batch length of 0 is where the log ends (the
    unclean variant is stopped with them in place)."""
    position = 0
    while position + 12 <= len(data):
        length = int.from_bytes(data[position + 8 : position + 12], "big")
        if length == 0:
            return data[:position] if data.count(0, position) == len(data) - position else data
        position += 12 + length
    return data


def _data_cut(report: Any) -> int:
    """The bytes an open cut that were not zeros alone past the log's end (the space an open
    log under "commit" runs its active segment ahead in, which every unclean stop leaves)."""
    return int(report.bytes_truncated - report.zeros_cut)


def read_layout(root: str) -> dict[str, list[Batch]]:
    """Partition directory name -> its batches in offset order (every segment)."""
    from eoslog.record import codec

    layout: dict[str, list[Batch]] = {}
    for directory in sorted(os.listdir(root)):
        path = os.path.join(root, directory)
        if not os.path.isdir(path):
            continue
        batches = []
        for name in sorted(n for n in os.listdir(path) if n.endswith(".log")):
            with open(os.path.join(path, name), "rb") as file:
                data = _log_bytes(file.read())
            for position, header in codec.iter_headers(data):
                batches.append(
                    Batch(
                        f"{directory}/{name}",
                        position,
                        header.size_in_bytes,
                        header.base_offset,
                        header.last_offset,
                        header.is_control,
                        header.is_transactional,
                        header.producer_id,
                        header.compression,
                    )
                )
        layout[directory] = batches
    return layout


def segments(layout: dict[str, list[Batch]], directory: str) -> list[str]:
    """The segment files (relative paths) of a partition, in offset order."""
    return sorted({batch.file for batch in layout[directory]})


# --- the attempt --------------------------------------------------------------------------


@dataclass
class Seen:
    """What one attempt saw. Records are [offset, key hex, value text] per partition."""

    scan_records: dict[str, list[list[Any]]]
    scan_error: dict[str, str] | None
    records: dict[str, list[list[Any]]]
    committed: dict[str, dict[str, int]]
    log_end: dict[str, int]
    cuts: dict[str, int]
    backwards: list[str]
    error: dict[str, str] | None
    phase: str


def describe(error: BaseException) -> dict[str, str]:
    from eoslog.errors import KafkaException

    kind = "typed" if isinstance(error, KafkaException) else "untyped"
    if isinstance(error, MemoryError):
        kind = "memory"
    return {"kind": kind, "type": type(error).__name__, "message": str(error)[:400]}


def _record(offset: int, key: bytes | None, value: bytes | None) -> list[Any]:
    """[offset, key hex, value text]; a value over VALUE_BYTES_SHOWN is shown by its size and
    digest, so that a decompression bomb that got through costs the harness nothing."""
    shown: str | None = None
    if value is not None:
        if len(value) > VALUE_BYTES_SHOWN:
            shown = f"<{len(value)} bytes, sha1 {hashlib.sha1(value).hexdigest()}>"
        else:
            shown = value.decode(errors="replace")
    return [offset, None if key is None else key[:VALUE_BYTES_SHOWN].hex(), shown]


def _scan(root: str, seen: Seen) -> None:
    import eoslog

    try:
        for batch in eoslog.scan(root, list(USER_TOPICS)):
            columns = batch.to_pydict()
            for topic, partition, offset, key, value in zip(
                columns["topic"],
                columns["partition"],
                columns["offset"],
                columns["key"],
                columns["value"],
                strict=True,
            ):
                seen.scan_records.setdefault(partition_key(topic, partition), []).append(
                    _record(offset, key, value)
                )
    except Exception as error:  # every exception is classified, typed or not
        seen.scan_error = describe(error)


def _read_partition(broker: Any, topic: str, partition: int, seen: Seen, limit: int) -> None:
    import eoslog

    key = partition_key(topic, partition)
    out = seen.records.setdefault(key, [])
    consumer = broker.consumer({"isolation.level": "read_committed"})
    try:
        consumer.assign([eoslog.TopicPartition(topic, partition, eoslog.OFFSET_BEGINNING)])
        while messages := consumer.consume(1000, timeout=0):
            for message in messages:
                if out and message.offset() <= out[-1][0]:
                    seen.backwards.append(f"{key}: {out[-1][0]} then {message.offset()}")
                    return
                out.append(_record(message.offset(), message.key(), message.value()))
            if len(out) > limit:
                seen.backwards.append(f"{key}: more than {limit} records")
                return
    finally:
        consumer.close()


def _read_committed_offsets(broker: Any, seen: Seen) -> None:
    import eoslog

    wanted = [eoslog.TopicPartition(t, p) for t, p in user_partitions()]
    for group in GROUPS:
        consumer = broker.consumer({"group.id": group, "enable.auto.commit": False})
        try:
            found = consumer.committed(wanted, timeout=1.0)
        finally:
            consumer.close()
        seen.committed[group] = {
            partition_key(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0
        }


def _append(broker: Any) -> None:
    producer = broker.producer({"linger.ms": 0})
    try:
        producer.produce("orders", APPENDED, partition=0)
        assert producer.flush(10) == 0, "the append was delivered"
    finally:
        producer.close()


def attempt(root: str, expected_records: int, view: bool = False) -> dict[str, Any]:
    """Scan, open, read and close `root`; what was seen and the first error, as JSON. With
    view, the broker is the command line's read-only view of the directory (an overlay file
    system, Broker(view=True): eoslog.cli.output.reading_admin), and nothing is
    appended."""
    import eoslog
    from eoslog.fs_overlay import OverlayFileSystem

    seen = Seen({}, None, {}, {}, {}, {}, [], None, "scan")
    _scan(root, seen)
    broker = None
    overlay = OverlayFileSystem(root) if view else None
    try:
        seen.phase = "open"
        if overlay is not None:
            broker = eoslog.Broker(
                root,
                durability="none",
                config=BROKER_CONFIG,
                fs=overlay,
                clock_ms=lambda: TS,
                background=False,
                view=True,
            )
        else:
            broker = eoslog.open(
                root, "commit", BROKER_CONFIG, clock_ms=lambda: TS, background=False
            )
        seen.phase = "read"
        for topic, partition in user_partitions():
            log = broker.log(topic, partition)
            seen.log_end[partition_key(topic, partition)] = log.log_end_offset
            seen.cuts[partition_key(topic, partition)] = _data_cut(log.recovery_report)
        for directory in INTERNAL_TOPICS:
            log = broker.log(directory, 0)
            seen.cuts[f"{directory}-0"] = _data_cut(log.recovery_report)
        for topic, partition in user_partitions():
            _read_partition(broker, topic, partition, seen, expected_records + READ_SLACK)
        seen.phase = "offsets"
        _read_committed_offsets(broker, seen)
        # A write too, after everything was read: what a damaged or hostile file does to the
        # next append (a symlinked active segment, a wrong log end) shows in the sandbox.
        if overlay is None:
            seen.phase = "append"
            _append(broker)
        seen.phase = "close"
        closing, broker = broker, None
        closing.close()
        seen.phase = "done"
    except Exception as error:  # every exception is classified, typed or not
        seen.error = describe(error)
    finally:
        if broker is not None:
            with contextlib.suppress(Exception):  # the first error is the one classified
                broker.close()
        if overlay is not None:
            overlay.close()
    return asdict(seen)
