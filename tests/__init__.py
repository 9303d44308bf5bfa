"""eoslog's test suite, a package so that every test module and helper has one dotted name
(`tests.log.test_segment`, `tests.support.logtools`) and test files in different folders may
share a basename. tests/README.md says where a test goes."""
