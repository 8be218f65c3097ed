"""The database: the facade over a store's catalog, background work and lower layers.

``widetable.open(path)`` returns a :class:`Database`. The package is split by
responsibility:

* ``database.py``   -- :class:`Database`, the public facade, and ``open``;
* ``catalog.py``    -- the catalog and DDL: create / update / delete tables and
  indexes, ``describe_table``, the table-id allocator;
* ``background.py`` -- background work: the TTL purge loop and the partition
  maintenance loop.

Everything below ``db`` gets what it needs from the store context
(``widetable.context.StoreContext``), never from a ``Database``'s private
attributes (``tests/test_structure.py`` checks it).
"""

from .catalog import MAX_STREAM_RETENTION, TableDescription, check_flag
from .database import (
    DEFAULT_MAINTENANCE_INTERVAL,
    DEFAULT_PURGE_INTERVAL,
    ROW_LOCK_STRIPES,
    Database,
    open,
)

__all__ = [
    "DEFAULT_MAINTENANCE_INTERVAL",
    "DEFAULT_PURGE_INTERVAL",
    "MAX_STREAM_RETENTION",
    "ROW_LOCK_STRIPES",
    "Database",
    "TableDescription",
    "check_flag",
    "open",
]
