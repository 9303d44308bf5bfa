"""Offline inspection of segment files: `eoslog dump-log` and `eoslog verify`.

Both are read-only and take no lock, so they may run while the owner writes (a last segment
being appended to may then show a torn tail). Both read a .log in bounded pieces with
eoslog.log.segment_check's walk, the one `eoslog repair` validates its cut with, which checks
framing, CRC and offset continuity as recovery does: a multi-GiB segment costs a chunk of
memory (or one batch, when a batch is larger), never the file.

verify reports every problem it finds with its byte position, carrying on past damage to the
next valid batch, and exits 1 if there is any; a torn tail (a partial last batch, what a crash
mid-write leaves and the next unclean open cuts) is a warning.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from typing import Final

import numpy as np

from eoslog import limits
from eoslog.coordinator import offsets_log
from eoslog.errors import KafkaException, NotASegmentFileError
from eoslog.fs import FileHandle, FileSystem, PosixFileSystem
from eoslog.log.segment_check import (
    SEGMENT_LOG_NAME,
    SegmentWalk,
    WalkStop,
    continuity_problem,
    find_resumption,
)
from eoslog.log.segment_reads import LOG_SUFFIX, offset_from_file_name
from eoslog.record import codec, control
from eoslog.record.compression import CODEC_NAMES
from eoslog.record.types import BatchHeader

# A partition directory is `<topic>-<partition>` (docs/format.md §5.1); a topic being deleted has a
# longer suffix and is not verified.
_PARTITION_DIRECTORY: Final = re.compile(r".+-\d+")


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
    names = {codec: name for name, codec in CODEC_NAMES.items()}
    return names.get(codec_id, "unknown")


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


def check_segment_file(path: str, *, segment_name: bool = True) -> None:
    """NotASegmentFileError unless `path` is a regular file named like a segment's .log (any
    name when not segment_name); FileNotFoundError if it is missing. The kind is checked
    before anything opens it: opening a FIFO would block. (The fs seam has no stat; these
    command-line tools read real files only.)"""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise NotASegmentFileError(f"{path} is not a regular file")
    if segment_name and not SEGMENT_LOG_NAME.fullmatch(os.path.basename(path)):
        raise NotASegmentFileError(
            f"{path} is not a segment's .log (its name must be 20 digits and .log)"
        )


def dump_log(path: str, *, print_records: bool = False) -> int:
    """Print every batch (and with print_records every record) of a .log up to the end of
    its valid batches; exit status 1 if damage stops the dump before the end."""
    check_segment_file(path, segment_name=False)
    name = os.path.basename(path)
    base = offset_from_file_name(name) if SEGMENT_LOG_NAME.fullmatch(name) else None
    offsets_topic = os.path.basename(os.path.dirname(os.path.abspath(path))).startswith(
        offsets_log.CONSUMER_OFFSETS_TOPIC + "-"
    )
    print(f"Dumping {path}")
    handle = PosixFileSystem().open(path, read_only=True)
    try:
        size = handle.size()
        walk = SegmentWalk(handle, size, base)
        for chunk_position, chunk, infos in walk:
            for position in infos["position"].tolist():
                header = codec.read_header(chunk, position)
                print(describe_batch(chunk_position + position, header))
                if print_records:
                    _print_records(chunk, position, header, offsets_topic)
    finally:
        handle.close()
    if walk.stop is None:
        return 0
    if walk.stop.torn:
        print(f"Found {size - walk.stop.position} bytes at the end that do not form a whole batch")
        return 0
    print(f"Stopped at byte {walk.stop.position}: {walk.stop.description}")
    return 1


def _print_records(chunk: bytes, position: int, header: BatchHeader, offsets_topic: bool) -> None:
    for record in codec.batch_records(chunk, position):
        kind = control.read_type(record.key) if header.is_control else None
        if kind is not None:
            name = control.TYPE_NAMES.get(kind, "UNKNOWN")
            print(f"| offset: {record.offset} endTxnMarker: {name}")
            continue
        print(
            f"| offset: {record.offset} CreateTime: {record.timestamp} "
            f"keySize: {-1 if record.key is None else len(record.key)} "
            f"valueSize: {-1 if record.value is None else len(record.value)} "
            f"headerKeys: [{','.join(k for k, _ in record.headers)}]"
            + (describe_offsets_record(record.key, record.value) if offsets_topic else "")
        )


@dataclass
class _Tally:
    """What a verification found so far; problems are printed as they are found."""

    batches: int = 0
    records: int = 0
    errors: int = 0
    warnings: int = 0

    def problem(self, path: str, position: int, text: str, *, error: bool = True) -> None:
        print(f"{path}: {'error' if error else 'warning'} at byte {position}: {text}")
        if error:
            self.errors += 1
        else:
            self.warnings += 1

    def summary(self, what: str) -> str:
        if self.errors:
            return (
                f"{what}: {self.batches} valid batches, {self.records} records, "
                f"{self.errors} problems found"
            )
        warnings = f"; {self.warnings} warnings" if self.warnings else ""
        return f"{what}: {self.batches} batches, {self.records} records, all valid{warnings}"


def verify(path: str) -> int:
    """`eoslog verify PATH`: a segment's .log, a partition directory or a log directory.
    Exit status 0 when every batch is valid (warnings allowed), 1 when a problem was found."""
    if os.path.isdir(path):
        return verify_directory(path)
    return verify_log(path)


def verify_log(path: str) -> int:
    """Check every batch of one segment's .log: framing, CRC, offsets continuing from the
    file name's base offset, and every record (as a Kafka leader validates an append)."""
    check_segment_file(path)
    tally = _Tally()
    _verify_segment(PosixFileSystem(), path, tally)
    print(tally.summary(path))
    return 1 if tally.errors else 0


