"""The checkpoint files at the log-directory root: Kafka's recovery point and log-start offset
checkpoints (docs/format.md §9.1; text: version, count, then `topic partition offset` lines), the
clean-shutdown marker, and eoslog's own aborted-transaction checkpoint (below). Written
through the fs seam: temp file, sync, rename, sync dir.

The aborted-transaction checkpoint (`eoslog-aborted-txn-checkpoint`, eoslog's, not Kafka's)
records how many `.txnindex` entries end below a partition's recovery point, per segment, so
that a `.txnindex` deleted or emptied while the directory was closed is seen at the next open
(Kafka creates the file with the first abort, so a segment without one reads the same as a
segment whose index was lost). Same text form as Kafka's checkpoints: a version line (0), a
count line, then one line per partition,

    topic partition covered_to base=entries base=entries ...

where covered_to is the recovery point the counts were taken at, and each `base=entries`
names a segment with at least one entry ending below covered_to (bases increasing); a
segment below covered_to that is not named had none.

The confirmed log-start checkpoint (`eoslog-log-start-checkpoint`, eoslog's) holds the same
entries as Kafka's log-start checkpoint, in its text form, then a last line
`crc32c=<8 hex digits>`: the CRC-32C of every byte before it. It is written just before
Kafka's file, from the same values. A log start inside a segment (where delete_records, and
only it, puts one) is believed at open only when this file confirms it: a damaged digit in
Kafka's file, which carries no checksum, must never hide records (docs/format.md §9.1)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from typing import Final, NamedTuple

from eoslog import limits
from eoslog.errors import CorruptCheckpointError
from eoslog.fs import FileHandle, FileSystem, create_temporary
from eoslog.record import primitives

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
# Kafka's log cleaner's file, in the same form: per partition, the offset below which the
# cleaner has cleaned (docs/design.md "Compaction"); below it gaps between batches are legal.
CLEANER_OFFSET_FILE = "cleaner-offset-checkpoint"
CONFIRMED_LOG_START_FILE = "eoslog-log-start-checkpoint"
_CRC_LINE: Final = re.compile(rb"crc32c=([0-9a-f]{8})")
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
_VERSION = 0
# Decimal ASCII without sign or spaces: Python's int() alone would also take " 5", "+5",
# "5_0" and non-ASCII digits, which no checkpoint writer produces.
_NUMBER: Final = re.compile(rb"0|[1-9][0-9]{0,18}")
_ENTRY: Final = re.compile(rb"([!-~]+) (0|[1-9][0-9]{0,9}) (0|[1-9][0-9]{0,18})")
_PARTITION_MAX: Final = (1 << 31) - 1
_OFFSET_MAX: Final = (1 << 63) - 1

# A partition as a plain (topic, partition) tuple, the key of per-partition maps; not the
# client's eoslog.TopicPartition class, which also carries an offset.
PartitionKey = tuple[str, int]
ABORTED_TXNS_FILE = "eoslog-aborted-txn-checkpoint"
_ABORTED_LINE: Final = re.compile(
    rb"([!-~]+) (0|[1-9][0-9]{0,9}) (0|[1-9][0-9]{0,18})"
    rb"((?: (?:0|[1-9][0-9]{0,18})=[1-9][0-9]{0,9})*)"
)
_ENTRIES_MAX: Final = (1 << 31) - 1


class AbortedCounts(NamedTuple):
    """One partition's line of the aborted-transaction checkpoint: its .txnindex entries
    ending below covered_to, by segment base offset (segments with none left out)."""

    covered_to: int
    by_segment: dict[int, int]

    def agrees(self, base_offset: int, entries_ending_below: Callable[[int], int]) -> bool:
        """Whether the segment at base_offset holds the counted number of entries ending
        below covered_to (entries_ending_below(offset) counts them); a segment from
        covered_to on is not covered. Everything below covered_to was durable, .txnindex
        included, when the count was taken, and an entry ends at an ABORT marker, so that
        number never changes while the segment exists."""
        if base_offset >= self.covered_to:
            return True
        return entries_ending_below(self.covered_to) == self.by_segment.get(base_offset, 0)


def write_atomically(fs: FileSystem, path: str, data: bytes) -> None:
    """Replace the file at path with data so that a crash leaves the old or the new content,
    never a mix: write a temp file, sync it, rename it over, sync the directory.
    Not thread-safe for one path: the caller holds the lock that serializes writers of that
    file (two writers would share `path.tmp`, and one's rename would take the other's file).
    The temp file is created exclusively (fs.create_temporary), so a symlink or a stale file
    planted at `path.tmp` never receives the write."""
    temporary = path + ".tmp"
    handle = create_temporary(fs, temporary)
    try:
        handle.pwrite(data, 0)
        handle.sync()
    finally:
        handle.close()
    fs.rename(temporary, path)
    fs.sync_dir(os.path.dirname(path) or ".")


def encode_offsets(offsets: Mapping[PartitionKey, int]) -> bytes:
    lines = [str(_VERSION), str(len(offsets))]
    lines += [
        f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())
    ]
    return ("\n".join(lines) + "\n").encode()


def decode_offsets(data: bytes, path: str = "checkpoint") -> dict[PartitionKey, int]:
    """The entries of a checkpoint file. CorruptCheckpointError naming `path` and the byte
    where it goes wrong if it is malformed: a bad header or count, a line that is not
    `topic partition offset` in decimal ASCII, an offset outside 0 .. 2**63 - 1, or the same
    partition twice. (Kafka reads a file it cannot parse as holding no entries; eoslog's
    callers decide what an unreadable file means, so they must be told.)"""
    offsets: dict[PartitionKey, int] = {}
    for start, line in _entry_lines(data, path):
        entry = _ENTRY.fullmatch(line)
        if entry is None:
            raise _malformed(path, start, "expected `topic partition offset`")
        topic, partition, offset = entry.group(1).decode(), int(entry[2]), int(entry[3])
        if partition > _PARTITION_MAX or offset > _OFFSET_MAX or (topic, partition) in offsets:
            raise _malformed(path, start, "a value out of range or a repeated entry")
        offsets[(topic, partition)] = offset
    return offsets


def _entry_lines(data: bytes, path: str) -> list[tuple[int, bytes]]:
    """The entry lines of a checkpoint in the shared text form (version 0, the count, then
    one line each), with the byte each starts at; none for an empty file.
    CorruptCheckpointError for a missing last newline, another version or a wrong count."""
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] != b"":
        raise _malformed(path, len(data), "the last line has no newline")
    lines.pop()
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    if len(lines) < 2 or lines[0] != str(_VERSION).encode():
        raise _malformed(path, 0, f"not a version {_VERSION} checkpoint")
    if not _NUMBER.fullmatch(lines[1]) or int(lines[1]) != len(lines) - 2:
        raise _malformed(path, starts[1], f"the count does not match the {len(lines) - 2} entries")
    return list(zip(starts[2:], lines[2:], strict=False))


def _malformed(path: str, position: int, what: str) -> CorruptCheckpointError:
    return CorruptCheckpointError(
        f"{path} is malformed at byte {position}: {what}",
        position=position,
        reason=f"malformed: {what}",
    )


def entry_positions(fs: FileSystem, path: str) -> dict[PartitionKey, int]:
    """The byte each partition's line starts at in the checkpoint at path (Kafka's form, or
    the entries of eoslog's log-start checkpoint), for a report naming the line; none for a
    file that is missing or cannot be read."""
    try:
        lines = _entry_lines(_read_checkpoint_bytes(fs, path), path)
    except CorruptCheckpointError:
        return {}
    positions: dict[PartitionKey, int] = {}
    for start, line in lines:
        topic, _, rest = line.partition(b" ")
        partition = rest.partition(b" ")[0]
        if partition.isdigit():
            positions.setdefault((topic.decode(errors="replace"), int(partition)), start)
    return positions


def read_offsets(fs: FileSystem, path: str) -> dict[PartitionKey, int]:
    """The checkpoint's entries; none if the file is missing (docs/format.md §9.1).
    CorruptCheckpointError if it cannot be read as a checkpoint (decode_offsets), or if it is
    larger than limits.checkpoint_file_bytes_max (refused before anything is read)."""
    return decode_offsets(_read_checkpoint_bytes(fs, path), path)


def _read_checkpoint_bytes(fs: FileSystem, path: str) -> bytes:
    """A checkpoint file's bytes (none if it is missing); CorruptCheckpointError past
    limits.checkpoint_file_bytes_max, refused before anything is read."""
    if not fs.exists(path):
        return b""
    handle = fs.open(path, read_only=True)
    try:
        return read_small_file(handle, path, limits.checkpoint_file_bytes_max)
    except ValueError as error:
        raise CorruptCheckpointError(str(error)) from None
    finally:
        handle.close()


def read_believed_offsets(fs: FileSystem, path: str) -> tuple[dict[PartitionKey, int], str | None]:
    """read_offsets for an open: the entries, and, for a file that cannot be read, no
    entries and the reason, which the caller reports (a partition without an entry then has
    no value it can trust, which is safe: see eoslog.log.recovery)."""
    try:
        return read_offsets(fs, path), None
    except CorruptCheckpointError as error:
        return {}, f"{error}; none of its entries is believed"


def write_offsets(fs: FileSystem, path: str, offsets: Mapping[PartitionKey, int]) -> None:
    write_atomically(fs, path, encode_offsets(offsets))


def encode_aborted_counts(counts: Mapping[PartitionKey, AbortedCounts]) -> bytes:
    lines = [str(_VERSION), str(len(counts))]
    for (topic, partition), (covered_to, by_segment) in sorted(counts.items()):
        segments = "".join(f" {base}={n}" for base, n in sorted(by_segment.items()) if n > 0)
        lines.append(f"{topic} {partition} {covered_to}{segments}")
    return ("\n".join(lines) + "\n").encode()


def decode_aborted_counts(
    data: bytes, path: str = "checkpoint"
) -> dict[PartitionKey, AbortedCounts]:
    """The lines of an aborted-transaction checkpoint. CorruptCheckpointError naming `path`
    and the byte where it goes wrong, as decode_offsets, and for segments out of order or at
    or past covered_to."""
    counts: dict[PartitionKey, AbortedCounts] = {}
    for start, line in _entry_lines(data, path):
        entry = _ABORTED_LINE.fullmatch(line)
        if entry is None:
            raise _malformed(path, start, "expected `topic partition covered_to base=entries ...`")
        topic, partition, covered_to = entry.group(1).decode(), int(entry[2]), int(entry[3])
        pairs = [pair.split(b"=") for pair in entry[4].split()]
        by_segment = {int(base): int(n) for base, n in pairs}
        bases = [int(base) for base, _ in pairs]
        if (
            partition > _PARTITION_MAX
            or covered_to > _OFFSET_MAX
            or (topic, partition) in counts
            or bases != sorted(set(bases))
            or any(base >= covered_to for base in bases)
            or any(n > _ENTRIES_MAX for n in by_segment.values())
        ):
            raise _malformed(path, start, "a value out of range, out of order or repeated")
        counts[(topic, partition)] = AbortedCounts(covered_to, by_segment)
    return counts


def read_believed_aborted_counts(
    fs: FileSystem, root: str
) -> tuple[dict[PartitionKey, AbortedCounts], str | None]:
    """The aborted-transaction checkpoint's lines for an open (read_believed_offsets' rule:
    an unreadable file is no lines, and the reason); none if the file is missing."""
    path = os.path.join(root, ABORTED_TXNS_FILE)
    try:
        return decode_aborted_counts(_read_checkpoint_bytes(fs, path), path), None
    except CorruptCheckpointError as error:
        return {}, f"{error}; none of its entries is believed"


def write_aborted_counts(
    fs: FileSystem, root: str, counts: Mapping[PartitionKey, AbortedCounts]
) -> None:
    write_atomically(fs, os.path.join(root, ABORTED_TXNS_FILE), encode_aborted_counts(counts))


class LogStart(NamedTuple):
    """A partition's checkpointed log start: `offset` from Kafka's log-start checkpoint (or,
    where that is missing or disagrees, from eoslog's), `confirmed` when eoslog's
    checksummed copy holds that offset."""

    offset: int
    confirmed: bool


def encode_confirmed_log_starts(offsets: Mapping[PartitionKey, int]) -> bytes:
    body = encode_offsets(offsets)
    return body + b"crc32c=%08x\n" % primitives.crc32c(body)


def decode_confirmed_log_starts(data: bytes, path: str = "checkpoint") -> dict[PartitionKey, int]:
    """The entries of eoslog's log-start checkpoint; none for an empty file.
    CorruptCheckpointError naming `path` for a missing or wrong CRC line, then as
    decode_offsets."""
    if not data:
        return {}
    body, _, last = data.rstrip(b"\n").rpartition(b"\n")
    crc = _CRC_LINE.fullmatch(last)
    if crc is None or not data.endswith(b"\n") or not body:
        raise _malformed(path, len(body), "expected a last line `crc32c=<8 hex digits>`")
    body += b"\n"
    if int(crc[1], 16) != primitives.crc32c(body):
        raise _malformed(path, len(body), "the CRC-32C does not match the entries")
    return decode_offsets(body, path)


def read_believed_log_starts(
    fs: FileSystem, root: str
) -> tuple[dict[PartitionKey, LogStart], list[str]]:
    """Each partition's log start from Kafka's log-start checkpoint and eoslog's confirmed
    copy, for an open, with the reasons to report (read_believed_offsets' rule: an
    unreadable file has no entries). eoslog's file is written first, so Kafka's may lag it
    after a crash, never lead it: where the two disagree, or Kafka's has no entry, eoslog's
    checksummed value is taken, and confirmed."""
    kafka, kafka_problem = read_believed_offsets(fs, os.path.join(root, LOG_START_OFFSET_FILE))
    path = os.path.join(root, CONFIRMED_LOG_START_FILE)
    problems = [kafka_problem] if kafka_problem else []
    try:
        confirmed = decode_confirmed_log_starts(_read_checkpoint_bytes(fs, path), path)
    except CorruptCheckpointError as error:
        confirmed = {}
        problems.append(f"{error}; none of its entries is believed")
    starts = {key: LogStart(offset, confirmed.get(key) == offset) for key, offset in kafka.items()}
    for key, offset in confirmed.items():
        if kafka.get(key) != offset:
            starts[key] = LogStart(offset, True)
    return starts, problems


def write_log_starts(
    fs: FileSystem,
    root: str,
    offsets: Mapping[PartitionKey, int],
    confirmed: Mapping[PartitionKey, int] | None = None,
) -> None:
    """eoslog's confirmed copy (`confirmed`; None: the same as `offsets`), then Kafka's
    log-start checkpoint (the caller holds the checkpoint lock)."""
    write_atomically(
        fs,
        os.path.join(root, CONFIRMED_LOG_START_FILE),
        encode_confirmed_log_starts(offsets if confirmed is None else confirmed),
    )
    write_offsets(fs, os.path.join(root, LOG_START_OFFSET_FILE), offsets)


def unreadable_checkpoints(fs: FileSystem, root: str) -> list[tuple[str, CorruptCheckpointError]]:
    """Each checkpoint file in the log directory `root` that an open cannot read, with why
    (read by the decoders an open uses; a missing file is not one): the open believes none of
    its entries."""
    decoders: tuple[tuple[str, Callable[[bytes, str], object]], ...] = (
        (RECOVERY_POINT_FILE, decode_offsets),
        (LOG_START_OFFSET_FILE, decode_offsets),
        (CONFIRMED_LOG_START_FILE, decode_confirmed_log_starts),
        (ABORTED_TXNS_FILE, decode_aborted_counts),
    )
    unreadable = []
    for name, decode in decoders:
        path = os.path.join(root, name)
        try:
            decode(_read_checkpoint_bytes(fs, path), path)
        except CorruptCheckpointError as error:
            unreadable.append((path, error))
    return unreadable


def write_clean_shutdown(fs: FileSystem, root: str, broker_epoch: int = 0) -> None:
    payload = json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":"))
    write_atomically(fs, os.path.join(root, CLEAN_SHUTDOWN_FILE), payload.encode())


def take_clean_shutdown(fs: FileSystem, root: str) -> bool:
    """Whether the last close was clean. The marker is deleted at once (and the deletion made
    durable), so a crash while loading forces full recovery next time (docs/format.md §9.1)."""
    path = os.path.join(root, CLEAN_SHUTDOWN_FILE)
    if not fs.exists(path):
        return False
    fs.unlink(path)
    fs.sync_dir(root)
    return True


def read_small_file(handle: FileHandle, path: str, bytes_max: int) -> bytes:
    """The whole of a file that is small by nature (a checkpoint, eoslog.meta), open as
    `handle`. ValueError, before anything is read, if it claims more than bytes_max bytes: a
    sparse or lying file must not cost the size it claims. OSError from the file system."""
    size = handle.size()
    if size > bytes_max:
        raise ValueError(f"{path} is {size} bytes, over the limit of {bytes_max} for its kind")
    return handle.pread(size, 0)
