"""The two suites: what is generated once, and the order phases run in on each system."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import bigtable, ycsb
from .driver import PhaseResult, batches, open_fresh, run_phase, untimed_load
from .systems.base import System, TableSpec

YCSB_SPEC = TableSpec("usertable", "ycsb_key", ycsb.FIELDS)

Report = Callable[[PhaseResult], None]


@dataclass(slots=True)
class Plan:
    """Everything generated before any system runs, replayed identically on each."""

    load_rows: list[ycsb.Row]
    ycsb_ops: list[tuple[str, list[ycsb.Op]]]
    bigtable_plan: bigtable.Plan | None
    bigtable_experiments: list[str]
    warmup: float


def make_plan(
    records: int,
    operations: int,
    ycsb_workloads: list[str],
    bigtable_experiments: list[str],
    seed: int,
    warmup: float,
) -> Plan:
    """Generate the load rows and every workload's ops.

    YCSB workloads run in YCSB's recommended order on one loaded table; each one
    starts from the record count left by the inserts of those before it.
    """
    load_rows = ycsb.load_rows(records, seed) if ycsb_workloads else []
    ycsb_ops: list[tuple[str, list[ycsb.Op]]] = []
    record_count = records
    for name in [w for w in ycsb.RUN_ORDER if w in ycsb_workloads]:
        ops = ycsb.generate_ops(ycsb.WORKLOADS[name], record_count, operations, seed)
        record_count += ycsb.count_inserts(ops)
        ycsb_ops.append((name, ops))
    bt = bigtable.make_plan(records, operations, seed) if bigtable_experiments else None
    return Plan(load_rows, ycsb_ops, bt, bigtable_experiments, warmup)


def run_ycsb(
    system: System, plan: Plan, workdir: Path, baseline: int | None, report: Report
) -> None:
    """Load phase, then each workload, on one table."""
    if not plan.ycsb_ops:
        return
    open_fresh(system, workdir / "ycsb", YCSB_SPEC)
    try:
        report(
            run_phase(
                system,
                "ycsb",
                "load",
                batches(plan.load_rows),
                warmup=plan.warmup,
                baseline_kib=baseline,
                unit="rows/s",
            )
        )
        for name, ops in plan.ycsb_ops:
            report(run_phase(system, "ycsb", name, ops, warmup=plan.warmup, baseline_kib=baseline))
    finally:
        system.close()


def run_bigtable(
    system: System, plan: Plan, workdir: Path, baseline: int | None, report: Report
) -> None:
    """The three tables of the Bigtable experiments: main (R rows), random-writes, in-memory."""
    bt, wanted = plan.bigtable_plan, plan.bigtable_experiments
    if bt is None:
        return

    def phase(name: str) -> None:
        report(
            run_phase(
                system,
                "bigtable",
                name,
                bt.ops[name],
                warmup=plan.warmup,
                baseline_kib=baseline,
                unit="values/s",
            )
        )

    main_reads = [e for e in ("seq-reads", "random-reads", "scans") if e in wanted]
    if "seq-writes" in wanted or main_reads:
        open_fresh(system, workdir / "bigtable-main", bigtable.SPEC)
        try:
            if "seq-writes" in wanted:
                phase("seq-writes")
            else:
                untimed_load(system, bt.main_rows)
            for name in main_reads:
                phase(name)
        finally:
            system.close()
    if "random-writes" in wanted:
        open_fresh(system, workdir / "bigtable-random", bigtable.SPEC)
        try:
            phase("random-writes")
        finally:
            system.close()
    if "random-reads-mem" in wanted:
        open_fresh(system, workdir / "bigtable-mem", bigtable.SPEC)
        try:
            untimed_load(system, bt.mem_rows)
            for key, _ in bt.mem_rows:  # bring the whole small set into caches
                system.read(key)
            phase("random-reads-mem")
        finally:
            system.close()
