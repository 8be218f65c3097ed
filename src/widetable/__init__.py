"""widetable: a wide-column table store with Tablestore, Bigtable and HBase semantics.

``widetable.open("data")`` opens a persistent store on RocksDB::

    import widetable
    db = widetable.open("data")
    db.create_table("orders", primary_key=[("user", "STRING"), ("order", "INTEGER")])
    t = db.table("orders")
    t.put_row(("u1", 1), {"amount": 120, "paid": True})
    t.get_row(("u1", 1))["amount"]
"""

from importlib import import_module
from typing import TYPE_CHECKING

from .errors import WidetableError
from .keys.codec import BINARY, INF_MAX, INF_MIN, INTEGER, STRING
from .table.filters import (
    ColumnPagination,
    CompositeFilter,
    Condition,
    Filter,
    RowExistence,
    SingleColumnFilter,
    SingleColumnRegexFilter,
    col,
    parse_filter,
)
from .table.row import BatchGetResult, BatchWriteResult, RangeResult, Row, WriteResult
from .table.schema import AUTO_INCREMENT, TableOptions

if TYPE_CHECKING:
    from .client import connect
    from .db import Database, open
    from .descriptions import TableDescription
    from .table.table import Table
    from .table.transaction import LocalTransaction

IGNORE = RowExistence.IGNORE
EXPECT_EXIST = RowExistence.EXPECT_EXIST
EXPECT_NOT_EXIST = RowExistence.EXPECT_NOT_EXIST

# Loaded on first use, so that ``import widetable.client`` (a thin client) loads no
# store: ``widetable.open`` imports the engine, ``widetable.connect`` does not.
_LAZY = {
    "connect": ".client",
    "Database": ".db",
    "open": ".db",
    "TableDescription": ".descriptions",
    "Table": ".table.table",
    "LocalTransaction": ".table.transaction",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # later lookups find it at once
    return value


__version__ = "0.1.0"

__all__ = [
    "AUTO_INCREMENT",
    "BINARY",
    "EXPECT_EXIST",
    "EXPECT_NOT_EXIST",
    "IGNORE",
    "INF_MAX",
    "INF_MIN",
    "INTEGER",
    "STRING",
    "BatchGetResult",
    "BatchWriteResult",
    "ColumnPagination",
    "CompositeFilter",
    "Condition",
    "Database",
    "Filter",
    "LocalTransaction",
    "RangeResult",
    "Row",
    "RowExistence",
    "SingleColumnFilter",
    "SingleColumnRegexFilter",
    "Table",
    "TableDescription",
    "TableOptions",
    "WidetableError",
    "WriteResult",
    "col",
    "connect",
    "open",
    "parse_filter",
]
