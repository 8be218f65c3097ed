"""Tablestore's SQL answer payload: columnar FlatBuffers (``sql.fbs``, payload version 2).

Grammar (the schema the official SDKs ship; field numbers in declaration order)::

    SQLResponseColumns := { columns: [SQLResponseColumn] (0), row_count: int64 (1) }   root
    SQLResponseColumn  := { column_name: string (0), column_type: DataType:byte (1),
                            column_value: ColumnValues (2) }
    ColumnValues       := { is_nullvalues: [bool] (0), long_values: [long] (1),
                            bool_values: [bool] (2), double_values: [double] (3),
                            string_values: [string] (4), binary_values: [BytesValue] (5),
                            rle_string_values: RLEStringValues (6) }
    BytesValue         := { value: [byte] (0) }
    DataType           := NONE 0 | LONG 1 | BOOLEAN 2 | DOUBLE 3 | STRING 4 | BINARY 5 | STRING_RLE 6

Each column holds one value slot per row in the vector of its type, with a
placeholder (0, false, 0.0, "", empty bytes) wherever ``is_nullvalues`` says the
value is null: the SDK's decoder zips the two vectors. ``row_count`` is set.

The SDK's decoder reads ``value: [byte]`` as signed bytes and fails on a byte
>= 0x80 (``bytes()`` of a negative number): a known SDK bug. ``decode`` here reads
them unsigned.
"""

from __future__ import annotations

import flatbuffers
from flatbuffers import number_types as N
from flatbuffers.table import Table

from ..errors import ParameterInvalid

NONE, LONG, BOOLEAN, DOUBLE, STRING, BINARY, STRING_RLE = range(7)
# SQL type names of the result -> the payload's DataType.
DATA_TYPES = {"BIGINT": LONG, "BOOL": BOOLEAN, "DOUBLE": DOUBLE, "MEDIUMTEXT": STRING,
              "MEDIUMBLOB": BINARY}
SQL_TYPES = {LONG: "BIGINT", BOOLEAN: "BOOL", DOUBLE: "DOUBLE", STRING: "MEDIUMTEXT",
             BINARY: "MEDIUMBLOB", STRING_RLE: "MEDIUMTEXT", NONE: "NULL"}
_PLACEHOLDER = {LONG: 0, BOOLEAN: False, DOUBLE: 0.0, STRING: "", BINARY: b""}
_SLOT = {LONG: 1, BOOLEAN: 2, DOUBLE: 3, STRING: 4, BINARY: 5}


def _vector(b: flatbuffers.Builder, kind, values: list, size: int) -> int:
    b.StartVector(size, len(values), size)
    prepend = {N.BoolFlags: b.PrependBool, N.Int64Flags: b.PrependInt64,
               N.Float64Flags: b.PrependFloat64, N.UOffsetTFlags: b.PrependUOffsetTRelative,
               N.Int8Flags: b.PrependInt8}[kind]
    for v in reversed(values):
        prepend(v)
    return b.EndVector()


def encode(columns: list[tuple[str, str]], rows: list[tuple]) -> bytes:
    """The payload of a result: ``columns`` ``[(name, SQL type)]`` and its rows."""
    b = flatbuffers.Builder(1024)
    made = []
    for i, (name, sql_type) in enumerate(columns):
        kind = DATA_TYPES.get(sql_type, STRING)
        values = [r[i] for r in rows]
        nulls = [v is None for v in values]
        if kind == STRING and sql_type not in DATA_TYPES:
            values = [None if v is None else str(v) for v in values]
        filled = [_PLACEHOLDER[kind] if v is None else v for v in values]
        if kind == STRING:
            items = [b.CreateString(v) for v in filled]
            vec = _vector(b, N.UOffsetTFlags, items, 4)
        elif kind == BINARY:
            items = []
            for v in filled:
                inner = _vector(b, N.Int8Flags, [x - 256 if x > 127 else x for x in v], 1)
                b.StartObject(1)
                b.PrependUOffsetTRelativeSlot(0, inner, 0)
                items.append(b.EndObject())
            vec = _vector(b, N.UOffsetTFlags, items, 4)
        elif kind == LONG:
            vec = _vector(b, N.Int64Flags, [int(v) for v in filled], 8)
        elif kind == DOUBLE:
            vec = _vector(b, N.Float64Flags, [float(v) for v in filled], 8)
        else:
            vec = _vector(b, N.BoolFlags, [bool(v) for v in filled], 1)
        null_vec = _vector(b, N.BoolFlags, nulls, 1)
        b.StartObject(7)
        b.PrependUOffsetTRelativeSlot(0, null_vec, 0)
        b.PrependUOffsetTRelativeSlot(_SLOT[kind], vec, 0)
        value = b.EndObject()
        name_off = b.CreateString(name)
        b.StartObject(3)
        b.PrependUOffsetTRelativeSlot(0, name_off, 0)
        b.PrependInt8Slot(1, kind, -1)  # always written, NONE included
        b.PrependUOffsetTRelativeSlot(2, value, 0)
        made.append(b.EndObject())
    cols = _vector(b, N.UOffsetTFlags, made, 4)
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(0, cols, 0)
    b.PrependInt64Slot(1, len(rows), -1)
    b.Finish(b.EndObject())
    return bytes(b.Output())


