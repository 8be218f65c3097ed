"""The embedded Bigtable data model over a widetable store (issue 23).

``types`` holds the value types every layer shares (cells, rows, row sets, mutations,
family specs); the model itself sits above table/, partition/ and stream/ and imports no
grpc and no rocksdict: storage goes through the engine interface.
"""

from widetable.bigtable.types import (
    AddToCell,
    BigtableRow,
    Cell,
    DeleteFromColumn,
    DeleteFromFamily,
    DeleteFromRow,
    FamilySpec,
    MergeToCell,
    ReadModifyWriteRule,
    RowRange,
    RowSet,
    SetCell,
    TableInfo,
)

__all__ = [
    "AddToCell",
    "BigtableRow",
    "Cell",
    "DeleteFromColumn",
    "DeleteFromFamily",
    "DeleteFromRow",
    "FamilySpec",
    "MergeToCell",
    "ReadModifyWriteRule",
    "RowRange",
    "RowSet",
    "SetCell",
    "TableInfo",
]
