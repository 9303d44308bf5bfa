# BatchBuilder (included into codec.pyx): encodes records straight into one growing C buffer
# that already reserves the 61-byte header, so build() is one header write, one CRC and one
# copy into the result bytes.

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer


cdef inline bint borrow_bytes(object obj, Py_buffer *view, const uint8_t **data,
                              int32_t *length) except -1:
    """Point at obj's bytes: None is Kafka's null (length -1). Returns True when a buffer
    view was taken and must be released."""
    if obj is None:
        data[0] = NULL
        length[0] = -1
        return False
    cdef Py_ssize_t size
    if PyBytes_CheckExact(obj):
        data[0] = <const uint8_t *>PyBytes_AS_STRING(obj)
        size = PyBytes_GET_SIZE(obj)
        taken = False
    else:
        PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)
        data[0] = <const uint8_t *>view.buf
        size = view.len
        taken = True
    if size > INT32_MAX:
        if taken:
            PyBuffer_Release(view)
        raise RecordTooLargeError(f"a key or value of {size} bytes exceeds Kafka's int32 length")
    length[0] = <int32_t>size
    return taken


cdef inline int check_timestamp(int64_t timestamp) except -1:
    if timestamp < -1:
        raise ValueError(f"timestamp must be -1 or in [0, 2**63 - 1], got {timestamp}")
    return 0


cdef const unsigned char[::1] _byte_view(object data):
    """A zero-copy byte view of any C-contiguous buffer (other item formats read as bytes)."""
    try:
        return data
    except ValueError:
        return memoryview(data).cast("B")


cdef int _check_span_arrays(str what, Py_ssize_t size, const int64_t[::1] starts,
                            const int32_t[::1] lengths, Py_ssize_t count) except -1:
    """ValueError unless there are `count` spans, each inside [0, size) (length -1: null)."""
    cdef Py_ssize_t i
    if starts.shape[0] != count or lengths.shape[0] != count:
        raise ValueError(
            f"{what} starts and lengths must both have {count} entries, got "
            f"{starts.shape[0]} and {lengths.shape[0]}")
    for i in range(count):
        if lengths[i] < -1 or (lengths[i] >= 0 and (
                starts[i] < 0 or starts[i] > size - lengths[i])):
            raise ValueError(
                f"{what} span {i} (start {starts[i]}, length {lengths[i]}) lies outside the "
                f"{size} bytes of data")
    return 0


