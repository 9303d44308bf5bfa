"""The partition log: segments, indexes, recovery."""
