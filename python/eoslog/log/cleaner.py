"""The log cleaner's decisions (docs/design.md "Compaction"): which records of a compacted
log's cleanable range stay, following Kafka's LogCleaner. The per-record work (hashing keys,
rewriting batches) is native (eoslog._ext.compaction); here, over its numpy arrays and one
Python step per batch, not per record:

* the latest record of each key in the range stays, every older one goes; records of aborted
  transactions go and count for no key (Kafka's buildOffsetMap skips them);
* a tombstone (a key with a null value) stays until its batch's delete horizon has passed;
  the first cleaning that keeps it gives its batch a horizon of now + delete.retention.ms
  (KIP-534's horizon, written in the batch), and the first cleaning after that removes it;
* a transaction's control batch stays while data of its transaction stays, and once none is
  left, until its delete horizon (set the same way) has passed;
* the last batch of each producer the partition's producer state knows stays, emptied of its
  records if need be, so that the producer's sequence and epoch survive a reopen that
  rebuilds the state from the log (Kafka's RETAIN_EMPTY);
* offsets never change: a kept batch keeps its base offset and last offset delta; a batch
  left with nothing to keep and no producer to remember it disappears.

clean_segment_bytes is pure (bytes in, bytes out); eoslog.log.compactor picks the range and
swaps the results into a live log. Thread safety: no shared state.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from eoslog._ext import compaction, scan
from eoslog.record import codec, control, layout
from eoslog.record.status import MESSAGES

NO_HORIZON = -1


@dataclass(frozen=True)
class CleaningRules:
    """What a cleaning pass knows beyond the bytes: the time, delete.retention.ms, the last
    offset of the last data batch of each producer in the partition's producer state (the
    batches kept even when emptied), and the aborted transactions (producer id, first
    offset, last offset) whose ABORT marker may lie past the range, from the .txnindex files
    (Kafka's collectAbortedTransactions over the range)."""

    now_ms: int
    delete_retention_ms: int
    producer_last_offsets: Mapping[int, int] = field(default_factory=dict)
    aborted: Sequence[tuple[int, int, int]] = ()


@dataclass
class _Batches:
    """Every batch of the range in log order, and what the pass learns of each."""

    segment: np.ndarray  # int32: which input segment
    infos: np.ndarray  # scan.BATCH_INFO rows, positions inside their segment
    horizon: np.ndarray  # int64: the delete horizon written in the batch, or NO_HORIZON
    aborted: np.ndarray  # bool: data of an aborted transaction
    # bool: transactional data whose marker lies past the range (its outcome unknown here):
    # kept whole, and standing for no key, until a later pass sees the marker.
    pending: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    # Control batch index -> (control type, the data batches of its transaction).
    markers: dict[int, tuple[int, list[int]]] = field(default_factory=dict)
    # Control batch index -> its control type (None: emptied), read with its segment.
    marker_types: dict[int, int | None] = field(default_factory=dict)
    # One row per record of every data batch, in log order: offset, 128-bit key hash,
    # tombstone, and the batch it is in.
    keys: tuple[np.ndarray, ...] = ()


def clean_segment_bytes(segments: Sequence[bytes], rules: CleaningRules) -> list[bytes]:
    """The cleaned contents of `segments`, consecutive whole segments of one log from its
    start up to the cleanable end (each exactly its batches), one result per segment.
    ValueError naming the segment and byte for bytes that are not whole valid batches (the
    cleaner never rewrites damage)."""
    return [
        data if cleaned is None else cleaned
        for data, cleaned in zip(segments, iter_cleaned(segments, rules), strict=True)
    ]


def iter_cleaned(segments: Sequence[bytes], rules: CleaningRules) -> Iterator[bytes | None]:
    """clean_segment_bytes one segment at a time, None for a segment that stays as it is.
    Every decision is made before the first result (reading each segment once: `segments`
    may read a file on each access, so only one segment's bytes are held at a time), then
    each segment is read again to be rewritten. ValueError as clean_segment_bytes."""
    batches = _read_batches(segments, rules)
    keep, tombstone, owner = _records_to_keep(batches, rules)
    count = len(batches.infos)
    kept = np.bincount(owner[keep], minlength=count)
    bounds = np.searchsorted(owner, np.arange(count + 1))
    # Decided for all batches at once: those copied as they are and those that go without
    # a trace; only the rest (rewritten, control) take a step each below.
    control = (batches.infos["attributes"] & layout.CONTROL_MASK) != 0
    tombstones_kept = np.bincount(owner[keep & tombstone], minlength=count) > 0
    needs_horizon = tombstones_kept & (batches.horizon == NO_HORIZON)
    plain = ~control & (kept == batches.infos["records_count"]) & ~needs_horizon
    gone = ~control & (kept == 0) & ~_last_of_producer(batches.infos, rules)
    kind = np.where(plain, _PLAIN, np.where(gone, _GONE, _REWRITTEN))
    for number in range(len(segments)):
        rows = np.flatnonzero(batches.segment == number)
        if (kind[rows] == _PLAIN).all():
            yield None
            continue
        data = segments[number]
        pieces = []
        for first, last in _runs(kind[rows]):
            index = int(rows[first])
            if kind[index] == _PLAIN:
                end = int(rows[last - 1])
                start = int(batches.infos["position"][index])
                pieces.append(
                    data[start : int(batches.infos["position"][end] + batches.infos["size"][end])]
                )
            elif kind[index] == _REWRITTEN:
                low, high = int(bounds[index]), int(bounds[index + 1])
                cleaned = _cleaned_batch(
                    data, batches, index, keep[low:high], tombstone[low:high], kept > 0, rules
                )
                if cleaned is not None:
                    pieces.append(cleaned)
        yield b"".join(pieces)


_PLAIN, _GONE, _REWRITTEN = 0, 1, 2


def _runs(kinds: np.ndarray) -> list[tuple[int, int]]:
    """[first, last) row ranges of equal kinds, each rewritten batch a range of its own."""
    if not len(kinds):
        return []
    change = np.ones(len(kinds), dtype=bool)
    change[1:] = (kinds[1:] != kinds[:-1]) | (kinds[1:] == _REWRITTEN)
    starts = np.flatnonzero(change)
    return list(zip(starts.tolist(), [*starts[1:].tolist(), len(kinds)], strict=True))


def _last_of_producer(infos: np.ndarray, rules: CleaningRules) -> np.ndarray:
    """Per batch: whether it is the last data batch of a producer the partition knows."""
    found = np.zeros(len(infos), dtype=bool)
    if not rules.producer_last_offsets or not len(infos):
        return found
    producers = np.array(sorted(rules.producer_last_offsets), dtype=np.int64)
    lasts = np.array([rules.producer_last_offsets[p] for p in producers.tolist()], np.int64)
    at = np.clip(np.searchsorted(producers, infos["producer_id"]), 0, len(producers) - 1)
    found[:] = (producers[at] == infos["producer_id"]) & (lasts[at] == infos["last_offset"])
    return found


def _read_batches(segments: Sequence[bytes], rules: CleaningRules) -> _Batches:
    """Everything the decisions need, reading each segment once: its batches (framing and
    CRC checked), their delete horizons, its markers' types and its records' keys."""
    rows, owners, horizons, keys = [], [], [], []
    marker_types: dict[int, int | None] = {}
    total = 0
    for number in range(len(segments)):
        data = segments[number]
        infos, stop, status = scan.scan_batches(data, verify_crc=True)
        if status != 0 or stop != len(data):
            what = MESSAGES[status][1] if status else "a partial batch"
            raise ValueError(f"segment {number} holds {what} at byte {stop}: not cleaned")
        rows.append(infos)
        owners.append(np.full(len(infos), number, dtype=np.int32))
        horizons.append(_horizons(data, infos))
        transactional_control = layout.CONTROL_MASK | layout.TRANSACTIONAL_MASK
        for index in np.flatnonzero(
            (infos["attributes"] & transactional_control) == transactional_control
        ).tolist():
            records = codec.batch_records(data, int(infos["position"][index]))
            marker_types[total + index] = control.read_type(records[0].key) if records else None
        offsets, high, low, tombstone, batch = compaction.batch_keys(data, infos)
        keys.append((offsets, high, low, tombstone.astype(bool), batch.astype(np.int64) + total))
        total += len(infos)
    infos = np.concatenate(rows) if rows else np.empty(0, dtype=scan.BATCH_INFO)
    batches = _Batches(
        np.concatenate(owners) if owners else np.empty(0, dtype=np.int32),
        infos,
        np.concatenate(horizons) if horizons else np.empty(0, dtype=np.int64),
        np.zeros(len(infos), dtype=bool),
        marker_types=marker_types,
        keys=tuple(
            np.concatenate([part[i] for part in keys]) if keys else np.empty(0, dtype=dtype)
            for i, dtype in enumerate((np.int64, np.uint64, np.uint64, bool, np.int64))
        ),
    )
    _match_transactions(batches, rules)
    return batches


def _horizons(data: bytes, infos: np.ndarray) -> np.ndarray:
    """Each batch's delete horizon (its base timestamp when the horizon bit is set, else
    NO_HORIZON), read from the headers at once: the scan rows carry no base timestamp."""
    flagged = (infos["attributes"] & layout.DELETE_HORIZON_MASK) != 0
    found = np.full(len(infos), NO_HORIZON, dtype=np.int64)
    if flagged.any():
        at = infos["position"][flagged] + layout.BASE_TIMESTAMP_OFFSET
        raw = np.frombuffer(data, dtype=np.uint8)[at[:, None] + np.arange(8)]
        found[flagged] = raw.copy().view(">i8").ravel()
    return found


def _match_transactions(batches: _Batches, rules: CleaningRules) -> None:
    """Mark each transactional data batch whose transaction ended in an ABORT marker (in the
    range, or in rules.aborted), and give each marker the data batches of its transaction.
    One step per transactional batch."""
    open_batches: dict[int, list[int]] = {}
    infos = batches.infos
    attributes = infos["attributes"]
    for index in np.flatnonzero(attributes & layout.TRANSACTIONAL_MASK).tolist():
        producer = int(infos["producer_id"][index])
        if not attributes[index] & layout.CONTROL_MASK:
            open_batches.setdefault(producer, []).append(index)
            continue
        marker = batches.marker_types.get(index)
        members = open_batches.pop(producer, [])
        if marker is None:
            continue  # emptied by an earlier cleaning: it ends nothing any more
        batches.markers[index] = (marker, members)
        if marker == control.ABORT:
            batches.aborted[members] = True
    batches.pending = np.zeros(len(infos), dtype=bool)
    for members in open_batches.values():
        batches.pending[members] = True
    for producer, first, last in rules.aborted:
        batches.aborted |= (
            (infos["producer_id"] == producer)
            & (infos["base_offset"] >= first)
            & (infos["last_offset"] <= last)
            & (
                (attributes & (layout.TRANSACTIONAL_MASK | layout.CONTROL_MASK))
                == layout.TRANSACTIONAL_MASK
            )
        )


def _records_to_keep(
    batches: _Batches, rules: CleaningRules
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keep, tombstone, owner): one entry per record of every data batch in log order, and
    the index of the batch each record is in."""
    offsets, high, low, tombstone, owner = batches.keys
    keep = np.zeros(len(offsets), dtype=bool)
    # The latest record of each key among the live ones (aborted and pending data count for
    # no key): sorted by key, then offset, the last of each run of equal keys.
    live = np.flatnonzero(~batches.aborted[owner] & ~batches.pending[owner])
    order = live[np.lexsort((offsets[live], low[live], high[live]))]
    if len(order):
        last_of_key = np.ones(len(order), dtype=bool)
        last_of_key[:-1] = (high[order][1:] != high[order][:-1]) | (
            low[order][1:] != low[order][:-1]
        )
        keep[order[last_of_key]] = True
    # A tombstone goes once its batch's delete horizon has passed.
    horizon = batches.horizon[owner]
    keep &= ~(tombstone & (horizon != NO_HORIZON) & (horizon <= rules.now_ms))
    keep |= batches.pending[owner] & ~batches.aborted[owner]
    return keep, tombstone, owner


def _cleaned_batch(
    data: bytes,
    batches: _Batches,
    index: int,
    keep: np.ndarray,
    tombstone: np.ndarray,
    kept_any: np.ndarray,
    rules: CleaningRules,
) -> bytes | None:
    """Batch `index` as the cleaned log holds it, or None when it goes."""
    row = batches.infos[index]
    position, size = int(row["position"]), int(row["size"])
    producer = int(row["producer_id"])
    last_of_producer = producer >= 0 and rules.producer_last_offsets.get(producer) == int(
        row["last_offset"]
    )
    unchanged = data[position : position + size]
    new_horizon = rules.now_ms + rules.delete_retention_ms
    if int(row["attributes"]) & layout.CONTROL_MASK:
        return _cleaned_marker(data, batches, index, kept_any, last_of_producer, rules)
    if not keep.any() and not last_of_producer:
        return None
    has_horizon = int(batches.horizon[index]) != NO_HORIZON
    horizon = new_horizon if (keep & tombstone).any() and not has_horizon else NO_HORIZON
    if keep.all() and horizon == NO_HORIZON:
        return unchanged
    return compaction.filter_batch(data, position, keep.astype(np.uint8), horizon)


def _cleaned_marker(
    data: bytes,
    batches: _Batches,
    index: int,
    kept_any: np.ndarray,
    last_of_producer: bool,
    rules: CleaningRules,
) -> bytes | None:
    """A control batch stays while data of its transaction stays; the first cleaning that
    finds none left gives it a delete horizon, and once that has passed it goes (emptied
    instead when it is its producer's last batch)."""
    row = batches.infos[index]
    position, size = int(row["position"]), int(row["size"])
    unchanged = data[position : position + size]
    marker = batches.markers.get(index)
    if marker is None:  # emptied before: kept only for its producer
        return unchanged if last_of_producer else None
    if kept_any[marker[1]].any():
        return unchanged
    horizon = int(batches.horizon[index])
    count = int(row["records_count"])
    if horizon == NO_HORIZON:
        return compaction.filter_batch(
            data, position, np.ones(count, np.uint8), rules.now_ms + rules.delete_retention_ms
        )
    if horizon > rules.now_ms:
        return unchanged
    if not last_of_producer:
        return None
    return compaction.filter_batch(data, position, np.zeros(count, np.uint8))
