"""advise, simulate, keyviz: the key-design tools of ``widetable.design`` on the command line."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.panel import Panel
from rich.table import Table as RichTable
from rich.text import Text

from ..errors import ParameterInvalid, describe
from . import render
from .app import DataOpt, command, open_db
from .literals import CliError
from .render import console

DEFAULT_MAX_OPS = 2_000_000  # widetable.design.simulate.MAX_OPS (a test keeps them equal)
MaxOpsOpt = Annotated[int, typer.Option(
    "--max-ops", min=1,
    help="Refuse a run that would replay more operations than this over all designs "
         "(about 10-15 minutes of work); raise it deliberately for a bigger run.")]
ProgressOpt = Annotated[bool | None, typer.Option(
    "--progress/--no-progress", show_default=False,
    help="Show a progress bar per design on stderr (default: when stderr is a terminal).")]

_SEV_STYLE = {"critical": "bold white on red", "warning": "bold black on yellow", "info": "bold white on blue"}


def _advice_panel(advice) -> None:
    pk = ", ".join(f"{n} {t}" for n, t in advice.primary_key)
    if not advice.findings:
        console.print(Panel(Text(f"No findings: ({pk}) follows the design rules on "
                                 f"{advice.sampled_keys} sampled keys.", style="green"),
                            title=f"advise {advice.table}", border_style="green"))
        return
    console.print(Text(f"advise {advice.table}: primary key ({pk}), {advice.sampled_keys} sampled keys, "
                       f"{len(advice.findings)} finding(s)", style="bold"))
    for f in advice.findings:
        body = RichTable.grid(padding=(0, 1))
        body.add_column(style="dim", no_wrap=True)
        body.add_column()
        body.add_row("evidence", Text(", ".join(f"{k}={v}" for k, v in f.evidence.items())))
        body.add_row("rule", Text(f.seed_rule))
        body.add_row("fix", Text(f.fix, style="green"))
        if f.simulation is not None:
            s = f.simulation
            sim = RichTable(box=box.SIMPLE_HEAD, show_edge=False)
            sim.add_column("simulated", style="dim")
            sim.add_column(f"now: {s.before}")
            sim.add_column(f"fix: {s.after}", style="green")
            for k in s.before_metrics:
                sim.add_row(k, str(s.before_metrics[k]), str(s.after_metrics[k]))
            body.add_row("simulation", sim)
        title = Text.assemble((f" {f.severity.upper()} ", _SEV_STYLE[f.severity]), " ", (f.rule, "bold"))
        console.print(Panel(body, title=title, title_align="left", subtitle=f.title, subtitle_align="left",
                            border_style="red" if f.severity == "critical" else "yellow" if f.severity == "warning" else "blue"))


@command("advise")
def advise_cmd(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(help="Table to review.")],
    keys: Annotated[str | None, typer.Option("--keys", help="Sample keys from a file (JSON lines of key arrays) instead of the table.")] = None,
    range_scans: Annotated[bool, typer.Option("--range-scans/--no-range-scans", help="The workload reads ranges in first-key-column order.")] = False,
    expected_gb: Annotated[float | None, typer.Option("--expected-gb", help="Size the table will reach, in GB.")] = None,
    simulate: Annotated[bool, typer.Option("--simulate/--no-simulate", help="Simulate the fixes that change the key.")] = True,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the simulations.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON.")] = False,
    data: DataOpt = None,
) -> None:
    """Review a table's key design: findings with evidence, the seed rule, and a simulated fix."""
    from ..design.advisor import advise, read_keys_file

    if expected_gb is not None and not (math.isfinite(expected_gb) and expected_gb >= 0):
        raise ParameterInvalid(f"--expected-gb must be a finite number >= 0, got {describe(expected_gb)}")
    sample = read_keys_file(keys) if keys else None
    expected = int(expected_gb * (1 << 30)) if expected_gb else None
    with open_db(ctx, data) as db:
        result = advise(db, table, sample, range_scans or None, expected, simulate, seed)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2, default=str))
    else:
        _advice_panel(result)


