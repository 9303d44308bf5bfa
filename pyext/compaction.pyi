"""The log cleaner's per-record work; see pyext/compaction.pyx."""

import numpy as np
from typing_extensions import Buffer

def batch_keys(
    data: Buffer, infos: np.ndarray
) -> tuple[
    np.ndarray[tuple[int], np.dtype[np.int64]],
    np.ndarray[tuple[int], np.dtype[np.uint64]],
    np.ndarray[tuple[int], np.dtype[np.uint64]],
    np.ndarray[tuple[int], np.dtype[np.uint8]],
    np.ndarray[tuple[int], np.dtype[np.int32]],
]: ...
def filter_batch(
    data: Buffer, position: int, keep: np.ndarray, delete_horizon_ms: int = -1
) -> bytes: ...