@cython.final
cdef class BatchBuilder:
    cdef uint8_t *buffer  # [0, 61) header, then the records section
    cdef size_t capacity
    cdef size_t size  # bytes used, header included
    cdef uint8_t *scratch  # the current record's encoded headers
    cdef size_t scratch_capacity
    cdef int32_t count
    cdef int64_t base_timestamp
    cdef int64_t max_timestamp
    cdef int compression
    cdef int compression_level
    cdef int timestamp_type
    cdef bint transactional
    cdef int64_t producer_id
    cdef int16_t producer_epoch
    cdef int32_t base_sequence
    cdef int32_t partition_leader_epoch
    cdef int64_t base_offset
    cdef size_t batch_bytes_max

    def __cinit__(self, *args, **kwargs):
        self.buffer = NULL
        self.scratch = NULL

    def __init__(self, *, int compression=0, int timestamp_type=0, bint is_transactional=False,
                 int64_t producer_id=-1, int16_t producer_epoch=-1, int32_t base_sequence=-1,
                 int32_t partition_leader_epoch=-1, int64_t base_offset=0,
                 Py_ssize_t batch_bytes_max=limits.batch_bytes_max,
                 int compression_level=-1):
        if compression < EOS_COMPRESSION_NONE or compression > EOS_COMPRESSION_ZSTD:
            raise ValueError(
                f"unsupported compression {compression}: Kafka's codecs are 0 (none) to 4 (zstd)")
        if compression != EOS_COMPRESSION_NONE:
            compression_level = _codec_level(compression, compression_level)
        if timestamp_type != 0 and timestamp_type != 1:
            raise ValueError(f"timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime), "
                             f"got {timestamp_type}")
        if is_transactional and producer_id < 0:
            raise ValueError("a transactional batch needs a producer id")
        if batch_bytes_max > limits.batch_bytes_max:
            raise ValueError(f"batch_bytes_max must be at most {limits.batch_bytes_max}, "
                             f"got {batch_bytes_max}")
        self.compression = compression
        self.compression_level = compression_level
        self.timestamp_type = timestamp_type
        self.transactional = is_transactional
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.partition_leader_epoch = partition_leader_epoch
        self.base_offset = base_offset
        self.batch_bytes_max = <size_t>batch_bytes_max
        self.reset()

    def __dealloc__(self):
        free(self.buffer)
        free(self.scratch)

    def reset(self):
        self.count = 0
        self.size = EOS_HEADER_SIZE
        self.base_timestamp = -1
        self.max_timestamp = -1
        self.reserve(4096)

    def set_producer_state(self, int64_t producer_id, int16_t producer_epoch,
                           int32_t base_sequence):
        if self.transactional and producer_id < 0:
            raise ValueError("a transactional batch needs a producer id")
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence

    def record_count(self):
        return self.count

    def estimated_size(self):
        return self.size

    cdef int reserve(self, size_t extra) except -1:
        if self.size + extra <= self.capacity:
            return 0
        cdef size_t capacity = max(2 * self.capacity, self.size + extra)
        cdef uint8_t *grown_buffer = <uint8_t *>realloc(self.buffer, capacity)
        if grown_buffer == NULL:
            raise MemoryError()
        self.buffer = grown_buffer
        self.capacity = capacity
        return 0

    cdef size_t encode_headers(self, object headers) except? 0:
        """Encode (key, value) pairs into scratch; returns their encoded size."""
        cdef size_t used = 0, need
        cdef Py_ssize_t key_size
        cdef const char *key
        cdef Py_buffer view
        cdef const uint8_t *value
        cdef int32_t value_length
        cdef uint8_t *grown_scratch
        for name, raw in headers:
            if not isinstance(name, str):
                raise TypeError(f"header keys must be str, got {type(name).__name__}")
            key = PyUnicode_AsUTF8AndSize(name, &key_size)
            taken = borrow_bytes(raw, &view, &value, &value_length)
            try:
                need = used + 2 * EOS_VARINT_BYTES_MAX + <size_t>key_size
                need += <size_t>value_length if value_length > 0 else 0
                if need > self.scratch_capacity:
                    grown_scratch = <uint8_t *>realloc(self.scratch, 2 * need)
                    if grown_scratch == NULL:
                        raise MemoryError()
                    self.scratch = grown_scratch
                    self.scratch_capacity = 2 * need
                used += eos_encode_varint(self.scratch + used, <int32_t>key_size)
                memcpy(self.scratch + used, key, <size_t>key_size)
                used += <size_t>key_size
                used += eos_encode_varint(self.scratch + used, value_length)
                if value_length > 0:
                    memcpy(self.scratch + used, value, <size_t>value_length)
                    used += <size_t>value_length
            finally:
                if taken:
                    PyBuffer_Release(&view)
        return used

    cdef int add(self, int64_t timestamp, object key, object value, object headers) except -1:
        """Append one record: 1 when added, 0 when the batch is full (nothing changed)."""
        check_timestamp(timestamp)
        cdef int32_t headers_count = 0
        cdef size_t headers_size = 0
        if headers:
            headers_count = <int32_t>len(headers)
            headers_size = self.encode_headers(headers)
        cdef Py_buffer key_view, value_view
        cdef const uint8_t *key_data
        cdef const uint8_t *value_data
        cdef int32_t key_length, value_length
        cdef bint key_taken = borrow_bytes(key, &key_view, &key_data, &key_length)
        cdef bint value_taken = False
        cdef int added
        try:
            value_taken = borrow_bytes(value, &value_view, &value_data, &value_length)
            added = self.add_raw(timestamp, key_data, key_length, value_data, value_length,
                                 headers_count, headers_size)
        finally:
            if key_taken:
                PyBuffer_Release(&key_view)
            if value_taken:
                PyBuffer_Release(&value_view)
        return added

    cdef int add_raw(self, int64_t timestamp, const uint8_t *key_data, int32_t key_length,
                     const uint8_t *value_data, int32_t value_length, int32_t headers_count,
                     size_t headers_size) except -1:
        """Append one record from raw spans (length -1: null; headers already encoded into
        scratch): 1 when added, 0 when the batch is full (nothing changed)."""
        cdef int64_t base = timestamp if self.count == 0 else self.base_timestamp
        # Wraps like Java's long subtraction; the reader's wrapping add restores the timestamp.
        cdef int64_t delta = <int64_t>(<uint64_t>timestamp - <uint64_t>base)
        cdef size_t body = eos_record_body_size(delta, self.count, key_length, value_length,
                                                headers_count, headers_size)
        if body > <size_t>INT32_MAX:
            raise RecordTooLargeError(f"a record of {body} bytes exceeds Kafka's limit")
        cdef size_t total = eos_size_of_varint(<int32_t>body) + body
        if self.size + total > self.batch_bytes_max:
            if self.count > 0:
                return 0
            raise RecordTooLargeError(
                f"record of {total} bytes does not fit in a batch of at most "
                f"{self.batch_bytes_max} bytes")
        self.reserve(total)
        self.size += eos_write_record(
            self.buffer + self.size, body, delta, self.count, key_data, key_length,
            value_data, value_length, headers_count, self.scratch, headers_size)
        if self.count == 0:
            self.base_timestamp = timestamp
            self.max_timestamp = timestamp
        elif timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
        self.count += 1
        return 1

    def append(self, int64_t timestamp, key, value, headers=None):
        return self.add(timestamp, key, value, headers) == 1

    def append_values(self, values, keys=None, int64_t timestamp=-1):
        cdef Py_ssize_t i, n = len(values)
        check_timestamp(timestamp)
        if keys is not None and len(keys) != n:
            raise ValueError(
                f"keys and values must have the same length, got {len(keys)} and {n}")
        for i in range(n):
            if not self.add(timestamp, None if keys is None else keys[i], values[i], None):
                return i
        return n

    def append_spans(self, values_data, value_starts, value_lengths, keys_data=None,
                     key_starts=None, key_lengths=None, int64_t timestamp=-1,
                     Py_ssize_t first=0):
        cdef const unsigned char[::1] values = _byte_view(values_data)
        cdef const int64_t[::1] v_starts = np.ascontiguousarray(value_starts, dtype=np.int64)
        cdef const int32_t[::1] v_lengths = np.ascontiguousarray(value_lengths, dtype=np.int32)
        cdef Py_ssize_t n = v_starts.shape[0], i
        check_timestamp(timestamp)
        _check_span_arrays("value", values.shape[0], v_starts, v_lengths, n)
        cdef const unsigned char[::1] keys = values  # unused unless keys are given
        cdef const int64_t[::1] k_starts = v_starts
        cdef const int32_t[::1] k_lengths = v_lengths
        cdef bint keyed = keys_data is not None
        if keyed:
            keys = _byte_view(keys_data)
            k_starts = np.ascontiguousarray(key_starts, dtype=np.int64)
            k_lengths = np.ascontiguousarray(key_lengths, dtype=np.int32)
            _check_span_arrays("key", keys.shape[0], k_starts, k_lengths, n)
        if first < 0 or first > n:
            raise ValueError(f"first must be in [0, {n}], got {first}")
        cdef const uint8_t *value_base = &values[0] if values.shape[0] > 0 else NULL
        cdef const uint8_t *key_base = &keys[0] if keyed and keys.shape[0] > 0 else NULL
        cdef const uint8_t *key_data
        cdef int32_t key_length
        for i in range(first, n):
            key_data, key_length = NULL, -1
            if keyed and k_lengths[i] >= 0:
                key_data, key_length = key_base + k_starts[i], k_lengths[i]
            if not self.add_raw(timestamp, key_data, key_length,
                                value_base + v_starts[i] if v_lengths[i] >= 0 else NULL,
                                v_lengths[i], 0, 0):
                return i - first
        return n - first

    def build(self):
        if self.count == 0:
            raise ValueError("cannot build an empty batch")
        cdef eos_batch_header h
        h.base_offset = self.base_offset
        h.partition_leader_epoch = self.partition_leader_epoch
        h.magic = EOS_MAGIC_V2
        h.crc = 0
        h.attributes = <int16_t>(self.compression
                                 | (EOS_TIMESTAMP_TYPE_MASK if self.timestamp_type else 0)
                                 | (EOS_TRANSACTIONAL_MASK if self.transactional else 0))
        h.last_offset_delta = self.count - 1
        h.base_timestamp = self.base_timestamp
        h.max_timestamp = self.max_timestamp
        h.producer_id = self.producer_id
        h.producer_epoch = self.producer_epoch
        h.base_sequence = self.base_sequence
        h.records_count = self.count
        cdef size_t records_size = self.size - EOS_HEADER_SIZE
        cdef const uint8_t *records = self.buffer + EOS_HEADER_SIZE
        cdef object compressed = None
        if self.compression != EOS_COMPRESSION_NONE:
            # One Python call per batch into the codec library (see compression for why).
            compressed = compression.compress(self.compression,
                                              <const uint8_t[:records_size]>records,
                                              self.compression_level)
            records = <const uint8_t *>PyBytes_AS_STRING(compressed)
            records_size = <size_t>PyBytes_GET_SIZE(compressed)
        cdef size_t batch_size = EOS_HEADER_SIZE + records_size
        h.batch_length = <int32_t>(batch_size - EOS_LOG_OVERHEAD)
        out = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>batch_size)
        cdef uint8_t *batch = <uint8_t *>PyBytes_AS_STRING(out)
        memcpy(batch + EOS_HEADER_SIZE, records, records_size)
        eos_write_header(batch, &h)
        if batch_size >= NOGIL_BYTES:
            with nogil:
                h.crc = eos_batch_crc(batch, batch_size)
        else:
            h.crc = eos_batch_crc(batch, batch_size)
        eos_store_u32be(batch + EOS_CRC_OFFSET, h.crc)
        return out
