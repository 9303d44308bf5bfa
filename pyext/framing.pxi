# Framing shared by the batch decoders (included into codec.pyx and message.pyx): where a
# batch starts, its records section (decompressed if need be), and the one turn of an engine
# status into an eoslog exception (docs/style.md rule 4: eoslog.errors.raise_for_status). The
# including module cimports what these use (see codec.pyx) and imports limits, compression and
# raise_for_status.

cdef uint8_t EMPTY[1]


cdef inline const uint8_t *start_of(const uint8_t[::1] view) noexcept:
    """Address of a view's first byte; a valid (never read) address for an empty view."""
    if view.shape[0] == 0:
        return <const uint8_t *>EMPTY
    return &view[0]


cdef inline int check_position(Py_ssize_t position) except -1:
    if position < 0:
        raise ValueError(f"position must not be negative, got {position}")
    return 0


cdef inline size_t remaining_after(Py_ssize_t position, Py_ssize_t size) noexcept:
    """Bytes from position to the end; none past the end (reads there run out of bytes)."""
    return <size_t>(size - position) if position < size else 0


cdef inline const uint8_t *at(const uint8_t[::1] view, Py_ssize_t position) noexcept:
    """Address of byte `position`, clamped to the end for positions past it."""
    return start_of(view) + (position if position < view.shape[0] else view.shape[0])


cdef inline int64_t wrapping_add(int64_t base, int64_t delta) noexcept:
    """base + delta as Java's long arithmetic wraps it (a signed overflow is undefined in C)."""
    return <int64_t>(<uint64_t>base + <uint64_t>delta)


cdef inline int check(int status, Py_ssize_t position) except -1:
    if status != EOS_OK:
        raise_for_status(status, position)
    return 0


cdef class _RecordsSection:
    """The records bytes of one batch: a pointer into the caller's buffer when uncompressed,
    or the decompressed bytes (owned here)."""

    cdef const uint8_t *start
    cdef size_t size
    cdef object owner


cdef int check_codec_and_count(const eos_batch_header *h, Py_ssize_t position) except -1:
    """The codec must be one of Kafka's (0-4), then the count must not be negative."""
    cdef int codec = h.attributes & EOS_COMPRESSION_MASK
    if codec > EOS_COMPRESSION_ZSTD:
        raise_for_status(EOS_BAD_COMPRESSION, position)
    if h.records_count < 0:
        raise_for_status(EOS_NEGATIVE_COUNT, position)
    return 0


cdef _RecordsSection records_section(object data, const uint8_t *batch, size_t size,
                                     const eos_batch_header *h, Py_ssize_t position,
                                     Py_ssize_t decompressed_bytes_max):
    """Locate (decompressing if needed) the records of the batch batch[0, size) found at
    `position` of `data`, after check_codec_and_count. Raises for a bad compressed section, and
    CorruptRecordError (DECOMPRESSED_TOO_LARGE) once the records pass decompressed_bytes_max:
    a decompression bomb allocates no more than that."""
    cdef _RecordsSection section = _RecordsSection.__new__(_RecordsSection)
    cdef int codec = h.attributes & EOS_COMPRESSION_MASK
    if codec == EOS_COMPRESSION_NONE:
        section.start = batch + EOS_RECORDS_OFFSET
        section.size = size - EOS_RECORDS_OFFSET
        return section
    # One Python call per batch: compression wraps the reference codec libraries with Kafka's
    # framing rules. It returns bytes, or an int status for bytes that cannot be the records.
    payload = memoryview(data)[position + EOS_RECORDS_OFFSET:position + <Py_ssize_t>size]
    result = compression.decompress(codec, payload, decompressed_bytes_max)
    if isinstance(result, int):
        raise_for_status(result, position)
    section.owner = result
    section.start = <const uint8_t *>PyBytes_AS_STRING(result)
    section.size = <size_t>PyBytes_GET_SIZE(result)
    return section
