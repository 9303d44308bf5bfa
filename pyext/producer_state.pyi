"""Per-partition producer state (docs/format.md §8): the table appends are checked against and the
Kafka .snapshot layout it is saved in. Implemented in Cython (pyext/producer_state.pyx); no
pure-Python twin. Thread safety: the partition's writer calls everything under its lock."""

from typing import Final, final

from typing_extensions import Buffer

BATCHES_RETAINED: Final[int]  # 5: duplicates are found among a producer's last 5 batches
NO_PRODUCER_EPOCH: Final[int]  # -1
NO_SEQUENCE: Final[int]  # -1
NO_OFFSET: Final[int]  # -1
SNAPSHOT_VERSION: Final[int]  # 1
SNAPSHOT_HEADER_BYTES: Final[int]  # 10: version int16, crc uint32, count int32
SNAPSHOT_ENTRY_BYTES: Final[int]  # 46
APPEND_OK: Final[int]
APPEND_DUPLICATE: Final[int]

def last_sequence_of(base_sequence: int, last_offset_delta: int) -> int: ...

@final
class ProducerEntry:
    @property
    def producer_id(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def coordinator_epoch(self) -> int: ...
    @property
    def last_timestamp(self) -> int: ...
    @property
    def current_txn_first_offset(self) -> int: ...
    @property
    def batch_metadata(self) -> list[tuple[int, int, int, int, int]]: ...
    @property
    def last_sequence(self) -> int: ...
    @property
    def last_data_offset(self) -> int: ...

@final
class ProducerStateTable:
    map_end_offset: int
    def __init__(self, map_end_offset: int = 0) -> None: ...
    def __len__(self) -> int: ...
    def entry(self, producer_id: int) -> ProducerEntry | None: ...
    def producer_ids(self) -> list[int]: ...
    def open_transactions(self) -> dict[int, int]: ...
    def first_unstable_offset(self) -> int | None: ...
    def check_append(
        self,
        producer_id: int,
        epoch: int,
        base_sequence: int,
        last_offset_delta: int,
        transactional: bool,
    ) -> tuple[int, tuple[int, int, int] | None]: ...
    def apply_append(
        self,
        producer_id: int,
        epoch: int,
        base_sequence: int,
        last_offset_delta: int,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        transactional: bool,
    ) -> None: ...
    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None: ...
    def apply_marker(
        self,
        producer_id: int,
        epoch: int,
        coordinator_epoch: int,
        timestamp: int,
        marker_offset: int,
    ) -> int | None: ...
    def remove_expired(self, now_ms: int, expiration_ms: int) -> int: ...
    def clear(self, map_end_offset: int) -> None: ...
    def snapshot(self) -> bytes: ...
    def load_snapshot(self, data: Buffer, snapshot_offset: int) -> None: ...
