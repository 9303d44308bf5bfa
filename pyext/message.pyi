"""Message, one record as a consumer sees it, and the fetch it views (pyext/message.pyx)."""

from typing import Final

from typing_extensions import Buffer

from eoslog.errors import KafkaError

Header = tuple[str, bytes | None]

class RecordRefs:
    """A growable array of record references (engine/batch.h eos_record_ref), filled by
    index_records and then frozen by the MessageBatch that takes it."""

    count: Final[int]
    capacity: Final[int]
    frozen: Final[bool]

    def __init__(self, capacity: int) -> None: ...

def index_records(
    data: Buffer,
    start: int,
    end: int,
    refs: RecordRefs,
    owners: list[object],
    *,
    verify_crc: bool = True,
    offset_min: int = 0,
    held_bytes_max: int | None = None,
) -> int:
    """Append to `refs` a reference to each data record (offset >= offset_min) of the whole
    batches in data[start, end), growing it as needed. Control batches are skipped.
    Decompressed sections are appended to `owners`: the references point into them and into
    `data`, which the caller must keep alive (a MessageBatch does). Raises as
    codec.decode_columns does for a corrupt or malformed batch (CRC checked when verify_crc),
    with `refs` then holding the batches before the bad one. ValueError for frozen refs.

    Returns -1 once every batch of the range is indexed. With held_bytes_max, once the
    decompressed sections in `owners` (earlier calls' included) hold that many bytes and
    `refs` holds a record, it stops before the next compressed batch and returns that batch's
    base offset, where the next fetch starts: a fetch of batches each just under the
    decompressed limit holds at most held_bytes_max plus one batch."""

class MessageBatch:
    """The records of one fetch of one partition as references into bytes it keeps alive.
    Immutable; used by the thread that owns the Consumer."""

    topic: Final[str]
    partition: Final[int]
    count: Final[int]
    # Where the consumer's position goes once every record here is consumed.
    next_offset: Final[int]
    # The size of the decompressed sections it keeps alive (the bytes among its owners).
    decompressed_bytes: Final[int]

    def __init__(
        self,
        topic: str,
        partition: int,
        refs: RecordRefs,
        owners: list[object],
        next_offset: int,
    ) -> None:
        """refs: at least one reference, written by index_records and frozen from now on;
        owners: what they point into. ValueError for refs already taken or empty, or a
        next_offset not past the last record."""
    def offset_at(self, index: int) -> int: ...

class Message:
    """One record (confluent_kafka.Message), made only by the Consumer. The set_* methods
    replace a field of this Message only (any object, kept as given, as confluent's do); used
    by the thread that owns the Consumer."""

    def topic(self) -> str: ...
    def partition(self) -> int: ...
    def offset(self) -> int | None:
        """The record's offset; for an error message, the offset it reports, or None where
        it has none (confluent returns None for a logical offset)."""
    def key(self) -> bytes | None:
        """The key, or None for a null key. Each call makes a new bytes object (until
        set_key(), which replaces it)."""
    def value(self) -> bytes | None:
        """The value, or None for a null value. Each call makes a new bytes object (until
        set_value(), which replaces it)."""
    def headers(self) -> list[Header] | None:
        """[(key, value), ...] in record order (a value may be None), or None when the
        record has no headers. Each call returns a new list (until set_headers())."""
    def timestamp(self) -> tuple[int, int]:
        """(TIMESTAMP_CREATE_TIME or TIMESTAMP_LOG_APPEND_TIME, milliseconds since the
        epoch); a CreateTime record produced without a timestamp reports -1."""
    def leader_epoch(self) -> int | None:
        """The partition leader epoch of the record's batch (0 for every batch an eoslog
        log wrote: one broker, never re-elected), or None where the batch has none (-1)."""
    def latency(self) -> float | None:
        """Always None: confluent's latency() measures a produced message, from produce() to
        its acknowledgement, and a consumed one has none."""
    def error(self) -> KafkaError | None:
        """None for a record; the KafkaError of an error message (error_message); or what
        set_error() set."""
    def set_topic(self, topic: str, /) -> None: ...
    def set_key(self, key: object, /) -> None: ...
    def set_value(self, value: object, /) -> None: ...
    def set_headers(self, headers: list[Header] | None, /) -> None: ...
    def set_error(self, error: KafkaError | None, /) -> None: ...
    def len(self) -> int:
        """The length of the value in bytes (0 for a null value); after set_value(), the
        len() of the object it set."""
    def __len__(self) -> int: ...

def make_messages(out: list[Message], batch: MessageBatch, start: int, stop: int) -> None:
    """Append Messages for records [start, stop) of `batch` to `out`."""

def error_message(
    topic: str, partition: int, offset: int, error: KafkaError, reason: bytes
) -> Message:
    """A Message reporting an event, not a record (librdkafka's error messages): error() is
    `error`; value() and len() are `reason`; key() and headers() None; timestamp()
    (TIMESTAMP_NOT_AVAILABLE, -1); offset() `offset`, or None when it is negative."""
