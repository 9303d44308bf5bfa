"""Every named limit eoslog enforces, in one place (docs/style.md rule 6).

Units and qualifiers come last in each name. Kafka's dotted configuration keys map onto these
where configuration is parsed; nowhere else spells them out.
"""

from __future__ import annotations

from typing import Final

# Kafka's message.max.bytes default (1 MiB + 12 bytes of log overhead, LogConfig) is the
# default largest batch a producer may append; a topic may raise it up to batch_bytes_max.
message_bytes_default: Final = 1_048_588
# The hard ceiling on one batch: Kafka's batchLength is an int32, and Arrow's 32-bit offsets
# must hold a decoded batch, so nothing larger is ever accepted or built.
batch_bytes_max: Final = 256 * 1024 * 1024
# How far a compressed batch may expand when decompressed, per byte of its topic's
# max.message.bytes. lz4 can reach ~255x, so without a bound a 5 MB batch could ask for
# gigabytes (a decompression bomb). Real data compresses 2-10x with lz4 (JSON, logs, text);
# 64x leaves room for very repetitive values while a bomb stays within a few dozen MiB.
decompressed_bytes_per_message_byte_max: Final = 64
# The most any decompressed batch may hold: Kafka's default message.max.bytes (1 MiB) times
# the factor above. It is the limit of every reader with no topic configuration at hand
# (consumers, eoslog.scan, decode_columns; each takes a parameter to raise it for logs other
# writers produced), and the ceiling of the append limit, so that whatever an append accepts
# every reader can decode. A decompression never allocates more than this (plus its copy).
decompressed_batch_bytes_max: Final = 64 * 1024 * 1024
# Arrow's int32 offsets must hold a decoded batch: no decompressed limit may exceed this.
decompressed_batch_bytes_ceiling: Final = 1024 * 1024 * 1024
# The smallest possible v2 record is 7 bytes (length, attributes, timestamp delta, offset
# delta, key length, value length, header count: one byte each), so a records section of N
# bytes cannot hold more than N // 7 records. Used to bound allocations by the bytes given.
record_bytes_min: Final = 7
# The smallest header inside a record is 2 bytes (key length 0, value length -1).
record_header_bytes_min: Final = 2
# One columnar decode never produces more than this many payload bytes per column, so that
# Arrow's int32 offsets stay valid; a caller continues from the returned position.
column_bytes_max: Final = (1 << 31) - 1
# Records in one batch built by BatchBuilder (Kafka has no explicit cap; int32 delta).
batch_records_max: Final = (1 << 31) - 1
# Sequence numbers live in [0, 2**31 - 1] and wrap (DefaultRecordBatch.incrementSequence).
sequence_max: Final = (1 << 31) - 1
# Producer epochs are int16 (Short.MAX_VALUE). Kafka hands out at most producer_epoch_max - 1
# and keeps the top value free, so that the coordinator can always fence a producer with one
# more bump (TransactionMetadata.isEpochExhausted, docs/coordinator.md §3.2).
producer_epoch_max: Final = (1 << 15) - 1
# An offset inside a segment is stored relative to the segment's base offset as an int32
# (AbstractIndex.toRelative): a batch whose last offset lies further out rolls a new segment.
segment_relative_offset_max: Final = (1 << 31) - 1
# Producers whose state one partition keeps (a producer-state entry for each producer id with
# an idempotent or transactional batch there, until producer.id.expiration.ms retires it). A
# batch from one more producer is refused, writing nothing (TooManyProducersError). Kafka has no
# such cap; real partitions see tens to thousands of producers. An entry costs about 300 bytes
# of memory (ids, epochs, its last 5 batches, the table's dict slot) and 46 bytes in every
# .snapshot, so the cap bounds a partition's table near 30 MiB and a snapshot near 4.6 MB.
producers_per_partition_max: Final = 100_000
# Transactional ids with a transaction in progress (Ongoing, PrepareCommit or PrepareAbort) in
# the transaction coordinator at once. Opening one more is refused, changing nothing
# (TooManyOpenTransactionsError); each transactional id has at most one open transaction, so
# only that many transactional producers working at the same moment reach it. Kafka has no such
# cap. An open transaction holds about 1 KiB with a few partitions (its metadata's partition
# set, an entry in each partition's open-transaction map and producer state), so the cap bounds
# that memory near 10 MiB.
open_transactions_max: Final = 10_000
# The largest transaction.timeout.ms a producer may ask for: Kafka's broker default for
# transaction.max.timeout.ms, 15 minutes (docs/coordinator.md §4).
txn_timeout_ms_max: Final = 900_000
# Files read whole (indexes, .txnindex, snapshots, checkpoints) are read this many bytes at a
# time and checked as they are read, so that a sparse or lying file (a size claiming
# gigabytes over a few KiB of real data) costs one chunk over its valid contents, never its
# apparent size.
file_read_chunk_bytes: Final = 1024 * 1024
# Checkpoint files (recovery point, log start) hold one text line per partition, under 300
# bytes each (a 249-character topic name and two numbers); 16 MiB covers over 50,000
# partitions, and a larger file is refused before it is read, whatever size it claims.
checkpoint_file_bytes_max: Final = 16 * 1024 * 1024
# eoslog.meta holds each topic's name, partition count and configuration overrides (a few
# hundred bytes a topic); refused past this before it is read, as for checkpoints.
metadata_file_bytes_max: Final = 16 * 1024 * 1024


