"""Tests of the command line (eoslog.cli, eoslog.verify): demo, dump-log and verify, --version
and usage errors, and the transactions, topics and groups operations. repair has
its own file with the rest of eoslog.log (tests/log/test_repair.py)."""
