/* The warm-section index search: see index.h for the contract. */
#include "index.h"

#include "bytes_be.h"

/* Broken invariants are our bugs: fail loudly even in release builds (docs/style.md rule 5), where
 * assert() would vanish under NDEBUG. */
#define EOS_INDEX_VERIFY(cond)             \
    do {                                   \
        if (!(cond)) __builtin_trap();     \
    } while (0)

int eos_index_entry_bytes(int kind) {
    switch (kind) {
        case EOS_INDEX_KEY_OFFSET:
        case EOS_INDEX_KEY_POSITION:
            return EOS_OFFSET_INDEX_ENTRY_BYTES;
        case EOS_INDEX_KEY_TIMESTAMP:
        case EOS_INDEX_KEY_TIME_OFFSET:
            return EOS_TIME_INDEX_ENTRY_BYTES;
        default:
            return 0;
    }
}

int64_t eos_index_key_at(const uint8_t *entries, int kind, int64_t slot) {
    switch (kind) {
        case EOS_INDEX_KEY_OFFSET:
            return eos_load_i32be(entries + slot * EOS_OFFSET_INDEX_ENTRY_BYTES +
                                  EOS_OFFSET_INDEX_RELATIVE_OFFSET_AT);
        case EOS_INDEX_KEY_POSITION:
            return eos_load_i32be(entries + slot * EOS_OFFSET_INDEX_ENTRY_BYTES +
                                  EOS_OFFSET_INDEX_POSITION_AT);
        case EOS_INDEX_KEY_TIMESTAMP:
            return eos_load_i64be(entries + slot * EOS_TIME_INDEX_ENTRY_BYTES +
                                  EOS_TIME_INDEX_TIMESTAMP_AT);
        case EOS_INDEX_KEY_TIME_OFFSET:
            return eos_load_i32be(entries + slot * EOS_TIME_INDEX_ENTRY_BYTES +
                                  EOS_TIME_INDEX_RELATIVE_OFFSET_AT);
        default:
            __builtin_trap();
    }
}

/* Kafka's binarySearch over slots [begin, end]. Its midpoint rounds up, so `lo` only ever
 * moves to a slot whose key is below the target, and slot `begin` itself is never compared:
 * the source of the upper-bound quirk described in index.h. */
static int64_t binary_search(const uint8_t *entries, int64_t count, int kind, int64_t target,
                             int upper, int64_t begin, int64_t end) {
    int64_t lo = begin;
    int64_t hi = end;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        int64_t key = eos_index_key_at(entries, kind, mid);
        if (key > target) {
            hi = mid - 1;
        } else if (key < target) {
            lo = mid;
        } else {
            return mid;
        }
    }
    if (!upper) return lo;
    return lo == count - 1 ? -1 : lo + 1;
}

int64_t eos_index_search(const uint8_t *entries, int64_t count, int kind, int64_t target,
                         int upper) {
    int entry_bytes = eos_index_entry_bytes(kind);
    EOS_INDEX_VERIFY(entry_bytes != 0);
    EOS_INDEX_VERIFY(count >= 0);
    EOS_INDEX_VERIFY(count == 0 || entries != 0);
    if (count == 0) return -1;

    /* Lookups near the end (consumers and appends at the tail) stay inside the last 8 KiB,
     * whose pages every such lookup touches; only older targets search the rest. */
    int64_t warm_entries = EOS_INDEX_WARM_BYTES / entry_bytes;
    int64_t first_hot = count - 1 - warm_entries;
    if (first_hot < 0) first_hot = 0;
    int64_t slot;
    if (eos_index_key_at(entries, kind, first_hot) < target) {
        slot = binary_search(entries, count, kind, target, upper, first_hot, count - 1);
    } else if (eos_index_key_at(entries, kind, 0) > target) {
        slot = upper ? 0 : -1;
    } else {
        slot = binary_search(entries, count, kind, target, upper, 0, first_hot);
    }
    EOS_INDEX_VERIFY(slot >= -1 && slot < count);
    return slot;
}
