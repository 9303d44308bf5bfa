"""`make demo`: first the main job, the exactly-once consume-transform-produce pipeline whose
copier is killed with SIGKILL and restarted (eoslog.demo_pipeline); then the layers under it:
Kafka v2 batches built, written to a segment file, read back, checked and decoded to Arrow,
damage caught; and the partition log: a topic across several segments whose writer is killed
mid-write, reopened with the torn tail cut and reported, and read back (eoslog.demo_crash)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from eoslog import demo_crash, demo_pipeline
from eoslog.errors import KafkaException
from eoslog.record import USING_EXTENSIONS, codec, layout, primitives


def _value(i: int) -> bytes:
    text = f'{{"id":{i},"user":"u{i % 9973}","amount":{(i * 37) % 10000 / 100:.2f},"note":"'
    return (text + "x" * 100)[:99].encode() + b"}"


def _write_segment(path: Path, records: int) -> tuple[int, int]:
    """Write `records` records in 1,000-record batches, alternating plain, lz4 and
    transactional batches, with a COMMIT marker after each transactional one."""
    offset = 0
    batches = 0
    with path.open("wb") as segment:
        for first in range(0, records, 1000):
            kind = (first // 1000) % 3
            builder = codec.BatchBuilder(
                compression=layout.COMPRESSION_LZ4 if kind == 1 else layout.COMPRESSION_NONE,
                is_transactional=kind == 2,
                producer_id=7 if kind == 2 else -1,
                producer_epoch=0 if kind == 2 else -1,
                base_sequence=first if kind == 2 else -1,
            )
            count = min(1000, records - first)
            now = 1_700_000_000_000 + first
            builder.append_values([_value(i) for i in range(first, first + count)], timestamp=now)
            batch = bytearray(builder.build())
            codec.validate_batch(batch)  # what a leader checks before it accepts the batch
            codec.stamp_batch(batch, base_offset=offset, partition_leader_epoch=0)
            segment.write(batch)
            offset += count
            batches += 1
            if kind == 2:
                marker = bytearray(
                    codec.build_control_batch(
                        layout.CONTROL_COMMIT,
                        producer_id=7,
                        producer_epoch=0,
                        coordinator_epoch=0,
                        timestamp=now,
                    )
                )
                codec.stamp_batch(marker, base_offset=offset, partition_leader_epoch=0)
                segment.write(marker)
                offset += 1
                batches += 1
    return batches, offset


def run(directory: str | None, records: int, pipeline_records: int = 20_000, kills: int = 3) -> int:
    root = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="eoslog-demo-"))
    status = demo_pipeline.run(str(root / "pipeline"), pipeline_records, kills)
    print()
    if status:
        return status
    partition = root / "demo-0"
    partition.mkdir(parents=True, exist_ok=True)
    segment = partition / f"{0:020d}.log"
    print(
        f"eoslog demo ({'native' if USING_EXTENSIONS else 'pure-Python'} codec, "
        f"CRC-32C backend: {primitives.crc32c_backend()})"
    )

    started = time.perf_counter()
    batches, next_offset = _write_segment(segment, records)
    write_s = time.perf_counter() - started
    size = segment.stat().st_size
    print(
        f"wrote {records:,} records in {batches:,} batches (plain, lz4, transactional + "
        f"COMMIT markers) to {segment}: {size:,} bytes in {write_s * 1000:.0f} ms"
    )

    data = segment.read_bytes()
    started = time.perf_counter()
    checked = 0
    for position, header in codec.iter_headers(data):
        codec.validate_batch(
            memoryview(data)[position : position + header.size_in_bytes], from_client=False
        )
        checked += 1
    columns = codec.decode_columns(data, include_headers=True)
    table = columns.to_arrow("demo", 0)
    read_s = time.perf_counter() - started
    print(
        f"read back and validated {checked:,} batches (CRC + every record), decoded "
        f"{table.num_rows:,} data records to Arrow in {read_s * 1000:.0f} ms "
        f"(control markers skipped; offsets 0..{next_offset - 1})"
    )
    assert table.num_rows == records, "every record written must be read back"
    first = table.slice(0, 1).to_pylist()[0]
    print(f"first record: offset {first['offset']}, value {first['value'][:40]!r}...")

    damaged = bytearray(data)
    damaged[200] ^= 0x01
    try:
        codec.decode_columns(damaged)
        print("ERROR: a flipped bit went unnoticed")
        return 1
    except KafkaException as error:
        print(f"a single flipped bit at byte 200 is caught: {type(error).__name__}: {error}")

    torn = data[: len(data) - 10]
    whole = codec.decode_columns(torn)
    print(
        f"a torn tail (last 10 bytes cut) reads as {whole.count:,} records up to byte "
        f"{whole.end_position:,}; the {len(torn) - whole.end_position:,} bytes after it are "
        f"an incomplete batch"
    )
    print()
    return demo_crash.run(str(root / "broker"))
