"""The simulator: replay a workload against a real widetable store under each key design.

Each design gets a fresh in-memory :class:`~widetable.Database` (the memory
engine: the same Table, partition, split and throttle code as on RocksDB,
without disk I/O) whose partition layer reads a *virtual clock*. The table is
created with a per-partition ``capacity`` (token buckets: a request over it
fails with ``OTSServerBusy`` and is counted as throttled, not retried) and
automatic split by load (``split_load``, ``split_load_window``) and size. Every
``maintenance_every`` simulated seconds the simulator runs one partition pass
(``db.maintain_partitions``), as the background thread does every 5 s.

*Nodes.* The store has no nodes; the simulator places partitions on ``nodes``
simulated servers as Bigtable and Tablestore schedule tablets: the initial
partition on node 0, the left child of a split stays on its parent's node and
the right child moves to the node that carried the least load in the last
pass; a merge stays on the left partition's node.

*Range reads.* A range operation becomes the key ranges its design needs
(:func:`~.generate.key_ranges`: one per bucket for a bucketed key, the whole
table when the key cannot narrow it); each range is cut at partition
boundaries and every piece is one ``get_range`` call, as a client following
partition boundaries does. The pieces are the query's *fan-out*.

Same workload, seed and config give an identical report (no wall-clock time,
no unseeded randomness).

*Size and progress.* A run replays ``rate x duration`` operations (or
``SimConfig.ops``) per design. :func:`simulate` refuses, before any work, a run
whose operations over all designs exceed ``max_ops`` (default :data:`MAX_OPS`,
about 10 to 15 minutes of work); pass a larger ``max_ops``, or ``None``, to run
it anyway. An optional ``progress(design, done, total)`` callback is told how
far each design's replay has got, every :data:`PROGRESS_EVERY` operations.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from ..db import Database
from ..errors import ParameterInvalid, WidetableError, describe
from ..keys import codec
from ..keys.codec import INF_MAX, INF_MIN
from ..partition.retry import RETRYABLE
from ..storage import open_engine
from .generate import Generator, Op, key_ranges, primary_key
from .workloads import KeyDesign, Workload

EPOCH = 1_718_000_000  # virtual time zero, in unix seconds
TABLE = "sim"

# The most operations (all designs together) one simulate() call replays unless its
# caller raises the limit. Measured on a 2-core machine (RocksDB engine): the eleven
# built-in designs at 200,000 operations each replayed 2,200,000 operations in 738 s,
# 2,983 a second (from 586/s for a design whose range reads fan out to every partition
# to 40,000/s for point reads and writes; a run slows as its table grows). So
# 2,000,000 is about 11 minutes of work, and at most 10 to 15 on a similar machine.
MAX_OPS = 2_000_000
PROGRESS_EVERY = 500  # operations between two calls of a progress callback

ProgressFn = Callable[[str, int, int], None]
"""``progress(design, done, total)``: ``done`` of ``total`` operations of ``design`` replayed."""


class VirtualClock:
    """A clock the simulator moves by hand; ``clock()`` returns unix seconds."""

    def __init__(self, start: float = EPOCH) -> None:
        self.now = float(start)

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True, slots=True)
class SimConfig:
    """How the simulated store is laid out.

    ``capacity`` is operations per second per partition; ``split_load`` the rate
    at which a partition splits (default: half the capacity);
    ``ops`` overrides the workload's ``rate x duration``.
    """

    nodes: int = 4
    capacity: int = 150
    split_load: int | None = None
    split_load_window: float = 10.0
    split_size: int = 64 << 20
    maintenance_every: float = 5.0
    seed: int = 0
    ops: int | None = None
    keyviz_columns: int = 120
    engine: str = "rocksdb"  # or "memory": same code paths; its range reads copy the whole range


@dataclass(frozen=True, slots=True)
class DesignResult:
    """What one design did under the workload. Shares are fractions of all operations."""

    design: str
    primary_key: str
    note: str
    operations: int
    requests: int
    throttled: int
    throttled_share: float
    steady_throttled_share: float  # over the second half of the run, after the first splits
    partitions: int
    splits: int
    split_events: tuple[dict, ...]
    hot_keys: tuple[str, ...]
    node_shares: tuple[float, ...]
    busiest_node_ratio: float
    partition_shares: tuple[tuple[str, float], ...]  # each partition's share of the last window
    busiest_partition_ratio: float
    fanout_mean: float
    fanout_max: int
    timeline: tuple[dict, ...]
    keyviz: dict = field(default_factory=dict, compare=False, repr=False)
    stats: dict = field(default_factory=dict, compare=False, repr=False)

    def metrics(self) -> dict:
        """The headline numbers (for before/after comparisons)."""
        return {
            "throttled_share": round(self.throttled_share, 4),
            "steady_throttled_share": round(self.steady_throttled_share, 4),
            "busiest_partition_ratio": round(self.busiest_partition_ratio, 2),
            "busiest_node_ratio": round(self.busiest_node_ratio, 2),
            "partitions": self.partitions,
            "fanout_mean": round(self.fanout_mean, 2),
        }

    def to_dict(self, keyviz: bool = False) -> dict:
        d = asdict(self)
        d.pop("stats")
        if not keyviz:
            d.pop("keyviz")
        return d


@dataclass(frozen=True, slots=True)
class SimulationReport:
    workload: str
    description: str
    seed: int
    config: SimConfig
    results: tuple[DesignResult, ...]

    def result(self, design: str) -> DesignResult:
        for r in self.results:
            if r.design == design:
                return r
        raise KeyError(design)

    def to_dict(self, keyviz: bool = False) -> dict:
        return {
            "workload": self.workload, "description": self.description, "seed": self.seed,
            "config": asdict(self.config), "results": [r.to_dict(keyviz) for r in self.results],
        }


# -- running ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SimulationPlan:
    """What a :func:`simulate` call will replay: ``ops`` operations under each design."""

    workload: Workload
    designs: tuple[KeyDesign, ...]
    ops: int

    @property
    def total(self) -> int:
        """Operations over all designs."""
        return self.ops * len(self.designs)


def plan(
    workload: Workload, designs: list[str] | None = None, config: SimConfig | None = None,
    max_ops: int | None = MAX_OPS,
) -> SimulationPlan:
    """The designs and operations :func:`simulate` would replay. Raises
    ``OTSParameterInvalid`` naming the numbers if they exceed ``max_ops`` over all
    designs (``None``: no limit)."""
    config = config or SimConfig()
    if max_ops is not None and (not isinstance(max_ops, int) or isinstance(max_ops, bool) or max_ops < 1):
        raise ParameterInvalid(f"max_ops must be an integer >= 1 or None, got {describe(max_ops)}")
    chosen = tuple(workload.design(n) for n in designs) if designs else workload.designs
    if config.ops is not None:
        ops, source = config.ops, f"ops {config.ops:,}"
    else:
        ops, source = workload.planned_ops, f"rate {workload.rate:g}/s x duration {workload.duration:g} s"
    total = ops * len(chosen)
    if max_ops is not None and total > max_ops:
        raise ParameterInvalid(
            f"simulating workload {workload.name!r} would replay {ops:,} operations per design "
            f"({source}) x {len(chosen)} design(s) = {total:,} operations, over the limit of "
            f"{max_ops:,} (max_ops, about 10-15 minutes of work); replay fewer operations (--ops) "
            f"or designs (--design), or raise the limit deliberately (--max-ops {total})"
        )
    return SimulationPlan(workload, chosen, ops)


def simulate(
    workload: Workload, designs: list[str] | None = None, config: SimConfig | None = None,
    *, progress: ProgressFn | None = None, max_ops: int | None = MAX_OPS,
) -> SimulationReport:
    """Replay ``workload`` under each of ``designs`` (default: all) and report side by side.

    Raises ``OTSParameterInvalid`` before any work if the run would replay more than
    ``max_ops`` operations over all designs (see :func:`plan`). ``progress``, if
    given, is called as ``progress(design, done, total)`` while each design runs."""
    config = config or SimConfig()
    chosen = plan(workload, designs, config, max_ops).designs
    results = tuple(run_design(workload, d, config, progress) for d in chosen)
    return SimulationReport(workload.name, workload.description, config.seed, config, results)


def open_simulated_store(
    design: KeyDesign, config: SimConfig, clock: VirtualClock, path: str | None = None
) -> Database:
    """A store on ``clock`` (RocksDB at ``path``, or memory) holding an empty table ``sim``
    laid out for ``design``."""
    engine = open_engine(path, config.engine if path else "memory")
    db = Database(engine, purge_interval=None, maintenance_interval=None, clock=clock)
    db.create_table(
        TABLE, design.primary_key, max_time_deviation=10**9,
        capacity=config.capacity,
        split_load=config.split_load if config.split_load is not None else max(config.capacity // 2, 1),
        split_load_window=config.split_load_window, split_size=config.split_size,
        merge_window=10**9, stats_retention=10**9,
    )
    return db


class _Run:
    """The state of one design's replay."""

    def __init__(self, workload: Workload, design: KeyDesign, config: SimConfig) -> None:
        self.w, self.design, self.config = workload, design, config
        self.clock = VirtualClock()
        self.tmp = tempfile.TemporaryDirectory(prefix="widetable-sim-") if config.engine == "rocksdb" else None
        self.db = open_simulated_store(design, config, self.clock, self.tmp.name if self.tmp else None)
        self.table = self.db.table(TABLE)
        self.types = [t for _, t in design.primary_key]
        self.payload = {"v": b"x" * workload.value_bytes}
        self.node_of: dict[int, int] = {}
        self.node_load = [0] * config.nodes  # operations each node served, whole run
        self.part_ratios: list[float] = []  # busiest partition / mean, per window
        self.last_window: list[tuple[str, int]] = []  # partition loads of the last window
        self.node_ratios: list[float] = []
        self.seen_events = 0
        self.parts: list = []
        self.last_ops: dict[int, int] = {}
        self.requests = self.throttled = 0
        self.fanouts: list[int] = []
        self.timeline: list[dict] = []
        self.cell: dict[tuple[int, bytes], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
        self.total = total = config.ops if config.ops is not None else workload.planned_ops
        self.duration = total / workload.rate
        self.kv_width = max(self.duration / max(config.keyviz_columns, 1), 1e-9)
        self.refresh()
        self.place({}, {})

    # -- partitions and nodes ------------------------------------------------------

    def refresh(self) -> dict[int, int]:
        """Reload the partition list; return ``{child id: parent id}`` of new splits."""
        d = self.db.describe_table(TABLE)
        parent_of = {}
        for e in d.split_history[self.seen_events:]:
            for child in e.children:
                if e.parents:
                    parent_of[child] = e.parents[0]
        self.seen_events = len(d.split_history)
        self.parts = d.partitions
        return parent_of

    def place(self, window: dict[int, int], parent_of: dict[int, int]) -> None:
        """Balance partitions over nodes by their last-window load (largest first to the
        least-loaded node), as a Bigtable or Tablestore master moves tablets."""
        est = {}
        for p in self.parts:
            if p.id in window:
                est[p.id] = window[p.id]
            else:
                est[p.id] = window.get(parent_of.get(p.id, -1), 0) / 2
        load = [0.0] * self.config.nodes
        order = sorted(range(len(self.parts)), key=lambda i: (-est[self.parts[i].id], i))
        for i in order:
            n = min(range(self.config.nodes), key=lambda k: (load[k], k))
            self.node_of[self.parts[i].id] = n
            load[n] += est[self.parts[i].id]

    def maintain(self, t: float) -> None:
        """Close a window at virtual time ``t``: account its load, run one partition pass, re-place."""
        self.clock.now = EPOCH + t
        stats = self.db.table_stats(TABLE)
        ops_by_id: dict[int, int] = defaultdict(int)
        for b in stats["buckets"]:
            for r in b["partitions"]:
                ops_by_id[r["id"]] += r["reads"] + r["writes"]
        window = {pid: n - self.last_ops.get(pid, 0) for pid, n in ops_by_id.items()}
        self.last_ops = dict(ops_by_id)
        loads = [window.get(p.id, 0) for p in self.parts]
        if sum(loads):
            self.last_window = [(_range_label(p), n) for p, n in zip(self.parts, loads)]
        nodes = [0] * self.config.nodes
        for p, n in zip(self.parts, loads):
            nodes[self.node_of.get(p.id, 0)] += n
        for k, n in enumerate(nodes):
            self.node_load[k] += n
        if sum(loads):
            self.part_ratios.append(max(loads) / (sum(loads) / len(loads)))
            self.node_ratios.append(max(nodes) / (sum(nodes) / len(nodes)))
        self.db.maintain_partitions(TABLE)
        self.place(window, self.refresh())
        self.timeline.append({
            "t": round(t, 3), "partitions": len(self.parts), "throttled": self.throttled,
            "requests": self.requests, "busiest_partition_ratio": round(self.part_ratios[-1], 3)
            if self.part_ratios else 0.0,
        })

    def pieces(self, start: tuple, end: tuple) -> list[tuple[tuple, tuple]]:
        """Cut ``[start, end)`` at partition boundaries (partition-key values)."""
        lo, hi = start[0], end[0]
        rest = len(start) - 1
        if lo is not INF_MIN and lo is not INF_MAX and lo == hi:
            return [(start, end)]
        out = []
        for p in self.parts:
            if p.end is not None and lo is not INF_MIN and p.end <= lo:
                continue
            if p.start is not None and hi is not INF_MAX and (p.start > hi or (p.start == hi and end[1:] == (INF_MIN,) * rest)):
                continue
            s = start if p.start is None or (lo is not INF_MIN and p.start <= lo) else (p.start,) + (INF_MIN,) * rest
            e = end if p.end is None or (hi is not INF_MAX and p.end > hi) else (p.end,) + (INF_MIN,) * rest
            out.append((s, e))
        return out or [(start, end)]

    # -- requests ----------------------------------------------------------------------

    def encode(self, pk: tuple) -> bytes:
        values = []
        for v in pk:
            if v is INF_MIN or v is INF_MAX:
                break
            values.append(v)
        return codec.encode_tuple(values, self.types[: len(values)])

    def note(self, t: float, key: bytes, slot: int, n: int, throttled: bool) -> None:
        c = self.cell[(int(t / self.kv_width), key)]
        c[slot] += 1
        c[2] += n
        if throttled:
            c[3] += 1

    def call(self, fn, *args, **kwargs):
        self.requests += 1
        try:
            return fn(*args, **kwargs), False
        except WidetableError as exc:
            if exc.code not in RETRYABLE:
                raise
            self.throttled += 1
            return None, True

    def execute(self, op: Op) -> None:
        size = self.w.value_bytes
        if op.kind == "write":
            pk = primary_key(self.design, op.record)
            _, thr = self.call(self.table.put_row, pk, self.payload)
            self.note(op.t, self.encode(pk), 1, size, thr)
        elif op.kind == "read":
            pk = primary_key(self.design, op.record)
            _, thr = self.call(self.table.get_row, pk)
            self.note(op.t, self.encode(pk), 0, size, thr)
        else:
            fan = 0
            for start, end in key_ranges(self.design, op):
                if start == end:  # every key column fixed: a point read
                    fan += 1
                    _, thr = self.call(self.table.get_row, start)
                    self.note(op.t, self.encode(start), 0, size, thr)
                    continue
                for s, e in self.pieces(start, end):
                    fan += 1
                    res, thr = self.call(self.table.get_range, s, e, limit=op.limit)
                    rows = len(res.rows) if res is not None else 0
                    self.note(op.t, self.encode(s), 0, rows * size, thr)
            self.fanouts.append(fan)


def run_design(
    workload: Workload, design: KeyDesign, config: SimConfig, progress: ProgressFn | None = None
) -> DesignResult:
    """Replay ``workload`` on a fresh store keyed by ``design``.

    ``progress(design name, done, total)``, if given, is called once with 0 before the
    first operation, every :data:`PROGRESS_EVERY` operations, and with ``total`` after
    the last: increasing counts that end at the total."""
    run = _Run(workload, design, config)
    gen = Generator(workload, config.seed, EPOCH)
    every = config.maintenance_every
    next_pass = every
    ops = 0
    total = run.total
    report = progress is not None
    next_report = PROGRESS_EVERY if report else -1
    try:
        if report:
            progress(design.name, 0, total)
        for op in gen.ops(config.ops):
            while op.t >= next_pass:
                run.maintain(next_pass)
                next_pass += every
            run.clock.now = EPOCH + op.t
            run.execute(op)
            ops += 1
            if ops == next_report:
                progress(design.name, ops, total)
                next_report += PROGRESS_EVERY
        if report and ops % PROGRESS_EVERY:
            progress(design.name, ops, total)
        run.maintain(max(next_pass, run.duration))
        return _result(run, ops)
    finally:
        run.db.close()
        if run.tmp is not None:
            run.tmp.cleanup()


def _label(value: object) -> str:
    return "-inf" if value is None else str(value)


def _range_label(p) -> str:
    return f"[{_label(p.start)}, {_label(p.end) if p.end is not None else '+inf'})"


def _result(run: _Run, ops: int) -> DesignResult:
    stats = run.db.table_stats(TABLE)
    total = sum(n for _, n in run.last_window) or 1
    shares = tuple((label, round(n / total, 4)) for label, n in run.last_window)
    node_total = sum(run.node_load) or 1
    history = run.db.describe_table(TABLE).split_history
    events = tuple(
        {"t": round(e.time - EPOCH, 3), "kind": e.kind, "reason": e.reason, "key": _label(e.key)}
        for e in history if e.kind in ("split", "merge")
    )
    hot = tuple(sorted({_label(e.key) for e in history if e.kind == "hot_key"}))
    fans = run.fanouts
    half = [e for e in run.timeline if e["t"] <= run.duration / 2]
    mid = half[-1] if half else {"throttled": 0, "requests": 0}
    steady_req = run.requests - mid["requests"]
    steady = (run.throttled - mid["throttled"]) / steady_req if steady_req else 0.0

    def mean(xs: list[float]) -> float:
        return round(sum(xs) / len(xs), 4) if xs else 0.0

    return DesignResult(
        design=run.design.name,
        primary_key=", ".join(f"{c.name}" + (f"={c.transform}({c.source})" if c.transform else "")
                              for c in run.design.columns),
        note=run.design.note,
        operations=ops,
        requests=run.requests,
        throttled=run.throttled,
        throttled_share=round(run.throttled / run.requests, 6) if run.requests else 0.0,
        steady_throttled_share=round(steady, 6),
        partitions=len(run.parts),
        splits=sum(1 for e in events if e["kind"] == "split"),
        split_events=events,
        hot_keys=hot,
        node_shares=tuple(round(n / node_total, 4) for n in run.node_load),
        busiest_node_ratio=mean(run.node_ratios),
        partition_shares=shares,
        busiest_partition_ratio=mean(run.part_ratios),
        fanout_mean=mean([float(f) for f in fans]),
        fanout_max=max(fans) if fans else 0,
        timeline=tuple(run.timeline),
        keyviz=_keyviz_data(run),
        stats=stats,
    )


def _keyviz_data(run: _Run) -> dict:
    """Per-key, per-time-column counters: the fine-grained Key Visualizer input of a run."""
    cells = [
        [col, key.hex(), *vals] for (col, key), vals in sorted(run.cell.items())
    ]
    return {
        "source": "simulation",
        "design": run.design.name,
        "types": list(run.types),
        "columns": max(run.config.keyviz_columns, 1),
        "column_seconds": run.kv_width,
        "metrics": ["reads", "writes", "bytes", "throttled"],
        "cells": cells,  # [time column, key hex, reads, writes, bytes, throttled]
    }
