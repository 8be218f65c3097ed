"""``python -m bench``: YCSB and Bigtable-paper workloads on widetable and its peers.

``main(argv)`` is what ``widetable bench`` calls; it parses, runs and reports,
and holds no measuring logic of its own.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import shutil
import signal
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from rich.console import Console

from . import bigtable, memory, report, suites, ycsb
from .driver import PhaseResult
from .systems import REGISTRY, SystemUnavailable, create

DEFAULT_RECORDS = 100_000
DEFAULT_OPERATIONS = 25_000
DEFAULT_OUT = Path(__file__).resolve().parent / "out"
ALL_SYSTEMS = tuple(REGISTRY)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="YCSB core workloads A-F and the Bigtable paper's experiments, "
        "on widetable and peers measured in the same run.",
    )
    p.add_argument(
        "--records",
        type=int,
        default=DEFAULT_RECORDS,
        help=f"records loaded (YCSB) and rows written (Bigtable); default {DEFAULT_RECORDS}",
    )
    p.add_argument(
        "--operations",
        type=int,
        default=DEFAULT_OPERATIONS,
        help=f"operations per YCSB workload and per Bigtable read test; "
        f"default {DEFAULT_OPERATIONS}",
    )
    p.add_argument(
        "--workloads",
        default="all",
        help="comma list of A-F, "
        + ", ".join(bigtable.EXPERIMENTS)
        + ", or the groups ycsb, bigtable, all (default)",
    )
    p.add_argument(
        "--systems",
        default=",".join(ALL_SYSTEMS),
        help="comma list of " + ", ".join(ALL_SYSTEMS) + " (default: all)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="folder for results.json and results.png (default bench/out/)",
    )
    p.add_argument("--seed", type=int, default=1, help="seed of every generator (default 1)")
    p.add_argument(
        "--warmup",
        type=float,
        default=0.05,
        help="fraction of each op list run untimed first (default 0.05)",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="passes over every system (default 1); with more, each figure is the median "
        "of the passes and each ratio the median of the passes' ratios, shown with their "
        "range; the systems' order rotates from pass to pass",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="profile the widetable runs with pyinstrument (its figures then "
        "carry profiler overhead); writes profile-widetable.html to --out",
    )
    args = p.parse_args(argv)
    if args.records < 10 or args.operations < 1:
        p.error("--records must be at least 10 and --operations at least 1")
    if not 0 <= args.warmup < 1:
        p.error("--warmup must be in [0, 1)")
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    return args


def parse_workloads(text: str) -> tuple[list[str], list[str]]:
    """(YCSB workload letters, Bigtable experiments) named by ``text``; ValueError if unknown."""
    ycsb_w: list[str] = []
    bt: list[str] = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        low = item.lower()
        if low in ("all", "ycsb"):
            ycsb_w += ycsb.RUN_ORDER
        if low in ("all", "bigtable"):
            bt += bigtable.EXPERIMENTS
        if low in ("all", "ycsb", "bigtable"):
            continue
        if item.upper() in ycsb.WORKLOADS:
            ycsb_w.append(item.upper())
        elif low in bigtable.EXPERIMENTS:
            bt.append(low)
        else:
            raise ValueError(f"unknown workload {item!r}")
    return list(dict.fromkeys(ycsb_w)), list(dict.fromkeys(bt))


def _run_system(
    name: str,
    plan: suites.Plan,
    root: Path,
    args: argparse.Namespace,
    console: Console,
    results: list[PhaseResult],
    round_no: int = 0,
) -> None:
    system = create(name)
    memory.release_free_memory()
    baseline = memory.rss_kib()
    try:
        system.start(root)  # SystemUnavailable propagates: the caller skips the system
    except BaseException:
        system.stop()
        raise

    def report_phase(r: PhaseResult) -> None:
        r.round = round_no
        results.append(r)
        miss = f", {r.misses} reads found nothing" if r.misses else ""
        console.print(
            f"  {r.system:<11} {r.suite:<8} {r.workload:<17} {r.throughput:>12,.0f} {r.unit}{miss}"
        )

    profiler = _profiler(console) if args.profile and name == "widetable" and not round_no else None
    try:
        if profiler is not None:
            profiler.start()
        suites.run_ycsb(system, plan, root, baseline, report_phase)
        suites.run_bigtable(system, plan, root, baseline, report_phase)
    finally:
        if profiler is not None:
            profiler.stop()
            args.out.mkdir(parents=True, exist_ok=True)
            html = args.out / "profile-widetable.html"
            html.write_text(profiler.output_html())
            (args.out / "profile-widetable.txt").write_text(profiler.output_text())
            console.print(f"  pyinstrument profile: {html} (and .txt)")
        system.stop()


def _profiler(console: Console) -> Any:
    try:
        from pyinstrument import Profiler
    except ImportError:
        console.print(
            "[yellow]--profile: pyinstrument is not installed "
            "(pip install pyinstrument); running unprofiled[/yellow]"
        )
        return None
    return Profiler(interval=0.0005)


def _settle(workdir: Path) -> None:
    """Remove a finished system's data and flush dirty pages, so that writeback of
    one system's files does not land in the next system's timings."""
    shutil.rmtree(workdir, ignore_errors=True)
    os.sync()


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def _on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # unwinds through every finally: servers stop, temp dirs go


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the process exit code (0 also when targets are missed)."""
    args = parse_args(argv)
    # Piped to a file or a log, rich would wrap the tables at 80 columns: 120 fits them.
    console = Console() if sys.stdout.isatty() else Console(width=120)
    try:
        ycsb_w, bt = parse_workloads(args.workloads)
        systems = list(dict.fromkeys(s.strip() for s in args.systems.split(",") if s.strip()))
        unknown = [s for s in systems if s not in REGISTRY]
        if unknown:
            raise ValueError(
                f"unknown system(s) {', '.join(unknown)}; known: {', '.join(REGISTRY)}"
            )
    except ValueError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    console.print(
        f"widetable bench: {args.records:,} records, {args.operations:,} operations, "
        f"YCSB {','.join(ycsb_w) or '-'}, Bigtable {','.join(bt) or '-'}, "
        f"systems {','.join(systems)}"
        + (f", {args.repeat} passes" if args.repeat > 1 else "")
    )
    busy = _load_average()
    if busy is not None and busy > 0.5 * (os.cpu_count() or 1):
        console.print(
            f"[yellow]note:[/yellow] load average {busy:.1f} on {os.cpu_count()} cores "
            "before the run: the machine is busy and the figures will be noisy"
        )
    plan = suites.make_plan(args.records, args.operations, ycsb_w, bt, args.seed, args.warmup)
    # The pre-generated plan is large and immortal: keep it out of every later GC pass,
    # so collections cost what the system under test allocates, not what the harness holds.
    gc.collect()
    gc.freeze()
    results: list[PhaseResult] = []
    skipped: dict[str, str] = {}
    old_term = signal.signal(signal.SIGTERM, _on_sigterm)
    root = Path(tempfile.mkdtemp(prefix="widetable-bench-"))
    try:
        for round_no in range(args.repeat):
            # Each pass starts one system further on, so no system always runs first
            # (or right after the same neighbour) when the machine's load drifts.
            turn = round_no % len(systems)
            for name in systems[turn:] + systems[:turn]:
                if name in skipped:
                    continue  # unavailable or broken in an earlier pass: not retried
                pass_label = f" (pass {round_no + 1} of {args.repeat})" if args.repeat > 1 else ""
                console.print(f"[bold]{name}[/bold]{pass_label}")
                try:
                    _run_system(name, plan, root / name, args, console, results, round_no)
                except SystemUnavailable as exc:
                    skipped[name] = str(exc)
                    console.print(f"  [yellow]skipped:[/yellow] {exc}")
                except Exception as exc:  # noqa: BLE001 - one broken system must not hide the others
                    skipped[name] = f"failed: {type(exc).__name__}: {exc}"
                    console.print(f"  [red]failed:[/red] {traceback.format_exc()}")
                _settle(root / name)
    except KeyboardInterrupt:
        console.print("[red]interrupted[/red]: servers stopped, temporary data removed")
        return 130
    finally:
        signal.signal(signal.SIGTERM, old_term)
        gc.unfreeze()
        shutil.rmtree(root, ignore_errors=True)
    goals = report.print_report(console, results, skipped)
    args.out.mkdir(parents=True, exist_ok=True)
    report.write_json(
        args.out / "results.json", _meta(args, ycsb_w, bt, systems), results, skipped, goals
    )
    report.write_png(args.out / "results.png", results)
    console.print(f"wrote {args.out / 'results.json'} and {args.out / 'results.png'}")
    return 0


def _meta(
    args: argparse.Namespace, ycsb_w: list[str], bt: list[str], systems: list[str]
) -> dict[str, Any]:
    return {
        "records": args.records,
        "operations": args.operations,
        "seed": args.seed,
        "warmup": args.warmup,
        "repeat": args.repeat,
        "ycsb_workloads": ycsb_w,
        "bigtable_experiments": bt,
        "systems": systems,
        "profiled": bool(args.profile),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_after": _load_average(),
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
