"""``python -m bench.fuzz``: fuzz both protocols of a fresh ``widetable serve``.

Sends ``--requests`` malformed requests (Tablestore's HTTP protocol and the native
frames, mutated from requests recorded from the official SDK and from
``widetable.connect``) while valid clients keep writing and reading, then checks
that nothing crashed, hung, answered other than a well-formed error, or wrote
what it should not have. Exits 1 if anything was found. See ``bench/fuzz/__init__.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .run import Report, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100_000, help="malformed requests to send")
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same cases)")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds to wait for an answer before calling it a hang")
    parser.add_argument("--senders", type=int, default=1,
                        help="threads sending cases at once, each on its own connections")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep the store and server.log here (default: a temporary "
                             "directory, removed after a clean run)")
    parser.add_argument("--json", type=Path, default=None, help="also write the report as JSON")
    args = parser.parse_args(argv)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    console = Console(stderr=True)
    with Progress(TextColumn("fuzz"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[note]}"),
                  TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task("fuzz", total=args.requests, note="")

        def progress(n: int, report: Report) -> None:
            bar.update(task, completed=n, note=f"{len(report.findings)} findings, "
                                               f"{report.accepted_writes} accepted writes")

        report = run(args.requests, seed=args.seed, timeout=args.timeout, workdir=args.workdir,
                     progress=progress, senders=args.senders)
    show(report, Console())
    if args.json is not None:
        args.json.write_text(json.dumps(as_dict(report), indent=2))
    return 0 if report.clean else 1


def as_dict(report: Report) -> dict:
    return {
        "requests": report.requests, "seconds": round(report.seconds, 1),
        "requests_per_second": round(report.requests / max(report.seconds, 1e-9)),
        "seeds": {"http": report.seeds[0], "native": report.seeds[1]},
        "outcomes": dict(report.outcomes.most_common()), "kinds": dict(sorted(report.kinds.items())),
        "accepted_writes": report.accepted_writes, "changed_rows": report.changed_rows,
        "live_client_calls": report.live_ops, "live_slowest_s": round(report.live_slowest, 3),
        "server_exit_status": report.exit_status,
        "harness_errors": report.harness_errors, "harness_error": report.harness_error,
        "findings": [str(f) for f in report.findings],
    }


def show(report: Report, console: Console) -> None:
    d = as_dict(report)
    console.print(f"{d['requests']} requests in {d['seconds']} s ({d['requests_per_second']}/s); "
                  f"seeds: {d['seeds']['http']} HTTP, {d['seeds']['native']} native")
    table = Table("answer", "count", title="answers")
    for outcome, count in report.outcomes.most_common():
        table.add_row(outcome, str(count))
    console.print(table)
    console.print(f"accepted writes {report.accepted_writes} (rows they changed: "
                  f"{report.changed_rows}); valid clients: {report.live_ops} calls, slowest "
                  f"{report.live_slowest:.3f} s; server exit status {report.exit_status}")
    if report.harness_errors:
        console.print(f"[yellow]the fuzzer failed to make {report.harness_errors} cases; the "
                      f"first:[/yellow]\n{report.harness_error}", markup=True)
    if report.clean:
        console.print("[green]clean: no crash, hang, 5xx, bad answer or stray write[/green]")
        return
    console.print(f"[red]{len(report.findings)} findings[/red]")
    for f in report.findings[:50]:
        console.print(f"  {f}", markup=False)


if __name__ == "__main__":
    sys.exit(main())
