"""Windowed statistics per partition: the data source for a Key Visualizer.

Counters on each partition only grow. Every ``BUCKET_SECONDS`` the open
bucket is closed: the change of each partition's counters since the bucket
opened becomes one row, and the rows are stored under
``layout.stats_key(table_id, bucket_start)``. Buckets older than the table's
``stats_retention`` are deleted when a bucket is stored, so the keyspace stays
bounded; stored buckets survive a restart.

A bucket record (DO NOT CHANGE: embedded in on-disk data) is a msgpack list of
rows ``[id, start, end, reads, writes, bytes_read, bytes_written, throttled,
[[key, count], ...], rows_read]`` (``rows_read``, the rows range reads read, was
added later: a row without it reads as 0); ``start``/``end`` are partition-key prefixes without
the table prefix (``end`` None for the last partition), the keys are row keys
without it. The hottest keys come from a sample of requests (every request's
key goes to a bounded queue that the maintenance thread drains, routing at
most ``DRAIN_LIMIT`` of them a drain) counted with the space-saving top-k
algorithm, so they are approximate.
"""

from __future__ import annotations

import random
import time

import msgpack

from ..keys import codec, layout
from .map import RESERVOIR, Partition
from .meta import TablePartitions

BUCKET_SECONDS = 10
HOT_KEYS = 8
DRAIN_LIMIT = 2048  # request keys routed per drain (one a second); past it, a random sample


class SpaceSaving:
    """Top-k heavy hitters in O(k) memory (Metwally et al.).

    A key that takes a slot over inherits the evicted count, so its count is an
    upper bound; ``top`` reports the guaranteed part (count minus what it
    inherited), so a flat distribution never shows a false hot key.
    """

    __slots__ = ("counts", "errors", "k")

    def __init__(self, k: int = HOT_KEYS) -> None:
        self.k = k
        self.counts: dict[bytes, int] = {}
        self.errors: dict[bytes, int] = {}

    def add(self, key: bytes, n: int = 1) -> None:
        counts = self.counts
        if key in counts:
            counts[key] += n
        elif len(counts) < self.k:
            counts[key] = n
            self.errors[key] = 0
        else:
            victim = min(counts, key=counts.__getitem__)
            inherited = counts.pop(victim)
            del self.errors[victim]
            counts[key] = inherited + n
            self.errors[key] = inherited

    def top(self) -> list[tuple[bytes, int]]:
        """``(key, guaranteed count)``, busiest first; keys with no guaranteed count are left out."""
        sure = [(k, c - self.errors[k]) for k, c in self.counts.items() if c > self.errors[k]]
        return sorted(sure, key=lambda kv: (-kv[1], kv[0]))


def _counters(p: Partition) -> tuple[int, int, int, int, int, int]:
    return (p.reads, p.writes, p.bytes_read, p.bytes_written, p.throttled, p.rows_read)


