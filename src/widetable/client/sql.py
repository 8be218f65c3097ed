"""``widetable.connect(...).sql``: SQLQuery over Tablestore's protocol, as the SDK sends it.

The answer's rows come as the FlatBuffers payload (``wire/sqlrows.py``), decoded
here with BINARY read unsigned (the official SDK's decoder cannot read bytes
>= 0x80).
"""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import ParameterInvalid
from ..wire import sqlrows
from ..wire.proto import pb


class RemoteSQLResult:
    """The answer of one statement run by a server: ``columns`` ``[(name, SQL type)]``,
    ``rows`` (tuples), iteration, ``to_arrow()``, ``to_pandas()``; ``kind`` is the
    statement type (``SELECT``, ``CREATE_TABLE``, ...)."""

    def __init__(self, columns: list[tuple[str, str]], rows: list[tuple], kind: str,
                 consumed: dict[str, int]) -> None:
        self.columns = columns
        self.rows = rows
        self.kind = kind
        self.stats = consumed

    @property
    def column_names(self) -> list[str]:
        return [n for n, _ in self.columns]

    def __iter__(self) -> Iterator[tuple]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def to_arrow(self):
        import pyarrow as pa
        types = {"BIGINT": pa.int64(), "DOUBLE": pa.float64(), "BOOL": pa.bool_(),
                 "MEDIUMTEXT": pa.string(), "MEDIUMBLOB": pa.binary()}
        arrays = [pa.array([r[i] for r in self.rows], type=types.get(t, pa.string()))
                  for i, (_, t) in enumerate(self.columns)]
        return pa.Table.from_arrays(arrays, names=self.column_names)

    def to_pandas(self):
        return self.to_arrow().to_pandas()


_KINDS = {1: "SELECT", 2: "CREATE_TABLE", 3: "SHOW_TABLE", 4: "DESCRIBE_TABLE", 5: "DROP_TABLE",
          6: "ALTER_TABLE"}


def run(call, statement: str, params: object = None) -> RemoteSQLResult:
    """Send one statement with ``call(api, request)``; decode the answer."""
    if params is not None:
        raise ParameterInvalid("SQL over a server takes no ? parameters (Tablestore's SQLQuery "
                               "has none); put the values in the statement")
    if not isinstance(statement, str) or not statement.strip():
        raise ParameterInvalid("SQL statement must be a non-empty string")
    req = pb.SQLQueryRequest(query=statement, version=2)
    resp = pb.SQLQueryResponse()
    resp.ParseFromString(call("SQLQuery", req))
    columns, rows = sqlrows.decode(resp.rows) if resp.rows else ([], [])
    consumed = {c.table_name: c.consumed.capacity_unit.read for c in resp.consumes}
    return RemoteSQLResult(columns, rows, _KINDS.get(resp.type, "SELECT"), consumed)
