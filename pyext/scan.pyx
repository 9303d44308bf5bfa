# cython: language_level=3, boundscheck=False, wraparound=False
"""Scanning runs of whole batches (engine/scan.c) for the partition log: recovery, index
rebuilding and offset lookups. One numpy record per batch; no Python object per batch."""

from libc.errno cimport EINTR, errno
from libc.stdint cimport int64_t, uint8_t, uint64_t
from posix.types cimport off_t
from posix.unistd cimport pread

import os

import numpy as np

from engine cimport (
    EOS_OK, EOS_TRUNCATED_BATCH, EOS_TRUNCATED_HEADER, batch_info_rows, eos_batch_info,
    eos_describe_header, eos_find_batch, eos_find_valid_batch, eos_scan_batches,
)


# The numpy view of eos_batch_info, field for field (scan.h); checked against sizeof below.
BATCH_INFO = np.dtype([
    ("position", np.int64),
    ("base_offset", np.int64),
    ("last_offset", np.int64),
    ("max_timestamp", np.int64),
    ("producer_id", np.int64),
    ("size", np.int32),
    ("records_count", np.int32),
    ("base_sequence", np.int32),
    ("partition_leader_epoch", np.int32),
    ("attributes", np.int16),
    ("producer_epoch", np.int16),
    ("reserved", np.int32),
])
if BATCH_INFO.itemsize != sizeof(eos_batch_info):
    raise ImportError("eoslog._ext.scan: BATCH_INFO disagrees with engine/scan.h")

cdef uint8_t EMPTY[1]


