"""BatchGetRow and BatchWriteRow: one result per row, grouped by table as requested.

A whole-batch fault (too many rows, too many bytes, a row named twice, a
malformed PlainBuffer) fails the request; a fault of one row (a missing
table, a bad key, a failed condition) is that row's result.
"""

from __future__ import annotations

from ...db import Database
from ...errors import ParameterInvalid, WidetableError
from ...table.row import WriteResult
from ...wire import convert, plainbuffer
from ...wire.errors import error_message
from ...wire.plainbuffer import PlainBufferError
from ...wire.proto import enum_value, pb
from ..core.calls import in_transaction
from .rows import read_options, returned_row, write_cu

PUT = enum_value("OperationType", "PUT")
UPDATE = enum_value("OperationType", "UPDATE")
DELETE = enum_value("OperationType", "DELETE")
_OPS = {PUT: "put", UPDATE: "update", DELETE: "delete"}


# The service's answers to a batch with nothing in it (its wording, then ours).
NO_ROW_TO_GET = "No row specified in the request of BatchGetRow."
NO_ROW_TO_WRITE = "No row is specified in BatchWriteRow."


def _check_tables(req, api: str) -> None:
    """A batch naming no table is refused, as the service refuses it; so is a table of a
    BatchWriteRow with no rows (a BatchGetRow table with none gets an empty result)."""
    if not req.tables:
        text = NO_ROW_TO_GET if api == "BatchGetRow" else NO_ROW_TO_WRITE
        raise ParameterInvalid(f"{text} The request names no table.")
    if api == "BatchWriteRow":
        for t in req.tables:
            if not t.rows:
                raise ParameterInvalid(f"No operation is specified for table: {t.table_name!r}. "
                                       "Each table of a BatchWriteRow needs a row.")


def batch_get_row(db: Database, req) -> object:
    _check_tables(req, "BatchGetRow")
    requests: list = []
    slots: list[tuple[int, object]] = []  # per row: (index into requests | -1, error)
    for t in req.tables:
        opts = read_options(t)
        for key in _keys(db, t.table_name, t.primary_key):
            if isinstance(key, WidetableError):
                slots.append((-1, key))
            else:
                slots.append((len(requests), None))
                requests.append((t.table_name, key, opts))
    results = db.batch_get_row(requests) if requests else []
    resp = pb.BatchGetRowResponse()
    i = 0
    for t in req.tables:
        names = _key_names(db, t.table_name)
        items: list[bytes] = []
        for _ in t.primary_key:
            index, error = slots[i]
            i += 1
            if index >= 0:
                result = results[index]
                error = result.error
            if error is not None:
                items.append(_error_row(_GOT, error))
            elif result.row is None:
                items.append(_ok_row(_GOT, 1, 0, b""))
            else:
                data, size = convert.encode_result(names, result.row)
                items.append(_ok_row(_GOT, convert.capacity_units(size), 0, data))
        resp.tables.add(table_name=t.table_name).MergeFromString(b"".join(items))
    return resp


def _key_names(db: Database, name: str) -> tuple[str, ...]:
    """The key column names of table or index ``name`` (none if it does not exist: each
    of its rows then carries the error that says so)."""
    try:
        return db.table(name)._names
    except WidetableError:
        return ()


def _keys(db: Database, name: str, buffers) -> list:
    """Each row's key tuple, or the error that row gets; a malformed buffer fails the
    request."""
    try:
        table = db.table(name)
    except WidetableError:  # the library reports the table
        return [tuple(v for _, v in convert.decode_row(b).primary_key) for b in buffers]
    out: list = []
    for buf in buffers:
        try:
            out.append(convert.read_key(table, buf))
        except PlainBufferError:
            raise
        except WidetableError as exc:
            out.append(exc)
    return out


# Row results are framed by hand (convert.framed: TableIn*Response.rows is field 2) and
# merged into their table's message in one upb call.
_GOT, _WROTE = pb.RowInBatchGetRowResponse, pb.RowInBatchWriteRowResponse
_OK_ROWS: dict[tuple[type, int, int], bytes] = {}


def _error_row(cls: type, error: WidetableError) -> bytes:
    """A framed failed row result of ``cls`` (a BatchGetRow or BatchWriteRow row)."""
    msg = cls(is_ok=False)
    msg.error.CopyFrom(error_message(error))  # type: ignore[arg-type]
    return convert.framed(2, msg.SerializeToString())


