"""docs/reliability.md family 10: hanging transactions, a producer killed mid-transaction."""
