"""PySpark data source and UDFs for eoslog segment files (extra: eoslog[spark]).

The data source itself arrives with the Spark issue; this package already depends only on
eoslog (never the other way round), and `arrow_schema` gives Spark's Kafka-source schema.
"""

from __future__ import annotations

import pyarrow as pa

from eoslog.record.columns import SPARK_SCHEMA, SPARK_SCHEMA_WITH_HEADERS


def arrow_schema(include_headers: bool = False) -> pa.Schema:
    """The Arrow schema of rows the eoslog data source yields (Spark's Kafka source schema)."""
    return SPARK_SCHEMA_WITH_HEADERS if include_headers else SPARK_SCHEMA
