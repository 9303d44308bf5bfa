"""docs/reliability.md family 7: the bank invariant under kill -9."""
