"""The partition map of a table: sorted boundary keys and the per-request route.

A table's rows are split into partitions, contiguous ranges of its row keys.
Partition ``i`` holds the keys in ``[bounds[i-1], bounds[i])``: the first starts
at the table's first key, the last runs to the table's end. Every boundary is
a *partition-key prefix* (``layout.partition_prefix``): a row key cut after its
first primary-key element, so all rows that share a partition-key value fall
in one partition.

The route runs on every request, so it is one ``bisect`` on a list of bytes
plus a few counter increments. A split or merge never mutates a map in place:
it builds new ``(bounds, parts)`` and swaps them in with one assignment, so a
request sees either the old map or the new one, never a mix.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import PartitionUnavailable, ServerBusy
from .throttle import TokenBucket

SERVING = "serving"
SPLITTING = "splitting"
MERGING = "merging"
SAMPLE_LIMIT = 16384  # keys kept between two drains of the request sample
RESERVOIR = 64  # partition-key prefixes kept per partition to choose size splits
LOAD_SAMPLES = 4096  # recent request prefixes kept per partition to choose load splits
READ_UNIT = 4096  # bytes of a range read that cost one token, as a Tablestore read capacity unit


class Partition:
    """One partition: its range, counters and throttle. Counters are approximate.

    ``start`` and ``end`` are row keys (``end`` None for the last partition,
    ``start`` the table prefix for the first). Counters only grow; rates and
    windows are derived from them by the statistics and split passes.
    """

    __slots__ = (
        "bucket",
        "bytes_read",
        "bytes_written",
        "cold_since",
        "created",
        "end",
        "est_bytes",
        "est_rows",
        "guarded",
        "hot_key",
        "hot_since",
        "id",
        "load_samples",
        "pass_ops",
        "pass_time",
        "pinned",
        "read_rate",
        "reads",
        "rows_read",
        "samples",
        "seen",
        "start",
        "state",
        "successor",
        "throttled",
        "write_rate",
        "writes",
    )

    def __init__(self, pid: int, start: bytes, end: bytes | None, created: float, pinned: bool = False) -> None:
        self.id = pid
        self.start = start
        self.end = end
        self.pinned = pinned  # its start is a pre-split point: never merged away
        self.created = created
        self.state = SERVING
        self.guarded = False  # True when requests must pass admit(): capacity is on
        self.bucket: TokenBucket | None = None
        self.reads = self.writes = self.bytes_read = self.bytes_written = self.throttled = 0
        self.rows_read = 0  # rows range reads read here (a point read counts in reads alone)
        self.est_bytes = self.est_rows = 0
        self.samples: list[bytes] = []
        self.seen = 0
        self.pass_time = created
        self.pass_ops = (0, 0)  # reads, writes at pass_time
        self.read_rate = self.write_rate = 0.0
        self.hot_since: float | None = None
        self.cold_since: float | None = None
        self.load_samples: deque[bytes] = deque(maxlen=LOAD_SAMPLES)
        self.hot_key: bytes | None = None
        # Set once a split or merge has replaced this partition: the router that now
        # holds its range, so writes routed here before the swap count where they landed.
        self.successor: Router | None = None

    def contains(self, key: bytes) -> bool:
        return self.start <= key and (self.end is None or key < self.end)

    def __repr__(self) -> str:
        return f"<Partition {self.id} [{self.start!r}, {self.end!r}) {self.state}>"


class Router:
    """Routes row keys of one table to partitions; counts and (optionally) throttles.

    ``route_read(key)`` / ``route_write(key)`` return the partition and raise
    ``OTSServerBusy`` when it is over capacity, or ``OTSPartitionUnavailable``
    while it is being split or merged (both only when capacity is on).
    """

    def __init__(self, parts: list[Partition]) -> None:
        self.state: tuple[list[bytes], list[Partition]] = ([], [])
        self.reserved: TokenBucket | None = None
        self.clock = time.monotonic  # what token buckets read; PartitionManager may inject one
        self.sample: deque[bytes] = deque(maxlen=SAMPLE_LIMIT)
        self._append = self.sample.append
        self.install(parts)

    def install(self, parts: list[Partition]) -> None:
        """Swap in a new list of partitions, sorted and contiguous."""
        self.state = ([p.start for p in parts[1:]], parts)

    @property
    def parts(self) -> list[Partition]:
        return self.state[1]

    def find(self, key: bytes) -> Partition:
        bounds, parts = self.state
        return parts[bisect_right(bounds, key)]

    def route_read(self, key: bytes) -> Partition:
        bounds, parts = self.state
        p = parts[bisect_right(bounds, key)]
        p.reads += 1
        self._append(key)
        if p.guarded:
            self.admit(p)
        return p

    def route_write(self, key: bytes) -> Partition:
        bounds, parts = self.state
        p = parts[bisect_right(bounds, key)]
        p.writes += 1
        self._append(key)
        if p.guarded:
            self.admit(p)
        return p

    def route_puts(self, keys: list[bytes], sizes: list[int]) -> bool:
        """Route and count a batch of blind puts of ``sizes``-byte blobs, as ``route_write``
        then ``record_write`` would row by row. A throttled partition takes the batch's
        tokens for it at once. Returns False, counting and taking nothing, if a target
        partition is not serving or has too few tokens: then the caller routes row by
        row, and each row is admitted or throttled on its own.
        """
        bounds, parts = self.state
        if not bounds:
            p = parts[0]
            n, blob_bytes = len(keys), sum(sizes)
            if p.guarded and not self._admit_many({p: n}):
                return False
            p.writes += n
            p.bytes_written += blob_bytes
            p.est_bytes += blob_bytes + sum(map(len, keys))
            p.est_rows += n
            self.sample.extend(keys)
            return True
        targets = [parts[bisect_right(bounds, k)] for k in keys]
        guarded = [p for p in targets if p.guarded]
        if guarded and not self._admit_many(Counter(guarded)):
            return False
        for p, key, size in zip(targets, keys, sizes):
            p.writes += 1
            p.bytes_written += size
            p.est_bytes += size + len(key)
            p.est_rows += 1
        self.sample.extend(keys)
        return True

    def may_span(self, p: Partition, lo: bytes, hi: bytes, reverse: bool) -> bool:
        """Whether a page of ``[lo, hi)`` routed to ``p`` may read rows outside it."""
        if reverse:
            return lo < p.start
        return p.end is not None and hi > p.end

    def record_range(self, p: Partition, n: int, nbytes: int, lo: bytes, hi: bytes, reverse: bool,
                     rows: Sequence, key_of: Callable[[Any], bytes], size_of: Callable[[Any], int]) -> None:
        """Count a range page that ``route_read`` routed to ``p`` (counting one read and
        taking one token): ``n`` rows of ``nbytes`` read in ``[lo, hi)``, in key order or
        (``reverse``) the other way.

        Every partition the page read counts one read (an operation there, as load
        splits and the statistics count them), the rows and bytes read there, and
        takes a token per ``READ_UNIT`` bytes past the one the route took (as debt:
        the page is read already, so the requests after it are throttled instead). ``rows`` are the rows read, in
        read order, ``key_of(row)`` a row's key and ``size_of(row)`` its bytes; they are
        looked at only when the page may leave ``p``, a few rows per partition boundary
        (by bisection), so a page within one partition costs no work per row."""
        if n == 0 or p.successor is not None or (
                lo >= p.start if reverse else p.end is None or hi <= p.end):
            # The page is within p (may_span, inline: this runs on every page).
            p.rows_read += n
            p.bytes_read += nbytes
            if nbytes > READ_UNIT and p.bucket is not None:
                p.bucket.charge(-(-nbytes // READ_UNIT) - 1)
            return

        def key_at(i: int) -> bytes:
            return key_of(rows[i])

        bounds, parts = self.state
        ends = (key_at(n - 1), key_at(0)) if reverse else (key_at(0), key_at(n - 1))
        visited = parts[bisect_right(bounds, ends[0]) : bisect_right(bounds, ends[1]) + 1]
        if reverse:
            visited.reverse()
        # The page's rows [cuts[k], cuts[k+1]) lie in visited[k]: forward, a row at or past
        # the next partition's start is in it; backward, a row below this one's start.
        cuts = [0]
        for q in visited[:-1] if reverse else visited[1:]:
            cuts.append(_first_past(key_at, cuts[-1], n, q.start, reverse))
        cuts.append(n)
        # The read and token route_read took count for the first partition read (when the
        # route, at a backward page's upper bound, found the partition above it, that one
        # keeps them and the first one read takes no more).
        routed = p in visited
        for k, q in enumerate(visited):
            i, j = cuts[k], cuts[k + 1]
            if i < j:
                if k:
                    self._append(key_at(i))  # the load sample sees where the page went
                _count_read(q, j - i, sum(map(size_of, rows[i:j])), q is p or (not routed and k == 0))

    @staticmethod
    def _admit_many(counts: Mapping[Partition, int]) -> bool:
        """Take ``counts[p]`` tokens from each partition's bucket, all or none."""
        taken: list[tuple[TokenBucket, int]] = []
        for p, n in counts.items():
            bucket = p.bucket
            if p.state != SERVING or (bucket is not None and not bucket.take(n)):
                for b, m in taken:
                    b.give(m)
                return False
            if bucket is not None:
                taken.append((bucket, n))
        return True

    def admit(self, p: Partition) -> None:
        """Let a request into ``p`` or raise the throttling error; counts rejections."""
        if p.state != SERVING:
            p.throttled += 1
            raise PartitionUnavailable(f"partition {p.id} is {p.state}; retry shortly")
        bucket = p.bucket
        if bucket is None or bucket.take():
            return
        reserved = self.reserved
        if reserved is not None and reserved.take():
            return
        p.throttled += 1
        raise ServerBusy(
            f"partition {p.id} is over its capacity of {bucket.rate:g} operations per second"
        )

    def configure(self, capacity: float, reserved: float) -> None:
        """Switch per-partition capacity (0 = off) and the table's reserved throughput."""
        self.reserved = TokenBucket(reserved, clock=self.clock) if reserved else None
        for p in self.parts:
            set_capacity(p, capacity, self.clock)


