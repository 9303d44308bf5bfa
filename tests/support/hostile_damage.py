"""Family 14 (docs/reliability.md), part 2: the catalogue of damage.

Each case is a small named function applied to a fresh copy of a pristine directory
(tests/support/hostile_dir.py), with plain file I/O, never through the code under test. It returns
`cut_from`: for the partition whose tail it damaged, the first offset a legitimate torn-tail cut
may lose (the damaged batch's base offset, or the first offset of the transaction a damaged
marker ends), so the classifier can tell a reported cut from silent loss.

What a correct engine may do with each case (`expect`), following docs/reliability.md and issue 12:
- "ok": every reader returns exactly the pristine view (derived files rebuilt, harmless damage);
- "typed": a KafkaException naming a file, at open or at read, and no data destroyed;
- "cut": after an UNclean stop, damage with no valid batch after it is a torn tail: open cuts
  it, reports it (recovery_report), and only records from `cut_from` on are missing;
- "typed at open" (REFUSE): only refusing to open is right (a forged eoslog.meta that breaks
  its own rules: a topic name that is not a valid name, a wrong type, a partition count or a
  config value out of range).
Damage in the middle of a log, and any damage after a clean shutdown, is "ok" or "typed" only:
a clean shutdown does not make damage invisible, and middle damage is never truncated.

The sandbox beside the log directory holds `outside/`, bait files a symlink may point at: the
runner checks that nothing there (or beside the log directory) changes.
"""

from __future__ import annotations

import json
import os
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.support.hostile_dir import Batch, segments

OK_TYPED = frozenset({"ok", "typed"})
TAIL = frozenset({"ok", "cut", "typed"})
CUT = frozenset({"cut"})
REFUSE = frozenset({"typed at open"})
GIB = 1 << 30
META = "eoslog.meta"
RECOVERY_POINT = "recovery-point-offset-checkpoint"
LOG_START = "log-start-offset-checkpoint"
ABORTED_COUNTS = "eoslog-aborted-txn-checkpoint"
CLEAN_MARKER = ".kafka_cleanshutdown"
# Where a forged absolute topic name points: per process, so that parallel runs do not meet.
ABSOLUTE_BAIT = f"/tmp/eoslog-hostile-abs-{os.getpid()}"
TXN_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first, last, last stable offset
SNAPSHOT_ENTRY_BYTES = 46
SNAPSHOT_HEADER_BYTES = 10
# v2 batch header fields: (position, size) (docs/format.md §1.1).
FIELDS = {
    "base_offset": (0, 8),
    "length": (8, 4),
    "leader_epoch": (12, 4),
    "magic": (16, 1),
    "crc": (17, 4),
    "attributes": (21, 2),
    "last_offset_delta": (23, 4),
    "base_timestamp": (27, 8),
    "max_timestamp": (35, 8),
    "producer_id": (43, 8),
    "producer_epoch": (51, 2),
    "base_sequence": (53, 4),
    "records_count": (57, 4),
}
RECORDS_AT = 61

Damage = Callable[["Target"], dict[str, int]]


@dataclass(frozen=True)
class Case:
    name: str  # variant/kind/what
    kind: str  # the file kind, for the table
    variant: str  # "clean" or "unclean"
    damage: Damage
    expect: frozenset[str]
    # The damage leaves a partial batch at the end of a segment. The offline scan reads
    # while an owner may be writing, so it stops before a partial last batch by design
    # ("up to its last whole batch"): it may miss that batch's records, even after a clean
    # shutdown, without an error.
    partial_tail: bool = False


@dataclass
class Target:
    """A fresh copy to damage: the log directory, the bait directory beside it, and the
    pristine layout (partition directory -> batches)."""

    root: str
    outside: str
    layout: dict[str, list[Batch]]
    notes: list[str] = field(default_factory=list)

    def path(self, relative: str) -> str:
        return os.path.join(self.root, relative)


# --- byte helpers ---------------------------------------------------------------------------


def read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def write_at(path: str, position: int, data: bytes) -> None:
    with open(path, "r+b") as file:
        file.seek(position)
        file.write(data)


