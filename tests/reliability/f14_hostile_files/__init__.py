"""docs/reliability.md family 14: hostile files (the corpus, memory bounds, the offline reader,
symlinks and forged names)."""
