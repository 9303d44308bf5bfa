"""docs/reliability.md family 4: damaged files on disk, data and derived."""
