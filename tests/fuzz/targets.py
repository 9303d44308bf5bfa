"""The fuzz targets: one function per reader of untrusted bytes, each taking one input.

A target returns normally or raises what its reader may raise (`Target.acceptable`); any
other exception is a finding. Targets add oracles where a wrong answer would otherwise pass
silently, raising FuzzFinding: the native codec and its pure twin must agree, a validated
batch must decode, a consumer must never move backwards or loop, a decoded internal-topic
record must survive a round trip through its encoder.

Inputs whose reader checks a CRC would almost never get past it, so most targets read their
first byte as flags, one of which recomputes the CRC over the mutated bytes before the reader
sees them: the fuzzer then explores what lies behind the CRC (the forged-file case).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import struct
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from eoslog.coordinator import offsets_log, transaction_log
from eoslog.errors import KafkaException
from eoslog.fs_twin import RecordingFileSystem
from eoslog.log import checkpoints, meta_file
from eoslog.log.config import LogConfig
from eoslog.log.offset_index import OffsetIndex
from eoslog.log.time_index import TimeIndex
from eoslog.log.txn_index import TransactionIndex
from eoslog.record import compression, primitives, status

from . import partition_target, wire_target
from .inputs import (
    BATCH_BYTES_MAX,
    FIX_CRC,
    INDEX_DIRECTORY,
    PRIMITIVES,
    FuzzFinding,
    Target,
    batch_input,
    fresh_twin,
    run_checked,
    split_flags,
    write_file,
)

NATIVE_CODEC = importlib.import_module("eoslog._ext.codec")
PURE_CODEC = importlib.import_module("eoslog.record.pycodec")
NATIVE_SCAN = importlib.import_module("eoslog._ext.scan")
PRODUCER_STATE = importlib.import_module("eoslog._ext.producer_state")

# --- the codec: each twin, then the two against each other -------------------------------------


def outcome(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """("ok", normalized result) or ("raised", (type, message)); untyped errors propagate."""
    try:
        result = function(*args, **kwargs)
        if hasattr(result, "__next__"):
            result = list(result)
    except KafkaException as error:
        return ("raised", (type(error), str(error)))
    return ("ok", normalized(result))


def normalized(value: Any) -> Any:
    """A comparable form of a codec result: arrays become bytes, dataclasses tuples."""
    if isinstance(value, np.ndarray):
        return (str(value.dtype), value.tobytes())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple(normalized(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, list | tuple):
        return tuple(normalized(item) for item in value)
    return value


def codec_calls(codec: types.ModuleType, body: bytes, from_client: bool) -> dict[str, Any]:
    """Every decoding entry point of one codec twin on one input, as outcomes."""
    return {
        "read_header": outcome(codec.read_header, body),
        "iter_headers": outcome(codec.iter_headers, body),
        "validate_batch": outcome(
            codec.validate_batch, body, batch_bytes_max=BATCH_BYTES_MAX, from_client=from_client
        ),
        "batch_records": outcome(codec.batch_records, body),
        "batch_records_no_crc": outcome(codec.batch_records, body, verify_crc=False),
        "decode_columns": outcome(
            codec.decode_columns, body, include_headers=True, include_control=True
        ),
        "decode_columns_capped": outcome(codec.decode_columns, body, records_max=3),
    }


def check_codec_agrees_with_itself(results: dict[str, Any]) -> None:
    """A batch validate_batch accepts decodes, to the same records in both decoders."""
    validated, records, columns = (
        results["validate_batch"],
        results["batch_records"],
        results["decode_columns"],
    )
    if validated[0] != "ok":
        return
    if records[0] != "ok" or columns[0] != "ok":
        raise FuzzFinding(f"validated batch fails to decode: {records} {columns}")
    offsets = [record[0] for record in records[1]]
    column_offsets = np.frombuffer(columns[1][1][1], dtype=np.int64).tolist()
    # decode_columns keeps offsets >= offset_min (0 by default); batch_records keeps all.
    if [offset for offset in offsets if offset >= 0] != column_offsets:
        raise FuzzFinding(f"batch_records offsets {offsets} != decode_columns {column_offsets}")
    if offsets != sorted(set(offsets)):
        raise FuzzFinding(f"validated batch offsets do not strictly increase: {offsets}")


def check_headers_walk_forward(results: dict[str, Any], size: int) -> None:
    if results["iter_headers"][0] != "ok":
        return
    positions = [position for position, _ in results["iter_headers"][1]]
    if positions != sorted(set(positions)) or any(p < 0 or p >= size for p in positions):
        raise FuzzFinding(f"iter_headers positions out of order or range: {positions}")


def scan_kernels(body: bytes) -> None:
    """The native scan kernels recovery and reads use (no pure twin: crashes only)."""
    for verify_crc in (True, False):
        try:
            _, end, _ = NATIVE_SCAN.scan_batches(body, verify_crc=verify_crc)
        except KafkaException:
            continue
        if not 0 <= end <= len(body):
            raise FuzzFinding(f"scan_batches ended at {end} outside [0, {len(body)}]")
    for call in (
        lambda: NATIVE_SCAN.find_valid_batch(body),
        lambda: NATIVE_SCAN.find_batch(body, 3),
        lambda: NATIVE_SCAN.find_batch(body, 1 << 40, 0, len(body)),
    ):
        with contextlib.suppress(KafkaException):
            call()


def codec_native(data: bytes) -> None:
    body, from_client = batch_input(data)
    results = codec_calls(NATIVE_CODEC, body, from_client)
    check_codec_agrees_with_itself(results)
    check_headers_walk_forward(results, len(body))
    scan_kernels(body)


def codec_pure(data: bytes) -> None:
    body, from_client = batch_input(data)
    results = codec_calls(PURE_CODEC, body, from_client)
    check_codec_agrees_with_itself(results)
    check_headers_walk_forward(results, len(body))


def codec_differential(data: bytes) -> None:
    """The twins return equal values and raise the same type with the same message
    (pyext/codec.pyi), on every entry point."""
    body, from_client = batch_input(data)
    native = codec_calls(NATIVE_CODEC, body, from_client)
    pure = codec_calls(PURE_CODEC, body, from_client)
    for call, native_outcome in native.items():
        if native_outcome != pure[call]:
            raise FuzzFinding(f"{call}: native {native_outcome!r:.300} != pure {pure[call]!r:.300}")


# Decompression limit for the decompress target: small, so that bombs are found quickly.
DECOMPRESS_LIMIT = 1 << 20
_DECOMPRESS_STATUSES = (status.DECOMPRESS_FAILED, status.DECOMPRESSED_TOO_LARGE)


def decompress(data: bytes) -> None:
    """One codec's records section (the first byte picks gzip, snappy, lz4 or zstd): bytes
    within the limit that compress and decompress back to themselves, or a status; never an
    exception (compression.decompress returns a status for every bad section)."""
    if not data:
        return
    codec = 1 + data[0] % 4
    result = compression.decompress(codec, data[1:], DECOMPRESS_LIMIT)
    if isinstance(result, int):
        if result not in _DECOMPRESS_STATUSES:
            raise FuzzFinding(f"codec {codec}: status {result} for a known codec")
        return
    if len(result) > DECOMPRESS_LIMIT:
        raise FuzzFinding(f"codec {codec}: {len(result)} bytes past the limit")
    again = compression.decompress(codec, compression.compress(codec, result), len(result))
    if again != result:
        raise FuzzFinding(f"codec {codec}: what it decoded does not round-trip")


# --- index files ------------------------------------------------------------------------------


def index_input(data: bytes) -> tuple[int, int, bool, bytes]:
    """(kind, base offset, writable, file bytes): the first two bytes choose the rest."""
    flags, body = split_flags(data)
    base, body = (body[0] * 8, body[1:]) if body else (0, b"")
    return flags & 1, base, bool(flags & 2), body


def offset_index(twin: RecordingFileSystem, path: str, base: int, writable: bool) -> None:
    with OffsetIndex(twin, path, base, max_index_bytes=1 << 16, writable=writable) as index:
        index.sanity_check()
        index.check_entries(1 << 20, base + 1000)
        entries = index.entries
        for target in (base - 1, base, base + 5, base + 999, 1 << 62):
            offset, position = index.lookup(target)
            if entries and not (offset <= max(target, base) and position >= 0):
                raise FuzzFinding(f"lookup({target}) answered ({offset}, {position})")
        index.fetch_upper_bound_offset(0, 4096)
        for n in range(min(entries, 4)):
            index.entry(n)
        if writable:
            index.truncate_to(base + 3)


def time_index(twin: RecordingFileSystem, path: str, base: int, writable: bool) -> None:
    with TimeIndex(twin, path, base, max_index_bytes=1 << 16, writable=writable) as index:
        index.sanity_check()
        index.check_entries(base + 1000)
        for target in (-1, 0, 1_700_000_000_000, 1 << 62):
            index.lookup(target)
        for n in range(min(index.entries, 4)):
            index.entry(n)
        if writable:
            index.truncate_to(base + 3)


def index_files(data: bytes) -> None:
    """The offset and time index loaders and their checks and lookups."""
    kind, base, writable, body = index_input(data)
    twin = fresh_twin()
    suffix = (".index", ".timeindex")[kind]
    path = f"{INDEX_DIRECTORY}/{base:020d}{suffix}"
    write_file(twin, path, body)
    (offset_index, time_index)[kind](twin, path, base, writable)


def txn_index(data: bytes) -> None:
    """The .txnindex reader: load, checks, every query a read makes."""
    _, base, _, body = index_input(data)
    twin = fresh_twin()
    path = f"{INDEX_DIRECTORY}/{base:020d}.txnindex"
    write_file(twin, path, body)
    index = TransactionIndex(twin, path, base)
    try:
        index.sanity_check()
        index.all_entries()
        for fetch_offset, upper in ((base, base + 100), (0, 1 << 62), (base + 7, base + 8)):
            aborted, _ = index.collect_aborted(fetch_offset, upper)
            for txn in aborted:
                if txn.last_offset < fetch_offset or txn.first_offset >= upper:
                    raise FuzzFinding(f"collect_aborted({fetch_offset}, {upper}) kept {txn}")
        index.truncate_to(base + 5)
    finally:
        index.close()


# --- producer snapshots -------------------------------------------------------------------------

SNAPSHOT_CRC_START = 6  # version int16 and the CRC itself are not covered (docs/format.md §8)


def producer_snapshot(data: bytes) -> None:
    """The .snapshot reader; a snapshot it accepts must write back to bytes it reads the same."""
    flags, body = split_flags(data)
    if flags & FIX_CRC and len(body) >= SNAPSHOT_CRC_START:
        crc = PRIMITIVES.crc32c(body[SNAPSHOT_CRC_START:])
        body = body[:2] + struct.pack(">I", crc) + body[SNAPSHOT_CRC_START:]
    snapshot_offset = int.from_bytes(body[-2:] or b"\0", "big")
    table = PRODUCER_STATE.ProducerStateTable()
    table.load_snapshot(body, snapshot_offset)
    written = table.snapshot()
    again = PRODUCER_STATE.ProducerStateTable()
    again.load_snapshot(written, snapshot_offset)
    if again.snapshot() != written:
        raise FuzzFinding("a loaded snapshot does not round-trip through snapshot()")
    table.first_unstable_offset()
    table.open_transactions()


# --- checkpoints and eoslog.meta --------------------------------------------------------------


def checkpoint(data: bytes) -> None:
    """checkpoints.decode_offsets, decode_aborted_counts and decode_confirmed_log_starts
    (ValueError by contract) and the file readers around them; the same bytes are offered to
    every format (to the checksummed one also with a matching CRC line after them)."""
    twin = fresh_twin()
    write_file(twin, "/p/recovery-point-offset-checkpoint", data)
    write_file(twin, f"/p/{checkpoints.ABORTED_TXNS_FILE}", data)
    counts, unreadable = checkpoints.read_believed_aborted_counts(twin, "/p")
    try:
        decoded_counts = checkpoints.decode_aborted_counts(data)
    except KafkaException:
        if unreadable is None:
            raise FuzzFinding("read_believed_aborted_counts believed a malformed file") from None
    else:
        if counts != decoded_counts:
            raise FuzzFinding(f"read counts {counts} != decode_aborted_counts {decoded_counts}")
        again_counts = checkpoints.decode_aborted_counts(
            checkpoints.encode_aborted_counts(decoded_counts)
        )
        if again_counts != decoded_counts:
            raise FuzzFinding(f"counts round trip changed {decoded_counts} into {again_counts}")
    for confirmed_file in (data, data + b"crc32c=%08x\n" % primitives.crc32c(data)):
        try:
            confirmed = checkpoints.decode_confirmed_log_starts(confirmed_file)
        except KafkaException:
            continue
        again_confirmed = checkpoints.decode_confirmed_log_starts(
            checkpoints.encode_confirmed_log_starts(confirmed)
        )
        if again_confirmed != confirmed:
            raise FuzzFinding(f"log starts round trip changed {confirmed} into {again_confirmed}")
    read = checkpoints.read_offsets(twin, "/p/recovery-point-offset-checkpoint")
    decoded = checkpoints.decode_offsets(data)
    if read != decoded:
        raise FuzzFinding(f"read_offsets {read} != decode_offsets {decoded}")
    again = checkpoints.decode_offsets(checkpoints.encode_offsets(decoded))
    if again != decoded:
        raise FuzzFinding(f"checkpoint round trip changed {decoded} into {again}")


META_HEADER = struct.Struct(">4shI")


def meta(data: bytes) -> None:
    """eoslog.log.meta_file.read (what Broker._load reads) over an eoslog.meta holding the input
    (with FIX_CRC: the input is the JSON payload under a valid header and CRC, the forged-meta
    case)."""
    flags, body = split_flags(data)
    if flags & FIX_CRC:
        body = META_HEADER.pack(b"EOSM", 1, PRIMITIVES.crc32c(body)) + body
    twin = fresh_twin()
    write_file(twin, "/p/eoslog.meta", body)
    read = meta_file.read(twin, "/p/eoslog.meta", LogConfig())
    for name, metadata in ({} if read is None else read.topics).items():
        if os.sep in name or name in (".", "..") or not name:
            raise FuzzFinding(f"eoslog.meta names topic {name!r}, which is no valid topic name")
        if metadata.num_partitions < 1:
            raise FuzzFinding(f"eoslog.meta gives {name!r} {metadata.num_partitions} partitions")


# --- internal-topic records -------------------------------------------------------------------


def _round_trip(decoded: Any, encode: Callable[[], Any], decode: Callable[[Any], Any]) -> None:
    again = decode(encode())
    if again != decoded:
        raise FuzzFinding(f"round trip changed {decoded!r:.200} into {again!r:.200}")


def internal_records(data: bytes) -> None:
    """The __transaction_state and __consumer_offsets key and value decoders (the first byte
    chooses one); what decodes must encode back to what decodes the same."""
    flags, body = split_flags(data)
    version = struct.unpack(">h", body[:2])[0] if len(body) >= 2 else 0
    choice = flags % 4
    if choice == 0:
        txn_id = transaction_log.decode_key(body)
        _round_trip(txn_id, lambda: transaction_log.encode_key(txn_id), transaction_log.decode_key)
    elif choice == 1:
        value = transaction_log.decode_value(body)
        _round_trip(
            value,
            lambda: transaction_log.encode_value(value, version),
            transaction_log.decode_value,
        )
    elif choice == 2:
        key = offsets_log.decode_key(body)
        encode_key = (
            offsets_log.encode_offset_key
            if isinstance(key, offsets_log.OffsetCommitKey)
            else offsets_log.encode_group_key
        )
        _round_trip(key, lambda: encode_key(key), offsets_log.decode_key)  # type: ignore[arg-type]
    else:
        offset_value = offsets_log.decode_offset_value(body)
        _round_trip(
            offset_value,
            lambda: offsets_log.encode_offset_value(offset_value, version),
            offsets_log.decode_offset_value,
        )


# --- a whole partition directory: recovery, producer-state load, reads ----------------------------


TARGETS: dict[str, Target] = {
    target.name: target
    for target in (
        Target("codec_native", codec_native),
        Target("codec_pure", codec_pure),
        Target("codec_differential", codec_differential),
        Target("decompress", decompress),
        Target("partition_directory", partition_target.partition_directory),
        Target("offline_scan", partition_target.offline_scan),
        Target("index_files", index_files),
        Target("txn_index", txn_index),
        Target("producer_snapshot", producer_snapshot),
        Target("checkpoint", checkpoint, (KafkaException, ValueError)),
        Target("meta", meta),
        Target("internal_records", internal_records),
        Target("wire_stream", wire_target.wire_stream),
        Target("wire_stream_sasl", wire_target.wire_stream_sasl),
    )
}

__all__ = ["TARGETS", "FuzzFinding", "Target", "run_checked"]
