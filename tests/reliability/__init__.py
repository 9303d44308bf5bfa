"""The reliability families of docs/reliability.md, one folder each, named fNN_ by the family's
number. Families 8, 15 and 16 have no tests yet; 9 and 11 are proven by unit tests of the
layers (docs/reliability.md names them)."""
