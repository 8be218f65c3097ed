"""Tablestore protocol values <-> widetable library values, shared by server and client.

Primary keys travel as PlainBuffer rows of ``(name, value)`` cells; filters and
conditions as nested protobuf ``Filter`` messages whose single-column values
are bare PlainBuffer values. Capacity units are counted as the service does:
a row's size is the UTF-8 length of every column name plus the size of every
value (STRING, BINARY: their length; INTEGER, DOUBLE: 8; BOOLEAN: 1), and one
CU is 4 KB, rounded up; a read of a missing row costs 1 read CU.

Rows cross here in both directions (``read_key``, ``read_put``, ``decode_row``;
``encode_result``, ``encode_key``, ``encode_put``): through ``rowshape`` when the
row has a known shape, whose size is then its CU size already, else through
``plainbuffer``'s general coder.
"""

from __future__ import annotations

from google.protobuf.message import DecodeError

from ..errors import NotSupported, ParameterInvalid, describe
from ..keys.codec import INF_MAX, INF_MIN
from ..table.filters import (
    MAX_FILTER_DEPTH,
    ColumnPagination,
    CompositeFilter,
    Condition,
    Filter,
    RowExistence,
    SingleColumnFilter,
    SingleColumnRegexFilter,
)
from ..table.row import Row
from . import plainbuffer, rowshape
from .plainbuffer import Cell, PlainRow
from .proto import enum_value, pb

CU_BYTES = 4096

FT_SINGLE = enum_value("FilterType", "FT_SINGLE_COLUMN_VALUE")
FT_COMPOSITE = enum_value("FilterType", "FT_COMPOSITE_COLUMN_VALUE")
FT_PAGINATION = enum_value("FilterType", "FT_COLUMN_PAGINATION")

COMPARATORS = {
    enum_value("ComparatorType", name): op
    for name, op in [
        ("CT_EQUAL", "=="), ("CT_NOT_EQUAL", "!="), ("CT_GREATER_THAN", ">"),
        ("CT_GREATER_EQUAL", ">="), ("CT_LESS_THAN", "<"), ("CT_LESS_EQUAL", "<="),
    ]
}
OPERATORS = {op: ct for ct, op in COMPARATORS.items()}
# ValueTransferRule.cast_type (VariantType) of a regex filter; a rule without one casts
# nothing (the match itself, a STRING).
CASTS = {enum_value("VariantType", name): cast for name, cast in [
    ("VT_INTEGER", "INTEGER"), ("VT_DOUBLE", "DOUBLE"), ("VT_STRING", "STRING")]}
CAST_CODES = {cast: code for code, cast in CASTS.items()}
LOGICAL = {
    enum_value("LogicalOperator", "LO_NOT"): "NOT",
    enum_value("LogicalOperator", "LO_AND"): "AND",
    enum_value("LogicalOperator", "LO_OR"): "OR",
}
LOGICAL_CODES = {name: code for code, name in LOGICAL.items()}
EXISTENCE = {
    enum_value("RowExistenceExpectation", "IGNORE"): RowExistence.IGNORE,
    enum_value("RowExistenceExpectation", "EXPECT_EXIST"): RowExistence.EXPECT_EXIST,
    enum_value("RowExistenceExpectation", "EXPECT_NOT_EXIST"): RowExistence.EXPECT_NOT_EXIST,
}
EXISTENCE_CODES = {v: k for k, v in EXISTENCE.items()}
PK_TYPES = {
    enum_value("PrimaryKeyType", "INTEGER"): "INTEGER",
    enum_value("PrimaryKeyType", "STRING"): "STRING",
    enum_value("PrimaryKeyType", "BINARY"): "BINARY",
}
PK_TYPE_CODES = {v: k for k, v in PK_TYPES.items()}
AUTO_INCREMENT_OPTION = enum_value("PrimaryKeyOption", "AUTO_INCREMENT")
DEFINED_TYPES = {
    enum_value("DefinedColumnType", "DCT_INTEGER"): "INTEGER",
    enum_value("DefinedColumnType", "DCT_DOUBLE"): "DOUBLE",
    enum_value("DefinedColumnType", "DCT_BOOLEAN"): "BOOLEAN",
    enum_value("DefinedColumnType", "DCT_STRING"): "STRING",
    enum_value("DefinedColumnType", "DCT_BLOB"): "BINARY",
}
DEFINED_TYPE_CODES = {v: k for k, v in DEFINED_TYPES.items()}
# Secondary indexes: a global index is updated asynchronously, a local one synchronously
# (the only two pairings Tablestore accepts).
IT_GLOBAL = enum_value("IndexType", "IT_GLOBAL_INDEX")
IT_LOCAL = enum_value("IndexType", "IT_LOCAL_INDEX")
IUM_ASYNC = enum_value("IndexUpdateMode", "IUM_ASYNC_INDEX")
IUM_SYNC = enum_value("IndexUpdateMode", "IUM_SYNC_INDEX")
INDEX_TYPES = {IT_GLOBAL: ("GLOBAL", IUM_ASYNC), IT_LOCAL: ("LOCAL", IUM_SYNC)}
INDEX_TYPE_CODES = {"GLOBAL": (IT_GLOBAL, IUM_ASYNC), "LOCAL": (IT_LOCAL, IUM_SYNC)}