def verify_directory(path: str) -> int:
    """Check every segment of a partition directory, or of every partition of a log
    directory, and that each segment starts where the previous one ends.
    NotASegmentFileError for a directory holding neither."""
    fs = PosixFileSystem()
    tally = _Tally()
    names = fs.listdir(path)
    if any(SEGMENT_LOG_NAME.fullmatch(name) for name in names):
        partitions = [path]
    else:
        partitions = [
            os.path.join(path, name)
            for name in names
            if _PARTITION_DIRECTORY.fullmatch(name) and os.path.isdir(os.path.join(path, name))
        ]
    if not partitions:
        raise NotASegmentFileError(
            f"{path} holds neither segment .log files nor partition directories (topic-N)"
        )
    segments = sum(_verify_partition(fs, directory, tally) for directory in partitions)
    print(tally.summary(f"{path}: {segments} segments in {len(partitions)} partitions"))
    return 1 if tally.errors else 0


def _verify_partition(fs: FileSystem, directory: str, tally: _Tally) -> int:
    """Verify a partition's segments in order; returns how many there are."""
    names = fs.listdir(directory)
    for name in names:
        if name.endswith(LOG_SUFFIX) and not SEGMENT_LOG_NAME.fullmatch(name):
            text = "not a segment name (20 digits and .log): not verified"
            tally.problem(os.path.join(directory, name), 0, text, error=False)
    segments = [name for name in names if SEGMENT_LOG_NAME.fullmatch(name)]
    previous_end: int | None = None
    for name in segments:
        path = os.path.join(directory, name)
        problem = None if previous_end is None else continuity_problem(previous_end, int(name[:20]))
        if problem is not None:
            tally.problem(path, 0, f"the segment's {problem}, where the previous segment ends")
        try:
            check_segment_file(path)
        except NotASegmentFileError as error:
            tally.problem(path, 0, str(error))
            previous_end = None
            continue
        previous_end = _verify_segment(fs, path, tally)
    return len(segments)


def _verify_segment(fs: FileSystem, path: str, tally: _Tally) -> int | None:
    """Walk one segment, reporting each problem; returns the offset after its last batch,
    or None if it has damage (its end is then unknown)."""
    handle = fs.open(path, read_only=True)
    try:
        return _walk_reporting(handle, path, offset_from_file_name(os.path.basename(path)), tally)
    finally:
        handle.close()


