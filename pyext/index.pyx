# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Offset, time and transaction index entries over the C engine (docs/format.md §5.4-§5.8, §6).

The contract is pyext/index.pyi. engine/index.h defines the entry layouts and the warm-section
search; this module reads and writes entries in place, in any buffer (an mmap of the index
file, a memoryview, bytes), without copying it.

Thread safety. Nothing here releases the GIL or runs Python code while it reads or writes a
buffer: each call reads the entries into C variables first, releases the buffer, and only then
builds Python objects (whose allocation may run a garbage collection, and with it other
threads). So every call sees a buffer as it was before or after another thread's call, never in
between, and no buffer is resized or unmapped under it. The one place other threads can run
mid-call is IndexEntries letting go of an mmap (CPython unmaps with the GIL released), which is
why attach() and detach() publish their new state before they let go.
"""

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport INT32_MAX, int8_t, int32_t, int64_t, uint8_t
from libc.stdlib cimport free, malloc

from engine cimport (
    eos_load_i32be,
    eos_load_i64be,
    eos_store_i16be,
    eos_store_i32be,
    eos_store_i64be,
)

import numpy as np

from eoslog.errors import CorruptIndexError, IndexFullError


cdef extern from "index.h" nogil:
    enum:
        EOS_OFFSET_INDEX_ENTRY_BYTES
        EOS_OFFSET_INDEX_RELATIVE_OFFSET_AT
        EOS_OFFSET_INDEX_POSITION_AT
        EOS_TIME_INDEX_ENTRY_BYTES
        EOS_TIME_INDEX_TIMESTAMP_AT
        EOS_TIME_INDEX_RELATIVE_OFFSET_AT
        EOS_TXN_INDEX_ENTRY_BYTES
        EOS_TXN_INDEX_VERSION_AT
        EOS_TXN_INDEX_PRODUCER_ID_AT
        EOS_TXN_INDEX_FIRST_OFFSET_AT
        EOS_TXN_INDEX_LAST_OFFSET_AT
        EOS_TXN_INDEX_LAST_STABLE_OFFSET_AT
        EOS_TXN_INDEX_VERSION
        EOS_INDEX_WARM_BYTES

    enum eos_index_key:
        EOS_INDEX_KEY_OFFSET
        EOS_INDEX_KEY_POSITION
        EOS_INDEX_KEY_TIMESTAMP
        EOS_INDEX_KEY_TIME_OFFSET

    int eos_index_entry_bytes(int kind)
    int64_t eos_index_search(const uint8_t *entries, int64_t count, int kind, int64_t target,
                             int upper)


OFFSET_ENTRY_BYTES = EOS_OFFSET_INDEX_ENTRY_BYTES
TIME_ENTRY_BYTES = EOS_TIME_INDEX_ENTRY_BYTES
TXN_ENTRY_BYTES = EOS_TXN_INDEX_ENTRY_BYTES
WARM_BYTES = EOS_INDEX_WARM_BYTES
OFFSET_KEY = EOS_INDEX_KEY_OFFSET
POSITION_KEY = EOS_INDEX_KEY_POSITION
TIMESTAMP_KEY = EOS_INDEX_KEY_TIMESTAMP
TIME_OFFSET_KEY = EOS_INDEX_KEY_TIME_OFFSET

# The entries as numpy reads them: big-endian fields at engine/index.h's offsets, in its entry
# sizes (docs/format.md §5.4, §5.5, §6.1). The one Python statement of the layouts, for the
# modules that check a whole file at once (eoslog.log.offset_index, time_index, txn_index);
# tests/record/test_layout.py checks them against index.h.
OFFSET_ENTRY_DTYPE = np.dtype({
    "names": ["relative", "position"],
    "formats": [">i4", ">i4"],
    "offsets": [EOS_OFFSET_INDEX_RELATIVE_OFFSET_AT, EOS_OFFSET_INDEX_POSITION_AT],
    "itemsize": EOS_OFFSET_INDEX_ENTRY_BYTES,
})
TIME_ENTRY_DTYPE = np.dtype({
    "names": ["timestamp", "relative"],
    "formats": [">i8", ">i4"],
    "offsets": [EOS_TIME_INDEX_TIMESTAMP_AT, EOS_TIME_INDEX_RELATIVE_OFFSET_AT],
    "itemsize": EOS_TIME_INDEX_ENTRY_BYTES,
})
TXN_ENTRY_DTYPE = np.dtype({
    "names": ["version", "producer_id", "first_offset", "last_offset", "last_stable_offset"],
    "formats": [">i2", ">i8", ">i8", ">i8", ">i8"],
    "offsets": [
        EOS_TXN_INDEX_VERSION_AT,
        EOS_TXN_INDEX_PRODUCER_ID_AT,
        EOS_TXN_INDEX_FIRST_OFFSET_AT,
        EOS_TXN_INDEX_LAST_OFFSET_AT,
        EOS_TXN_INDEX_LAST_STABLE_OFFSET_AT,
    ],
    "itemsize": EOS_TXN_INDEX_ENTRY_BYTES,
})

new_tuple = tuple.__new__


cdef int entry_bytes_of(int kind) except -1:
    cdef int size = eos_index_entry_bytes(kind)
    if size == 0:
        raise ValueError(f"unknown index key kind {kind}: expected 0-3")
    return size


cdef inline (int64_t, int64_t) read_entry(const uint8_t *entries, int entry_bytes,
                                          int64_t slot) noexcept:
    """(first column, second column) of an offset or time index entry."""
    cdef const uint8_t *p = entries + slot * entry_bytes
    if entry_bytes == EOS_OFFSET_INDEX_ENTRY_BYTES:
        return (eos_load_i32be(p + EOS_OFFSET_INDEX_RELATIVE_OFFSET_AT),
                eos_load_i32be(p + EOS_OFFSET_INDEX_POSITION_AT))
    return (eos_load_i64be(p + EOS_TIME_INDEX_TIMESTAMP_AT),
            eos_load_i32be(p + EOS_TIME_INDEX_RELATIVE_OFFSET_AT))


def search(data, int64_t count, int kind, int64_t target, bint upper=False):
    """Kafka's warm-section search over the first `count` entries of `data` (index.pyi)."""
    cdef int entry_bytes = entry_bytes_of(kind)
    cdef Py_buffer view
    cdef int64_t slot
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if count < 0 or count > view.len // entry_bytes:
            raise ValueError(
                f"{count} entries of {entry_bytes} bytes do not fit in {view.len} bytes")
        slot = eos_index_search(<const uint8_t *>view.buf, count, kind, target, upper)
    finally:
        PyBuffer_Release(&view)
    return slot


