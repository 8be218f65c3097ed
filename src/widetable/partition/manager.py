"""The partitions of every table of a database: loading, describing, maintaining.

``Database`` owns one :class:`PartitionManager`. It loads each table's map
when the table is opened, attaches the table's router (the per-request hook),
and runs maintenance passes: drain request samples into statistics, store
closed statistics buckets, and split or merge partitions. Passes run on the
database's maintenance thread and on ``db.maintain_partitions()``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from ..errors import ParameterInvalid, describe
from ..keys import codec, layout
from .map import SERVING, record_write
from .meta import PartitionEvent, TablePartitions
from .split import measure_partition, merge_partitions, plan_pass, split_partition
from .stats import TableStats

if TYPE_CHECKING:
    from ..table.schema import TableSchema
    from ..table.table import Table


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition as ``describe_table`` shows it.

    ``start``/``end`` are partition-key values, None meaning the table's start
    or end; the partition holds ``[start, end)``. ``rows`` and ``bytes`` are
    estimates kept from write counters; rates are per second over the last
    maintenance interval. ``hot_key`` is a partition-key value that takes
    nearly all the load, which no split can help.
    """

    index: int
    id: int
    start: object
    end: object
    rows: int
    bytes: int
    reads_per_sec: float
    writes_per_sec: float
    state: str
    hot_key: object = None


def encode_split_points(schema: TableSchema, points: object) -> list[bytes]:
    """Encode pre-split points (partition-key values) as sorted, distinct prefixes."""
    if points is None:
        return []
    if not isinstance(points, (list, tuple)):
        raise ParameterInvalid(f"split_points must be a list of partition-key values, got {describe(points)}")
    name, type_ = schema.primary_key[0]
    out = []
    for v in points:
        if isinstance(v, tuple) and len(v) == 1:
            v = v[0]
        out.append(codec.encode_element(v, type_, name))
    if len(set(out)) != len(out):
        raise ParameterInvalid(f"split_points {describe(points)} name a value twice")
    return sorted(out)


