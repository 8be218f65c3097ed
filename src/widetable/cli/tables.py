"""Catalog and row commands: create-table, tables, describe, drop-table; put, update, get,
delete, scan.
"""

from __future__ import annotations

import itertools
from typing import Annotated

import typer

from ..table.filters import parse_filter
from ..table.schema import AUTO_INCREMENT
from ..table.table import MAX_RANGE_ROWS
from . import render
from .app import (
    ColsOpt,
    ColumnsOpt,
    ConditionOpt,
    DataOpt,
    EndpointOpt,
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
    open_target,
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
    split_point: Annotated[
        list[str] | None,
        typer.Option(
            "--split-point",
            help="Pre-split at this partition-key value (text; an integer for INTEGER keys, "
            "hex for BINARY); repeat for more partitions.",
        ),
    ] = None,
    capacity: Annotated[
        float | None,
        typer.Option(min=0, help="Operations per second per partition; over it requests are "
                     "throttled with OTSServerBusy. 0 or unset: unlimited."),
    ] = None,
    stream: Annotated[bool, typer.Option("--stream", help="Keep a change stream.")] = False,
    data: DataOpt = None,
) -> None:
    """Create a table. The first --pk column is the partition key.

    A key column may end in :AUTO_INCREMENT (a non-first INTEGER column).
    """
    columns: list[tuple[str, ...]] = []
    for item in pk:
        parts = item.split(":")
        if len(parts) not in (2, 3) or not parts[0] or (
            len(parts) == 3 and parts[2].upper() != "AUTO_INCREMENT"
        ):
            raise typer.BadParameter(
                f"expected NAME:TYPE or NAME:INTEGER:AUTO_INCREMENT, got {item!r}",
                param_hint="'--pk'",
            )
        columns.append((parts[0], parts[1].upper(), *(p.upper() for p in parts[2:])))
    options: dict[str, object] = {}
    if split_point:
        options["split_points"] = [_split_value(v, columns[0][1]) for v in split_point]
    if capacity:
        options["capacity"] = capacity
    if stream:
        options["stream"] = True
    if max_versions is not None:
        options["max_versions"] = max_versions
    if ttl is not None:
        options["ttl"] = ttl
    if max_time_deviation is not None:
        options["max_time_deviation"] = max_time_deviation
    with open_db(ctx, data, create=True) as db:
        db.create_table(name, columns, **options)
        key = ", ".join(" ".join(c[1:]).join([f"{c[0]} ", ""]) for c in columns)
        render.out(f"Created table {name}: primary key {key}")


def _split_value(text: str, key_type: str) -> object:
    """A --split-point given as text, read as the partition key's type."""
    try:
        if key_type == "INTEGER":
            return int(text)
        if key_type == "BINARY":
            return bytes.fromhex(text)
    except ValueError:
        raise typer.BadParameter(
            f"split point {text!r} is not a valid {key_type} value", param_hint="'--split-point'"
        ) from None
    return text


@command("tables")
def tables(ctx: typer.Context, data: DataOpt = None, endpoint: EndpointOpt = None) -> None:
    """List the tables of the store."""
    with open_target(ctx, data, endpoint) as db:
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
    endpoint: EndpointOpt = None,
) -> None:
    """Show a table's primary key, options, partitions, split history, indexes and the
    store's background loops."""
    with open_target(ctx, data, endpoint) as db:
        desc = db.describe_table(name)
        render.console.print(render.schema_table(desc))
        render.console.print(render.options_table(desc))
        render.console.print(render.partitions_table(desc))
        if desc.split_history:
            render.console.print(render.history_table(desc))
        if desc.indexes:
            render.console.print(render.indexes_table(desc))
        if desc.background:
            render.console.print(render.background_table(desc))


@command("drop-table")
def drop_table(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="TABLE", help="Table name.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    data: DataOpt = None,
    endpoint: EndpointOpt = None,
) -> None:
    """Drop a table and all its rows."""
    with open_target(ctx, data, endpoint) as db:
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
    endpoint: EndpointOpt = None,
) -> None:
    """Write a whole row, replacing every column it had.

    On a table with an auto-increment key column, give "AUTO_INCREMENT" for it
    and the store assigns the value, which is printed.
    """
    key = arg(parse_pk, pk, "--pk")
    columns = write_columns(col, json_columns)
    with open_target(ctx, data, endpoint) as db:
        t = db.table(table)
        key = _with_auto_increment(key, t.schema.auto_increment, t.schema.pk_names)
        result = t.put_row(key, columns, condition_of(expect, condition))
        render.out(f"Put row {list(result.primary_key)!r}")


def _with_auto_increment(key: object, auto: str | None, names: tuple[str, ...]) -> object:
    """``key`` with the text "AUTO_INCREMENT" in the auto-increment column made the placeholder."""
    if auto is None:
        return key
    if isinstance(key, dict):
        return {n: AUTO_INCREMENT if n == auto and v == "AUTO_INCREMENT" else v for n, v in key.items()}
    if isinstance(key, tuple):
        i = names.index(auto)
        if i < len(key) and key[i] == "AUTO_INCREMENT":
            return key[:i] + (AUTO_INCREMENT,) + key[i + 1 :]
    return key


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
    endpoint: EndpointOpt = None,
) -> None:
    """Change some columns of a row (creating it if needed); increments are atomic."""
    key = arg(parse_pk, pk, "--pk")
    columns = write_columns(col, json_columns)
    increments = dict(arg(parse_assignment, text, "--increment") for text in increment or [])
    with open_target(ctx, data, endpoint) as db:
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
    endpoint: EndpointOpt = None,
) -> None:
    """Read one row. Exits with 1 if there is no such row."""
    key = arg(parse_pk, pk, "--pk")
    with open_target(ctx, data, endpoint) as db:
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
    endpoint: EndpointOpt = None,
) -> None:
    """Delete a row. Deleting a missing row is not an error unless --expect exist."""
    key = arg(parse_pk, pk, "--pk")
    with open_target(ctx, data, endpoint) as db:
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
    endpoint: EndpointOpt = None,
) -> None:
    """Read rows in [start, end) in key order (or backward with --reverse)."""
    lo = arg(parse_bound, start, "--start") if start is not None else None
    hi = arg(parse_bound, end, "--end") if end is not None else None
    with open_target(ctx, data, endpoint) as db:
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
