# Columnar decode (included into codec.pyx): a run of whole batches -> Arrow-layout buffers,
# with no Python object per record. See decode_columns in pyext/codec.pyi.

from libc.string cimport memset

import pyarrow as pa


# Below this many bytes a column grows from numpy's allocator, above it from Arrow's pool
# (_grow): the page-fault cost the pool saves only matters for large columns.
SMALL_GROWTH_BYTES = 64 * 1024


cdef inline int64_t grown(int64_t capacity, int64_t needed) noexcept:
    """A new capacity of at least `needed`, at least doubling so growth stays amortized."""
    return needed if needed > 2 * capacity else 2 * capacity


@cython.final
cdef class _ColumnBuffers:
    """numpy arrays behind an eos_columns struct. Capacities only grow; each growth copies
    what was used and re-points the struct."""

    cdef eos_columns c
    cdef object offset, timestamp_ms, timestamp_type
    cdef object key_offsets, key_data, key_validity
    cdef object value_offsets, value_data, value_validity
    cdef object header_offsets, header_validity, header_key_offsets, header_key_data
    cdef object header_value_offsets, header_value_data, header_value_validity

    def __cinit__(self, bint headers_wanted):
        memset(&self.c, 0, sizeof(eos_columns))
        self.c.headers_wanted = headers_wanted
        self.offset = np.empty(0, np.int64)
        self.timestamp_ms = np.empty(0, np.int64)
        self.timestamp_type = np.empty(0, np.int32)
        self.key_offsets = np.zeros(1, np.int32)
        self.value_offsets = np.zeros(1, np.int32)
        self.key_data = np.empty(0, np.uint8)
        self.value_data = np.empty(0, np.uint8)
        self.key_validity = np.empty(0, np.uint8)
        self.value_validity = np.empty(0, np.uint8)
        self.header_offsets = np.zeros(1, np.int32)
        self.header_validity = np.empty(0, np.uint8)
        self.header_key_offsets = np.zeros(1, np.int32)
        self.header_value_offsets = np.zeros(1, np.int32)
        self.header_key_data = np.empty(0, np.uint8)
        self.header_value_data = np.empty(0, np.uint8)
        self.header_value_validity = np.empty(0, np.uint8)
        self.point()

    cdef void point(self):
        cdef int64_t[::1] i64
        cdef int32_t[::1] i32
        cdef uint8_t[::1] u8
        i64 = self.offset; self.c.offset = &i64[0] if i64.shape[0] else NULL
        i64 = self.timestamp_ms; self.c.timestamp_ms = &i64[0] if i64.shape[0] else NULL
        i32 = self.timestamp_type; self.c.timestamp_type = &i32[0] if i32.shape[0] else NULL
        i32 = self.key_offsets; self.c.key_offsets = &i32[0]
        i32 = self.value_offsets; self.c.value_offsets = &i32[0]
        u8 = self.key_data; self.c.key_data = &u8[0] if u8.shape[0] else NULL
        u8 = self.value_data; self.c.value_data = &u8[0] if u8.shape[0] else NULL
        u8 = self.key_validity; self.c.key_validity = &u8[0] if u8.shape[0] else NULL
        u8 = self.value_validity; self.c.value_validity = &u8[0] if u8.shape[0] else NULL
        i32 = self.header_offsets; self.c.header_offsets = &i32[0]
        i32 = self.header_key_offsets; self.c.header_key_offsets = &i32[0]
        i32 = self.header_value_offsets; self.c.header_value_offsets = &i32[0]
        u8 = self.header_validity; self.c.header_validity = &u8[0] if u8.shape[0] else NULL
        u8 = self.header_key_data; self.c.header_key_data = &u8[0] if u8.shape[0] else NULL
        u8 = self.header_value_data
        self.c.header_value_data = &u8[0] if u8.shape[0] else NULL
        u8 = self.header_value_validity
        self.c.header_value_validity = &u8[0] if u8.shape[0] else NULL

    cdef int reserve(self, int64_t records, int64_t section_bytes) except -1:
        """Room for one more records section of section_bytes holding at most `records`
        records: keys, values and header fields each fit in the section's bytes, and a
        header takes at least 2 of them (limits.record_header_bytes_min)."""
        cdef eos_columns *c = &self.c
        cdef bint moved = False
        cdef int64_t need
        need = c.records + records
        if need > c.records_capacity:
            cap = grown(c.records_capacity, need)
            self.offset = _grow(self.offset, c.records, cap)
            self.timestamp_ms = _grow(self.timestamp_ms, c.records, cap)
            self.timestamp_type = _grow(self.timestamp_type, c.records, cap)
            self.key_offsets = _grow(self.key_offsets, c.records + 1, cap + 1)
            self.value_offsets = _grow(self.value_offsets, c.records + 1, cap + 1)
            self.key_validity = _grow(self.key_validity, (c.records + 7) // 8, (cap + 7) // 8)
            self.value_validity = _grow(self.value_validity, (c.records + 7) // 8,
                                        (cap + 7) // 8)
            if c.headers_wanted:
                self.header_offsets = _grow(self.header_offsets, c.records + 1, cap + 1)
                self.header_validity = _grow(self.header_validity, (c.records + 7) // 8,
                                             (cap + 7) // 8)
            c.records_capacity = cap
            moved = True
        if c.key_bytes + section_bytes > c.key_bytes_capacity:
            cap = grown(c.key_bytes_capacity, c.key_bytes + section_bytes)
            self.key_data = _grow(self.key_data, c.key_bytes, cap)
            c.key_bytes_capacity = cap
            moved = True
        if c.value_bytes + section_bytes > c.value_bytes_capacity:
            cap = grown(c.value_bytes_capacity, c.value_bytes + section_bytes)
            self.value_data = _grow(self.value_data, c.value_bytes, cap)
            c.value_bytes_capacity = cap
            moved = True
        if c.headers_wanted:
            need = c.header_entries + section_bytes // limits.record_header_bytes_min
            if need > c.header_entries_capacity:
                cap = grown(c.header_entries_capacity, need)
                self.header_key_offsets = _grow(self.header_key_offsets,
                                                c.header_entries + 1, cap + 1)
                self.header_value_offsets = _grow(self.header_value_offsets,
                                                  c.header_entries + 1, cap + 1)
                self.header_value_validity = _grow(self.header_value_validity,
                                                   (c.header_entries + 7) // 8, (cap + 7) // 8)
                c.header_entries_capacity = cap
                moved = True
            if c.header_key_bytes + section_bytes > c.header_key_bytes_capacity:
                cap = grown(c.header_key_bytes_capacity, c.header_key_bytes + section_bytes)
                self.header_key_data = _grow(self.header_key_data, c.header_key_bytes, cap)
                c.header_key_bytes_capacity = cap
                moved = True
            if c.header_value_bytes + section_bytes > c.header_value_bytes_capacity:
                cap = grown(c.header_value_bytes_capacity,
                            c.header_value_bytes + section_bytes)
                self.header_value_data = _grow(self.header_value_data,
                                               c.header_value_bytes, cap)
                c.header_value_bytes_capacity = cap
                moved = True
        if moved:
            self.point()
        return 0

    cdef object result(self, Py_ssize_t end_position):
        cdef eos_columns *c = &self.c
        n = c.records
        headers = None
        if c.headers_wanted:
            entries = c.header_entries
            key_offsets = self.header_key_offsets[:entries + 1]
            key_data = self.header_key_data[:c.header_key_bytes]
            if c.invalid_header_keys:
                key_offsets, key_data = _replace_malformed_keys(key_offsets, key_data)
            headers = RecordHeaders(
                offsets=self.header_offsets[:n + 1],
                validity=_bitmap(self.header_validity, n),
                key_offsets=key_offsets,
                key_data=key_data,
                value_offsets=self.header_value_offsets[:entries + 1],
                value_data=self.header_value_data[:c.header_value_bytes],
                value_validity=_bitmap(self.header_value_validity, entries),
            )
        return ColumnarRecords(
            count=n,
            offset=self.offset[:n],
            timestamp_ms=self.timestamp_ms[:n],
            timestamp_type=self.timestamp_type[:n],
            key_offsets=self.key_offsets[:n + 1],
            key_data=self.key_data[:c.key_bytes],
            key_validity=_bitmap(self.key_validity, n),
            value_offsets=self.value_offsets[:n + 1],
            value_data=self.value_data[:c.value_bytes],
            value_validity=_bitmap(self.value_validity, n),
            headers=headers,
            end_position=end_position,
        )


def _replace_malformed_keys(offsets, data):
    """Header keys as valid UTF-8 for Arrow's string column, malformed bytes replaced as
    batch_records (and Java's String constructor) replace them. Only runs for batches that
    hold such keys, so its per-header Python work never touches well-formed data."""
    raw = data.tobytes()
    keys = [
        raw[offsets[i]:offsets[i + 1]].decode("utf-8", "replace").encode("utf-8")
        for i in range(len(offsets) - 1)
    ]
    new_offsets = np.zeros(len(offsets), np.int32)
    np.cumsum([len(key) for key in keys], out=new_offsets[1:])
    return new_offsets, np.frombuffer(b"".join(keys), np.uint8).copy()


def _grow(array, used, capacity):
    """A larger copy of array. Large memory comes from Arrow's default pool (jemalloc or
    mimalloc), which keeps freed memory for reuse: a decode that follows others then writes
    into pages it already has, instead of faulting ~100 MB of fresh pages in from the kernel
    on every call (measured: that faulting made a decode of 1 M records run 3-6x slower when it
    alternated with other work that churned memory). Small arrays come from numpy, whose
    allocation costs a fraction of the pool's round trip: a decode of one record grows nine
    arrays, and that fixed cost is most of a single-record consume_arrow()."""
    nbytes = capacity * array.itemsize
    if nbytes <= SMALL_GROWTH_BYTES:
        grown_array = np.empty(capacity, dtype=array.dtype)
    else:
        grown_array = np.frombuffer(pa.allocate_buffer(nbytes), dtype=array.dtype)
    if used:
        grown_array[:used] = array[:used]
    return grown_array


def _skip_ranges(skips):
    """skips as an (n, 2) int64 array of [start, end) byte ranges, ascending."""
    if skips is None:
        return np.empty((0, 2), dtype=np.int64)
    ranges = np.ascontiguousarray(np.asarray(skips, dtype=np.int64).reshape(-1, 2))
    if len(ranges) and (np.any(ranges[:, 1] < ranges[:, 0])
                        or np.any(ranges[1:, 0] < ranges[:-1, 1])):
        raise ValueError("skips must be ascending, non-overlapping [start, end) ranges")
    return ranges


def _bitmap(bits, n):
    """The first n bits, with the unused high bits of the last byte cleared (a rolled-back
    batch may have left bits there), so equal columns have equal bytes."""
    out = bits[:(n + 7) // 8]
    if n % 8:
        out[len(out) - 1] &= (1 << (n % 8)) - 1
    return out


cdef list checked_runs(object runs, Py_ssize_t position, Py_ssize_t size):
    """The byte ranges to decode: [(position, size)] without runs, else runs checked to be
    ascending, non-overlapping ranges inside the data (ValueError otherwise)."""
    if runs is None:
        check_position(position)
        return [(position, size)]
    cdef list found = []
    cdef Py_ssize_t start, end, previous = 0
    for start, end in runs:
        if start < previous or end < start or end > size:
            raise ValueError(f"run [{start}, {end}) is out of order or outside {size} bytes")
        found.append((start, end))
        previous = end
    return found


cdef int reserve_runs(_ColumnBuffers columns, const uint8_t[::1] view, list runs) except -1:
    """Reserve room for every record of the runs' whole batches at once (their header counts,
    bounded by their sizes), so a decode of a whole fetch allocates its columns once instead
    of doubling them batch by batch (each doubling copies what was decoded so far). A batch
    whose decompressed records need more grows the columns when it is decoded."""
    cdef Py_ssize_t start, end, position
    cdef size_t batch_size = 0
    cdef eos_batch_header h
    cdef int64_t records = 0, section_bytes = 0
    cdef const uint8_t *batch
    for start, end in runs:
        position = start
        while position < end:
            batch = at(view, position)
            if eos_frame_batch(batch, <size_t>(end - position), &batch_size) != EOS_OK:
                break  # the decode reports it, at its place among the batches
            if eos_read_header(batch, batch_size, &h) != EOS_OK:
                break
            if h.records_count > 0 and batch_size > EOS_RECORDS_OFFSET:
                records += min(<int64_t>h.records_count,
                               <int64_t>(batch_size - EOS_RECORDS_OFFSET)
                               // limits.record_bytes_min)
                section_bytes += <int64_t>(batch_size - EOS_RECORDS_OFFSET)
            position += <Py_ssize_t>batch_size
    columns.reserve(records, section_bytes)
    return 0


cdef int64_t clipped_end(const eos_batch_header *h, int64_t offset_min, int64_t offset_end,
                         int64_t records_left) noexcept:
    """The offset_end that stops a batch after records_left records, or offset_end when the
    whole batch fits. Only a batch with one record per offset (offset delta i for record i,
    as every batch eoslog appends) is cut; one with gaps is decoded whole."""
    cdef int64_t first = h.base_offset if h.base_offset > offset_min else offset_min
    cdef int64_t last = wrapping_add(h.base_offset, h.last_offset_delta)
    if h.last_offset_delta + 1 != h.records_count or last < first + records_left:
        return offset_end
    return first + records_left if first + records_left < offset_end else offset_end


cdef inline int64_t held_bytes(const eos_columns *c) noexcept:
    """The payload bytes the columns hold: keys, values, header keys and header values."""
    return <int64_t>(c.key_bytes + c.value_bytes + c.header_key_bytes + c.header_value_bytes)


cdef int check_decompressed_bytes_max(Py_ssize_t decompressed_bytes_max) except -1:
    if not 0 < decompressed_bytes_max <= limits.decompressed_batch_bytes_ceiling:
        raise ValueError(
            f"decompressed_bytes_max must be in 1..{limits.decompressed_batch_bytes_ceiling}, "
            f"got {decompressed_bytes_max}")
    return 0


@cython.final
cdef class ColumnDecoder:
    """Columns being filled by decode calls over one or more buffers (a consumer's fetches
    from successive segments), so records that arrive in several reads end in one set of
    columns, each value copied once. See pyext/codec.pyi. Not thread-safe."""

    cdef _ColumnBuffers columns
    cdef Py_ssize_t end_position
    cdef bint finished

    def __cinit__(self, bint include_headers=False):
        self.columns = _ColumnBuffers(include_headers)
        self.end_position = 0
        self.finished = False

    @property
    def count(self):
        return self.columns.c.records

    def decode(self, data, Py_ssize_t position=0, *, bint verify_crc=True,
               bint include_control=False, int64_t offset_min=0,
               int64_t offset_end=INT64_MAX, runs=None, records_max=None, skips=None,
               Py_ssize_t decompressed_bytes_max=limits.decompressed_batch_bytes_max,
               held_bytes_max=None):
        if self.finished:
            raise ValueError("this ColumnDecoder has finished")
        self.end_position = decode_into(self.columns, data, position, verify_crc,
                                        include_control, offset_min, offset_end, runs,
                                        records_max, skips, decompressed_bytes_max,
                                        held_bytes_max)
        return self.end_position

    def finish(self):
        if self.finished:
            raise ValueError("this ColumnDecoder has finished")
        self.finished = True
        return self.columns.result(self.end_position)


def decode_columns(data, Py_ssize_t position=0, *, bint include_headers=False,
                   bint verify_crc=True, bint include_control=False,
                   int64_t offset_min=0, int64_t offset_end=INT64_MAX, runs=None,
                   records_max=None, skips=None,
                   Py_ssize_t decompressed_bytes_max=limits.decompressed_batch_bytes_max,
                   held_bytes_max=None):
    cdef _ColumnBuffers columns = _ColumnBuffers(include_headers)
    end_position = decode_into(columns, data, position, verify_crc, include_control,
                               offset_min, offset_end, runs, records_max, skips,
                               decompressed_bytes_max, held_bytes_max)
    return columns.result(end_position)


cdef Py_ssize_t decode_into(_ColumnBuffers columns, data, Py_ssize_t position,
                            bint verify_crc, bint include_control, int64_t offset_min,
                            int64_t offset_end, runs, records_max, skips,
                            Py_ssize_t decompressed_bytes_max, held_bytes_max) except -1:
    """decode_columns' loop, adding to `columns`; returns the end position. records_max
    counts every record the columns hold, earlier calls' included. runs (the ranges to
    decode) and skips (the ranges to jump over) are two spellings of one plan: at most one
    may be given."""
    cdef const uint8_t[::1] view = data
    cdef Py_ssize_t size = view.shape[0]
    cdef size_t batch_size = 0
    cdef eos_batch_header h
    cdef int status
    cdef _RecordsSection section
    cdef eos_columns saved
    cdef const uint8_t *batch
    cdef Py_ssize_t run_end
    cdef int64_t limit = -1, batch_end
    if records_max is not None:
        limit = records_max
        if limit < 1:
            raise ValueError(f"records_max must be at least 1, got {records_max}")
    if runs is not None and skips is not None:
        raise ValueError("give runs or skips, not both")
    check_decompressed_bytes_max(decompressed_bytes_max)
    cdef int64_t held_max = -1
    if held_bytes_max is not None:
        held_max = held_bytes_max
        if held_max < 0:
            raise ValueError(f"held_bytes_max must not be negative, got {held_bytes_max}")
    cdef const int64_t[:, ::1] skip_ranges = _skip_ranges(skips)
    cdef Py_ssize_t skip_index = 0
    cdef Py_ssize_t first = position
    cdef list ranges = checked_runs(runs, position, size)
    if limit >= 0 and columns.c.records >= limit:
        return ranges[0][0] if ranges else position
    if runs is not None:
        reserve_runs(columns, view, ranges)
    for position, run_end in ranges:
        while True:
            # Jump over the skipped ranges that start here; one that starts inside a batch
            # decoded already (or covers the starting position) is the caller's error.
            while skip_index < skip_ranges.shape[0] and skip_ranges[skip_index, 0] <= position:
                if skip_ranges[skip_index, 1] > size:
                    raise ValueError(f"skipped range ends at {skip_ranges[skip_index, 1]}, "
                                     f"past the data's {size} bytes")
                if skip_ranges[skip_index, 0] == position:
                    position = max(position, <Py_ssize_t>skip_ranges[skip_index, 1])
                elif skip_ranges[skip_index, 0] >= first or skip_ranges[skip_index, 1] > first:
                    raise ValueError(
                        f"skipped range {skip_ranges[skip_index, 0]}-"
                        f"{skip_ranges[skip_index, 1]} does not start at a batch boundary "
                        f"(next batch at {position})")
                skip_index += 1
            # Once the columns hold held_max payload bytes, stop before the next batch: the
            # caller goes on from here, so one call's memory is bounded by the budget and one
            # batch (a log of batches each just under the decompressed limit cannot add up).
            if held_max >= 0 and columns.c.records > 0 and held_bytes(&columns.c) >= held_max:
                return position
            batch = at(view, position)
            status = eos_frame_batch(batch, remaining_after(position, run_end), &batch_size)
            if status == EOS_TRUNCATED_BATCH:
                break
            check(status, position)
            check(eos_read_header(batch, batch_size, &h), position)
            if verify_crc and eos_batch_crc(batch, batch_size) != h.crc:
                raise_for_status(EOS_CRC_MISMATCH, position)
            if (h.attributes & EOS_CONTROL_MASK) and not include_control:
                position += <Py_ssize_t>batch_size
                continue
            check_codec_and_count(&h, position)
            batch_end = offset_end
            if limit >= 0:
                batch_end = clipped_end(&h, offset_min, offset_end, limit - columns.c.records)
            section = records_section(data, batch, batch_size, &h, position,
                                      decompressed_bytes_max)
            columns.reserve(min(<int64_t>h.records_count,
                                <int64_t>section.size // limits.record_bytes_min),
                            <int64_t>section.size)
            saved = columns.c
            if section.size >= NOGIL_BYTES:
                with nogil:
                    status = eos_decode_records(&columns.c, section.start, section.size, &h,
                                                offset_min, batch_end)
            else:
                status = eos_decode_records(&columns.c, section.start, section.size, &h,
                                            offset_min, batch_end)
            if status == EOS_NEED_SPACE:
                raise AssertionError("decode_columns reserved too little room for a batch")
            check(status, position)
            if (columns.c.key_bytes > limits.column_bytes_max
                    or columns.c.value_bytes > limits.column_bytes_max
                    or columns.c.header_key_bytes > limits.column_bytes_max
                    or columns.c.header_value_bytes > limits.column_bytes_max):
                columns.c = saved  # this batch goes in the next call, so offsets stay int32
                return position
            if batch_end < offset_end or columns.c.records == limit:
                # records_max reached: a batch cut short is where a next call starts.
                if batch_end >= offset_end:
                    position += <Py_ssize_t>batch_size
                return position
            position += <Py_ssize_t>batch_size
    return position