def _report_table(report) -> RichTable:
    t = RichTable(title=f"simulate {report.workload} (seed {report.seed}, {report.config.nodes} nodes, "
                  f"capacity {report.config.capacity}/s per partition)", box=box.ROUNDED)
    t.add_column("metric", style="dim")
    for r in report.results:
        t.add_column(r.design, justify="right")
    best = {"throttled": min, "steady throttled": min, "busiest partition / mean": min,
            "busiest node / mean": min, "read fan-out (mean)": min}
    rows = [
        ("primary key", [r.primary_key for r in report.results]),
        ("operations", [r.operations for r in report.results]),
        ("requests", [r.requests for r in report.results]),
        ("throttled", [r.throttled_share for r in report.results]),
        ("steady throttled", [r.steady_throttled_share for r in report.results]),
        ("busiest partition / mean", [r.busiest_partition_ratio for r in report.results]),
        ("busiest node / mean", [r.busiest_node_ratio for r in report.results]),
        ("node load shares", [" ".join(f"{s:.0%}" for s in r.node_shares) for r in report.results]),
        ("partitions at end", [r.partitions for r in report.results]),
        ("splits", [r.splits for r in report.results]),
        ("hot keys (unsplittable)", [", ".join(r.hot_keys[:3]) or "-" for r in report.results]),
        ("read fan-out (mean)", [r.fanout_mean for r in report.results]),
        ("read fan-out (max)", [r.fanout_max for r in report.results]),
    ]
    for name, values in rows:
        pick = best.get(name)
        target = pick(values) if pick and len(values) > 1 else None
        cells = []
        for v in values:
            text = f"{v:.1%}" if name.endswith("throttled") else f"{v:.2f}" if isinstance(v, float) else str(v)
            cells.append(Text(text, style="bold green" if target is not None and v == target else ""))
        t.add_row(name, *cells)
    return t


class _Tracker:
    """Follows a simulation for the progress bars and for the message on Ctrl-C."""

    def __init__(self) -> None:
        self.design: str | None = None
        self.done = self.total = 0
        self.bar = None
        self.tasks: dict[str, object] = {}

    def __call__(self, design: str, done: int, total: int) -> None:
        self.design, self.done, self.total = design, done, total
        if self.bar is not None:
            self.bar.update(self.tasks[design], completed=done, total=total)


@contextlib.contextmanager
def _bars(tracker: _Tracker, designs, ops: int, enabled: bool) -> Iterator[None]:
    """One rich progress bar per design on stderr while the block runs (if ``enabled``)."""
    if not enabled:
        yield
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TimeRemainingColumn(), console=render.err_console)
    with bar:
        tracker.tasks = {d.name: bar.add_task(d.name, total=ops) for d in designs}
        tracker.bar = bar
        try:
            yield
        finally:
            tracker.bar = None


def _run_simulation(w, designs: list[str] | None, config, max_ops: int, progress: bool | None):
    """Check the size of the run, state it, and run it with progress bars; Ctrl-C stops it
    with one line on stderr and exit code 130."""
    from ..design.simulate import plan, simulate

    p = plan(w, designs, config, max_ops)  # an oversized run fails here, before any work
    source = (f"--ops {config.ops:,}" if config.ops is not None
              else f"rate {w.rate:g}/s x duration {w.duration:g} s")
    render.note(f"simulate {w.name}: {p.ops:,} operations per design ({source}) x "
                f"{len(p.designs)} design(s) ({', '.join(d.name for d in p.designs)}) = "
                f"{p.total:,} operations")
    tracker = _Tracker()
    enabled = render.err_console.is_terminal if progress is None else progress
    try:
        with _bars(tracker, p.designs, p.ops, enabled):
            return simulate(w, designs, config, progress=tracker, max_ops=max_ops)
    except KeyboardInterrupt:
        where = (f" in design {tracker.design!r} after {tracker.done:,} of {tracker.total:,} operations"
                 if tracker.design is not None else "")
        render.err(f"Interrupted: simulation of {w.name!r} stopped{where}; no report.")
        raise typer.Exit(130) from None


