"""PySpark data source and UDFs for eoslog segment files (extra: eoslog[spark]).

`register(spark)` adds the "eoslog" data source (eoslog_spark.source); `arrow_schema` gives
Spark's Kafka-source schema; eoslog_spark.udfs holds the vectorized functions for jobs that
hold raw segment bytes. This package depends on eoslog, never the other way round.
"""

from __future__ import annotations

import pyarrow as pa

from eoslog.record.columns import SPARK_SCHEMA, SPARK_SCHEMA_WITH_HEADERS
from eoslog_spark.source import register
from eoslog_spark.udfs import decode_batches, header_value

__all__ = ["arrow_schema", "decode_batches", "header_value", "register"]


def arrow_schema(include_headers: bool = False) -> pa.Schema:
    """The Arrow schema of rows the eoslog data source yields (Spark's Kafka source schema)."""
    return SPARK_SCHEMA_WITH_HEADERS if include_headers else SPARK_SCHEMA