def scan_batches(data, Py_ssize_t start=0, *, bint verify_crc=True,
                 Py_ssize_t max_batches=1 << 20):
    """Scan whole batches of `data` from byte `start`.

    Returns (infos, stop, status): a BATCH_INFO array with one row per whole, valid batch in
    order; where the next scan would begin (the end of the data, the start of a partial
    trailing batch, or the first batch past max_batches); and 0, or the eoslog.record.status
    code of the bad batch found at `stop` (bad length or magic; CRC mismatch with
    verify_crc). Never raises for bad bytes: the caller decides what damage means."""
    cdef const uint8_t[::1] view = data
    cdef size_t size = <size_t>view.shape[0]
    cdef const uint8_t *buf = &view[0] if size else EMPTY
    if start < 0 or <size_t>start > size:
        raise ValueError(f"start {start} is outside the {size} bytes given")
    if max_batches < 0:
        raise ValueError("max_batches must not be negative")
    # A batch takes at least 61 bytes, so this many rows always suffice.
    cdef size_t capacity = min(<size_t>max_batches, (size - <size_t>start) // 61 + 1)
    infos = np.empty(capacity, dtype=BATCH_INFO)
    cdef uint8_t[::1] raw = infos.view(np.uint8)
    cdef eos_batch_info *rows = <eos_batch_info *>&raw[0] if capacity else NULL
    cdef size_t count = 0, stop = 0
    cdef int status
    with nogil:
        status = eos_scan_batches(buf, size, <size_t>start, verify_crc, rows, capacity,
                                  &count, &stop)
    return infos[:count], <Py_ssize_t>stop, status


def scan_headers(int fd, int64_t start, int64_t end, Py_ssize_t max_batches=1 << 16):
    """Walk the batches of the file open at `fd` from byte `start` to `end` by their headers
    alone: one pread of the 61-byte header per batch, then a jump by its length, so the
    records are never read. Returns (infos, stop, status) as scan_batches does over the
    same bytes without CRC checks (positions in the file): rows of whole batches below
    `end`; where the next walk would begin (the end, a partial trailing batch, or the first
    batch past max_batches); 0, or the status of a bad length or magic at `stop`. OSError
    when a read fails. The GIL is released for the walk."""
    if start < 0 or end < start:
        raise ValueError(f"bad byte range [{start}, {end})")
    if max_batches < 0:
        raise ValueError("max_batches must not be negative")
    # A batch takes at least 61 bytes, so this many rows always suffice.
    cdef size_t capacity = min(<size_t>max_batches, <size_t>(end - start) // 61 + 1)
    infos = np.empty(capacity, dtype=BATCH_INFO)
    cdef uint8_t[::1] raw = infos.view(np.uint8)
    cdef eos_batch_info *rows = <eos_batch_info *>&raw[0] if capacity else NULL
    cdef uint8_t header[61]
    cdef size_t count = 0, position = <size_t>start
    cdef Py_ssize_t got
    cdef int status = EOS_OK, failed = 0
    with nogil:
        while count < capacity and position < <size_t>end:
            got = pread(fd, header, 61, <off_t>position)
            if got < 0:
                if errno == EINTR:
                    continue
                failed = errno
                break
            status = eos_describe_header(header, <size_t>got, position, <size_t>end,
                                         &rows[count])
            if status == EOS_TRUNCATED_HEADER or status == EOS_TRUNCATED_BATCH:
                status = EOS_OK  # a partial trailing batch: the end of the data
                break
            if status != EOS_OK:
                break
            position += <size_t>rows[count].size
            count += 1
    if failed:
        raise OSError(failed, os.strerror(failed))
    return infos[:count], <Py_ssize_t>position, status


def find_valid_batch(data, Py_ssize_t start=0):
    """The first position >= start where a whole batch with a valid CRC lies, or len(data)."""
    cdef const uint8_t[::1] view = data
    cdef size_t size = <size_t>view.shape[0]
    if start < 0 or <size_t>start > size:
        raise ValueError(f"start {start} is outside the {size} bytes given")
    if size == 0:
        return 0
    cdef size_t found
    with nogil:
        found = eos_find_valid_batch(&view[0], size, <size_t>start)
    return <Py_ssize_t>found


def find_batch(data, int64_t target, Py_ssize_t start=0, Py_ssize_t end=-1):
    """(status, position, size) of the first batch from `start` whose last offset is >=
    target, found by its header alone (the batch may run past the data). Only bytes below
    `end` (default: all of data) are looked at, so a caller can search a prefix of a larger
    buffer, such as a mapped file, without slicing it. status 0: found;
    eoslog.record.status.TRUNCATED_BATCH: headers ran out, continue reading at `position`;
    another status: a bad header at `position`. Plain ints: this is a read's hot path."""
    cdef const uint8_t[::1] view = data
    cdef size_t size = <size_t>view.shape[0]
    if end >= 0:
        if <size_t>end > size:
            raise ValueError(f"end {end} is outside the {size} bytes given")
        size = <size_t>end
    if start < 0 or <size_t>start > size:
        raise ValueError(f"start {start} is outside the {size} bytes given")
    cdef size_t position = 0, batch_size = 0
    cdef int status
    status = eos_find_batch(&view[0] if size else EMPTY, size, <size_t>start, target,
                            &position, &batch_size)
    return status, <Py_ssize_t>position, <Py_ssize_t>batch_size


def first_offset_violation(infos, int64_t next_offset, bint gaps=False):
    """Index of the first batch whose offsets do not continue the previous batch's (the first
    must start at next_offset), or one whose last offset lies below its base; -1 if none.
    eoslog's logs are contiguous except where the cleaner removed batches: a jump means a
    damaged base offset or length, which the CRC does not cover. With `gaps` (a segment the
    cleaner has cleaned, docs/design.md "Compaction") a batch may start past next_offset, never
    below it. Sums wrap as Java's long (and numpy's int64) do. Native because a fetch runs it
    on every read (a numpy pass cost ~4% of consume())."""
    infos = np.ascontiguousarray(infos)
    cdef const eos_batch_info *rows = batch_info_rows(infos, BATCH_INFO)
    cdef Py_ssize_t i, n = len(infos)
    cdef int64_t expected = next_offset
    for i in range(n):
        if rows[i].last_offset < rows[i].base_offset:
            return i
        if rows[i].base_offset != expected and not (gaps and rows[i].base_offset > expected):
            return i
        expected = <int64_t>(<uint64_t>rows[i].last_offset + 1u)
    return -1


def first_starting_at_or_past(infos, int64_t offset):
    """Index of the first batch whose base offset is >= offset, or -1."""
    infos = np.ascontiguousarray(infos)
    cdef const eos_batch_info *rows = batch_info_rows(infos, BATCH_INFO)
    cdef Py_ssize_t i, n = len(infos)
    for i in range(n):
        if rows[i].base_offset >= offset:
            return i
    return -1
