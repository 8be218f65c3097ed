"""Import and export of rows as JSON lines or CSV.

JSONL: one row per line, ``{"pk": [key values in key order], "columns": {name: value}}``,
values in the JSON forms of :mod:`.literals` (bytes as ``{"$binary": base64}``).
Blank lines are skipped. An export holds the newest version of each column;
older versions and timestamps are not exported, and an import writes with the
current time.

CSV: the header names the primary-key columns (any order, all required) and
then the attribute columns. Each cell is a literal (see :mod:`.literals`): JSON
if it parses, else a bare string. An empty cell means the row lacks that
column. A key cell of a STRING column that reads as another type (``123``) is
taken as its text.

An import writes through ``Database.batch_write_row`` in batches of up to 200
rows. A row the library rejects is counted and reported with its line number;
the other rows are written.
"""

from __future__ import annotations

import csv
import json
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..db import Database
from ..errors import WidetableError
from ..table.batch import MAX_BATCH_WRITE
from ..table.row import Row
from .literals import (
    CliError,
    LiteralError,
    columns_to_json,
    format_literal,
    from_json,
    parse_literal,
    pk_from_json,
    pk_to_json,
)

FORMATS = ("jsonl", "csv")
KEPT_ERRORS = 20
_PROGRESS_EVERY = 500


@dataclass(slots=True)
class Record:
    """One row read from a file, or why it could not be read."""

    line: int
    pk: object = None
    columns: dict = field(default_factory=dict)
    error: str | None = None


@dataclass(slots=True)
class RowError:
    line: int
    code: str
    message: str


@dataclass(slots=True)
class ImportReport:
    """Rows written and rows failed; the first ``KEPT_ERRORS`` failures in detail."""

    written: int = 0
    failed: int = 0
    errors: list[RowError] = field(default_factory=list)

    def fail(self, line: int, code: str, message: str) -> None:
        self.failed += 1
        if len(self.errors) < KEPT_ERRORS:
            self.errors.append(RowError(line, code, message))


def guess_format(path: str, given: str | None) -> str:
    if given is not None:
        return given
    lower = path.lower()
    if lower.endswith(".parquet"):
        return "parquet"
    if lower.endswith((".arrow", ".feather", ".ipc")):
        return "arrow"
    return "csv" if lower.endswith(".csv") else "jsonl"


# -- reading ------------------------------------------------------------------


def decode_lines(raw: Iterable[bytes]) -> Iterator[str]:
    """Lines of a UTF-8 file, without a leading byte-order mark.

    Bytes that are not UTF-8 become lone surrogates rather than stopping the
    import; the library then rejects just the rows that hold them.
    """
    for number, line in enumerate(raw):
        text = line.decode("utf-8", "surrogateescape")
        yield text.removeprefix("\ufeff") if number == 0 else text