def _walk_reporting(handle: FileHandle, path: str, base: int, tally: _Tally) -> int | None:
    """The valid batches from the segment start, then after each damage from the next valid
    batch on (the offsets there must not go back), until the end."""
    size = handle.size()
    errors_before = tally.errors
    walk = SegmentWalk(handle, size, base)
    floor: int | None = None  # after damage: the offsets must resume at or above this
    epoch: tuple[int, int] | None = None  # the last batch's leader epoch and position
    while True:
        for chunk_position, chunk, infos in walk:
            first = int(infos["base_offset"][0])
            if floor is not None and first < floor:
                where = chunk_position + int(infos["position"][0])
                tally.problem(path, where, continuity_problem(floor, first) or "")
            floor = None
            epoch = _check_leader_epochs(path, chunk_position, infos, epoch, tally)
            _validate_records(path, chunk_position, chunk, infos, tally)
        if walk.stop is None:
            break
        resume = find_resumption(handle, walk.stop.position, size)
        _report_stop(path, size, walk.stop, resume, tally)
        if resume is None:
            break
        floor = walk.next_offset
        walk = SegmentWalk(handle, size, None, start=resume)
    return walk.next_offset if tally.errors == errors_before else None


def _report_stop(path: str, size: int, stop: WalkStop, resume: int | None, tally: _Tally) -> None:
    if resume is not None:
        text = (
            f"{stop.description}; valid batches resume at byte {resume}: damage in the middle "
            f"of the log, which an open refuses (and `eoslog repair` can cut)"
        )
        tally.problem(path, stop.position, text)
    elif stop.torn:
        text = (
            f"{size - stop.position} trailing bytes do not form a whole batch "
            f"({stop.description}): a torn tail, which the next unclean open cuts"
        )
        tally.problem(path, stop.position, text, error=False)
    else:
        tally.problem(path, stop.position, stop.description)


def _check_leader_epochs(
    path: str,
    chunk_position: int,
    infos: np.ndarray,
    previous: tuple[int, int] | None,
    tally: _Tally,
) -> tuple[int, int]:
    """Report every batch whose partition leader epoch is below the previous batch's: epochs
    never decrease along a Kafka log, and the field is outside the CRC, so a drop means one
    of the two was damaged (eoslog writes 0 and reads nothing from it, so no record read
    changes). Returns the last batch's (epoch, position) for the next chunk."""
    epochs = infos["partition_leader_epoch"].astype(np.int64)
    positions = chunk_position + infos["position"]
    if previous is not None:
        epochs = np.concatenate(([previous[0]], epochs))
        positions = np.concatenate(([previous[1]], positions))
    for index in (np.flatnonzero(epochs[1:] < epochs[:-1]) + 1).tolist():
        tally.problem(
            path,
            int(positions[index]),
            f"partition leader epoch {epochs[index]} is below the previous batch's "
            f"({epochs[index - 1]}, at byte {positions[index - 1]}): epochs never decrease "
            f"along a log, so one of the two is damaged",
        )
    return int(epochs[-1]), int(positions[-1])


def _validate_records(
    path: str, chunk_position: int, chunk: bytes, infos: np.ndarray, tally: _Tally
) -> None:
    """Every record of each batch, as a Kafka leader checks an append (the walk checked the
    framing, CRC and offsets already)."""
    view = memoryview(chunk)
    for position, size in zip(infos["position"].tolist(), infos["size"].tolist(), strict=True):
        try:
            codec.validate_batch(
                view[position : position + size],
                batch_bytes_max=limits.batch_bytes_max,
                from_client=False,
            )
        except KafkaException as error:
            # The codec names the batch's position in the bytes given, here always 0.
            text = str(error).removesuffix(" (batch at byte 0)")
            tally.problem(path, chunk_position + position, f"{type(error).__name__}: {text}")
    tally.batches += len(infos)
    tally.records += int(infos["records_count"].sum())
