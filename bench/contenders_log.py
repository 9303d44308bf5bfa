"""The partition log's contenders (log_bench.py, test_bench.py): `append_batch` against raw
`os.write` (and the parts of an append that touch every byte), recovery and clean open against
the raw-read and syscall floors, and random-offset reads against bisect + pread / mmap."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import eoslog
import harness
from contenders_shared import expect, record_codec
from eoslog import limits
from workload import (
    MIB,
    BatchTable,
    Partition,
    remove_recovery_markers,
)

APPEND_MAX_MESSAGE_BYTES = 2 * MIB


def append_contenders(
    broker: Any, root: str, batches: Sequence[bytes], records: int
) -> list[harness.Contender]:
    """eoslog `append_batch` of every batch (a new topic in `broker` per run) and raw
    `os.write` of the same bytes to a new file under `root`; each also with a final fsync."""
    total = sum(len(b) for b in batches)
    counter = iter(range(1 << 30))

    def eoslog_prepare() -> Any:
        topic = f"append-{next(counter)}"
        broker.create_topic(topic, 1, {"max.message.bytes": APPEND_MAX_MESSAGE_BYTES})
        return topic, broker.log(topic, 0)

    def eoslog_run(state: Any, sync: bool) -> None:
        log = state[1]
        append = log.append_batch
        for raw in batches:
            append(raw)
        if sync:
            log.flush()

    def eoslog_finish(state: Any) -> None:
        topic, log = state
        expect(log.log_end_offset == records, f"eoslog log end {log.log_end_offset}")
        stored = sum(s.size for s in log.segments)
        expect(stored == total, f"eoslog stored {stored} bytes, expected {total}")
        broker.delete_topic(topic)

    def raw_prepare() -> Any:
        path = os.path.join(root, f"raw-{next(counter)}.log")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        return path, fd

    def raw_run(state: Any, sync: bool) -> None:
        fd = state[1]
        write = os.write
        for raw in batches:
            if write(fd, raw) != len(raw):
                raise OSError("short write")
        if sync:
            os.fdatasync(fd)

    def raw_finish(state: Any) -> None:
        path, fd = state
        os.close(fd)
        size = os.path.getsize(path)
        expect(size == total, f"raw file holds {size} bytes, not {total}")
        os.unlink(path)

    sides = []
    for sync, suffix in ((False, ""), (True, " + fsync")):
        sides += [
            harness.Contender(
                f"eoslog append_batch{suffix}",
                functools.partial(eoslog_run, sync=sync),
                eoslog_prepare,
                eoslog_finish,
            ),
            harness.Contender(
                f"raw os.write{suffix}",
                functools.partial(raw_run, sync=sync),
                raw_prepare,
                raw_finish,
            ),
        ]
    return sides


def append_parts(batches: Sequence[bytes]) -> list[harness.Contender]:
    """The parts of append_batch that touch every byte, over the same batches in memory."""
    from eoslog.record import primitives

    codec = record_codec()

    def validate(_: object) -> None:
        for raw in batches:
            codec.validate_batch(raw, batch_bytes_max=APPEND_MAX_MESSAGE_BYTES)

    def crc(_: object) -> None:
        for raw in batches:
            primitives.crc32c(raw)

    def copy(_: object) -> None:
        for raw in batches:
            bytearray(raw)

    return [
        harness.Contender("validate_batch", validate),
        harness.Contender("of which CRC32C (eoslog primitives.crc32c)", crc),
        harness.Contender("bytearray copy", copy),
    ]


def read_files_raw(paths: Sequence[str], chunk: int = limits.recovery_chunk_bytes) -> int:
    """os.pread of every file in `chunk`-byte pieces: the physical peer of recovery."""
    total = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            position = 0
            while data := os.pread(fd, chunk, position):
                position += len(data)
            total += position
        finally:
            os.close(fd)
    return total


def open_files_raw(directory: str) -> int:
    """listdir plus open/fstat/close of every file: the syscall floor of a clean open."""
    count = 0
    for name in os.listdir(directory):
        fd = os.open(os.path.join(directory, name), os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fstat(fd)
        finally:
            os.close(fd)
        count += 1
    return count


def open_contenders(
    partition: Partition, recovery: bool, floor: Callable[[], int], floor_name: str
) -> list[harness.Contender]:
    """`eoslog.open` of the partition, `close()` of it (each timed alone: the open's broker is
    closed untimed, the close's opened untimed), and the floor. `recovery`: the clean-shutdown
    marker and the recovery point are removed before each open, so every segment is rescanned;
    otherwise the open must be clean."""
    durability = {"durability": "none"} if recovery else {}

    def prepare() -> list[Any]:
        if recovery:
            remove_recovery_markers(partition.root)
        return []

    def open_broker(holder: list[Any]) -> None:
        holder.append(eoslog.open(partition.root, background=False, **durability))

    def checked(holder: list[Any]) -> None:
        broker = holder.pop()
        log = broker.log(partition.topic, 0)
        report = log.recovery_report
        if recovery:
            ok = (
                not report.clean_shutdown
                and report.segments_recovered == partition.segments
                and not report.bytes_truncated
                and log.log_end_offset == partition.records
            )
        else:
            ok = report.clean_shutdown and not report.segments_recovered
            ok = ok and not report.indexes_rebuilt and len(log.segments) == partition.segments
        broker.close()
        expect(ok, f"not the open expected of {partition.segments} segments: {report}")

    def opened() -> list[Any]:
        holder = prepare()
        open_broker(holder)
        return holder

    def expect_floor(_: object, done: int) -> None:
        expected = partition.log_bytes if recovery else len(os.listdir(partition.directory))
        expect(done == expected, f"{floor_name}: {done}, expected {expected}")

    return [
        harness.Contender("eoslog open", open_broker, prepare, checked),
        harness.Contender("eoslog close", lambda holder: holder.pop().close(), opened),
        harness.Contender(floor_name, lambda _: floor(), check=expect_floor),
    ]


# Random-offset reads: each call timed alone, per round at most `budget` seconds.
READ_ROWS = ("eoslog", "header", "header again")


def read_contenders(
    log: Any,
    table: BatchTable,
    schedule: Callable[[int], tuple[list[int], float]],
    timer: harness.Timer,
) -> list[harness.Contender]:
    """Self-timed: eoslog's `log.read(offset, max_bytes=1)` (with `read_header` on the result,
    twice, timed apart), the floor (bisect + pread) and the zero-copy floor (bisect + a slice
    of the mapped segment), each returning per-call nanoseconds by row. `schedule(k)` gives
    the offsets and time budget of a contender's k-th run (0 is the warm-up); the cyclic GC is
    off during the calls as `timer` says."""
    read = log.read
    read_header = record_codec().read_header
    clock = time.perf_counter_ns

    def runs() -> Callable[[], tuple[list[int], float]]:
        counter = iter(range(1 << 30))
        return lambda: schedule(next(counter))

    def run_eoslog(planned: tuple[list[int], float]) -> dict[str, np.ndarray]:
        offsets, budget = planned
        times = np.empty((3, len(offsets)), dtype=np.int64)
        deadline = clock() + int(budget * 1e9)
        done = 0
        with timer.gc_off():
            for offset in offsets:
                t0 = clock()
                result = read(offset, max_bytes=1)
                t1 = clock()
                header = read_header(result.records)
                t2 = clock()
                read_header(result.records)
                t3 = clock()
                if not header.base_offset <= offset <= header.last_offset:
                    raise AssertionError(f"read({offset}) returned batch {header}")
                times[:, done] = (t1 - t0, t2 - t1, t3 - t2)
                done += 1
                if t3 > deadline:
                    break
        return {row: times[i, :done] for i, row in enumerate(READ_ROWS)}

    def floor(read_floor: Callable[[int], object], row: str) -> Callable[[Any], Any]:
        def run(planned: tuple[list[int], float]) -> dict[str, np.ndarray]:
            offsets, budget = planned
            times = np.empty(len(offsets), dtype=np.int64)
            deadline = clock() + int(budget * 1e9)
            done = 0
            with timer.gc_off():
                for offset in offsets:
                    t0 = clock()
                    read_floor(offset)
                    t1 = clock()
                    times[done] = t1 - t0
                    done += 1
                    if t1 > deadline:
                        break
            return {row: times[:done]}

        return run

    return [
        harness.Contender("eoslog", run_eoslog, runs(), timed=False),
        harness.Contender("floor", floor(table.read, "floor"), runs(), timed=False),
        harness.Contender(
            "floor mmap", floor(table.read_mapped, "floor mmap"), runs(), timed=False
        ),
    ]


def check_reads(log: Any, table: BatchTable, offsets: Sequence[int]) -> None:
    """eoslog's read returns exactly the batch the floors read (untimed)."""
    for offset in offsets:
        expected = table.read(offset)
        expect(bytes(log.read(offset, max_bytes=1).records) == expected, f"read at {offset}")
        expect(table.read_mapped(offset) == expected, f"the floors at offset {offset}")