def read_jsonl(lines: Iterable[str]) -> Iterator[Record]:
    """Records from JSON lines ``{"pk": [...], "columns": {...}}``."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict) or "pk" not in obj or set(obj) - {"pk", "columns"}:
                raise LiteralError("", 'expected an object {"pk": [...], "columns": {...}}')
            raw_columns = obj.get("columns") or {}
            if not isinstance(raw_columns, dict):
                raise LiteralError("", '"columns" must be an object')
            yield Record(
                number,
                pk_from_json(obj["pk"]),
                {k: from_json(v, f"column {k!r}") for k, v in raw_columns.items()},
            )
        except json.JSONDecodeError as exc:
            yield Record(number, error=f"not valid JSON ({exc.msg})")
        except LiteralError as exc:
            yield Record(number, error=str(exc))


_CSV_FIELD_LIMIT = 16 * 2**20


def read_csv(lines: Iterable[str], primary_key: list[tuple[str, str]]) -> Iterator[Record]:
    """Records from CSV with a header row.

    The header is read at once, so an unusable one raises CliError before any row is read.
    """
    # A cell may hold a 2 MB value, more as a BINARY literal: past csv's 128 KiB default.
    csv.field_size_limit(max(csv.field_size_limit(), _CSV_FIELD_LIMIT))
    reader = csv.reader(lines)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise CliError(f"cannot read the CSV header: {exc}") from None
    if header is None:
        return iter(())
    names = [h.strip() for h in header]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise CliError(f"CSV header names column {dupes[0]!r} twice")
    pk_types = dict(primary_key)
    missing = [n for n in pk_types if n not in names]
    if missing:
        raise CliError(f"CSV header lacks primary key column(s) {missing}; it has {names}")
    return _csv_records(reader, names, pk_types)


def _csv_records(reader: Any, names: list[str], pk_types: dict[str, str]) -> Iterator[Record]:
    positions = [names.index(n) for n in pk_types]
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:  # the file breaks off here: the rows before it stand
            yield Record(reader.line_num, error=f"cannot be read as CSV ({exc}); the rest of "
                         "the file is not read")
            return
        line = reader.line_num
        if not cells:
            continue
        if len(cells) != len(names):
            yield Record(line, error=f"has {len(cells)} cells; the header has {len(names)}")
            continue
        try:
            pk = tuple(_key_cell(cells[i], pk_types[names[i]], names[i]) for i in positions)
            columns = {
                name: parse_literal(cell, f"column {name!r}")
                for name, cell in zip(names, cells)
                if name not in pk_types and cell != ""
            }
        except LiteralError as exc:
            yield Record(line, error=str(exc))
            continue
        yield Record(line, pk, columns)


def _key_cell(cell: str, type_: str, name: str) -> object:
    if cell == "":
        raise LiteralError("", f"primary key column {name!r} is empty")
    value = parse_literal(cell, f"primary key column {name!r}")
    if type_ == "STRING" and type(value) is not str:
        return cell
    return value


# -- writing ------------------------------------------------------------------


def import_records(
    db: Database,
    table_name: str,
    records: Iterable[Record],
    on_batch: Callable[[ImportReport], None] = lambda report: None,
    batch_rows: int = MAX_BATCH_WRITE,
) -> ImportReport:
    """Put every record into ``table_name`` in batches; report rows written and failed.

    A batch never names a row twice: a repeated key closes the batch, so the
    later line wins as it would with one put per line.
    """
    table = db.table(table_name)
    report = ImportReport()
    items: list[tuple] = []
    lines: list[int] = []
    keys: set[tuple] = set()

    def flush() -> None:
        if items:
            _write_batch(db, items, lines, report)
            items.clear()
            lines.clear()
            keys.clear()
            on_batch(report)

    for record in records:
        if record.error is not None:
            report.fail(record.line, "ParseError", record.error)
            continue
        try:
            key = table.normalize_pk(record.pk)
        except WidetableError as exc:
            report.fail(record.line, exc.code, exc.message)
            continue
        if key in keys or len(items) >= batch_rows:
            flush()
        keys.add(key)
        items.append((table_name, "put", key, record.columns))
        lines.append(record.line)
    flush()
    return report


def _write_batch(db: Database, items: list, lines: list[int], report: ImportReport) -> None:
    """Write one batch; if the library rejects it whole (e.g. over 4 MB), split it."""
    try:
        results = db.batch_write_row(items)
    except WidetableError as exc:
        if len(items) == 1:
            report.fail(lines[0], exc.code, exc.message)
            return
        half = len(items) // 2
        _write_batch(db, items[:half], lines[:half], report)
        _write_batch(db, items[half:], lines[half:], report)
        return
    for line, result in zip(lines, results):
        if result.ok:
            report.written += 1
        else:
            err = result.error
            report.fail(
                line, getattr(err, "code", type(err).__name__), getattr(err, "message", str(err))
            )


def export_jsonl(rows: Iterable[Row], out: TextIO, on_rows: Callable[[int], None]) -> int:
    """Write each row as a JSON line; return the number of rows."""
    count = 0
    for row in rows:
        out.write(_row_line(row))
        count += 1
        if count % _PROGRESS_EVERY == 0:
            on_rows(count)
    on_rows(count)
    return count


def _row_line(row: Row) -> str:
    obj = {"pk": pk_to_json(row.primary_key), "columns": columns_to_json(row.columns)}
    return json.dumps(obj, ensure_ascii=False) + "\n"


def export_csv(
    rows: Iterable[Row], pk_names: list[str], out: TextIO, on_rows: Callable[[int], None]
) -> int:
    """Write rows as CSV; return the number of rows.

    The header needs every column name before the first row, so rows are
    spooled to a temporary file while the names are collected.
    """
    attrs: set[str] = set()
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
        count = 0
        for row in rows:
            attrs.update(row.columns)
            spool.write(_row_line(row))
            count += 1
            if count % _PROGRESS_EVERY == 0:
                on_rows(count)
        spool.seek(0)
        header = sorted(attrs)
        writer = csv.writer(out, lineterminator="\n")
        # With "\n" as the line end csv quotes "\n" but not a bare "\r", which a reader
        # then takes for a line end: rows holding one are written fully quoted.
        quoted = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
        writer.writerow(list(pk_names) + header)
        for line in spool:
            obj = json.loads(line)
            cells = [format_literal(from_json(v)) for v in obj["pk"]]
            columns = obj["columns"]
            cells += [format_literal(from_json(columns[n])) if n in columns else "" for n in header]
            (quoted if any("\r" in c for c in cells) else writer).writerow(cells)
    on_rows(count)
    return count
