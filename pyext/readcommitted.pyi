"""The consumer's read_committed filter in Cython; the contract and the readable twin are in
eoslog.client.fetch (plan_fetch wraps this result in a FetchPlan)."""

from collections.abc import Sequence

import numpy as np

from typing_extensions import Buffer

from eoslog.errors import CorruptRecordError

def check_skipped(records: Buffer, position: int, end: int) -> None: ...
def is_abort_marker(records: Buffer, position: int) -> bool: ...
def offsets_break(
    position: int, fetch_offset: int, base_offset: int, last_offset: int, previous_last: int
) -> CorruptRecordError: ...
def plan_fetch(
    records: Buffer,
    fetch_offset: int,
    aborted_transactions: Sequence[tuple[int, int]] | None,
    records_max: int | None = None,
    batches: np.ndarray | None = None,
) -> tuple[list[tuple[int, int]], int, int, int]: ...
