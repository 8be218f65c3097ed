"""Terminal tables, targets, the JSON file and the PNG chart of one run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from . import bigtable, ycsb
from .driver import PhaseResult

SUBJECT = "widetable"
SERVER = "widetable-server"
YCSB_ORDER = ("load", *ycsb.RUN_ORDER)


@dataclass(frozen=True, slots=True)
class Target:
    """A goal from bench/README.md: widetable / peer throughput on a workload >= ``minimum``."""

    peer: str
    workload: str
    minimum: float
    strict: bool  # True: must be ahead (ratio > minimum), not merely equal
    ratio: float | None  # None when either side did not run
    subject: str = SUBJECT  # whose throughput is divided by the peer's

    @property
    def status(self) -> str:
        if self.ratio is None:
            return "n/a"
        ok = self.ratio > self.minimum if self.strict else self.ratio >= self.minimum
        return "reached" if ok else "missed"

    def describe(self) -> str:
        who = "" if self.subject == SUBJECT else f"{self.subject} "
        if self.strict:
            return f"{who}ahead of {self.peer} on {self.workload}"
        return f"{who}>= {self.minimum:g} x {self.peer} on {self.workload}"


def _index(results: list[PhaseResult]) -> dict[tuple[str, str, str], PhaseResult]:
    return {(r.suite, r.workload, r.system): r for r in results}


def ratio(
    results: list[PhaseResult], suite: str, workload: str, peer: str, subject: str = SUBJECT
) -> float | None:
    """``subject`` throughput / peer throughput on one workload, or None if either is missing."""
    idx = _index(results)
    ours, theirs = idx.get((suite, workload, subject)), idx.get((suite, workload, peer))
    if ours is None or theirs is None or theirs.throughput <= 0:
        return None
    return ours.throughput / theirs.throughput


def targets(results: list[PhaseResult]) -> list[Target]:
    """The targets of bench/README.md, over the YCSB workloads that ran."""
    ran = [w for w in YCSB_ORDER if any(r.suite == "ycsb" and r.workload == w for r in results)]
    out = []
    for peer in ("sqlite", "postgresql"):
        out += [Target(peer, w, 1.0, True, ratio(results, "ycsb", w, peer)) for w in ran]
    # Through the server too, against PostgreSQL over its socket, once the server ran.
    if any(r.system == SERVER for r in results):
        out += [
            Target("postgresql", w, 1.0, True, ratio(results, "ycsb", w, "postgresql", SERVER), SERVER)
            for w in ran
        ]
    for w in ("C", "load"):
        if w in ran:
            out.append(Target("rocksdict", w, 0.5, False, ratio(results, "ycsb", w, "rocksdict")))
    return out


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}"


def _results_table(title: str, rows: list[PhaseResult], order: tuple[str, ...]) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("workload", "system", "throughput", "p50 µs", "p99 µs", "peak RSS MB", "server MB"):
        table.add_column(col, justify="left" if col in ("workload", "system") else "right")
    rank = {w: i for i, w in enumerate(order)}
    for r in sorted(rows, key=lambda r: rank.get(r.workload, 99)):
        flag = f" [red]({r.misses} missing)[/red]" if r.misses else ""
        table.add_row(
            r.workload,
            r.system,
            f"{r.throughput:,.0f} {r.unit}{flag}",
            _fmt(r.p50_us, 1),
            _fmt(r.p99_us, 1),
            _fmt(r.peak_rss_mb),
            _fmt(r.server_mb),
        )
    return table


def _ratio_table(results: list[PhaseResult], suite: str, order: tuple[str, ...]) -> Table | None:
    peers = sorted({r.system for r in results if r.suite == suite} - {SUBJECT})
    workloads = [w for w in order if any(r.suite == suite and r.workload == w for r in results)]
    if not peers or not workloads:
        return None
    table = Table(
        title=f"{suite}: widetable ÷ peer throughput (>1: widetable faster)", title_justify="left"
    )
    table.add_column("workload")
    for p in peers:
        table.add_column(p, justify="right")
    for w in workloads:
        table.add_row(w, *[_fmt(ratio(results, suite, w, p), 2) + "x" for p in peers])
    return table


def _bigtable_table(results: list[PhaseResult]) -> Table:
    systems = [s for s in dict.fromkeys(r.system for r in results if r.suite == "bigtable")]
    table = Table(
        title="Bigtable (OSDI 2006, Fig. 6), values/s, 1 tablet server", title_justify="left"
    )
    table.add_column("experiment")
    table.add_column("2006 hardware", justify="right")
    for s in systems:
        table.add_column(s, justify="right")
    idx = _index(results)
    for exp in bigtable.EXPERIMENTS:
        cells = [idx.get(("bigtable", exp, s)) for s in systems]
        if any(cells):
            table.add_row(
                exp,
                f"{bigtable.PAPER_2006[exp]:,}",
                *[_fmt(c.throughput if c else None) for c in cells],
            )
    return table


def print_report(
    console: Console, results: list[PhaseResult], skipped: dict[str, str]
) -> list[Target]:
    ycsb_rows = [r for r in results if r.suite == "ycsb"]
    bt_rows = [r for r in results if r.suite == "bigtable"]
    if ycsb_rows:
        console.print(
            _results_table("YCSB (load: rows/s, latency per 200-row batch)", ycsb_rows, YCSB_ORDER)
        )
        t = _ratio_table(results, "ycsb", YCSB_ORDER)
        if t is not None:
            console.print(t)
    if bt_rows:
        console.print(_results_table("Bigtable experiments", bt_rows, bigtable.EXPERIMENTS))
        console.print(_bigtable_table(results))
        t = _ratio_table(results, "bigtable", bigtable.EXPERIMENTS)
        if t is not None:
            console.print(t)
    for name, why in skipped.items():
        if why.startswith("failed:"):
            console.print(f"[red]{name}: {why}[/red] (any figures above for it are partial)")
        else:
            console.print(f"[yellow]{name}: skipped[/yellow] - {why}")
    goals = targets(results)
    if goals:
        table = Table(title="Targets (bench/README.md)", title_justify="left")
        for col in ("target", "ratio", "status"):
            table.add_column(col)
        colour = {"reached": "green", "missed": "red", "n/a": "yellow"}
        for g in goals:
            table.add_row(
                g.describe(),
                _fmt(g.ratio, 2),
                f"[{colour[g.status]}]{g.status}[/{colour[g.status]}]",
            )
        console.print(table)
    return goals


def write_json(
    path: Path,
    meta: dict[str, Any],
    results: list[PhaseResult],
    skipped: dict[str, str],
    goals: list[Target],
) -> None:
    doc = {
        "meta": meta,
        "results": [r.to_json() for r in results],
        "ratios": {
            suite: {
                w: {
                    p: ratio(results, suite, w, p)
                    for p in sorted({r.system for r in results})
                    if p != SUBJECT
                }
                for w in dict.fromkeys(r.workload for r in results if r.suite == suite)
            }
            for suite in ("ycsb", "bigtable")
        },
        "bigtable_2006_hardware": bigtable.PAPER_2006,
        "targets": [
            {
                "target": g.describe(),
                "peer": g.peer,
                "workload": g.workload,
                "minimum": g.minimum,
                "ratio": g.ratio,
                "status": g.status,
            }
            for g in goals
        ],
        "skipped": skipped,
    }
    path.write_text(json.dumps(doc, indent=2) + "\n")


def write_png(path: Path, results: list[PhaseResult]) -> None:
    """Grouped bars of throughput (log scale): YCSB on top, Bigtable with 2006 below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    suites = [s for s in ("ycsb", "bigtable") if any(r.suite == s for r in results)]
    fig, axes = plt.subplots(
        len(suites) or 1, 1, figsize=(12, 4.5 * max(len(suites), 1)), squeeze=False
    )
    idx = _index(results)
    for ax, suite in zip(axes[:, 0], suites):
        order = YCSB_ORDER if suite == "ycsb" else bigtable.EXPERIMENTS
        workloads = [w for w in order if any(r.suite == suite and r.workload == w for r in results)]
        systems = list(dict.fromkeys(r.system for r in results if r.suite == suite))
        series = {
            s: [idx[(suite, w, s)].throughput if (suite, w, s) in idx else 0.0 for w in workloads]
            for s in systems
        }
        if suite == "bigtable":
            series["2006 hardware"] = [float(bigtable.PAPER_2006[w]) for w in workloads]
        width = 0.8 / max(len(series), 1)
        for i, (name, values) in enumerate(series.items()):
            xs = [x + i * width for x in range(len(workloads))]
            ax.bar(xs, values, width, label=name)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(workloads))], workloads)
        ax.set_yscale("log")
        ax.set_ylabel("ops/s (load: rows/s)" if suite == "ycsb" else "values/s")
        ax.set_title("YCSB core workloads" if suite == "ycsb" else "Bigtable OSDI 2006 Fig. 6")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
