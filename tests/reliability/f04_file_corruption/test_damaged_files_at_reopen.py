"""Family 4 (docs/reliability.md): corrupted files on disk, then an unclean reopen.

A log directory is written on real files (five segments of two small batches, some lz4) and
closed. Each case copies it, damages one file with plain file I/O (never through the code under
test), removes the clean-shutdown marker (an unclean reopen), opens it and checks:

- .log, every single-bit flip of two small segments: the damage is detected. In the last
  segment (rescanned at an unclean open) open either cuts a torn tail (only the last batch can
  be one) or refuses with CorruptRecordError naming the repair call, and that repair call then
  opens to every record before the damage. In a segment below the recovery point (not
  rescanned, as in Kafka) the reader must get the CRC error. A flip that changes no record (the
  partition leader epoch, which no checksum covers and no reader uses) may pass unnoticed.
  Never: a read that returns a wrong record, or silently skips one.
- .log truncated at every byte of its last batch, written after the last fsync (the recovery
  point): open cuts exactly that batch and reports the bytes cut; everything before it reads
  back. (Below the recovery point the same damage is refused: tests/log/test_recovery.py.)
- .index / .timeindex: a sample of bit flips per file: open (rebuilding what it must) and every
  lookup answers as a scan of the .log does (tests/support/invariants.py, invariant 7).
- checkpoints and eoslog.meta: a sample of bit flips: open succeeds or raises a typed eoslog
  error (eoslog.meta carries a CRC: every flip is refused); never another exception.

Every case names the file, byte and bit in its failure message; "seed=" names the sample.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

import eoslog
from eoslog.errors import CorruptRecordError, KafkaException
from eoslog.fs import PosixFileSystem
from eoslog.log import checkpoints
from eoslog.record import codec
from tests.support.invariants import check_log

TOPIC = "t"
TS = 1_700_000_000_000
LZ4 = 3
# Small preallocated indexes for the internal topics too: every case opens a copy twice.
BROKER_CONFIG = {"log.index.size.max.bytes": 4096}
TOPIC_CONFIG = {
    "segment.bytes": 240,
    "index.interval.bytes": 1,
    "segment.index.bytes": 1024,
    "retention.bytes": 800,
    "retention.ms": -1,
}
BATCHES = 10
SAMPLED_FLIPS = 48  # per index, checkpoint and metadata file
# The partition leader epoch (bytes 12..15 of a batch): outside the CRC and unused by readers.
LEADER_EPOCH_BYTES = range(12, 16)
REPAIR_CALL = re.compile(r"repair_truncate\('([^']+)', (\d+)\)")


@dataclass(frozen=True)
class Written:
    """The pristine directory and what it holds."""

    root: str
    acked: list[tuple[int, int, list[bytes | None]]]
    segments: list[tuple[str, list[tuple[int, object]]]]  # (.log path, [(position, header)])

    @property
    def partition_dir(self) -> str:
        return os.path.join(self.root, f"{TOPIC}-0")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Where the cases live: tmpfs when there is one (thousands of copies and reopens, each
    with its fsyncs, cost ~8 ms there against ~40 ms on a disk), else pytest's tmp_path."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        directory = tempfile.mkdtemp(prefix="eoslog-corruption-", dir="/dev/shm")
        yield directory
        shutil.rmtree(directory, ignore_errors=True)
    else:
        yield os.fspath(tmp_path_factory.mktemp("corruption"))


@pytest.fixture(scope="module")
def written(scratch: str) -> Written:
    root = os.path.join(scratch, "pristine")
    broker = eoslog.open(root, "commit", BROKER_CONFIG, background=False)
    broker.create_topic(TOPIC, 1, TOPIC_CONFIG)
    log = broker.log(TOPIC, 0)
    acked = []
    for sequence in range(BATCHES):
        builder = codec.BatchBuilder(compression=LZ4 if sequence % 2 else 0)
        values: list[bytes | None] = []
        for i in range(2):
            value = b"c%d.%d|" % (sequence, i) + b"z" * (8 + 4 * i)
            assert builder.append(TS + 2 * sequence + i, None, value)
            values.append(value)
        info = log.append_batch(builder.build())
        acked.append((info.base_offset, info.last_offset, values))
    # Retention removes the first segment: the log starts at the next one's base (the
    # log-start checkpoint holds no entry: eoslog writes one only above the first base).
    broker.run_maintenance()
    acked = [entry for entry in acked if entry[0] >= log.log_start_offset]
    assert log.log_start_offset > 0
    broker.close()
    directory = os.path.join(root, f"{TOPIC}-0")
    segments = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".log"):
            path = os.path.join(directory, name)
            with open(path, "rb") as file:
                data = file.read()
            segments.append((path, list(codec.iter_headers(data))))
    assert len(segments) >= 4, segments
    return Written(root, acked, segments)


def damaged_copy(written: Written, target: str, *, unclean: bool = True) -> tuple[str, str]:
    """A copy of the pristine directory: (copy root, the copy of `target`)."""
    copy = os.path.join(os.path.dirname(written.root), f"case-{os.getpid()}")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(written.root, copy)
    if unclean:
        os.unlink(os.path.join(copy, checkpoints.CLEAN_SHUTDOWN_FILE))
    return copy, os.path.join(copy, os.path.relpath(target, written.root))


def flip(path: str, bit: int) -> None:
    with open(path, "r+b") as file:
        file.seek(bit // 8)
        byte = file.read(1)[0]
        file.seek(bit // 8)
        file.write(bytes([byte ^ (0x80 >> (bit % 8))]))


def lower_recovery_point(root: str, offset: int) -> None:
    """As if the process died after an fsync of everything below `offset` only."""
    fs = PosixFileSystem()
    path = os.path.join(root, checkpoints.RECOVERY_POINT_FILE)
    offsets = checkpoints.read_offsets(fs, path)
    offsets[(TOPIC, 0)] = offset
    checkpoints.write_offsets(fs, path, offsets)


def acked_before(written: Written, offset: int) -> list[tuple[int, int, list[bytes | None]]]:
    return [entry for entry in written.acked if entry[1] < offset]


def batch_at(written: Written, log_path: str, byte: int) -> tuple[int, object]:
    """(position, header) of the batch of that segment holding byte `byte`."""
    for position, header in next(batches for path, batches in written.segments if path == log_path):
        if position <= byte < position + header.size_in_bytes:  # type: ignore[attr-defined]
            return position, header
    raise AssertionError(f"byte {byte} of {log_path} is in no batch")


# --- .log: every bit ----------------------------------------------------------------------------


def judge_log_flip(
    written: Written, log_path: str, bit: int, *, unclean: bool = True
) -> tuple[str, str | None]:
    """Flip one bit of a copy of log_path, reopen uncleanly and classify the outcome:
    ("cut" | "refused" | "detected by reads" | "benign" | "silent" | "crash", problem or None).

    The copy keeps the recovery point the clean close wrote, as a crash after it would: the
    last segment is rescanned at open (damage there is refused, or cut if it is the last
    batch); segments below the recovery point are not rescanned, so their damage must be
    caught by the reader (the CRC check of decode_columns)."""
    copy, target = damaged_copy(written, log_path, unclean=unclean)
    flip(target, bit)
    byte = bit // 8
    position, header = batch_at(written, log_path, byte)
    is_last_segment = log_path == written.segments[-1][0]
    is_last_batch = is_last_segment and position == written.segments[-1][1][-1][0]
    where = f"{os.path.basename(log_path)} byte {byte} bit {bit % 8} (batch at {position})"
    try:
        broker = eoslog.open(copy, config=BROKER_CONFIG, background=False)
    except CorruptRecordError as error:
        return "refused", _check_repair(written, copy, error, header, where)
    except Exception as error:  # any other exception is a finding
        return "crash", f"{where}: open raised {type(error).__name__}: {error}"
    try:
        log = broker.log(TOPIC, 0)
        cut = log.recovery_report.bytes_truncated
        if cut:
            if not is_last_batch:
                return "cut", f"{where}: middle damage was cut silently ({cut} bytes)"
            kept = acked_before(written, header.base_offset)  # type: ignore[attr-defined]
            report = check_log(
                broker, {(TOPIC, 0): kept}, deterministic=False, config=BROKER_CONFIG
            )
            leftover = log.log_end_offset != header.base_offset  # type: ignore[attr-defined]
            if not report.ok or leftover:
                return (
                    "cut",
                    f"{where}: after the cut, end {log.log_end_offset}: {report.describe()}",
                )
            return "cut", None
        report = check_log(
            broker, {(TOPIC, 0): written.acked}, deterministic=False, config=BROKER_CONFIG
        )
    finally:
        broker.close()
    if report.ok:
        if byte - position in LEADER_EPOCH_BYTES:
            return "benign", None
        return "silent", f"{where}: the damage went unnoticed: {report.describe()}"
    wrong = report.counts["misordered"] + report.counts["duplicated"]
    if report.counts["corrupt_read"] and not wrong:
        # The reader got a CRC error at the damaged batch (records from there on are then
        # unreadable, which the checker counts as lost): detected, not silent.
        return "detected by reads", None
    return "silent", f"{where}: open accepted the damage and reads went wrong: {report.describe()}"


def _check_repair(
    written: Written, copy: str, error: CorruptRecordError, header: object, where: str
) -> str | None:
    """The refusal names a repair call; running it must open to every record before the
    damaged batch."""
    match = REPAIR_CALL.search(str(error))
    if match is None:
        return f"{where}: CorruptRecordError without the repair call: {error}"
    eoslog.repair_truncate(match.group(1), int(match.group(2)))
    try:
        report = check_log(
            copy,
            {(TOPIC, 0): acked_before(written, header.base_offset)},  # type: ignore[attr-defined]
            deterministic=False,
            config=BROKER_CONFIG,
        )
    except Exception as reopen_error:  # the repaired directory must open
        return f"{where}: after {match.group(0)} open raised {reopen_error!r}"
    return None if report.ok else f"{where}: after {match.group(0)}: {report.describe()}"


@pytest.mark.parametrize("which", ["middle segment", "last segment"])
def test_every_bit_flip_in_a_log_is_detected_at_an_unclean_reopen(
    written: Written, which: str
) -> None:
    log_path = written.segments[2][0] if which == "middle segment" else written.segments[-1][0]
    bits = os.path.getsize(log_path) * 8
    outcomes: Counter[str] = Counter()
    problems: list[str] = []
    for bit in range(bits):
        outcome, problem = judge_log_flip(written, log_path, bit)
        outcomes[outcome] += 1
        if problem is not None:
            problems.append(problem)
    print(f"\n{which} {os.path.basename(log_path)}: {bits} flips -> {dict(outcomes)}")
    assert not problems, f"{len(problems)} of {bits} flips went wrong:\n" + "\n".join(problems[:8])
    # The last segment is rescanned at open, which refuses damage; a middle segment lies
    # below the recovery point, is not rescanned, and its damage is caught by the reads.
    assert outcomes["refused" if which == "last segment" else "detected by reads"] > 0


def test_every_bit_flip_in_the_last_segment_after_a_clean_shutdown_is_detected(
    written: Written,
) -> None:
    """A clean shutdown makes nothing damaged durable-and-fine: the open checks the last
    batches (from the last offset-index entry: CRC and offsets, the base offset and length
    included, which the CRC does not cover) and each segment's first batch, and refuses
    damage there, never cutting it; damage in earlier batches is caught by the readers.
    Never silent, never cut."""
    log_path = written.segments[-1][0]
    bits = os.path.getsize(log_path) * 8
    outcomes: Counter[str] = Counter()
    problems: list[str] = []
    for bit in range(bits):
        outcome, problem = judge_log_flip(written, log_path, bit, unclean=False)
        outcomes[outcome] += 1
        if outcome == "cut":
            problem = problem or f"bit {bit}: cut after a clean shutdown"
        if problem is not None:
            problems.append(problem)
    print(f"\nclean {os.path.basename(log_path)}: {bits} flips -> {dict(outcomes)}")
    assert not problems, f"{len(problems)} of {bits} flips went wrong:\n" + "\n".join(problems[:8])
    assert outcomes["refused"] > 0


# --- .log: truncation at every byte of the tail -------------------------------------------------


def test_truncating_the_last_batch_at_every_byte_cuts_exactly_that_batch(
    written: Written,
) -> None:
    log_path, batches = written.segments[-1]
    position, header = batches[-1]
    end = position + header.size_in_bytes  # type: ignore[attr-defined]
    kept = acked_before(written, header.base_offset)  # type: ignore[attr-defined]
    problems = []
    for size in range(position, end):
        copy, target = damaged_copy(written, log_path)
        # A crash tears only what was written after the last fsync: the recovery point lies
        # at the last batch (below it, a cut would lose durable data and is refused).
        lower_recovery_point(copy, header.base_offset)  # type: ignore[attr-defined]
        os.truncate(target, size)
        where = f"{os.path.basename(log_path)} cut at byte {size} (last batch {position}..{end})"
        try:
            broker = eoslog.open(copy, config=BROKER_CONFIG, background=False)
        except Exception as error:  # a torn tail must always open
            problems.append(f"{where}: open raised {type(error).__name__}: {error}")
            continue
        try:
            recovery = broker.log(TOPIC, 0).recovery_report
            if recovery.bytes_truncated != size - position or (
                size > position and recovery.truncated_at != position
            ):
                problems.append(f"{where}: report {recovery}")
            report = check_log(
                broker, {(TOPIC, 0): kept}, deterministic=size % 16 == 0, config=BROKER_CONFIG
            )
            if not report.ok:
                problems.append(f"{where}: {report.describe()}")
        finally:
            broker.close()
    print(f"\ntruncated at {end - position} positions of the last batch")
    assert not problems, "\n".join(problems[:8])


# --- indexes, checkpoints, metadata ------------------------------------------------------------


def sampled_bits(path: str, rng: random.Random) -> list[int]:
    bits = os.path.getsize(path) * 8
    return sorted(rng.sample(range(bits), min(SAMPLED_FLIPS, bits)))


def index_files(written: Written) -> list[str]:
    return sorted(
        os.path.join(written.partition_dir, name)
        for name in os.listdir(written.partition_dir)
        if name.endswith((".index", ".timeindex", ".txnindex"))
        and os.path.getsize(os.path.join(written.partition_dir, name))
    )


@pytest.mark.parametrize("seed", [0])
@pytest.mark.parametrize("suffix", [".index", ".timeindex", ".txnindex"])
def test_index_bit_flips_are_rebuilt_or_never_believed_and_lookups_stay_right(
    written: Written, suffix: str, seed: int
) -> None:
    """Every non-empty index file of the kind, a sample of its bits, opened after an unclean
    stop. An entry out of order or range is rebuilt at open. One that still looks in order
    (a low bit of a position or timestamp) is below the recovery point, where Kafka believes
    it: eoslog's lookups check each entry against the batch it names, so every read and
    offset_for_timestamp must still answer right, and the maintenance pass after those
    lookups must have rebuilt the file so that every entry agrees with a scan. (No
    .txnindex exists until the transaction coordinator writes ABORT markers: then there is
    nothing to flip.)"""
    rng = random.Random(seed)
    files = [path for path in index_files(written) if path.endswith(suffix)]
    problems = []
    outcomes: Counter[str] = Counter()
    for path in files:
        for bit in sampled_bits(path, rng):
            copy, target = damaged_copy(written, path)
            flip(target, bit)
            where = f"seed={seed} {os.path.basename(path)} byte {bit // 8} bit {bit % 8}"
            try:
                broker = eoslog.open(copy, config=BROKER_CONFIG, background=False)
            except Exception as error:  # an index can always be rebuilt: open must succeed
                problems.append(f"{where}: open raised {type(error).__name__}: {error}")
                continue
            try:
                rebuilt_at_open = bool(broker.log(TOPIC, 0).recovery_report.indexes_rebuilt)
                first = check_log(broker, {(TOPIC, 0): written.acked}, deterministic=False)
                stale = first.counts.pop("stale_index", 0)
                if not first.ok:
                    problems.append(f"{where}: lookups went wrong: {first.describe()}")
                    continue
                broker.run_maintenance()
                healed = check_log(broker, {(TOPIC, 0): written.acked}, deterministic=bit % 8 == 0)
                if not healed.ok:
                    problems.append(f"{where}: after maintenance: {healed.describe()}")
            finally:
                broker.close()
            outcomes[
                "rebuilt at open"
                if rebuilt_at_open
                else "rebuilt after a lookup met it"
                if stale
                else "harmless"
            ] += 1
    print(f"\n{suffix}: {len(files)} files, {dict(outcomes)}, {len(problems)} wrong")
    assert suffix == ".txnindex" or files, f"no {suffix} file was written"
    assert not problems, f"{len(problems)} flips:\n" + "\n".join(problems[:8])


@pytest.mark.parametrize("seed", [0])
@pytest.mark.parametrize(
    "name",
    [checkpoints.RECOVERY_POINT_FILE, checkpoints.LOG_START_OFFSET_FILE, "eoslog.meta"],
)
def test_flips_in_checkpoints_and_metadata_never_crash_the_open(
    written: Written, name: str, seed: int
) -> None:
    """Checkpoints are Kafka's text format without a checksum: a flip either makes the file
    unreadable (read as no entries) or changes a number. eoslog.meta has a CRC: every flip is
    refused with a typed error."""
    path = os.path.join(written.root, name)
    assert os.path.exists(path), f"{name} was not written"
    rng = random.Random(seed)
    outcomes: Counter[str] = Counter()
    problems = []
    for bit in sampled_bits(path, rng):
        copy, target = damaged_copy(written, path)
        flip(target, bit)
        where = f"seed={seed} {name} byte {bit // 8} bit {bit % 8}"
        try:
            report = check_log(
                copy, {(TOPIC, 0): written.acked}, deterministic=False, config=BROKER_CONFIG
            )
        except KafkaException as error:
            outcomes[f"refused ({type(error).__name__})"] += 1
            continue
        except Exception as error:  # a crash, not a typed refusal
            problems.append(f"{where}: {type(error).__name__}: {error}")
            continue
        hidden = report.counts["lost"]
        outcomes["opened, records hidden" if hidden else "opened"] += 1
        if name == "eoslog.meta":
            problems.append(f"{where}: opened despite the CRC: {report.describe()}")
        elif report.counts["corrupt_read"] or report.counts["index_mismatch"]:
            problems.append(f"{where}: {report.describe()}")
    print(f"\n{name}: {dict(outcomes)}")
    assert not problems, "\n".join(problems[:8])


@pytest.mark.parametrize("rescanned", [False, True], ids=["below-recovery-point", "rescanned"])
def test_a_misdirected_write_in_the_middle_is_never_read_as_records(
    written: Written, rescanned: bool
) -> None:
    """A segment in the middle overwritten with the bytes of the first one (a misdirected
    write): well-formed batches with valid CRCs but the wrong offsets. Rescanned at open (a
    recovery point of 0: nothing known durable), it lies past the recovery point, where a
    power loss may leave holes, so the open cuts there (tests/log/test_recovery.py: without a
    trusted recovery point the same damage is refused);
    below the recovery point (not rescanned) it must be refused at open or by the reader,
    never skipped silently or read as records."""
    first, middle = written.segments[0][0], written.segments[2][0]
    with open(first, "rb") as file:
        stray = file.read()
    copy, target = damaged_copy(written, middle)
    if rescanned:
        lower_recovery_point(copy, 0)
    with open(target, "r+b") as file:
        file.seek(0)
        file.write(stray[: os.path.getsize(middle)])
    middle_base = int(os.path.basename(middle).split(".")[0])
    try:
        broker = eoslog.open(copy, config=BROKER_CONFIG, background=False)
    except CorruptRecordError as error:
        assert "repair_truncate" in str(error), error
        return
    try:
        log = broker.log(TOPIC, 0)
        if rescanned:
            assert log.recovery_report.truncated_file is not None, log.recovery_report
            assert log.log_end_offset == middle_base, log.log_end_offset
            kept = acked_before(written, middle_base)
            report = check_log(broker, {(TOPIC, 0): kept}, config=BROKER_CONFIG)
            assert report.ok, report.describe()
            return
        report = check_log(
            broker, {(TOPIC, 0): written.acked}, deterministic=False, config=BROKER_CONFIG
        )
    finally:
        broker.close()
    assert report.counts["corrupt_read"], (
        f"the misdirected batches in {os.path.basename(middle)} were not reported to the "
        f"reader: {report.describe()}"
    )
