/* Scanning runs of whole batches in a segment's bytes: the per-batch loop of recovery, index
 * rebuilding and offset lookups (docs/format.md §1.5, §5.9, §9.3). No Python objects; no
 * allocation; safe without the GIL. */
#ifndef EOSLOG_SCAN_H
#define EOSLOG_SCAN_H

#include <stddef.h>
#include <stdint.h>

/* What a scan learns of one batch (64 bytes, no padding surprises: fields by size). */
typedef struct {
    int64_t position; /* of the batch in the scanned buffer */
    int64_t base_offset;
    int64_t last_offset;
    int64_t max_timestamp;
    int64_t producer_id;
    int32_t size; /* whole batch, log overhead included */
    int32_t records_count;
    int32_t base_sequence;
    int32_t partition_leader_epoch;
    int16_t attributes;
    int16_t producer_epoch;
    int32_t reserved; /* zero */
} eos_batch_info;

/* Scan whole batches of buf[0, len) from `start`, filling at most `capacity` infos.
 * Returns EOS_OK when it stopped at the end of the data, at a partial trailing batch, or at
 * capacity; *stop is where the next scan would begin. Otherwise returns the status of the
 * first bad batch (bad length or magic; with verify_crc, a CRC mismatch) and *stop is that
 * batch's position. The infos before it are valid either way. */
int eos_scan_batches(const uint8_t *buf, size_t len, size_t start, int verify_crc,
                     eos_batch_info *out, size_t capacity, size_t *count, size_t *stop);

/* The first position p >= from at which a whole batch with a valid CRC lies, or len if there
 * is none. Recovery uses it to tell a torn tail (nothing valid after the damage) from damage
 * in the middle of a log (valid batches follow), which must never be truncated silently. */
size_t eos_find_valid_batch(const uint8_t *buf, size_t len, size_t from);

/* Walk batch headers of buf[0, len) from `start` to the first batch whose last offset is
 * >= target, reading headers only (the batch itself may run past len). EOS_OK: it starts at
 * *position and is *size bytes long. EOS_TRUNCATED_BATCH: the headers ran out; the next one
 * starts at *position (possibly past len): read on from there. Otherwise the status of a bad
 * length or magic at *position. The offset lookup of a read uses it (docs/format.md §5.9). */
int eos_find_batch(const uint8_t *buf, size_t len, size_t start, int64_t target,
                   size_t *position, size_t *size);

/* Describe the batch whose header is header[0, len), read at `position` of a file whose readable
 * bytes end at `end`, from the header alone (the records are not needed): EOS_OK with *info
 * filled (as a scan fills it) when the header is good and the batch fits below end;
 * EOS_TRUNCATED_HEADER or EOS_TRUNCATED_BATCH when the header or the batch runs past the
 * bytes (a partial trailing batch); otherwise the status of a bad length or magic. The
 * header-only walk of read_committed planning steps from batch to batch by info->size. */
int eos_describe_header(const uint8_t *header, size_t len, size_t position, size_t end,
                        eos_batch_info *info);

#endif
