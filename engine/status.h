/* Status codes returned by the nogil kernels (docs/style.md rule 4: status inside, exceptions
 * outside). python/eoslog/record/status.py holds the same numbers and the messages;
 * tests/record/test_layout.py checks that the two agree. */
#ifndef EOSLOG_STATUS_H
#define EOSLOG_STATUS_H

enum eos_status {
    EOS_OK = 0,
    EOS_TRUNCATED_HEADER = 1,
    EOS_BATCH_LENGTH_TOO_SMALL = 2,
    EOS_BAD_MAGIC = 3,
    EOS_UNSUPPORTED_MAGIC = 4,
    EOS_TRUNCATED_BATCH = 5,
    EOS_TRAILING_BYTES = 6,
    EOS_CRC_MISMATCH = 7,
    EOS_BATCH_TOO_LARGE = 8,
    EOS_NONZERO_BASE_OFFSET = 9,
    EOS_CONTROL_FROM_CLIENT = 10,
    EOS_COUNT_MISMATCH = 11,
    EOS_SEQUENCE_WITHOUT_PRODUCER = 12,
    EOS_TRANSACTIONAL_WITHOUT_PRODUCER = 13,
    EOS_UNSUPPORTED_COMPRESSION = 14,
    EOS_BAD_COMPRESSION = 15,
    EOS_DECOMPRESS_FAILED = 16,
    EOS_BAD_VARINT = 17,
    EOS_RECORD_OVERRUN = 18,
    EOS_RECORD_SIZE_MISMATCH = 19,
    EOS_BAD_HEADER_COUNT = 20,
    EOS_BAD_HEADER_KEY = 21,
    EOS_RECORDS_REMAINING = 22,
    EOS_BAD_OFFSET_DELTA = 23,
    EOS_NEGATIVE_COUNT = 24,
    EOS_DECOMPRESSED_TOO_LARGE = 25,
    EOS_BAD_HEADER_KEY_UTF8 = 26,
    EOS_BAD_CONTROL_RECORD = 27,
    /* Internal, never surfaced: the output columns need more room; grow and retry. */
    EOS_NEED_SPACE = 100
};

#endif
