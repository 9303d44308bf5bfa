"""PySpark data source and UDFs for eoslog segment files (extra: eoslog[spark]).

`register(spark)` adds the "eoslog" data source (eoslog_spark.source); `arrow_schema` gives
Spark's Kafka-source schema; eoslog_spark.udfs holds the vectorized functions for jobs that
hold raw segment bytes. This package depends on eoslog, never the other way round.
"""

from __future__ import annotations

# arrow_schema: the Arrow schema of rows the eoslog data source yields (Spark's Kafka source
# schema), defined once in eoslog.record.columns.
from eoslog.record.columns import spark_schema as arrow_schema
from eoslog_spark.source import register
from eoslog_spark.udfs import decode_batches, header_value

__all__ = ["arrow_schema", "decode_batches", "header_value", "register"]