# --- the clients' configuration: defaults and bounds ------------------------------------------
# Kafka's dotted keys map onto these in eoslog.client.producer_config and
# eoslog.client.consumer_config, the only places that spell the keys out.

# librdkafka's message.max.bytes default: produce() refuses a record whose wire
# size (below) is larger. A batch holds its record alone past batch.size, and the topic's
# max.message.bytes bounds that batch at the append.
producer_message_bytes_max_default: Final = 1_000_000
# librdkafka's RD_KAFKAP_MESSAGE_V2_MAX_OVERHEAD: a v2 record's largest framing (length,
# attributes, timestamp and offset deltas, key and value lengths, header count as varints),
# added to key, value and headers to size a record against message.max.bytes (measured
# against confluent-kafka 2.16: a 1964-byte value is the largest taken at 2000).
record_overhead_bytes_max: Final = 36
# librdkafka's sticky.partitioning.linger.ms default; eoslog reads only whether it is 0.
sticky_linger_ms_default: Final = 10
# Kafka's batch.size default (ProducerConfig): bytes per batch before it closes.
producer_batch_bytes_max_default: Final = 16_384
# librdkafka's batch.num.messages default and upper bound: records per batch before it closes.
producer_batch_records_max_default: Final = 10_000
producer_batch_records_max_ceiling: Final = 1_000_000
# librdkafka's linger.ms default (5 ms since librdkafka 1.7; Kafka's own since 4.0, KIP-1030).
# 5 ms lets a tight produce() loop fill whole batches (one append and one CRC per batch, not
# per record) while a lone record still lands within a few milliseconds. 0 appends each
# produce() at once, as a batch of one. librdkafka takes at most 900,000 ms.
linger_ms_default: Final = 5
linger_ms_max: Final = 900_000
# librdkafka's queue.buffering.max.messages: produce() raises BufferError beyond it.
queue_messages_max_default: Final = 100_000
# librdkafka's queue.buffering.max.kbytes default (1 GiB of record values not yet reported).
queue_kbytes_max_default: Final = 1_048_576
# Kafka's delivery.timeout.ms default: how long retriable append errors are retried.
delivery_timeout_ms_default: Final = 120_000
# Kafka's retry.backoff.ms default, and librdkafka's upper bound for it.
retry_backoff_ms_default: Final = 100
retry_backoff_ms_max: Final = 300_000
# Kafka refuses idempotence with more than 5 requests in flight (the broker remembers 5 batches);
# librdkafka's bound on max.in.flight.requests.per.connection otherwise.
in_flight_requests_idempotent_max: Final = 5
in_flight_requests_max: Final = 1_000_000
# Kafka's transaction.timeout.ms default.
transaction_timeout_ms_default: Final = 60_000
# Kafka's max.block.ms default: how long init/commit/abort_transaction block when not told.
block_ms_max_default: Final = 60_000
# Kafka's consumer defaults (ConsumerConfig): fetch.max.bytes 50 MiB,
# max.partition.fetch.bytes 1 MiB.
fetch_bytes_max_default: Final = 52_428_800
partition_fetch_bytes_max_default: Final = 1_048_576
# confluent's consume() refuses more than this many messages per call.
consume_messages_max: Final = 1_000_000
# The longest a waiting consumer goes without looking again: new data wakes it at once (the
# broker's AppendSignal); these pauses bound the wait for what signals nothing (a group's
# rebalance, a heartbeat), starting short and growing.
poll_sleep_s_min: Final = 0.0005
poll_sleep_s_max: Final = 0.010
# Kafka's defaults (ConsumerConfig): max.poll.interval.ms 5 minutes, auto-commit every 5 s.
poll_interval_ms_max_default: Final = 300_000
auto_commit_interval_ms_default: Final = 5_000


