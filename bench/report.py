"""Terminal tables, targets, the JSON file and the PNG chart of one run.

A run of several passes (``--repeat``) is summed up per system and workload by
``medians``, and each ratio is the median of the passes' ratios (a system's
figure in one pass against its peer's in the same pass), with their range.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, replace
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
    ratio: float | None  # None when either side did not run; the median over passes
    subject: str = SUBJECT  # whose throughput is divided by the peer's
    spread: tuple[float, float] | None = None  # lowest and highest ratio, over 2+ passes

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
    """One result per (suite, workload, system): pass ``medians(results)``."""
    return {(r.suite, r.workload, r.system): r for r in results}


def medians(results: list[PhaseResult]) -> list[PhaseResult]:
    """One result per (suite, workload, system), in first-seen order: the median over its
    passes of throughput, time and latencies; the largest memory and misses. A system
    measured once keeps its result as it is; a summary of several has ``round`` -1."""
    groups: dict[tuple[str, str, str], list[PhaseResult]] = {}
    for r in results:
        groups.setdefault((r.suite, r.workload, r.system), []).append(r)
    out = []
    for rs in groups.values():
        if len(rs) == 1:
            out.append(rs[0])
            continue
        med = statistics.median
        memory = [r.peak_rss_mb for r in rs if r.peak_rss_mb is not None]
        server = [r.server_mb for r in rs if r.server_mb is not None]
        client_cpu = [r.client_cpu_us for r in rs if r.client_cpu_us is not None]
        server_cpu = [r.server_cpu_us for r in rs if r.server_cpu_us is not None]
        out.append(replace(
            rs[0], seconds=med(r.seconds for r in rs), throughput=med(r.throughput for r in rs),
            p50_us=med(r.p50_us for r in rs), p99_us=med(r.p99_us for r in rs),
            peak_rss_mb=max(memory) if memory else None, server_mb=max(server) if server else None,
            misses=max(r.misses for r in rs), round=-1,
            client_cpu_us=med(client_cpu) if client_cpu else None,
            server_cpu_us=med(server_cpu) if server_cpu else None,
        ))
    return out


def pass_ratios(
    results: list[PhaseResult], suite: str, workload: str, peer: str, subject: str = SUBJECT
) -> list[float]:
    """``subject`` throughput / peer throughput on one workload, one per pass where both ran."""
    by_pass = {(r.round, r.suite, r.workload, r.system): r for r in results}
    out = []
    for n in sorted({r.round for r in results}):
        ours, theirs = by_pass.get((n, suite, workload, subject)), by_pass.get((n, suite, workload, peer))
        if ours is not None and theirs is not None and theirs.throughput > 0:
            out.append(ours.throughput / theirs.throughput)
    return out


def ratio(
    results: list[PhaseResult], suite: str, workload: str, peer: str, subject: str = SUBJECT
) -> float | None:
    """The median of :func:`pass_ratios` (the ratio itself, for one pass), or None if
    either side never ran."""
    ratios = pass_ratios(results, suite, workload, peer, subject)
    return statistics.median(ratios) if ratios else None


def ratio_spread(
    results: list[PhaseResult], suite: str, workload: str, peer: str, subject: str = SUBJECT
) -> tuple[float, float] | None:
    """The lowest and highest of :func:`pass_ratios`, when there are two or more."""
    ratios = pass_ratios(results, suite, workload, peer, subject)
    return (min(ratios), max(ratios)) if len(ratios) > 1 else None


def _target(peer: str, workload: str, minimum: float, strict: bool, results: list[PhaseResult],
            subject: str = SUBJECT) -> Target:
    return Target(peer, workload, minimum, strict, ratio(results, "ycsb", workload, peer, subject),
                  subject, ratio_spread(results, "ycsb", workload, peer, subject))


def targets(results: list[PhaseResult]) -> list[Target]:
    """The targets of bench/README.md, over the YCSB workloads that ran."""
    ran = [w for w in YCSB_ORDER if any(r.suite == "ycsb" and r.workload == w for r in results)]
    out = []
    if any(r.system == SUBJECT for r in results):
        for peer in ("sqlite", "postgresql"):
            out += [_target(peer, w, 1.0, True, results) for w in ran]
    # Through the server too, against PostgreSQL over its socket, once the server ran.
    if any(r.system == SERVER for r in results):
        out += [_target("postgresql", w, 1.0, True, results, SERVER) for w in ran]
    for w in ("C", "load"):
        if w in ran and any(r.system == SUBJECT for r in results):
            out.append(_target("rocksdict", w, 0.5, False, results))
    return out


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}"


def _fmt_ratio(value: float | None, spread: tuple[float, float] | None, unit: str = "") -> str:
    """``1.07x``, or ``1.07x (0.95-1.19)`` with the range over passes; ``n/a`` without."""
    if value is None:
        return "n/a"
    text = _fmt(value, 2) + unit
    return text if spread is None else f"{text} ({spread[0]:.2f}-{spread[1]:.2f})"


def _cpu(r: PhaseResult) -> str:
    """CPU per op: this process's, plus the server's where it has one (``12+20``)."""
    if r.client_cpu_us is None:
        return "n/a"
    if r.server_cpu_us is None:
        return f"{r.client_cpu_us:.0f}"
    return f"{r.client_cpu_us:.0f}+{r.server_cpu_us:.0f}"


def _results_table(title: str, rows: list[PhaseResult], order: tuple[str, ...]) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("workload", "system", "throughput", "p50 µs", "p99 µs", "CPU µs/op",
                "peak RSS MB", "server MB"):
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
            _cpu(r),
            _fmt(r.peak_rss_mb),
            _fmt(r.server_mb),
        )
    return table


def _ratio_table(results: list[PhaseResult], suite: str, order: tuple[str, ...],
                 subject: str = SUBJECT) -> Table | None:
    """``subject`` ÷ each peer, per workload; None if ``subject`` did not run in ``suite``.
    The server's table leaves out the embedded store, whose table has the server."""
    ran = {r.system for r in results if r.suite == suite}
    if subject not in ran:
        return None
    peers = sorted(ran - {SUBJECT, SERVER} if subject == SERVER else ran - {subject})
    workloads = [w for w in order if any(r.suite == suite and r.workload == w for r in results)]
    if not peers or not workloads:
        return None
    several = len({r.round for r in results}) > 1
    title = f"{suite}: {subject} ÷ peer throughput (>1: {subject} faster)"
    if several:
        title += "; median of the passes' ratios (lowest-highest)"
    table = Table(title=title, title_justify="left")
    table.add_column("workload")
    for p in peers:
        table.add_column(p, justify="right")
    for w in workloads:
        table.add_row(w, *[_fmt_ratio(ratio(results, suite, w, p, subject),
                                      ratio_spread(results, suite, w, p, subject), "x")
                           for p in peers])
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
    summary = medians(results)
    passes = len({r.round for r in results})
    of = f", median of {passes} passes" if passes > 1 else ""
    ycsb_rows = [r for r in summary if r.suite == "ycsb"]
    bt_rows = [r for r in summary if r.suite == "bigtable"]
    if ycsb_rows:
        console.print(_results_table(
            f"YCSB (load: rows/s, latency per 200-row batch{of})", ycsb_rows, YCSB_ORDER))
        for subject in (SUBJECT, SERVER):
            t = _ratio_table(results, "ycsb", YCSB_ORDER, subject)
            if t is not None:
                console.print(t)
    if bt_rows:
        title = "Bigtable experiments" + (f" (median of {passes} passes)" if of else "")
        console.print(_results_table(title, bt_rows, bigtable.EXPERIMENTS))
        console.print(_bigtable_table(summary))
        for subject in (SUBJECT, SERVER):
            t = _ratio_table(results, "bigtable", bigtable.EXPERIMENTS, subject)
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
                _fmt_ratio(g.ratio, g.spread),
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
    systems = sorted({r.system for r in results} - {SUBJECT})
    server_peers = [s for s in systems if s != SERVER]
    workloads = {suite: list(dict.fromkeys(r.workload for r in results if r.suite == suite))
                 for suite in ("ycsb", "bigtable")}
    doc = {
        "meta": meta,
        "results": [r.to_json() for r in results],  # every pass (``round``)
        "medians": [r.to_json() for r in medians(results)],
        "ratios": {
            suite: {w: {p: ratio(results, suite, w, p) for p in systems} for w in names}
            for suite, names in workloads.items()
        },
        "pass_ratios": {
            suite: {w: {p: pass_ratios(results, suite, w, p) for p in systems} for w in names}
            for suite, names in workloads.items()
        },
        # widetable-server ÷ each peer but the embedded store (None: the server did not run)
        "server_ratios": {
            suite: {w: {p: ratio(results, suite, w, p, SERVER) for p in server_peers} for w in names}
            for suite, names in workloads.items()
        } if SERVER in systems else None,
        "bigtable_2006_hardware": bigtable.PAPER_2006,
        "targets": [
            {
                "target": g.describe(),
                "peer": g.peer,
                "workload": g.workload,
                "minimum": g.minimum,
                "ratio": g.ratio,
                "ratio_range": list(g.spread) if g.spread is not None else None,
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

    results = medians(results)
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
