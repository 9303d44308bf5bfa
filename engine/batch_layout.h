/* The Kafka v2 record batch layout in C: byte offsets, sizes, attribute bits (docs/format.md §1-§3).
 *
 * python/eoslog/record/layout.py states the same numbers for Python; tests/record/test_layout.py
 * checks that the two agree, field by field (docs/style.md rule 1). All header integers are
 * big-endian. */
#ifndef EOSLOG_BATCH_LAYOUT_H
#define EOSLOG_BATCH_LAYOUT_H

#define EOS_BASE_OFFSET_OFFSET 0
#define EOS_BATCH_LENGTH_OFFSET 8
#define EOS_PARTITION_LEADER_EPOCH_OFFSET 12
#define EOS_MAGIC_OFFSET 16
#define EOS_CRC_OFFSET 17
#define EOS_ATTRIBUTES_OFFSET 21
#define EOS_LAST_OFFSET_DELTA_OFFSET 23
#define EOS_BASE_TIMESTAMP_OFFSET 27
#define EOS_MAX_TIMESTAMP_OFFSET 35
#define EOS_PRODUCER_ID_OFFSET 43
#define EOS_PRODUCER_EPOCH_OFFSET 51
#define EOS_BASE_SEQUENCE_OFFSET 53
#define EOS_RECORDS_COUNT_OFFSET 57
#define EOS_RECORDS_OFFSET 61

#define EOS_LOG_OVERHEAD 12
#define EOS_HEADER_SIZE EOS_RECORDS_OFFSET
#define EOS_BATCH_LENGTH_MIN (EOS_HEADER_SIZE - EOS_LOG_OVERHEAD)
#define EOS_MAGIC_V2 2

#define EOS_COMPRESSION_MASK 0x07
#define EOS_TIMESTAMP_TYPE_MASK 0x08
#define EOS_TRANSACTIONAL_MASK 0x10
#define EOS_CONTROL_MASK 0x20
#define EOS_DELETE_HORIZON_MASK 0x40

#define EOS_COMPRESSION_NONE 0
#define EOS_COMPRESSION_GZIP 1
#define EOS_COMPRESSION_SNAPPY 2
#define EOS_COMPRESSION_LZ4 3
#define EOS_COMPRESSION_ZSTD 4

/* Control records (docs/format.md §3): key = version int16 + type int16; an end-transaction
 * marker's value = version int16 + coordinator epoch int32. */
#define EOS_CONTROL_ABORT 0
#define EOS_CONTROL_COMMIT 1
#define EOS_CONTROL_KEY_VERSION 0
#define EOS_CONTROL_KEY_TYPE_OFFSET 2
#define EOS_CONTROL_KEY_SIZE 4
#define EOS_END_TXN_MARKER_VERSION 0
#define EOS_END_TXN_MARKER_EPOCH_OFFSET 2
#define EOS_END_TXN_MARKER_VALUE_SIZE 6

/* Smallest v2 record (7 one-byte fields) and record header (key length 0, value length -1):
 * used to bound every count read from the wire by the bytes that could hold it. */
#define EOS_RECORD_BYTES_MIN 7
#define EOS_RECORD_HEADER_BYTES_MIN 2

#endif
