"""Replays pre-generated op lists against one system and measures them honestly.

* The same op list (same keys, same values, same order) goes to every system.
* A warm-up slice at the head of each list runs untimed.
* Each timed op is bracketed by ``time.perf_counter_ns`` for latency; throughput is
  timed ops over the wall time of the whole timed loop, loop overhead included.
* Systems run one after another; between two, the finished one's files are removed
  and ``os.sync()`` flushes dirty pages, so its writeback is not timed in the next.
* ``gc.collect()`` runs before each phase, never inside one, and the caller
  ``gc.freeze()``s the pre-generated ops so that collections during a phase do not
  walk the harness's own data.
* Peak memory: this process's peak RSS during the phase (``VmHWM``, reset at phase
  start) minus its RSS before the system started, plus the server's PSS at the end
  of the phase for systems that live in other processes.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import memory
from .systems.base import Row, System, TableSpec
from .ycsb import INSERT, READ, RMW, SCAN, UPDATE, Op

LOAD = 5  # op code of one load batch: (LOAD, "", rows)
LOAD_BATCH = 200


@dataclass(slots=True)
class PhaseResult:
    """One system on one workload. ``throughput`` is in ``unit`` (ops/s, rows/s or values/s)."""

    suite: str
    workload: str
    system: str
    ops: int
    rows: int
    seconds: float
    throughput: float
    unit: str
    p50_us: float
    p99_us: float
    latency_of: str
    peak_rss_mb: float | None
    server_mb: float | None
    misses: int
    # CPU per timed op (per batch for a load), in µs: this process's, and the server's
    # processes' (None for a system without one). A busy-polling client or server
    # spends CPU waiting: these show what its latency costs.
    client_cpu_us: float | None = None
    server_cpu_us: float | None = None
    round: int = 0  # which pass over the systems measured it (``--repeat``)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def batches(rows: Sequence[Row], size: int = LOAD_BATCH) -> list[Op]:
    return [(LOAD, "", rows[i : i + size]) for i in range(0, len(rows), size)]


def _execute(system: System, ops: Sequence[Op], lat: list[int] | None) -> tuple[int, int]:
    """Run ``ops``; append per-op nanoseconds to ``lat`` if given. Returns (rows, misses)."""
    read, update, put, scan, rmw, load = (
        system.read,
        system.update,
        system.put,
        system.scan,
        system.rmw,
        system.load,
    )
    perf = time.perf_counter_ns
    record = lat.append if lat is not None else None
    rows = misses = 0
    for code, key, arg in ops:
        if code == READ:
            t0 = perf()
            got = read(key)
            t1 = perf()
            if got is None:
                misses += 1
            rows += 1
        elif code == SCAN:
            t0 = perf()
            n = scan(key, arg)
            t1 = perf()
            rows += n
        elif code == UPDATE:
            t0 = perf()
            update(key, arg)
            t1 = perf()
            rows += 1
        elif code == INSERT:
            t0 = perf()
            put(key, arg)
            t1 = perf()
            rows += 1
        elif code == RMW:
            t0 = perf()
            rmw(key, arg)
            t1 = perf()
            rows += 1
        else:
            t0 = perf()
            load(arg)
            t1 = perf()
            rows += len(arg)
        if record is not None:
            record(t1 - t0)
    return rows, misses


def _percentile(sorted_ns: list[int], q: float) -> float:
    if not sorted_ns:
        return 0.0
    i = min(len(sorted_ns) - 1, max(0, round(q * (len(sorted_ns) - 1))))
    return sorted_ns[i] / 1000.0


def run_phase(
    system: System,
    suite: str,
    workload: str,
    ops: Sequence[Op],
    *,
    warmup: float,
    baseline_kib: int | None,
    unit: str = "ops/s",
) -> PhaseResult:
    """Run ``ops`` on the open table of ``system``: the first ``warmup`` fraction untimed."""
    n_warm = min(int(len(ops) * warmup), max(len(ops) - 1, 0))
    if n_warm:
        _execute(system, ops[:n_warm], None)
    timed = ops[n_warm:]
    lat: list[int] = []
    gc.collect()
    memory.reset_peak()
    pid = system.server_pid()
    server_cpu = None if pid is None else memory.tree_cpu_seconds(pid)
    cpu = time.process_time()
    start = time.perf_counter_ns()
    rows, misses = _execute(system, timed, lat)
    seconds = max(time.perf_counter_ns() - start, 1) / 1e9
    cpu = time.process_time() - cpu
    if server_cpu is not None:
        after = memory.tree_cpu_seconds(pid)  # type: ignore[arg-type]
        server_cpu = None if after is None else after - server_cpu
    peak = memory.peak_rss_kib()
    lat.sort()
    count = rows if unit in ("rows/s", "values/s") else len(timed)
    return PhaseResult(
        suite=suite,
        workload=workload,
        system=system.name,
        ops=len(timed),
        rows=rows,
        seconds=seconds,
        throughput=count / seconds,
        unit=unit,
        p50_us=_percentile(lat, 0.50),
        p99_us=_percentile(lat, 0.99),
        latency_of=f"batch of {LOAD_BATCH} rows" if ops and ops[0][0] == LOAD else "op",
        peak_rss_mb=None if peak is None or baseline_kib is None else (peak - baseline_kib) / 1024,
        server_mb=system.server_memory_mb(),
        misses=misses,
        client_cpu_us=cpu / max(len(timed), 1) * 1e6,
        server_cpu_us=None if server_cpu is None else server_cpu / max(len(timed), 1) * 1e6,
    )


def untimed_load(system: System, rows: Sequence[Row]) -> None:
    _execute(system, batches(rows), None)


def open_fresh(system: System, workdir: Path, spec: TableSpec) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    system.open(workdir, spec)