@cython.final
cdef class IndexEntries:
    """The entries of one offset (8-byte) or time (12-byte) index, in a buffer it borrows."""

    cdef Py_buffer view
    cdef bint attached
    cdef bint is_writable
    cdef int entry_bytes
    cdef int64_t entry_count
    cdef int64_t slot_count

    def __cinit__(self, int entry_bytes):
        if (entry_bytes != EOS_OFFSET_INDEX_ENTRY_BYTES
                and entry_bytes != EOS_TIME_INDEX_ENTRY_BYTES):
            raise ValueError(f"entry_bytes must be 8 or 12, got {entry_bytes}")
        self.entry_bytes = entry_bytes
        self.attached = False

    def __dealloc__(self):
        if self.attached:
            PyBuffer_Release(&self.view)

    @property
    def count(self):
        return self.entry_count

    @property
    def capacity(self):
        return self.slot_count

    @property
    def writable(self):
        return self.attached and self.is_writable

    @property
    def is_attached(self):
        return self.attached

    def attach(self, buffer, int64_t count):
        """Borrow `buffer` (writable if it allows) holding `count` entries; let go of the
        previous one. Nothing changes if `buffer` is not a buffer or is too small."""
        cdef Py_buffer fresh
        cdef bint writable = True
        try:
            PyObject_GetBuffer(buffer, &fresh, PyBUF_WRITABLE)
        except BufferError:
            PyObject_GetBuffer(buffer, &fresh, PyBUF_SIMPLE)
            writable = False
        cdef int64_t capacity = fresh.len // self.entry_bytes
        if count < 0 or count > capacity:
            PyBuffer_Release(&fresh)
            raise ValueError(f"{count} entries do not fit in {fresh.len} bytes")
        # Publish the new buffer before letting go of the old one: releasing the last
        # reference to an mmap unmaps it with the GIL released, so other threads run then and
        # must already see the new buffer.
        cdef Py_buffer previous
        cdef bint had_previous = self.attached
        if had_previous:
            previous = self.view
        self.view = fresh
        self.attached = True
        self.is_writable = writable
        self.entry_count = count
        self.slot_count = capacity
        if had_previous:
            PyBuffer_Release(&previous)

    def detach(self):
        """Let go of the buffer (the count stays readable); searches raise until attach."""
        cdef Py_buffer previous
        if self.attached:
            # As in attach: unpublish first, since the release may run other threads.
            self.attached = False
            previous = self.view
            PyBuffer_Release(&previous)

    cdef int check_attached(self) except -1:
        if not self.attached:
            raise ValueError("the index is closed")
        return 0

    cdef int check_kind(self, int kind) except -1:
        if entry_bytes_of(kind) != self.entry_bytes:
            raise ValueError(f"key kind {kind} belongs to {entry_bytes_of(kind)}-byte entries, "
                             f"this index has {self.entry_bytes}-byte entries")
        return 0

    def search(self, int kind, int64_t target, bint upper=False):
        """The slot Kafka's search answers (eos_index_search), or -1."""
        self.check_attached()
        self.check_kind(kind)
        return eos_index_search(<const uint8_t *>self.view.buf, self.entry_count, kind, target,
                                upper)

    def find(self, int kind, int64_t target, bint upper=False):
        """The entry at the slot search() answers, as (first, second) column, or None: one
        call, so a concurrent append or truncation cannot come between search and read."""
        self.check_attached()
        self.check_kind(kind)
        cdef int64_t slot = eos_index_search(<const uint8_t *>self.view.buf, self.entry_count,
                                             kind, target, upper)
        if slot < 0:
            return None
        cdef (int64_t, int64_t) entry = read_entry(<const uint8_t *>self.view.buf,
                                                   self.entry_bytes, slot)
        return (entry[0], entry[1])

    def entry(self, int64_t slot):
        """Entry `slot` as (first, second) column; IndexError outside [0, count)."""
        self.check_attached()
        if slot < 0 or slot >= self.entry_count:
            raise IndexError(f"index entry {slot} does not exist: the index has "
                             f"{self.entry_count} entries")
        cdef (int64_t, int64_t) entry = read_entry(<const uint8_t *>self.view.buf,
                                                   self.entry_bytes, slot)
        return (entry[0], entry[1])

    def append(self, int64_t first, int64_t second):
        """Write (first, second) in slot `count` and count it.

        The index classes check Kafka's rules first; what is checked here are the invariants
        the file format itself needs (docs/style.md rule 5), so a bug above cannot write an entry
        that breaks the sort order every search relies on."""
        self.check_attached()
        if not self.is_writable:
            raise ValueError("the index is read-only")
        if self.entry_count >= self.slot_count:
            raise IndexFullError(f"no free slot: the index holds {self.slot_count} entries")
        cdef uint8_t *p = <uint8_t *>self.view.buf + self.entry_count * self.entry_bytes
        cdef (int64_t, int64_t) last
        if self.entry_bytes == EOS_OFFSET_INDEX_ENTRY_BYTES:
            if first < 0 or first > INT32_MAX or second < 0 or second > INT32_MAX:
                raise ValueError(f"offset index entry ({first}, {second}) is outside int32")
            if self.entry_count > 0:
                last = read_entry(<const uint8_t *>self.view.buf, self.entry_bytes,
                                  self.entry_count - 1)
                if first <= last[0]:
                    raise AssertionError(f"offset index entries must increase: {first} after "
                                         f"{last[0]}")
            eos_store_i32be(p + EOS_OFFSET_INDEX_RELATIVE_OFFSET_AT, <int32_t>first)
            eos_store_i32be(p + EOS_OFFSET_INDEX_POSITION_AT, <int32_t>second)
        else:
            if second < 0 or second > INT32_MAX:
                raise ValueError(f"relative offset {second} is outside int32")
            if self.entry_count > 0:
                last = read_entry(<const uint8_t *>self.view.buf, self.entry_bytes,
                                  self.entry_count - 1)
                if first <= last[0] or second < last[1]:
                    raise AssertionError(f"time index entries must increase: ({first}, "
                                         f"{second}) after ({last[0]}, {last[1]})")
            eos_store_i64be(p + EOS_TIME_INDEX_TIMESTAMP_AT, first)
            eos_store_i32be(p + EOS_TIME_INDEX_RELATIVE_OFFSET_AT, <int32_t>second)
        self.entry_count += 1

    def copy(self):
        """The bytes of the entries in use, copied out of the buffer."""
        self.check_attached()
        return PyBytes_FromStringAndSize(<const char *>self.view.buf,
                                         self.entry_count * self.entry_bytes)

    def truncate(self, int64_t count):
        """Keep the first `count` entries (0 <= count <= the current count)."""
        if count < 0 or count > self.entry_count:
            raise ValueError(f"cannot truncate {self.entry_count} entries to {count}")
        self.entry_count = count


