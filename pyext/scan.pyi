"""Scanning runs of whole batches (engine/scan.c); see pyext/scan.pyx."""

import numpy as np
from typing_extensions import Buffer

BATCH_INFO: np.dtype[np.void]

def scan_batches(
    data: Buffer, start: int = 0, *, verify_crc: bool = True, max_batches: int = ...
) -> tuple[np.ndarray[tuple[int], np.dtype[np.void]], int, int]: ...
def find_valid_batch(data: Buffer, start: int = 0) -> int: ...
def find_batch(
    data: Buffer, target: int, start: int = 0, end: int = -1
) -> tuple[int, int, int]: ...
