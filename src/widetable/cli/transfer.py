"""import and export: rows between a table and a JSONL or CSV file, with a progress bar."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import Annotated, Any, TextIO

import typer
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from . import data_io, render
from .app import DataOpt, EndpointOpt, FileFormat, command, open_target


def _progress(unit_bytes: bool) -> Progress:
    count = DownloadColumn() if unit_bytes else MofNCompleteColumn()
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        count,
        TimeElapsedColumn(),
        console=render.err_console,
        transient=False,
    )


FormatOpt = Annotated[
    FileFormat | None,
    typer.Option("--format", help="jsonl, csv, parquet or arrow (default: by extension)."),
]


@command("import")
def import_(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(metavar="TABLE", help="Table to write into.")],
    file: Annotated[str, typer.Argument(metavar="FILE", help="File to read, or - for stdin.")],
    fmt: FormatOpt = None,
    data: DataOpt = None,
    endpoint: EndpointOpt = None,
) -> None:
    """Load rows from JSONL, CSV, Parquet or Arrow in batches of 200. Exits with 1 if any
    row failed."""
    kind = data_io.guess_format(file, fmt.value if fmt else None)
    if kind in ("parquet", "arrow"):
        _import_columnar(ctx, table, file, data, endpoint)
        return
    raw = sys.stdin.buffer if file == "-" else open(file, "rb")  # noqa: SIM115 - closed below
    closer = contextlib.nullcontext() if file == "-" else contextlib.closing(raw)
    with closer, open_target(ctx, data, endpoint) as db:
        pk = list(db.describe_table(table).primary_key)
        lines = data_io.decode_lines(raw)
        records = data_io.read_jsonl(lines) if kind == "jsonl" else data_io.read_csv(lines, pk)
        total = _size(raw)
        with _progress(unit_bytes=True) as progress:
            task = progress.add_task(f"import {table}", total=total)

            def advance(report: data_io.ImportReport) -> None:
                progress.update(
                    task,
                    completed=_position(raw, total),
                    description=f"import {table}: {report.written + report.failed} rows",
                )

            report = data_io.import_records(db, table, records, advance)
            progress.update(task, completed=total)
    _print_report(table, report)
    if report.failed:
        raise typer.Exit(1)


def _size(raw: Any) -> int | None:
    try:
        return os.fstat(raw.fileno()).st_size if raw.seekable() else None
    except (OSError, ValueError, io.UnsupportedOperation):
        return None


def _position(raw: Any, total: int | None) -> int | None:
    if total is None:
        return None
    try:
        return min(raw.tell(), total)
    except (OSError, ValueError):
        return None


def _print_report(table: str, report: data_io.ImportReport) -> None:
    render.out(f"Imported {report.written} rows into {table}")
    if not report.failed:
        return
    render.print_error(None, f"{report.failed} row(s) failed")
    for e in report.errors[:5]:
        render.err(f"  line {e.line}: [{e.code}] {e.message}")
    if report.failed > 5:
        render.err(f"  ... and {report.failed - 5} more")


@command("export")
def export(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(metavar="TABLE", help="Table to read.")],
    file: Annotated[str, typer.Argument(metavar="FILE", help="File to write, or - for stdout.")],
    fmt: FormatOpt = None,
    data: DataOpt = None,
    endpoint: EndpointOpt = None,
) -> None:
    """Write every row (newest version of each column) as JSONL, CSV, Parquet or Arrow."""
    kind = data_io.guess_format(file, fmt.value if fmt else None)
    with open_target(ctx, data, endpoint) as db:
        t = db.table(table)
        if kind in ("parquet", "arrow"):
            _export_columnar(t, table, file, kind)
            return
        with _output(file) as out, _progress(unit_bytes=False) as progress:
            task = progress.add_task(f"export {table}", total=None)

            def advance(count: int) -> None:
                progress.update(task, completed=count)

            if kind == "jsonl":
                count = data_io.export_jsonl(t.scan(), out, advance)
            else:
                count = data_io.export_csv(t.scan(), list(t.schema.pk_names), out, advance)
            progress.update(task, total=count, completed=count)
    render.note(f"Exported {count} rows from {table} to {file}")


@contextlib.contextmanager
def _output(file: str) -> Iterator[TextIO]:
    """stdout for ``-``; else a temporary file renamed to ``file`` only when all went well."""
    if file == "-":
        yield sys.stdout
        return
    partial = f"{file}.partial"
    with open(partial, "w", encoding="utf-8", newline="") as out:
        try:
            yield out
        except BaseException:
            out.close()
            os.unlink(partial)
            raise
    os.replace(partial, file)


def _export_columnar(t: Any, table: str, file: str, kind: str) -> None:
    from ..sql import interchange

    if file == "-":
        raise data_io.CliError(f"--format {kind} writes a file; pass a file name, not -")
    with _progress(unit_bytes=False) as progress:
        task = progress.add_task(f"export {table}", total=None)
        count = interchange.write_file(interchange.table_batches(t), file, kind,
                                       lambda n: progress.update(task, completed=n))
        progress.update(task, total=count, completed=count)
    render.note(f"Exported {count} rows from {table} to {file}")


def _import_columnar(ctx: typer.Context, table: str, file: str, data: Any, endpoint: Any) -> None:
    from ..sql import interchange

    if file == "-":
        raise data_io.CliError("Parquet and Arrow imports read a file; pass a file name, not -")
    with open_target(ctx, data, endpoint) as db:
        pk = [n for n, _ in db.describe_table(table).primary_key]
        records = (data_io.Record(n, key, cols)
                   for n, key, cols in interchange.read_rows(file, pk))
        with _progress(unit_bytes=False) as progress:
            task = progress.add_task(f"import {table}", total=None)

            def advance(report: data_io.ImportReport) -> None:
                progress.update(task, completed=report.written + report.failed)

            report = data_io.import_records(db, table, records, advance)
    _print_report(table, report)
    if report.failed:
        raise typer.Exit(1)
