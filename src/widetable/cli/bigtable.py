"""``widetable bt``: cbt-like commands over the Bigtable model, on a store (``--data``) or
through a server's Bigtable port (``--endpoint host:port``).

Arguments follow cbt's ``key=value`` style: ``createtable T families=cf1:maxversions=2,cf2
splits=g,p``; ``read T start=a end=k prefix=u count=10``; ``set T ROW cf:q=value@ts``.
Row keys, qualifiers and values are text (UTF-8). GC policies: ``never``,
``maxversions=N``, ``maxage=DURATION`` (``500ms``, ``30s``, ``10m``, ``12h``, ``7d``),
joined with ``and`` / ``&&`` (intersection) or ``or`` / ``||`` (union); ``and`` binds
tighter.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
from collections.abc import Iterator
from typing import Annotated, Any

import typer

from .app import DataOpt, app, guarded, open_db
from .literals import CliError

bt_app = typer.Typer(help="Bigtable tables (cbt-like): families, GC policies, rows.",
                     no_args_is_help=True)
app.add_typer(bt_app, name="bt")

BtEndpointOpt = Annotated[
    str | None,
    typer.Option("--endpoint", show_default=False,
                 help="A server's Bigtable port (host:port, as BIGTABLE_EMULATOR_HOST takes it) "
                      "instead of a store; a token in WIDETABLE_BIGTABLE_TOKEN is sent if set."),
]
InstanceOpt = Annotated[
    str, typer.Option("--instance", help="Instance named in requests (--endpoint only; "
                      "widetable serves any name, Google's emulator keeps them apart).")
]
ArgsArg = Annotated[list[str] | None, typer.Argument(metavar="[KEY=VALUE]...", show_default=False)]

_DURATION = re.compile(r"(\d+)(ms|s|m|h|d)")
_UNIT_MICROS = {"ms": 1000, "s": 10**6, "m": 60 * 10**6, "h": 3600 * 10**6, "d": 86400 * 10**6}


@contextlib.contextmanager
def _instance(ctx: typer.Context, data: str | None, endpoint: str | None, instance: str,
              create: bool = False) -> Iterator[Any]:
    if endpoint is None:
        with open_db(ctx, data, create=create) as db:
            yield db.bigtable
        return
    if data is not None:
        raise CliError("pass --data (a store) or --endpoint (a server), not both")
    from ..client.bigtable import connect_bigtable

    remote = connect_bigtable(endpoint, instance=instance,
                              token=os.environ.get("WIDETABLE_BIGTABLE_TOKEN") or None)
    try:
        yield remote
    finally:
        remote.close()


def _pairs(args: list[str] | None, allowed: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in args or ():
        key, eq, value = item.partition("=")
        if not eq or key not in allowed:
            raise typer.BadParameter(f"{item!r}: expected one of {', '.join(k + '=' for k in allowed)}")
        out[key] = value
    return out


def parse_gc(text: str):
    """A cbt GC policy -> a ``widetable.bigtable.gc`` rule (None for ``never``)."""
    from ..bigtable import gc as G

    text = text.strip()
    if text == "never":
        return None
    ors = [p for p in re.split(r"\s*(?:\|\||\bor\b)\s*", text)]
    if len(ors) > 1:
        return G.Union(tuple(parse_gc(p) for p in ors))
    ands = [p for p in re.split(r"\s*(?:&&|\band\b)\s*", text)]
    if len(ands) > 1:
        return G.Intersection(tuple(parse_gc(p) for p in ands))
    key, eq, value = text.partition("=")
    if key == "maxversions" and eq and value.isdigit():
        return G.MaxVersions(int(value))
    if key == "maxage" and eq:
        m = _DURATION.fullmatch(value)
        if m:
            return G.MaxAge(int(m.group(1)) * _UNIT_MICROS[m.group(2)])
    raise typer.BadParameter(f"GC policy {text!r}: expected never, maxversions=N or "
                             "maxage=DURATION (500ms, 30s, 10m, 12h, 7d), joined by and/or")


def _families(text: str) -> list:
    from ..bigtable.types import FamilySpec

    specs = []
    for item in filter(None, text.split(",")):
        name, _, policy = item.partition(":")
        specs.append(FamilySpec(name, gc=parse_gc(policy) if policy else None))
    return specs


def _ts(micros: int) -> str:
    when = datetime.datetime.fromtimestamp(micros / 1e6, datetime.timezone.utc)
    return when.strftime("%Y/%m/%d-%H:%M:%S.%f")


def _text(b: bytes) -> str:
    try:
        return repr(b.decode())
    except UnicodeDecodeError:
        return repr(b)[1:]


def _print_row(row) -> None:
    typer.echo("-" * 40)
    typer.echo(_text(row.key)[1:-1] if row.key.isascii() else _text(row.key))
    for cell in row.cells:
        label = f"  [{','.join(cell.labels)}]" if cell.labels else ""
        typer.echo(f"  {cell.family}:{_text(cell.qualifier)[1:-1]:<30} @ {_ts(cell.timestamp)}{label}")
        typer.echo(f"    {_text(cell.value)}")


def _columns_filter(columns: str | None, cells_per_column: str | None):
    from ..bigtable import filters as F

    parts = []
    if columns:
        alts = []
        for col in columns.split(","):
            fam, colon, qual = col.partition(":")
            if not colon:
                alts.append(F.FamilyNameRegex(re.escape(fam)))
            else:
                alts.append(F.Chain((F.FamilyNameRegex(re.escape(fam)),
                                     F.QualifierRegex(re.escape(qual).encode()))))
        parts.append(alts[0] if len(alts) == 1 else F.Interleave(tuple(alts)))
    if cells_per_column:
        if not cells_per_column.isdigit():
            raise typer.BadParameter(f"cells-per-column={cells_per_column!r} is not a number")
        parts.append(F.CellsPerColumnLimit(int(cells_per_column)))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else F.Chain(tuple(parts))


@bt_app.command("createtable")
@guarded
def createtable(ctx: typer.Context, table: Annotated[str, typer.Argument(help="Table name.")],
                args: ArgsArg = None, data: DataOpt = None, endpoint: BtEndpointOpt = None,
                instance: InstanceOpt = "widetable") -> None:
    """Create TABLE: families=cf1[:GCPOLICY],cf2,...  splits=key1,key2,..."""
    opts = _pairs(args, ("families", "splits"))
    families = _families(opts.get("families", ""))
    splits = tuple(s.encode() for s in filter(None, opts.get("splits", "").split(",")))
    with _instance(ctx, data, endpoint, instance, create=True) as bt:
        bt.create_table(table, families, split_keys=splits)
    typer.echo(f"created table {table}")


@bt_app.command("createfamily")
@guarded
def createfamily(ctx: typer.Context, table: Annotated[str, typer.Argument(help="Table name.")],
                 family: Annotated[str, typer.Argument(help="Family, optionally FAMILY:GCPOLICY.")],
                 data: DataOpt = None, endpoint: BtEndpointOpt = None,
                 instance: InstanceOpt = "widetable") -> None:
    """Add a column family to TABLE."""
    with _instance(ctx, data, endpoint, instance) as bt:
        bt.modify_families(table, create=_families(family))
    typer.echo(f"created family {family.partition(':')[0]} in {table}")


@bt_app.command("setgcpolicy")
@guarded
def setgcpolicy(ctx: typer.Context, table: Annotated[str, typer.Argument(help="Table name.")],
                family: Annotated[str, typer.Argument(help="Family.")],
                policy: Annotated[list[str], typer.Argument(help="never | maxversions=N | "
                                                            "maxage=D, joined by and / or.")],
                data: DataOpt = None, endpoint: BtEndpointOpt = None,
                instance: InstanceOpt = "widetable") -> None:
    """Set FAMILY's garbage-collection policy."""
    import dataclasses

    rule = parse_gc(" ".join(policy))
    with _instance(ctx, data, endpoint, instance) as bt:
        info = bt.get_table(table)
        spec = info.families.get(family)
        if spec is None:
            raise CliError(f"table {table!r} has no family {family!r}")
        bt.modify_families(table, update=[dataclasses.replace(spec, gc=rule)])
    typer.echo(f"set the GC policy of {table}:{family}")


