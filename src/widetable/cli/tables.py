"""Catalog and row commands: create-table, tables, describe, drop-table; put, update, get,
delete, scan.
"""

from __future__ import annotations

import itertools
from typing import Annotated

import typer

from ..table.filters import parse_filter
from ..table.table import MAX_RANGE_ROWS
from . import render
from .app import (
    ColsOpt,
    ColumnsOpt,
    ConditionOpt,
    DataOpt,
    Expect,
    ExpectOpt,
    JsonOpt,
    PkOpt,
    RowFormat,
    arg,
    columns_list,
    command,
    condition_of,
    open_db,
    write_columns,
)
from .literals import parse_assignment, parse_bound, parse_pk

# -- catalog ------------------------------------------------------------------


@command("create-table")
def create_table(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="TABLE", help="Table name.")],
    pk: Annotated[
        list[str],
        typer.Option(
            "--pk", help="Key column as NAME:TYPE (STRING, INTEGER or BINARY); repeat in key order."
        ),
    ],
    max_versions: Annotated[int | None, typer.Option(help="Versions kept per column.")] = None,
    ttl: Annotated[int | None, typer.Option(help="Seconds data lives; -1 = forever.")] = None,
    max_time_deviation: Annotated[
        int | None, typer.Option(help="Seconds an explicit timestamp may be from now.")
    ] = None,
    data: DataOpt = None,
) -> None:
    """Create a table. The first --pk column is the partition key."""
    columns = []
    for item in pk:
        col_name, sep, type_ = item.rpartition(":")
        if not sep or not col_name:
            raise typer.BadParameter(f"expected NAME:TYPE, got {item!r}", param_hint="'--pk'")
        columns.append((col_name, type_.upper()))
    options: dict[str, int] = {}
    if max_versions is not None:
        options["max_versions"] = max_versions
    if ttl is not None:
        options["ttl"] = ttl
    if max_time_deviation is not None:
        options["max_time_deviation"] = max_time_deviation
    with open_db(ctx, data, create=True) as db:
        db.create_table(name, columns, **options)
        key = ", ".join(f"{n} {t}" for n, t in columns)
        render.out(f"Created table {name}: primary key {key}")


@command("tables")
def tables(ctx: typer.Context, data: DataOpt = None) -> None:
    """List the tables of the store."""
    with open_db(ctx, data) as db:
        names = db.list_tables()
        if not names:
            render.note("No tables.")
            return
        for name in names:
            desc = db.describe_table(name)
            key = ", ".join(f"{n} {t}" for n, t in desc.primary_key)
            render.out(f"{name}\t{key}")


@command("describe")
def describe(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="TABLE", help="Table name.")],
    data: DataOpt = None,
) -> None:
    """Show a table's primary key and options."""
    with open_db(ctx, data) as db:
        desc = db.describe_table(name)
        render.console.print(render.schema_table(desc))
        render.console.print(render.options_table(desc))


@command("drop-table")
def drop_table(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="TABLE", help="Table name.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    data: DataOpt = None,
) -> None:
    """Drop a table and all its rows."""
    with open_db(ctx, data) as db:
        db.table(name)  # fail before asking if there is no such table
        if not yes:
            typer.confirm(f"Drop table {name!r} and all its rows?", abort=True)
        db.delete_table(name)
        render.out(f"Dropped table {name}")


# -- rows ---------------------------------------------------------------------


@command("put")
def put(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(metavar="TABLE", help="Table name.")],
    pk: PkOpt,
    col: ColsOpt = None,
    json_columns: JsonOpt = None,
    expect: ExpectOpt = Expect.ignore,
    condition: ConditionOpt = None,
    data: DataOpt = None,
) -> None:
    """Write a whole row, replacing every column it had."""
    key = arg(parse_pk, pk, "--pk")
    columns = write_columns(col, json_columns)
    with open_db(ctx, data, create=False) as db:
        result = db.table(table).put_row(key, columns, condition_of(expect, condition))
        render.out(f"Put row {list(result.primary_key)!r}")