# Aborted transaction entries (docs/format.md §6.1).

ctypedef struct aborted_txn:
    int64_t producer_id
    int64_t first_offset
    int64_t last_offset
    int64_t last_stable_offset


cdef inline aborted_txn read_txn(const uint8_t *p) noexcept:
    cdef aborted_txn txn
    txn.producer_id = eos_load_i64be(p + EOS_TXN_INDEX_PRODUCER_ID_AT)
    txn.first_offset = eos_load_i64be(p + EOS_TXN_INDEX_FIRST_OFFSET_AT)
    txn.last_offset = eos_load_i64be(p + EOS_TXN_INDEX_LAST_OFFSET_AT)
    txn.last_stable_offset = eos_load_i64be(p + EOS_TXN_INDEX_LAST_STABLE_OFFSET_AT)
    return txn


cdef inline int txn_version(const uint8_t *p) noexcept:
    # Kafka reads the version as the first byte alone, signed (AbortedTxn.version() is a byte
    # get), and rejects only versions above 0: 0x01-0x7F are refused, 0x80-0xFF read as
    # negative and pass, and the second byte is never looked at (docs/format.md §6.1).
    return <int8_t>p[EOS_TXN_INDEX_VERSION_AT]


cdef object bad_version(int64_t slot, int version):
    return CorruptIndexError(
        f"aborted transaction entry {slot} has version {version}; only "
        f"{EOS_TXN_INDEX_VERSION} is known")