def _ok_row(cls: type, read: int, write: int, data: bytes | None = None) -> bytes:
    """A framed ``is_ok`` row result of ``cls`` with its capacity units, and ``data`` as its
    row unless None (BatchGetRow always sends one, even empty; BatchWriteRow only a
    returned row). Results without a row are made once per (class, read, write)."""
    if data is not None:
        return _ok_message(cls, read, write, data)
    hit = _OK_ROWS.get((cls, read, write))
    if hit is None:
        hit = _OK_ROWS[(cls, read, write)] = _ok_message(cls, read, write, None)
    return hit


def _ok_message(cls: type, read: int, write: int, data: bytes | None) -> bytes:
    msg = cls(is_ok=True)
    if data is not None:
        msg.row = data
    msg.consumed.capacity_unit.read = read
    msg.consumed.capacity_unit.write = write
    return convert.framed(2, msg.SerializeToString())


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


class _Row:
    """A BatchWriteRow row off the plain-put path: its error, or what its response needs."""

    __slots__ = ("cells", "cond", "error", "ret", "table")

    def __init__(self, table: str, cond, ret) -> None:
        self.table = table
        self.cond = cond
        self.ret = ret
        self.error: WidetableError | None = None
        self.cells: list = []


def _read_rows(db: Database, req) -> tuple[list, list]:
    """Each row decoded (a malformed one fails the request), and the library's
    requests of the rows without an error of their own. A row is its ``_Row``, or for
    a plain put (no condition, nothing returned) already its framed response."""
    rows: list = []
    requests: list = []
    in_txn = bool(req.transaction_id)
    for t in req.tables:
        name = t.table_name
        try:
            table = db.table(name)
        except WidetableError:
            table = None  # the library reports the table, per row
        names = table._names if table is not None else None
        # An index: each row refused whatever its key, as the store refuses it (before the
        # key is decoded, which would name a key that does not fit the index instead).
        refused = table.write_refused() if table is not None and table.read_only else None
        for r in t.rows:
            op = _OPS.get(r.type)
            if op is None:
                raise ParameterInvalid(f"unknown operation type {r.type} in BatchWriteRow")
            cond = convert.decode_condition(r.condition)
            ret = r.return_content if r.HasField("return_content") else None
            buf = r.row_change
            if op == "put" and cond is None and ret is None and not in_txn:
                plain = convert.read_put(buf)
                if plain is not None and plain[0] == names:
                    # (table, "put", key, {name: value}): the library's bulk path takes it whole
                    requests.append((name, op, plain[1], plain[2]))
                    rows.append(_ok_row(_WROTE, 0, convert.capacity_units(plain[3])))
                    continue
            row = _Row(name, cond, ret)
            rows.append(row)
            decoded = convert.decode_row(buf)
            row.cells = decoded.cells
            if refused is not None:
                row.error = refused
                continue
            try:
                if table is None:
                    key = tuple(v for _, v in decoded.primary_key)
                else:
                    key = convert.key_values(table, decoded.primary_key)
                payload = _payload(op, decoded)
            except WidetableError as exc:
                row.error = exc
                continue
            if op == "put" and cond is None and not in_txn and _plain(payload):  # type: ignore[arg-type]
                requests.append((name, op, key, dict(payload)))  # type: ignore[arg-type]
            else:
                requests.append((name, op, key, payload, cond))
    return rows, requests


def batch_write_row(db: Database, req) -> object:
    _check_tables(req, "BatchWriteRow")
    rows, requests = _read_rows(db, req)
    in_txn = bool(req.transaction_id)
    if in_txn:
        outcomes = iter(in_transaction(db, req.transaction_id, requests))
    else:  # BatchWriteResults: (result, error); a WriteResult is made only if asked for
        outcomes = iter(db.batch_write_row(requests) if requests else ())
    resp = pb.BatchWriteRowResponse()
    i = 0
    for t in req.tables:
        items: list[bytes] = []
        for _ in t.rows:
            row = rows[i]
            i += 1
            error = row.error if type(row) is _Row else None
            if error is None:
                outcome = next(outcomes)
                error = outcome[1] if in_txn else outcome.error
            if error is not None:
                items.append(_error_row(_WROTE, error))
            elif type(row) is bytes:
                items.append(row)
            else:
                items.append(_written(db, row, outcome[0] if in_txn else outcome.result))
        resp.tables.add(table_name=t.table_name).MergeFromString(b"".join(items))
    return resp


def _written(db: Database, row: _Row, result: WriteResult) -> bytes:
    """The framed response of a row written off the plain-put path."""
    table = db.table(row.table)
    read, write = write_cu(table, result.primary_key, row.cells, row.cond)
    data = returned_row(table, row.ret, result) if row.ret is not None else b""
    return _ok_row(_WROTE, read, write, data or None)