@bt_app.command("ls")
@guarded
def ls(ctx: typer.Context, table: Annotated[str | None, typer.Argument(help="A table: list "
                                                                        "its families.")] = None,
       data: DataOpt = None, endpoint: BtEndpointOpt = None,
       instance: InstanceOpt = "widetable") -> None:
    """List the tables, or TABLE's families with their GC policies."""
    from ..bigtable.gc import describe_gc

    with _instance(ctx, data, endpoint, instance) as bt:
        if table is None:
            for name in bt.list_tables():
                typer.echo(name)
            return
        info = bt.get_table(table)
    typer.echo(f"{'Family Name':<24} GC Policy")
    typer.echo(f"{'-' * 11:<24} ---------")
    for name, spec in sorted(info.families.items()):
        agg = f" (aggregate {spec.aggregate})" if spec.aggregate else ""
        typer.echo(f"{name:<24} {describe_gc(spec.gc)}{agg}")


@bt_app.command("read")
@guarded
def read(ctx: typer.Context, table: Annotated[str, typer.Argument(help="Table name.")],
         args: ArgsArg = None, data: DataOpt = None, endpoint: BtEndpointOpt = None,
         instance: InstanceOpt = "widetable") -> None:
    """Read rows: start=ROW end=ROW prefix=P regex=RE columns=cf[:q],... count=N
    cells-per-column=N reversed=true."""
    from ..bigtable import filters as F
    from ..bigtable.types import RowRange, RowSet

    opts = _pairs(args, ("start", "end", "prefix", "regex", "columns", "count",
                         "cells-per-column", "reversed"))
    ranges = []
    if "prefix" in opts:
        if "start" in opts or "end" in opts:
            raise typer.BadParameter("prefix= does not go with start= or end=")
        p = opts["prefix"].encode()
        ranges.append(RowRange(p, _prefix_end(p)))
    elif "start" in opts or "end" in opts:
        ranges.append(RowRange(opts["start"].encode() if opts.get("start") else None,
                               opts["end"].encode() if opts.get("end") else None))
    rows = RowSet(ranges=tuple(ranges)) if ranges else None
    flt = _columns_filter(opts.get("columns"), opts.get("cells-per-column"))
    if "regex" in opts:
        key = F.RowKeyRegex(opts["regex"].encode())
        flt = key if flt is None else F.Chain((key, flt))
    count = opts.get("count", "0")
    if not count.isdigit():
        raise typer.BadParameter(f"count={count!r} is not a number")
    reverse = opts.get("reversed", "false").lower() in ("true", "1", "yes")
    with _instance(ctx, data, endpoint, instance) as bt:
        for row in bt.table(table).read_rows(rows, flt, limit=int(count), reverse=reverse):
            _print_row(row)


