"""The database: a catalog of tables in one engine, plus cross-table batches.

``widetable.open(path)`` returns a :class:`Database`. Schemas live in the
catalog keyspace; each table's rows live under its own table id, so dropping
a table is one range delete and a new table of the same name starts empty.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from .errors import ObjectAlreadyExist, ObjectNotExist, ParameterInvalid, WidetableError, describe
from .keys import layout
from .storage import Engine, open_engine
from .table import rowcodec
from .table.batch import batch_get_row, batch_write_row
from .table.reader import visible_versions
from .table.row import BatchGetResult, BatchWriteResult
from .table.schema import (
    DEFAULT_MAX_TIME_DEVIATION,
    TableOptions,
    TableSchema,
    check_name,
    check_primary_key,
    normalize_ttl,
)
from .table.table import Table
from .table.values import now_ms

ROW_LOCK_STRIPES = 4096
DEFAULT_PURGE_INTERVAL = 600.0


@dataclass(frozen=True, slots=True)
class TableDescription:
    name: str
    primary_key: list[tuple[str, str]]
    options: TableOptions
    table_id: int
    created_at: float


class Database:
    """A store of wide tables. Thread-safe; close it (or use ``with``) when done."""

    def __init__(self, engine: Engine, purge_interval: float | None = DEFAULT_PURGE_INTERVAL) -> None:
        self._engine = engine
        self._row_locks = [threading.Lock() for _ in range(ROW_LOCK_STRIPES)]
        self._ddl_lock = threading.RLock()
        self._tables: dict[str, Table] = {}
        self._closed = False
        self.path = getattr(engine, "path", None)
        start, end = layout.catalog_range()
        for _, value in engine.scan(start, end):
            schema = TableSchema.from_json(value)
            self._tables[schema.name] = Table(self, schema)
        self._stop = threading.Event()
        self._purger: threading.Thread | None = None
        if purge_interval:
            self._purger = threading.Thread(
                target=self._purge_loop, args=(purge_interval,), name="widetable-purge", daemon=True
            )
            self._purger.start()

    # -- lifecycle --------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise WidetableError("the database is closed", "OTSParameterInvalid")

    def close(self) -> None:
        """Stop background work and close the engine. Idempotent."""
        if self._closed:
            return
        self._stop.set()
        if self._purger is not None:
            self._purger.join(timeout=10)
        with self._ddl_lock:
            self._closed = True
            for table in self._tables.values():
                table._unusable = True
            self._engine.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- catalog ----------------------------------------------------------------

    def create_table(
        self,
        name: str,
        primary_key: list,
        max_versions: int = 1,
        ttl: int | None = None,
        max_time_deviation: int = DEFAULT_MAX_TIME_DEVIATION,
    ) -> Table:
        """Create a table. Raises ``OTSObjectAlreadyExist`` if the name is taken."""
        self._check_open()
        check_name(name, "table name")
        pk = check_primary_key(primary_key)
        options = TableOptions(max_versions, normalize_ttl(ttl), max_time_deviation).checked()  # type: ignore[arg-type]
        with self._ddl_lock:
            if name in self._tables:
                raise ObjectAlreadyExist(f"table {name!r} already exists")
            table_id = self._next_table_id()
            schema = TableSchema(name, table_id, pk, options, time.time())
            batch = self._engine.batch()
            batch.put(layout.counter_key("table_id"), table_id.to_bytes(8, "big"))
            batch.put(layout.catalog_key(name), schema.to_json())
            self._engine.write(batch)
            table = Table(self, schema)
            self._tables[name] = table
            return table

    def _next_table_id(self) -> int:
        raw = self._engine.get(layout.counter_key("table_id"))
        last = int.from_bytes(raw, "big") if raw else 0
        if last >= layout.MAX_TABLE_ID:
            raise WidetableError("no table ids left in this store")
        return last + 1

    def table(self, name: str) -> Table:
        """The table called ``name``; raises ``OTSObjectNotExist`` if there is none."""
        self._check_open()
        try:
            return self._tables[name]
        except (KeyError, TypeError):
            raise ObjectNotExist(f"table {describe(name)} does not exist") from None

    def list_tables(self) -> list[str]:
        self._check_open()
        return sorted(self._tables)

    def describe_table(self, name: str) -> TableDescription:
        s = self.table(name).schema
        return TableDescription(s.name, list(s.primary_key), s.options, s.table_id, s.created_at)

    def update_table(
        self,
        name: str,
        max_versions: int | None = None,
        ttl: int | None = None,
        max_time_deviation: int | None = None,
    ) -> TableDescription:
        """Change table options; omitted options keep their value."""
        with self._ddl_lock:
            table = self.table(name)
            old = table.schema.options
            options = TableOptions(
                old.max_versions if max_versions is None else max_versions,
                old.ttl if ttl is None else ttl,
                old.max_time_deviation if max_time_deviation is None else max_time_deviation,
            ).checked()
            schema = table.schema.with_options(options)
            self._engine.put(layout.catalog_key(name), schema.to_json())
            table._set_schema(schema)
            return self.describe_table(name)

    def delete_table(self, name: str) -> None:
        """Drop a table and all its rows."""
        with self._ddl_lock:
            table = self.table(name)
            start, end = layout.table_range(table.schema.table_id)
            batch = self._engine.batch()
            batch.delete(layout.catalog_key(name))
            batch.delete_range(start, end)
            self._engine.write(batch)
            table.dropped = table._unusable = True
            del self._tables[name]

    # -- batches ----------------------------------------------------------------

    def batch_get_row(self, requests: list) -> list[BatchGetResult]:
        """Read up to 100 rows across tables; one result (row or error) per request."""
        self._check_open()
        return batch_get_row(self, requests)

    def batch_write_row(self, requests: list) -> list[BatchWriteResult]:
        """Write up to 200 rows (4 MB) across tables; one result per row. Not atomic across rows."""
        self._check_open()
        return batch_write_row(self, requests)

    # -- garbage collection -----------------------------------------------------

    def purge_expired(self, name: str | None = None) -> int:
        """Rewrite rows holding cells expired by TTL or past max_versions; return rows changed."""
        self._check_open()
        changed = 0
        for table in [self.table(name)] if name else list(self._tables.values()):
            changed += self._purge_table(table)
        return changed

    def _purge_table(self, table: Table) -> int:
        opts = table.schema.options
        start, end = layout.table_range(table.schema.table_id)
        changed = 0
        for key, blob in self._engine.scan(start, end):
            if self._stop.is_set() or table.dropped:
                break
            now = now_ms()
            cutoff = None if opts.ttl < 0 else now - opts.ttl * 1000
            row = rowcodec.unpack(blob)
            if cutoff is None and not row[4]:
                continue
            with table._lock(key):
                current = self._engine.get(key)
                if current is None:
                    continue
                row = rowcodec.unpack(current)
                versions = visible_versions(row, cutoff)
                rowcodec.trim(versions, opts.max_versions, cutoff)
                new = rowcodec.encode_versions(row[1], versions) if versions else None
                if new == current or (not row[2] and new is None and cutoff is not None):
                    continue
                if new is None:
                    self._engine.delete(key)
                else:
                    self._engine.put(key, new)
                changed += 1
        return changed

    def _purge_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.purge_expired()
            except WidetableError:
                if self._closed:
                    return


def open(  # noqa: A001 - the public verb, as in widetable.open("data")
    path: str | None = "data",
    engine: str = "rocksdb",
    sync: bool = False,
    purge_interval: float | None = DEFAULT_PURGE_INTERVAL,
) -> Database:
    """Open (creating if needed) a store at ``path``.

    ``engine="memory"`` (or ``path=":memory:"``) gives a store that lives only
    in this process. ``sync=True`` fsyncs every write for power-loss
    durability. Expired cells are purged every ``purge_interval`` seconds.
    """
    if purge_interval is not None and purge_interval <= 0:
        raise ParameterInvalid(f"purge_interval must be > 0 seconds, got {purge_interval!r}")
    return Database(open_engine(path, engine, sync), purge_interval)