def replace(path: str, data: bytes) -> None:
    with open(path, "wb") as file:
        file.write(data)


def flip_bit(path: str, position: int, bit: int) -> None:
    old = read(path)[position]
    write_at(path, position, bytes([old ^ (1 << bit)]))


def crc32c(data: bytes) -> int:
    from eoslog._ext import primitives

    return int(primitives.crc32c(data))


def reseal_batch(path: str, batch: Batch) -> None:
    """Recompute the batch's CRC over its (changed) bytes: a forgery a CRC cannot catch."""
    data = read(path)
    body = data[batch.position + 21 : batch.position + batch.size]
    write_at(path, batch.position + 17, struct.pack(">I", crc32c(body)))


def sparse_extend(path: str, size: int) -> None:
    """Grow the file to `size` bytes of holes: huge apparently, 0 bytes on disk."""
    with open(path, "r+b") as file:
        file.truncate(size)


# --- choosing batches -----------------------------------------------------------------------


def cut_from(layout: dict[str, list[Batch]], directory: str, batch: Batch) -> dict[str, int]:
    """What a torn-tail cut at `batch` may lose: from its base offset, or, for a marker, from
    the first batch of the transaction it ends (cutting a marker reopens the transaction)."""
    first = batch.base_offset
    if batch.control:
        for earlier in layout[directory]:
            if earlier.base_offset >= batch.base_offset:
                break
            if earlier.producer_id != batch.producer_id:
                continue
            first = earlier.base_offset if not earlier.control else batch.base_offset
    return {directory: first}