cdef list build_txns(const aborted_txn *txns, Py_ssize_t count, object entry_type):
    cdef list result = []
    cdef Py_ssize_t i
    for i in range(count):
        result.append(new_tuple(entry_type, (txns[i].producer_id, txns[i].first_offset,
                                             txns[i].last_offset, txns[i].last_stable_offset)))
    return result


def encode_aborted_txn(int64_t producer_id, int64_t first_offset, int64_t last_offset,
                       int64_t last_stable_offset):
    """The 34-byte entry, version 0."""
    cdef bytes entry = PyBytes_FromStringAndSize(NULL, EOS_TXN_INDEX_ENTRY_BYTES)
    cdef uint8_t *p = <uint8_t *>PyBytes_AS_STRING(entry)
    eos_store_i16be(p + EOS_TXN_INDEX_VERSION_AT, EOS_TXN_INDEX_VERSION)
    eos_store_i64be(p + EOS_TXN_INDEX_PRODUCER_ID_AT, producer_id)
    eos_store_i64be(p + EOS_TXN_INDEX_FIRST_OFFSET_AT, first_offset)
    eos_store_i64be(p + EOS_TXN_INDEX_LAST_OFFSET_AT, last_offset)
    eos_store_i64be(p + EOS_TXN_INDEX_LAST_STABLE_OFFSET_AT, last_stable_offset)
    return entry


cdef aborted_txn *scratch_for(Py_ssize_t count) except NULL:
    # One slot more than needed, so that an empty index still gets a pointer to free.
    cdef aborted_txn *txns = <aborted_txn *>malloc((count + 1) * sizeof(aborted_txn))
    if txns == NULL:
        raise MemoryError()
    return txns


