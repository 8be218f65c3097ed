"""The indexes and change feeds of one database: create, drop, describe, verify, trim.

``Database`` owns one :class:`IndexManager`, made from the store context. It gives each base table that
needs one a :class:`~widetable.stream.feed.TableFeed` (stream on, or any
index), keeps a read-only :class:`~widetable.index.view.IndexTable` per index,
and runs the global-index applier (:mod:`.global_`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from ..descriptions import IndexDescription
from ..errors import ObjectAlreadyExist, ObjectNotExist, ParameterInvalid, WidetableError, describe
from ..keys import layout
from ..stream.feed import TableFeed
from ..table.schema import GLOBAL, LOCAL, IndexSpec
from ..table.values import now_ms
from .backfill import backfill
from .counts import CHECKED, EXACT, IndexCounts, counted_lengths
from .global_ import GlobalIndex, Indexer, too_long_key
from .schema import IndexCodec, check_index
from .verify import IndexReport, verify
from .view import IndexTable

if TYPE_CHECKING:
    from ..context import StoreContext
    from ..table.table import Table


logger = logging.getLogger("widetable.index")


def stream_consumer(table: Table) -> str:
    """The change-log consumer name of ``table``'s stream."""
    return f"stream:{table.name}"


def index_consumer(index_name: str) -> str:
    """The change-log consumer name of a global index."""
    return f"index:{index_name}"


def _schema_consumer(name: str) -> bool:
    """A consumer the schema implies (a stream, a global index), which configure keeps."""
    return name.startswith(("stream:", "index:"))


