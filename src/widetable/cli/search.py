"""search-index create | describe | list | update | delete, and search TABLE INDEX QUERY.

Fields are given as ``name:type[:option,...]`` (options: ``array``, ``noindex``,
``nostore``, ``nosort``, ``analyzer=NAME``, ``delimiter=X``) or as a JSON/YAML
file of field dicts. QUERY is a compact query string (``widetable.search.querystring``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.progress import Progress
from rich.table import Table as RichTable

from ..search import aggs as A
from ..search.querystring import parse_query
from ..search.schema import FieldSchema
from ..search.sort import FieldSort, PrimaryKeySort, ScoreSort
from . import render
from .app import DataOpt, EndpointOpt, app, guarded, open_target
from .literals import CliError, pk_to_json, to_json

index_app = typer.Typer(help="Search indexes: full text, any field combination, geo, aggregations.",
                        no_args_is_help=True)
app.add_typer(index_app, name="search-index")


def parse_field(spec: str) -> FieldSchema:
    """``name:type[:opt,opt]`` as a FieldSchema."""
    parts = spec.split(":", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise CliError(f"a field is name:type[:options], got {spec!r}")
    name, ftype = parts[0], parts[1].upper()
    kw: dict = {}
    params: dict = {}
    for opt in (parts[2].split(",") if len(parts) > 2 and parts[2] else []):
        key, _, val = opt.partition("=")
        if key == "array":
            kw["is_array"] = True
        elif key == "noindex":
            kw["index"] = False
        elif key == "nostore":
            kw["store"] = False
        elif key == "nosort":
            kw["enable_sort_and_agg"] = False
        elif key == "analyzer" and val:
            kw["analyzer"] = val
        elif key == "delimiter" and val:
            params["delimiter"] = val
        elif key in ("min_chars", "max_chars") and val.isdigit():
            params[key] = int(val)
        else:
            raise CliError(f"unknown field option {opt!r} in {spec!r}")
    return FieldSchema(name, ftype, analyzer_parameter=params, **kw)


def _fields(specs: list[str] | None, file: Path | None) -> list:
    fields: list = [parse_field(s) for s in specs or []]
    if file is not None:
        loaded = yaml.safe_load(file.read_text())
        if isinstance(loaded, dict):
            loaded = loaded.get("fields")
        if not isinstance(loaded, list):
            raise CliError(f"{file}: expected a list of fields (or {{fields: [...]}})")
        fields += loaded
    if not fields:
        raise CliError("give fields with --field name:type or --fields-file")
    return fields


FieldOpt = Annotated[list[str] | None, typer.Option("--field", help="name:type[:options]; repeat.")]


@index_app.command("create")
@guarded
def create(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(help="Base table.")],
    name: Annotated[str, typer.Argument(help="Index name.")],
    field: FieldOpt = None,
    fields_file: Annotated[Path | None, typer.Option("--fields-file", help="JSON or YAML list of fields.")] = None,
    routing: Annotated[list[str] | None, typer.Option("--routing", help="Routing field (a key column); repeat.")] = None,
    ttl: Annotated[int, typer.Option("--ttl", help="Seconds; -1 keeps documents forever.")] = -1,
    shards: Annotated[int, typer.Option("--shards", min=1, help="tantivy shards.")] = 2,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Show the full sync until it ends.")] = True,
    data: DataOpt = None,
    endpoint: EndpointOpt = None,
) -> None:
    """Create a search index and run its full sync (FULL, then INCR)."""
    with open_target(ctx, data, endpoint) as db:
        db.create_search_index(table, name, _fields(field, fields_file), routing_fields=routing,
                               ttl=ttl, shards=shards)
        if wait:
            total = None
            try:
                total = sum(1 for _ in db.table(table).scan(columns=[]))
            except Exception:  # noqa: BLE001 - a progress bar without a total
                total = None
            with Progress(transient=True, console=render.console) as bar:
                task = bar.add_task(f"full sync of {name}", total=total)
                while True:
                    d = db.describe_search_index(table, name)
                    bar.update(task, completed=d.row_count)
                    if d.sync_phase == "INCR":
                        break
                    time.sleep(0.2)
        render.out(f"Created search index {name!r} on {table!r}")


def _describe_table(d) -> RichTable:
    t = RichTable(title=f"search index {d.meta.name} on {d.meta.table}")
    for col in ("field", "type", "array", "index", "sort/agg", "store", "analyzer"):
        t.add_column(col)
    for f in d.meta.fields:
        t.add_row(f.name, f.type, str(f.is_array), str(f.index), str(f.enable_sort_and_agg),
                  str(f.store), f.analyzer or "")
        for s in f.sub_fields:
            t.add_row(f"{f.name}.{s.name}", s.type, str(s.is_array), str(s.index),
                      str(s.enable_sort_and_agg), str(s.store), s.analyzer or "")
    return t


@index_app.command("describe")
@guarded
def describe(ctx: typer.Context, table: Annotated[str, typer.Argument(help="Base table.")],
             name: Annotated[str, typer.Argument(help="Index name.")], data: DataOpt = None,
             endpoint: EndpointOpt = None) -> None:
    """Schema (defaults filled in), sync phase, current-to time, lag, rows, size, rejected rows."""
    with open_target(ctx, data, endpoint) as db:
        d = db.describe_search_index(table, name)
        render.console.print(_describe_table(d))
        render.out(f"phase {d.sync_phase}  current to {render.format_ts(d.current_to) if d.current_to else '-'}"
                   f"  lag {d.lag_ms} ms  rows {d.row_count}  size {d.size_bytes} B  ttl {d.meta.ttl}"
                   f"  shards {d.meta.shards}  routing {list(d.meta.routing_fields)}")
        if d.rejected_rows:
            render.out(f"rejected rows {d.rejected_rows}; last: {d.last_rejected}")
        if d.rebuilding:
            render.out("rebuilding with new fields; searches use the current index meanwhile")


@index_app.command("list")
@guarded
def list_(ctx: typer.Context, table: Annotated[str | None, typer.Argument(help="Only this table's.")] = None,
          data: DataOpt = None, endpoint: EndpointOpt = None) -> None:
    """List search indexes as TABLE INDEX lines."""
    with open_target(ctx, data, endpoint) as db:
        for t, n in db.list_search_index(table):
            render.out(f"{t}\t{n}")


@index_app.command("update")
@guarded
def update(ctx: typer.Context, table: Annotated[str, typer.Argument(help="Base table.")],
           name: Annotated[str, typer.Argument(help="Index name.")],
           ttl: Annotated[int | None, typer.Option("--ttl", help="New TTL in seconds.")] = None,
           add_field: Annotated[list[str] | None, typer.Option("--add-field", help="name:type[:options]; repeat.")] = None,
           data: DataOpt = None, endpoint: EndpointOpt = None) -> None:
    """Change the TTL or add fields (rebuilt in the background; searches switch when it is done)."""
    with open_target(ctx, data, endpoint) as db:
        db.update_search_index(table, name, ttl=ttl,
                               add_fields=[parse_field(s) for s in add_field] if add_field else None)
        render.out(f"Updated search index {name!r}")


@index_app.command("delete")
@guarded
def delete(ctx: typer.Context, table: Annotated[str, typer.Argument(help="Base table.")],
           name: Annotated[str, typer.Argument(help="Index name.")], data: DataOpt = None,
           endpoint: EndpointOpt = None) -> None:
    """Drop a search index and its files."""
    with open_target(ctx, data, endpoint) as db:
        db.delete_search_index(table, name)
        render.out(f"Deleted search index {name!r}")


_AGGS = {"sum": A.SumAgg, "avg": A.AvgAgg, "min": A.MinAgg, "max": A.MaxAgg, "count": A.CountAgg,
         "distinct": A.DistinctCountAgg}


def parse_sort(spec: str) -> object:
    name, _, order = spec.partition(":")
    order = (order or "asc").upper()
    if order not in ("ASC", "DESC"):
        raise CliError(f"a sort is field[:asc|desc], got {spec!r}")
    if name == "_pk":
        return PrimaryKeySort(order)
    if name == "_score":
        return ScoreSort(order)
    return FieldSort(name, order)


def parse_agg(spec: str) -> object:
    kind, _, field = spec.partition(":")
    cls = _AGGS.get(kind)
    if cls is None or not field:
        raise CliError(f"an aggregation is {'|'.join(_AGGS)}:field, got {spec!r}")
    return cls(spec, field)


@app.command("search")
@guarded
def search(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(help="Base table.")],
    index: Annotated[str, typer.Argument(help="Search index.")],
    query: Annotated[str, typer.Argument(help="e.g. 'city:hangzhou AND price:[10 TO 20}'.")],
    sort: Annotated[list[str] | None, typer.Option("--sort", help="field[:asc|desc], _pk, _score; repeat.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=0, help="Rows per page.")] = 10,
    columns: Annotated[str | None, typer.Option("--columns", help="Comma-separated columns to return.")] = None,
    agg: Annotated[list[str] | None, typer.Option("--agg", help="sum|avg|min|max|count|distinct:field; repeat.")] = None,
    group_by: Annotated[list[str] | None, typer.Option("--group-by", help="Field to group by (terms); repeat.")] = None,
    follow_all: Annotated[bool, typer.Option("--all", help="Follow next tokens to the last page.")] = False,
    fmt: Annotated[str, typer.Option("--format", help="table or jsonl.")] = "table",
    data: DataOpt = None,
    endpoint: EndpointOpt = None,
) -> None:
    """Search INDEX of TABLE; prints rows, the total, aggregations and groups."""
    with open_target(ctx, data, endpoint) as db:
        meta = db.describe_search_index(table, index).meta
        q = parse_query(query, meta)
        cols = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
        aggs = [parse_agg(a) for a in agg or []]
        gbs = [A.GroupByField(f"by {g}", g, size=20) for g in group_by or []]
        sorters = [parse_sort(s) for s in sort] if sort else None
        token, rows, first = None, [], None
        while True:
            res = db.search(table, index, q, sort=sorters, limit=limit, next_token=token,
                            columns=cols or "RETURN_NONE", get_total_count=first is None,
                            aggs=aggs if first is None else None,
                            group_bys=gbs if first is None else None)
            first = first or res
            rows += res.rows
            token = res.next_token
            if not follow_all or token is None or not res.rows:
                break
        pk_names = db.table(table).schema.pk_names
        if fmt == "jsonl":
            for r in rows:
                render.write_line(json.dumps({"pk": pk_to_json(r.primary_key),
                                              "columns": {k: to_json(v) for k, v in r.columns.items()}},
                                             ensure_ascii=False))
        elif rows:
            render.console.print(render.rows_table(rows, pk_names))
        render.out(f"total {first.total_count}; shown {len(rows)}" + (
            "; more pages (--all)" if token is not None else ""))
        for name, value in first.aggs.items():
            render.out(f"{name} = {value}")
        for name, groups in first.group_bys.items():
            t = RichTable(title=name)
            t.add_column("key")
            t.add_column("rows", justify="right")
            for g in groups:
                t.add_row(str(g.key), str(g.row_count))
            render.console.print(t)
