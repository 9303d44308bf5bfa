"""The seed corpus of each target: well-formed inputs the fuzzer mutates from (real batches,
a real partition directory, real index, snapshot, checkpoint, meta and internal-topic files).

`python -m tests.fuzz --write-seeds` rewrites tests/fuzz/corpus/<target>/ from these; the
committed corpus is that output plus any inputs a soak added with --grow.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator
from pathlib import Path

from eoslog.coordinator import offsets_log, transaction_log
from eoslog.log import checkpoints
from eoslog.record import compression

from . import partition_target, wire_seeds
from .inputs import CLEAN_SHUTDOWN, DROP_RECOVERY_POINT, FIX_CRC, FROM_CLIENT
from .targets import NATIVE_CODEC, TARGETS

CORPUS = Path(__file__).parent / "corpus"
TS = 1_700_000_000_000


def _batch(compression: int = 0, **settings: int | bool) -> bytes:
    builder = NATIVE_CODEC.BatchBuilder(compression=compression, **settings)
    for number in range(4):
        headers = [("h", b"v%d" % number), ("n", None)] if number % 2 else None
        builder.append(TS + number, b"k%d" % number, b"value-%d" % number * 3, headers)
    builder.append(TS + 9, None, None)
    return bytes(builder.build())


def batches() -> Iterator[bytes]:
    yield _batch()
    yield from (_batch(compression=codec) for codec in (1, 2, 3, 4))
    yield _batch(timestamp_type=1)
    yield _batch(is_transactional=True, producer_id=7, producer_epoch=2, base_sequence=0)
    yield _batch(producer_id=9, producer_epoch=0, base_sequence=5, base_offset=40)
    yield NATIVE_CODEC.build_control_batch(
        1, producer_id=7, producer_epoch=2, coordinator_epoch=0, timestamp=TS
    )
    yield _batch() + _batch(compression=3, base_offset=5)
    segments = partition_target.template_partition_files()
    yield from (data for name, data in segments.items() if name.endswith(".log"))


def codec_seeds() -> Iterator[bytes]:
    for batch in batches():
        for flags in (0, FIX_CRC, FIX_CRC | FROM_CLIENT):
            yield bytes([flags]) + batch


def decompress_seeds() -> Iterator[bytes]:
    section = b"".join(
        b"record %d " % number + bytes(number % 50) + b"value" * (number % 9)
        for number in range(400)
    )
    for codec in (1, 2, 3, 4):
        yield bytes([codec - 1]) + compression.compress(codec, section)
        yield bytes([codec - 1]) + compression.compress(codec, section[:10])


def partition_seeds() -> Iterator[bytes]:
    files = partition_target.template_partition_files()
    body = partition_target.encode_files(files)
    for flags in (0, CLEAN_SHUTDOWN, FIX_CRC, DROP_RECOVERY_POINT, CLEAN_SHUTDOWN | FIX_CRC):
        yield bytes([flags]) + body
    logs_only = {name: data for name, data in files.items() if name.endswith(".log")}
    yield bytes([FIX_CRC]) + partition_target.encode_files(logs_only)


def index_seeds() -> Iterator[bytes]:
    offsets = b"".join(struct.pack(">ii", delta, 100 * delta + 61) for delta in range(1, 6))
    times = b"".join(struct.pack(">qi", TS + delta, delta) for delta in range(0, 5))
    for base in (0, 1):
        for writable in (0, 2):
            yield bytes([0 | writable, base]) + offsets
            yield bytes([1 | writable, base]) + times
    yield bytes([0, 0])


def txn_index_seeds() -> Iterator[bytes]:
    files = partition_target.template_partition_files()
    real = b"".join(data for name, data in files.items() if name.endswith(".txnindex"))
    forged = b"".join(
        struct.pack(">hqqqq", 0, pid, first, first + 3, first) for pid, first in ((1, 2), (2, 9))
    )
    yield bytes([0, 1]) + real
    yield bytes([0, 0]) + forged + real


def snapshot_seeds() -> Iterator[bytes]:
    files = partition_target.template_partition_files()
    for data in (data for name, data in files.items() if name.endswith(".snapshot")):
        yield bytes([0]) + data
        yield bytes([FIX_CRC]) + data


def checkpoint_seeds() -> Iterator[bytes]:
    yield checkpoints.encode_offsets({("t", 0): 18, ("__transaction_state", 0): 13})
    yield checkpoints.encode_offsets({})
    yield b""
    yield checkpoints.encode_aborted_counts(
        {
            ("t", 0): checkpoints.AbortedCounts(40, {0: 2, 18: 1}),
            ("__transaction_state", 0): checkpoints.AbortedCounts(13, {}),
        }
    )


def meta_seeds() -> Iterator[bytes]:
    data = partition_target.template().snapshot_bytes(f"{partition_target.LOG_DIR}/eoslog.meta")
    yield bytes([0]) + data
    yield bytes([FIX_CRC]) + data[10:]  # the JSON payload under a fresh header


def internal_record_seeds() -> Iterator[bytes]:
    value = transaction_log.TransactionLogValue(
        producer_id=1000,
        producer_epoch=3,
        transaction_timeout_ms=60_000,
        transaction_status=1,
        transaction_partitions=(transaction_log.TopicPartitions("t", (0, 1)),),
        transaction_last_update_timestamp_ms=TS,
        transaction_start_timestamp_ms=TS,
        next_producer_id=1001,
    )
    yield bytes([0]) + transaction_log.encode_key("fuzz-txn")
    for version in (0, 1):
        plain = value._replace(next_producer_id=-1)
        encoded = transaction_log.encode_value(value if version else plain, version)
        assert encoded is not None
        yield bytes([1]) + encoded
    yield bytes([2]) + offsets_log.encode_offset_key(offsets_log.OffsetCommitKey("g", "t", 3))
    yield bytes([2]) + offsets_log.encode_group_key(offsets_log.GroupMetadataKey("group"))
    commit = offsets_log.OffsetCommitValue(42, "meta", TS, leader_epoch=5)
    for version in (3, 4):
        encoded = offsets_log.encode_offset_value(commit, version)
        assert encoded is not None
        yield bytes([3]) + encoded


SEEDS = {
    "codec_native": codec_seeds,
    "codec_pure": codec_seeds,
    "codec_differential": codec_seeds,
    "decompress": decompress_seeds,
    "partition_directory": partition_seeds,
    "offline_scan": partition_seeds,
    "index_files": index_seeds,
    "txn_index": txn_index_seeds,
    "producer_snapshot": snapshot_seeds,
    "checkpoint": checkpoint_seeds,
    "meta": meta_seeds,
    "internal_records": internal_record_seeds,
    "wire_stream": wire_seeds.wire_seeds,
    "wire_stream_sasl": wire_seeds.wire_sasl_seeds,
}
assert set(SEEDS) == set(TARGETS), "every target has seeds"


def corpus_dir(target: str) -> Path:
    return CORPUS / target


def write_seeds() -> dict[str, int]:
    """Write each target's seeds into its corpus directory (named by SHA-1, as libFuzzer
    names the inputs it adds); returns how many each target has."""
    counts = {}
    for target, seeds in SEEDS.items():
        directory = corpus_dir(target)
        directory.mkdir(parents=True, exist_ok=True)
        for seed in seeds():
            (directory / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
        counts[target] = len(list(directory.iterdir()))
    return counts
