# cython: language_level=3, boundscheck=False, wraparound=False
"""CRC-32C and zigzag varints (docs/format.md §1.1, §2.1), over the C engine.

The contract is pyext/primitives.pyi; eoslog.record.pyprimitives is the pure-Python twin and
tests/record/test_primitives.py runs one suite against both. Every function may be called from any
thread. Inputs are read through the buffer protocol without copying, and only for the duration
of the call.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t

from engine cimport (
    EOS_VARLONG_BYTES_MAX,
    eos_crc32c,
    eos_crc32c_backend,
    eos_crc32c_combine,
    eos_crc32c_portable,
    eos_decode_varint,
    eos_decode_varlong,
    eos_encode_varint,
    eos_encode_varlong,
    eos_murmur2,
    eos_size_of_varint,
    eos_size_of_varlong,
)

import numpy as np

from eoslog.errors import raise_for_status
from eoslog.record import status

cdef enum:
    # From this size up, crc32c() releases the GIL: at ~20 GiB/s 64 KiB takes ~3 µs, well
    # above the cost of dropping and retaking the GIL (~0.1 µs), while small record-sized
    # inputs skip that cost.
    CRC_NOGIL_BYTES_MIN = 64 * 1024


# A portable CRC that misses its own known answers is our bug (docs/style.md rule 3): refuse to load
# rather than write or accept batches with wrong checksums.
_BACKEND = eos_crc32c_backend().decode("ascii")
if _BACKEND not in ("sse4.2", "portable"):
    raise ImportError(
        f"eoslog._ext.primitives: the CRC-32C engine reports backend {_BACKEND!r}: its portable "
        "path failed the known-answer self-check, so checksums cannot be trusted. This is a bug "
        "in engine/crc32c.c (or a miscompilation), not in the data."
    )


cdef const unsigned char[::1] _byte_view(object data):
    """A zero-copy byte view of any C-contiguous buffer.

    bytes, bytearray, memoryview and uint8 arrays take the typed-memoryview path directly;
    buffers of another item format (array('i'), int64 arrays) are reinterpreted as bytes, as a
    CRC over their memory is what a caller means. Non-contiguous buffers raise TypeError.
    """
    try:
        return data
    except ValueError:
        # Cython reports an item-format mismatch as ValueError; memoryview.cast("B") reads the
        # same memory as bytes, and raises TypeError for a non-contiguous buffer.
        return memoryview(data).cast("B")


cdef uint32_t _crc_start(object crc) except? 0xFFFFFFFF:
    """A previous CRC result as uint32; ValueError outside [0, 2**32), TypeError if not an int."""
    try:
        return crc
    except OverflowError:
        raise ValueError(f"crc must be in [0, 2**32), got {crc!r}") from None


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli) of data, continuing from a previous result `crc` (0 to start).

    crc32c(b"123456789") == 0xE3069283; crc32c(b, crc32c(a)) == crc32c(a + b). Releases the GIL
    for inputs of 64 KiB and more; the buffer stays exported (so it cannot be resized) meanwhile.
    """
    cdef uint32_t start = _crc_start(crc)
    cdef const unsigned char[::1] view = _byte_view(data)
    cdef size_t length = <size_t>view.shape[0]
    cdef const unsigned char *p = &view[0] if length > 0 else NULL
    cdef uint32_t result
    if length >= CRC_NOGIL_BYTES_MIN:
        with nogil:
            result = eos_crc32c(start, p, length)
    else:
        result = eos_crc32c(start, p, length)
    return result


def _crc32c_portable(data, crc=0):
    """The portable table path alone, so tests can compare it with the hardware path."""
    cdef uint32_t start = _crc_start(crc)
    cdef const unsigned char[::1] view = _byte_view(data)
    cdef size_t length = <size_t>view.shape[0]
    cdef const unsigned char *p = &view[0] if length > 0 else NULL
    cdef uint32_t result
    with nogil:
        result = eos_crc32c_portable(start, p, length)
    return result


def _crc32c_combine(crc_a, crc_b, Py_ssize_t length_b):
    """The CRC of A followed by B from crc32c(A), crc32c(B) and len(B) alone."""
    if length_b < 0:
        raise ValueError(f"length_b must be >= 0, got {length_b}")
    return eos_crc32c_combine(_crc_start(crc_a), _crc_start(crc_b), <size_t>length_b)


def crc32c_backend():
    """Which implementation runs: "sse4.2" (hardware, self-checked) or "portable"."""
    return _BACKEND


cdef int32_t _as_int32(object value) except? -1:
    try:
        return value
    except OverflowError:
        raise ValueError(f"varint value must be in the int32 range, got {value!r}") from None


cdef int64_t _as_int64(object value) except? -1:
    try:
        return value
    except OverflowError:
        raise ValueError(f"varlong value must be in the int64 range, got {value!r}") from None


def encode_varint(value):
    """Zigzag + LEB128 encoding of a signed 32-bit value (1-5 bytes). ValueError outside int32."""
    cdef uint8_t out[EOS_VARLONG_BYTES_MAX]
    cdef size_t length = eos_encode_varint(out, _as_int32(value))
    return (<char *>out)[:length]