def _prefix_end(p: bytes) -> bytes | None:
    """The first key after every key starting with ``p`` (None: no end)."""
    b = bytearray(p)
    while b and b[-1] == 0xFF:
        b.pop()
    if not b:
        return None
    b[-1] += 1
    return bytes(b)


@bt_app.command("lookup")
@guarded
def lookup(ctx: typer.Context, table: Annotated[str, typer.Argument(help="Table name.")],
           row: Annotated[str, typer.Argument(help="Row key.")], args: ArgsArg = None,
           data: DataOpt = None, endpoint: BtEndpointOpt = None,
           instance: InstanceOpt = "widetable") -> None:
    """Read one row: columns=cf[:q],... cells-per-column=N."""
    opts = _pairs(args, ("columns", "cells-per-column"))
    flt = _columns_filter(opts.get("columns"), opts.get("cells-per-column"))
    with _instance(ctx, data, endpoint, instance) as bt:
        found = bt.table(table).read_row(row.encode(), flt)
    if found is None:
        raise CliError(f"row {row!r} not found in {table}")
    _print_row(found)


@bt_app.command("set")
@guarded
def set_(ctx: typer.Context, table: Annotated[str, typer.Argument(help="Table name.")],
         row: Annotated[str, typer.Argument(help="Row key.")],
         cells: Annotated[list[str], typer.Argument(metavar="FAMILY:COLUMN=VALUE[@TS]...",
                                                    help="Cells; TS in microseconds.")],
         data: DataOpt = None, endpoint: BtEndpointOpt = None,
         instance: InstanceOpt = "widetable") -> None:
    """Set cells of ROW (one atomic mutation)."""
    from ..bigtable.types import SERVER_TIME, SetCell

    muts = []
    for item in cells:
        col, eq, value = item.partition("=")
        fam, colon, qual = col.partition(":")
        if not eq or not colon or not fam:
            raise typer.BadParameter(f"{item!r}: expected FAMILY:COLUMN=VALUE[@TS]")
        ts = SERVER_TIME
        m = re.fullmatch(r"(.*)@(\d+)", value, re.S)
        if m:
            value, ts = m.group(1), int(m.group(2))
        muts.append(SetCell(fam, qual.encode(), ts, value.encode()))
    with _instance(ctx, data, endpoint, instance, create=False) as bt:
        bt.table(table).mutate_row(row.encode(), muts)


@bt_app.command("deleterow")
@guarded
def deleterow(ctx: typer.Context, table: Annotated[str, typer.Argument(help="Table name.")],
              row: Annotated[str, typer.Argument(help="Row key.")], data: DataOpt = None,
              endpoint: BtEndpointOpt = None, instance: InstanceOpt = "widetable") -> None:
    """Delete ROW."""
    from ..bigtable.types import DeleteFromRow

    with _instance(ctx, data, endpoint, instance) as bt:
        bt.table(table).mutate_row(row.encode(), [DeleteFromRow()])


@bt_app.command("droprange")
@guarded
def droprange(ctx: typer.Context, table: Annotated[str, typer.Argument(help="Table name.")],
              prefix: Annotated[str | None, typer.Argument(help="Row-key prefix to drop.")] = None,
              all_rows: Annotated[bool, typer.Option("--all", help="Drop every row.")] = False,
              data: DataOpt = None, endpoint: BtEndpointOpt = None,
              instance: InstanceOpt = "widetable") -> None:
    """Drop every row whose key starts with PREFIX (or, with --all, every row)."""
    if (prefix is None) == (not all_rows):
        raise typer.BadParameter("give a PREFIX or --all (not both)")
    with _instance(ctx, data, endpoint, instance) as bt:
        if all_rows:
            bt.drop_row_range(table, all_rows=True)
        else:
            bt.drop_row_range(table, prefix=prefix.encode())  # type: ignore[union-attr]


