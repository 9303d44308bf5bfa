"""Helpers for the log-layer tests (segments, partition logs, recovery, the broker).

Batches are built with eoslog's own BatchBuilder at chosen offsets and timestamps; the codec has
its own tests (tests/record/), so here it is a tool, not a subject. Damage is
done to real files with plain `open()`, never through the code under test.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence

import eoslog
from eoslog.fs import FileHandle, PosixFileSystem
from eoslog.log.segment import LogSegment
from eoslog.record import codec
from eoslog.record.types import BatchHeader, Record

# docs/format.md §11's base timestamp: 2023-11-14T22:13:20Z.
TS = 1_700_000_000_000
NO_TIMESTAMP = -1

# What the `open_broker` fixture (tests/conftest.py) hands a test.
OpenBroker = Callable[..., eoslog.Broker]


@contextlib.contextmanager
def brokers_opened(
    default_path: str, defaults: Callable[[], dict[str, object]] = dict
) -> Iterator[OpenBroker]:
    """open(path=default_path, **kwargs): eoslog.open without background threads, with
    `defaults()` for every keyword not given (called per open: a fresh clock each time, say);
    every broker opened is closed on exit. For fixtures that reopen one directory."""
    opened: list[eoslog.Broker] = []

    def _open(path: str = default_path, **kwargs: object) -> eoslog.Broker:
        for key, value in defaults().items():
            kwargs.setdefault(key, value)
        broker = eoslog.open(path, background=False, **kwargs)  # type: ignore[arg-type]
        opened.append(broker)
        return broker

    try:
        yield _open
    finally:
        for broker in opened:
            broker.close()


def batch(
    values: Sequence[bytes],
    *,
    base_offset: int = 0,
    timestamps: int | Sequence[int] = NO_TIMESTAMP,
    key: bytes | None = None,
) -> bytes:
    """One v2 batch of `values` at `base_offset`; `timestamps` is one for all records or one per
    record (-1: no timestamp)."""
    if isinstance(timestamps, int):
        timestamps = [timestamps] * len(values)
    assert len(timestamps) == len(values)
    builder = codec.BatchBuilder(base_offset=base_offset)
    for timestamp, value in zip(timestamps, values, strict=True):
        assert builder.append(timestamp, key, value), "record did not fit"
    return builder.build()


def values(first: int, count: int, width: int = 8) -> list[bytes]:
    """`count` distinct values v<first>, v<first+1>, ... padded to `width` bytes, so that
    batches built from equal counts have equal sizes."""
    return [f"v{i}".ljust(width, ".").encode() for i in range(first, first + count)]


def header(data: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    return codec.read_header(data, position)


def headers(data: bytes | bytearray | memoryview) -> list[BatchHeader]:
    """The header of every whole batch in `data`."""
    return [found for _, found in codec.iter_headers(data)]


def records(data: bytes | bytearray | memoryview) -> list[Record]:
    """Every record of every whole batch in `data`, CRCs checked."""
    out: list[Record] = []
    for position, _ in codec.iter_headers(data):
        out.extend(codec.batch_records(data, position))
    return out


def append_to_segment(segment: LogSegment, data: bytes) -> int:
    """Append a batch already carrying its offsets, as the partition log does after stamping.
    Returns the position it was written at."""
    found = header(data)
    return segment.append(
        data,
        last_offset=found.last_offset,
        max_timestamp=found.max_timestamp,
        offset_of_max_timestamp=found.last_offset,
    )


def read_all(log: object) -> list[Record]:
    """Every record from the log start to the log end, read batch by batch through
    PartitionLog.read (read_uncommitted)."""
    out: list[Record] = []
    offset: int = log.log_start_offset  # type: ignore[attr-defined]
    end: int = log.log_end_offset  # type: ignore[attr-defined]
    while offset < end:
        result = log.read(offset, 1 << 20, "read_uncommitted")  # type: ignore[attr-defined]
        data = bytes(result.records)
        assert data, f"read({offset}) returned nothing below the log end {end}"
        batch_headers = headers(data)
        out.extend(r for r in records(data) if r.offset >= offset)
        offset = batch_headers[-1].last_offset + 1
    return out


class Clock:
    """A clock the test drives: `clock()` is the time in ms."""

    def __init__(self, now_ms: int = TS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


def seeded(seed: int) -> random.Random:
    """A Random with a printed seed (pytest shows the output of a failing test)."""
    print(f"seed={seed}")
    return random.Random(seed)


# --- file systems that wrap handles ----------------------------------------------------------


class WholeReads:
    """A local file seen only through pread, with no descriptor for native code to read
    (eoslog.fs.descriptor_of): a read_committed replay of it reads whole chunks of the
    segment, records and all, as it did before header walks (and as on object storage)."""

    def __init__(self, inner: FileHandle) -> None:
        self._inner = inner

    @property
    def path(self) -> str:
        return self._inner.path

    def size(self) -> int:
        return self._inner.size()

    def pread(self, size: int, offset: int) -> bytes:
        return self._inner.pread(size, offset)

    def close(self) -> None:
        self._inner.close()


class _CountingHandle(WholeReads):
    def __init__(self, owner: CountingFileSystem, inner: FileHandle) -> None:
        super().__init__(inner)
        self._owner = owner

    def pwrite(self, data: object, offset: int) -> None:
        self._inner.pwrite(data, offset)  # type: ignore[arg-type]

    def truncate(self, size: int) -> None:
        self._inner.truncate(size)

    def sync(self) -> None:
        size = self._inner.size()
        if self._owner.sync_delay_s:
            time.sleep(self._owner.sync_delay_s)
        self._inner.sync()
        self._owner.record_sync(self._inner.path, size)

    def map(self, size: int) -> object:
        return self._inner.map(size)

    def map_read(self, size: int) -> object:
        return self._inner.map_read(size)


class CountingFileSystem(PosixFileSystem):
    """PosixFileSystem that records every FileHandle.sync(): how many per path and the file
    size each covered (the durable size, as far as fsync promises). `sync_delay_s` slows each
    sync down, as a real disk does, so that group commit has something to group."""

    def __init__(self, sync_delay_s: float = 0.0) -> None:
        self.sync_delay_s = sync_delay_s
        self._lock = threading.Lock()
        self.syncs: dict[str, int] = {}
        self.durable_size: dict[str, int] = {}

    def open(  # type: ignore[override]
        self, path: str, *, create: bool = False, read_only: bool = False, exclusive: bool = False
    ) -> _CountingHandle:
        inner = super().open(path, create=create, read_only=read_only, exclusive=exclusive)
        return _CountingHandle(self, inner)

    def record_sync(self, path: str, size: int) -> None:
        with self._lock:
            self.syncs[path] = self.syncs.get(path, 0) + 1
            self.durable_size[path] = size

    def log_syncs(self) -> int:
        """Syncs of .log files (segment data) so far."""
        with self._lock:
            return sum(count for path, count in self.syncs.items() if path.endswith(".log"))


class WholeReadsFileSystem(PosixFileSystem):
    """PosixFileSystem whose handles are WholeReads: the oracle of the header walk (tests,
    bench/spark_bench.py's planning before/after)."""

    def open(  # type: ignore[override]
        self, path: str, *, create: bool = False, read_only: bool = False, exclusive: bool = False
    ) -> WholeReads:
        inner = super().open(path, create=create, read_only=read_only, exclusive=exclusive)
        return WholeReads(inner)


# --- bytes on disk ----------------------------------------------------------------------------


def file_bytes(path: str | os.PathLike[str]) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def write_at(path: str | os.PathLike[str], position: int, data: bytes) -> None:
    with open(path, "r+b") as file:
        file.seek(position)
        file.write(data)


def append_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    with open(path, "ab") as file:
        file.write(data)


def flip_bit(path: str | os.PathLike[str], position: int, bit: int) -> None:
    """Invert bit `bit` (0-7) of the byte at `position`."""
    with open(path, "r+b") as file:
        file.seek(position)
        old = file.read(1)[0]
        file.seek(position)
        file.write(bytes([old ^ (1 << bit)]))


def nonsense(rng: random.Random, size: int) -> bytes:
    """`size` random bytes (Kafka's TestUtils.writeNonsenseToFile)."""
    return bytes(rng.getrandbits(8) for _ in range(size))


def tree(root: str | os.PathLike[str]) -> dict[str, tuple[int, int]]:
    """Every file and directory under root: relative path -> (mode, size)."""
    out: dict[str, tuple[int, int]] = {}
    for directory, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = os.path.join(directory, name)
            info = os.stat(path)
            out[os.path.relpath(path, root)] = (info.st_mode, info.st_size)
    return out


def contents(root: str | os.PathLike[str], skip: Iterable[str] = (".lock",)) -> dict[str, bytes]:
    """Every regular file under root: relative path -> bytes (the lock file, which holds a
    pid, is left out)."""
    skipped = set(skip)
    out: dict[str, bytes] = {}
    for directory, _, filenames in os.walk(root):
        for name in filenames:
            if name in skipped:
                continue
            path = os.path.join(directory, name)
            out[os.path.relpath(path, root)] = file_bytes(path)
    return out


def partition_files(directory: str | os.PathLike[str], suffix: str) -> list[str]:
    """Paths of the files ending in `suffix` in a partition directory, sorted."""
    return sorted(os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(suffix))


def forget_clients(broker: eoslog.Broker) -> None:
    """As if the broker's producers and consumers had died with their process: close() then
    has none to flush, abort or commit for, and leaves what they left open (a transaction,
    queued records) as a crash would."""
    broker._clients.clear()
