"""Tests of eoslog.coordinator: the transaction coordinator (state machine, decisions,
`__transaction_state` records), producer ids, consumer groups and their offsets
(`__consumer_offsets` records)."""
