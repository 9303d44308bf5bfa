"""`eoslog dump-log` on a .log: what Kafka's kafka-dump-log.sh (DumpLogSegments) prints for
the same file, line for line: a line per batch with its header fields, its position, its CRC
and whether the CRC holds (`isvalid`); with deep iteration a line per record (`| offset: ...`),
end-transaction markers typed (`endTxnMarker: COMMIT coordinatorEpoch: 0`); with
print-data-log each record's key and payload, as UTF-8 text (bytes that are not UTF-8 as
backslash escapes) or through the `__consumer_offsets` or `__transaction_state` decoder.

Read-only and lock-free, in bounded pieces (eoslog.log.segment_check's walk: a chunk, or one
batch when a batch is larger). Where Kafka's tool stops at the first batch that does not frame,
this one reports the damage with its byte, prints the damaged batch's header with
`isvalid: false` when the header reads, and carries on from the next valid batch (the one
`eoslog verify` would name), so one bad byte does not hide the rest of the file.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from eoslog import limits
from eoslog._ext import scan
from eoslog.coordinator import offsets_log, transaction_log
from eoslog.coordinator.transaction_state import TransactionState
from eoslog.errors import KafkaException
from eoslog.fs import FileHandle, PosixFileSystem
from eoslog.log import view_open
from eoslog.log.segment_check import (
    SEGMENT_LOG_NAME,
    SegmentWalk,
    WalkStop,
    find_resumption,
    zero_tail,
)
from eoslog.log.segment_reads import offset_from_file_name
from eoslog.progress import Advance, byte_progress
from eoslog.record import codec, control, layout
from eoslog.record.compression import CODEC_NAMES
from eoslog.record.types import BatchHeader, Record

# Kafka's TimestampType names, by the batch attribute's timestamp-type bit.
_TIMESTAMP_TYPES: Final = ("CreateTime", "LogAppendTime")
_CODEC_BY_ID: Final = {codec_id: name for name, codec_id in CODEC_NAMES.items()}
# Kafka's int32 sequence numbers wrap to 0 after this (DefaultRecordBatch.incrementSequence).
_SEQUENCE_MAX: Final = (1 << 31) - 1

# A record's key and payload as printed; None leaves the field out (Kafka prints no `key:` for
# a record without one).
Decoded = tuple[str | None, str | None]
Decoder = Callable[[Record], Decoded]


@dataclass(frozen=True)
class DumpOptions:
    """kafka-dump-log.sh's options, implications applied: print_data_log implies
    deep_iteration, and a decoder implies print_data_log."""

    deep_iteration: bool = False
    print_data_log: bool = False
    offsets_decoder: bool = False
    transaction_log_decoder: bool = False
    # One JSON object per line instead of Kafka's text (`--json`): emit().
    as_json: bool = False

    @classmethod
    def of(
        cls,
        *,
        deep_iteration: bool = False,
        print_data_log: bool = False,
        offsets_decoder: bool = False,
        transaction_log_decoder: bool = False,
        as_json: bool = False,
    ) -> DumpOptions:
        data = print_data_log or offsets_decoder or transaction_log_decoder
        return cls(deep_iteration or data, data, offsets_decoder, transaction_log_decoder, as_json)


def emit(options: DumpOptions, kind: str, fields: Mapping[str, object], text: str) -> None:
    """Print one line of the dump: `text`, Kafka's line, or with --json the object
    {"type": kind, **fields} (JSON Lines: one object a line, streamed as the file is read)."""
    print(json.dumps({"type": kind, **fields}) if options.as_json else text)


def batch_fields(position: int, header: BatchHeader, *, valid: bool = True) -> dict[str, object]:
    """A batch line's fields as --json gives them (the timestamp's type as a field)."""
    return {
        "baseOffset": header.base_offset,
        "lastOffset": header.last_offset,
        "count": header.records_count,
        "baseSequence": header.base_sequence,
        "lastSequence": _sequence_at(header, header.last_offset_delta),
        "producerId": header.producer_id,
        "producerEpoch": header.producer_epoch,
        "partitionLeaderEpoch": header.partition_leader_epoch,
        "isTransactional": header.is_transactional,
        "isControl": header.is_control,
        "position": position,
        "timestampType": _TIMESTAMP_TYPES[header.timestamp_type],
        "maxTimestamp": header.max_timestamp,
        "size": header.size_in_bytes,
        "magic": header.magic,
        "compresscodec": _CODEC_BY_ID.get(header.compression, "unknown"),
        "crc": header.crc,
        "isvalid": valid,
    }


def describe_batch(position: int, header: BatchHeader, *, valid: bool = True) -> str:
    """One line per batch, with the fields Kafka's DumpLogSegments prints (its
    deleteHorizonMs, set by the log cleaner on batches with tombstones, left out)."""
    return (
        f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
        f"count: {header.records_count} baseSequence: {header.base_sequence} "
        f"lastSequence: {_sequence_at(header, header.last_offset_delta)} "
        f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
        f"partitionLeaderEpoch: {header.partition_leader_epoch} "
        f"isTransactional: {str(header.is_transactional).lower()} "
        f"isControl: {str(header.is_control).lower()} position: {position} "
        f"{_TIMESTAMP_TYPES[header.timestamp_type]}: {header.max_timestamp} "
        f"size: {header.size_in_bytes} magic: {header.magic} "
        f"compresscodec: {_CODEC_BY_ID.get(header.compression, 'unknown')} "
        f"crc: {header.crc} isvalid: {str(valid).lower()}"
    )


def _sequence_at(header: BatchHeader, offset_delta: int) -> int:
    """The sequence of the record offset_delta into the batch (-1 for a batch without)."""
    if header.base_sequence < 0:
        return -1
    return (header.base_sequence + offset_delta) % (_SEQUENCE_MAX + 1)


def dump_log(path: str, options: DumpOptions) -> int:
    """Print the .log at path (after the caller's `Dumping PATH` line); 1 if damage was
    found (each reported where it is), 0 otherwise; a torn tail is reported, not damage."""
    name = os.path.basename(path)
    base = offset_from_file_name(name) if SEGMENT_LOG_NAME.fullmatch(name) else None
    if base is not None:
        emit(options, "logStartingOffset", {"offset": base}, f"Log starting offset: {base}")
    printer = _RecordPrinter(options, _decoder(path, options))
    handle = PosixFileSystem().open(path, read_only=True)
    try:
        size = handle.size()
        with byte_progress(f"dump-log {name}", size) as advance:
            return _walk_printing(handle, name, size, base, printer, advance)
    finally:
        handle.close()


def _walk_printing(
    handle: FileHandle,
    name: str,
    size: int,
    base: int | None,
    printer: _RecordPrinter,
    advance: Advance,
) -> int:
    """Every batch from the start; after damage, from the next valid batch on. Gaps are
    damage unless the segment lies below its partition's cleaner-offset-checkpoint entry."""
    gaps = view_open.segment_compacted(PosixFileSystem(), handle.path)
    walk = SegmentWalk(handle, size, base, gaps=gaps)
    done = 0
    status = 0
    while True:
        for chunk_position, chunk, infos in walk:
            for position in infos["position"].tolist():
                header = codec.read_header(chunk, position)
                where = chunk_position + position
                fields = batch_fields(where, header)
                emit(printer.options, "batch", fields, describe_batch(where, header))
                printer.records(chunk, position, header)
            end = chunk_position + int(infos["position"][-1]) + int(infos["size"][-1])
            advance(end - done)
            done = end
        stop = walk.stop
        if stop is None:
            return status
        options = printer.options
        if stop.torn:
            torn = {"byte": stop.position, "bytes": size - stop.position}
            text = (
                f"Found {size - stop.position} invalid bytes at the end of {name} "
                f"({stop.description}): a torn tail, which the next unclean open cuts"
            )
            emit(options, "tornTail", {**torn, "description": stop.description}, text)
            return status
        if zero_tail(handle, stop.position, size):
            zeros = {"byte": stop.position, "bytes": size - stop.position}
            text = (
                f"The log ends at byte {stop.position} of {name}: {size - stop.position} zero "
                "bytes follow (space an open log extends its active segment by ahead of its "
                "appends; cut at its close)"
            )
            emit(options, "zeroTail", zeros, text)
            return status
        status = 1
        _print_damaged_batch(handle, size, stop, options)
        resume = find_resumption(handle, stop.position, size)
        where = "" if resume is None else f"; valid batches resume at byte {resume}"
        damage = {"byte": stop.position, "description": stop.description, "resumeAt": resume}
        emit(
            options, "damage", damage, f"Damage at byte {stop.position}: {stop.description}{where}"
        )
        if resume is None:
            return status
        walk = SegmentWalk(handle, size, None, start=resume, gaps=gaps)


def _print_damaged_batch(
    handle: FileHandle, size: int, stop: WalkStop, options: DumpOptions
) -> None:
    """The batch line of the batch where the walk stopped, if its header reads and the
    length it claims fits the file and eoslog's batch limit (a length field flipped to 2 GiB
    is not read), with isvalid telling whether its CRC holds."""
    data = handle.pread(layout.HEADER_SIZE, stop.position)
    try:
        header = codec.read_header(data, 0)
    except (KafkaException, ValueError):
        return
    batch_size = header.size_in_bytes
    if header.magic != layout.MAGIC_V2 or stop.position + batch_size > size:
        return
    if batch_size > limits.batch_bytes_max:
        return
    batch = handle.pread(batch_size, stop.position)
    valid = scan.find_valid_batch(batch, 0) == 0
    fields = batch_fields(stop.position, header, valid=valid)
    emit(options, "batch", fields, describe_batch(stop.position, header, valid=valid))


class _RecordPrinter:
    """The record lines of each batch, as deep iteration and print-data-log ask."""

    def __init__(self, options: DumpOptions, decoder: Decoder) -> None:
        self.options = options
        self.decoder = decoder

    def records(self, chunk: bytes, position: int, header: BatchHeader) -> None:
        if not self.options.deep_iteration:
            return
        timestamp_type = _TIMESTAMP_TYPES[header.timestamp_type]
        for record in codec.batch_records(chunk, position):
            sequence = _sequence_at(header, record.offset - header.base_offset)
            header_keys = [key for key, _ in record.headers]
            line = (
                f"| offset: {record.offset} {timestamp_type}: {record.timestamp} "
                f"keySize: {_size(record.key)} valueSize: {_size(record.value)} "
                f"sequence: {sequence} headerKeys: [{','.join(header_keys)}]"
            )
            fields: dict[str, object] = {
                "offset": record.offset,
                "timestampType": timestamp_type,
                "timestamp": record.timestamp,
                "keySize": _size(record.key),
                "valueSize": _size(record.value),
                "sequence": sequence,
                "headerKeys": header_keys,
            }
            if header.is_control:
                text, marker = _describe_control(record)
                line += text
                fields.update(marker)
            elif self.options.print_data_log:
                key, payload = self.decoder(record)
                line += "" if key is None else f" key: {key}"
                line += "" if payload is None else f" payload: {payload}"
                fields.update(_decoded_fields(key, payload, self.decoder is not _as_text))
            emit(self.options, "record", fields, line)


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _describe_control(record: Record) -> tuple[str, dict[str, object]]:
    """A control record's text (appended to its line) and its --json fields."""
    kind = control.read_type(record.key)
    if kind in control.TYPE_NAMES:
        epoch = control.read_coordinator_epoch(record.value)
        name = control.TYPE_NAMES[kind]
        text = f" endTxnMarker: {name} coordinatorEpoch: {epoch}"
        return text, {"endTxnMarker": name, "coordinatorEpoch": epoch}
    number = -1 if kind is None else kind
    return f" controlType: UNKNOWN({number})", {"controlType": number}


def _decoded_fields(key: str | None, payload: str | None, decoded: bool) -> dict[str, object]:
    """A record's key and payload for --json: a decoder's JSON text as the object it
    spells, anything else (text, `<DELETE>`, a decoding error) as a string."""
    fields: dict[str, object] = {}
    for name, text in (("key", key), ("payload", payload)):
        if text is None:
            continue
        fields[name] = text
        if decoded and text.startswith("{"):
            with contextlib.suppress(ValueError):
                fields[name] = json.loads(text)
    return fields


def _decoder(path: str, options: DumpOptions) -> Decoder:
    """The decoder the options name; without one, the one the partition directory's name
    calls for (`__consumer_offsets-N`, `__transaction_state-N`), else UTF-8 text. Kafka's
    tool needs the option named; here the file's place already says what it holds."""
    directory = os.path.basename(os.path.dirname(os.path.abspath(path)))
    if options.offsets_decoder or directory.startswith(offsets_log.CONSUMER_OFFSETS_TOPIC + "-"):
        return describe_offsets_record
    if options.transaction_log_decoder or directory.startswith(
        transaction_log.TRANSACTION_STATE_TOPIC + "-"
    ):
        return describe_transaction_record
    return _as_text


def _as_text(record: Record) -> Decoded:
    return _text(record.key), _text(record.value)


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "backslashreplace")


