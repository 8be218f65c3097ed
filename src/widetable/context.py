"""The store context: what the layers below ``db`` get from the store they belong to.

A :class:`StoreContext` is made once per store by ``Database`` and handed to
every lower layer that needs shared store state: tables, index views and
feeds, the batch paths, transactions, backfill and the global-index applier,
the stream API. They read its attributes (resolving the ones on a hot path
once, at construction) instead of reaching into a ``Database``'s private
attributes; ``tests/test_structure.py`` checks that nothing below ``db`` does.

Attributes (set by ``Database`` while it opens, in this order):

* ``engine``     -- the ``storage.Engine`` holding every key of the store;
* ``path``       -- the store's directory (None for a memory store);
* ``row_locks``  -- the store's :class:`~widetable.table.locks.RowLocks`;
* ``tables``     -- name -> base ``Table``: the catalog's live map (shared, not a copy);
* ``txns``       -- the ``TransactionRegistry`` of open local transactions;
  ``txn_locks`` is its lock table (empty: no transaction open, writers skip checks);
* ``autoinc``    -- the ``AutoIncrementCounters`` of auto-increment columns;
* ``partitions`` -- the ``PartitionManager`` (maps, routers, maintenance);
* ``ids``        -- the table-id allocator: ``ids.take(batch)`` -> a new table or index id;
* ``catalog``    -- lookups: ``catalog.table(name)`` (a table or an index view) and
  ``catalog.base_table(name)`` (refusing an index), both ``OTSObjectNotExist`` if none;
* ``changelog``  -- the change-log consumer registry (``stream.consumers.ChangeLog``);
* ``closed``     -- True once the store closed; ``check_open()`` raises then.

The context holds references only; it owns no thread and no lock of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import WidetableError

if TYPE_CHECKING:
    from .partition.manager import PartitionManager
    from .storage import Engine
    from .table.autoinc import AutoIncrementCounters
    from .table.locks import RowLocks
    from .table.table import Table
    from .table.transaction import TransactionRegistry


class StoreContext:
    """Shared state of one open store, for the layers below ``db`` (see the module doc)."""

    __slots__ = ("autoinc", "catalog", "changelog", "closed", "engine", "ids", "partitions", "path",
                 "row_locks", "tables", "txn_locks", "txns")

    engine: Engine
    path: str | None
    row_locks: RowLocks
    tables: dict[str, Table]
    txns: TransactionRegistry
    txn_locks: dict
    autoinc: AutoIncrementCounters
    partitions: PartitionManager
    ids: Any
    catalog: Any
    changelog: Any
    closed: bool

    def __init__(self, engine: Engine, row_locks: RowLocks) -> None:
        self.engine = engine
        self.path = getattr(engine, "path", None)
        self.row_locks = row_locks
        self.tables = {}
        self.closed = False

    def check_open(self) -> None:
        """``OTSParameterInvalid`` once the store is closed."""
        if self.closed:
            raise WidetableError("the database is closed", "OTSParameterInvalid")
