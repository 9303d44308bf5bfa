"""docs/reliability.md family 8: the Jepsen-style history checker."""