def _version(data: bytes) -> str:
    return str(int.from_bytes(data[:2], "big", signed=True))


def describe_offsets_record(record: Record) -> Decoded:
    """A `__consumer_offsets` record as Kafka's offsets decoder prints it: the key's type and
    fields as JSON, then the value's version and fields (`<DELETE>` for a tombstone). Bytes
    that do not decode are reported in the key's place, not raised."""
    key, value = record.key, record.value
    try:
        if key is None:
            return f"Error at offset {record.offset}, skipping. The record has no key", None
        decoded = offsets_log.decode_key(key)
        text = json.dumps({"type": _version(key), "data": _fields(decoded)})
        if not isinstance(decoded, offsets_log.OffsetCommitKey):
            return text, "(group metadata, not decoded)"
        payload = offsets_log.decode_offset_value(value)
        if payload is None or value is None:
            return text, "<DELETE>"
        return text, json.dumps({"version": _version(value), "data": _fields(payload)})
    except KafkaException as error:
        return f"Error at offset {record.offset}, skipping. {error}", None


def describe_transaction_record(record: Record) -> Decoded:
    """A `__transaction_state` record as Kafka's transaction log decoder prints it: the
    transactional id, then the value's version and fields with the state by name
    (`<DELETE>` for a tombstone). Bytes that do not decode are reported, not raised."""
    key, value = record.key, record.value
    try:
        if key is None:
            return f"Error at offset {record.offset}, skipping. The record has no key", None
        transactional_id = transaction_log.decode_key(key)
        text = json.dumps({"type": _version(key), "data": {"transactionalId": transactional_id}})
        decoded = transaction_log.decode_value(value)
        if decoded is None or value is None:
            return text, "<DELETE>"
        fields = _fields(decoded)
        # The state by name where Kafka's JSON gives its id byte: read by people first.
        fields["transactionStatus"] = TransactionState(decoded.transaction_status).name
        fields["transactionPartitions"] = [
            {"topic": entry.topic, "partitionIds": list(entry.partition_ids)}
            for entry in decoded.transaction_partitions or ()
        ]
        return text, json.dumps({"version": _version(value), "data": fields})
    except (KafkaException, ValueError) as error:
        return f"Error at offset {record.offset}, skipping. {error}", None


def _fields(record: object) -> dict[str, object]:
    """The record's fields under the camelCase names Kafka's JSON converters give them."""
    names = getattr(record, "__slots__", ())
    return {_camel_case(name): getattr(record, name) for name in names}


def _camel_case(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)