class IndexManager:
    """Thread-safe for writers; DDL runs under the database's DDL lock."""

    def __init__(self, ctx: StoreContext) -> None:
        self.ctx = ctx
        self.engine = ctx.engine
        self.tables = ctx.tables  # the catalog's base tables
        self.partitions = ctx.partitions
        self.changelog = ctx.changelog
        self.feeds: dict[int, TableFeed] = ctx.changelog.feeds
        self.views: dict[str, IndexTable] = {}
        self.globals: dict[str, GlobalIndex] = {}
        self.counts: dict[int, IndexCounts] = {}  # index id -> its counts (counted ones)
        self.indexer = Indexer(ctx, self._trim_if_open)
        self.changelog.on_logged = self.indexer.start  # its thread also trims the logs
        self.trim_lock = self.changelog.trim_lock  # held by trims, and by drops

    # -- tables ----------------------------------------------------------------------

    def open_table(self, table: Table) -> None:
        """Attach a table loaded from the catalog: its feed, index views and global indexes."""
        for spec in table.schema.indexes:
            counts = IndexCounts.load(self.engine, spec.table_id)
            if counts is not None:
                self.counts[spec.table_id] = counts
        self.configure(table)
        for spec in table.schema.indexes:
            self._open_index(table, spec)

    def configure(self, table: Table) -> None:
        """Bring ``table``'s change-log consumers (its stream, its global indexes) and its
        feed's local indexes in line with its schema; afterwards every write sees them."""
        s = table.schema
        local = [self._codec(s, spec, strict=True) for spec in s.indexes
                 if spec.index_type == LOCAL]
        log_ = self.changelog
        wanted: dict[str, IndexSpec | None] = {}
        if s.stream:
            wanted[stream_consumer(table)] = None
        for spec in s.indexes:
            if spec.index_type == GLOBAL:
                wanted[index_consumer(spec.name)] = spec
        for consumer in log_.consumers(table):
            if consumer.name not in wanted and _schema_consumer(consumer.name):
                log_.detach(consumer.name)
        for name, spec in wanted.items():
            consumer = log_.get(name)
            if spec is None:  # the stream: its readers keep their positions themselves
                if consumer is None:
                    log_.attach(name, table, None, -1, sees_purges=False)
            elif consumer is None:
                log_.attach(name, table, spec.table_id, spec.start_seq, self.indexer.notify,
                            wants_tail=True)
            else:
                consumer.start_seq = spec.start_seq
        log_.configure(table, local)

    def last_seq(self, table: Table) -> int:
        """The last seq handed out in ``table``'s change log (kept while its log is off)."""
        return self.changelog.last_seq(table)

    def drop_table(self, table: Table, batch) -> None:
        """Put the deletion of the table's log, indexes and their state into ``batch``."""
        for spec in table.schema.indexes:
            self._drop_index_data(spec, batch)
        self.changelog.drop_table(table, batch)

    def index_names(self) -> set[str]:
        return set(self.views)

    # -- indexes ---------------------------------------------------------------------

    def _codec(self, base, spec: IndexSpec, strict: bool) -> IndexCodec:
        codec = IndexCodec(base, spec, strict)
        codec.counts = self.counts.get(spec.table_id)
        return codec

    def _open_index(self, table: Table, spec: IndexSpec) -> IndexTable:
        codec = self._codec(table.schema, spec, strict=spec.index_type == LOCAL)
        view = IndexTable(self.ctx, table, codec)
        self.partitions.open_table(view)
        self.views[spec.name] = view
        if spec.index_type == GLOBAL:
            consumer = self.changelog.get(index_consumer(spec.name))
            assert consumer is not None  # configure registered it
            self.globals[spec.name] = self.indexer.add(
                self._codec(table.schema, spec, strict=False), table,
                self.feeds[table.schema.table_id], consumer,
            )
        return view

    def create(self, table: Table, name: str, primary_key: object, defined_columns: object,
               index_type: object, include_base_data: bool, progress: bool | None) -> IndexTable:
        if isinstance(table, IndexTable):
            raise ParameterInvalid(f"{table.name!r} is an index; indexes are built on tables")
        if name in self.tables or name in self.views:
            raise ObjectAlreadyExist(
                f"Requested table already exists. A table or index {describe(name)} exists")
        batch = self.engine.batch()
        index_id = self.ctx.ids.take(batch)
        spec = check_index(table.schema, name, primary_key, defined_columns, index_type, index_id, 0)
        spec = replace(spec, building=include_base_data)
        # Counted from its first entry on: a local index CHECKED until its backfill ends
        # (for good without one: rows older than the index have no entries).
        lengths = counted_lengths(spec, table.schema.pk_names)
        if lengths:
            counts = IndexCounts(index_id, lengths, CHECKED if spec.index_type == LOCAL else EXACT)
            batch.put(layout.index_count_state_key(index_id), counts.state())
            self.counts[index_id] = counts
        # Take the id for good before any write can use it (configure makes the index live
        # for writers, which may write LOCAL entries under it): after a crash before the
        # catalog write, the id is not handed out again with those entries under it.
        self.engine.write(batch)
        old = table.schema
        table._set_schema(replace(old, indexes=old.indexes + (spec,)))
        try:
            self.configure(table)  # from here on every write logs / maintains the index
        except BaseException:
            table._set_schema(old)
            self.configure(table)
            raise
        feed = self.feeds[old.table_id]
        spec = replace(spec, start_seq=feed.seq)  # later records are applied, earlier backfilled
        schema = replace(old, indexes=old.indexes + (spec,))
        table._set_schema(schema)
        self.configure(table)
        self.engine.put(layout.catalog_key(old.name), schema.to_json())
        view = self._open_index(table, spec)
        if include_base_data:
            try:
                self._build(table, spec, view, progress)
            except BaseException:  # e.g. a row whose LOCAL entry key is over the limits
                self.drop(table, name)  # a refused create_index leaves nothing behind
                raise
        return view

    def _build(self, table: Table, spec: IndexSpec, view: IndexTable, progress: bool | None) -> None:
        """Backfill ``spec`` (catalogued with ``building``), then catalogue it as built."""
        gi = self.globals.get(spec.name)
        counts = self.counts.get(spec.table_id)
        if gi is None and counts is not None and counts.mode != CHECKED:
            counts.store(self.engine, CHECKED)  # entries of older rows are missing until the end
        backfill(self.ctx, self.indexer, table, spec.table_id, None if gi else view._codec, gi, progress)
        if gi is None and counts is not None:
            counts.store(self.engine, EXACT)  # every row has its entry now
        built = replace(spec, building=False)
        schema = replace(table.schema, indexes=tuple(
            built if i.name == spec.name else i for i in table.schema.indexes))
        self.engine.put(layout.catalog_key(table.name), schema.to_json())
        table._set_schema(schema)

    def finish_builds(self, progress: bool | None = None) -> None:
        """Finish the backfills a crash (or a kill) interrupted: at open, before any write.

        Writes maintained such an index from the moment it was catalogued, and its
        backfill writes each row's entry as the row is now, so backfilling every row
        again completes it."""
        for table in list(self.tables.values()):
            for spec in table.schema.indexes:
                if not spec.building:
                    continue
                try:
                    self._build(table, spec, self.views[spec.name], progress)
                except WidetableError as exc:  # as create_index would have: the index goes
                    logger.warning("index %r of table %r cannot be built, dropped: %s",
                                spec.name, table.name, exc)
                    self.drop(table, spec.name)

    def drop(self, table: Table, name: str) -> None:
        spec = next((i for i in table.schema.indexes if i.name == name), None)
        if spec is None:
            raise ObjectNotExist(f"table {table.name!r} has no index {describe(name)}")
        schema = replace(table.schema, indexes=tuple(i for i in table.schema.indexes if i.name != name))
        self.engine.put(layout.catalog_key(table.name), schema.to_json())
        table._set_schema(schema)
        self.configure(table)
        batch = self.engine.batch()
        self._drop_index_data(spec, batch)
        self.engine.write(batch)

    def _drop_index_data(self, spec: IndexSpec, batch) -> None:
        gi = self.globals.pop(spec.name, None)
        if gi is not None:
            self.indexer.remove(gi.index_id)
        view = self.views.pop(spec.name, None)
        if view is not None:
            view.dropped = view._unusable = True
        batch.delete_range(*layout.table_range(spec.table_id))
        batch.delete_range(*layout.checkpoint_range(spec.table_id))
        batch.delete_range(*layout.index_ref_range(spec.table_id))
        batch.delete(too_long_key(spec.table_id))
        batch.delete_range(*layout.index_count_range(spec.table_id))
        self.counts.pop(spec.table_id, None)
        self.partitions.drop_table(spec.table_id, batch)

    def view(self, table: Table, name: str) -> IndexTable:
        view = self.views.get(name)
        if view is None or view.base is not table:
            raise ObjectNotExist(f"table {table.name!r} has no index {describe(name)}")
        return view

    def describe(self, table: Table) -> list[IndexDescription]:
        out = []
        retention_ms = table.schema.stream_retention * 1000
        for spec in table.schema.indexes:
            lag = behind = None
            gi = self.globals.get(spec.name)
            declared = spec.declared_key(table.schema.pk_names)
            appended = spec.primary_key[len(declared):]
            if gi is None:
                out.append(IndexDescription(spec.name, spec.index_type, declared,
                                            spec.defined_columns, lag, False, base_key=appended))
                continue
            oldest = self.indexer.oldest_unapplied(gi)
            now = now_ms()
            lag = 0 if oldest is None else max(now - oldest, 0)
            behind = oldest is not None and now - oldest > retention_ms
            h = gi.health
            out.append(IndexDescription(spec.name, spec.index_type, declared,
                                        spec.defined_columns, lag, bool(behind), h.error,
                                        h.error_at, h.errors, gi.too_long, base_key=appended))
        return out

    def verify(self, table: Table, name: str, limit: int = 1000) -> IndexReport:
        view = self.view(table, name)
        return verify(self.engine, table, view._codec, limit)

    # -- retention -------------------------------------------------------------------

    def trim(self) -> int:
        """Drop change records past their table's retention that every consumer applied."""
        return self.changelog.trim()

    def _trim_if_open(self) -> int:
        return 0 if self.ctx.closed else self.trim()

    def close(self) -> None:
        self.indexer.stop()


def wait_started(indexer: Indexer, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while indexer._thread is None and time.monotonic() < deadline:
        time.sleep(0.001)
    return indexer._thread is not None