class TableStats:
    """The open statistics bucket of one table, and its stored buckets."""

    def __init__(
        self, tp: TablePartitions, bucket_seconds: int = BUCKET_SECONDS, now: float | None = None
    ) -> None:
        self.tp = tp
        self.bucket_seconds = bucket_seconds
        self.bucket = self._floor(time.time() if now is None else now)
        self.base: dict[int, tuple] = {}
        self.retired: list[list] = []
        self.hot: dict[int, SpaceSaving] = {}
        self._random = random.Random(tp.table_id)

    def _floor(self, now: float) -> int:
        return int(now) - int(now) % self.bucket_seconds

    def drain(self) -> int:
        """Route the sampled request keys to hot-key counters, reservoirs and load samples.

        About ``DRAIN_LIMIT`` keys at most are routed per drain: past that, with
        ``weight = ceil(waiting / DRAIN_LIMIT)``, each key is routed with
        probability ``1 / weight`` (at random, so a periodic workload cannot
        alias with it) and counts ``weight`` requests toward its hot-key count,
        so the counts stay unbiased. Routing costs ~3 µs of Python a key, as
        much as a read itself, so a busy store would otherwise spend a tenth of
        its CPU here."""
        sample = self.tp.router.sample
        find = self.tp.router.find
        n = len(self.tp.prefix)
        waiting = len(sample)
        weight = -(-waiting // DRAIN_LIMIT) or 1
        keep = 1.0 / weight
        chance = self._random.random
        taken = 0
        while sample:
            try:
                key = sample.popleft()
            except IndexError:
                break
            taken += 1
            if weight > 1 and chance() >= keep:
                continue
            p = find(key)
            hot = self.hot.get(p.id)
            if hot is None:
                hot = self.hot[p.id] = SpaceSaving()
            hot.add(key[n:], weight)
            try:
                prefix = layout.partition_prefix(key)
            except (IndexError, ValueError):
                continue
            p.load_samples.append(prefix)
            p.seen += 1
            if len(p.samples) < RESERVOIR:
                p.samples.append(prefix)
            else:
                j = self._random.randrange(p.seen)
                if j < RESERVOIR:
                    p.samples[j] = prefix
        return taken

    def row(self, p: Partition) -> list:
        base = self.base.get(p.id, (0, 0, 0, 0, 0, 0))
        deltas = [a - b for a, b in zip(_counters(p), base)]
        hot = self.hot.get(p.id)
        return [
            p.id, self.tp.relative(p.start), self.tp.relative(p.end), *deltas[:5],
            [list(kv) for kv in hot.top()] if hot else [], deltas[5],
        ]

    def retire(self, p: Partition) -> None:
        """Keep the open-bucket row of ``p``, about to leave the map by a split or merge."""
        self.retired.append(self.row(p))
        self.hot.pop(p.id, None)

    def live_rows(self) -> list[list]:
        rows = self.retired + [self.row(p) for p in self.tp.router.parts]
        return [r for r in rows if any(r[3:8])]  # a page's rows come with its reads

    def roll(self, engine, now: float, retention: int, force: bool = False) -> bool:
        """Store the open bucket if it has ended (or ``force``); return whether it stored."""
        if not force and now < self.bucket + self.bucket_seconds:
            return False
        rows = self.live_rows()
        batch = engine.batch()
        key = layout.stats_key(self.tp.table_id, self.bucket)
        if rows:
            old = engine.get(key)
            if old is not None:
                rows = msgpack.unpackb(old, raw=False) + rows
            batch.put(key, msgpack.packb(rows, use_bin_type=True))
        if retention:
            start, end = layout.stats_range(self.tp.table_id, 0, int(now) - int(retention))
            batch.delete_range(start, end)
        self.tp_samples_put(batch)
        engine.write(batch)
        self.retired = []
        self.hot = {}
        self.base = {p.id: _counters(p) for p in self.tp.router.parts}
        if not force or now >= self.bucket + self.bucket_seconds:
            self.bucket = self._floor(now)
        return True

    def tp_samples_put(self, batch) -> None:
        batch.put(layout.partition_key(self.tp.table_id, layout.PARTITION_SAMPLES), self.tp.encode_samples())

    def stored(self, engine, since: float | None, until: float | None) -> list[tuple[int, list]]:
        start, end = layout.stats_range(
            self.tp.table_id, 0 if since is None else self._floor(since),
            None if until is None else int(until) + 1,
        )
        out: dict[int, list] = {}
        for key, blob in engine.scan(start, end):
            bucket = int.from_bytes(key[-8:], "big")
            out.setdefault(bucket, []).extend(msgpack.unpackb(blob, raw=False))
        return sorted(out.items())

    def report(self, engine, since: float | None, until: float | None) -> dict:
        """Plain data: every bucket in ``[since, until]`` plus the open one, and a summary."""
        buckets = self.stored(engine, since, until)
        if until is None or until >= self.bucket:
            live = self.live_rows()
            if buckets and buckets[-1][0] == self.bucket:
                buckets[-1][1].extend(live)
            elif live:
                buckets.append((self.bucket, live))
        out = [{"start": b, "seconds": self.bucket_seconds, "partitions": [self._plain(r) for r in rows]}
               for b, rows in buckets]
        return {
            "table_id": self.tp.table_id,
            "bucket_seconds": self.bucket_seconds,
            "buckets": out,
            "summary": summarize(out),
        }

    def _plain(self, row: list) -> dict:
        pid, start, end, reads, writes, br, bw, thr, hot, *later = row
        return {
            "id": pid,
            "start": self.tp.decode_value(start),
            "end": self.tp.decode_value(end),
            "start_key": start, "end_key": end,
            "reads": reads, "writes": writes, "bytes_read": br, "bytes_written": bw,
            "rows_read": later[0] if later else 0,
            "throttled": thr,
            "hot_keys": [(_decode_key(k), c) for k, c in hot],
        }


def _decode_key(rel: bytes) -> object:
    try:
        return codec.decode_tuple(rel)
    except Exception:  # noqa: BLE001 - a sampled key that is not a full row key
        return rel


def summarize(buckets: list[dict]) -> dict:
    """Where the load went: shares of the first (head) and last (tail) partitions.

    ``hot_spot`` is ``"tail"`` (or ``"head"``) when over half of all operations
    went to the table's last (first) partition while the table had more than
    one, the signature of keys led by a timestamp or sequence.
    """
    total = tail = head = 0
    split = False
    by_range: dict[tuple, int] = {}
    for b in buckets:
        for r in b["partitions"]:
            ops = r["reads"] + r["writes"]
            total += ops
            if r["end_key"] is None:
                tail += ops
            if not r["start_key"]:
                head += ops
            if r["end_key"] is not None or r["start_key"]:
                split = True
            rk = (r["start_key"], r["end_key"])
            by_range[rk] = by_range.get(rk, 0) + ops
    tail_share = tail / total if total else 0.0
    head_share = head / total if total else 0.0
    spot = None
    if split and total:
        if tail_share > 0.5:
            spot = "tail"
        elif head_share > 0.5:
            spot = "head"
    return {
        "operations": total,
        "tail_share": tail_share,
        "head_share": head_share,
        "max_partition_share": max(by_range.values()) / total if total else 0.0,
        "hot_spot": spot,
    }