def decompressed_bytes_max_for(message_bytes_max: int) -> int:
    """The largest decompressed batch an append under max.message.bytes = message_bytes_max
    accepts: the factor above times it, never past decompressed_batch_bytes_max (so that
    readers, who use that default, decode every batch an append accepted)."""
    return min(
        message_bytes_max * decompressed_bytes_per_message_byte_max, decompressed_batch_bytes_max
    )


# --- moved here from the modules that use them (issue 13: every limit in one place) ---

# A segment removed by retention or truncation keeps its open file this long after leaving
# the segment list, so reads that captured it just before finish on the right file.
retired_segment_grace_ms: Final = 60_000

# log.cleaner.io.max.bytes.per.second's default: Kafka's Double.MAX_VALUE, no limit, kept as
# Long.MAX_VALUE so that the setting stays a whole number of bytes.
cleaner_bytes_per_second_off: Final = (1 << 63) - 1

# Taking a view lists the directory, then opens the files. A segment vanishing between the two
# other than at the start (where retention removes them) means the owner replaced files
# (truncation): list again, at most this many times.
view_open_attempts_max: Final = 20

# A read returns whole batches from one pread of about this many bytes (or one batch, when a
# batch is larger): large enough that the per-read Python work is small next to decoding,
# small enough to keep a reader's memory flat.
offline_read_chunk_bytes: Final = 16 * 1024 * 1024

# Object storage (eoslog.fs_arrow): every read is an HTTP request, which costs tens of
# milliseconds whatever its size up to a few hundred KiB, so a smaller read is widened to this
# (a batch header or an index lookup then brings its neighbours: the next header, the next
# marker), while a view opening a thousand segments still moves only a few MiB for their
# first headers.
object_read_ahead_bytes: Final = 64 * 1024
# ... and a later read of an object the cache does not hold is widened to this: the first read
# of a segment is usually its only one (an open reads its first header), but planning that
# reads a segment twice goes on to look up batch after batch in it (the markers and first
# batches of its .txnindex entries), which a read this size mostly brings in one request.
object_read_ahead_again_bytes: Final = 1024 * 1024
# Planning a scan of object storage (eoslog.offline) opens the partitions' views in this many
# threads: each view makes a few dozen small requests one after another, latency-bound.
object_planning_threads: Final = 8
# ... and the reads of one scan are kept up to this many bytes in all (the least recently used
# dropped first), so that planning's re-reads of what it just read (a control batch inside the
# chunk its replay read, a marker a .txnindex entry is checked against) cost no request. Four
# of the scan's 16 MiB chunks.
object_read_cache_bytes_max: Final = 64 * 1024 * 1024

# The tail is checked (CRCs included) from the last offset-index entry, normally a few KiB
# from the end, in reads of this size.
tail_check_chunk_bytes: Final = 1024 * 1024

