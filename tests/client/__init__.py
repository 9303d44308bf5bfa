"""Tests of eoslog.client: the Producer (idempotent, transactional, the native fast path), the
Consumer and the read_committed fetch plan."""
