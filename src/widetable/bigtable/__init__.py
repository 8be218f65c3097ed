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



def instance(db):
    """The Bigtable model over store ``db`` (the same object as ``db.bigtable``)."""
    return db.bigtable


def __getattr__(name: str):
    # The model's classes load on first use: the value types alone import nothing else.
    if name in ("BigtableInstance",):
        from .instance import BigtableInstance

        return BigtableInstance
    if name in ("BigtableTable",):
        from .table import BigtableTable

        return BigtableTable
    raise AttributeError(name)


__all__ = [
    "BigtableInstance",
    "BigtableTable",
    "instance",
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
