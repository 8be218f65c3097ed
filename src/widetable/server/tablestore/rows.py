"""Row APIs: GetRow, PutRow, UpdateRow, DeleteRow and GetRange, in or out of a
local transaction (``transaction_id``)."""

from __future__ import annotations

from ...db import Database
from ...errors import NotSupported, ParameterInvalid
from ...table.row import WriteResult
from ...wire import convert, plainbuffer
from ...wire.plainbuffer import Cell
from ...wire.proto import enum_value, pb
from ..core.calls import target, write_target

RT_NONE = enum_value("ReturnType", "RT_NONE")
RT_PK = enum_value("ReturnType", "RT_PK")
RT_AFTER_MODIFY = enum_value("ReturnType", "RT_AFTER_MODIFY")
BACKWARD = enum_value("Direction", "BACKWARD")


ALL_VERSIONS = 2**31 - 1  # max_versions is an int32 on the wire


def read_options(req) -> dict:
    """columns, max_versions, time_range and filter of a GetRow / GetRange / batch item."""
    if req.start_column or req.end_column:
        raise NotSupported("start_column / end_column are not supported; use a column pagination filter")
    if req.token:
        raise NotSupported("row tokens are not supported; use a column pagination filter")
    opts: dict = {}
    if len(req.columns_to_get):
        opts["columns"] = list(req.columns_to_get)
    time_range = convert.time_range_of(req.time_range) if req.HasField("time_range") else None
    if time_range is not None:
        opts["time_range"] = time_range
    if req.HasField("max_versions"):
        if req.max_versions != 1 or time_range is not None:
            opts["max_versions"] = req.max_versions  # 1 is the library's default
    elif time_range is not None:
        opts["max_versions"] = ALL_VERSIONS  # Tablestore: a time range alone reads every version in it
    if req.filter:
        opts["filter"] = convert.decode_filter(req.filter)
    return opts


def get_row(db: Database, req) -> object:
    table, reader = target(db, req.table_name, req.transaction_id)
    options = read_options(req)
    # The read options are checked before the key, as the store's get_row checks them.
    table.reader(*map(options.get, ("columns", "max_versions", "time_range", "filter")))
    pk = convert.read_key(table, req.primary_key)
    row = reader.get_row(pk, **options)
    resp = pb.GetRowResponse()
    units = resp.consumed.capacity_unit
    units.write = 0
    if row is None:
        units.read = 1
        resp.row = b""
        return resp
    data, size = convert.encode_result(table._names, row)
    units.read = convert.capacity_units(size)
    resp.row = data
    return resp


def returned_row(table, req_return, result: WriteResult) -> bytes:
    """The ``row`` of a write response, as ReturnContent asks."""
    kind = req_return.return_type if req_return is not None else RT_NONE
    if kind == RT_NONE:
        return b""
    row = convert.pk_row(table._names, result.primary_key)
    if kind == RT_AFTER_MODIFY:
        wanted = set(req_return.return_column_names)
        row.cells = [Cell(n, v) for n, v in sorted(result.increments.items())
                     if not wanted or n in wanted]
    return plainbuffer.encode_row(row)


def write_cu(table, values: tuple, cells: list[Cell], condition) -> tuple[int, int]:
    """(read, write) CUs of a write: the key and written cells; a condition reads 1."""
    size = convert.pk_size(table._names, values)
    for c in cells:
        size += len(c.name.encode("utf-8")) + convert.value_size(c.value)
    return (1 if condition is not None else 0), convert.capacity_units(size)


def _write_response(cls, table, req, units: tuple[int, int], result):
    resp = cls()
    consumed = resp.consumed.capacity_unit
    consumed.read, consumed.write = units
    ret = req.return_content if req.HasField("return_content") else None
    row = returned_row(table, ret, result)
    if row:
        resp.row = row
    return resp


def put_row(db: Database, req) -> object:
    table, writer = write_target(db, req.table_name, req.transaction_id)
    plain = convert.read_put(req.row)
    if plain is not None and plain[0] == table._names:
        _, pk, columns, size = plain
        condition = convert.decode_condition(req.condition)
        result = writer.put_row(pk, columns, condition)
        units = (1 if condition is not None else 0), convert.capacity_units(size)
        return _write_response(pb.PutRowResponse, table, req, units, result)
    row = convert.decode_row(req.row)
    pk = convert.key_values(table, row.primary_key)
    condition = convert.decode_condition(req.condition)
    result = writer.put_row(pk, convert.put_columns(row), condition)
    units = write_cu(table, pk, row.cells, condition)
    return _write_response(pb.PutRowResponse, table, req, units, result)


def update_row(db: Database, req) -> object:
    table, writer = write_target(db, req.table_name, req.transaction_id)
    row = convert.decode_row(req.row_change)
    pk = convert.key_values(table, row.primary_key)
    condition = convert.decode_condition(req.condition)
    result = writer.update_row(pk, condition=condition, **convert.update_parts(row))
    units = write_cu(table, pk, row.cells, condition)
    return _write_response(pb.UpdateRowResponse, table, req, units, result)


def delete_row(db: Database, req) -> object:
    table, writer = write_target(db, req.table_name, req.transaction_id)
    pk = convert.read_key(table, req.primary_key)
    condition = convert.decode_condition(req.condition)
    result = writer.delete_row(pk, condition)
    units = write_cu(table, pk, [], condition)
    return _write_response(pb.DeleteRowResponse, table, req, units, result)


def get_range(db: Database, req) -> object:
    table, reader = target(db, req.table_name, req.transaction_id)
    start = convert.read_key(table, req.inclusive_start_primary_key, "start key")
    end = convert.read_key(table, req.exclusive_end_primary_key, "end key")
    if req.HasField("limit") and req.limit <= 0:
        raise ParameterInvalid(f"limit must be > 0, got {req.limit}")
    page = reader.get_range(
        start, end, direction="backward" if req.direction == BACKWARD else "forward",
        limit=req.limit if req.HasField("limit") else None, **read_options(req),
    )
    names = table._names
    data, size = convert.encode_results(names, page.rows)
    resp = pb.GetRangeResponse()
    units = resp.consumed.capacity_unit
    units.read, units.write = convert.capacity_units(size), 0
    resp.rows = data
    if page.next_start_primary_key is not None:
        resp.next_start_primary_key = convert.encode_key(names, page.next_start_primary_key)
    return resp
