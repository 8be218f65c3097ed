"""Choosing split keys and applying splits and merges. Metadata only: no data moves.

* **Size.** A partition whose estimated size passes ``split_size`` splits at
  the median of its sampled partition-key prefixes, once a read of it (up to
  ``MEASURE_ROWS`` rows; larger ones trust the estimate) confirms the size.
* **Load** (TiKV's load-based split). A partition whose request rate stays at
  or above ``split_load`` (or its capacity) for ``split_load_window`` seconds
  splits at the sampled key that divides the sampled requests most evenly.
  When one partition-key value carries ``HOT_KEY_SHARE`` of the load no
  split can help: it is reported as a hot key instead.
* **Merge.** Two neighbours that stay cold (under ``merge_load``) for
  ``merge_window`` seconds and together stay under ``min(merge_size,
  split_size / 2)`` merge back. Pre-split boundaries are never merged away.

A split or merge whose map cannot be stored (an engine error) is rolled back:
its partitions serve again, the history forgets it, and the error goes to the
caller (the maintenance loop logs it and the next pass may try again).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from ..keys import codec
from .map import MERGING, RESERVOIR, SERVING, SPLITTING, Partition, set_capacity
from .meta import TablePartitions
from .stats import TableStats

HOT_KEY_SHARE = 0.8  # one key with this share of the load is a hot key
MIN_SIDE_SHARE = 0.1  # a load split must move at least this share to the new side
MIN_LOAD_SAMPLES = 20
MEASURE_ROWS = 200_000  # rows a size check reads at most before trusting the estimate


def choose_load_split(
    samples: list[bytes], start: bytes, end: bytes | None
) -> tuple[bytes | None, bytes | None]:
    """``(split_key, None)``, ``(None, hot_key)`` or ``(None, None)`` from sampled prefixes.

    Each candidate is a sampled prefix; the requests on each side of it are
    counted and the most even candidate wins, as TiKV's load-based split does.
    """
    counts = Counter(k for k in samples if start <= k and (end is None or k < end))
    total = sum(counts.values())
    if total < MIN_LOAD_SAMPLES:
        return None, None
    top_key, top = counts.most_common(1)[0]
    if top >= HOT_KEY_SHARE * total:
        return None, top_key
    best: tuple[int, bytes] | None = None
    left = 0
    for key in sorted(counts):
        if left and key > start:
            imbalance = abs(total - 2 * left)
            if best is None or imbalance < best[0]:
                best = (imbalance, key)
        left += counts[key]
    if best is None:
        return None, None
    side = (total - best[0]) / 2
    if side < MIN_SIDE_SHARE * total:
        return None, top_key if top >= total / 2 else None
    return best[1], None


def choose_size_split(samples: list[bytes], start: bytes, end: bytes | None) -> bytes | None:
    """The median sampled prefix, or the next one above the lowest sample, so that
    both sides hold samples; None when every sample is one partition-key value
    (it fills the partition, and a value is never split)."""
    inside = sorted(k for k in samples if start <= k and (end is None or k < end))
    if not inside:
        return None
    first, median = inside[0], inside[len(inside) // 2]
    if median > first:
        return median
    above = [k for k in inside if k > first]
    return above[0] if above else None


@contextmanager
def _rolled_back(tp: TablePartitions, busy: list[Partition]) -> Iterator[None]:
    """Undo a split or merge whose map could not be stored: the partitions in ``busy`` serve
    again and the history loses the event, so the next pass may try again. The ids taken
    for the new partitions stay taken (the failed put may still have reached the disk)."""
    history, recorded = list(tp.history), tp.recorded
    try:
        yield
    except BaseException:
        tp.history[:] = history
        tp.recorded = recorded
        for p in busy:
            p.state = SERVING
        raise


def split_partition(
    tp: TablePartitions, stats: TableStats, p: Partition, key: bytes, reason: str, now: float
) -> tuple[Partition, Partition]:
    """Replace ``p`` by ``[p.start, key)`` and ``[key, p.end)``, storing the map before either
    takes a write (``TablePartitions.install``)."""
    if not (p.start < key and (p.end is None or key < p.end)):
        raise ValueError(f"split key {key!r} is not inside partition {p.id}")
    p.state = SPLITTING
    left = Partition(tp.allocate_id(), p.start, key, now, p.pinned)
    right = Partition(tp.allocate_id(), key, p.end, now)
    below = [s for s in p.samples if s < key]
    above = [s for s in p.samples if s >= key]
    left.samples, right.samples = below, above
    left.seen, right.seen = len(below), len(above)
    for child in (left, right):
        set_capacity(child, p.bucket.rate if p.bucket else 0, tp.router.clock)
        child.load_samples.extend(s for s in p.load_samples if child.contains(s))
    parts = list(tp.router.parts)
    i = parts.index(p)
    parts[i : i + 1] = [left, right]
    with _rolled_back(tp, [p]):
        tp.record([now, "split", reason, [p.id], [left.id, right.id], tp.relative(key)])
        tp.install(parts)  # stores the map first
    stats.retire(p)
    # From here writes that were routed to p before the swap count in the children, so
    # p's counters stop moving and can be shared out (children may already hold some).
    p.successor = tp.router
    frac = len(below) / len(p.samples) if p.samples else 0.5
    est_bytes, est_rows = p.est_bytes, p.est_rows
    left.est_bytes += int(est_bytes * frac)
    right.est_bytes += est_bytes - int(est_bytes * frac)
    left.est_rows += int(est_rows * frac)
    right.est_rows += est_rows - int(est_rows * frac)
    return left, right


def merge_partitions(
    tp: TablePartitions, stats: TableStats, a: Partition, b: Partition, reason: str, now: float
) -> Partition:
    """Replace neighbours ``a`` and ``b`` by one partition, storing the map before it takes a
    write (``TablePartitions.install``)."""
    if a.end != b.start:
        raise ValueError(f"partitions {a.id} and {b.id} are not neighbours")
    a.state = b.state = MERGING
    m = Partition(tp.allocate_id(), a.start, b.end, now, a.pinned)
    m.samples = sorted(a.samples + b.samples)[::2][:RESERVOIR] if len(a.samples) + len(b.samples) > RESERVOIR else a.samples + b.samples
    m.seen = len(m.samples)
    set_capacity(m, a.bucket.rate if a.bucket else 0, tp.router.clock)
    parts = list(tp.router.parts)
    i = parts.index(a)
    parts[i : i + 2] = [m]
    with _rolled_back(tp, [a, b]):
        tp.record([now, "merge", reason, [a.id, b.id], [m.id], tp.relative(b.start)])
        tp.install(parts)  # stores the map first
    stats.retire(a)
    stats.retire(b)
    a.successor = b.successor = tp.router  # late writes to a or b count in m, as in a split
    m.est_bytes += a.est_bytes + b.est_bytes
    m.est_rows += a.est_rows + b.est_rows
    return m


def update_rates(p: Partition, now: float) -> float:
    """Set ``p``'s read and write rates since the last pass; return its total rate."""
    dt = now - p.pass_time
    if dt <= 0:
        return p.read_rate + p.write_rate
    reads, writes = p.pass_ops
    p.read_rate = (p.reads - reads) / dt
    p.write_rate = (p.writes - writes) / dt
    p.pass_time, p.pass_ops = now, (p.reads, p.writes)
    return p.read_rate + p.write_rate


