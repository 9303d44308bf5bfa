"""The inputs of Producer.produce_batch(): a list of bytes, a numpy array, or a pyarrow array,
turned into one of two forms the batch builder takes without a Python object per record:

- RowsInput: a list of bytes-like or None (BatchBuilder.append_values walks it in C);
- SpansInput: one byte buffer plus int64 starts and int32 lengths (-1: null), taken by
  BatchBuilder.append_spans and murmur2_spans. Arrow binary/string arrays map onto it with no
  copy of the data (their offsets buffer gives the spans); numpy fixed-width bytes arrays
  ("S" dtype) too, with numpy's rule that trailing NUL bytes are padding (as bytes(arr[i])).

Pure functions; any thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

_EMPTY = np.zeros(0, dtype=np.uint8)


@dataclass(frozen=True)
class RowsInput:
    rows: list[Any]  # bytes-like or None

    def __len__(self) -> int:
        return len(self.rows)

    def take(self, indices: npt.NDArray[np.int64]) -> RowsInput:
        rows = self.rows
        return RowsInput([rows[i] for i in indices.tolist()])

    def as_spans(self) -> SpansInput:
        """The same rows as spans (one join; used to hash list keys in one native call)."""
        rows = self.rows
        lengths = np.fromiter(
            (-1 if row is None else len(row) for row in rows), dtype=np.int32, count=len(rows)
        )
        data = b"".join(row for row in rows if row is not None)
        starts = np.zeros(len(rows), dtype=np.int64)
        if len(rows) > 1:
            np.cumsum(np.maximum(lengths[:-1], 0), out=starts[1:])
        return SpansInput(data, starts, lengths)


@dataclass(frozen=True)
class SpansInput:
    data: Any  # a buffer
    starts: npt.NDArray[np.int64]
    lengths: npt.NDArray[np.int32]

    def __len__(self) -> int:
        return len(self.starts)

    def take(self, indices: npt.NDArray[np.int64]) -> SpansInput:
        return SpansInput(self.data, self.starts[indices], self.lengths[indices])


ColumnInput = RowsInput | SpansInput


def column_input(column: object, what: str) -> ColumnInput:
    """The produce_batch form of `column`; TypeError for anything else."""
    if isinstance(column, list | tuple):
        return RowsInput(list(column))
    if isinstance(column, np.ndarray):
        return _from_numpy(column, what)
    module = type(column).__module__
    if module.startswith("pyarrow"):
        return _from_arrow(column, what)
    if isinstance(column, Sequence):
        return RowsInput(list(column))
    raise TypeError(
        f"produce_batch {what} must be a list of bytes, a numpy array or a pyarrow array, "
        f"not {type(column).__name__}"
    )


def _from_numpy(array: npt.NDArray[Any], what: str) -> ColumnInput:
    if array.ndim != 1:
        raise TypeError(f"produce_batch {what} must be one-dimensional, not {array.ndim}-D")
    if array.dtype.kind == "U":
        array = np.char.encode(array, "utf-8")
    if array.dtype.kind == "S":
        array = np.ascontiguousarray(array)
        count = len(array)
        starts = np.arange(count, dtype=np.int64) * array.dtype.itemsize
        lengths = np.char.str_len(array).astype(np.int32)
        data = array.view(np.uint8) if count and array.dtype.itemsize else _EMPTY
        return SpansInput(data, starts, lengths)
    if array.dtype.kind == "O":
        return RowsInput(array.tolist())
    raise TypeError(
        f"produce_batch {what}: a numpy array of dtype {array.dtype} holds no bytes "
        "(use dtype S, U or object)"
    )


def _from_arrow(array: Any, what: str) -> SpansInput:
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    kind = array.type
    if pa.types.is_binary(kind) or pa.types.is_string(kind):
        offset_type: Any = np.int32
    elif pa.types.is_large_binary(kind) or pa.types.is_large_string(kind):
        offset_type = np.int64
    else:
        raise TypeError(f"produce_batch {what}: an Arrow array of {kind} holds no bytes")
    count = len(array)
    _validity, offsets_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=offset_type)[
        array.offset : array.offset + count + 1
    ].astype(np.int64)
    lengths = np.diff(offsets).astype(np.int32)
    if array.null_count:
        nulls = array.is_null().to_numpy(zero_copy_only=False)
        lengths[nulls] = -1
    data = data_buffer if data_buffer is not None else _EMPTY
    return SpansInput(data, offsets[:-1], lengths)