def pick(layout: dict[str, list[Batch]], directory: str, which: str) -> Batch:
    """A batch of the partition by role: first, middle (data), last, middle-control,
    first-control, middle-lz4."""
    batches = layout[directory]
    if which in ("first", "last"):
        return batches[0] if which == "first" else batches[-1]
    if which.endswith("control"):
        controls = [b for b in batches if b.control]
        return controls[0] if which == "first-control" else controls[len(controls) // 2]
    # Data batches every reader returns: idempotent, not transactional (an aborted batch is
    # skipped unread, so its damage could not show).
    data = [b for b in batches if not b.control and not b.transactional]
    if which == "middle-lz4":
        data = [b for b in data if b.compression]
    return data[len(data) // 2]


def is_tail(layout: dict[str, list[Batch]], directory: str, batch: Batch) -> bool:
    return batch == layout[directory][-1]


# --- .log damage ----------------------------------------------------------------------------


def field_flip(directory: str, which: str, name: str, bit: int, forge: bool) -> Damage:
    """Flip one bit of a header field of a chosen batch; `forge` recomputes the CRC after."""
    start, size = FIELDS[name]

    def damage(target: Target) -> dict[str, int]:
        batch = pick(target.layout, directory, which)
        path = target.path(batch.file)
        flip_bit(path, batch.position + start + size - 1 - bit // 8, bit % 8)
        if forge:
            reseal_batch(path, batch)
        return cut_from(target.layout, directory, batch)

    return damage


def field_set(directory: str, which: str, name: str, value: int) -> Damage:
    """Set a header field outside the CRC to `value` (base offset 0, an absurd length)."""
    start, size = FIELDS[name]

    def damage(target: Target) -> dict[str, int]:
        batch = pick(target.layout, directory, which)
        encoded = value.to_bytes(size, "big", signed=True)
        write_at(target.path(batch.file), batch.position + start, encoded)
        return cut_from(target.layout, directory, batch)

    return damage


def record_flip(directory: str, which: str) -> Damage:
    """Flip a bit inside the records (CRC-covered payload)."""

    def damage(target: Target) -> dict[str, int]:
        batch = pick(target.layout, directory, which)
        flip_bit(target.path(batch.file), batch.position + (batch.size + RECORDS_AT) // 2, 3)
        return cut_from(target.layout, directory, batch)

    return damage


def forged_marker_type(directory: str, which: str, forge: bool = True) -> Damage:
    """Turn a COMMIT marker into an ABORT (or back), the CRC recomputed if `forge`: the
    control record's key is version int16 then type int16, after five one-byte record prefix
    fields."""

    def damage(target: Target) -> dict[str, int]:
        batch = pick(target.layout, directory, which)
        path = target.path(batch.file)
        type_at = batch.position + RECORDS_AT + 5 + 3
        data = read(path)
        assert data[type_at - 3 : type_at - 1] == b"\x00\x00", "control key version 0"
        write_at(path, type_at, bytes([data[type_at] ^ 1]))
        if forge:
            reseal_batch(path, batch)
        return cut_from(target.layout, directory, batch)

    return damage


def forged_lz4_garbage(directory: str) -> Damage:
    """Garble the compressed payload of an lz4 batch and recompute its CRC."""

    def damage(target: Target) -> dict[str, int]:
        batch = pick(target.layout, directory, "middle-lz4")
        path = target.path(batch.file)
        middle = batch.position + (batch.size + RECORDS_AT) // 2
        write_at(path, middle, b"\xff\x00\xff\x00\xff\x00")
        reseal_batch(path, batch)
        return {}

    return damage


def lz4_bomb(directory: str) -> Damage:
    """Append a well-formed lz4 batch (valid CRC, next offset) whose one record decompresses
    to 64 MiB, far over max.message.bytes: it must be refused, never decoded."""

    def damage(target: Target) -> dict[str, int]:
        from eoslog.record import codec

        last = target.layout[directory][-1]
        builder = codec.BatchBuilder(compression=3, base_offset=last.last_offset + 1)
        builder.append(1_700_000_000_000, None, bytes(64 << 20))
        with open(target.path(last.file), "ab") as file:
            file.write(builder.build())
        # A well-formed batch at the next offset: the log end counts it (recovery checks
        # framing, CRC and offsets, and does not decompress, as Kafka's does not); a reader
        # reaching it must refuse it.
        return {f"grow:{directory}": 1}

    return damage


def growing(damage: Damage, directory: str, offsets: int) -> Damage:
    """`damage`, after which recovery may legitimately add `offsets` offsets to `directory`'s
    log (e.g. a marker written again from the coordinator's decision)."""

    def grown(target: Target) -> dict[str, int]:
        return {**damage(target), f"grow:{directory}": offsets}

    return grown


def truncate_tail(directory: str, keep_less: int, segment: int = -1) -> Damage:
    """Cut `keep_less` bytes off the end of a segment (the last one by default)."""

    def damage(target: Target) -> dict[str, int]:
        name = segments(target.layout, directory)[segment]
        path = target.path(name)
        size = os.path.getsize(path)
        os.truncate(path, size - keep_less)
        batches = [b for b in target.layout[directory] if b.file == name]
        lost = [b for b in batches if b.position + b.size > size - keep_less]
        return cut_from(target.layout, directory, lost[0]) if lost else {}

    return damage


def extend_log_sparse(directory: str) -> Damage:
    def damage(target: Target) -> dict[str, int]:
        path = target.path(segments(target.layout, directory)[-1])
        sparse_extend(path, os.path.getsize(path) + GIB)
        return {}

    return damage


def random_spot(layout: dict[str, list[Batch]], rng: random.Random) -> tuple[str, Batch, int]:
    """A bit anywhere in the segments of any partition: (partition, batch, bit in batch)."""
    everything = [(d, b) for d, batches in sorted(layout.items()) for b in batches]
    spot = rng.randrange(sum(b.size for _, b in everything) * 8)
    for directory, batch in everything:
        if spot < batch.size * 8:
            return directory, batch, spot
        spot -= batch.size * 8
    raise AssertionError("a bit inside the segments")


def bit_flip_at(directory: str, batch: Batch, spot: int) -> Damage:
    def damage(target: Target) -> dict[str, int]:
        flip_bit(target.path(batch.file), batch.position + spot // 8, spot % 8)
        return cut_from(target.layout, directory, batch)

    return damage


# --- derived files ----------------------------------------------------------------------------


def derived_file(directory: str, suffix: str, segment: int) -> Callable[[Target], str]:
    """The path of the derived file beside a segment (by its index among the segments)."""

    def path(target: Target) -> str:
        name = segments(target.layout, directory)[segment]
        return target.path(name[: -len(".log")] + suffix)

    return path


def flip_in(locate: Callable[[Target], str], position: int, bit: int = 0) -> Damage:
    def damage(target: Target) -> dict[str, int]:
        path = locate(target)
        flip_bit(path, position if position >= 0 else os.path.getsize(path) + position, bit)
        return {}

    return damage


def rewrite(locate: Callable[[Target], str], make: Callable[[bytes], bytes]) -> Damage:
    def damage(target: Target) -> dict[str, int]:
        path = locate(target)
        replace(path, make(read(path) if os.path.exists(path) else b""))
        return {}

    return damage


def remove(locate: Callable[[Target], str]) -> Damage:
    def damage(target: Target) -> dict[str, int]:
        os.unlink(locate(target))
        return {}

    return damage


def sparse(locate: Callable[[Target], str]) -> Damage:
    def damage(target: Target) -> dict[str, int]:
        sparse_extend(locate(target), GIB)
        return {}

    return damage


def txn_entry_field(locate: Callable[[Target], str], field_index: int, delta: int) -> Damage:
    """Change one field of the first `.txnindex` entry: 1 pid, 2 first, 3 last, 4 LSO."""

    def damage(target: Target) -> dict[str, int]:
        path = locate(target)
        fields = list(TXN_ENTRY.unpack(read(path)[: TXN_ENTRY.size]))
        fields[field_index] += delta
        write_at(path, 0, TXN_ENTRY.pack(*fields))
        return {}

    return damage


def forged_abort_over_committed(directory: str) -> Damage:
    """A well-formed `.txnindex` entry claiming the first committed transaction of the
    partition was aborted: its records must stay visible."""

    def damage(target: Target) -> dict[str, int]:
        batches = target.layout[directory]
        marker = next(b for b in batches if b.control)
        data = next(b for b in batches if b.transactional and not b.control)
        entry = TXN_ENTRY.pack(0, data.producer_id, data.base_offset, marker.base_offset, 0)
        first = target.path(marker.file[: -len(".log")] + ".txnindex")
        with open(first, "ab") as file:
            file.write(entry)
        return {}

    return damage


def latest_snapshot(directory: str) -> Callable[[Target], str]:
    def path(target: Target) -> str:
        names = sorted(n for n in os.listdir(target.path(directory)) if n.endswith(".snapshot"))
        return target.path(f"{directory}/{names[-1]}")

    return path


def forged_snapshot(directory: str, mutate: Callable[[bytearray, Target], None]) -> Damage:
    """Change the newest snapshot's entries and recompute its CRC (CRC-32C of bytes 6..)."""

    def damage(target: Target) -> dict[str, int]:
        path = latest_snapshot(directory)(target)
        data = bytearray(read(path))
        mutate(data, target)
        data[2:6] = struct.pack(">I", crc32c(bytes(data[6:])))
        replace(path, bytes(data))
        return {}

    return damage


def snapshot_open_txn(directory: str) -> Callable[[bytearray, Target], None]:
    """Every entry claims an ongoing transaction from the middle of the log: the LSO (and
    read_committed) would stop there."""

    def mutate(data: bytearray, target: Target) -> None:
        middle = target.layout[directory][len(target.layout[directory]) // 2].base_offset
        count = struct.unpack_from(">i", data, 6)[0]
        for entry in range(count):
            at = SNAPSHOT_HEADER_BYTES + entry * SNAPSHOT_ENTRY_BYTES + 38
            struct.pack_into(">q", data, at, middle)

    return mutate


def snapshot_field(at: int, fmt: str, value: int) -> Callable[[bytearray, Target], None]:
    def mutate(data: bytearray, target: Target) -> None:
        struct.pack_into(fmt, data, SNAPSHOT_HEADER_BYTES + at, value)

    return mutate


def snapshot_empty(data: bytearray, target: Target) -> None:
    del data[SNAPSHOT_HEADER_BYTES:]
    struct.pack_into(">i", data, 6, 0)


def snapshot_past_end(directory: str) -> Damage:
    """A copy of the newest snapshot named far past the log end."""

    def damage(target: Target) -> dict[str, int]:
        source = latest_snapshot(directory)(target)
        replace(target.path(f"{directory}/{99_999:020d}.snapshot"), read(source))
        return {}

    return damage


# --- checkpoints, marker, meta, lock ----------------------------------------------------------


def checkpoint_with(name: str, entries: dict[tuple[str, int], int | str]) -> Damage:
    """Rewrite a checkpoint keeping its other entries and setting these (any text)."""

    def damage(target: Target) -> dict[str, int]:
        path = target.path(name)
        lines = read(path).decode().split("\n")[2:] if os.path.exists(path) else []
        kept = {tuple(line.split()[:2]): line.split()[2] for line in lines if line.strip()}
        for (topic, partition), value in entries.items():
            kept[(topic, str(partition))] = str(value)
        body = [f"{t} {p} {v}" for (t, p), v in sorted(kept.items())]
        replace(path, ("\n".join(["0", str(len(body)), *body]) + "\n").encode())
        return {}

    return damage


def in_root(name: str) -> Callable[[Target], str]:
    return lambda target: target.path(name)


def forged_meta(mutate: Callable[[dict[str, object]], None]) -> Damage:
    """Rewrite eoslog.meta's JSON and seal it with a valid CRC (magic, version 1, CRC-32C)."""

    def damage(target: Target) -> dict[str, int]:
        path = target.path(META)
        data = read(path)
        body = json.loads(data[10:])
        mutate(body)
        payload = json.dumps(body).encode()
        replace(path, data[:6] + struct.pack(">I", crc32c(payload)) + payload)
        return {}

    return damage


def topics_of(body: dict[str, object]) -> dict[str, dict[str, object]]:
    topics = body["topics"]
    assert isinstance(topics, dict)
    return topics


def rename_topic(new: str) -> Callable[[dict[str, object]], None]:
    def mutate(body: dict[str, object]) -> None:
        topics = topics_of(body)
        topics[new] = topics.pop("audit")

    return mutate


def set_partitions(value: object) -> Callable[[dict[str, object]], None]:
    def mutate(body: dict[str, object]) -> None:
        topics_of(body)["orders"]["partitions"] = value

    return mutate


def set_key(key: str, value: object) -> Callable[[dict[str, object]], None]:
    def mutate(body: dict[str, object]) -> None:
        body[key] = value

    return mutate


def drop_key(key: str) -> Callable[[dict[str, object]], None]:
    def mutate(body: dict[str, object]) -> None:
        del body[key]

    return mutate


def symlink_out(where: str | Callable[[Target], str], copy: bool = True) -> Damage:
    """Replace a file by a symlink to a bait file outside the directory (holding a copy of
    the file's bytes, so a reader that follows it sees the right data)."""

    def damage(target: Target) -> dict[str, int]:
        relative = where if isinstance(where, str) else where(target)
        path = target.path(relative)
        bait = os.path.join(target.outside, "bait-" + relative.replace("/", "_"))
        data = read(path) if copy and os.path.isfile(path) else b"bait\n"
        replace(bait, data)
        if os.path.lexists(path):
            os.unlink(path)
        os.symlink(bait, path)
        return {}

    return damage


def symlink_dir_out(directory: str) -> Damage:
    def damage(target: Target) -> dict[str, int]:
        import shutil

        bait = os.path.join(target.outside, directory)
        shutil.copytree(target.path(directory), bait)
        shutil.rmtree(target.path(directory))
        os.symlink(bait, target.path(directory))
        return {}

    return damage


def stray(relative: str, data: bytes | None = b"", copy_of: str | None = None) -> Damage:
    """Add a stray file (or a directory, when data is None) to the log directory."""

    def damage(target: Target) -> dict[str, int]:
        path = target.path(relative)
        if data is None:
            os.mkdir(path)
        else:
            replace(path, read(target.path(copy_of)) if copy_of else data)
        return {}

    return damage


def active(directory: str, suffix: str) -> Callable[[Target], str]:
    """The relative path of a file of the partition's active (last) segment."""

    def relative(target: Target) -> str:
        return segments(target.layout, directory)[-1][: -len(".log")] + suffix

    return relative
