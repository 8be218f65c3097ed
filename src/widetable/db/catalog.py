"""The catalog and DDL: the tables of a store, their schemas, and the table-id counter.

Schemas live in the catalog keyspace (``layout.catalog_key``); each table's
rows live under its own table id, so dropping a table is one range delete and
a new table of the same name starts empty. Ids (of tables and indexes) come
from one counter (:class:`TableIds`) and are never reused.

:class:`Catalog` runs every DDL call under the store's DDL lock; the
``Database`` facade validates nothing itself and forwards here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ..descriptions import MAX_STREAM_RETENTION, TableDescription, check_flag
from ..errors import ObjectAlreadyExist, ObjectNotExist, ParameterInvalid, WidetableError, describe
from ..keys import layout
from ..stream import api as stream_api
from ..table.schema import (
    BIGTABLE,
    DEFAULT_MAX_TIME_DEVIATION,
    PARTITION_OPTIONS,
    FamilySchema,
    TableOptions,
    TableSchema,
    check_auto_increment,
    check_defined_columns,
    check_name,
    check_partition_options,
    check_primary_key,
    normalize_ttl,
)
from ..table.table import Table

if TYPE_CHECKING:
    from ..context import StoreContext
    from ..index.manager import IndexManager

def check_retention(seconds: object) -> int:
    if type(seconds) is not int or not 0 < seconds <= MAX_STREAM_RETENTION:
        raise ParameterInvalid(
            f"stream_retention must be seconds > 0 and at most {MAX_STREAM_RETENTION}, "
            f"got {describe(seconds)}")
    return seconds


class TableIds:
    """The table-id counter (``layout.counter_key("table_id")``): ids of tables and indexes."""

    def __init__(self, engine) -> None:
        self._engine = engine

    def take(self, batch) -> int:
        """A new table (or index) id, taken for good once ``batch`` is written: the counter
        moves past it, and keys a crash of an older version may have left under it (ids
        were handed out before the counter was stored) are deleted, in the same batch."""
        raw = self._engine.get(layout.counter_key("table_id"))
        last = int.from_bytes(raw, "big") if raw else 0
        if last >= layout.MAX_TABLE_ID:
            raise WidetableError("no table ids left in this store")
        table_id = last + 1
        batch.put(layout.counter_key("table_id"), table_id.to_bytes(8, "big"))
        for lo, hi in (layout.table_range(table_id), layout.checkpoint_range(table_id),
                       layout.index_ref_range(table_id)):
            batch.delete_range(lo, hi)
        return table_id


class Catalog:
    """The tables of one store and their DDL. Thread-safe: DDL runs under ``ddl_lock``.

    ``max_versions_lowered(name)`` is called after ``update_table`` lowered a table's
    max_versions (the background purge then reads that table in its next round).
    """

    def __init__(self, ctx: StoreContext, indexes: IndexManager, ddl_lock: threading.RLock,
                 max_versions_lowered: Callable[[str], None]) -> None:
        self._ctx = ctx
        self._engine = ctx.engine
        self._partitions = ctx.partitions
        self._indexes = indexes
        self._ddl_lock = ddl_lock
        self._max_versions_lowered = max_versions_lowered
        self.tables = ctx.tables

    def _make_table(self, schema: TableSchema) -> Table:
        """The live table of a schema: a ``Table``, or for a Bigtable-model table its
        ``FamilyTable`` (whose rows the Tablestore row API refuses)."""
        if schema.model == BIGTABLE:
            from ..bigtable.store import FamilyTable

            return FamilyTable(self._ctx, schema)
        return Table(self._ctx, schema)

    def load(self) -> None:
        """Open every catalogued table (at open, before anything else runs)."""
        start, end = layout.catalog_range()
        for _, value in self._engine.scan(start, end):
            schema = TableSchema.from_json(value)
            for family in schema.families:
                if family.family_id:
                    self._engine.column_family(family.profile)
            table = self.tables[schema.name] = self._make_table(schema)
            self._partitions.open_table(table)
            self._indexes.open_table(table)
        self._indexes.finish_builds()  # of indexes whose create_index was cut short

    # -- lookups ---------------------------------------------------------------------

    def table(self, name: str) -> Table:
        """The table (or index view) called ``name``; ``OTSObjectNotExist`` if there is none."""
        self._ctx.check_open()
        try:
            return self.tables[name]
        except (KeyError, TypeError):
            view = self._indexes.views.get(name) if isinstance(name, str) else None
            if view is not None:
                return view
            raise ObjectNotExist(
                f"Requested table does not exist. No table or index {describe(name)}") from None

    def base_table(self, name: str) -> Table:
        """``table(name)``, refusing an index (DDL applies to tables)."""
        table = self.table(name)
        if name not in self.tables:
            raise ParameterInvalid(f"{name!r} is an index of table {table.base.name!r}, not a table")  # type: ignore[attr-defined]
        return table

    def describe_table(self, name: str) -> TableDescription:
        table = self.table(name)
        s = table.schema
        partitions, history = self._partitions.describe(table)
        return TableDescription(
            s.name, list(s.primary_key), s.options, s.table_id, s.created_at,
            auto_increment=s.auto_increment, partitions=partitions, split_history=history,
            defined_columns=list(s.defined_columns), stream=s.stream,
            stream_retention=s.stream_retention, indexes=self._indexes.describe(table),
            stream_id=stream_api.stream_id_of(s) if s.stream else None,
        )

    # -- tables ------------------------------------------------------------------------

    def create_table(
        self,
        name: str,
        primary_key: list,
        max_versions: int = 1,
        ttl: int | None = None,
        max_time_deviation: int = DEFAULT_MAX_TIME_DEVIATION,
        split_points: list | None = None,
        defined_columns: list | None = None,
        stream: bool = False,
        stream_retention: int = 86400,
        partition_options: dict | None = None,
    ) -> Table:
        """See ``Database.create_table``."""
        check_name(name, "table name")
        pk = check_primary_key(primary_key)
        auto_increment = check_auto_increment(primary_key)
        options = TableOptions(
            max_versions, normalize_ttl(ttl), max_time_deviation,  # type: ignore[arg-type]
            **check_partition_options(partition_options or {}),  # type: ignore[arg-type]
        ).checked()
        defined = check_defined_columns(defined_columns, pk)
        check_flag(stream, "stream")
        retention = check_retention(stream_retention)
        with self._ddl_lock:
            if name in self.tables or name in self._indexes.views:
                raise ObjectAlreadyExist(
                    f"Requested table already exists. A table or index {name!r} exists")
            batch = self._engine.batch()
            table_id = self._ctx.ids.take(batch)
            schema = TableSchema(
                name, table_id, pk, options, time.time(), auto_increment=auto_increment,
                defined_columns=defined, stream=stream, stream_retention=retention,
            )
            batch.put(layout.catalog_key(name), schema.to_json())
            partitions = self._partitions.new_table(schema, split_points, batch)
            self._engine.write(batch)
            table = Table(self._ctx, schema)
            self._partitions.open_table(table, partitions)
            self.tables[name] = table
            if stream:
                self._indexes.configure(table)
            return table

    def update_table(
        self,
        name: str,
        max_versions: int | None = None,
        ttl: int | None = None,
        max_time_deviation: int | None = None,
        defined_columns: list | None = None,
        stream: bool | None = None,
        stream_retention: int | None = None,
        partition_options: dict | None = None,
    ) -> TableDescription:
        """See ``Database.update_table``."""
        check_flag(stream, "stream", optional=True)
        with self._ddl_lock:
            table = self.base_table(name)
            if table.schema.model == BIGTABLE and (
                    max_versions is not None or ttl is not None or stream
                    or defined_columns is not None):
                raise ParameterInvalid(
                    f"table {name!r} is a Bigtable table: its versions and expiry are its "
                    "families' GC rules (db.bigtable.modify_families); it has no stream or "
                    "defined columns. Partition options apply")
            old = table.schema.options
            old_stream = table.schema.stream
            options = TableOptions(
                old.max_versions if max_versions is None else max_versions,
                old.ttl if ttl is None else ttl,
                old.max_time_deviation if max_time_deviation is None else max_time_deviation,
            ).checked()
            kept = {n: getattr(old, n) for n in PARTITION_OPTIONS}
            options = replace(
                options, **{**kept, **check_partition_options(partition_options or {})}).checked()
            schema = table.schema.with_options(options)
            if schema.indexes and (options.max_versions != 1 or options.ttl != -1):
                raise ParameterInvalid(
                    f"table {name!r} has indexes: max_versions must stay 1 and ttl -1"
                )
            if defined_columns is not None:
                added = check_defined_columns(
                    list(schema.defined_columns) + list(defined_columns), schema.primary_key
                )
                schema = replace(schema, defined_columns=added)
            if stream is not None:
                schema = replace(schema, stream=stream)
                if stream and not old_stream:
                    # Turned on (again): a new stream, of the records after the log's last
                    # seq. Stored with the flag in the one catalog write: a process dying
                    # after it reopens to this stream, never to the old one.
                    schema = replace(schema, stream_since=self._indexes.last_seq(table))
            if stream_retention is not None:
                schema = replace(schema, stream_retention=check_retention(stream_retention))
            self._engine.put(layout.catalog_key(name), schema.to_json())
            table._set_schema(schema)
            if options.max_versions < old.max_versions:
                self._max_versions_lowered(name)
            self._partitions.configure(table)
            if stream is not None:
                self._indexes.configure(table)
            return self.describe_table(name)

    def delete_table(self, name: str) -> None:
        """See ``Database.delete_table``."""
        with self._ddl_lock:
            table = self.base_table(name)
            # Fence in-flight work first, so that nothing writes under the table's id once
            # its keys are deleted (ids are never reused: such keys would stay for good).
            # Every writer checks the table under its row lock (or, raising a counter, its
            # counter lock) before it writes: once it is unusable and every stripe has been
            # passed, none writes again. A trim finishes first or skips it (trim_lock); the
            # purge checks under the row lock; the applier lets go of its indexes
            # (Indexer.remove). Should the deletion fail (an engine error), the table stays
            # unusable until the store is opened again, where it is whole.
            table.dropped = table._unusable = True
            with self._indexes.trim_lock:
                self._ctx.row_locks.barrier()
                self._ctx.autoinc.barrier()
                start, end = layout.table_range(table.schema.table_id)
                batch = self._engine.batch()
                batch.delete(layout.catalog_key(name))
                batch.delete_range(start, end)
                self._delete_families(table.schema.table_id, None, batch)
                batch.delete_range(*layout.auto_increment_range(table.schema.table_id))
                self._indexes.drop_table(table, batch)  # its change log and indexes, first:
                self._partitions.drop_table(table.schema.table_id, batch)  # the applier reads the map
                self._engine.write(batch)
            del self.tables[name]

    # -- column families (the Bigtable model) -------------------------------------------

    def _delete_families(self, table_id: int, family_id: int | None, batch) -> None:
        """Put the deletion of a table's family records (one family's, or all) into
        ``batch``, in every column family they may be in."""
        lo, hi = layout.family_range(table_id, family_id)
        for profile in self._engine.column_families():
            batch.delete_range(lo, hi, self._engine.column_family(profile).handle)

    def create_family_table(self, name: str, families: tuple[FamilySchema, ...],
                            split_points: list[bytes]) -> Table:
        """Create a Bigtable-model table: one BINARY key column ``key`` and ``families``
        (ids from 1), pre-split at ``split_points`` (row keys). The caller checked the
        name and the families; ``OTSObjectAlreadyExist`` if the name is taken."""
        with self._ddl_lock:
            if name in self.tables or name in self._indexes.views:
                raise ObjectAlreadyExist(
                    f"Requested table already exists. A table or index {name!r} exists")
            for family in families:
                self._engine.column_family(family.profile)
            batch = self._engine.batch()
            table_id = self._ctx.ids.take(batch)
            self._delete_families(table_id, None, batch)  # an older crash's keys under the id
            schema = TableSchema(name, table_id, (("key", "BINARY"),), TableOptions().checked(),
                                 time.time(), families=families, model=BIGTABLE)
            batch.put(layout.catalog_key(name), schema.to_json())
            partitions = self._partitions.new_table(schema, list(split_points), batch)
            self._engine.write(batch)
            table = self._make_table(schema)
            self._partitions.open_table(table, partitions)
            self.tables[name] = table
            return table

    def set_families(self, name: str, families: tuple[FamilySchema, ...]) -> Table:
        """Replace the families of Bigtable-model table ``name`` (checked by the caller):
        a family gone is deleted, one whose storage profile changed is moved to its new
        column family, in one batch with the catalog entry, while every row lock is held
        (no write is in flight while its family's keys change)."""
        with self._ddl_lock:
            table = self.base_table(name)
            old = {f.family_id: f for f in table.schema.families}
            new = {f.family_id: f for f in families}
            for family in families:
                self._engine.column_family(family.profile)
            schema = replace(table.schema, families=tuple(families))
            tid = schema.table_id
            stripes = self._ctx.row_locks.stripes
            for lock in stripes:  # stripe order, as every writer taking several
                lock.acquire()
            try:
                if table._unusable:
                    table._check_open()
                batch = self._engine.batch()
                for fid, was in old.items():
                    now = new.get(fid)
                    if now is None:
                        self._delete_families(tid, fid, batch)
                    elif now.profile != was.profile:
                        source = self._engine.column_family(was.profile)
                        target = self._engine.column_family(now.profile).handle
                        lo, hi = layout.family_range(tid, fid)
                        for key, value in source.scan(lo, hi):
                            batch.put(key, value, target)
                        batch.delete_range(lo, hi, source.handle)
                batch.put(layout.catalog_key(name), schema.to_json())
                self._engine.write(batch)
                table._set_schema(schema)
            finally:
                for lock in stripes:
                    lock.release()
            return table

    # -- indexes -----------------------------------------------------------------------

    def create_index(self, table: str, name: str, primary_key: list[str],
                     defined_columns: list[str] | None, index_type: str,
                     include_base_data: bool, progress: bool | None) -> Table:
        """See ``Database.create_index``."""
        check_flag(include_base_data, "include_base_data")
        check_flag(progress, "progress", optional=True)
        with self._ddl_lock:
            base = self.base_table(table)
            if base.schema.model == BIGTABLE:
                raise ParameterInvalid(
                    f"table {table!r} is a Bigtable table: secondary indexes are for Tablestore tables")
            return self._indexes.create(
                base, name, primary_key, defined_columns, index_type,
                include_base_data, progress,
            )

    def drop_index(self, table: str, name: str) -> None:
        """See ``Database.drop_index``."""
        with self._ddl_lock:
            self._indexes.drop(self.base_table(table), name)
