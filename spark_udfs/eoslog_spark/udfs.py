"""Vectorized functions for Spark jobs that hold raw segment bytes (a binary column whose
cells are runs of whole v2 batches, e.g. read with binaryFile): decode them into records in the
Kafka source's schema, and pull one header out of a headers column. Both run over Arrow data:
decoding is eoslog's C decoder (codec.decode_columns, no Python object per record) and header
lookup is pyarrow.compute, so neither makes a Python object per record.

Use decode_batches with DataFrame.mapInArrow, and header_value inside an arrow_udf
(PySpark >= 4.1) or directly on Arrow arrays.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eoslog.record import codec


def decode_batches(
    batches: Iterator[pa.RecordBatch],
    column: str = "content",
    *,
    topic: str = "",
    partition: int = -1,
    include_headers: bool = False,
) -> Iterator[pa.RecordBatch]:
    """For mapInArrow: every record of every cell of the binary `column`, as RecordBatches in
    the Spark Kafka source's schema (with the given topic and partition). Control batches
    are skipped; a partial trailing batch in a cell is ignored (a segment still being
    written). CorruptRecordError for a cell whose bytes are not whole v2 batches."""
    for batch in batches:
        cells = batch.column(column)
        for index in range(len(cells)):
            cell = cells[index]
            if not cell.is_valid:
                continue
            data = cell.as_buffer()
            position = 0
            while position < len(data):
                columns = codec.decode_columns(
                    memoryview(data).cast("B")[position:], include_headers=include_headers
                )
                if columns.end_position == 0:
                    break
                position += columns.end_position
                if columns.count:
                    yield columns.to_arrow(topic, partition)


def header_value(headers: pa.Array | pa.ChunkedArray, key: str) -> pa.Array:
    """The value of the first header named `key` of each record (null when it has none), from
    a headers column (array<struct<key:string,value:binary>>), with pyarrow.compute."""
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    entries = pc.list_flatten(headers)
    parents = pc.list_parent_indices(headers)
    matches = pc.equal(pc.struct_field(entries, [0]), key)
    matches = pc.fill_null(matches, False)
    matched_parents = pc.filter(parents, matches).to_numpy(zero_copy_only=False)
    matched_values = pc.filter(pc.struct_field(entries, [1]), matches)
    if len(matched_parents) == 0:
        return pa.nulls(len(headers), pa.binary())
    # Matches come in record order, so a record's first match is where its parent index
    # first appears.
    first = np.ones(len(matched_parents), dtype=bool)
    first[1:] = matched_parents[1:] != matched_parents[:-1]
    values = matched_values.filter(pa.array(first))
    slots = np.full(len(headers), -1, dtype=np.int64)
    slots[matched_parents[first]] = np.arange(len(values), dtype=np.int64)
    return values.take(pa.array(slots, mask=slots < 0))
