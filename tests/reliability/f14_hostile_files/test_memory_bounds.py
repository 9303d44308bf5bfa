"""Memory stays bounded by the bytes really on disk and by named limits (ISSUE 12, deliverable
5; docs/reliability.md family 14's outcome "allocation over max(256 MB, 4x bytes on disk)").

Sparse files claim a size they do not hold: a 512 MiB .txnindex, .index, .timeindex,
.snapshot or .log tail with a few KiB really written. A lying length field claims a batch the
file does not hold. An lz4 batch of a few MB decompresses to 900 MiB (a decompression bomb).
Each case is measured, not guessed: the operation runs in a child process, which reports its
own peak resident set (VmHWM of /proc/self/status at its end) and how the operation ended; the
test asserts the outcome (typed error or correct result) and the peak against
max(256 MB, 4x the bytes the directory really holds on disk)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lz4.frame
import pytest
import zstandard

import eoslog
from eoslog import limits
from eoslog.errors import CorruptRecordError
from eoslog.record import compression, layout, lz4frame, status
from tests.support.batches import assemble, raw_record

TOPIC = "t"
SEGMENT = "00000000000000000000"
# Apparent size of every sparse file: far above the bound, yet quick to walk in chunks.
SPARSE_BYTES = 512 * 1024 * 1024
FLOOR_BYTES = 256 * 1000 * 1000
# The bomb: 64 KiB blocks of zeros, each ~270 bytes of lz4; 900 MiB decompressed in ~3.9 MB.
BOMB_MIB = 900

CHILD = textwrap.dedent(
    """
    import json, sys
    import eoslog
    from eoslog import errors

    def run(op, path):
        if op == "open":
            with eoslog.open(path, durability="none") as broker:
                return sum(1 for _ in _consumed(broker))
        if op == "consume":
            with eoslog.open(path, durability="none") as broker:
                return sum(1 for _ in _consumed(broker))
        if op == "scan":
            return sum(batch.num_rows for batch in eoslog.scan(path, ["t"]))
        if op in ("validate", "records", "columns"):
            from eoslog.record import codec
            data = open(path, "rb").read()
            if op == "validate":
                codec.validate_batch(data, batch_bytes_max=8 << 20)
            elif op == "records":
                return len(codec.batch_records(data))
            else:
                return codec.decode_columns(data).count
            return 0
        raise ValueError(op)

    def _consumed(broker):
        consumer = broker.consumer({"group.id": "g", "auto.offset.reset": "earliest"})
        consumer.assign([eoslog.TopicPartition("t", 0, 0)])
        while messages := consumer.consume(500, timeout=0.2):
            yield from messages
        consumer.close()

    op, path = sys.argv[1], sys.argv[2]
    try:
        outcome = {"result": run(op, path)}
    except errors.KafkaException as error:
        outcome = {"error": type(error).__name__, "message": str(error)}
    # VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss across exec, so a child of a
    # large pytest process would report its parent's peak; VmHWM belongs to the child's own
    # address space, made new at exec.
    with open("/proc/self/status") as status:
        peak_kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    outcome["peak_bytes"] = peak_kib * 1024
    print(json.dumps(outcome))
    """
)


def _disk_bytes(path: str) -> int:
    """The bytes really allocated on disk under path (st_blocks), not the apparent sizes."""
    if os.path.isfile(path):
        return os.stat(path).st_blocks * 512
    total = 0
    for directory, _, names in os.walk(path):
        total += sum(os.stat(os.path.join(directory, n)).st_blocks * 512 for n in names)
    return total


def _measured(op: str, path: str, *, pure: bool = False) -> dict[str, object]:
    """Run op on path in a child; its outcome, with its peak RSS checked against the bound."""
    env = dict(os.environ)
    if pure:
        env["EOSLOG_NO_EXTENSIONS"] = "1"
    bound = max(FLOOR_BYTES, 4 * _disk_bytes(path))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, op, path],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    outcome: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{op} {path}: {outcome}, bound {bound}")
    peak = outcome["peak_bytes"]
    assert isinstance(peak, int)
    assert peak <= bound, f"{op} peaked at {peak} bytes, over the bound of {bound}"
    return outcome


def _write_log(path: str) -> int:
    """A one-partition topic with committed and aborted transactions (so a .txnindex and a
    snapshot exist), closed cleanly. Returns the committed records read_committed shows."""
    with eoslog.open(path, durability="none") as broker:
        broker.create_topic(TOPIC, num_partitions=1)
        producer = broker.producer({"transactional.id": "x", "compression.type": "lz4"})
        producer.init_transactions()
        for number in range(4):
            producer.begin_transaction()
            for index in range(10):
                producer.produce(TOPIC, value=b"v%d-%d" % (number, index), partition=0)
            producer.flush()
            if number % 2:
                producer.abort_transaction()
            else:
                producer.commit_transaction()
    return 20


@pytest.fixture
def log_dir(tmp_path) -> Iterator[tuple[str, str]]:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "log")
    _write_log(path)
    yield path, os.path.join(path, f"{TOPIC}-0")


def _make_sparse(file: str) -> None:
    with open(file, "ab") as handle:
        handle.truncate(SPARSE_BYTES)


def _snapshot(partition: str) -> str:
    names = [name for name in os.listdir(partition) if name.endswith(".snapshot")]
    assert names, "the workload leaves a producer snapshot"
    return os.path.join(partition, sorted(names)[-1])


# --- sparse derived files ------------------------------------------------------------------


def test_sparse_txnindex_is_rebuilt_at_open_within_the_bound(log_dir) -> None:  # type: ignore[no-untyped-def]
    path, partition = log_dir
    txn_index = os.path.join(partition, f"{SEGMENT}.txnindex")
    real = Path(txn_index).read_bytes()
    assert real, "the aborted transactions left entries"
    _make_sparse(txn_index)
    assert _measured("open", path)["result"] == 20
    # Recovery met the malformed entries and rebuilt the index from the log.
    assert Path(txn_index).read_bytes() == real


def test_sparse_txnindex_is_not_believed_in_scan_within_the_bound(log_dir) -> None:  # type: ignore[no-untyped-def]
    """Its zeros are malformed entries: the scan derives the aborted transactions from the
    batch headers instead, and returns what it returns on the undamaged directory."""
    path, partition = log_dir
    whole = _measured("scan", path)["result"]
    _make_sparse(os.path.join(partition, f"{SEGMENT}.txnindex"))
    assert _measured("scan", path)["result"] == whole


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_sparse_offset_and_time_indexes_are_read_only_up_to_their_entries_in_scan(
    log_dir, suffix: str
) -> None:  # type: ignore[no-untyped-def]
    path, partition = log_dir
    _make_sparse(os.path.join(partition, SEGMENT + suffix))
    assert _measured("scan", path)["result"] == 20


def _write_segmented_log(path: str) -> list[str]:
    """60 plain records over several small segments, closed cleanly; the segment bases."""
    with eoslog.open(path, durability="none") as broker:
        broker.create_topic(TOPIC, num_partitions=1, config={"segment.bytes": 2000})
        producer = broker.producer({})
        for number in range(60):
            producer.produce(TOPIC, value=b"v%03d" % number + bytes(50), partition=0)
            producer.flush()
    partition = os.path.join(path, f"{TOPIC}-0")
    return sorted(name[:20] for name in os.listdir(partition) if name.endswith(".log"))


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
@pytest.mark.parametrize("which", ["inactive", "active"])
@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_sparse_index_of_the_owner_is_not_believed_and_never_touched_whole(
    tmp_path, suffix: str, which: str, clean: bool
) -> None:  # type: ignore[no-untyped-def]
    # The owner maps its indexes; a file claiming more than segment.index.bytes is not taken
    # as entries, so no resize or sanity check copies or scans the gigabytes it claims.
    path = str(tmp_path / "log")
    bases = _write_segmented_log(path)
    assert len(bases) >= 3
    base = bases[0] if which == "inactive" else bases[-1]
    _make_sparse(os.path.join(path, f"{TOPIC}-0", base + suffix))
    if not clean:
        os.unlink(os.path.join(path, ".kafka_cleanshutdown"))
    assert _measured("consume", path)["result"] == 60


@pytest.mark.parametrize("op", ["open", "scan"])
def test_sparse_snapshot_is_refused_from_its_header_within_the_bound(log_dir, op: str) -> None:  # type: ignore[no-untyped-def]
    path, partition = log_dir
    _make_sparse(_snapshot(partition))
    assert _measured(op, path)["result"] == 20


def test_snapshot_with_a_forged_count_over_zeros_is_refused_after_one_chunk(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from eoslog._ext.producer_state import SNAPSHOT_ENTRY_BYTES, SNAPSHOT_HEADER_BYTES
    from eoslog.errors import CorruptSnapshotError
    from eoslog.fs import PosixFileSystem
    from eoslog.log.producer_state import read_snapshot

    count = (SPARSE_BYTES - SNAPSHOT_HEADER_BYTES) // SNAPSHOT_ENTRY_BYTES
    file = str(tmp_path / "00000000000000000040.snapshot")
    with open(file, "wb") as handle:
        handle.write((1).to_bytes(2, "big") + bytes(4) + count.to_bytes(4, "big"))
        handle.truncate(SNAPSHOT_HEADER_BYTES + count * SNAPSHOT_ENTRY_BYTES)
    handle = PosixFileSystem().open(file, read_only=True)
    try:
        with pytest.raises(CorruptSnapshotError, match=r"at byte 10: a producer appears twice"):
            read_snapshot(handle, file)
    finally:
        handle.close()


@pytest.mark.parametrize(
    "name", ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint"]
)
def test_sparse_checkpoint_is_refused_before_it_is_read(log_dir, name: str) -> None:  # type: ignore[no-untyped-def]
    path, _ = log_dir
    _make_sparse(os.path.join(path, name))
    assert _measured("open", path)["result"] == 20


def test_sparse_metadata_file_is_a_typed_error_before_it_is_read(log_dir) -> None:  # type: ignore[no-untyped-def]
    path, _ = log_dir
    _make_sparse(os.path.join(path, "eoslog.meta"))
    outcome = _measured("open", path)
    assert outcome["error"] == "KafkaStorageError"
    assert f"over the limit of {limits.metadata_file_bytes_max}" in str(outcome["message"])


# --- .log tails ------------------------------------------------------------------------------


def test_sparse_log_tail_is_cut_at_an_unclean_open_within_the_bound(log_dir) -> None:  # type: ignore[no-untyped-def]
    path, partition = log_dir
    log = os.path.join(partition, f"{SEGMENT}.log")
    real_size = os.path.getsize(log)
    os.unlink(os.path.join(path, ".kafka_cleanshutdown"))
    _make_sparse(log)
    assert _measured("open", path)["result"] == 20
    assert os.path.getsize(log) == real_size  # the zeros were a torn tail, and were cut


@pytest.mark.parametrize("op", ["open", "scan"])
def test_forged_batch_length_over_a_sparse_tail_is_never_allocated(log_dir, op: str) -> None:  # type: ignore[no-untyped-def]
    path, partition = log_dir
    log = os.path.join(partition, f"{SEGMENT}.log")
    end = os.path.getsize(log)
    # A header claiming a batch of batch_bytes_max over zeros: magic 2, a length, no CRC.
    header = bytearray(layout.HEADER_SIZE)
    header[layout.BATCH_LENGTH_OFFSET : layout.LOG_OVERHEAD] = limits.batch_bytes_max.to_bytes(
        4, "big"
    )
    header[layout.MAGIC_OFFSET] = layout.MAGIC_V2
    with open(log, "r+b") as handle:
        handle.seek(end)
        handle.write(bytes(header))
        handle.truncate(SPARSE_BYTES)
    # Unclean, so the forged header is a torn tail both readers leave out (after a clean
    # shutdown both refuse it, a damaged end of durable data).
    os.unlink(os.path.join(path, ".kafka_cleanshutdown"))
    assert _measured(op, path)["result"] == 20


# --- decompression bombs ---------------------------------------------------------------------


def _bomb_frame(mib: int) -> bytes:
    """A Kafka-shaped lz4 frame of `mib` MiB of zeros: one compressed 64 KiB block repeated."""
    frame = lz4frame.compress(bytes(64 * 1024))
    header, block = frame[: len(layout.LZ4_FRAME_HEADER)], frame[len(layout.LZ4_FRAME_HEADER) : -4]
    return header + block * (mib * 16) + lz4frame.END_MARK


def _bomb_batch(mib: int = BOMB_MIB, base_offset: int = 0) -> bytes:
    return assemble(
        _bomb_frame(mib),
        records_count=1,
        attributes=layout.COMPRESSION_LZ4,
        base_offset=base_offset,
    )


@pytest.mark.parametrize("twin", ["native", "pure"])
@pytest.mark.parametrize("op", ["validate", "records", "columns"])
def test_decompression_bomb_is_refused_at_the_limit_by_every_decoder(
    tmp_path, op: str, twin: str
) -> None:  # type: ignore[no-untyped-def]
    file = str(tmp_path / "bomb.batch")
    with open(file, "wb") as handle:
        handle.write(_bomb_batch())
    assert os.path.getsize(file) < 4 * 1024 * 1024
    outcome = _measured(op, file, pure=twin == "pure")
    assert outcome["error"] == "CorruptRecordError"
    assert "decompressed batch limit" in str(outcome["message"])


def _zeros_stream(compressor: Any, mib: int) -> bytes:
    """`mib` MiB of zeros through a streaming compressor (compress/flush), a MiB at a time."""
    zeros = bytes(1 << 20)
    return b"".join(compressor.compress(zeros) for _ in range(mib)) + compressor.flush()


def _bomb_section(name: str) -> bytes:
    """A records section of far more than the 64 MiB limit, a few MiB at most on disk."""
    if name == "gzip":
        return _zeros_stream(zlib.compressobj(9, zlib.DEFLATED, 31), BOMB_MIB)
    if name == "zstd":
        return _zeros_stream(zstandard.ZstdCompressor().compressobj(), BOMB_MIB)
    # snappy's ratio is about 21 (copies of at most 64 bytes): 2,100 xerial chunks of 32 KiB
    # of zeros hold 65.6 MiB in about 3 MiB.
    chunk = compression.compress(layout.COMPRESSION_SNAPPY, bytes(32 * 1024))
    header = compression.XERIAL_HEADER
    return header + chunk[len(header) :] * 2_100


@pytest.mark.parametrize("name", ["gzip", "snappy", "zstd"])
@pytest.mark.parametrize("op", ["validate", "records", "columns"])
def test_a_bomb_of_every_codec_is_refused_at_the_limit(tmp_path, op: str, name: str) -> None:  # type: ignore[no-untyped-def]
    file = str(tmp_path / "bomb.batch")
    with open(file, "wb") as handle:
        handle.write(
            assemble(_bomb_section(name), records_count=1, attributes=compression.CODEC_NAMES[name])
        )
    assert os.path.getsize(file) < 4 * 1024 * 1024
    outcome = _measured(op, file)
    assert outcome["error"] == "CorruptRecordError"
    assert "decompressed batch limit" in str(outcome["message"])


def test_a_snappy_block_claiming_more_than_the_limit_is_refused_before_decoding() -> None:
    # A raw block's leading varint is its length: 2**32 - 1 here, with 3 bytes behind it.
    claim = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F]) + b"\x00ab"
    for section in (claim, compression.XERIAL_HEADER + len(claim).to_bytes(4, "big") + claim):
        assert compression.decompress(layout.COMPRESSION_SNAPPY, section, 64 << 20) == (
            status.DECOMPRESSED_TOO_LARGE
        )


@pytest.mark.parametrize("op", ["consume", "scan"])
def test_decompression_bomb_in_a_log_is_a_typed_error_for_readers(log_dir, op: str) -> None:  # type: ignore[no-untyped-def]
    path, partition = log_dir
    log = os.path.join(partition, f"{SEGMENT}.log")
    with eoslog.open(path, durability="none") as broker:
        end = broker.log(TOPIC, 0).log_end_offset
    with open(log, "ab") as handle:
        handle.write(_bomb_batch(base_offset=end))
    os.unlink(os.path.join(path, ".kafka_cleanshutdown"))
    outcome = _measured(op, path)
    assert outcome["error"] == "CorruptRecordError"
    assert "decompressed batch limit" in str(outcome["message"])


def test_append_limit_on_decompression_follows_the_topics_max_message_bytes(codec) -> None:  # type: ignore[no-untyped-def]
    # 2 MiB of zeros in one record: a batch of a few KiB. Under a 1 MiB max.message.bytes the
    # decompressed limit is 64 MiB and it is accepted; under 16 KiB it is 1 MiB, and refused.
    batch = assemble(
        lz4frame.compress(raw_record(value=bytes(2 << 20))),
        records_count=1,
        attributes=layout.COMPRESSION_LZ4,
    )
    assert len(batch) < 16 * 1024
    codec.validate_batch(batch)
    with pytest.raises(CorruptRecordError) as raised:
        codec.validate_batch(batch, batch_bytes_max=16 * 1024)
    assert (
        str(raised.value)
        == f"{status.MESSAGES[status.DECOMPRESSED_TOO_LARGE][1]} (batch at byte 0)"
    )


def test_decode_columns_takes_a_decompressed_limit_and_checks_it(codec) -> None:  # type: ignore[no-untyped-def]
    value = bytes(3 << 20)
    batch = assemble(
        lz4frame.compress(raw_record(value=value)),
        records_count=1,
        attributes=layout.COMPRESSION_LZ4,
    )
    assert codec.decode_columns(batch).count == 1
    with pytest.raises(CorruptRecordError):
        codec.decode_columns(batch, decompressed_bytes_max=2 << 20)
    for wrong in (0, limits.decompressed_batch_bytes_ceiling + 1):
        with pytest.raises(ValueError, match="decompressed_bytes_max"):
            codec.decode_columns(batch, decompressed_bytes_max=wrong)


def test_lz4_decompression_stops_one_piece_past_the_limit() -> None:
    frame = _bomb_frame(64)
    assert lz4frame.decompress(frame, 8 << 20) == status.DECOMPRESSED_TOO_LARGE
    whole = lz4frame.decompress(frame, 64 << 20)
    assert isinstance(whole, bytes) and whole == bytes(64 << 20)
    assert lz4.frame.decompress(frame) == whole  # the reference reader agrees


def test_scan_passes_its_decompressed_limit_down_to_the_decoder(log_dir) -> None:  # type: ignore[no-untyped-def]
    path, _ = log_dir
    assert sum(batch.num_rows for batch in eoslog.scan(path, [TOPIC])) == 20
    # The workload's lz4 batches hold ten records of ~20 bytes each: past a 16-byte limit.
    with pytest.raises(CorruptRecordError, match="decompressed batch limit"):
        list(eoslog.scan(path, [TOPIC], decompressed_bytes_max=16))
    with pytest.raises(ValueError, match="decompressed_bytes_max"):
        list(eoslog.scan(path, [TOPIC], decompressed_bytes_max=0))


# --- chunked reads keep every real entry -------------------------------------------------------


def _index_file(tmp_path: Path, suffix: str, entries: bytes, zeros: int) -> str:
    file = str(tmp_path / (SEGMENT + suffix))
    Path(file).write_bytes(entries + bytes(zeros))
    return file


@pytest.mark.parametrize("zeros", [0, 4096], ids=["trimmed", "preallocated"])
def test_read_only_indexes_read_in_chunks_keep_every_entry_across_chunk_boundaries(
    tmp_path: Path, zeros: int
) -> None:
    from eoslog.fs import PosixFileSystem
    from eoslog.log.offset_index import OffsetIndex
    from eoslog.log.time_index import TimeIndex

    fs = PosixFileSystem()
    count = 3 * limits.file_read_chunk_bytes // 8 + 5  # over three chunks, not a multiple
    offsets = b"".join(
        (n).to_bytes(4, "big") + (61 * (n + 1)).to_bytes(4, "big") for n in range(count)
    )
    index = OffsetIndex(fs, _index_file(tmp_path, ".index", offsets, zeros), 0, writable=False)
    assert index.entries == count
    assert index.entry(count - 1) == (count - 1, 61 * count)
    times = b"".join((1000 + n).to_bytes(8, "big") + (n).to_bytes(4, "big") for n in range(count))
    time_index = TimeIndex(fs, _index_file(tmp_path, ".timeindex", times, zeros), 0, writable=False)
    assert time_index.entries == count
    assert time_index.entry(count - 1) == (1000 + count - 1, count - 1)


def test_txnindex_read_in_chunks_keeps_every_entry_and_names_the_first_bad_byte(
    tmp_path: Path,
) -> None:
    from eoslog.errors import CorruptIndexError
    from eoslog.fs import PosixFileSystem
    from eoslog.log.txn_index import AbortedTxn, TransactionIndex

    count = 2 * limits.file_read_chunk_bytes // 34 + 7
    txns = [AbortedTxn(n % 5, 10 * n, 10 * n + 5, 10 * n + 6) for n in range(count)]
    data = b"".join(txn.encode() for txn in txns)
    file = _index_file(tmp_path, ".txnindex", data, 0)
    index = TransactionIndex(PosixFileSystem(), file, 0)
    assert index.all_entries() == txns
    index.sanity_check()
    index.close()
    # An entry out of order in the second chunk: the entries before it are kept and the
    # sanity check names its byte, so that recovery rebuilds the index.
    bad = count - 3
    damaged = data[: bad * 34] + txns[0].encode() + data[(bad + 1) * 34 :]
    file = _index_file(tmp_path, ".txnindex", damaged, 0)
    index = TransactionIndex(PosixFileSystem(), file, 0)
    assert index.all_entries() == txns[:bad]
    with pytest.raises(CorruptIndexError, match=f"at byte {bad * 34} is malformed"):
        index.sanity_check()
    index.close()


# --- budgets across batches --------------------------------------------------------------------


def _write_large_records(path: str, count: int, value_bytes: int) -> list[bytes]:
    """`count` lz4 batches of one record each, `value_bytes` of mostly zeros (so a few KiB on
    disk), appended to a fresh topic's segment; the values, in offset order."""
    with eoslog.open(path, durability="none") as broker:
        broker.create_topic(TOPIC, num_partitions=1)
    values = [b"%04d" % number + bytes(value_bytes - 4) for number in range(count)]
    log = os.path.join(path, f"{TOPIC}-0", f"{SEGMENT}.log")
    with open(log, "ab") as handle:
        for number, value in enumerate(values):
            frame = lz4frame.compress(raw_record(value=value))
            handle.write(
                assemble(
                    frame, records_count=1, attributes=layout.COMPRESSION_LZ4, base_offset=number
                )
            )
    os.unlink(os.path.join(path, ".kafka_cleanshutdown"))
    return values


