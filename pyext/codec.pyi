"""The Kafka v2 record batch codec (docs/format.md §1-§4, §10).

Implemented by eoslog._ext.codec (Cython over engine/) and eoslog.record.pycodec (the readable
pure-Python twin). `eoslog.record.codec` is whichever of the two is in use
(EOSLOG_NO_EXTENSIONS=1 selects the twin). For every input both return equal values and raise
the same exception type with the same message; tests/record/test_twins_differential.py checks this.

Buffers: every function reading bytes takes any object with the buffer protocol (bytes,
bytearray, memoryview, mmap, numpy array) and does not copy it. Positions are byte offsets in
that buffer. Errors name the byte position of the offending batch.
"""

from collections.abc import Iterator, Sequence

import numpy.typing as npt
from typing_extensions import Buffer

from eoslog.record.columns import ColumnarRecords
from eoslog.record.types import BatchHeader, Record, ValidatedBatch

Headers = Sequence[tuple[str, bytes | None]]

def read_header(data: Buffer, position: int = 0) -> BatchHeader:
    """The header of the batch at `position`, without checking its CRC or its records.

    CorruptRecordError: fewer than 61 bytes from position; batch length < 49; magic not 0-2.
    InvalidRecordError: magic 0 or 1 (only v2 is supported)."""

