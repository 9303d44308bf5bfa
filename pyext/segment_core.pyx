# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The native core of a log segment, which eoslog.log.segment.LogSegment builds on (docs/design.md
"The data path"): the state an append changes, the roll rule that reads it, and the append of
one batch: stamp its base offset and leader epoch, write it through the segment's FileHandle,
account it (size, timestamps, index entries due every index.interval.bytes). One call does the
byte work of an append that LogSegment.append did in a dozen Python calls; the decisions around
it (when to roll, fail-stop, publication) stay with eoslog.log.partition. The contract is
pyext/segment_core.pyi.

Every write goes through the FileHandle (eoslog.fs), as one `handle.pwrite(data, position)` per
part, the same parts in the same order as before this module existed: a batch up to
limits.join_parts_bytes_max as one stamped copy, a larger one as its stamped 61-byte header then
its body. The fs twin and the crash points therefore see the same writes.

Thread safety: as LogSegment's. The partition's writer calls the methods that change state,
under the partition lock; readers in other threads read `size`, which moves only after the
bytes below it are written.
"""

cimport cython
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from libc.stdint cimport int64_t, uint8_t

from engine cimport (
    EOS_BASE_OFFSET_OFFSET,
    EOS_HEADER_SIZE,
    EOS_PARTITION_LEADER_EPOCH_OFFSET,
    eos_store_i32be,
    eos_store_i64be,
)

import errno

from eoslog import limits
from eoslog.errors import IndexOffsetOverflowError

cdef int64_t _RELATIVE_OFFSET_MAX = limits.segment_relative_offset_max
cdef Py_ssize_t _JOIN_PARTS_BYTES_MAX = limits.join_parts_bytes_max

# first_batch_timestamp's states: not read from the file yet, no batch, or known.
cdef enum:
    _FIRST_UNLOADED = 0
    _FIRST_NONE = 1
    _FIRST_KNOWN = 2

# The return of append_stamped when the segment must roll first (nothing was written).
ROLL_FIRST = -1


cdef class SegmentCore:
    """The append state of one segment's .log; see the module doc and segment_core.pyi."""

    cdef public int64_t base_offset
    cdef public int64_t size
    cdef public int64_t created_ms
    cdef public int64_t last_modified_ms
    cdef public int64_t bytes_since_last_index_entry
    # The .log's length on disk, at least `size`: past `size` it is zeros, extended ahead by
    # `preallocate_bytes` when an append reaches it (0: never extended ahead). See
    # _make_room.
    cdef public int64_t allocated
    cdef public int64_t preallocate_bytes
    cdef int64_t _largest_timestamp
    cdef int64_t _offset_of_largest
    cdef bint _largest_known
    cdef int64_t _first_timestamp
    cdef int _first_state
    cdef object _config
    cdef int64_t _segment_bytes
    cdef int64_t _segment_ms
    cdef int64_t _index_interval_bytes
    # The index entry tables whose fullness the roll rule reads (eoslog._ext.index
    # IndexEntries), each with its slots kept back for the roll's own entry.
    cdef object _offset_entries
    cdef int64_t _offset_reserved
    cdef object _time_entries
    cdef int64_t _time_reserved
    # The .log's eoslog.log.mapped_log.MappedLog: its `handle` is the FileHandle written to.
    cdef public object _log_file

    def __cinit__(self, *args, **kwargs):
        self._largest_known = False
        self._first_state = _FIRST_UNLOADED

    # --- the configuration the append reads -------------------------------------------------

    @property
    def config(self):
        return self._config

    @config.setter
    def config(self, config):
        self._segment_bytes = config.segment_bytes
        self._segment_ms = config.roll_ms
        self._index_interval_bytes = config.index_interval_bytes
        self._config = config

    def watch_indexes(self, offset_entries, int64_t offset_reserved, time_entries,
                      int64_t time_reserved):
        """The offset and time indexes' entry tables, and how many slots each keeps back:
        the roll rule's "an index is full" is count >= capacity - reserved."""
        self._offset_entries = offset_entries
        self._offset_reserved = offset_reserved
        self._time_entries = time_entries
        self._time_reserved = time_reserved

    # --- timestamps -------------------------------------------------------------------------

    cdef int _load_largest(self) except -1:
        if not self._largest_known:
            timestamp, offset = (<object>self).scan_largest_timestamp()
            self._largest_timestamp = timestamp
            self._offset_of_largest = offset
            self._largest_known = True
        return 0

    @property
    def max_timestamp(self):
        """The largest batch max timestamp (scanned from the .log on first use)."""
        self._load_largest()
        return self._largest_timestamp

    @property
    def offset_of_max_timestamp(self):
        """The last offset of the batch holding max_timestamp (the time index's offset)."""
        self._load_largest()
        return self._offset_of_largest

    def set_largest_timestamp(self, int64_t timestamp, int64_t offset):
        self._largest_timestamp = timestamp
        self._offset_of_largest = offset
        self._largest_known = True

    cdef int _load_first(self) except -1:
        if self._first_state == _FIRST_UNLOADED:
            self._set_first((<object>self)._load_first_batch_timestamp())
        return 0

    cdef int _set_first(self, object timestamp) except -1:
        if timestamp is None:
            self._first_state = _FIRST_NONE
        else:
            self._first_timestamp = timestamp
            self._first_state = _FIRST_KNOWN
        return 0

    @property
    def first_batch_timestamp(self):
        """The first batch's max timestamp, which segment.ms counts from; None without a
        batch (read from the .log on first use)."""
        self._load_first()
        return self._first_timestamp if self._first_state == _FIRST_KNOWN else None

    @first_batch_timestamp.setter
    def first_batch_timestamp(self, timestamp):
        self._set_first(timestamp)

    # --- the roll rule and the append -------------------------------------------------------

    cpdef bint should_roll(self, int64_t batch_size, int64_t max_timestamp, int64_t last_offset,
                           int64_t now_ms) except -1:
        """Whether the next batch belongs in a new segment (docs/format.md §5.10): it does not
        fit in segment.bytes, segment.ms (on a compacted topic max.compaction.lag.ms, if
        smaller: LogConfig.roll_ms) has passed since the first batch (or since the segment
        was made, for batches without timestamps), an index is full, or its last
        offset does not fit the segment's relative offsets."""
        cdef int64_t waited
        if self.size > self._segment_bytes - batch_size:
            return True
        if self.size > 0:
            self._load_first()
            if self._first_state == _FIRST_KNOWN and self._first_timestamp >= 0:
                waited = max_timestamp - self._first_timestamp
            else:
                waited = now_ms - self.created_ms
            if waited > self._segment_ms:
                return True
        if self._is_full(self._offset_entries, self._offset_reserved):
            return True
        if self._is_full(self._time_entries, self._time_reserved):
            return True
        return not 0 <= last_offset - self.base_offset <= _RELATIVE_OFFSET_MAX

    cdef bint _is_full(self, object entries, int64_t reserved) except -1:
        if entries is None:
            return False
        cdef int64_t count = entries.count
        cdef int64_t capacity = entries.capacity
        return count >= capacity - reserved

    def append(self, data, *, int64_t last_offset, int64_t max_timestamp,
               int64_t offset_of_max_timestamp):
        """Write whole batches at the end (`data` may come in parts, written in order, so a
        caller can patch a header without copying the batch); add index entries every
        index.interval.bytes (docs/format.md §5.7). Returns the position they were written at.
        IndexOffsetOverflowError, writing nothing, if last_offset does not fit the segment;
        OSError from the FileHandle (the bytes may then be half written)."""
        self._check_fits(last_offset)
        cdef int64_t position = self.size
        cdef int64_t end = position
        cdef Py_ssize_t size = 0
        parts = data if isinstance(data, tuple) else (data,)
        for part in parts:
            size += memoryview(part).nbytes
        log = self._log_file.handle
        if position + size > self.allocated:
            self._make_room(log, position + size)
        if len(parts) > 1 and size <= _JOIN_PARTS_BYTES_MAX:
            # One system call instead of one per part: for a small batch (a coordinator
            # record, a marker, a single record) the write costs more than the copy.
            log.pwrite(b"".join(parts), position)
        else:
            for part in parts:
                log.pwrite(part, end)
                end += memoryview(part).nbytes
        self._account(position, size, last_offset, max_timestamp, offset_of_max_timestamp)
        return position

    def append_stamped(self, batch, int64_t base_offset, int64_t last_offset,
                       int64_t max_timestamp, int64_t now_ms, hook=None, bint may_roll=True):
        """Append one whole v2 batch whose header needs only the leader's base offset and
        partition leader epoch (0), both outside the CRC: a CreateTime batch whose header
        max timestamp is its records' largest (the caller restamps any other through
        codec.stamp_batch and append()). `batch` is not changed; the stamped header goes to
        a copy. Returns the position written at, or ROLL_FIRST, having written nothing, when
        should_roll says the batch belongs in a new segment (asked only if `may_roll`: a
        segment just rolled for the batch takes it whatever the rule says). `hook` (the crash points'
        hit, or None) is called with "append.before" just before the write and
        "append.after" once the batch is accounted. last_modified_ms becomes now_ms.
        OSError from the FileHandle: the bytes may be half written."""
        cdef const uint8_t[::1] view = batch
        cdef Py_ssize_t size = view.shape[0]
        if size < EOS_HEADER_SIZE:
            # A broken invariant: validate_batch or the marker builder gave a whole batch.
            raise AssertionError(f"a batch of {size} bytes is shorter than its header")
        if may_roll and self.should_roll(size, max_timestamp, last_offset, now_ms):
            return ROLL_FIRST
        self._check_fits(last_offset)
        if hook is not None:
            hook("append.before")
        cdef int64_t position = self.size
        cdef Py_ssize_t head = size if size <= _JOIN_PARTS_BYTES_MAX else EOS_HEADER_SIZE
        stamped = PyByteArray_FromStringAndSize(<const char *>&view[0], head)
        cdef uint8_t *out = <uint8_t *>PyByteArray_AS_STRING(stamped)
        eos_store_i64be(out + EOS_BASE_OFFSET_OFFSET, base_offset)
        eos_store_i32be(out + EOS_PARTITION_LEADER_EPOCH_OFFSET, 0)
        log = self._log_file.handle
        if position + size > self.allocated:
            self._make_room(log, position + size)
        log.pwrite(stamped, position)
        if head < size:
            log.pwrite(memoryview(batch)[head:], position + head)
        self._account(position, size, last_offset, max_timestamp, last_offset)
        self.last_modified_ms = now_ms
        if hook is not None:
            hook("append.after")
        return position

    cdef int _make_room(self, log, int64_t end) except -1:
        """Before a write that ends at `end`, past `allocated`: with preallocation on, extend
        the file with zeros to `end` + min(preallocate_bytes, segment.bytes) (ftruncate), so
        that the next appends land inside the file and an fdatasync of them need not make a
        new file length durable as well (docs/design.md "Durability": on ext4 that saves a
        journal commit per fsync). The log still ends at `size`: recovery, readers and
        dump-log stop at the zeros (a batch length of 0), and the roll and close cut the
        file back to `size` (LogSegment.cut_preallocation)."""
        if self.preallocate_bytes <= 0:
            self.allocated = end  # the write itself extends the file
            return 0
        cdef int64_t target = end + min(self.preallocate_bytes, self._segment_bytes)
        try:
            log.truncate(target)
        except OSError as error:
            if error.errno != errno.EFBIG:
                raise  # the disk failing: fail-stop, as a failed write is
            # Extending ahead only saves time: where the file may not grow that far (a
            # file-size limit) this segment stops extending ahead and each write extends
            # the file itself, failing there, with the error an append without
            # preallocation meets, only if it must.
            self.preallocate_bytes = 0
            self.allocated = end
            return 0
        self.allocated = target
        return 0

    cdef int _check_fits(self, int64_t last_offset) except -1:
        if not 0 <= last_offset - self.base_offset <= _RELATIVE_OFFSET_MAX:
            raise IndexOffsetOverflowError(
                f"offset {last_offset} does not fit segment {self.base_offset}"
            )
        return 0

    cdef int _account(self, int64_t position, Py_ssize_t size, int64_t last_offset,
                      int64_t max_timestamp, int64_t offset_of_max_timestamp) except -1:
        """The bytes [position, position + size) are written: move the size past them, then
        the timestamps, then an index entry if index.interval.bytes passed since the last."""
        if position != self.size:
            raise AssertionError(f"appended at {position}, but the .log ends at {self.size}")
        self.size = position + size
        self._load_first()
        if self._first_state == _FIRST_NONE and position == 0:
            self._set_first(max_timestamp)
        self._load_largest()
        if max_timestamp > self._largest_timestamp:
            self._largest_timestamp = max_timestamp
            self._offset_of_largest = offset_of_max_timestamp
        if self.bytes_since_last_index_entry > self._index_interval_bytes:
            segment = <object>self
            segment.offset_index.append(last_offset, position)
            segment.time_index.maybe_append(self._largest_timestamp, self._offset_of_largest)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size
        return 0
