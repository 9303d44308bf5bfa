# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Per-partition producer state (docs/format.md §8; Kafka's ProducerStateManager, ProducerStateEntry
and ProducerAppendInfo). The contract is pyext/producer_state.pyi.

A table maps each producer id to its entry: the epoch, the last 5 data batches (sequences and
offsets, for duplicate detection), the open transaction's first offset, the coordinator epoch
and the newest timestamp. Appends are checked against it (check_append) before any byte is
written and recorded (apply_append) only after the bytes are written: a failed check leaves no
trace (docs/style.md rule 9). The snapshot file layout (§8.3) is defined here, once, for writing and
reading.

Thread safety: the partition's writer calls every method under the partition lock; nothing
here locks.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport INT32_MAX, int16_t, int32_t, int64_t, uint8_t, uint32_t

from engine cimport (
    eos_crc32c,
    eos_load_i16be,
    eos_load_i32be,
    eos_load_i64be,
    eos_load_u32be,
    eos_store_i16be,
    eos_store_i32be,
    eos_store_i64be,
    eos_store_u32be,
)

from eoslog.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)

# Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: duplicates are found among this many.
BATCHES_RETAINED = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_OFFSET = -1

# The snapshot layout (docs/format.md §8.3): a header, then fixed-size entries, big-endian.
cdef enum:
    _VERSION = 1
    _HEADER_BYTES = 10  # version int16, crc uint32 (of the bytes after it), count int32
    _CRC_START = 6
    _ENTRY_BYTES = 46
SNAPSHOT_VERSION = _VERSION
SNAPSHOT_HEADER_BYTES = _HEADER_BYTES
SNAPSHOT_ENTRY_BYTES = _ENTRY_BYTES
# Entry fields: producer id int64, epoch int16, last sequence int32, last offset int64, offset
# delta int32, timestamp int64, coordinator epoch int32, open transaction first offset int64.
cdef enum:
    _E_PRODUCER_ID = 0
    _E_EPOCH = 8
    _E_LAST_SEQUENCE = 10
    _E_LAST_OFFSET = 14
    _E_OFFSET_DELTA = 22
    _E_TIMESTAMP = 26
    _E_COORDINATOR_EPOCH = 34
    _E_TXN_FIRST_OFFSET = 38
    _RETAINED = 5

# check_append results besides raising.
APPEND_OK = 0
APPEND_DUPLICATE = 1


cdef struct BatchMetadata:
    int32_t last_sequence
    int64_t last_offset
    int32_t offset_delta
    int64_t timestamp


cdef inline int32_t first_sequence_of(int32_t last_sequence, int32_t offset_delta) noexcept:
    """Kafka's DefaultRecordBatch.decrementSequence: sequences wrap from 2^31-1 to 0."""
    if last_sequence - offset_delta < 0:
        return <int32_t>(<int64_t>INT32_MAX - (offset_delta - last_sequence) + 1)
    return last_sequence - offset_delta


def last_sequence_of(int32_t base_sequence, int32_t last_offset_delta):
    """The sequence of a batch's last record (Kafka's DefaultRecordBatch.incrementSequence):
    base + delta, wrapping from 2^31-1 to 0."""
    return _last_sequence_of(base_sequence, last_offset_delta)


cdef inline int32_t _last_sequence_of(int32_t base_sequence, int32_t delta) noexcept:
    if base_sequence > INT32_MAX - delta:
        return <int32_t>(delta - (INT32_MAX - base_sequence) - 1)
    return base_sequence + delta


