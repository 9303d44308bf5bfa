"""Offline inspection of segment files: dump-log and verify (read-only, no lock)."""

from __future__ import annotations

import json
from pathlib import Path

from eoslog.coordinator import offsets_log
from eoslog.errors import KafkaException
from eoslog.record import codec, layout
from eoslog.record.types import BatchHeader

_CONTROL_TYPES = {layout.CONTROL_ABORT: "ABORT", layout.CONTROL_COMMIT: "COMMIT"}


def describe_batch(position: int, header: BatchHeader) -> str:
    """One line per batch, with the fields Kafka's DumpLogSegments prints."""
    return (
        f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
        f"count: {header.records_count} baseSequence: {header.base_sequence} "
        f"lastSequence: {header.last_sequence} producerId: {header.producer_id} "
        f"producerEpoch: {header.producer_epoch} "
        f"partitionLeaderEpoch: {header.partition_leader_epoch} "
        f"isTransactional: {str(header.is_transactional).lower()} "
        f"isControl: {str(header.is_control).lower()} position: {position} "
        f"CreateTime: {header.max_timestamp} size: {header.size_in_bytes} "
        f"magic: {header.magic} compresscodec: {_codec_name(header.compression)} "
        f"crc: {header.crc}"
    )


def _codec_name(codec_id: int) -> str:
    return {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}.get(codec_id, "unknown")


def describe_offsets_record(key: bytes | None, value: bytes | None) -> str:
    """A `__consumer_offsets` record decoded as Kafka's dump tool prints it with its offsets
    decoder: the key's type and fields, then the value's version and fields (null for a
    tombstone). Bytes that do not decode are reported, not raised."""
    try:
        if key is None:
            return " key: null"
        decoded = offsets_log.decode_key(key)
        version = int.from_bytes(key[:2], "big", signed=True)
        text = f" key: {json.dumps({'type': str(version), 'data': _fields(decoded)})}"
        if not isinstance(decoded, offsets_log.OffsetCommitKey):
            return text + " payload: (group metadata, not decoded)"
        payload = offsets_log.decode_offset_value(value)
        if payload is None or value is None:
            return text + " payload: null"
        body = {"version": str(int.from_bytes(value[:2], "big")), "data": _fields(payload)}
        return text + f" payload: {json.dumps(body)}"
    except KafkaException as error:
        return f" undecodable: {error}"


def _fields(record: object) -> dict[str, object]:
    names = getattr(record, "__slots__", ())
    return {name: getattr(record, name) for name in names}


def dump_log(path: str, *, print_records: bool = False) -> int:
    data = Path(path).read_bytes()
    offsets_topic = Path(path).parent.name.startswith(offsets_log.CONSUMER_OFFSETS_TOPIC + "-")
    print(f"Dumping {path}")
    end = 0
    for position, header in codec.iter_headers(data):
        print(describe_batch(position, header))
        end = position + header.size_in_bytes
        if print_records:
            for record in codec.batch_records(data, position):
                if header.is_control and record.key is not None and len(record.key) >= 4:
                    kind = int.from_bytes(record.key[2:4], "big", signed=True)
                    print(
                        f"| offset: {record.offset} endTxnMarker: "
                        f"{_CONTROL_TYPES.get(kind, 'UNKNOWN')}"
                    )
                    continue
                print(
                    f"| offset: {record.offset} CreateTime: {record.timestamp} "
                    f"keySize: {-1 if record.key is None else len(record.key)} "
                    f"valueSize: {-1 if record.value is None else len(record.value)} "
                    f"headerKeys: [{','.join(k for k, _ in record.headers)}]"
                    + (describe_offsets_record(record.key, record.value) if offsets_topic else "")
                )
    if end < len(data):
        print(f"Found {len(data) - end} bytes at the end that do not form a whole batch")
    return 0


def verify_log(path: str) -> int:
    """Check every batch's CRC and structure; exit status 1 at the first bad one."""
    data = memoryview(Path(path).read_bytes())
    batches = 0
    records = 0
    end = 0
    position = 0
    try:
        for position, header in codec.iter_headers(data):
            codec.validate_batch(
                data[position : position + header.size_in_bytes],
                batch_bytes_max=len(data),
                from_client=False,
            )
            batches += 1
            records += header.records_count
            end = position + header.size_in_bytes
    except KafkaException as error:
        print(
            f"{path}: {type(error).__name__} in the batch at byte {position} "
            f"(after {batches} good batches): {error}"
        )
        return 1
    tail = len(data) - end
    print(
        f"{path}: {batches} batches, {records} records, all valid"
        + (f"; {tail} trailing bytes do not form a whole batch" if tail else "")
    )
    return 0
