"""Tests of eoslog.log: segments and their indexes, the partition log (appends, validation,
reads, rolls, retention, transactions at the log), producer state, recovery and repair."""