# Markers with no open transaction a replay keeps for matching (a transaction with no data in
# a partition still gets its marker there, rarely): a bound on a replay's memory. A damaged
# marker is matched within a transaction's span, so only the recent ones matter.
orphan_markers_kept_max: Final = 1024

# shrink copies the kept prefix in pieces this large: the size recovery reads with, large
# enough to run at memory speed, small enough to keep memory flat for 1 GiB segments.
shrink_copy_chunk_bytes: Final = 8 * 1024 * 1024

# A read past the mapped length of a growing segment copies with pread until the unmapped
# part reaches this size, then maps again. Measured on the 2-core VM: a remap costs ~26 µs
# (map + unmap) plus ~6 µs per first touch of a page, against ~15-40 µs to pread a 110 KB
# batch; remapping every few MiB keeps reads near the tail from paying it on every append.
remap_tail_bytes_min: Final = 4 * 1024 * 1024

# The .log files of inactive segments that stay mapped for reads, per process (the least
# recently read are unmapped first). A mapping holds a file descriptor of its own (Python's
# mmap duplicates the one it maps), so a read through a log of thousands of segments would
# otherwise hold two per segment (docs/design.md "Files and file descriptors").
cold_log_mappings_max: Final = 64

# Kafka's RecordValidationException message lists the first few record errors.
reported_record_errors_max: Final = 3

# How much of the .log a lookup reads at a time after the offset index narrowed the search:
# index entries are every index.interval.bytes (4 KiB by default), so one read usually holds
# the batch sought.
lookup_scan_chunk_bytes: Final = 64 * 1024

# A lookup's first read: the offset index points within about index.interval.bytes (4 KiB)
# of the batch sought, so 8 KiB usually holds it or at least its header; a larger batch is
# then read exactly, instead of after a wasted full chunk.
lookup_first_read_bytes: Final = 8 * 1024

# A batch given in parts up to this size is joined and written with one pwrite (measured: a
# pwrite costs 1.5-13 us here, copying 16 KiB under 1 us).
join_parts_bytes_max: Final = 16 * 1024

# Under durability "commit" and "always" an append that reaches the end of the active segment's
# .log first extends the file by this much (with zeros; capped at segment.bytes), so the
# fdatasyncs of the appends after it need not make a new file length durable (Kafka's
# `preallocate`, done in steps). Measured on the 2-core VM (ext4 on virtio): a 170 B write +
# fdatasync to each of two files, p50 365 us appending against 260-300 us inside the file.
preallocate_bytes: Final = 1024 * 1024

# Recovery and index rebuilds read a segment in pieces of this size: large enough that a scan
# runs at memory speed, small enough to keep memory flat for 1 GiB segments.
recovery_chunk_bytes: Final = 8 * 1024 * 1024

# Bytes read per step: a bound on the memory a replay holds at once.
replay_read_bytes: Final = 1 << 20

# Kafka's offset.metadata.max.bytes default.
offset_metadata_bytes_max: Final = 4096

# The longest file name Linux file systems take (NAME_MAX), in bytes.
file_name_bytes_max: Final = 255

# `eoslog serve` (eoslog.serve; the dotted keys are parsed in broker_config.py).
# Kafka's socket.request.max.bytes default: the largest request a connection may send.
request_bytes_max_default: Final = 104_857_600
# Kafka's max.connections default (no limit short of an int32).
connections_max_default: Final = 2_147_483_647
# Kafka's queued.max.requests default (there across the whole broker; eoslog applies it to
# each connection's read-ahead).
queued_requests_max_default: Final = 500
# The bytes a connection may have read ahead of the request being served. Kafka's
# queued.max.request.bytes defaults to -1 (no limit); eoslog bounds each connection to one
# largest request by default.
queued_request_bytes_max_default: Final = 104_857_600
# The server's worker threads, which run the engine calls that may block (an fsync, a
# lock). Each call is short (a fetch's long poll waits on the loop, not in a worker).
serve_worker_threads_max: Final = 16
# The longest a server's close waits for the requests being served to be answered.
serve_close_timeout_s: Final = 30.0
