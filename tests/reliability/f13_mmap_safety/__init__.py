"""docs/reliability.md family 13: mmap safety, in the owner and in other processes."""
