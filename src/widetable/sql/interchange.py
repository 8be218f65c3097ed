"""Arrow and Parquet interchange: a table's rows as record batches, files both ways.

Types map both ways: INTEGER <-> int64, DOUBLE <-> float64, BOOLEAN <-> bool,
STRING <-> string, BINARY <-> binary (Arrow's other integer widths and float32
read as INTEGER and DOUBLE). A batch's schema is the key columns, then the
requested columns (``columns=``), or else the table's predefined columns and
the columns the first page holds, in name order. A later value that does not
fit (another type, or a column the schema lacks) is ``OTSParameterInvalid``
naming the row; the batches before it have been yielded, so a file being
written keeps them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from ..errors import ParameterInvalid
from .types import BINARY, BOOLEAN, DOUBLE, INTEGER, STRING

if TYPE_CHECKING:
    from ..table.table import Table

ARROW = {INTEGER: pa.int64(), DOUBLE: pa.float64(), BOOLEAN: pa.bool_(), STRING: pa.string(),
         BINARY: pa.binary()}
_PY = {int: INTEGER, float: DOUBLE, bool: BOOLEAN, str: STRING, bytes: BINARY}
_NONE = type(None)


def widetable_type(t: pa.DataType, column: str) -> str:
    """The widetable type an Arrow column's values are written as."""
    if pa.types.is_boolean(t):
        return BOOLEAN
    if pa.types.is_integer(t):
        return INTEGER
    if pa.types.is_floating(t):
        return DOUBLE
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return STRING
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return BINARY
    raise ParameterInvalid(f"column {column!r} is of Arrow type {t}, which has no widetable type; "
                           "use int64, float64, bool, string or binary")


def table_batches(table: Table, start: object = None, end: object = None,
                  columns: list[str] | None = None, batch_rows: int = 5000
                  ) -> Iterator[pa.RecordBatch]:
    """The newest version of each row of ``[start, end)`` as record batches (streamed)."""
    if columns is not None and (not isinstance(columns, list) or
                                not all(isinstance(c, str) for c in columns)):
        raise ParameterInvalid(f"columns must be a list of column names, got {columns!r}")
    names = list(table.schema.pk_names)
    key_types = list(table.schema.pk_types)
    schema: pa.Schema | None = None
    types: dict[str, str] = {}
    page: list = []
    count = 0
    for row in table.scan(start, end, columns=columns):
        page.append(row)
        if len(page) >= batch_rows:
            if schema is None:
                schema, types = _schema(table, names, key_types, columns, page)
            yield _batch(page, names, schema, types, count)
            count += len(page)
            page = []
    if schema is None:
        schema, types = _schema(table, names, key_types, columns, page)
    if page or count == 0:
        yield _batch(page, names, schema, types, count)


def _schema(table: Table, names: list, key_types: list, columns: list[str] | None,
            page: list) -> tuple[pa.Schema, dict[str, str]]:
    defined = dict(table.schema.defined_columns)
    attrs: dict[str, str] = {}
    wanted = columns if columns is not None else sorted(
        set(defined) | {c for r in page for c in r.columns})
    for c in wanted:
        if c in names:
            continue
        t = defined.get(c)
        if t is None:
            t = next((_PY[type(r.columns[c])] for r in page if r.columns.get(c) is not None),
                     STRING)
        attrs[c] = t
    fields = [pa.field(n, ARROW[t], nullable=False) for n, t in zip(names, key_types)]
    fields += [pa.field(n, ARROW[t]) for n, t in attrs.items()]
    return pa.schema(fields), attrs


def _batch(page: list, names: list, schema: pa.Schema, types: dict[str, str],
           before: int) -> pa.RecordBatch:
    arrays = [pa.array([r.primary_key[i] for r in page], type=schema.field(i).type)
              for i in range(len(names))]
    for c, t in types.items():
        values = [r.columns.get(c) for r in page]
        kinds = set(map(type, values)) - {_NONE}
        if kinds and kinds != {type(_example(t))}:
            for n, (r, v) in enumerate(zip(page, values)):
                if v is not None and _PY.get(type(v)) != t:
                    raise ParameterInvalid(
                        f"row {before + n + 1} ({r.primary_key!r}) holds {type(v).__name__} {v!r} "
                        f"in column {c!r}, which earlier rows made {t}; the rows before it were "
                        "kept; pass columns= to choose the columns")
        arrays.append(pa.array(values, type=ARROW[t]))
    extra = {c for r in page for c in r.columns} - set(types) - set(names)
    if extra:
        c = sorted(extra)[0]
        n, r = next((n, r) for n, r in enumerate(page) if c in r.columns)
        raise ParameterInvalid(
            f"row {before + n + 1} ({r.primary_key!r}) has column {c!r}, which the rows before "
            "it lack; the rows before it were kept; pass columns= to choose the columns")
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _example(t: str) -> object:
    return {INTEGER: 0, DOUBLE: 0.0, BOOLEAN: False, STRING: "", BINARY: b""}[t]


def table_to_arrow(table: Table, start: object = None, end: object = None,
                   columns: list[str] | None = None) -> pa.Table:
    batches = list(table_batches(table, start, end, columns))
    return pa.Table.from_batches(batches, schema=batches[0].schema)


def write_file(batches: Iterator[pa.RecordBatch], path: str, fmt: str,
               on_rows: Callable[[int], None] | None = None) -> int:
    """Write ``batches`` to ``path`` as Parquet or an Arrow IPC file, streaming; on an
    error the file holds every batch before it. Returns the rows written."""
    import pyarrow.parquet as pq
    writer = None
    count = 0
    sink = None
    try:
        for batch in batches:
            if writer is None:
                if fmt == "parquet":
                    writer = pq.ParquetWriter(path, batch.schema)
                else:
                    sink = pa.OSFile(path, "wb")
                    writer = pa.ipc.new_file(sink, batch.schema)
            writer.write_batch(batch)
            count += batch.num_rows
            if on_rows is not None:
                on_rows(count)
    finally:
        if writer is not None:
            writer.close()
        if sink is not None:
            sink.close()
    return count


def read_rows(path: str, primary_key: list[str]) -> Iterator[tuple[int, tuple, dict]]:
    """``(row number, pk, columns)`` of each row of a Parquet or Arrow file, streamed;
    nulls are left out of ``columns``. A key column missing from the file is an error."""
    if path.endswith((".arrow", ".feather", ".ipc")):
        reader = pa.ipc.open_file(path)
        schema = reader.schema
        batches: Iterator[pa.RecordBatch] = (reader.get_batch(i)
                                              for i in range(reader.num_record_batches))
    else:
        import pyarrow.parquet as pq
        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow
        batches = pf.iter_batches(batch_size=5000)
    missing = [k for k in primary_key if k not in schema.names]
    if missing:
        raise ParameterInvalid(f"{path!r} has no column {missing[0]!r} of the primary key")
    for f in schema:
        widetable_type(f.type, f.name)
    n = 0
    for batch in batches:
        cols = {name: batch.column(i).to_pylist() for i, name in enumerate(batch.schema.names)}
        attrs = [c for c in cols if c not in primary_key]
        for i in range(batch.num_rows):
            n += 1
            pk = tuple(cols[k][i] for k in primary_key)
            yield n, pk, {c: cols[c][i] for c in attrs if cols[c][i] is not None}