cdef tuple walk_txns(object data, bint filtered, int64_t fetch_offset,
                     int64_t upper_bound_offset, object entry_type):
    """The whole entries of `data` in file order: all of them, or (filtered) Kafka's
    collectAbortedTxns selection and whether the search completed. CorruptIndexError for a
    version above 0 among the entries reached."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    cdef const uint8_t *entries = <const uint8_t *>view.buf
    cdef Py_ssize_t count = view.len // EOS_TXN_INDEX_ENTRY_BYTES
    cdef Py_ssize_t slot, found = 0
    cdef aborted_txn txn
    cdef aborted_txn *txns = NULL
    cdef bint complete = False
    cdef int version = 0
    cdef Py_ssize_t bad_slot = -1
    try:
        txns = scratch_for(count)
    except MemoryError:
        PyBuffer_Release(&view)
        raise
    for slot in range(count):
        version = txn_version(entries + slot * EOS_TXN_INDEX_ENTRY_BYTES)
        if version > EOS_TXN_INDEX_VERSION:
            bad_slot = slot
            break
        txn = read_txn(entries + slot * EOS_TXN_INDEX_ENTRY_BYTES)
        if not filtered:
            txns[found] = txn
            found += 1
            continue
        if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
            txns[found] = txn
            found += 1
        # Checked after the entry itself was considered: the entry whose LSO reaches the
        # upper bound is the last one that can overlap the fetch (docs/format.md §6.3).
        if txn.last_stable_offset >= upper_bound_offset:
            complete = True
            break
    PyBuffer_Release(&view)
    try:
        if bad_slot >= 0:
            raise bad_version(bad_slot, version)
        return build_txns(txns, found, entry_type), complete
    finally:
        free(txns)


def collect_aborted_txns(data, int64_t fetch_offset, int64_t upper_bound_offset, entry_type):
    """Kafka's collectAbortedTxns over the whole entries in `data` (index.pyi)."""
    return walk_txns(data, True, fetch_offset, upper_bound_offset, entry_type)


def decode_aborted_txns(data, entry_type):
    """Every whole entry in `data`, in file order (index.pyi)."""
    return walk_txns(data, False, 0, 0, entry_type)[0]


cdef Py_ssize_t scan_last_offsets(object data, int64_t offset, bint stop_below,
                                  Py_ssize_t *count) except -2:
    """The first slot whose last offset is below `offset` (stop_below) or at least `offset`
    (not stop_below), or -1; `count` gets the number of whole entries. Entries are read in
    file order and their version checked on the way, as Kafka's iterator does."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    cdef const uint8_t *entries = <const uint8_t *>view.buf
    count[0] = view.len // EOS_TXN_INDEX_ENTRY_BYTES
    cdef Py_ssize_t slot, answer = -1
    cdef int version = 0
    cdef Py_ssize_t bad_slot = -1
    cdef int64_t last_offset
    for slot in range(count[0]):
        version = txn_version(entries + slot * EOS_TXN_INDEX_ENTRY_BYTES)
        if version > EOS_TXN_INDEX_VERSION:
            bad_slot = slot
            break
        last_offset = eos_load_i64be(entries + slot * EOS_TXN_INDEX_ENTRY_BYTES
                                     + EOS_TXN_INDEX_LAST_OFFSET_AT)
        if (last_offset < offset) == stop_below:
            answer = slot
            break
    PyBuffer_Release(&view)
    if bad_slot >= 0:
        raise bad_version(bad_slot, version)
    return answer


def count_aborted_txns_ending_below(data, int64_t offset):
    """How many leading entries have a last offset below `offset` (index.pyi)."""
    cdef Py_ssize_t count = 0
    cdef Py_ssize_t slot = scan_last_offsets(data, offset, False, &count)
    return count if slot < 0 else slot


def first_aborted_txn_ending_below(data, int64_t offset):
    """The first slot whose last offset is below `offset`, or -1 (index.pyi)."""
    cdef Py_ssize_t count = 0
    return scan_last_offsets(data, offset, True, &count)
