"""docs/reliability.md family 3: simulated power loss through the fs seam's recording twin."""
