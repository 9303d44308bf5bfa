"""The partition_directory target: a whole partition directory from one input, opened by a
broker (recovery, index checks, producer-state load and replay) and read back by consumers;
and the offline_scan target: the same directory read by eoslog.scan without opening it.

An input is a flags byte, then files, each `[kind u8][base offset u8][length u16 BE][bytes]`
(a short last file takes what is left). Kind picks the suffix, base offset the file name. The
files replace those of partition t-0 in a broker directory built once by a small workload
(idempotent and transactional appends, an abort, two segments), so every other file the
broker needs is well formed. Flags: FIX_CRC recomputes every batch CRC in the .log files and
the CRC of the .snapshot files; CLEAN_SHUTDOWN keeps the clean-shutdown marker (without it,
the open recovers); DROP_RECOVERY_POINT deletes the recovery-point checkpoint.

Oracles: each consumer (read_uncommitted, read_committed) reaches the end in a bounded
number of polls with strictly increasing offsets, and every record read_committed returns
is one read_uncommitted returns.
"""

from __future__ import annotations

import gc
import os
import random
import shutil
import struct
import tempfile
from pathlib import Path

import eoslog
from eoslog import offline
from eoslog.fs_twin import RecordingFileSystem

from .inputs import (
    CLEAN_SHUTDOWN,
    DROP_RECOVERY_POINT,
    FIX_CRC,
    PRIMITIVES,
    FuzzFinding,
    fix_batch_crcs,
    split_flags,
    write_file,
)

LOG_DIR = "/data/log"
TOPIC = "t"
PARTITION_DIR = f"{LOG_DIR}/{TOPIC}-0"
SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
FILE_HEADER = struct.Struct(">BBH")
# Small preallocated indexes: the twin holds them in memory, and every open resizes them.
BROKER_CONFIG = {"log.index.size.max.bytes": 4096}
SNAPSHOT_CRC_START = 6  # version int16 and the CRC field come before what the CRC covers
# A consumer poll returns at least one record while any is left, and every batch is at least
# 61 bytes, so more polls than this means a reader that loops or moves backwards.
POLL_SLACK = 10
BATCH_BYTES_MIN = 61

_template: RecordingFileSystem | None = None


def build_template() -> RecordingFileSystem:
    """A twin holding a cleanly closed broker directory whose t-0 has two segments, an
    aborted transaction (a .txnindex entry), committed ones and producer snapshots."""
    twin = RecordingFileSystem(seed=0)
    twin.makedirs("/data", durable=True)
    broker = eoslog.open(LOG_DIR, "commit", BROKER_CONFIG, fs=twin, background=False)
    broker.create_topic(TOPIC, 1, {"segment.bytes": 700})
    idempotent = broker.producer({"enable.idempotence": True, "linger.ms": 0})
    for number in range(6):
        idempotent.produce(TOPIC, b"i%d" % number, key=b"k", partition=0)
        idempotent.flush()
    idempotent.close()
    transactional = broker.producer({"transactional.id": "fuzz", "linger.ms": 0})
    transactional.init_transactions()
    for number in range(4):
        transactional.begin_transaction()
        transactional.produce(TOPIC, b"t%d" % number, partition=0)
        transactional.produce(TOPIC, b"u%d" % number, partition=0)
        if number == 1:
            transactional.abort_transaction()
        else:
            transactional.commit_transaction()
    transactional.close()
    broker.close()
    return durable_copy(twin)


def durable_copy(twin: RecordingFileSystem) -> RecordingFileSystem:
    """A twin holding every file of `twin` as it reads now, all durable, so that
    crash_image() of it is an exact copy."""
    copy = RecordingFileSystem(seed=0)

    def walk(path: str) -> None:
        for name in twin.listdir(path):
            child = f"{path.rstrip('/')}/{name}"
            try:
                twin.listdir(child)
            except NotADirectoryError:
                write_file(copy, child, twin.snapshot_bytes(child))
            else:
                copy.makedirs(child, durable=True)
                walk(child)
        copy.sync_dir(path)

    walk("/")
    return copy


def template() -> RecordingFileSystem:
    global _template
    if _template is None:
        _template = build_template()
    return _template


def parse_files(body: bytes) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    position = 0
    while position < len(body):
        kind, base, length = FILE_HEADER.unpack(body[position : position + 4].ljust(4, b"\0"))
        position += FILE_HEADER.size
        name = f"{base:020d}{SUFFIXES[kind % len(SUFFIXES)]}"
        files[name] = body[position : position + length]
        position += length
    return files


def encode_files(files: dict[str, bytes]) -> bytes:
    """The inverse of parse_files, for the seed corpus."""
    out = bytearray()
    for name, data in sorted(files.items()):
        base, suffix = int(name.split(".")[0]), "." + name.split(".", 1)[1]
        out += FILE_HEADER.pack(SUFFIXES.index(suffix), base, len(data)) + data
    return bytes(out)