def iter_headers(data: Buffer, position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch from `position` on. Stops without error at a
    partial trailing batch (Kafka's FileLogInputStream rule); a bad length or magic raises as
    read_header does. CRCs are not checked."""

def validate_batch(
    data: Buffer, *, batch_bytes_max: int = ..., from_client: bool = True
) -> ValidatedBatch:
    """Check that `data` is exactly one well-formed v2 batch, as a Kafka leader does on
    append (docs/format.md §10), walking (and decompressing) every record. In order:
    header as read_header; TRUNCATED_BATCH / TRAILING_BYTES (exactly one batch); size >
    batch_bytes_max -> RecordTooLargeError; from a client, base offset != 0; CRC; from a
    client: control batch, count != last offset delta + 1 or count <= 0, producer id >= 0 with
    sequence < 0, transactional without producer id; codec (gzip/snappy/zstd ->
    UnsupportedCompressionTypeError); an lz4 section decompressing past
    limits.decompressed_bytes_max_for(batch_bytes_max) -> CorruptRecordError, raised before
    more is allocated; every record well formed, offset deltas exactly
    0..count-1, header keys valid UTF-8, no bytes left over; a control batch holds exactly one
    record whose key is >= 4 bytes. Changes nothing."""

def batch_records(data: Buffer, position: int = 0, *, verify_crc: bool = True) -> list[Record]:
    """Decode every record of the batch at `position` (decompressing it). Records carry
    absolute offsets and timestamps (LogAppendTime: the batch max timestamp). Header keys are
    decoded as UTF-8 with replacement, as Java's String constructor does."""

def batch_crc(data: Buffer, position: int = 0) -> int:
    """The CRC-32C the batch at `position` should carry (over bytes [21, end))."""

def stamp_batch(
    data: Buffer,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    log_append_time_ms: int = -1,
    max_timestamp: int | None = None,
) -> None:
    """Rewrite, in place, the fields a leader assigns on append: base offset and partition
    leader epoch (outside the CRC); with log_append_time_ms >= 0 also the LogAppendTime bit and
    max timestamp, recomputing the CRC. With max_timestamp (CreateTime: the largest record
    timestamp, which Kafka's LogValidator writes over the producer's value) the max timestamp
    and the CRC are rewritten when they differ. `data` must be writable and exactly one batch.
    ValueError for max_timestamp together with log_append_time_ms >= 0."""

def build_control_batch(
    control_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A COMMIT (1) or ABORT (0) end-transaction marker batch exactly as Kafka writes it
    (docs/format.md §3): 78 bytes, attributes 0x30, base sequence -1, one record."""

def decode_columns(
    data: Buffer,
    position: int = 0,
    *,
    include_headers: bool = False,
    verify_crc: bool = True,
    include_control: bool = False,
    offset_min: int = 0,
    offset_end: int = ...,
    runs: Sequence[tuple[int, int]] | None = None,
    records_max: int | None = None,
    skips: Sequence[tuple[int, int]] | None = None,
    decompressed_bytes_max: int = ...,
    held_bytes_max: int | None = None,
) -> ColumnarRecords:
    """Decode the run of whole batches from `position` into Arrow-layout columns, with no
    Python object per record. Keeps records with offset_min <= offset < offset_end; skips
    control batches unless include_control. skips: ascending byte ranges [start, end) of
    whole batches to jump over unread (a read_committed plan's aborted batches), so one call
    decodes around them; ValueError if one starts inside a batch. Stops at a partial trailing
    batch or before a batch that would push a column past limits.column_bytes_max (see
    end_position).
    Raises as validate_batch does for a batch that is corrupt or malformed (CRC checked when
    verify_crc).

    runs: instead of everything from `position`, the whole batches inside each [start, end)
    byte range, in order, into the same columns (a read_committed fetch's plan: the ranges
    skip the aborted batches); the columns are then sized once for all of them. ValueError
    for ranges out of order, overlapping or outside the data, or given with skips (runs and
    skips are two spellings of one plan: the ranges to decode, the ranges to jump over).

    records_max (>= 1): stop once that many records are decoded. The batch that reaches it
    is cut after its records_max-th record if it holds one record per offset (every batch
    eoslog appends); end_position is then that batch's position, so a caller goes on from the
    last offset + 1. A batch with offset gaps is decoded whole. ValueError below 1.

    decompressed_bytes_max: an lz4 batch whose records decompress past it raises
    CorruptRecordError before more is allocated (a decompression bomb); the default is
    limits.decompressed_batch_bytes_max, which covers every batch eoslog appends. ValueError
    outside 1..limits.decompressed_batch_bytes_ceiling.

    held_bytes_max: once the columns hold that many payload bytes (keys, values, header keys
    and values) and at least one record, stop before the next batch (end_position is there),
    so a call's memory stays within the budget plus one batch. None: no budget. ValueError
    when negative."""

class ColumnDecoder:
    """Columns filled by decode() calls over one or more buffers, then taken once by
    finish(): records that arrive in several reads (a consumer's fetches from successive
    segments) end in one set of columns, each value copied once. decode_columns(data, ...)
    is ColumnDecoder(include_headers).decode(data, ...) then finish(). Not thread-safe."""

    def __init__(self, include_headers: bool = False) -> None: ...
    @property
    def count(self) -> int:
        """Records decoded so far."""
    def decode(
        self,
        data: Buffer,
        position: int = 0,
        *,
        verify_crc: bool = True,
        include_control: bool = False,
        offset_min: int = 0,
        offset_end: int = ...,
        runs: Sequence[tuple[int, int]] | None = None,
        records_max: int | None = None,
        skips: Sequence[tuple[int, int]] | None = None,
        decompressed_bytes_max: int = ...,
        held_bytes_max: int | None = None,
    ) -> int:
        """Add the records of `data` as decode_columns would decode them, records_max
        counting every record held (earlier calls' too); returns where decoding stopped in
        `data` (decode_columns' end_position). Raises as decode_columns does, adding nothing
        from the failing batch; ValueError after finish()."""
    def finish(self) -> ColumnarRecords:
        """The columns, with the last decode's end position. ValueError if called twice."""

class BatchBuilder:
    """Builds one v2 batch record by record. Not thread-safe: one builder per thread."""

    def __init__(
        self,
        *,
        compression: int = 0,
        timestamp_type: int = 0,
        is_transactional: bool = False,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        partition_leader_epoch: int = -1,
        base_offset: int = 0,
        batch_bytes_max: int = ...,
        compression_level: int = -1,
    ) -> None:
        """ValueError for a compression other than Kafka's 0 (none) to 4 (zstd), a
        compression level below -1 (-1: the codec's default; eoslog.record.compression.codec_level),
        a timestamp type other than 0/1, or a transactional batch without a producer id."""

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
    ) -> bool:
        """Add one record (offset delta = records so far). False, changing nothing, if the
        builder already holds records and this one would take the batch past batch_bytes_max
        (start a new batch). RecordTooLargeError if it alone would not fit in an empty batch.
        ValueError for a negative timestamp other than -1."""

    def append_values(
        self,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        timestamp: int = -1,
    ) -> int:
        """Append records with these values (and keys), all at `timestamp`, as many as fit;
        returns how many were appended (the rest belong in the next batch)."""

    def append_spans(
        self,
        values_data: Buffer,
        value_starts: npt.ArrayLike,
        value_lengths: npt.ArrayLike,
        keys_data: Buffer | None = None,
        key_starts: npt.ArrayLike | None = None,
        key_lengths: npt.ArrayLike | None = None,
        timestamp: int = -1,
        first: int = 0,
    ) -> int:
        """Append records first, first + 1, ... whose value i is values_data[value_starts[i] :
        value_starts[i] + value_lengths[i]] (length -1: null), and key likewise when keys_data
        is given, all at `timestamp`, as many as fit; returns how many were appended. Starts
        are int64, lengths int32 (any buffer or sequence numpy converts). This is the columnar
        path (Arrow binary arrays, numpy fixed-width bytes): no Python object per record.
        ValueError, before anything is appended, for a bad timestamp, spans outside their
        data, arrays of unequal length or `first` outside [0, n]; RecordTooLargeError as
        append."""

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Set the producer id, epoch and base sequence the next build() writes (Kafka's
        MemoryRecordsBuilder.setProducerState: a producer assigns the sequence when the batch
        is drained, not when it is opened). ValueError (native: OverflowError) for a value
        outside its field; ValueError for a transactional batch without a producer id."""

    def record_count(self) -> int: ...
    def estimated_size(self) -> int:
        """Size in bytes of the batch if built now, before compression."""

    def build(self) -> bytes:
        """The finished batch (compressed if asked; CRC set). The builder may be reused
        only after reset()."""

    def reset(self) -> None:
        """Forget all records; keep the batch settings."""
