"""Tests of the Spark side (spark_udfs/eoslog_spark): the "eoslog" data source against the
embedded Consumer."""