class PartitionManager:
    """Thread-safe; one per database."""

    def __init__(self, engine, clock: Callable[[], float] | None = None) -> None:
        """``clock`` (unix seconds) times passes, statistics buckets and token buckets;
        a simulator injects a virtual one. Default: the wall clock."""
        self._engine = engine
        self.clock: Callable[[], float] = clock or time.time
        self._virtual = clock is not None
        self._lock = threading.RLock()
        self._tables: dict[int, tuple[Table, TablePartitions, TableStats]] = {}

    # -- lifecycle ------------------------------------------------------------------

    def new_table(self, schema: TableSchema, split_points: object, batch) -> TablePartitions:
        """A new table's map, put into ``batch``; attach it once the batch is written."""
        points = encode_split_points(schema, split_points)
        tp = TablePartitions.new(schema.table_id, points, self.clock())
        batch.put(layout.partition_key(schema.table_id, layout.PARTITION_MAP), tp.encode_map())
        return tp

    def open_table(self, table: Table, tp: TablePartitions | None = None) -> None:
        """Attach ``table`` to its stored map (a one-partition map if it has none)."""
        tid = table.schema.table_id
        if tp is None:
            blob = self._engine.get(layout.partition_key(tid, layout.PARTITION_MAP))
            if blob is None:
                tp = TablePartitions.new(tid, [], self.clock())
            else:
                samples = self._engine.get(layout.partition_key(tid, layout.PARTITION_SAMPLES))
                tp = TablePartitions.decode(tid, blob, samples)
        if self._virtual:
            tp.router.clock = self.clock
        tp.store = partial(self._engine.put, layout.partition_key(tid, layout.PARTITION_MAP))
        with self._lock:
            self._tables[tid] = (table, tp, TableStats(tp, now=self.clock()))
        self.configure(table)
        table._attach_partitions(tp.router.route_read, tp.router.route_write, record_write)

    def configure(self, table: Table) -> None:
        """Apply the table's capacity and stream options (after create or update)."""
        entry = self._tables.get(table.schema.table_id)
        if entry is not None:
            o = table.schema.options
            entry[1].router.configure(o.capacity, o.reserved_pool)
            # A stream's readers follow shard links made of the split history's splits
            # and merges: keep those within the stream's retention.
            entry[1].lineage_window = float(table.schema.stream_retention) if table.schema.stream else None

    def drop_table(self, table_id: int, batch) -> None:
        """Put the deletion of a table's partition records and statistics into ``batch``."""
        batch.delete_range(*layout.partition_range(table_id))
        batch.delete_range(*layout.stats_range(table_id))
        with self._lock:
            self._tables.pop(table_id, None)

    def _entry(self, table: Table) -> tuple[Table, TablePartitions, TableStats]:
        try:
            return self._tables[table.schema.table_id]
        except KeyError:
            raise ParameterInvalid(f"table {table.name!r} has no partition map") from None

    def partitions(self, table: Table) -> TablePartitions:
        return self._entry(table)[1]

    # -- reading --------------------------------------------------------------------

    def describe(self, table: Table) -> tuple[list[PartitionInfo], list[PartitionEvent]]:
        _, tp, _ = self._entry(table)
        now = self.clock()
        infos = []
        for i, p in enumerate(tp.router.parts):
            dt = now - p.pass_time
            if dt >= 1.0:
                r = (p.reads - p.pass_ops[0]) / dt
                w = (p.writes - p.pass_ops[1]) / dt
            else:
                r, w = p.read_rate, p.write_rate
            infos.append(PartitionInfo(
                i, p.id, tp.value_of(p.start), tp.value_of(p.end), p.est_rows, p.est_bytes,
                r, w, p.state, tp.value_of(p.hot_key),
            ))
        return infos, tp.events()

    def stats(self, table: Table, since: float | None, until: float | None) -> dict:
        stats = self._entry(table)[2]
        with self._lock:
            stats.drain()
            report = stats.report(self._engine, since, until)
        report["table"] = table.name
        return report

    # -- maintenance ----------------------------------------------------------------

    def maintain(self, table: Table | None = None, now: float | None = None) -> int:
        """One pass over ``table`` (or every table); returns the splits, merges and hot keys recorded."""
        events = 0
        with self._lock:
            entries = [self._entry(table)] if table is not None else list(self._tables.values())
            for t, tp, stats in entries:
                if t._unusable:
                    continue
                at = self.clock() if now is None else now
                stats.drain()
                # A table whose rows are records of column families (widetable.bigtable)
                # says how to read a partition's rows: measure_scan.
                scan = getattr(t, "measure_scan", None) or self._engine.scan
                n = plan_pass(tp, stats, t.schema.options, at,
                              measure=partial(measure_partition, scan, tp))
                if n:
                    self._save_map(tp)
                    events += n
                stats.roll(self._engine, at, t.schema.options.stats_retention)
        return events

    def tick(self) -> None:
        """Drain samples and store ended statistics buckets; no splits."""
        with self._lock:
            for t, _, stats in list(self._tables.values()):
                if not t._unusable:
                    stats.drain()
                    stats.roll(self._engine, self.clock(), t.schema.options.stats_retention)

    def flush(self) -> None:
        """Store the open statistics buckets, samples and maps (on close)."""
        with self._lock:
            for t, tp, stats in list(self._tables.values()):
                if t._unusable:
                    continue
                stats.drain()
                stats.roll(self._engine, self.clock(), t.schema.options.stats_retention, force=True)
                self._save_map(tp)

    def _save_map(self, tp: TablePartitions) -> None:
        self._engine.put(layout.partition_key(tp.table_id, layout.PARTITION_MAP), tp.encode_map())

    def split(self, table: Table, at: object, reason: str = "manual") -> None:
        """Split the partition holding partition-key value ``at`` so that ``at`` starts one."""
        _, tp, stats = self._entry(table)
        key = tp.prefix + encode_split_points(table.schema, [at])[0]
        with self._lock:
            p = tp.router.find(key)
            if p.start == key:
                raise ParameterInvalid(f"a partition already starts at {describe(at)}")
            split_partition(tp, stats, p, key, reason, self.clock())  # stores the map

    def merge(self, table: Table, index: int, reason: str = "manual") -> None:
        """Merge partition ``index`` with the one after it."""
        _, tp, stats = self._entry(table)
        with self._lock:
            parts = tp.router.parts
            if type(index) is not int or not 0 <= index < len(parts) - 1:
                raise ParameterInvalid(f"no partitions {describe(index)} and {describe(index)}+1 to merge")
            a, b = parts[index], parts[index + 1]
            if a.state != SERVING or b.state != SERVING:
                raise ParameterInvalid(f"partitions {a.id} and {b.id} are busy")
            merge_partitions(tp, stats, a, b, reason, self.clock())  # stores the map
