"""Message, one record as a consumer sees it (pyext/message.pyx)."""

from typing import Protocol

import numpy as np

Header = tuple[str, bytes | None]

class FetchedView(Protocol):
    """What a Message reads from its fetch (eoslog.client.message.FetchedRecords)."""

    topic: str
    partition: int
    # The lists below, or None until first made (read first, to skip a method call).
    _offsets: list[int] | None
    _keys: list[bytes | None] | None
    _values: list[bytes | None] | None

    def offsets(self) -> list[int]: ...
    def keys(self) -> list[bytes | None]: ...
    def values(self) -> list[bytes | None]: ...
    def headers(self) -> list[list[Header] | None]: ...
    def timestamps(self) -> list[tuple[int, int]]: ...

class Message:
    """One record (confluent_kafka.Message). Immutable; made only by the Consumer."""

    def topic(self) -> str: ...
    def partition(self) -> int: ...
    def offset(self) -> int: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def headers(self) -> list[Header] | None:
        """[(key, value), ...] in record order (a value may be None), or None when the
        record has no headers. Each call returns a new list."""
    def timestamp(self) -> tuple[int, int]:
        """(TIMESTAMP_CREATE_TIME or TIMESTAMP_LOG_APPEND_TIME, milliseconds since the
        epoch); a CreateTime record produced without a timestamp reports -1."""
    def error(self) -> None:
        """Always None: consumer errors are raised as KafkaException."""
    def len(self) -> int:
        """The length of the value in bytes (0 for a null value)."""
    def __len__(self) -> int: ...

def binary_list(
    count: int,
    validity: np.ndarray[tuple[int], np.dtype[np.uint8]],
    offsets: np.ndarray[tuple[int], np.dtype[np.int32]],
    data: np.ndarray[tuple[int], np.dtype[np.uint8]],
) -> list[bytes | None]:
    """An Arrow binary column as a list of bytes (None where null), made in C. ValueError
    for buffers shorter than the count or offsets outside the data."""

def make_messages(out: list[Message], fetched: FetchedView, start: int, stop: int) -> None:
    """Append Messages for records [start, stop) of `fetched` to `out`."""
