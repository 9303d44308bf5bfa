"""docs/reliability.md family 2: named crash points x the n-th hit."""
