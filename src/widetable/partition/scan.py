"""Split-point APIs and the parallel scan.

* :func:`compute_split_points_by_size`, Tablestore's ComputeSplitPointsBySize:
  ranges of about ``split_size`` bytes each, for parallel readers.
* :func:`sample_row_keys`, Bigtable's SampleRowKeys: boundary keys with the
  approximate byte offset of each.
* :func:`parallel_scan`: scan the partitions on a thread pool; yield rows in
  key order or as they come.

Sizes come from each partition's counters and its sample of partition-key
prefixes, never from a scan, so the ranges are approximate. A boundary is
always a partition-key value, so no value is split across two ranges.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ParameterInvalid, describe
from ..keys import codec
from .meta import TablePartitions

if TYPE_CHECKING:
    from ..table.table import Table

_CHUNK = 256  # rows handed from a scan worker to the consumer at a time


@dataclass(frozen=True, slots=True)
class SplitRange:
    """``[start, end)`` as primary-key tuples ready for ``get_range``/``scan``.

    ``location`` is the id of the partition holding ``start``; ``size`` the
    estimated bytes in the range.
    """

    start: tuple
    end: tuple
    location: int
    size: int


def _segments(tp: TablePartitions, pieces_of: int | None) -> list[tuple[bytes, int, int]]:
    """``(start_key, est_bytes, partition_id)`` pieces in key order; large partitions are
    cut at quantiles of their sampled prefixes into pieces of about ``pieces_of`` bytes."""
    out = []
    for p in tp.router.parts:
        cuts = [p.start]
        if pieces_of and p.est_bytes > pieces_of and p.samples:
            inside = sorted({s for s in p.samples if p.contains(s) and s > p.start})
            want = min(len(inside), -(-p.est_bytes // pieces_of) - 1)
            if want > 0:
                cuts += sorted({inside[(i * len(inside)) // (want + 1)] for i in range(1, want + 1)})
        share = p.est_bytes // len(cuts)
        out += [(c, share, p.id) for c in cuts]
    return out


def _bound(tp: TablePartitions, key: bytes | None, arity: int, low: bool) -> tuple:
    if key is None or len(key) <= len(tp.prefix):
        pad = codec.INF_MIN if low else codec.INF_MAX
        return (pad,) * arity
    return (tp.value_of(key),) + (codec.INF_MIN,) * (arity - 1)


def compute_split_points_by_size(table: Table, tp: TablePartitions, split_size: int) -> list[SplitRange]:
    """Contiguous ranges covering the table, each about ``split_size`` bytes (estimated)."""
    if type(split_size) is not int or split_size <= 0:
        raise ParameterInvalid(f"split_size must be a positive number of bytes, got {describe(split_size)}")
    arity = len(table.schema.primary_key)
    segments = _segments(tp, split_size)
    ranges: list[SplitRange] = []
    start, location, acc = segments[0][0], segments[0][2], 0
    for i, (key, size, pid) in enumerate(segments):
        acc += size
        nxt = segments[i + 1][0] if i + 1 < len(segments) else None
        if nxt is None or acc >= split_size:
            ranges.append(SplitRange(
                _bound(tp, start, arity, True), _bound(tp, nxt, arity, False) if nxt is None
                else _bound(tp, nxt, arity, True), location, acc,
            ))
            if nxt is not None:
                start, location, acc = nxt, segments[i + 1][2], 0
    return ranges


def sample_row_keys(table: Table, tp: TablePartitions, per_partition: int = 4) -> list[tuple[tuple, int]]:
    """``[(key, offset), ...]``: each key ends a chunk, ``offset`` the estimated bytes
    before it. Keys are 1-tuples of partition-key values; the last is ``()`` with the
    table's estimated size, as Bigtable's SampleRowKeys ends with the empty key."""
    out: list[tuple[tuple, int]] = []
    offset = 0
    for p in tp.router.parts:
        inside = sorted({s for s in p.samples if p.contains(s) and s > p.start})
        step = max(1, len(inside) // per_partition) if inside else 1
        cuts = inside[step - 1 :: step][: per_partition - 1] if inside else []
        share = p.est_bytes // (len(cuts) + 1)
        for c in cuts:
            offset += share
            out.append(((tp.value_of(c),), offset))
        offset += p.est_bytes - share * len(cuts)
        if p.end is not None:
            out.append(((tp.value_of(p.end),), offset))
    out.append(((), offset))
    return out


def parallel_scan(
    table: Table,
    tp: TablePartitions,
    workers: int = 4,
    ordered: bool = True,
    columns: list[str] | None = None,
    filter: object = None,
    max_versions: int | None = None,
) -> Iterator:
    """Scan every partition on ``workers`` threads. ``ordered`` yields rows in key
    order (the partitions are disjoint and sorted, so the merge is their
    concatenation); otherwise rows come as workers produce them, faster.

    The ranges are the partitions when the scan starts; a split or merge during
    the scan moves no data, so no row is lost or read twice. Each range reads
    with its own snapshot, so the scan as a whole is not one snapshot.
    """
    if type(workers) is not int or workers < 1:
        raise ParameterInvalid(f"workers must be a positive integer, got {describe(workers)}")
    arity = len(table.schema.primary_key)
    ranges = [
        (_bound(tp, p.start, arity, True), _bound(tp, p.end, arity, p.end is not None))
        for p in tp.router.parts
    ]
    stop = threading.Event()
    shared: queue.Queue = queue.Queue(maxsize=workers * 4)
    queues = [queue.Queue(maxsize=4) for _ in ranges] if ordered else [shared] * len(ranges)

    def put(q: queue.Queue, item: object) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work(i: int) -> None:
        q = queues[i]
        try:
            chunk: list = []
            rows = table.scan(
                ranges[i][0], ranges[i][1], columns=columns, filter=filter, max_versions=max_versions
            )
            for row in rows:
                chunk.append(row)
                if len(chunk) >= _CHUNK:
                    if not put(q, chunk):
                        return
                    chunk = []
            if chunk and not put(q, chunk):
                return
            put(q, None)
        except BaseException as exc:  # noqa: BLE001 - any failure is handed to the consumer
            put(q, exc)

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="widetable-scan")
    try:
        for i in range(len(ranges)):
            pool.submit(work, i)
        pending = len(ranges)
        order = iter(queues) if ordered else None
        q = next(order) if order is not None else shared
        while pending:
            item = q.get()
            if item is None:
                pending -= 1
                if order is not None and pending:
                    q = next(order)
                continue
            if isinstance(item, BaseException):
                raise item
            yield from item
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
