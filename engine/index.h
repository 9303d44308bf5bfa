/* Kafka's offset and time index entries, and the "warm section" binary search over them
 * (docs/format.md §5.4, §5.5, §5.8; AbstractIndex indexSlotRangeFor and binarySearch).
 *
 * Entries are read in place, big-endian, from the mapped .index / .timeindex file; nothing here
 * allocates or touches Python objects, so every function is safe without the GIL. This header
 * is the one definition of the entry layouts (docs/style.md rule 1): pyext/index.pyx reads and
 * writes entries with these offsets and sizes. */
#ifndef EOSLOG_INDEX_H
#define EOSLOG_INDEX_H

#include <stdint.h>

/* Offset index entry (OffsetIndex ENTRY_SIZE): offset - segment base as int32, then the byte
 * position of a batch in the .log file as int32. */
#define EOS_OFFSET_INDEX_ENTRY_BYTES 8
#define EOS_OFFSET_INDEX_RELATIVE_OFFSET_AT 0
#define EOS_OFFSET_INDEX_POSITION_AT 4

/* Time index entry (TimeIndex ENTRY_SIZE): the largest timestamp so far as int64, then the
 * relative offset of the batch that carried it as int32. */
#define EOS_TIME_INDEX_ENTRY_BYTES 12
#define EOS_TIME_INDEX_TIMESTAMP_AT 0
#define EOS_TIME_INDEX_RELATIVE_OFFSET_AT 8

/* Aborted transaction entry (AbortedTxn, docs/format.md §6.1): version int16 (0), producer id,
 * first offset, last offset, last stable offset, each int64. */
#define EOS_TXN_INDEX_ENTRY_BYTES 34
#define EOS_TXN_INDEX_VERSION_AT 0
#define EOS_TXN_INDEX_PRODUCER_ID_AT 2
#define EOS_TXN_INDEX_FIRST_OFFSET_AT 10
#define EOS_TXN_INDEX_LAST_OFFSET_AT 18
#define EOS_TXN_INDEX_LAST_STABLE_OFFSET_AT 26
#define EOS_TXN_INDEX_VERSION 0

/* The tail of an index that every lookup near the end touches (AbstractIndex warmEntries):
 * 8192 bytes, so 1024 offset index entries or 682 time index entries. Kafka sized it so that
 * its pages are read by every tail lookup and stay in the page cache on 4 KiB-page hosts. */
#define EOS_INDEX_WARM_BYTES 8192

/* The column a search compares: Kafka's IndexSearchType KEY or VALUE of each index. Offsets
 * are compared as stored, relative to the segment base: callers subtract the base from the
 * target first. */
enum eos_index_key {
    EOS_INDEX_KEY_OFFSET = 0,      /* offset index, relative offset (KEY) */
    EOS_INDEX_KEY_POSITION = 1,    /* offset index, file position (VALUE) */
    EOS_INDEX_KEY_TIMESTAMP = 2,   /* time index, timestamp (KEY) */
    EOS_INDEX_KEY_TIME_OFFSET = 3  /* time index, relative offset (VALUE) */
};

/* The entry size a key column belongs to: 8 or 12; 0 for an unknown kind. */
int eos_index_entry_bytes(int kind);

/* The key column `kind` of entry `slot`, widened to int64. */
int64_t eos_index_key_at(const uint8_t *entries, int kind, int64_t slot);

/* Search the first `count` entries at `entries` (count * entry size bytes, keys sorted
 * ascending) for `target`, exactly as Kafka's AbstractIndex does, warm section first:
 *   upper = 0: the slot of the largest entry with key <= target, or -1 if there is none;
 *   upper = 1: the slot of the smallest entry with key >= target, or -1 if there is none,
 *              with one quirk kept so that answers agree with Kafka's: the binary search
 *              never compares the first slot of its range, so when target equals the key of
 *              slot 0 the answer is slot 1, or -1 if slot 0 is the only entry. That is still
 *              an upper bound (fetchUpperBoundOffset only needs one), just not the smallest.
 * Keys that repeat may give any of the equal slots, as in Kafka. An unknown kind or a
 * negative count is a caller bug and traps. */
int64_t eos_index_search(const uint8_t *entries, int64_t count, int kind, int64_t target,
                         int upper);

#endif