@command("simulate")
def simulate_cmd(
    ctx: typer.Context,
    workload: Annotated[str, typer.Argument(help="Built-in workload (monitoring, student-card, ycsb-zipfian) or a YAML/JSON file.")] = "monitoring",
    design: Annotated[list[str] | None, typer.Option("--design", help="Design to run (repeatable; default all).")] = None,
    nodes: Annotated[int, typer.Option("--nodes", min=1, help="Simulated nodes.")] = 4,
    capacity: Annotated[int, typer.Option("--capacity", min=1, help="Operations per second per partition.")] = 150,
    ops: Annotated[int | None, typer.Option("--ops", min=1, help="Operations to replay (default rate x duration).")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Random seed: same seed, same report.")] = 0,
    from_table: Annotated[str | None, typer.Option("--from-table", help="Record the workload from this table of --data.")] = None,
    save_workload: Annotated[str | None, typer.Option("--save-workload", help="Write the workload as YAML/JSON.")] = None,
    chart: Annotated[str | None, typer.Option("--chart", help="Write a PNG chart comparing the designs.")] = None,
    keyviz: Annotated[str | None, typer.Option("--keyviz", help="Write each design's Key Visualizer (.png or .html) into this directory.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    max_ops: MaxOpsOpt = DEFAULT_MAX_OPS,
    progress: ProgressOpt = None,
    data: DataOpt = None,
) -> None:
    """Replay a workload against real stores under each key design and compare them."""
    from ..design.simulate import SimConfig
    from ..design.workloads import get_workload

    if from_table:
        from ..design.advisor import gather
        from ..design.record import record_workload

        with open_db(ctx, data) as db:
            w = record_workload(gather(db, from_table))
    else:
        w = get_workload(workload)
    if save_workload:
        _save(w, save_workload)
    config = SimConfig(nodes=nodes, capacity=capacity, ops=ops, seed=seed)
    report = _run_simulation(w, design or None, config, max_ops, progress)
    if chart:
        from ..design.chart import render_report_chart

        render_report_chart(report, chart)
    if keyviz:
        _keyviz_dir(report, keyviz)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), ensure_ascii=False, indent=2, default=str))
        return
    console.print(_report_table(report))
    for path in filter(None, [chart, keyviz]):
        console.print(f"wrote {path}", style="dim")


def _save(w, path: str) -> None:
    d = w.to_dict()
    if path.endswith((".yaml", ".yml")):
        import yaml

        Path(path).write_text(yaml.safe_dump(d, allow_unicode=True, sort_keys=False), encoding="utf-8")
    else:
        def refuse(value: object) -> object:
            raise CliError(f"the workload holds {type(value).__name__} values, which JSON cannot "
                           f"carry; save it as .yaml instead of {path!r}")

        Path(path).write_text(json.dumps(d, ensure_ascii=False, indent=2, default=refuse),
                              encoding="utf-8")


def _keyviz_dir(report, directory: str) -> None:
    from ..design.keyviz import from_simulation, render_html, render_png

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for r in report.results:
        m = from_simulation(r.keyviz, "writes" if any(c[3] for c in r.keyviz["cells"]) else "reads")
        render_png(m, out / f"{report.workload}-{r.design}.png")
        render_html(m, out / f"{report.workload}-{r.design}.html")


@command("keyviz")
def keyviz_cmd(
    ctx: typer.Context,
    table: Annotated[str | None, typer.Argument(help="Table whose recorded statistics to draw.")] = None,
    out: Annotated[str, typer.Option("--out", help="Output file: .png or .html.")] = "keyviz.html",
    metric: Annotated[str, typer.Option("--metric", help="reads, writes, bytes or throttled.")] = "writes",
    rows: Annotated[int, typer.Option("--rows", min=1, help="Key buckets before cold merging.")] = 1000,
    cold: Annotated[float, typer.Option("--cold", min=0.0, max=1.0, help="Merge rows whose peak is under this share of the hottest cell.")] = 0.05,
    workload: Annotated[str | None, typer.Option("--workload", help="Draw a simulator run of this workload instead of a table.")] = None,
    design: Annotated[str | None, typer.Option("--design", help="The design of --workload to run.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the simulator run.")] = 0,
    max_ops: MaxOpsOpt = DEFAULT_MAX_OPS,
    progress: ProgressOpt = None,
    data: DataOpt = None,
) -> None:
    """Draw a Key Visualizer heatmap (time across, key space down) as PNG or HTML."""
    from ..design.keyviz import METRICS, from_simulation, from_stats, render_html, render_png

    if metric not in METRICS:
        raise typer.BadParameter(f"{metric!r} is not one of {', '.join(METRICS)}", param_hint="'--metric'")
    if workload:
        from ..design.simulate import SimConfig
        from ..design.workloads import get_workload

        w = get_workload(workload)
        name = design or w.designs[0].name
        result = _run_simulation(w, [name], SimConfig(seed=seed), max_ops, progress).results[0]
        matrix = from_simulation(result.keyviz, metric, rows, cold)
    elif table:
        with open_db(ctx, data) as db:
            matrix = from_stats(db.table_stats(table), metric, rows, cold)
    else:
        raise CliError("name a TABLE, or pass --workload (and --design) to draw a simulator run")
    path = render_png(matrix, out) if out.endswith(".png") else render_html(matrix, out)
    console.print(f"wrote {path} ({len(matrix.rows)} rows x {len(matrix.times)} time slices, {metric})")