def test_readers_stop_at_the_held_bytes_budget_and_go_on_from_there(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Four batches of 24 MiB each: a fetch, a decode or a consume call holds at most the
    # 64 MiB budget plus one batch (three batches here), and the next call goes on from
    # there: every record is delivered once, in order.
    path = str(tmp_path / "log")
    values = _write_large_records(path, 4, 24 << 20)
    prefixes = [value[:4] for value in values]
    with eoslog.open(path, durability="none") as broker:
        consumer = broker.consumer({"group.id": "g", "auto.offset.reset": "earliest"})
        consumer.assign([eoslog.TopicPartition(TOPIC, 0, 0)])
        calls = [consumer.consume(10, 0.5) for _ in range(3)]
        assert [len(call) for call in calls] == [3, 1, 0]
        got = [(m.offset(), m.value()[:4], len(m.value())) for call in calls for m in call]
        assert got == [(n, prefixes[n], 24 << 20) for n in range(4)]
        consumer.assign([eoslog.TopicPartition(TOPIC, 0, 0)])
        tables = [consumer.consume_arrow(10, 0.5) for _ in range(3)]
        assert [table.column("offset").to_pylist() for table in tables] == [[0, 1, 2], [3], []]
        consumer.close()
    scanned = list(eoslog.scan(path, [TOPIC]))
    assert [batch.num_rows for batch in scanned] == [3, 1]  # cut once 72 MiB were held
    offsets = [offset for batch in scanned for offset in batch.column("offset").to_pylist()]
    assert offsets == [0, 1, 2, 3]


def test_decode_columns_held_bytes_budget_is_the_same_in_both_twins(codec) -> None:  # type: ignore[no-untyped-def]
    batches = b"".join(
        assemble(
            lz4frame.compress(raw_record(value=bytes(1000))),
            records_count=1,
            attributes=layout.COMPRESSION_LZ4,
            base_offset=number,
        )
        for number in range(5)
    )
    whole = codec.decode_columns(batches)
    assert whole.count == 5 and whole.end_position == len(batches)
    # Stops before the batch after the one that reached 2500 bytes (three are held).
    cut = codec.decode_columns(batches, held_bytes_max=2500)
    assert cut.count == 3
    assert cut.end_position == 3 * len(batches) // 5
    assert codec.decode_columns(batches, held_bytes_max=0).count == 1  # one batch at least
    with pytest.raises(ValueError, match="held_bytes_max"):
        codec.decode_columns(batches, held_bytes_max=-1)


def test_index_records_stops_at_the_held_bytes_budget_before_a_compressed_batch() -> None:
    from eoslog._ext.message import RecordRefs, index_records

    batches = b"".join(
        assemble(
            lz4frame.compress(raw_record(value=bytes(1000))),
            records_count=1,
            attributes=layout.COMPRESSION_LZ4,
            base_offset=10 + number,
        )
        for number in range(5)
    )
    refs = RecordRefs(5)
    owners: list[object] = [batches]
    assert index_records(batches, 0, len(batches), refs, owners, held_bytes_max=2500) == 13
    assert refs.count == 3
    refs = RecordRefs(5)
    assert index_records(batches, 0, len(batches), refs, [batches]) == -1
    assert refs.count == 5
