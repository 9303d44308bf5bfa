# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Message (docs/api.md "Consumer"): one record as a consumer sees it, shaped like
confluent_kafka.Message, made one per record in C by make_messages.

A fetch is indexed, not decoded: index_records walks its batches in C (framing, CRC, records
checked exactly as the columnar decoder checks them) and writes one eos_record_ref per record,
pointers into the fetched bytes with nothing copied. A MessageBatch holds those references and
keeps the bytes they point into alive (the read's view of the mapped segment, decompressed
sections); a Message is two fields, its MessageBatch and its index there. So making a Message
allocates one object and runs no Python code, and each accessor builds its Python object from
the record's bytes only when called: a consumer that never reads keys or headers never pays for
them. This module imports nothing from the client.

Measured (bench/consumer_bench.py workload, 2 shared cores): the Arrow-layout decode this
replaced cost ~130 ns a record with headers (its per-fetch buffers, sized for the worst case,
were ~7 MiB for a 1 MiB fetch); indexing costs ~30 ns with the CRC.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_Append
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport INT64_MAX, int32_t, int64_t, uint8_t, uint64_t, uintptr_t
from libc.string cimport memcpy

from batch cimport (
    eos_batch_crc,
    eos_batch_header,
    eos_frame_batch,
    eos_index_records,
    eos_next_header,
    eos_read_header,
    eos_record_ref,
)
from engine cimport *

import pyarrow as pa

from eoslog import limits
from eoslog.errors import raise_for_status
from eoslog.record import compression

include "framing.pxi"

# Confluent's timestamp types are Kafka's + 1 (TIMESTAMP_CREATE_TIME = 1).
cdef int TIMESTAMP_TYPE_BASE = 1


@cython.final
cdef class RecordRefs:
    """A growable array of record references (engine/batch.h eos_record_ref), filled by
    index_records, then frozen by the MessageBatch that takes it. The memory comes from
    Arrow's default pool, which keeps freed memory for reuse, as columns.pxi's _grow explains:
    a fetch then writes into pages it already has instead of faulting fresh ones in."""

    cdef object _buffer
    cdef eos_record_ref *refs
    cdef readonly Py_ssize_t count
    cdef readonly Py_ssize_t capacity
    cdef readonly bint frozen

    def __cinit__(self, Py_ssize_t capacity):
        if capacity < 0:
            raise ValueError(f"capacity must not be negative, got {capacity}")
        self.count = 0
        self.capacity = 0
        self.reserve(capacity)

    cdef int reserve(self, Py_ssize_t needed) except -1:
        """Room for at least `needed` references in all (at least doubling when it grows)."""
        cdef eos_record_ref *refs
        if needed <= self.capacity:
            return 0
        capacity = max(needed, 2 * self.capacity, 1)
        buffer = pa.allocate_buffer(capacity * <Py_ssize_t>sizeof(eos_record_ref))
        assert buffer.is_mutable and buffer.size >= capacity * sizeof(eos_record_ref)
        refs = <eos_record_ref *><uintptr_t>buffer.address
        if self.count:
            memcpy(refs, self.refs, self.count * sizeof(eos_record_ref))
        self._buffer = buffer
        self.refs = refs
        self.capacity = capacity
        assert self.count <= self.capacity
        return 0


