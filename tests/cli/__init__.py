"""Tests of the command line (eoslog.cli, eoslog.tools): demo, dump-log and verify. repair has
its own file with the rest of eoslog.log (tests/log/test_repair.py)."""
