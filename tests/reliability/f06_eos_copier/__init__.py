"""docs/reliability.md family 6: the exactly-once copier under kill -9."""