def encode_varlong(value):
    """Zigzag + LEB128 encoding of a signed 64-bit value (1-10 bytes). ValueError outside int64."""
    cdef uint8_t out[EOS_VARLONG_BYTES_MAX]
    cdef size_t length = eos_encode_varlong(out, _as_int64(value))
    return (<char *>out)[:length]


cdef Py_ssize_t _check_position(Py_ssize_t position, Py_ssize_t length) except -1:
    # A negative position is a caller's bug, not bad bytes. A position at or past the end is
    # a varint that ran out, which the decoders report as BAD_VARINT like any truncation.
    if position < 0:
        raise ValueError(f"position must be >= 0, got {position}")
    return position if position < length else length


def decode_varint(data, Py_ssize_t position=0):
    """(value, next position). InvalidRecordError (status BAD_VARINT) if the bytes run out or a
    5th byte still has its continuation bit; bits past bit 31 of a 5th byte are dropped, as
    Kafka's ByteUtils.readUnsignedVarint drops them."""
    cdef const unsigned char[::1] view = _byte_view(data)
    cdef Py_ssize_t length = view.shape[0]
    cdef Py_ssize_t start = _check_position(position, length)
    cdef const uint8_t *base = &view[0] if length > 0 else NULL
    cdef int32_t value = 0
    cdef size_t consumed = 0
    if length > 0:
        consumed = eos_decode_varint(base + start, base + length, &value)
    if consumed == 0:
        # Bad bytes: a typed error through the one status-to-exception function (rule 4).
        raise_for_status(status.BAD_VARINT, position)
    return value, position + <Py_ssize_t>consumed


def decode_varlong(data, Py_ssize_t position=0):
    """(value, next position); at most 10 bytes, else InvalidRecordError (BAD_VARINT)."""
    cdef const unsigned char[::1] view = _byte_view(data)
    cdef Py_ssize_t length = view.shape[0]
    cdef Py_ssize_t start = _check_position(position, length)
    cdef const uint8_t *base = &view[0] if length > 0 else NULL
    cdef int64_t value = 0
    cdef size_t consumed = 0
    if length > 0:
        consumed = eos_decode_varlong(base + start, base + length, &value)
    if consumed == 0:
        raise_for_status(status.BAD_VARINT, position)
    return value, position + <Py_ssize_t>consumed


def size_of_varint(value):
    """Bytes encode_varint(value) takes (1-5). ValueError outside int32."""
    return eos_size_of_varint(_as_int32(value))


def size_of_varlong(value):
    """Bytes encode_varlong(value) takes (1-10). ValueError outside int64."""
    return eos_size_of_varlong(_as_int64(value))


def murmur2(data):
    """Kafka's murmur2 of the bytes (Utils.murmur2), as a signed int32: the default
    partitioner's hash of a key. Keeps the GIL: keys are short."""
    cdef const unsigned char[::1] view = _byte_view(data)
    cdef size_t length = <size_t>view.shape[0]
    return eos_murmur2(&view[0] if length > 0 else NULL, length)


def murmur2_spans(data, starts, lengths):
    """murmur2 of each span data[starts[i] : starts[i] + lengths[i]] as an int32 ndarray; a
    span of length -1 (a null key) hashes to 0, which callers mask out. `starts` and
    `lengths` are 1-D int64 and int32 arrays of equal length. ValueError for a span outside
    data or a length below -1; no Python object is made per span."""
    cdef const unsigned char[::1] view = _byte_view(data)
    cdef const int64_t[::1] start_view = np.ascontiguousarray(starts, dtype=np.int64)
    cdef const int32_t[::1] length_view = np.ascontiguousarray(lengths, dtype=np.int32)
    cdef Py_ssize_t count = start_view.shape[0], i
    if length_view.shape[0] != count:
        raise ValueError(
            f"starts and lengths must have the same length, got {count} and "
            f"{length_view.shape[0]}")
    _check_spans(view.shape[0], start_view, length_view)
    out = np.empty(count, dtype=np.int32)
    cdef int32_t[::1] out_view = out
    cdef const uint8_t *base = &view[0] if view.shape[0] > 0 else NULL
    with nogil:
        for i in range(count):
            if length_view[i] < 0:
                out_view[i] = 0
            else:
                out_view[i] = eos_murmur2(base + start_view[i], <size_t>length_view[i])
    return out


cdef int _check_spans(Py_ssize_t size, const int64_t[::1] starts,
                      const int32_t[::1] lengths) except -1:
    """ValueError unless every span lies inside [0, size) (length -1 is a null)."""
    cdef Py_ssize_t i
    for i in range(starts.shape[0]):
        if lengths[i] < -1 or (lengths[i] >= 0 and (
                starts[i] < 0 or starts[i] > size - lengths[i])):
            raise ValueError(
                f"span {i} (start {starts[i]}, length {lengths[i]}) lies outside the "
                f"{size} bytes of data")
    return 0
