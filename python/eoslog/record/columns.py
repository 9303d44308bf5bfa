"""Columnar records: the Arrow-ready buffers a decode produces, and their assembly into a
pyarrow.RecordBatch in the Spark Kafka source's schema (docs/api.md "Spark").

The native decoder fills these buffers in C with no per-record Python objects; the pure twin
fills the same buffers in Python. Assembly is shared, so both give identical Arrow batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

SPARK_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
SPARK_SCHEMA = pa.schema(SPARK_FIELDS)
SPARK_SCHEMA_WITH_HEADERS = pa.schema([*SPARK_FIELDS, pa.field("headers", HEADER_TYPE)])


def spark_schema(include_headers: bool = False) -> pa.Schema:
    """The Arrow schema of decoded records (Spark's Kafka source schema), with its headers
    column when include_headers: the one place that choice is made."""
    return SPARK_SCHEMA_WITH_HEADERS if include_headers else SPARK_SCHEMA


Int32Array = npt.NDArray[np.int32]
Int64Array = npt.NDArray[np.int64]
ByteArray = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class RecordHeaders:
    """The headers of `count` records, flattened: record i owns entries
    offsets[i]:offsets[i+1]; a record with no headers is null (as in Spark's Kafka source)."""

    offsets: Int32Array
    validity: ByteArray  # bitmap, least significant bit first: record i has >= 1 header
    key_offsets: Int32Array
    key_data: ByteArray
    value_offsets: Int32Array
    value_data: ByteArray
    value_validity: ByteArray  # bitmap over header entries: value is not null


@dataclass(frozen=True)
class ColumnarRecords:
    """`count` decoded records as Arrow-layout buffers. Bitmaps are least-significant-bit first
    (Arrow's order); offsets arrays hold count + 1 entries starting at 0."""

    count: int
    offset: Int64Array
    timestamp_ms: Int64Array
    timestamp_type: Int32Array
    key_offsets: Int32Array
    key_data: ByteArray
    key_validity: ByteArray
    value_offsets: Int32Array
    value_data: ByteArray
    value_validity: ByteArray
    headers: RecordHeaders | None
    # Where decoding stopped in the input: the end of the last whole batch consumed. Less than
    # the input length when a partial batch trails or a column reached its size limit.
    end_position: int

    def to_arrow(self, topic: str, partition: int) -> pa.RecordBatch:
        """A RecordBatch in the Spark Kafka source's schema (with headers if decoded)."""
        n = self.count
        topic_bytes = topic.encode()
        topic_offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(topic_bytes))
        columns = [
            _binary(pa.binary(), n, self.key_validity, self.key_offsets, self.key_data),
            _binary(pa.binary(), n, self.value_validity, self.value_offsets, self.value_data),
            pa.Array.from_buffers(
                pa.string(), n, [None, pa.py_buffer(topic_offsets), pa.py_buffer(topic_bytes * n)]
            ),
            _fixed_width(pa.int32(), np.full(n, partition, dtype=np.int32)),
            _fixed_width(pa.int64(), self.offset),
            _fixed_width(pa.timestamp("us", tz="UTC"), self.timestamp_ms * 1000),
            _fixed_width(pa.int32(), self.timestamp_type),
        ]
        if self.headers is not None:
            columns.append(_headers(n, self.headers))
        return pa.RecordBatch.from_arrays(columns, schema=spark_schema(self.headers is not None))


def _fixed_width(
    kind: pa.DataType, values: npt.NDArray[np.int32] | npt.NDArray[np.int64]
) -> pa.Array:
    """The numpy column as an Arrow array of `kind` without a copy. Not pa.array(values): for a
    numpy input it imports pandas when pandas is installed, 0.26 s on the first call in a
    process (measured: the first consume_arrow() of a process with pyspark's pandas present)."""
    contiguous = np.ascontiguousarray(values)
    if contiguous.dtype.itemsize * 8 != kind.bit_width:
        raise TypeError(f"a {contiguous.dtype} column cannot hold Arrow {kind}")
    return pa.Array.from_buffers(kind, len(contiguous), [None, pa.py_buffer(contiguous)])


def _binary(
    kind: pa.DataType, n: int, validity: ByteArray, offsets: Int32Array, data: ByteArray
) -> pa.Array:
    return pa.Array.from_buffers(
        kind, n, [pa.py_buffer(validity), pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _headers(n: int, headers: RecordHeaders) -> pa.Array:
    entries = len(headers.key_offsets) - 1
    keys = pa.Array.from_buffers(
        pa.string(),
        entries,
        [None, pa.py_buffer(headers.key_offsets), pa.py_buffer(headers.key_data)],
    )
    values = _binary(
        pa.binary(), entries, headers.value_validity, headers.value_offsets, headers.value_data
    )
    struct = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE.value_type))
    return pa.Array.from_buffers(
        HEADER_TYPE,
        n,
        [pa.py_buffer(headers.validity), pa.py_buffer(headers.offsets)],
        children=[struct],
    )
