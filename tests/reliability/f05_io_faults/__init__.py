"""docs/reliability.md family 5: I/O errors injected at the k-th file-system call."""
