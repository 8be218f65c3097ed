"""widetable: a wide-column table store with Tablestore, Bigtable and HBase semantics.

``widetable.open("data")`` opens a persistent store on RocksDB::

    import widetable
    db = widetable.open("data")
    db.create_table("orders", primary_key=[("user", "STRING"), ("order", "INTEGER")])
    t = db.table("orders")
    t.put_row(("u1", 1), {"amount": 120, "paid": True})
    t.get_row(("u1", 1))["amount"]
"""

from .client import connect
from .db import Database, TableDescription, open
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
from .table.table import Table
from .table.transaction import LocalTransaction

IGNORE = RowExistence.IGNORE
EXPECT_EXIST = RowExistence.EXPECT_EXIST
EXPECT_NOT_EXIST = RowExistence.EXPECT_NOT_EXIST

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
