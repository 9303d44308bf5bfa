# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The producer's record accumulator: per partition, the open batch, and produce()'s
per-record path in C. The contract is pyext/accumulator.pyi; the readable twin of the classes
is eoslog.record.pyaccumulator, and the readable twin of produce() is the producer's Python
path, Producer.produce, which this one hands every case it does not take.

Python decides per batch (opening and closing batches, appending them to the log, retries,
delivery reports); this module does the per-record work of the common case without making a
Python object per record: argument checks, partition choice (the sticky partition for a null
key, murmur2 for a key), the append to the open BatchBuilder (in C, through the capsule
eoslog._ext.codec exports) and the delivery bookkeeping. Every other case (headers, a batch to
open or close, an unknown partition, a closed or failed producer, unusual argument types) is
handed, before anything changes, to the producer's Python produce(), which re-checks all of it
under the producer lock. A transactional producer's records take this path only while its
transaction is open (in_transaction, read under the producer lock); they go to a batch the
Python path opened in this transaction (transactional, its partition added by the sender before
the batch is appended).
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_Append
from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython.ref cimport PyObject
from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.stdlib cimport llabs
from posix.time cimport CLOCK_MONOTONIC, CLOCK_REALTIME, clock_gettime, timespec

from engine cimport eos_murmur2

from eoslog._ext import codec as _codec


cdef extern from "Python.h":
    PyObject *PyDict_GetItemWithError(object dictionary, object key) except? NULL


ctypedef int (*builder_append_fn)(object, int64_t, object, object) except -1

cdef builder_append_fn builder_append = <builder_append_fn>PyCapsule_GetPointer(
    _codec._BUILDER_APPEND, "eoslog._ext.codec.builder_append")

# Per record in ProducerBatch.reports: (callback, key, value, headers, timestamp, enqueued_s),
# flat, so a record with a callback adds references to a list, not a tuple. enqueued_s is
# time.monotonic() at produce() (CLOCK_MONOTONIC), for the report's latency().
REPORT_STRIDE = 6
cdef enum:
    KEY_MASK_POSITIVE = 0x7FFFFFFF  # Kafka's Utils.toPositive
    RECORD_OVERHEAD_BYTES = 36  # eoslog.limits.record_overhead_bytes_max
# The key hashes of eoslog.client.partitioner (HASH_*), the same numbers.
cdef enum KeyHash:
    HASH_NONE = 0
    HASH_MURMUR2 = 1
    HASH_CRC32 = 2
    HASH_FNV1A = 3

# zlib's CRC-32 (reflected polynomial 0xEDB88320), librdkafka's `consistent` hash, by table.
cdef uint32_t CRC32_TABLE[256]


cdef void fill_crc32_table() noexcept:
    cdef uint32_t entry
    cdef int index, bit
    for index in range(256):
        entry = <uint32_t>index
        for bit in range(8):
            entry = (entry >> 1) ^ (0xEDB88320 if entry & 1 else 0)
        CRC32_TABLE[index] = entry


fill_crc32_table()