def _field(t: Table, slot: int) -> int:
    return t.Offset(4 + 2 * slot)


def _table_at(t: Table, slot: int) -> Table | None:
    o = _field(t, slot)
    if not o:
        return None
    return Table(t.Bytes, t.Indirect(o + t.Pos))


def _vec(t: Table, slot: int) -> tuple[int, int]:
    o = _field(t, slot)
    if not o:
        return 0, 0
    return t.Vector(o), t.VectorLen(o)


def decode(payload: bytes) -> tuple[list[tuple[str, str]], list[tuple]]:
    """``(columns, rows)`` of a payload (BINARY read unsigned; RLE strings expanded)."""
    try:
        buf = bytearray(payload)
        root = Table(buf, N.UOffsetTFlags.py_type(flatbuffers.encode.Get(N.UOffsetTFlags.packer_type, buf, 0)))
        start, n = _vec(root, 0)
        o = _field(root, 1)
        row_count = root.Get(N.Int64Flags, o + root.Pos) if o else 0
        columns: list[tuple[str, str]] = []
        data: list[list] = []
        for i in range(n):
            col = Table(buf, root.Indirect(start + 4 * i))
            o = _field(col, 0)
            name = col.String(o + col.Pos).decode() if o else ""
            o = _field(col, 1)
            kind = col.Get(N.Int8Flags, o + col.Pos) if o else NONE
            values = _column(col, kind, row_count)
            columns.append((name, SQL_TYPES.get(kind, "MEDIUMTEXT")))
            data.append(values)
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        raise ParameterInvalid(f"malformed SQL payload: {exc}") from None
    return columns, [tuple(c[r] for c in data) for r in range(row_count)] if data else []


def _column(col: Table, kind: int, rows: int) -> list:
    value = _table_at(col, 2)
    if value is None:
        return [None] * rows
    s, n = _vec(value, 0)
    nulls = [bool(value.Get(N.BoolFlags, s + k)) for k in range(n)]
    if kind == STRING_RLE:
        rle = _table_at(value, 6)
        a, na = _vec(rle, 0)  # type: ignore[arg-type]
        words = [rle.String(a + 4 * k).decode() for k in range(na)]  # type: ignore[union-attr]
        m, nm = _vec(rle, 1)  # type: ignore[arg-type]
        values = [words[rle.Get(N.Int32Flags, m + 4 * k)] for k in range(nm)]  # type: ignore[union-attr]
    elif kind == BINARY:
        s2, n2 = _vec(value, 5)
        values = []
        for k in range(n2):
            item = Table(value.Bytes, value.Indirect(s2 + 4 * k))
            vs, vn = _vec(item, 0)
            values.append(bytes(item.Bytes[vs:vs + vn]))
    elif kind == STRING:
        s2, n2 = _vec(value, 4)
        values = [value.String(s2 + 4 * k).decode() for k in range(n2)]
    else:
        slot, flags, width = {LONG: (1, N.Int64Flags, 8), BOOLEAN: (2, N.BoolFlags, 1),
                              DOUBLE: (3, N.Float64Flags, 8)}.get(kind, (0, N.BoolFlags, 1))
        s2, n2 = _vec(value, slot)
        values = [value.Get(flags, s2 + width * k) for k in range(n2)]
        if kind == BOOLEAN:
            values = [bool(v) for v in values]
    return [None if nulls[k] else values[k] for k in range(min(len(values), len(nulls)))]