@cython.final
cdef class ProducerEntry:
    """One producer's state. Read-only from Python: the table changes it."""

    cdef readonly int64_t producer_id
    cdef readonly int16_t epoch
    cdef readonly int32_t coordinator_epoch
    cdef readonly int64_t last_timestamp
    # First offset of the producer's open transaction, NO_OFFSET when none is open.
    cdef readonly int64_t current_txn_first_offset
    cdef BatchMetadata batches[_RETAINED]  # oldest first
    cdef int batch_count

    def __cinit__(self, int64_t producer_id):
        self.producer_id = producer_id
        self.epoch = NO_PRODUCER_EPOCH
        self.coordinator_epoch = -1
        self.last_timestamp = -1
        self.current_txn_first_offset = NO_OFFSET
        self.batch_count = 0

    @property
    def batch_metadata(self):
        """The retained batches, oldest first: (first sequence, last sequence, first offset,
        last offset, timestamp) each."""
        cdef int i
        cdef BatchMetadata *b
        rows = []
        for i in range(self.batch_count):
            b = &self.batches[i]
            rows.append((
                first_sequence_of(b.last_sequence, b.offset_delta),
                b.last_sequence,
                b.last_offset - b.offset_delta,
                b.last_offset,
                b.timestamp,
            ))
        return rows

    @property
    def last_sequence(self):
        """The newest retained batch's last sequence, NO_SEQUENCE when none is retained."""
        return self.batches[self.batch_count - 1].last_sequence if self.batch_count else NO_SEQUENCE

    @property
    def last_data_offset(self):
        """The newest retained batch's last offset, NO_OFFSET when none is retained."""
        return self.batches[self.batch_count - 1].last_offset if self.batch_count else NO_OFFSET

    cdef int find_duplicate(self, int32_t first_sequence, int32_t last_sequence) noexcept:
        cdef int i
        cdef BatchMetadata *b
        for i in range(self.batch_count):
            b = &self.batches[i]
            if (
                b.last_sequence == last_sequence
                and first_sequence_of(b.last_sequence, b.offset_delta) == first_sequence
            ):
                return i
        return -1

    cdef void set_epoch(self, int16_t epoch) noexcept:
        """A different epoch (data or marker) forgets the cached batches (PSE
        maybeUpdateProducerEpoch)."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batch_count = 0

    cdef void add_batch(
        self, int32_t last_sequence, int64_t last_offset, int32_t offset_delta, int64_t timestamp
    ) noexcept:
        cdef int i
        if self.batch_count == _RETAINED:
            for i in range(_RETAINED - 1):
                self.batches[i] = self.batches[i + 1]
            self.batch_count -= 1
        self.batches[self.batch_count].last_sequence = last_sequence
        self.batches[self.batch_count].last_offset = last_offset
        self.batches[self.batch_count].offset_delta = offset_delta
        self.batches[self.batch_count].timestamp = timestamp
        self.batch_count += 1


@cython.final
cdef class ProducerStateTable:
    """The producer entries of one partition and the offset their state covers."""

    cdef dict _entries
    # The open transactions: first offset -> producer id (Kafka's ongoingTxns). A single node
    # is its own ISR, so a completed transaction is below the high watermark at once and
    # needs no "unreplicated" set (docs/format.md §7).
    cdef dict _ongoing
    # State covers every offset below this one (Kafka's mapEndOffset).
    cdef public int64_t map_end_offset

    def __cinit__(self, int64_t map_end_offset=0):
        self._entries = {}
        self._ongoing = {}
        self.map_end_offset = map_end_offset

    def first_unstable_offset(self):
        """The first offset of the oldest open transaction, or None (docs/format.md §7)."""
        return min(self._ongoing) if self._ongoing else None

    def __len__(self):
        return len(self._entries)

    def entry(self, int64_t producer_id):
        """The producer's entry, or None."""
        return self._entries.get(producer_id)

    def producer_ids(self):
        return sorted(self._entries)

    def open_transactions(self):
        """{first offset: producer id} of every open transaction."""
        return dict(self._ongoing)

    cdef ProducerEntry _entry_or_new(self, int64_t producer_id):
        entry = self._entries.get(producer_id)
        if entry is None:
            entry = ProducerEntry(producer_id)
            self._entries[producer_id] = entry
        return <ProducerEntry>entry

    def check_append(
        self,
        int64_t producer_id,
        int16_t epoch,
        int32_t base_sequence,
        int32_t last_offset_delta,
        bint transactional,
    ):
        """Check a client's data batch against the state before it (docs/format.md §8.2, in
        Kafka's order), changing nothing. Returns (APPEND_OK, None) or (APPEND_DUPLICATE,
        (first offset, last offset, timestamp) of the original). Raises
        InvalidProducerEpochError, OutOfOrderSequenceError or InvalidTxnStateError."""
        cdef int32_t last_sequence = _last_sequence_of(base_sequence, last_offset_delta)
        cdef ProducerEntry entry
        cdef int found
        cdef int32_t previous
        cdef BatchMetadata *b
        existing = self._entries.get(producer_id)
        if existing is None:
            # An unknown producer (new, expired or state lost) starts with any epoch and any
            # sequence (docs/format.md §8.2 item 5).
            return APPEND_OK, None
        entry = <ProducerEntry>existing
        if epoch == entry.epoch:
            found = entry.find_duplicate(base_sequence, last_sequence)
            if found >= 0:
                b = &entry.batches[found]
                return APPEND_DUPLICATE, (b.last_offset - b.offset_delta, b.last_offset, b.timestamp)
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id}: epoch {epoch} is older than the current epoch "
                f"{entry.epoch}"
            )
        if entry.epoch != NO_PRODUCER_EPOCH:
            if epoch != entry.epoch:
                if base_sequence != 0:
                    raise OutOfOrderSequenceError(
                        f"producer {producer_id}: a new epoch {epoch} must start at sequence "
                        f"0, not {base_sequence}"
                    )
            else:
                previous = entry.batches[entry.batch_count - 1].last_sequence if (
                    entry.batch_count
                ) else NO_SEQUENCE
                # In 64 bits: previous + 1 overflows int32 at the wrap, and a C compiler may
                # assume it does not.
                if not (
                    <int64_t>base_sequence == <int64_t>previous + 1
                    or (base_sequence == 0 and previous == INT32_MAX)
                ):
                    raise OutOfOrderSequenceError(
                        f"producer {producer_id} epoch {epoch}: sequence {base_sequence} does "
                        f"not follow {previous}"
                    )
        if not transactional and entry.current_txn_first_offset != NO_OFFSET:
            raise InvalidTxnStateError(
                f"producer {producer_id} wrote a non-transactional batch while its "
                f"transaction from offset {entry.current_txn_first_offset} is open"
            )
        return APPEND_OK, None

    def apply_append(
        self,
        int64_t producer_id,
        int16_t epoch,
        int32_t base_sequence,
        int32_t last_offset_delta,
        int64_t first_offset,
        int64_t last_offset,
        int64_t max_timestamp,
        bint transactional,
    ):
        """Record a data batch whose bytes are written (client appends after check_append,
        and replay at load, which checks nothing: docs/format.md §8.4, REPLICATION origin)."""
        cdef ProducerEntry entry = self._entry_or_new(producer_id)
        cdef int32_t last_sequence = _last_sequence_of(base_sequence, last_offset_delta)
        entry.set_epoch(epoch)
        entry.add_batch(last_sequence, last_offset, <int32_t>(last_offset - first_offset),
                        max_timestamp)
        entry.last_timestamp = max_timestamp
        if transactional and entry.current_txn_first_offset == NO_OFFSET:
            entry.current_txn_first_offset = first_offset
            self._ongoing[first_offset] = producer_id
        self.map_end_offset = last_offset + 1

    def check_marker(self, int64_t producer_id, int16_t epoch, int32_t coordinator_epoch):
        """Check a transaction marker from the coordinator (docs/format.md §8.2 items 3 and 7):
        InvalidProducerEpochError for an older producer epoch,
        TransactionCoordinatorFencedError for an older coordinator epoch."""
        existing = self._entries.get(producer_id)
        if existing is None:
            return
        cdef ProducerEntry entry = <ProducerEntry>existing
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id}: marker epoch {epoch} is older than {entry.epoch}"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"producer {producer_id}: marker from coordinator epoch {coordinator_epoch}, "
                f"older than {entry.coordinator_epoch}"
            )

    def apply_marker(
        self,
        int64_t producer_id,
        int16_t epoch,
        int32_t coordinator_epoch,
        int64_t timestamp,
        int64_t marker_offset,
    ):
        """Record a COMMIT or ABORT marker written at marker_offset. Returns the first offset
        of the transaction it ends, or None if the producer had none open."""
        cdef ProducerEntry entry = self._entry_or_new(producer_id)
        entry.set_epoch(epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        first = None
        if entry.current_txn_first_offset != NO_OFFSET:
            first = entry.current_txn_first_offset
            entry.current_txn_first_offset = NO_OFFSET
            self._ongoing.pop(first, None)
        self.map_end_offset = marker_offset + 1
        return first

    def remove_expired(self, int64_t now_ms, int64_t expiration_ms):
        """Drop producers without an open transaction whose newest timestamp is at least
        expiration_ms old (docs/format.md §8.5). Returns how many were dropped."""
        cdef ProducerEntry entry
        expired = []
        for producer_id, value in self._entries.items():
            entry = <ProducerEntry>value
            if (
                entry.current_txn_first_offset == NO_OFFSET
                and now_ms - entry.last_timestamp >= expiration_ms
            ):
                expired.append(producer_id)
        for producer_id in expired:
            del self._entries[producer_id]
        return len(expired)

    def clear(self, int64_t map_end_offset):
        self._entries.clear()
        self._ongoing.clear()
        self.map_end_offset = map_end_offset

    # --- snapshots (docs/format.md §8.3) --------------------------------------------------------

    def snapshot(self):
        """The table in Kafka's .snapshot format: only each producer's newest batch is kept,
        as Kafka keeps it."""
        cdef Py_ssize_t count = len(self._entries)
        cdef Py_ssize_t size = _HEADER_BYTES + count * _ENTRY_BYTES
        cdef bytes data = PyBytes_FromStringAndSize(NULL, size)
        cdef uint8_t *out = <uint8_t *>PyBytes_AS_STRING(data)
        cdef uint8_t *p = out + _HEADER_BYTES
        cdef ProducerEntry entry
        cdef BatchMetadata *newest
        eos_store_i16be(out, _VERSION)
        eos_store_i32be(out + 6, <int32_t>count)
        for producer_id in sorted(self._entries):
            entry = <ProducerEntry>self._entries[producer_id]
            eos_store_i64be(p + _E_PRODUCER_ID, entry.producer_id)
            eos_store_i16be(p + _E_EPOCH, entry.epoch)
            if entry.batch_count:
                newest = &entry.batches[entry.batch_count - 1]
                eos_store_i32be(p + _E_LAST_SEQUENCE, newest.last_sequence)
                eos_store_i64be(p + _E_LAST_OFFSET, newest.last_offset)
                eos_store_i32be(p + _E_OFFSET_DELTA, newest.offset_delta)
            else:
                eos_store_i32be(p + _E_LAST_SEQUENCE, NO_SEQUENCE)
                eos_store_i64be(p + _E_LAST_OFFSET, NO_OFFSET)
                eos_store_i32be(p + _E_OFFSET_DELTA, 0)
            eos_store_i64be(p + _E_TIMESTAMP, entry.last_timestamp)
            eos_store_i32be(p + _E_COORDINATOR_EPOCH, entry.coordinator_epoch)
            eos_store_i64be(p + _E_TXN_FIRST_OFFSET, entry.current_txn_first_offset)
            p += _ENTRY_BYTES
        eos_store_u32be(out + 2, eos_crc32c(0, out + _CRC_START,
                                           <size_t>(size - _CRC_START)))
        return data

    def load_snapshot(self, const uint8_t[::1] data, int64_t snapshot_offset):
        """Replace the table with a snapshot's entries; its state covers offsets below
        snapshot_offset. CorruptSnapshotError (nothing changed) for an unknown version, a
        wrong size or a CRC mismatch (Kafka's CorruptSnapshotException)."""
        cdef Py_ssize_t size = data.shape[0]
        cdef const uint8_t *base = &data[0] if size else NULL
        if size < _HEADER_BYTES:
            raise CorruptSnapshotError(f"a snapshot of {size} bytes is truncated")
        cdef int16_t version = eos_load_i16be(base)
        if version != _VERSION:
            raise CorruptSnapshotError(f"snapshot version {version} is not supported")
        cdef uint32_t crc = eos_load_u32be(base + 2)
        cdef int32_t count = eos_load_i32be(base + 6)
        if count < 0 or size != _HEADER_BYTES + <Py_ssize_t>count * _ENTRY_BYTES:
            raise CorruptSnapshotError(
                f"a snapshot of {size} bytes cannot hold the {count} entries it claims"
            )
        if eos_crc32c(0, base + _CRC_START, <size_t>(size - _CRC_START)) != crc:
            raise CorruptSnapshotError("the snapshot fails its CRC-32C check")
        cdef dict entries = {}
        cdef const uint8_t *p = base + _HEADER_BYTES
        cdef ProducerEntry entry
        cdef int64_t last_offset
        cdef int32_t i
        for i in range(count):
            entry = ProducerEntry(eos_load_i64be(p + _E_PRODUCER_ID))
            entry.epoch = eos_load_i16be(p + _E_EPOCH)
            last_offset = eos_load_i64be(p + _E_LAST_OFFSET)
            entry.last_timestamp = eos_load_i64be(p + _E_TIMESTAMP)
            if last_offset >= 0:
                entry.add_batch(eos_load_i32be(p + _E_LAST_SEQUENCE), last_offset,
                                eos_load_i32be(p + _E_OFFSET_DELTA), entry.last_timestamp)
            entry.coordinator_epoch = eos_load_i32be(p + _E_COORDINATOR_EPOCH)
            entry.current_txn_first_offset = eos_load_i64be(p + _E_TXN_FIRST_OFFSET)
            if entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = NO_OFFSET
            entries[entry.producer_id] = entry
            p += _ENTRY_BYTES
        self._entries = entries
        self._ongoing = {
            (<ProducerEntry>entry).current_txn_first_offset: producer_id
            for producer_id, entry in entries.items()
            if (<ProducerEntry>entry).current_txn_first_offset != NO_OFFSET
        }
        self.map_end_offset = snapshot_offset