def fixed_snapshot(data: bytes) -> bytes:
    if len(data) < SNAPSHOT_CRC_START:
        return data
    crc = PRIMITIVES.crc32c(data[SNAPSHOT_CRC_START:])
    return data[:2] + struct.pack(">I", crc) + data[SNAPSHOT_CRC_START:]


def directory_twin(data: bytes) -> RecordingFileSystem:
    flags, body = split_flags(data)
    twin = template().crash_image(random.Random(0))
    for name in twin.listdir(PARTITION_DIR):
        twin.unlink(f"{PARTITION_DIR}/{name}")
    for name, content in parse_files(body).items():
        if flags & FIX_CRC and name.endswith(".log"):
            content = fix_batch_crcs(content)
        if flags & FIX_CRC and name.endswith(".snapshot"):
            content = fixed_snapshot(content)
        write_file(twin, f"{PARTITION_DIR}/{name}", content)
    if not flags & CLEAN_SHUTDOWN:
        maybe_unlink(twin, f"{LOG_DIR}/.kafka_cleanshutdown")
    if flags & DROP_RECOVERY_POINT:
        maybe_unlink(twin, f"{LOG_DIR}/recovery-point-offset-checkpoint")
    return twin


def maybe_unlink(twin: RecordingFileSystem, path: str) -> None:
    if twin.exists(path):
        twin.unlink(path)


def consumed(broker: eoslog.Broker, isolation_level: str, polls_max: int) -> list[bytes | None]:
    consumer = broker.consumer(
        {"auto.offset.reset": "earliest", "isolation.level": isolation_level}
    )
    consumer.assign([eoslog.TopicPartition(TOPIC, 0, 0)])
    values: list[bytes | None] = []
    last_offset = -1
    try:
        for _ in range(polls_max):
            messages = consumer.consume(500, timeout=0)
            if not messages:
                return values
            for message in messages:
                if message.offset() <= last_offset:
                    raise FuzzFinding(
                        f"{isolation_level} consumer went from offset {last_offset} to "
                        f"{message.offset()}"
                    )
                last_offset = message.offset()
                value = message.value()
                values.append(None if value is None else bytes(value))
        raise FuzzFinding(f"{isolation_level} consumer still reading after {polls_max} polls")
    finally:
        consumer.close()


def partition_directory(data: bytes) -> None:
    twin = directory_twin(data)
    polls_max = len(data) // BATCH_BYTES_MIN + POLL_SLACK
    broker = eoslog.open(LOG_DIR, "commit", BROKER_CONFIG, fs=twin, background=False)
    try:
        everything = consumed(broker, "read_uncommitted", polls_max)
        committed = consumed(broker, "read_committed", polls_max)
        missing = [value for value in committed if value not in everything]
        if missing:
            raise FuzzFinding(f"read_committed returned {missing}, absent from the log")
    finally:
        broker.close()
        # A broker and its twin form reference cycles holding the twin's file images; free
        # them now, or many inputs' worth would add up past the memory bound.
        del broker, twin
        gc.collect()


# The offline scan reads real files: a scratch directory in memory-backed /dev/shm when there
# is one, rewritten for every input.
SCAN_ROOT = Path("/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir())


def scan_directory(data: bytes) -> Path:
    flags, body = split_flags(data)
    root = SCAN_ROOT / f"eoslog-fuzz-scan-{os.getpid()}"
    partition = root / f"{TOPIC}-0"
    shutil.rmtree(root, ignore_errors=True)
    partition.mkdir(parents=True)
    for name, content in parse_files(body).items():
        if flags & FIX_CRC and name.endswith(".log"):
            content = fix_batch_crcs(content)
        (partition / name).write_bytes(content)
    return root


def scanned(root: Path, isolation_level: str) -> list[bytes | None]:
    """Every record eoslog.scan returns, checking that offsets strictly increase."""
    values: list[bytes | None] = []
    last_offset = -1
    for batch in offline.scan(str(root), [TOPIC], isolation_level):
        # Only these two columns: a forged timestamp need not fit a Python datetime.
        offsets = batch.column("offset").to_pylist()
        for offset, value in zip(offsets, batch.column("value").to_pylist(), strict=True):
            if offset <= last_offset:
                raise FuzzFinding(f"{isolation_level} scan went from {last_offset} to {offset}")
            last_offset = offset
            values.append(value)
    return values


def offline_scan(data: bytes) -> None:
    """eoslog.scan (the Spark source's reader) over a partition directory given as for
    partition_directory: it reads the files without recovery, trusting nothing."""
    root = scan_directory(data)
    try:
        everything = scanned(root, "read_uncommitted")
        committed = scanned(root, "read_committed")
        missing = [value for value in committed if value not in everything]
        if missing:
            raise FuzzFinding(f"read_committed scan returned {missing}, absent from the log")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def template_partition_files() -> dict[str, bytes]:
    """t-0's files in the template: the seed corpus starts from them."""
    twin = template()
    return {
        name: twin.snapshot_bytes(f"{PARTITION_DIR}/{name}")
        for name in sorted(twin.listdir(PARTITION_DIR))
    }