# -- sizes and capacity units -----------------------------------------------------


def retention_hours(seconds: int) -> int:
    """A stream retention as Tablestore's ``expiration_time``: whole hours, rounded up (widetable
    keeps seconds), at most an int32."""
    return min(-(-seconds // 3600), 2**31 - 1)


def value_size(value: object) -> int:
    t = type(value)
    if t is str:
        return len(value.encode("utf-8"))  # type: ignore[union-attr]
    if t in (bytes, bytearray):
        return len(value)  # type: ignore[arg-type]
    if t is bool:
        return 1
    return 8 if t in (int, float) else 0


def pk_size(names: tuple[str, ...] | list[str], values: tuple | list) -> int:
    return sum(len(n.encode("utf-8")) + value_size(v) for n, v in zip(names, values))


def row_size(names: tuple[str, ...], row: Row) -> int:
    """Bytes of a returned row: its key, and every returned cell (each version counts)."""
    size = pk_size(names, row.primary_key)
    for name, value, _ in row.cells:
        size += len(name.encode("utf-8")) + value_size(value)
    return size


def capacity_units(nbytes: int) -> int:
    """CUs for ``nbytes``: 4 KB each, rounded up, at least 1."""
    return max(1, -(-nbytes // CU_BYTES))


def consumed(read: int = 0, write: int = 0):
    msg = pb.ConsumedCapacity()
    msg.capacity_unit.read = read
    msg.capacity_unit.write = write
    return msg


def field_head(field: int, length: int) -> bytes:
    """The tag and varint length of a length-delimited protobuf field."""
    if length < 0x4000:  # a row of a batch: one or two length bytes
        tag = (field << 3) | 2
        if length < 0x80:
            return bytes((tag, length))
        return bytes((tag, length & 0x7F | 0x80, length >> 7))
    head = bytearray(((field << 3) | 2,))
    while length > 0x7F:
        head.append(length & 0x7F | 0x80)
        length >>= 7
    head.append(length)
    return bytes(head)


def framed(field: int, data: bytes) -> bytes:
    """``data`` as a length-delimited protobuf field. Rows of a batch travel framed and
    joined: one upb call merges them all, where adding messages one at a time costs
    ~1 us each."""
    return field_head(field, len(data)) + data


# -- primary keys and rows --------------------------------------------------------


def key_values(table, items: list[tuple[str, object]], what: str = "primary key") -> tuple:
    """The key tuple of a PlainBuffer primary key, in the table's column order."""
    names = table._names
    if len(items) == len(names) and all(n == m for (n, _), m in zip(items, names)):
        return tuple(v for _, v in items)
    raise _invalid_pk(pk_name_mismatch([n for n, _ in items], names, table.name, what))


def pk_name_mismatch(got: list, names: tuple[str, ...], table: str, what: str) -> str:
    """The service's OTSInvalidPK message for a key whose column names are not the
    table's, in order ("Validate PK name fail. Input: PK2, Meta: PK1."), then ours."""
    detail = f"the {what} names {got}; table {table!r} has {list(names)}"
    for g, n in zip(got, names):
        if g != n:
            return f"Validate PK name fail. Input: {g}, Meta: {n}. ({detail})"
    return f"Primary key schema mismatch. ({detail})"


def _invalid_pk(message: str):
    from ..errors import InvalidPK

    return InvalidPK(message)


def decode_row(buf: bytes) -> PlainRow:
    """``plainbuffer.decode_row``, and the row's shape learned for the next buffers
    of its length (see ``rowshape``)."""
    row = plainbuffer.decode_row(buf)
    rowshape.learn(buf, row)
    return row


def read_key(table, buf: bytes, what: str = "primary key") -> tuple:
    """The key tuple of a PlainBuffer primary key (cells and a delete marker after it
    are not read), checked against the table's key columns."""
    hit = rowshape.decode(buf)
    if hit is not None and hit[0].pk_names == table._names:
        return hit[1]
    return key_values(table, decode_row(buf).primary_key, what)


def read_put(buf: bytes) -> tuple[tuple[str, ...], tuple, dict, int] | None:
    """``(key names, key values, {name: value}, size)`` of a plain put row (each
    column once, no timestamps, operations or delete marker) of a known shape, every
    checksum verified; None for any other buffer (``decode_row`` reads those).
    ``size`` counts for capacity units as ``row_size`` does."""
    hit = rowshape.decode(buf)
    if hit is None or not hit[0].plain:
        return None
    shape = hit[0]
    return shape.pk_names, hit[1], dict(zip(shape.names, hit[2])), shape.size


def encode_result(names: tuple[str, ...], row: Row) -> tuple[bytes, int]:
    """A result row in PlainBuffer (cells by column name, newest version first) and
    its size for capacity units (``row_size``)."""
    if row._versions is None:  # one version per column: the row has a shape
        columns = row.columns
        cols = tuple(sorted(columns))
        stamps = row._stamps  # one int, or {column: int}
        hit = rowshape.encode(
            names, row.primary_key, cols, tuple(map(columns.__getitem__, cols)),
            (stamps,) * len(cols) if type(stamps) is int else tuple(map(stamps.get, cols)),
        )
        if hit is not None:
            return hit[0], hit[1].size
    return plainbuffer.encode_row(plain_row(names, row)), row_size(names, row)


def encode_results(names: tuple[str, ...], rows: list[Row]) -> tuple[bytes, int]:
    """Result rows in one PlainBuffer (empty for none) and their size for capacity units."""
    if not rows:
        return b"", 0
    parts = [plainbuffer.HEADER_BYTES]
    size = 0
    for row in rows:
        data, n = encode_result(names, row)
        parts.append(data[4:])  # each row without its own header
        size += n
    return b"".join(parts), size


def encode_key(names: tuple[str, ...], values: tuple, delete_marker: bool = False) -> bytes:
    """A primary key (values in the order of ``names``) as a PlainBuffer row."""
    hit = rowshape.encode(names, values, marker=delete_marker)
    if hit is not None:
        return hit[0]
    return plainbuffer.encode_row(PlainRow(list(zip(names, values)), [], delete_marker))


def encode_put(names: tuple[str, ...], values: tuple, columns) -> bytes:
    """A put row: the key, then ``columns`` in any of the library's forms."""
    if type(columns) is dict:
        hit = rowshape.encode(names, values, tuple(columns), tuple(columns.values()))
        if hit is not None:
            return hit[0]
    return plainbuffer.encode_row(PlainRow(list(zip(names, values)), put_cells(columns)))


def plain_row(names: tuple[str, ...], row: Row) -> PlainRow:
    """A result row in PlainBuffer form: cells by column name, newest version first."""
    cells = [Cell(n, v, None, ts) for n, v, ts in row.cells]
    return PlainRow(list(zip(names, row.primary_key)), cells)


def pk_row(names: tuple[str, ...], values: tuple) -> PlainRow:
    return PlainRow(list(zip(names, values)))


def put_columns(row: PlainRow) -> list[tuple]:
    """A PutRow's cells as the library's ``[(name, value[, ts])]``."""
    out: list[tuple] = []
    for c in row.cells:
        if c.op is not None:
            raise ParameterInvalid(f"a put row cannot carry an operation on column {c.name!r}")
        if c.value is None:
            raise ParameterInvalid(f"column {c.name!r} of a put row has no value")
        out.append((c.name, c.value) if c.timestamp is None else (c.name, c.value, c.timestamp))
    return out


def update_parts(row: PlainRow) -> dict:
    """An UpdateRow's cells as the library's ``put`` / ``delete_version`` /
    ``delete_column`` / ``increment`` arguments."""
    put: list[tuple] = []
    delete_version: list[tuple] = []
    delete_column: list[str] = []
    increment: list[tuple] = []
    for c in row.cells:
        if c.op is None:
            if c.value is None:
                raise ParameterInvalid(f"column {c.name!r} of an update has no value")
            put.append((c.name, c.value) if c.timestamp is None else (c.name, c.value, c.timestamp))
        elif c.op == plainbuffer.DELETE_ONE_VERSION:
            if c.timestamp is None:
                raise ParameterInvalid(f"deleting one version of {c.name!r} needs its timestamp")
            delete_version.append((c.name, c.timestamp))
        elif c.op == plainbuffer.DELETE_ALL_VERSION:
            delete_column.append(c.name)
        else:
            if type(c.value) is not int:
                raise ParameterInvalid(f"increment of {c.name!r} must be an INTEGER, got {describe(c.value)}")
            increment.append((c.name, c.value))
    parts: dict = {}
    for name, value in (("put", put), ("delete_version", delete_version),
                        ("delete_column", delete_column), ("increment", increment)):
        if value:
            parts[name] = value
    return parts


def update_cells(put=None, delete_version=None, delete_column=None, increment=None) -> list[Cell]:
    """The library's update arguments as PlainBuffer cells (client side)."""
    cells: list[Cell] = []
    for name, value, ts in _cells(put):
        cells.append(Cell(name, value, None, ts))
    for name, ts in _items(delete_version):
        cells.append(Cell(name, None, plainbuffer.DELETE_ONE_VERSION, ts))
    for name in [delete_column] if isinstance(delete_column, str) else (delete_column or ()):
        cells.append(Cell(name, None, plainbuffer.DELETE_ALL_VERSION, None))
    for name, delta in _items(increment):
        cells.append(Cell(name, delta, plainbuffer.INCREMENT, None))
    return cells


def _items(value) -> list:
    if value is None:
        return []
    if isinstance(value, dict):
        return list(value.items())
    return [tuple(p) for p in value]


def _cells(columns) -> list[tuple[str, object, int | None]]:
    """Any of the library's column forms as ``(name, value, ts | None)``; the server
    validates values, so only the shape is read here."""
    out = []
    if columns is None:
        return out
    if isinstance(columns, dict):
        for name, value in columns.items():
            if type(value) is tuple and len(value) == 2:
                out.append((name, value[0], value[1]))
            else:
                out.append((name, value, None))
        return out
    if not isinstance(columns, (list, tuple)):
        raise ParameterInvalid(f"columns must be a dict or a list of tuples, got {describe(columns)}")
    for item in columns:
        if not isinstance(item, (list, tuple)) or len(item) not in (2, 3):
            raise ParameterInvalid(
                f"columns: expected (name, value) or (name, value, timestamp), got {describe(item)}"
            )
        out.append((item[0], item[1], item[2] if len(item) == 3 else None))
    return out


def put_cells(columns) -> list[Cell]:
    return [Cell(n, v, None, ts) for n, v, ts in _cells(columns)]


# -- filters and conditions -------------------------------------------------------


def decode_filter(data: bytes, allow_pagination: bool = True) -> object:
    """A serialized ``Filter`` message as a library Filter or ColumnPagination;
    OTSParameterInvalid if it, or a filter inside it, is not one."""
    try:
        return _decode_filter(data, allow_pagination, 0)
    except DecodeError as exc:
        raise ParameterInvalid(f"malformed filter: {exc}") from None


def _decode_filter(data: bytes, allow_pagination: bool, depth: int) -> object:
    if depth > MAX_FILTER_DEPTH:
        raise ParameterInvalid(f"filter nests deeper than {MAX_FILTER_DEPTH} levels")
    msg = pb.Filter.FromString(data)
    if msg.type == FT_SINGLE:
        f = pb.SingleColumnValueFilter.FromString(msg.filter)
        op = COMPARATORS.get(f.comparator)
        if op is None:
            raise NotSupported(f"filter comparator {f.comparator} (EXIST / NOT_EXIST) is not supported")
        if f.HasField("value_trans_rule"):  # SingleColumnValueRegexFilter
            rule = f.value_trans_rule
            cast = CASTS.get(rule.cast_type) if rule.HasField("cast_type") else "STRING"
            if cast is None:
                raise ParameterInvalid(f"a regex filter casts to VT_STRING, VT_INTEGER or "
                                       f"VT_DOUBLE, got cast_type {rule.cast_type}")
            return SingleColumnRegexFilter(
                f.column_name, op, plainbuffer.decode_value(f.column_value), rule.regex, cast,
                pass_if_missing=not f.filter_if_missing, latest_version_only=f.latest_version_only,
            )
        return SingleColumnFilter(
            f.column_name, op, plainbuffer.decode_value(f.column_value),
            pass_if_missing=not f.filter_if_missing, latest_version_only=f.latest_version_only,
        )
    if msg.type == FT_COMPOSITE:
        f = pb.CompositeColumnValueFilter.FromString(msg.filter)
        logic = LOGICAL.get(f.combinator)
        if logic is None:
            raise ParameterInvalid(f"unknown logical operator {f.combinator}")
        subs = tuple(  # partial: a sub-filter missing its required fields is refused below
            _decode_filter(sub.SerializePartialToString(), False, depth + 1)
            for sub in f.sub_filters
        )
        return CompositeFilter(logic, subs)  # type: ignore[arg-type]
    if msg.type == FT_PAGINATION:
        if not allow_pagination:
            raise ParameterInvalid("column pagination cannot be part of a composite filter or condition")
        f = pb.ColumnPaginationFilter.FromString(msg.filter)
        return ColumnPagination(f.offset, f.limit)
    raise ParameterInvalid(f"unknown filter type {msg.type}")


def encode_filter(f: object) -> bytes:
    """A library Filter or ColumnPagination as a serialized ``Filter`` message."""
    msg = pb.Filter()
    if isinstance(f, SingleColumnRegexFilter):
        msg.type = FT_SINGLE
        single = pb.SingleColumnValueFilter(
            comparator=OPERATORS[f.op], column_name=f.column,
            column_value=plainbuffer.encode_value(f.value),
            filter_if_missing=not f.pass_if_missing, latest_version_only=f.latest_version_only,
        )
        single.value_trans_rule.regex = f.regex
        single.value_trans_rule.cast_type = CAST_CODES[f.cast_type]
        msg.filter = single.SerializeToString()
    elif isinstance(f, SingleColumnFilter):
        msg.type = FT_SINGLE
        msg.filter = pb.SingleColumnValueFilter(
            comparator=OPERATORS[f.op], column_name=f.column,
            column_value=plainbuffer.encode_value(f.value),
            filter_if_missing=not f.pass_if_missing, latest_version_only=f.latest_version_only,
        ).SerializeToString()
    elif isinstance(f, CompositeFilter):
        msg.type = FT_COMPOSITE
        comp = pb.CompositeColumnValueFilter(combinator=LOGICAL_CODES[f.op])
        for sub in f.filters:
            comp.sub_filters.add().ParseFromString(encode_filter(sub))
        msg.filter = comp.SerializeToString()
    elif isinstance(f, ColumnPagination):
        msg.type = FT_PAGINATION
        msg.filter = pb.ColumnPaginationFilter(offset=f.offset, limit=f.limit).SerializeToString()
    else:
        raise ParameterInvalid(f"expected a filter, got {describe(f)}")
    return msg.SerializeToString()


def decode_condition(msg) -> Condition | None:
    """A ``Condition`` message as a library Condition (None when it checks nothing)."""
    existence = EXISTENCE.get(msg.row_existence)
    if existence is None:
        raise ParameterInvalid(f"unknown row existence expectation {msg.row_existence}")
    column = decode_filter(msg.column_condition, False) if msg.column_condition else None
    if existence is RowExistence.IGNORE and column is None:
        return None
    return Condition(existence, column)  # type: ignore[arg-type]


def encode_condition(msg, condition: Condition | None) -> None:
    """Fill a ``Condition`` message from a library Condition (or None)."""
    if condition is None:
        msg.row_existence = EXISTENCE_CODES[RowExistence.IGNORE]
        return
    msg.row_existence = EXISTENCE_CODES[condition.row_existence]
    if condition.column_condition is not None:
        msg.column_condition = encode_filter(condition.column_condition)


def time_range_of(msg) -> tuple[int, int] | int | None:
    """A ``TimeRange`` message as ``(start_ms, end_ms)``, or a specific time as that one
    timestamp (the library checks both)."""
    if msg.HasField("specific_time"):
        return msg.specific_time
    if msg.HasField("start_time") or msg.HasField("end_time"):
        return (msg.start_time if msg.HasField("start_time") else 0,
                msg.end_time if msg.HasField("end_time") else 2**63 - 1)
    return None


def is_filter(f: object) -> bool:
    return isinstance(f, (Filter, ColumnPagination))


def bound(names: tuple[str, ...], values: object, pad: object) -> list[tuple[str, object]]:
    """A range bound as PlainBuffer key cells, padded with ``pad`` to the full key. A dict
    naming a column that is not a key column is refused, as the store refuses it (it
    would otherwise be dropped, widening the range)."""
    if isinstance(values, dict):
        unknown = [n for n in values if n not in names]
        if unknown:
            raise _invalid_pk(f"range bound {describe(values)} names {describe(unknown[0])}, "
                              f"not one of the key columns {list(names)}")
        vals = [values.get(n, pad) for n in names]
    elif isinstance(values, (tuple, list)):
        vals = list(values) + [pad] * (len(names) - len(values))
    else:
        vals = [values] + [pad] * (len(names) - 1)
    return list(zip(names, vals))


__all__ = ["INF_MAX", "INF_MIN"]
