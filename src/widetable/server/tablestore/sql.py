"""SQLQuery: Tablestore's SQL over its wire protocol (the official SDK's ``exe_sql_query``).

The statement runs through ``db.sql``; a result with columns is answered as the
columnar FlatBuffers payload (``wire/sqlrows.py``, version 2, ``row_count`` set).
A DDL answer carries no rows at all: the SDK's decoder loops forever over a
zero-column payload. Each table read is reported in ``consumes`` with one read
CU per row the scans read (at least 1). COPY ... TO is refused (it would write a
file on the server). A read-only access key may run SELECT, EXPLAIN, DESCRIBE and
SHOW; its mapping DDL and COPY are refused with 403 ``OTSNoPermissionAccess``,
before anything runs (``db.sql(..., read_only=key id)``).
"""

from __future__ import annotations

from ...db import Database
from ...errors import ParameterInvalid
from ...wire import convert, sqlrows
from ...wire.proto import pb

# The statement's kind -> SQLStatementType.
_TYPES = {"query": 1, "explain": 1, "copy": 1, "create": 2, "show_tables": 3, "show_index": 3,
          "describe": 4, "drop_mapping": 5, "alter_add": 6, "alter_drop": 6}


def sql_query(db: Database, req, reader: str | None = None) -> object:
    """``reader``: the id of the read-only access key that sent it, or None."""
    if req.HasField("version") and req.version != 2:
        raise ParameterInvalid(f"SQL payload version {req.version} is not supported; use 2 "
                               "(FlatBuffers)")
    result = db.sql(req.query, files=False,  # COPY ... TO would write on the server
                    read_only=reader)
    resp = pb.SQLQueryResponse()
    resp.version = 2
    resp.type = _TYPES.get(result.kind, 1)
    if result.columns:
        resp.rows = sqlrows.encode(result.columns, result.rows)
    for table, rows in sorted(result.stats.items()):
        item = resp.consumes.add(table_name=table)
        item.consumed.CopyFrom(convert.consumed(read=max(1, rows)))
    return resp
