"""``widetable sql [STATEMENT]``: run SQL, print a rich table, CSV, JSON lines or Parquet.

With no statement it opens an interactive prompt (statements end with ``;``,
history in ``~/.widetable_sql_history``; ``exit`` or end of input leaves).
"""

from __future__ import annotations

import csv
import enum
import json
import os
import sys
from typing import Annotated, Any

import typer
from rich.table import Table as RichTable
from rich.text import Text

from ..errors import WidetableError
from . import render
from .app import DataOpt, EndpointOpt, app, guarded, open_target
from .literals import CliError, to_json

HISTORY = os.path.join(os.path.expanduser("~"), ".widetable_sql_history")


class SqlFormat(str, enum.Enum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


def _sql_of(target: Any):
    """``db.sql`` of the store, or ``connect(...).sql`` (SQLQuery) of the server."""
    is_remote = not hasattr(target, "compact")
    if not is_remote:
        return target.sql

    def remote(statement: str, **options: Any):
        if options:
            raise CliError("--max-scan-rows and --timeout apply to a store (--data); a server "
                           "runs SQL with its own limits")
        return target.sql(statement)
    return remote


def print_result(result: Any, fmt: SqlFormat, output: str | None) -> None:
    """Write one result in ``fmt`` (to ``output`` or stdout)."""
    if fmt is SqlFormat.parquet:
        if not output:
            raise CliError("--format parquet needs --output FILE")
        import pyarrow.parquet as pq
        writer = None
        count = 0
        batches = result.batches() if hasattr(result, "batches") else \
            result.to_arrow().to_batches()
        for batch in batches:
            if writer is None:
                writer = pq.ParquetWriter(output, batch.schema)
            writer.write_batch(batch)
            count += batch.num_rows
        if writer is None:
            pq.write_table(result.to_arrow(), output)
        else:
            writer.close()
        render.note(f"{count} rows written to {output}")
        return
    names = [n for n, _ in result.columns]
    stream = open(output, "w", newline="", encoding="utf-8") if output else sys.stdout
    try:
        if fmt is SqlFormat.csv:
            w = csv.writer(stream)
            w.writerow(names)
            for row in result:
                w.writerow(["" if v is None else v.hex() if isinstance(v, bytes) else v
                            for v in row])
        elif fmt is SqlFormat.json:
            for row in result:
                stream.write(json.dumps({n: to_json(v) for n, v in zip(names, row)},
                                        ensure_ascii=False) + "\n")
        else:
            if not names:
                render.note("OK")
                return
            table = RichTable()
            for n, t in result.columns:
                table.add_column(Text(f"{n}\n{t}"))
            count = 0
            for row in result:
                table.add_row(*[render.value_text(v) if v is not None else Text("NULL", "dim")
                                for v in row])
                count += 1
            render.console.print(table)
            render.note(f"{count} row{'s' if count != 1 else ''}")
    finally:
        if output:
            stream.close()


@app.command("sql")
@guarded
def sql(
    ctx: typer.Context,
    statement: Annotated[str | None, typer.Argument(help="One SQL statement; none opens a prompt.",
                                                    show_default=False)] = None,
    fmt: Annotated[SqlFormat, typer.Option("--format", case_sensitive=False,
                                           help="table, csv, json (lines) or parquet.")]
    = SqlFormat.table,
    output: Annotated[str | None, typer.Option("--output", "-o", show_default=False,
                                               help="Write to this file (parquet needs one).")]
    = None,
    max_scan_rows: Annotated[int | None, typer.Option(
        "--max-scan-rows", help="Rows one scan may read (default 100000).",
        show_default=False)] = None,
    timeout: Annotated[float | None, typer.Option(
        "--timeout", help="Seconds a statement may run (default 30).", show_default=False)] = None,
    data: DataOpt = None,
    endpoint: EndpointOpt = None,
) -> None:
    """Run Tablestore SQL (sqlglot plans, DuckDB runs) on the store, or open a prompt."""
    options: dict = {}
    if max_scan_rows is not None:
        options["max_scan_rows"] = max_scan_rows
    if timeout is not None:
        options["timeout"] = timeout
    if fmt is SqlFormat.parquet and not output:
        raise CliError("--format parquet needs --output FILE")
    with open_target(ctx, data, endpoint) as target:
        run = _sql_of(target)
        if statement is not None:
            print_result(run(statement, **options), fmt, output)
            return
        _prompt(run, fmt, options)


def _prompt(run, fmt: SqlFormat, options: dict) -> None:
    interactive = sys.stdin.isatty()
    try:
        import readline
        if interactive:
            try:
                readline.read_history_file(HISTORY)
            except OSError:
                pass
    except ImportError:  # no readline on this platform: a plain prompt
        readline = None  # type: ignore[assignment]
    buffer: list[str] = []
    try:
        while True:
            try:
                line = input("sql> " if not buffer else "...> ") if interactive else \
                    sys.stdin.readline()
            except EOFError:
                break
            if not interactive and line == "":
                break
            line = line.rstrip("\n")
            if not buffer and line.strip().lower() in ("exit", "quit", "exit;", "quit;"):
                break
            buffer.append(line)
            text = "\n".join(buffer).strip()
            if not text.endswith(";"):
                if not text:
                    buffer = []
                continue
            buffer = []
            try:
                print_result(run(text, **options), fmt, None)
            except WidetableError as exc:
                render.print_error(exc.code, exc.message)
            except CliError as exc:
                render.print_error(None, str(exc))
    finally:
        if interactive and readline is not None:
            try:
                readline.write_history_file(HISTORY)
            except OSError:
                pass
