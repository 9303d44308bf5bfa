"""Tests of eoslog.record: the v2 batch codec and its two twins (native, pure Python), CRC-32C
and varints, the layout the C headers share, columnar decode, vectors and interop."""
