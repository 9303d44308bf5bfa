"""`eoslog verify` over a partition's segment .log files: every batch's framing, CRC and offset
continuity (eoslog.log.segment_check's walk, the one `eoslog repair` validates its cut with),
each segment starting where the previous one ends, leader epochs, and every record as a Kafka
leader validates an append. A multi-GiB segment costs a chunk of memory (or one batch, when a
batch is larger), never the file.

Damage is judged as the owner's recovery judges it (eoslog.log.recovery's table, through the
same rule, recovery.may_cut, and the facts an open has: the recovery point and the
clean-shutdown marker): bad bytes at the end of the log that an unclean open would cut are a
torn tail, a warning (zeros alone there, what an open log under "commit" or "always" extends
its active segment by, are where the log ends: nothing is reported); anything else is an
error (reads there fail, and an open that rescans the segment refuses it), reported with the
`eoslog repair` command that cuts it away and what that cut discards. After damage the walk
carries on from the next valid batch, so one bad byte does not hide the rest of the file.

Read-only and lock-free: it may run while the owner appends (the last segment is walked up
to the size it had when opened, and its tail may then be a torn one).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

import numpy as np

from eoslog import limits
from eoslog.errors import KafkaException, NotASegmentFileError
from eoslog.fs import FileHandle, FileSystem
from eoslog.log import view_open
from eoslog.log.recovery import may_cut
from eoslog.log.segment_check import (
    SEGMENT_LOG_NAME,
    SegmentWalk,
    WalkStop,
    continuity_problem,
    find_resumption,
    written_since,
    zero_tail,
)
from eoslog.log.segment_reads import LOG_SUFFIX, file_name, parse_file_name
from eoslog.record import codec
from eoslog.verify.facts import ALL_DURABLE, PartitionFacts
from eoslog.verify.report import Report, cut_command


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


def segment_end(fs: FileSystem, path: str, base_offset: int, size: int) -> int:
    """The offset after the valid batches at the start of a segment's .log (its first `size`
    bytes), found by a walk that reports nothing: for checking a file derived from the
    segment on its own."""
    handle = fs.open(path, read_only=True)
    try:
        walk = SegmentWalk(handle, size, base_offset)
        for _ in walk:
            pass
        assert walk.next_offset is not None, "a walk from the segment start knows its offset"
        return walk.next_offset
    finally:
        handle.close()


@dataclass(frozen=True)
class WalkedSegment:
    """A segment as the walk found it: its .log's size when opened (the bytes walked), and
    the offset after its batches (None when damage hides where they end)."""

    base_offset: int
    log_path: str
    size: int
    end_offset: int | None


class PartitionWalk:
    """The segments of one partition directory, walked in order (walk_all) or one at a time
    (walk); problems go to `report` as they are found."""

    def __init__(
        self, fs: FileSystem, report: Report, directory: str, facts: PartitionFacts
    ) -> None:
        self.fs = fs
        self.report = report
        self.directory = directory
        self.facts = facts
        # Segments by the open's rule (segment_reads.parse_file_name): 20 ASCII digits within
        # int64, then .log; any other .log is a stray the open leaves alone.
        parsed = {name: parse_file_name(name) for name in fs.listdir(directory)}
        self.strays = [
            name for name, found in parsed.items() if name.endswith(LOG_SUFFIX) and found is None
        ]
        self.bases = sorted(
            found[0] for found in parsed.values() if found is not None and found[1] == LOG_SUFFIX
        )
        # The first cut an error named: later damage of the partition is cut away with it.
        self.cut: tuple[str, int] | None = None

    def log_path(self, number: int) -> str:
        return os.path.join(self.directory, file_name(self.bases[number], LOG_SUFFIX))

    def walk_all(self) -> list[WalkedSegment]:
        """Every segment, and that each starts where the previous one ends."""
        for name in self.strays:
            text = "not a segment name (20 digits and .log): not verified"
            self.report.warning(os.path.join(self.directory, name), 0, text)
        walked: list[WalkedSegment] = []
        for number in range(len(self.bases)):
            if walked and walked[-1].end_offset is not None:
                self._check_continuity(walked[-1].end_offset, number)
            walked.append(self.walk(number))
        return walked

    def walk(self, number: int) -> WalkedSegment:
        """Walk segment `number` of the partition, reporting each problem."""
        path = self.log_path(number)
        base = self.bases[number]
        try:
            check_segment_file(path)
            handle = self.fs.open(path, read_only=True)
        except NotASegmentFileError as error:
            self.report.problem(path, 0, str(error))
            return WalkedSegment(base, path, 0, None)
        except FileNotFoundError:
            # Retention (or a repair) removed it since the listing.
            self.report.warning(path, 0, "it vanished while the directory was verified")
            return WalkedSegment(base, path, 0, None)
        except OSError as error:  # a symbolic link (refused: UnsafePathError), EIO
            self.report.problem(path, 0, f"cannot be read: {error}")
            return WalkedSegment(base, path, 0, None)
        try:
            size = handle.size()
            return WalkedSegment(base, path, size, self._walk_reporting(handle, number, size))
        finally:
            handle.close()

    def _walk_reporting(self, handle: FileHandle, number: int, size: int) -> int | None:
        """The valid batches from the segment start, then after each damage from the next
        valid batch on (the offsets there must not go back), until the end. Returns the
        offset after the last batch, or None after damage (its end is then unknown)."""
        path = self.log_path(number)
        errors_before = self.report.errors
        walk = SegmentWalk(handle, size, self.bases[number], gaps=self._compacted(number))
        floor: int | None = None  # after damage: the offsets must resume at or above this
        epoch: tuple[int, int] | None = None  # the last batch's leader epoch and position
        while True:
            for chunk_position, chunk, infos in walk:
                first = int(infos["base_offset"][0])
                if floor is not None and first < floor:
                    where = chunk_position + int(infos["position"][0])
                    text = continuity_problem(floor, first) or ""
                    self.report.problem(
                        path, where, f"{text}. {self._repair(number, where, first)}"
                    )
                floor = None
                epoch = self._check_leader_epochs(number, chunk_position, infos, epoch)
                self._validate_records(number, chunk_position, chunk, infos)
                self.report.advance(int(infos["position"][-1]) + int(infos["size"][-1]))
            if walk.stop is None:
                break
            resume = find_resumption(handle, walk.stop.position, size)
            if resume is not None and written_since(handle, size, walk.stop, walk.next_offset):
                break  # the owner appended where this walk read zeros: its end
            next_offset = walk.next_offset if walk.next_offset is not None else floor
            assert next_offset is not None, "a walk from the segment start knows its offset"
            zeros = resume is None and zero_tail(handle, walk.stop.position, size)
            self._report_stop(number, size, walk.stop, resume, next_offset, zeros)
            if resume is None:
                break
            floor = walk.next_offset
            walk = SegmentWalk(handle, size, None, start=resume, gaps=walk.gaps)
        return walk.next_offset if self.report.errors == errors_before else None

    def _report_stop(
        self,
        number: int,
        size: int,
        stop: WalkStop,
        resume: int | None,
        next_offset: int,
        zeros: bool,
    ) -> None:
        """Where the valid batches stop: damage in the middle (valid batches resume later) is
        an error; at the end it is a torn tail if an open would cut it (recovery.may_cut),
        and nothing at all if only zeros follow there (`zeros`: the space an open log under
        "commit" or "always" extends its active segment by, which the next unclean open
        cuts)."""
        path = self.log_path(number)
        if resume is not None:
            text = (
                f"{stop.description}; valid batches resume at byte {resume}: damage in the "
                f"middle of the log: {_UNREADABLE}. "
                f"{self._repair(number, stop.position, next_offset)}"
            )
            self.report.problem(path, stop.position, text)
            return
        what = stop.description
        if stop.torn:
            what = f"{size - stop.position} trailing bytes do not form a whole batch ({what})"
        later_data = self._data_after(number)
        durable_to = self.facts.durable_to(self.fs)
        if may_cut(durable_to, next_offset, stop.discontinuous or later_data):
            if zeros:
                return
            text = (
                f"{what}: a torn tail, which the next unclean open cuts (offsets from "
                f"{next_offset} on)"
            )
            self.report.warning(path, stop.position, text)
            return
        why = _why_not_torn(durable_to, next_offset, stop.discontinuous or later_data)
        repair = self._repair(number, stop.position, next_offset)
        text = f"{what}: {why}, so this is not a torn tail: {_UNREADABLE}. {repair}"
        self.report.problem(path, stop.position, text)

    def _check_continuity(self, previous_end: int, number: int) -> None:
        """A segment must start where the previous one ends: a gap means lost batches, an
        overlap offsets twice. Recovery cuts the log at the previous end (deleting this
        segment and the later ones) only where it may (recovery.may_cut)."""
        base = self.bases[number]
        problem = continuity_problem(previous_end, base)
        if problem is None or (base > previous_end and self._compacted(number - 1)):
            return
        path = self.log_path(number)
        text = f"the segment's {problem}, where the previous segment ends"
        durable_to = self.facts.durable_to(self.fs)
        valid_after = base < previous_end or self._data_after(number - 1)
        if may_cut(durable_to, previous_end, valid_after):
            text += (
                ": unsynced writes a power loss dropped, past what was durable; the next "
                "unclean open cuts the log there, deleting this segment and the later ones"
            )
            self.report.warning(path, 0, text)
            return
        why = _why_not_torn(durable_to, previous_end, valid_after)
        text += (
            f": {why}, so this is not a torn tail: an open that rescans the segment refuses "
            f"it, and one that does not serves a log with a hole or offsets twice. "
            f"{self._repair(number, 0, previous_end)}"
        )
        self.report.problem(path, 0, text)

    def _compacted(self, number: int) -> bool:
        """Whether the cleaner may have left gaps in segment `number` (view_open)."""
        return view_open.segment_compacted(self.fs, self.log_path(number))

    def _data_after(self, number: int) -> bool:
        """Whether a segment after `number` holds bytes (valid data after the damage, in
        recovery's terms)."""
        return any(self._size(later) > 0 for later in range(number + 1, len(self.bases)))

    def _size(self, number: int) -> int:
        try:
            return self.fs.file_size(self.log_path(number))
        except OSError:
            return 0  # vanished, or not a file eoslog reads: reported by its walk

    def _repair(self, number: int, position: int, offset: int) -> str:
        """How to cut the log at `position` of segment `number`, where the batches of offset
        `offset` on begin, and what that discards; or, once a cut was named for an earlier
        problem of the partition, that the cut discards this too."""
        path = self.log_path(number)
        if self.cut is not None and self.cut != (path, position):
            return f"The cut at byte {self.cut[1]} of {self.cut[0]} (above) discards this too."
        self.cut = (path, position)
        discarded = f"{self._size(number) - position} bytes of this segment"
        later = len(self.bases) - number - 1
        if later:
            later_bytes = sum(self._size(n) for n in range(number + 1, len(self.bases)))
            discarded += f" and the {later} later segments, {later_bytes} bytes"
        return (
            f"To discard everything from there on (offsets {offset} on: {discarded}), stop "
            f"every process using the directory and run: {cut_command(path, position)}"
        )

    def _check_leader_epochs(
        self,
        number: int,
        chunk_position: int,
        infos: np.ndarray,
        previous: tuple[int, int] | None,
    ) -> tuple[int, int]:
        """Report every batch whose partition leader epoch is below the previous batch's:
        epochs never decrease along a Kafka log, and the field is outside the CRC, so a drop
        means one of the two was damaged (eoslog writes 0 and reads nothing from it, so no
        record read changes). Returns the last batch's (epoch, position) for the next
        chunk."""
        epochs = infos["partition_leader_epoch"].astype(np.int64)
        positions = chunk_position + infos["position"]
        offsets = infos["base_offset"]
        if previous is not None:
            epochs = np.concatenate(([previous[0]], epochs))
            positions = np.concatenate(([previous[1]], positions))
            offsets = np.concatenate(([-1], offsets))
        for index in (np.flatnonzero(epochs[1:] < epochs[:-1]) + 1).tolist():
            position = int(positions[index])
            repair = self._repair(number, position, int(offsets[index]))
            self.report.problem(
                self.log_path(number),
                position,
                f"partition leader epoch {epochs[index]} is below the previous batch's "
                f"({epochs[index - 1]}, at byte {positions[index - 1]}): epochs never decrease "
                f"along a log, so one of the two is damaged (no record read changes: eoslog "
                f"reads nothing from the field). {repair}",
            )
        return int(epochs[-1]), int(positions[-1])

    def _validate_records(
        self, number: int, chunk_position: int, chunk: bytes, infos: np.ndarray
    ) -> None:
        """Every record of each batch, as a Kafka leader checks an append (the walk checked
        the framing, CRC and offsets already)."""
        view = memoryview(chunk)
        rows = zip(
            infos["position"].tolist(),
            infos["size"].tolist(),
            infos["base_offset"].tolist(),
            strict=True,
        )
        for position, size, offset in rows:
            batch = view[position : position + size]
            try:
                header = codec.read_header(batch)
                if header.records_count != header.last_offset_delta + 1:
                    # Emptied of some records by the cleaner (offset deltas with gaps, which
                    # validate_batch holds to 0..count-1): every record decoded, the
                    # deltas increasing within the batch, its CRC checked.
                    codec.batch_records(batch)
                    continue
                codec.validate_batch(
                    batch, batch_bytes_max=limits.batch_bytes_max, from_client=False
                )
            except KafkaException as error:
                # The codec names the batch's position in the bytes given, here always 0.
                text = str(error).removesuffix(" (batch at byte 0)")
                where = chunk_position + position
                repair = self._repair(number, where, offset)
                text = f"{type(error).__name__}: {text}. {repair}"
                self.report.problem(self.log_path(number), where, text)
        self.report.batches += len(infos)
        self.report.records += int(infos["records_count"].sum())


# What bad bytes an open does not cut as a torn tail mean for the log's users: the owner
# checks every batch it rescans at open (eoslog.log.recovery) and every batch a read returns.
_UNREADABLE = (
    "reads there raise CorruptRecordError, and an open that rescans the segment refuses it"
)


def _why_not_torn(durable_to: int | None, first_lost: int, valid_after: bool) -> str:
    """Why bad bytes (or a missing end) from offset first_lost on are not a torn tail an open
    may cut (eoslog.log.recovery's table)."""
    if durable_to == ALL_DURABLE:
        return "the directory was closed cleanly, so everything in it was durable"
    if durable_to is not None and first_lost < durable_to:
        return f"offsets below the recovery point {durable_to} were durable"
    assert valid_after, "may_cut allows every other case"
    return (
        "valid data follows (a later segment, or a whole batch whose offsets break the "
        "order) and no recovery point is known"
    )