@command("update")
def update(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(metavar="TABLE", help="Table name.")],
    pk: PkOpt,
    col: ColsOpt = None,
    json_columns: JsonOpt = None,
    delete_column: Annotated[
        list[str] | None, typer.Option("--delete-column", help="Column to delete (all versions).")
    ] = None,
    increment: Annotated[
        list[str] | None, typer.Option("--increment", help="Atomic add as NAME=INTEGER.")
    ] = None,
    expect: ExpectOpt = Expect.ignore,
    condition: ConditionOpt = None,
    data: DataOpt = None,
) -> None:
    """Change some columns of a row (creating it if needed); increments are atomic."""
    key = arg(parse_pk, pk, "--pk")
    columns = write_columns(col, json_columns)
    increments = dict(arg(parse_assignment, text, "--increment") for text in increment or [])
    with open_db(ctx, data) as db:
        result = db.table(table).update_row(
            key,
            put=columns or None,
            delete_column=delete_column or None,
            increment=increments or None,
            condition=condition_of(expect, condition),
        )
        render.out(f"Updated row {list(result.primary_key)!r}")
        for name, value in result.increments.items():
            render.out(f"{name} = {value}")


@command("get")
def get(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(metavar="TABLE", help="Table name.")],
    pk: PkOpt,
    columns: ColumnsOpt = None,
    max_versions: Annotated[int | None, typer.Option(help="Versions to return per column.")] = None,
    fmt: Annotated[
        RowFormat, typer.Option("--format", help="table, or jsonl for one JSON line.")
    ] = RowFormat.table,
    data: DataOpt = None,
) -> None:
    """Read one row. Exits with 1 if there is no such row."""
    key = arg(parse_pk, pk, "--pk")
    with open_db(ctx, data) as db:
        t = db.table(table)
        row = t.get_row(key, columns=columns_list(columns), max_versions=max_versions)
        if row is None:
            render.print_error(None, f"no row with primary key {pk} in table {table!r}")
            raise typer.Exit(1)
        if fmt is RowFormat.jsonl:
            render.write_line(render.row_json(row, with_versions=(max_versions or 1) > 1))
        else:
            render.console.print(render.row_detail_table(row, t.schema.pk_names))


@command("delete")
def delete(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(metavar="TABLE", help="Table name.")],
    pk: PkOpt,
    expect: ExpectOpt = Expect.ignore,
    condition: ConditionOpt = None,
    data: DataOpt = None,
) -> None:
    """Delete a row. Deleting a missing row is not an error unless --expect exist."""
    key = arg(parse_pk, pk, "--pk")
    with open_db(ctx, data) as db:
        result = db.table(table).delete_row(key, condition_of(expect, condition))
        render.out(f"Deleted row {list(result.primary_key)!r}")


@command("scan")
def scan(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(metavar="TABLE", help="Table name.")],
    start: Annotated[
        str | None,
        typer.Option(help='Inclusive start key, JSON array; may hold "INF_MIN"/"INF_MAX".'),
    ] = None,
    end: Annotated[str | None, typer.Option(help="Exclusive end key, JSON array.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Return at most N rows.")] = None,
    reverse: Annotated[
        bool, typer.Option("--reverse", help="Walk down; start must be >= end.")
    ] = False,
    columns: ColumnsOpt = None,
    filter_text: Annotated[
        str | None, typer.Option("--filter", help="e.g. \"price >= 10 and city == 'x'\".")
    ] = None,
    fmt: Annotated[RowFormat, typer.Option("--format", help="table or jsonl.")] = RowFormat.table,
    data: DataOpt = None,
) -> None:
    """Read rows in [start, end) in key order (or backward with --reverse)."""
    lo = arg(parse_bound, start, "--start") if start is not None else None
    hi = arg(parse_bound, end, "--end") if end is not None else None
    with open_db(ctx, data) as db:
        t = db.table(table)
        rows = t.scan(
            lo,
            hi,
            direction="backward" if reverse else "forward",
            columns=columns_list(columns),
            filter=parse_filter(filter_text) if filter_text is not None else None,
            page_size=min(limit, MAX_RANGE_ROWS) if limit else MAX_RANGE_ROWS,
        )
        if limit is not None:
            rows = itertools.islice(rows, limit)
        if fmt is RowFormat.jsonl:
            for row in rows:
                render.write_line(render.row_json(row))
            return
        got = list(rows)
        if not got:
            render.note("No rows.")
            return
        render.console.print(render.rows_table(got, t.schema.pk_names))
        render.note(f"{len(got)} row{'s' if len(got) != 1 else ''}")
