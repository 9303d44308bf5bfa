"""Coverage-guided fuzzing of every reader of untrusted bytes (docs/reliability.md family 12).

- `targets` holds one function per reader, taking bytes; `TARGETS` names them.
- `corpus/<target>/` holds the committed seed corpus of each target (`seeds` writes it).
- `runner` runs one target under atheris (libFuzzer) with a per-input timeout and a memory
  bound, in a child process that `launch` starts; `python -m tests.fuzz --seconds N` (the
  soak, `make fuzz`) runs every target in turn.
- `findings/`, when a soak found something not yet fixed, holds its reproducers:
  `<target>-<what>.bin`, the input, and a one-line `.txt` saying what it triggers; a fixed
  finding's input moves into its target's corpus (none is open today). Replay one under
  the fuzzing process's bounds with `python -m tests.fuzz.runner <target> <file>.bin`.
- tests/reliability/f12_fuzzing/test_fuzz.py replays the corpus in pytest and runs each target
  for a bounded time.

Outcome classes: an input may make a reader return or raise a typed eoslog error
(`eoslog.errors.KafkaException`, or the documented ValueError of a reader whose contract says
so). Anything else is a finding: another exception, an oracle violation (`FuzzFinding`: two
twins that disagree, a reader that moves backwards), a crash, a hang past the per-input
timeout, or an allocation past the memory bound.
"""