def index_records(data, Py_ssize_t start, Py_ssize_t end, RecordRefs refs, list owners, *,
                  bint verify_crc=True, int64_t offset_min=0, held_bytes_max=None):
    """Append to `refs` a reference to each data record (offset >= offset_min) of the whole
    batches in data[start, end), growing it as needed. Control batches are skipped.
    Decompressed sections are appended to `owners`: the references point into them and into
    `data`, which the caller must keep alive (a MessageBatch does). Raises as
    codec.decode_columns does for a corrupt or malformed batch (CRC checked when verify_crc),
    with `refs` then holding the batches before the bad one.

    held_bytes_max (message.pyi): once the decompressed sections in `owners` hold that many
    bytes and `refs` holds a record, stop before the next compressed batch and return its
    base offset (where the next fetch starts); -1 when every batch of the range was indexed."""
    cdef const uint8_t[::1] view = data
    cdef Py_ssize_t size = view.shape[0]
    cdef Py_ssize_t position = start
    cdef size_t batch_size = 0
    cdef eos_batch_header h
    cdef _RecordsSection section
    cdef int64_t count
    cdef int status
    cdef const uint8_t *batch
    cdef int64_t held = 0, held_max = -1
    check_position(start)
    if held_bytes_max is not None:
        held_max = held_bytes_max
        # The sections earlier calls left in `owners` count too (not `data` itself).
        held = sum(len(owner) for owner in owners if type(owner) is bytes and owner is not data)
    if end > size or end < start:
        raise ValueError(f"bad range [{start}, {end}) of {size} bytes")
    if refs.frozen:
        raise ValueError("these references belong to a MessageBatch already")
    while position < end:
        batch = at(view, position)
        status = eos_frame_batch(batch, <size_t>(end - position), &batch_size)
        if status == EOS_TRUNCATED_BATCH:
            break
        check(status, position)
        check(eos_read_header(batch, batch_size, &h), position)
        if verify_crc and eos_batch_crc(batch, batch_size) != h.crc:
            raise_for_status(EOS_CRC_MISMATCH, position)
        if h.attributes & EOS_CONTROL_MASK:
            position += <Py_ssize_t>batch_size
            continue
        check_codec_and_count(&h, position)
        if (held_max >= 0 and refs.count > 0 and held >= held_max
                and (h.attributes & EOS_COMPRESSION_MASK) != EOS_COMPRESSION_NONE):
            # A fetch of batches each just under the decompressed limit must not add up:
            # the rest is fetched next time.
            return h.base_offset
        section = records_section(data, batch, batch_size, &h, position,
                                  limits.decompressed_batch_bytes_max)
        if section.owner is not None:
            owners.append(section.owner)
            held += <int64_t>section.size
        # The count in the header bounds the records; the section's size bounds a lying count
        # (a record takes at least limits.record_bytes_min bytes).
        refs.reserve(refs.count + min(<int64_t>h.records_count,
                                      <int64_t>section.size // limits.record_bytes_min + 1))
        count = refs.count
        status = eos_index_records(refs.refs, refs.capacity, &count, section.start,
                                   section.size, &h, offset_min, INT64_MAX)
        if status == EOS_NEED_SPACE:
            raise AssertionError("index_records reserved too little room for a batch")
        check(status, position)
        refs.count = count
        position += <Py_ssize_t>batch_size
    return -1


# What a field of _Overrides holds until its set_* is called.
cdef object _UNSET = object()


@cython.final
cdef class _Overrides:
    """The fields one Message's set_* methods replaced: any object, kept as given, as
    confluent's Message keeps it (a DeserializingConsumer stores the decoded key and value
    this way). A field still _UNSET is read from the record."""

    cdef object topic
    cdef object key
    cdef object value
    cdef object headers
    cdef object error

    def __cinit__(self):
        self.topic = self.key = self.value = self.headers = self.error = _UNSET


@cython.final
cdef class MessageBatch:
    """The records of one fetch of one partition, as references into bytes this object keeps
    alive: the read's view of the mapped segment (so the mapping stays, and a truncation under
    it replaces the file instead of cutting it: mapped_log.py) and decompressed sections. A
    Message keeps its fetch alive, as a confluent Message keeps its fetch buffer.
    `next_offset`: where the consumer's position goes once every record here is consumed (past
    control or dropped batches after the last one). `decompressed_bytes`: the size of the
    decompressed sections it keeps alive (the bytes objects among its owners). Immutable, but
    for `overrides`, which only the one-record batch of a Message whose set_* was called has
    (overrides_of); used by the thread that owns the Consumer."""

    cdef readonly str topic
    cdef readonly int partition
    cdef readonly Py_ssize_t count
    cdef readonly int64_t next_offset
    cdef readonly Py_ssize_t decompressed_bytes
    cdef RecordRefs _refs
    cdef list _owners
    cdef const eos_record_ref *refs
    cdef _Overrides overrides

    def __cinit__(self, str topic, int partition, RecordRefs refs, list owners,
                  int64_t next_offset):
        if refs.frozen or refs.count <= 0:
            raise ValueError("a MessageBatch takes unshared references to at least one record")
        refs.frozen = True
        self.topic = topic
        self.partition = partition
        self.count = refs.count
        self._refs = refs
        self._owners = owners
        self.refs = refs.refs
        self.next_offset = next_offset
        self.decompressed_bytes = sum(len(owner) for owner in owners if type(owner) is bytes)
        if next_offset <= self.refs[self.count - 1].offset:
            raise ValueError("next_offset must be past the last record")

    def offset_at(self, Py_ssize_t index):
        if not 0 <= index < self.count:
            raise IndexError(index)
        return self.refs[index].offset


@cython.final
@cython.no_gc
@cython.freelist(256)
cdef class Message:
    """One record (confluent_kafka.Message): topic(), partition(), offset(), key(), value(),
    headers(), timestamp(), leader_epoch(), latency(), error(), len(), and confluent's
    setters set_topic(), set_key(), set_value(), set_headers(), set_error(), which replace a
    field of this Message only, with any object, kept as given. error() is None for a record;
    an event the consumer reports as a message (error_message) has its KafkaError there.

    No cyclic GC: a Message refers only to its MessageBatch, which never refers back to a
    Message, so no cycle can pass through one, unless a set_* stores an object that refers
    back to the Message; such a cycle is never freed (a Message tracked by the GC would cost
    every Message 16 bytes and the collector's time)."""

    cdef MessageBatch _batch
    cdef Py_ssize_t _index

    def __init__(self, *args, **kwargs):
        raise TypeError("Messages are made by the Consumer")

    def topic(self):
        cdef _Overrides o = self._batch.overrides
        if o is not None and o.topic is not _UNSET:
            return o.topic
        return self._batch.topic

    def partition(self):
        return self._batch.partition

    def offset(self):
        cdef int64_t offset = ref_of(self).offset
        # As confluent's: None for a logical offset (an error message without a position).
        return offset if offset >= 0 else None

    def key(self):
        cdef _Overrides o = self._batch.overrides
        if o is not None and o.key is not _UNSET:
            return o.key
        cdef const eos_record_ref *r = ref_of(self)
        if r.key == NULL:
            return None
        return PyBytes_FromStringAndSize(<const char *>r.key, r.key_length)

    def value(self):
        cdef _Overrides o = self._batch.overrides
        if o is not None and o.value is not _UNSET:
            return o.value
        cdef const eos_record_ref *r = ref_of(self)
        if r.value == NULL:
            return None
        return PyBytes_FromStringAndSize(<const char *>r.value, r.value_length)

    def headers(self):
        cdef _Overrides o = self._batch.overrides
        if o is not None and o.headers is not _UNSET:
            return o.headers
        cdef const eos_record_ref *r = ref_of(self)
        cdef const uint8_t *p = r.headers
        cdef const uint8_t *key
        cdef const uint8_t *value
        cdef int32_t key_length, value_length, i
        if r.headers_count <= 0:
            return None
        found = []
        for i in range(r.headers_count):
            p = eos_next_header(p, r.end, &key, &key_length, &value, &value_length)
            # Malformed key bytes are replaced, as batch_records and Java's String do.
            name = PyUnicode_DecodeUTF8(<const char *>key, key_length, "replace")
            found.append((name, None if value == NULL
                          else PyBytes_FromStringAndSize(<const char *>value, value_length)))
        return found

    def timestamp(self):
        cdef const eos_record_ref *r = ref_of(self)
        return (TIMESTAMP_TYPE_BASE + r.timestamp_type, r.timestamp_ms)

    def leader_epoch(self):
        cdef const eos_record_ref *r = ref_of(self)
        # librdkafka reports the batch's partition leader epoch, None where it has none (-1).
        return None if r.leader_epoch < 0 else r.leader_epoch

    def latency(self):
        # confluent's latency() is a producer's, from produce() to the acknowledgement; a
        # consumed message has none.
        return None

    def error(self):
        cdef _Overrides o = self._batch.overrides
        if o is not None and o.error is not _UNSET:
            return o.error
        return None

    def set_topic(self, topic, /):
        overrides_of(self).topic = topic

    def set_key(self, key, /):
        overrides_of(self).key = key

    def set_value(self, value, /):
        overrides_of(self).value = value

    def set_headers(self, headers, /):
        overrides_of(self).headers = headers

    def set_error(self, error, /):
        overrides_of(self).error = error

    def len(self):
        cdef _Overrides o = self._batch.overrides
        if o is not None and o.value is not _UNSET:
            # As confluent's len(): the length of whatever set_value() stored.
            return 0 if o.value is None else len(o.value)
        cdef const eos_record_ref *r = ref_of(self)
        return 0 if r.value == NULL else r.value_length

    def __len__(self):
        return self.len()

    def __repr__(self):
        return (f"Message(topic={self.topic()!r}, partition={self.partition()}, "
                f"offset={self.offset()})")


cdef inline const eos_record_ref *ref_of(Message message) noexcept:
    # A function, not a cdef method: a method would add a vtable pointer to every Message,
    # 32 -> 48 bytes in pymalloc's size classes.
    return &message._batch.refs[message._index]


cdef _Overrides overrides_of(Message message):
    """The Message's overrides, made at its first set_*: the Message then gets a MessageBatch
    of its own, one reference (a copy of its record's) with the fetch it came from as owner,
    so the other Messages of that fetch keep their fields and the fetch stays alive."""
    cdef MessageBatch batch = message._batch
    cdef MessageBatch own
    cdef RecordRefs refs
    if batch.overrides is not None:
        return batch.overrides
    refs = RecordRefs(1)
    refs.refs[0] = batch.refs[message._index]
    refs.count = 1
    own = MessageBatch(batch.topic, batch.partition, refs, [batch], refs.refs[0].offset + 1)
    own.overrides = _Overrides()
    message._batch = own
    message._index = 0
    return own.overrides


def make_messages(list out, MessageBatch batch, Py_ssize_t start, Py_ssize_t stop):
    """Append Messages for records [start, stop) of `batch` to `out`."""
    if start < 0 or stop < start or stop > batch.count:
        raise ValueError(f"bad record range [{start}, {stop}) of {batch.count}")
    cdef Message message
    cdef Py_ssize_t index
    for index in range(start, stop):
        message = Message.__new__(Message)
        message._batch = batch
        message._index = index
        PyList_Append(out, message)


def error_message(str topic, int partition, int64_t offset, error, bytes reason):
    """A Message that reports an event instead of a record, as librdkafka's error messages
    do (_PARTITION_EOF, _AUTO_OFFSET_RESET, ...): error() is `error`, value() and len() are
    `reason` (confluent's value() is the error string), key() and headers() None, timestamp()
    (TIMESTAMP_NOT_AVAILABLE, -1), offset() `offset` (None when negative)."""
    cdef RecordRefs refs = RecordRefs(1)
    cdef eos_record_ref *r = refs.refs
    r.offset = offset
    r.timestamp_ms = -1
    r.key = r.value = r.headers = r.end = NULL
    r.key_length = r.value_length = -1
    r.headers_count = 0
    r.timestamp_type = -TIMESTAMP_TYPE_BASE
    r.leader_epoch = -1
    refs.count = 1
    cdef MessageBatch batch = MessageBatch(topic, partition, refs, [], offset + 1)
    batch.overrides = _Overrides()
    batch.overrides.error = error
    batch.overrides.value = reason
    cdef Message message = Message.__new__(Message)
    message._batch = batch
    message._index = 0
    return message
