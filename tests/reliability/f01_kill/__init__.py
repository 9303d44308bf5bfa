"""docs/reliability.md family 1: kill -9 of a writer subprocess (the idempotent producer here;
transactional and copier kills in families 7 and 6)."""
