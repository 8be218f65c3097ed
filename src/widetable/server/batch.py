"""BatchGetRow and BatchWriteRow: one result per row, grouped by table as requested.

A whole-batch fault (too many rows, too many bytes, a row named twice, a
malformed PlainBuffer) fails the request; a fault of one row (a missing
table, a bad key, a failed condition) is that row's result.
"""

from __future__ import annotations

from ..db import Database
from ..errors import WidetableError
from ..table.row import WriteResult
from . import convert, plainbuffer
from .errors import error_message
from .proto import enum_value, pb
from .rows import read_options, returned_row, write_cu

PUT = enum_value("OperationType", "PUT")
UPDATE = enum_value("OperationType", "UPDATE")
DELETE = enum_value("OperationType", "DELETE")
_OPS = {PUT: "put", UPDATE: "update", DELETE: "delete"}


def _keys(db: Database, name: str, items: list[list[tuple[str, object]]]) -> list:
    """Each row's key tuple, or the error that row gets."""
    try:
        table = db.table(name)
    except WidetableError:
        return [tuple(v for _, v in item) for item in items]  # the library reports the table
    out: list = []
    for item in items:
        try:
            out.append(convert.key_values(table, item))
        except WidetableError as exc:
            out.append(exc)
    return out


def batch_get_row(db: Database, req) -> object:
    requests: list = []
    slots: list[tuple[int, object]] = []  # per row: (index into requests | -1, error)
    for t in req.tables:
        opts = read_options(t)
        keys = _keys(db, t.table_name, [plainbuffer.decode_row(k).primary_key for k in t.primary_key])
        for key in keys:
            if isinstance(key, WidetableError):
                slots.append((-1, key))
            else:
                slots.append((len(requests), None))
                requests.append((t.table_name, key, opts))
    results = db.batch_get_row(requests) if requests else []
    resp = pb.BatchGetRowResponse()
    i = 0
    for t in req.tables:
        out = resp.tables.add(table_name=t.table_name)
        names = db._tables[t.table_name]._names if t.table_name in db._tables else ()
        for _ in t.primary_key:
            index, error = slots[i]
            i += 1
            row_msg = out.rows.add()
            if index >= 0:
                result = results[index]
                error = result.error
            if error is not None:
                row_msg.is_ok = False
                row_msg.error.CopyFrom(error_message(error))  # type: ignore[arg-type]
                continue
            row_msg.is_ok = True
            row = result.row
            if row is None:
                row_msg.consumed.CopyFrom(convert.consumed(read=1))
                row_msg.row = b""
            else:
                size = convert.row_size(names, row)
                row_msg.consumed.CopyFrom(convert.consumed(read=convert.capacity_units(size)))
                row_msg.row = plainbuffer.encode_row(convert.plain_row(names, row))
    return resp


def _payload(op: str, row: plainbuffer.PlainRow) -> object:
    if op == "put":
        return convert.put_columns(row)
    if op == "update":
        return convert.update_parts(row)
    return None


def _plain(columns: list[tuple]) -> bool:
    """Cells without timestamps, each column once: the same put as a ``{name: value}``."""
    for c in columns:
        if len(c) != 2:
            return False
    return len({c[0] for c in columns}) == len(columns)


def batch_write_row(db: Database, req) -> object:
    decoded = []  # per row: (table name, op, PlainRow, condition, return content)
    for t in req.tables:
        for r in t.rows:
            op = _OPS.get(r.type)
            if op is None:
                from ..errors import ParameterInvalid

                raise ParameterInvalid(f"unknown operation type {r.type} in BatchWriteRow")
            decoded.append((
                t.table_name, op, plainbuffer.decode_row(r.row_change),
                convert.decode_condition(r.condition),
                r.return_content if r.HasField("return_content") else None,
            ))
    outcomes: list = [None] * len(decoded)
    requests: list = []
    positions: list[int] = []
    tables: dict[str, object] = {}  # name -> Table, or the error of naming it
    for i, (name, op, row, cond, _) in enumerate(decoded):
        table = tables.get(name)
        if table is None:
            try:
                table = tables[name] = db.table(name)
            except WidetableError as exc:
                table = tables[name] = exc
        if isinstance(table, WidetableError):  # the library reports the table
            key = tuple(v for _, v in row.primary_key)
        else:
            try:
                key = convert.key_values(table, row.primary_key)
            except WidetableError as exc:
                key = exc
        try:
            if isinstance(key, WidetableError):
                raise key
            payload = _payload(op, row)
        except WidetableError as exc:
            outcomes[i] = exc
            continue
        positions.append(i)
        if op == "put" and cond is None and not req.transaction_id and _plain(payload):
            # (table, "put", key, {name: value}): the library's bulk path takes it whole
            requests.append((name, op, key, dict(payload)))  # type: ignore[arg-type]
        else:
            requests.append((name, op, key, payload, cond))
    if req.transaction_id:
        results = _in_transaction(db, req.transaction_id, requests)
    else:
        results = [(r.result, r.error) for r in db.batch_write_row(requests)] if requests else []
    for i, (result, error) in zip(positions, results):
        outcomes[i] = error if error is not None else result
    resp = pb.BatchWriteRowResponse()
    i = 0
    for t in req.tables:
        out = resp.tables.add(table_name=t.table_name)
        for _ in t.rows:
            name, op, row, cond, ret = decoded[i]
            outcome = outcomes[i]
            i += 1
            msg = out.rows.add()
            if isinstance(outcome, Exception):
                msg.is_ok = False
                msg.error.CopyFrom(error_message(outcome))  # type: ignore[arg-type]
                continue
            table = db._tables[name]
            msg.is_ok = True
            read, write = write_cu(table, outcome.primary_key, row.cells, cond)
            units = msg.consumed.capacity_unit
            units.read = read
            units.write = write
            data = returned_row(table, ret, outcome) if ret is not None else b""
            if data:
                msg.row = data
    return resp


def _in_transaction(db: Database, transaction_id: str, requests: list) -> list:
    """Each row through the transaction's own writes, in order."""
    txn = db.transaction(transaction_id)
    out: list[tuple[WriteResult | None, WidetableError | None]] = []
    for name, op, key, payload, cond in requests:
        try:
            if name != txn.table.name:
                from ..errors import ParameterInvalid

                raise ParameterInvalid(
                    f"transaction {transaction_id} is on table {txn.table.name!r}, not {name!r}"
                )
            if op == "put":
                result = txn.put_row(key, payload, cond)
            elif op == "delete":
                result = txn.delete_row(key, cond)
            else:
                result = txn.update_row(key, condition=cond, **payload)  # type: ignore[arg-type]
            out.append((result, None))
        except WidetableError as exc:
            out.append((None, exc))
    return out