def _first_past(key_at: Callable[[int], bytes], i: int, n: int, bound: bytes, reverse: bool) -> int:
    """The first index in ``[i, n)`` whose key is past ``bound`` in read order: ``>= bound``
    going forward, ``< bound`` going backward (``n`` if none); keys are in read order."""
    while i < n:
        mid = (i + n) // 2
        key = key_at(mid)
        if (key >= bound) if not reverse else (key < bound):
            n = mid
        else:
            i = mid + 1
    return i


def _count_read(p: Partition, rows: int, nbytes: int, routed: bool) -> None:
    """A page's ``rows`` rows and ``nbytes`` read in ``p``: one read (unless ``routed``:
    ``route_read`` counted it and took a token for it) and a token per ``READ_UNIT``."""
    if not routed:
        p.reads += 1
    p.rows_read += rows
    p.bytes_read += nbytes
    bucket = p.bucket
    if bucket is not None:
        units = -(-nbytes // READ_UNIT) - routed
        if units > 0:
            bucket.charge(units)


def set_capacity(p: Partition, capacity: float, clock=time.monotonic) -> None:
    p.bucket = TokenBucket(capacity, clock=clock) if capacity else None
    p.guarded = bool(capacity)


def record_write(p: Partition, key: bytes, new_len: int, old_len: int | None) -> None:
    """Adjust ``p``'s counters after writing a ``new_len``-byte row blob (0 = deleted).

    ``old_len`` is the blob replaced (0 = none) or None when the write did not
    read it: then a put counts as a new row and a delete removes one average
    row. Overwrites by blind puts make the estimate drift up; it is an estimate
    kept from counters, corrected by a read of the partition before it splits by
    size (``split.measure_partition``). A write routed to ``p`` just before a split
    or merge replaced it is counted in the partition that holds its key now.
    """
    successor = p.successor
    if successor is not None:
        p = successor.find(key)
    p.bytes_written += new_len
    new = new_len + len(key) if new_len else 0
    if old_len is None:
        if new:
            p.est_bytes += new
            p.est_rows += 1
        elif p.est_rows > 0:
            p.est_bytes -= p.est_bytes // p.est_rows
            p.est_rows -= 1
        return
    old = old_len + len(key) if old_len else 0
    p.est_bytes = max(p.est_bytes + new - old, 0)
    p.est_rows = max(p.est_rows + (1 if new else 0) - (1 if old else 0), 0)