def measure_partition(scan: Callable[[bytes, bytes], Iterable[tuple[bytes, bytes]]], tp: TablePartitions,
                      p: Partition, limit_rows: int = MEASURE_ROWS) -> tuple[int, int] | None:
    """``(bytes, rows)`` of ``p`` read from the engine (keys and blobs, as the estimate
    counts them), or None when it holds more than ``limit_rows`` rows (too many to read
    on a pass: its estimate stands)."""
    end = p.end if p.end is not None else codec.prefix_end(tp.prefix)
    nbytes = rows = 0
    for key, blob in scan(p.start, end):
        rows += 1
        if rows > limit_rows:
            return None
        nbytes += len(key) + len(blob)
    return nbytes, rows


def plan_pass(tp: TablePartitions, stats: TableStats, options, now: float, max_changes: int = 64,
              measure: Callable[[Partition], tuple[int, int] | None] | None = None) -> int:
    """Evaluate one table: load splits, size splits, then merges. Returns events recorded.

    ``measure(p)`` (``measure_partition`` over the engine) checks a partition's size
    before it splits by size: blind overwrites cannot tell a new row from a replaced
    one, so they count every put as new and the estimate drifts up. A measured size
    replaces the estimate, and a partition that is in fact small does not split."""
    before = tp.recorded
    load_limit = options.split_load or options.capacity
    changed = 0
    previous = {p.id: p.pass_time for p in tp.router.parts}
    rates = {p.id: update_rates(p, now) for p in tp.router.parts}
    for p in list(tp.router.parts):
        if changed >= max_changes or p.state != SERVING:
            continue
        rate = rates[p.id]
        if load_limit and rate >= load_limit:
            p.cold_since = None
            if p.hot_since is None:
                p.hot_since = previous[p.id]
            if now - p.hot_since >= options.split_load_window:
                key, hot = choose_load_split(list(p.load_samples), p.start, p.end)
                if key is not None:
                    split_partition(tp, stats, p, key, "load", now)
                    changed += 1
                    continue
                if hot is not None and hot != p.hot_key:
                    p.hot_key = hot
                    tp.record([now, "hot_key", "load", [p.id], [], tp.relative(hot)])
        else:
            p.hot_since = None
            p.hot_key = None
            p.load_samples.clear()
            if rate < options.merge_load:
                if p.cold_since is None:
                    p.cold_since = previous[p.id]
            else:
                p.cold_since = None
    work = [p for p in tp.router.parts if p.est_bytes > options.split_size]
    while work and changed < max_changes:
        p = work.pop()
        if p.state != SERVING or p not in tp.router.parts:
            continue
        if measure is not None:
            measured = measure(p)
            if measured is not None:
                p.est_bytes, p.est_rows = measured
                if p.est_bytes <= options.split_size:
                    continue
        key = choose_size_split(p.samples, p.start, p.end)
        if key is None:
            continue
        left, right = split_partition(tp, stats, p, key, "size", now)
        changed += 1
        work.extend(c for c in (left, right) if c.est_bytes > options.split_size and c.samples)
    if changed == 0:
        changed += _merge_cold(tp, stats, options, now, max_changes)
    return tp.recorded - before


def _merge_cold(tp: TablePartitions, stats: TableStats, options, now: float, limit: int) -> int:
    small = min(options.merge_size, options.split_size // 2)
    merged = 0
    i = 0
    while i + 1 < len(tp.router.parts) and merged < limit:
        parts = tp.router.parts
        a, b = parts[i], parts[i + 1]
        if (
            not b.pinned and a.state == SERVING and b.state == SERVING
            and a.est_bytes + b.est_bytes < small
            and a.cold_since is not None and b.cold_since is not None
            and now - max(a.cold_since, b.cold_since) >= options.merge_window
            and a.created < now and b.created < now
        ):
            m = merge_partitions(tp, stats, a, b, "cold", now)
            m.cold_since = max(a.cold_since, b.cold_since)
            merged += 1
            continue
        i += 1
    return merged