@bt_app.command("count")
@guarded
def count(ctx: typer.Context, table: Annotated[str, typer.Argument(help="Table name.")],
          data: DataOpt = None, endpoint: BtEndpointOpt = None,
          instance: InstanceOpt = "widetable") -> None:
    """Count TABLE's rows."""
    from ..bigtable import filters as F

    with _instance(ctx, data, endpoint, instance) as bt:
        # one cell per row, no values: a count moves keys only
        flt = F.Chain((F.CellsPerRowLimit(1), F.StripValue()))
        typer.echo(sum(1 for _ in bt.table(table).read_rows(None, flt)))


_PARAM_TYPES = {"bytes": "BYTES", "string": "STRING", "int64": "INT64", "float64": "FLOAT64",
                "bool": "BOOL"}


def _query_params(args: list[str] | None) -> tuple[dict, dict]:
    """``name=value`` (BYTES, the text's UTF-8) or ``name:TYPE=value`` -> values and types."""
    values, types = {}, {}
    for arg in args or []:
        name, sep, text = arg.partition("=")
        if not sep or not name:
            raise CliError(f"expected NAME=VALUE or NAME:TYPE=VALUE, got {arg!r}")
        name, _, kind = name.partition(":")
        t = _PARAM_TYPES.get((kind or "bytes").lower())
        if t is None:
            raise CliError(f"parameter {name!r}: type {kind!r} is not one of {sorted(_PARAM_TYPES)}")
        try:
            values[name] = {"BYTES": str.encode, "STRING": str, "INT64": int, "FLOAT64": float,
                            "BOOL": lambda s: {"true": True, "false": False}[s.lower()]}[t](text)
        except (ValueError, KeyError):
            raise CliError(f"parameter {name!r}: {text!r} is not a {t}") from None
        types[name] = t
    return values, types


def _sql_value(v: object) -> object:
    """An answer's value in JSON's terms: bytes as text when UTF-8 (else {"$binary"}),
    maps as objects, timestamps and dates ISO 8601."""
    import base64
    if isinstance(v, bytes):
        try:
            return v.decode()
        except UnicodeDecodeError:
            return {"$binary": base64.b64encode(v).decode()}
    if isinstance(v, (datetime.datetime, datetime.date)):
        return v.isoformat()
    if isinstance(v, dict):
        return {k: _sql_value(x) for k, x in v.items()}
    if isinstance(v, list) and v and all(isinstance(e, tuple) and len(e) == 2 for e in v):
        return {str(_sql_value(k)): _sql_value(x) for k, x in v}  # a map
    if isinstance(v, (list, tuple)):
        return [_sql_value(x) for x in v]
    return v


@bt_app.command("sql")
@guarded
def sql(ctx: typer.Context,
        query: Annotated[str, typer.Argument(help="A GoogleSQL query: SELECT ... FROM TABLE.")],
        args: Annotated[list[str] | None, typer.Argument(
            metavar="[NAME[:TYPE]=VALUE]...", show_default=False,
            help="Query parameters (@NAME): bytes by default; TYPE string, int64, float64, "
                 "bool or bytes.")] = None,
        json_lines: Annotated[bool, typer.Option("--json", help="One JSON object per row.")] = False,
        data: DataOpt = None, endpoint: BtEndpointOpt = None,
        instance: InstanceOpt = "widetable") -> None:
    """Run a GoogleSQL query over the Bigtable tables (_key and one map column per family)."""
    import json

    values, types = _query_params(args)
    with _instance(ctx, data, endpoint, instance) as bt:
        result = bt.execute_query(query, values, types)
        names = [n for n, _ in result.columns]
        if json_lines:
            for row in result:
                typer.echo(json.dumps({n or f"${i + 1}": _sql_value(v)
                                       for i, (n, v) in enumerate(zip(names, row))},
                                      ensure_ascii=False))
            return
        from rich.table import Table as RichTable
        from rich.text import Text

        from . import render
        table = RichTable()
        for n, t in result.columns:
            table.add_column(Text(f"{n}\n{t}"))
        count = 0
        for row in result:
            table.add_row(*[Text("NULL", "dim") if v is None else Text(
                str(v) if isinstance(v, (str, int, float)) else
                json.dumps(_sql_value(v), ensure_ascii=False)) for v in row])
            count += 1
        render.console.print(table)
        render.note(f"{count} row{'s' if count != 1 else ''}")
