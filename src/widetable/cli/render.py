"""Formatting for the terminal: rich tables of rows and schemas, JSON lines, errors.

Every cell goes through :class:`rich.text.Text`, so a value such as
``"[bold]"`` prints as itself rather than as console markup.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from rich import box
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from ..db import TableDescription
from ..table.row import Row
from ..table.values import ATTRIBUTE_TYPES
from .literals import columns_to_json, format_literal, pk_to_json, to_json

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

_STYLES = {
    "STRING": "green",
    "INTEGER": "cyan",
    "DOUBLE": "cyan",
    "BOOLEAN": "magenta",
    "BINARY": "yellow",
}


def type_name(value: object) -> str:
    return ATTRIBUTE_TYPES.get(type(value), type(value).__name__)


def value_text(value: object) -> Text:
    """A value for a table cell: strings as they are, everything else as its literal."""
    text = value if type(value) is str else format_literal(value)
    return Text(text, style=_STYLES.get(type_name(value), ""))


def format_ts(ts: int) -> str:
    """A timestamp in milliseconds as ``1718000000123 (2024-06-10 06:13:20.123Z)``."""
    try:
        when = datetime.fromtimestamp(ts / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return str(ts)
    return f"{ts} ({when.strftime('%Y-%m-%d %H:%M:%S')}.{ts % 1000:03d}Z)"


def print_error(code: str | None, message: str) -> None:
    """``Error [CODE]: message`` in red on stderr."""
    head = f"Error [{code}]: " if code else "Error: "
    err_console.print(Text(head + message, style="bold red"), soft_wrap=True)


def out(message: str) -> None:
    """A plain line on stdout, never wrapped, tab-expanded or read as markup."""
    sys.stdout.write(message + "\n")


def err(message: str) -> None:
    """A plain line on stderr, never wrapped or read as markup."""
    err_console.print(Text(message), soft_wrap=True)


def note(message: str) -> None:
    """A status line on stderr, so stdout stays data."""
    err_console.print(Text(message, style="dim"), soft_wrap=True)


def rows_table(rows: Sequence[Row], pk_names: Sequence[str], title: str | None = None) -> RichTable:
    """One line per row: key columns first, then every attribute column in name order."""
    attrs = sorted({name for row in rows for name in row.columns})
    table = RichTable(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for name in pk_names:
        table.add_column(Text(name), style="bold")
    for name in attrs:
        table.add_column(Text(name))
    for row in rows:
        cells = [value_text(v) for v in row.primary_key]
        cells += [value_text(row.columns[n]) if n in row.columns else Text("") for n in attrs]
        table.add_row(*cells)
    return table


def row_detail_table(row: Row, pk_names: Sequence[str]) -> RichTable:
    """One line per returned cell version: column, value, type, timestamp."""
    table = RichTable(
        title=Text("primary key " + format_literal_list(row.primary_key, pk_names)),
        title_justify="left",
    )
    for heading in ("column", "value", "type", "timestamp"):
        table.add_column(heading)
    for name, value, ts in row.cells:
        table.add_row(Text(name), value_text(value), type_name(value), format_ts(ts))
    return table


def format_literal_list(values: Iterable[object], names: Sequence[str]) -> str:
    return ", ".join(f"{n}={format_literal(v)}" for n, v in zip(names, values))


def schema_table(desc: TableDescription) -> RichTable:
    table = RichTable(title=Text(f"table {desc.name}"), title_justify="left")
    table.add_column("primary key column")
    table.add_column("type")
    table.add_column("role")
    for i, (name, type_) in enumerate(desc.primary_key):
        table.add_row(Text(name), type_, "partition key" if i == 0 else "")
    return table


def options_table(desc: TableDescription) -> RichTable:
    opts = desc.options
    table = RichTable(show_header=False, title="options", title_justify="left")
    table.add_column("option", style="bold")
    table.add_column("value")
    table.add_row("max_versions", str(opts.max_versions))
    table.add_row("ttl", "forever (-1)" if opts.ttl < 0 else f"{opts.ttl} s")
    table.add_row("max_time_deviation", f"{opts.max_time_deviation} s")
    table.add_row("table_id", str(desc.table_id))
    created = datetime.fromtimestamp(desc.created_at, tz=UTC)
    table.add_row("created_at", created.strftime("%Y-%m-%d %H:%M:%SZ"))
    return table


def partitions_table(desc: TableDescription, limit: int = 50) -> RichTable:
    """Each partition's range, estimated size, recent rates, state and hot key."""
    parts = desc.partitions
    title = f"partitions ({len(parts)})" + (f", first {limit}" if len(parts) > limit else "")
    table = RichTable(title=title, title_justify="left")
    for name, justify in (
        ("#", "right"), ("start", "left"), ("end", "left"), ("rows", "right"),
        ("bytes", "right"), ("reads/s", "right"), ("writes/s", "right"), ("state", "left"),
        ("hot key", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for p in parts[:limit]:
        table.add_row(
            str(p.index), Text("-inf" if p.start is None else repr(p.start)),
            Text("+inf" if p.end is None else repr(p.end)), f"~{p.rows:,}", f"~{p.bytes:,}",
            f"{p.reads_per_sec:,.1f}", f"{p.writes_per_sec:,.1f}", p.state,
            Text("" if p.hot_key is None else repr(p.hot_key), style="red"),
        )
    return table


def history_table(desc: TableDescription, limit: int = 10) -> RichTable:
    """The latest splits, merges and unsplittable hot keys, newest last."""
    events = desc.split_history[-limit:]
    table = RichTable(title=f"split history (last {len(events)})", title_justify="left")
    for name in ("time", "kind", "reason", "key", "parents -> children"):
        table.add_column(name)
    for e in events:
        when = datetime.fromtimestamp(e.time, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        table.add_row(
            when, e.kind, e.reason, Text("" if e.key is None else repr(e.key)),
            f"{list(e.parents)} -> {list(e.children)}",
        )
    return table


def indexes_table(desc: TableDescription) -> RichTable:
    """Secondary indexes with their key and, for global ones, the lag, the applier's last
    error and the rows too long to index."""
    table = RichTable(title="indexes", title_justify="left")
    for name in ("name", "type", "primary key", "then the table's key", "defined columns", "lag",
                 "too long", "error"):
        table.add_column(name)
    for ix in desc.indexes:
        lag = "-" if ix.lag_ms is None else f"{ix.lag_ms} ms"
        if ix.behind_retention:
            lag += " [red](behind retention)[/red]"
        error = Text("")
        if ix.error is not None:
            error = Text(f"{ix.error} ({ix.errors}x, {_when(ix.error_at)})", style="red")
        table.add_row(
            ix.name, ix.index_type, ", ".join(ix.primary_key), ", ".join(ix.base_key) or "-",
            ", ".join(ix.defined_columns), lag,
            Text(f"{ix.too_long_rows:,}", style="red" if ix.too_long_rows else ""), error,
        )
    return table


def background_table(desc: TableDescription) -> RichTable:
    """The store's background loops: ok, or the last error, when and how often."""
    table = RichTable(title="background", title_justify="left")
    for name in ("loop", "state", "errors", "last error", "at"):
        table.add_column(name)
    for b in desc.background:
        state = ("ok" if b.ok else "[red]failing[/red]") if b.running else "stopped"
        table.add_row(b.name, state, str(b.errors), Text(b.error or "", style="red"),
                      _when(b.error_at) if b.error_at is not None else "")
    return table


def _when(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def row_json(row: Row, with_versions: bool = False) -> str:
    """A row as one JSON line: ``{"pk": [...], "columns": {...}}`` (the JSONL export format)."""
    obj: dict = {"pk": pk_to_json(row.primary_key), "columns": columns_to_json(row.columns)}
    if with_versions:
        obj["versions"] = {
            name: [[to_json(v), ts] for v, ts in row.versions(name)] for name in sorted(row.columns)
        }
    return json.dumps(obj, ensure_ascii=False)


def write_line(line: str) -> None:
    """Raw output to stdout: no wrapping or markup, for machine-readable formats."""
    sys.stdout.write(line + "\n")
