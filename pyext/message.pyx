# cython: language_level=3, boundscheck=False, wraparound=False
"""Message (API.md "Consumer"): one record as a consumer sees it, shaped like
confluent_kafka.Message, made one per record in C by make_messages.

A Message is two fields: the decoded fetch it belongs to and its index there. The fetch (the
client's FetchedRecords) holds the records as Arrow-layout columns and turns a column into a
Python list the first time any Message asks for it, so making a Message allocates one object
and runs no Python code. This module imports nothing from the client: it calls the fetch's
methods by name (see message.pyi, FetchedView).
"""

cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize


@cython.final
@cython.no_gc
@cython.freelist(256)
cdef class Message:
    """One record (confluent_kafka.Message): topic(), partition(), offset(), key(), value(),
    headers(), timestamp(), error(), len(). Immutable. Consumer errors are raised as
    KafkaException, never delivered as messages, so error() is always None.

    No cyclic GC: a Message refers only to its fetch, and a fetch never refers back to a
    Message, so no cycle can pass through one."""

    cdef readonly object _fetched
    cdef readonly Py_ssize_t _index

    def __init__(self, *args, **kwargs):
        raise TypeError("Messages are made by the Consumer")

    def topic(self):
        return self._fetched.topic

    def partition(self):
        return self._fetched.partition

    def offset(self):
        found = self._fetched._offsets
        return (found if found is not None else self._fetched.offsets())[self._index]

    def key(self):
        found = self._fetched._keys  # the list, once any Message of the fetch made it
        return (found if found is not None else self._fetched.keys())[self._index]

    def value(self):
        found = self._fetched._values
        return (found if found is not None else self._fetched.values())[self._index]

    def headers(self):
        found = self._fetched.headers()[self._index]
        return None if found is None else list(found)

    def timestamp(self):
        return self._fetched.timestamps()[self._index]

    def error(self):
        return None

    def len(self):
        value = self.value()
        return 0 if value is None else len(value)

    def __len__(self):
        return self.len()

    def __repr__(self):
        return (f"Message(topic={self.topic()!r}, partition={self.partition()}, "
                f"offset={self.offset()})")


def make_messages(list out, object fetched, Py_ssize_t start, Py_ssize_t stop):
    """Append Messages for records [start, stop) of `fetched` to `out`."""
    if start < 0 or stop < start:
        raise ValueError(f"bad record range [{start}, {stop})")
    cdef Message message
    cdef Py_ssize_t index
    for index in range(start, stop):
        message = Message.__new__(Message)
        message._fetched = fetched
        message._index = index
        out.append(message)


def binary_list(Py_ssize_t count, const unsigned char[::1] validity, const int[::1] offsets,
                const unsigned char[::1] data):
    """An Arrow binary column (validity bitmap least significant bit first, count + 1 int32
    offsets, data) as a list of bytes, None where null: one bytes object per element, made
    in C."""
    if offsets.shape[0] < count + 1 or validity.shape[0] < (count + 7) // 8:
        raise ValueError("column buffers shorter than the count")
    cdef list out = []
    cdef Py_ssize_t index
    cdef int start, stop
    cdef const char *base = <const char *>&data[0] if data.shape[0] else NULL
    for index in range(count):
        if not (validity[index >> 3] >> (index & 7)) & 1:
            out.append(None)
            continue
        start = offsets[index]
        stop = offsets[index + 1]
        if start < 0 or stop < start or stop > data.shape[0]:
            raise ValueError(f"offsets of element {index} are outside the data")
        out.append(PyBytes_FromStringAndSize(base + start, stop - start))
    return out
