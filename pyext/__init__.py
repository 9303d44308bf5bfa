"""Native extension modules (Cython over engine/). Import through eoslog.record, not directly."""
