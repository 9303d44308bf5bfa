"""Every named limit eoslog enforces, in one place (STYLE.md rule 6).

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
# A compressed batch may not expand past this when decompressed. lz4 can reach ~255x, so a
# small batch could otherwise ask for gigabytes; 1 GiB keeps Arrow's int32 offsets valid too.
decompressed_batch_bytes_max: Final = 1024 * 1024 * 1024
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
# more bump (TransactionMetadata.isEpochExhausted, COORDINATOR.md §3.2).
producer_epoch_max: Final = (1 << 15) - 1
# The largest transaction.timeout.ms a producer may ask for: Kafka's broker default for
# transaction.max.timeout.ms, 15 minutes (COORDINATOR.md §4).
txn_timeout_ms_max: Final = 900_000
# The largest checkpoint file (recovery point, log start offset) read at open: one line of at
# most ~280 bytes (a 249-character topic, a partition, an int64) per partition, so 64 MiB holds
# over 200,000 partitions; a larger (or sparse, lying) file is refused before it is read.
checkpoint_bytes_max: Final = 64 * 1024 * 1024
