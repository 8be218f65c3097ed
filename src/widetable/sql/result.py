"""SQL results: columns with SQL types, rows, Arrow and pandas.

A result is read once as a stream (iteration or ``batches()``), or whole
(``rows``, ``to_arrow()``, ``to_pandas()``, which keep what they read and may
be called again). A large answer streams from DuckDB batch by batch; only the
whole-result calls hold it all in memory.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from ..errors import ParameterInvalid


def sql_type(t: pa.DataType) -> str:
    """The SQL type name of an Arrow type."""
    if pa.types.is_integer(t) or (pa.types.is_decimal(t) and t.scale == 0):
        return "BIGINT"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "DOUBLE"
    if pa.types.is_boolean(t):
        return "BOOL"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or str(t) == "string_view":
        return "MEDIUMTEXT"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or str(t) == "binary_view":
        return "MEDIUMBLOB"
    if pa.types.is_null(t):
        return "NULL"
    if pa.types.is_date(t):
        return "DATE"
    if pa.types.is_timestamp(t):
        return "DATETIME"
    return str(t).upper()


def _target(t: pa.DataType) -> pa.DataType:
    """What an answer column is delivered as: int64 for whole decimals (DuckDB's SUM of
    BIGINT is HUGEINT), float64 for other decimals, plain strings and binaries."""
    if pa.types.is_decimal(t):
        return pa.int64() if t.scale == 0 else pa.float64()
    if pa.types.is_large_string(t) or str(t) == "string_view":
        return pa.string()
    if pa.types.is_large_binary(t) or str(t) == "binary_view":
        return pa.binary()
    return t


def normalized_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, _target(f.type)) for f in schema])


def normalize(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.equals(schema):
        return batch
    arrays = []
    for col, field in zip(batch.columns, schema):
        if col.type.equals(field.type):
            arrays.append(col)
            continue
        try:
            arrays.append(col.cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise ParameterInvalid(f"result column {field.name!r} holds a value out of the range "
                                   f"of {sql_type(field.type)}") from None
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class SQLResult:
    """The answer of one statement.

    ``columns``: ``[(name, SQL type)]``. ``rows``: every row as a tuple. Iterating
    yields the rows as tuples, streaming. ``stats``: rows the store read per table.
    ``kind``: the statement's kind (query, explain, copy, create, alter_add,
    alter_drop, drop_mapping, describe, show_tables, show_index).
    """

    __slots__ = ("columns", "_rows", "_stream", "_schema", "_table", "_closer", "stats",
                 "_started", "kind")

    def __init__(self, columns: list[tuple[str, str]], rows: list[tuple] | None = None,
                 stream=None, schema: pa.Schema | None = None,
                 stats: dict[str, int] | None = None, closer=None) -> None:
        self.kind = "query"
        self.columns = columns
        self._rows = rows
        self._stream = stream  # iterator of record batches
        self._schema = schema
        self._table: pa.Table | None = None
        self._closer = closer
        self.stats = stats if stats is not None else {}
        self._started = False

    @property
    def column_names(self) -> list[str]:
        return [c[0] for c in self.columns]

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The answer as Arrow record batches, streamed (once)."""
        if self._table is not None:
            yield from self._table.to_batches()
            return
        if self._stream is None:
            yield from self._whole().to_batches()
            return
        if self._started:
            raise ParameterInvalid("this SQL result was already read as a stream")
        self._started = True
        for b in self._stream:
            yield normalize(b, self._schema)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[tuple]:
        if self._rows is not None:
            yield from self._rows
            return
        for b in self.batches():
            cols = [c.to_pylist() for c in b.columns]
            yield from zip(*cols) if cols else ((),) * b.num_rows

    @property
    def rows(self) -> list[tuple]:
        if self._rows is None:
            t = self.to_arrow()
            cols = [c.to_pylist() for c in t.columns]
            self._rows = list(zip(*cols)) if cols else [()] * t.num_rows
        return self._rows

    def _whole(self) -> pa.Table:
        schema = self._schema or pa.schema([pa.field(n, _arrow_of(t)) for n, t in self.columns])
        rows = self._rows or []
        arrays = [pa.array([r[i] for r in rows], type=f.type) for i, f in enumerate(schema)]
        return pa.Table.from_arrays(arrays, schema=schema)

    def to_arrow(self) -> pa.Table:
        """The whole answer as a ``pyarrow.Table``."""
        if self._table is None:
            if self._stream is not None:
                batches = list(self.batches())
                self._table = pa.Table.from_batches(batches, schema=self._schema)
            else:
                self._table = self._whole()
        return self._table

    def to_pandas(self):
        """The whole answer as a ``pandas.DataFrame`` (needs pandas installed)."""
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise ParameterInvalid("to_pandas needs pandas: pip install pandas") from None
        return self.to_arrow().to_pandas()

    def close(self) -> None:
        """Stop the statement (and its scans) if its answer is not read to the end."""
        if self._closer is not None:
            self._closer()

    def __enter__(self) -> SQLResult:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        return f"<SQLResult columns={self.column_names}>"


_ARROW = {"BIGINT": pa.int64(), "DOUBLE": pa.float64(), "BOOL": pa.bool_(),
          "MEDIUMTEXT": pa.string(), "MEDIUMBLOB": pa.binary()}


def _arrow_of(sql: str) -> pa.DataType:
    return _ARROW.get(sql.split("(")[0].upper(), pa.string())