cdef inline uint32_t crc32(const uint8_t *data, Py_ssize_t length) noexcept:
    cdef uint32_t crc = 0xFFFFFFFF
    cdef Py_ssize_t i
    for i in range(length):
        crc = CRC32_TABLE[(crc ^ data[i]) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


cdef inline uint32_t fnv1a(const uint8_t *data, Py_ssize_t length) noexcept:
    """32-bit FNV-1a (offset basis 0x811C9DC5, prime 0x01000193)."""
    cdef uint32_t hashed = 0x811C9DC5
    cdef Py_ssize_t i
    for i in range(length):
        hashed = (hashed ^ data[i]) * <uint32_t>0x01000193
    return hashed


@cython.final
cdef class ProducerBatch:
    """A batch of one partition: open (builder filling), then closed (raw bytes), then done.
    Guarded by the producer lock while open."""

    cdef public object builder
    cdef public double opened_s
    cdef public Py_ssize_t count
    cdef public object raw
    cdef public int64_t base_sequence
    # REPORT_STRIDE entries per record, or None while no record of the batch has a callback
    # (the common case: nothing per record at all).
    cdef public list reports
    # produce_batch() batches collect their outcome here instead of the report queue.
    cdef public list results
    # The bytes of its records' values, counted against queue.buffering.max.kbytes until the
    # batch is reported.
    cdef public Py_ssize_t value_bytes

    def __init__(self, builder, double opened_s):
        self.builder = builder
        self.opened_s = opened_s
        self.count = 0
        self.value_bytes = 0
        self.raw = b""
        self.base_sequence = -1
        self.reports = None
        self.results = None


@cython.final
cdef class PartitionState:
    """One partition of one topic in a producer: its open batch (producer lock), its closed
    batches in sequence order, and the send lock that keeps appends in that order."""

    cdef public int32_t partition
    cdef public ProducerBatch open
    cdef public object pending
    cdef public object send_lock
    cdef public int64_t next_sequence  # of the next batch to append (sender, send_lock)
    cdef public int64_t planned_sequence  # of the next batch to close (producer lock)

    def __init__(self, int32_t partition, pending, send_lock):
        self.partition = partition
        self.open = None
        self.pending = pending
        self.send_lock = send_lock
        self.next_sequence = 0
        self.planned_sequence = 0


cdef inline int64_t _wall_clock_ms() noexcept:
    """Milliseconds since the epoch, as time.time_ns() // 1_000_000."""
    cdef timespec now
    clock_gettime(CLOCK_REALTIME, &now)
    return <int64_t>now.tv_sec * 1000 + now.tv_nsec // 1000000


def wall_clock_ms():
    """Milliseconds since the epoch, as time.time_ns() // 1_000_000, read in C: eoslog.clock's
    wall clock, which the log and the coordinators read several times per transaction."""
    return _wall_clock_ms()


cdef inline double monotonic_s() noexcept:
    """Seconds on time.monotonic()'s clock (CLOCK_MONOTONIC on Linux)."""
    cdef timespec now
    clock_gettime(CLOCK_MONOTONIC, &now)
    return <double>now.tv_sec + <double>now.tv_nsec * 1e-9


@cython.final
cdef class RecordAccumulator:
    """produce()'s per-record path for one Producer. The producer owns the state (it creates
    the PartitionStates and registers them with add_partition) and the lock; this object
    reads and changes it only while holding that lock, as the producer's Python code does."""

    cdef public bint unusable  # closed or failed: produce() takes the Python path
    cdef public Py_ssize_t outstanding  # produced and not yet reported to poll()/flush()
    cdef readonly Py_ssize_t outstanding_max
    # Their values' bytes, librdkafka's measure for queue.buffering.max.kbytes.
    cdef public Py_ssize_t outstanding_bytes
    cdef readonly Py_ssize_t outstanding_bytes_max
    cdef readonly Py_ssize_t batch_records_max
    cdef readonly bint close_every_record
    cdef readonly bint transactional
    # batch.size leaves room for a record larger than message.max.bytes: each record is
    # weighed here (key, value and librdkafka's 36 bytes of framing; headers take the Python
    # path anyway), and one too large, or not bytes, takes the Python path, which refuses it.
    cdef readonly bint check_record_bytes
    cdef readonly Py_ssize_t record_bytes_max
    # The partitioner's key hash (KeyHash) and whether an empty key goes to a random
    # partition (consistent_random); a null key takes the sticky partition when there is one.
    cdef readonly int key_hash
    cdef readonly bint empty_key_random
    # A transactional producer's transaction is open (IN_TRANSACTION): set and cleared by its
    # TransactionManager on every transition, under the producer lock. Outside one, produce()
    # takes the Python path, which raises the state's error.
    cdef public bint in_transaction
    cdef object acquire
    cdef object release
    cdef object sticky
    cdef object slow
    cdef object send
    cdef object clock_ms
    cdef object default_report
    cdef dict topics  # topic -> list (one entry per partition: PartitionState or None)

    def __init__(self, lock, dict sticky, slow, send, clock_ms, default_report, *,
                 Py_ssize_t outstanding_max, Py_ssize_t batch_records_max,
                 bint close_every_record, bint transactional, bint check_record_bytes=False,
                 Py_ssize_t record_bytes_max=0, int key_hash=HASH_MURMUR2, bint empty_key_random=False,
                 Py_ssize_t outstanding_bytes_max=PY_SSIZE_T_MAX):
        if outstanding_max < 1 or batch_records_max < 1:
            raise ValueError("outstanding_max and batch_records_max must be at least 1")
        self.acquire = lock.acquire
        self.release = lock.release
        self.sticky = sticky
        self.slow = slow
        self.send = send
        self.clock_ms = clock_ms
        self.default_report = default_report
        self.outstanding_max = outstanding_max
        self.batch_records_max = batch_records_max
        self.close_every_record = close_every_record
        self.transactional = transactional
        self.check_record_bytes = check_record_bytes
        self.record_bytes_max = record_bytes_max
        self.key_hash = key_hash
        self.empty_key_random = empty_key_random
        self.in_transaction = False
        self.unusable = False
        self.outstanding = 0
        self.outstanding_bytes = 0
        self.outstanding_bytes_max = outstanding_bytes_max
        self.topics = {}

    def add_partition(self, str topic, Py_ssize_t partitions, PartitionState state not None):
        """Make `state` (partition state.partition of a topic of `partitions` partitions)
        reachable by produce(). Producer lock held."""
        if not 0 <= state.partition < partitions:
            raise ValueError(f"partition {state.partition} outside [0, {partitions})")
        slots = self.topics.get(topic)
        if slots is None or len(slots) != partitions:
            slots = self.topics[topic] = [None] * partitions
        slots[state.partition] = state

    def forget_topic(self, str topic):
        """Take the topic off the fast path (its partition count changed, or it was deleted):
        its records take the Python path until add_partition registers it again. Producer
        lock held."""
        self.topics.pop(topic, None)

    cdef inline Py_ssize_t key_partition(self, bytes key, Py_ssize_t count) noexcept:
        """The keyed record's partition under the producer's partitioner; -1 when it is
        chosen at random (the Python path does that)."""
        cdef const uint8_t *data = <const uint8_t *>PyBytes_AS_STRING(key)
        cdef Py_ssize_t length = PyBytes_GET_SIZE(key)
        if self.key_hash == HASH_MURMUR2:
            return (eos_murmur2(data, <size_t>length) & KEY_MASK_POSITIVE) % count
        if self.key_hash == HASH_CRC32:
            if length == 0 and self.empty_key_random:
                return -1
            return <Py_ssize_t>(crc32(data, length) % <uint32_t>count)
        if self.key_hash == HASH_FNV1A:
            # The absolute value of the hash read as an int32, as librdkafka's fnv1a.
            return llabs(<int64_t><int32_t>fnv1a(data, length)) % count
        return -1

    cdef PartitionState find(self, str topic, object key, Py_ssize_t partition):
        """The state of the record's partition if its open batch can take the record on the
        fast path, else None. Producer lock held."""
        cdef PyObject *found = PyDict_GetItemWithError(self.topics, topic)
        if found == NULL:
            return None
        cdef list slots = <list>found
        cdef Py_ssize_t count = len(slots), chosen
        if partition == -1:  # RD_KAFKA_PARTITION_UA; any other negative: the Python path refuses it
            if key is None:
                found = PyDict_GetItemWithError(self.sticky, topic)
                if found == NULL:
                    return None
                chosen = <object>found
            else:
                chosen = self.key_partition(key, count)
                if chosen < 0:
                    return None
        elif partition < count:
            chosen = partition
        else:
            return None
        if chosen < 0 or chosen >= count:
            return None
        cdef object state = slots[chosen]
        if state is None:
            return None
        cdef ProducerBatch batch = (<PartitionState>state).open
        # The first record of a batch and the one that closes it take the Python path.
        if (batch is None or batch.count == 0 or self.close_every_record
                or batch.count + 1 >= self.batch_records_max):
            return None
        return <PartitionState>state

    def produce(self, topic, value=None, key=None, partition=-1, on_delivery=None,
                timestamp=0, headers=None, *, callback=None):
        """Producer.produce (same arguments, same results, same errors): queue one record."""
        if (headers is not None or type(topic) is not str
                or type(partition) is not int or type(timestamp) is not int
                or (on_delivery is not None and not callable(on_delivery))
                or (callback is not None and not callable(callback))):
            return self.slow(topic, value, key, partition, on_delivery, timestamp, headers,
                             callback=callback)
        cdef object record_value = value.encode() if type(value) is str else value
        cdef object record_key = key.encode() if type(key) is str else key
        if record_key is not None and type(record_key) is not bytes:
            return self.slow(topic, value, key, partition, on_delivery, timestamp, headers,
                             callback=callback)
        if self.check_record_bytes and (
                (record_value is not None and type(record_value) is not bytes)
                or RECORD_OVERHEAD_BYTES
                + (0 if record_value is None else PyBytes_GET_SIZE(record_value))
                + (0 if record_key is None else PyBytes_GET_SIZE(record_key))
                > self.record_bytes_max):
            return self.slow(topic, value, key, partition, on_delivery, timestamp, headers,
                             callback=callback)
        report = on_delivery or callback or self.default_report
        cdef Py_ssize_t value_bytes = (
            0 if record_value is None else PyBytes_GET_SIZE(record_value)
            if type(record_value) is bytes else len(record_value))
        cdef Py_ssize_t partition_index
        cdef int64_t timestamp_ms
        try:
            partition_index = partition
            timestamp_ms = timestamp
        except OverflowError:  # the Python path raises what it raises, after its own checks
            return self.slow(topic, value, key, partition, on_delivery, timestamp, headers,
                             callback=callback)
        if timestamp_ms == 0:
            if self.clock_ms is None:
                timestamp_ms = _wall_clock_ms()
                timestamp = None  # made only if a report needs it
            else:
                timestamp = self.clock_ms()
                timestamp_ms = timestamp
        cdef PartitionState state
        cdef ProducerBatch batch
        cdef list reports
        cdef bint send
        self.acquire()
        try:
            state = None
            if (not self.unusable and self.outstanding < self.outstanding_max
                    and value_bytes <= self.outstanding_bytes_max - self.outstanding_bytes
                    and (self.in_transaction or not self.transactional)):
                state = self.find(topic, record_key, partition_index)
            if state is not None:
                batch = state.open
                if not builder_append(batch.builder, timestamp_ms, record_key, record_value):
                    state = None  # full: the Python path closes it and opens the next
                else:
                    reports = batch.reports
                    if report is not None:
                        if reports is None:
                            reports = batch.reports = [None] * (REPORT_STRIDE * batch.count)
                        if timestamp is None:
                            timestamp = timestamp_ms
                        PyList_Append(reports, report)
                        PyList_Append(reports, record_key)
                        PyList_Append(reports, record_value)
                        PyList_Append(reports, None)
                        PyList_Append(reports, timestamp)
                        PyList_Append(reports, monotonic_s())
                    elif reports is not None:
                        reports.extend(NO_REPORT)
                    batch.count += 1
                    batch.value_bytes += value_bytes
                    self.outstanding += 1
                    self.outstanding_bytes += value_bytes
                    send = bool(state.pending)
        finally:
            self.release()
        if state is None:
            return self.slow(topic, value, key, partition, on_delivery,
                             timestamp_ms if timestamp is None else timestamp, headers,
                             callback=callback)
        if send:
            self.send(topic, state)


NO_REPORT = (None,) * REPORT_STRIDE
