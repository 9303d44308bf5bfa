"""docs/reliability.md family 12: the fuzz targets (tests/fuzz/) at CI size and the Hypothesis
stateful model."""
