"""The indexes and change feeds of one database: create, drop, describe, verify, trim.

``Database`` owns one :class:`IndexManager`, made from the store context. It gives each base table that
needs one a :class:`~widetable.stream.feed.TableFeed` (stream on, or any
index), keeps a read-only :class:`~widetable.index.view.IndexTable` per index,
and runs the global-index applier (:mod:`.global_`).
"""

from __future__ import annotations

import threading

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from ..descriptions import IndexDescription
from ..errors import ObjectAlreadyExist, ObjectNotExist, ParameterInvalid, WidetableError, describe
from ..keys import layout
from ..stream import log
from ..stream.feed import TableFeed
from ..table.schema import GLOBAL, LOCAL, IndexSpec
from ..table.values import now_ms
from .backfill import backfill
from .global_ import GlobalIndex, Indexer, too_long_key
from .schema import IndexCodec, check_index
from .verify import IndexReport, verify
from .view import IndexTable

if TYPE_CHECKING:
    from ..context import StoreContext
    from ..table.table import Table


logger = logging.getLogger("widetable.index")


def _seq_counter(table_id: int) -> str:
    return f"change_log_seq/{table_id}"


class IndexManager:
    """Thread-safe for writers; DDL runs under the database's DDL lock."""

    def __init__(self, ctx: StoreContext) -> None:
        self.ctx = ctx
        self.engine = ctx.engine
        self.tables = ctx.tables  # the catalog's base tables
        self.partitions = ctx.partitions
        self.feeds: dict[int, TableFeed] = {}
        self.views: dict[str, IndexTable] = {}
        self.globals: dict[str, GlobalIndex] = {}
        self.indexer = Indexer(ctx, self._trim_if_open)
        self.trim_lock = threading.Lock()  # held by trim, and by drops (see trim)
        # Other consumers of change logs (search indexes): table id -> {name: checkpoint(shard)}.
        # A table with one logs; trimming keeps what each has not applied.
        self.consumers: dict[int, dict] = {}

    # -- tables ----------------------------------------------------------------------

    def open_table(self, table: Table) -> None:
        """Attach a table loaded from the catalog: its feed, index views and global indexes."""
        self.configure(table)
        for spec in table.schema.indexes:
            self._open_index(table, spec)

    def configure(self, table: Table) -> None:
        """Give ``table`` the feed its schema calls for (or none), then wait out writers that
        used the old setting: afterwards every write sees the new one."""
        s = table.schema
        local = [IndexCodec(s, spec, strict=True) for spec in s.indexes if spec.index_type == LOCAL]
        has_global = any(spec.index_type == GLOBAL for spec in s.indexes)
        logged = s.stream or has_global or bool(self.consumers.get(s.table_id))
        feed: TableFeed | None = self.feeds.get(s.table_id)
        if logged or local:
            if feed is None:
                router = self.partitions.partitions(table).router
                feed = TableFeed(self.engine, s.table_id, router, logged, local, None,
                                 self._recover_seq(table))
                self.feeds[s.table_id] = feed
            feed.logged, feed.local = logged, local
            feed.notify = self.indexer.notify if has_global else None
            feed.set_tail(has_global)
            table._changes = feed  # type: ignore[assignment]
            if logged:  # its thread also trims change logs past their retention
                self.indexer.start()
        else:
            table._changes = None
        self.ctx.row_locks.barrier()
        if feed is not None and not logged:
            self._drop_log(s.table_id, feed)

    def last_seq(self, table: Table) -> int:
        """The last seq handed out in ``table``'s change log (kept while its log is off)."""
        feed = self.feeds.get(table.schema.table_id)
        return feed.seq if feed is not None else self._recover_seq(table)

    def _recover_seq(self, table: Table) -> int:
        tid = table.schema.table_id
        tp = self.partitions.partitions(table)
        raw = self.engine.get(layout.counter_key(_seq_counter(tid)))
        seq = int.from_bytes(raw, "big") if raw else 0
        for shard in range(tp.next_id):
            seq = max(seq, log.last_seq(self.engine, tid, shard))
        return max([seq] + [spec.start_seq for spec in table.schema.indexes])

    def _drop_log(self, table_id: int, feed: TableFeed) -> None:
        batch = self.engine.batch()
        batch.delete_range(*layout.change_log_range(table_id))
        batch.delete_range(*layout.checkpoint_range(table_id))  # its trim marks
        batch.put(layout.counter_key(_seq_counter(table_id)), feed.seq.to_bytes(8, "big"))
        self.engine.write(batch)

    def drop_table(self, table: Table, batch) -> None:
        """Put the deletion of the table's log, indexes and their state into ``batch``."""
        tid = table.schema.table_id
        for spec in table.schema.indexes:
            self._drop_index_data(spec, batch)
        batch.delete_range(*layout.change_log_range(tid))
        batch.delete_range(*layout.checkpoint_range(tid))  # its trim marks
        batch.delete(layout.counter_key(_seq_counter(tid)))
        self.feeds.pop(tid, None)

    def index_names(self) -> set[str]:
        return set(self.views)

    # -- indexes ---------------------------------------------------------------------

    def _open_index(self, table: Table, spec: IndexSpec) -> IndexTable:
        codec = IndexCodec(table.schema, spec, strict=spec.index_type == LOCAL)
        view = IndexTable(self.ctx, table, codec)
        self.partitions.open_table(view)
        self.views[spec.name] = view
        if spec.index_type == GLOBAL:
            self.globals[spec.name] = self.indexer.add(
                IndexCodec(table.schema, spec, strict=False), table, self.feeds[table.schema.table_id]
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
        backfill(self.ctx, self.indexer, table, spec.table_id, None if gi else view._codec, gi, progress)
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
        """Drop change records past their table's retention that every index has applied.

        Under ``trim_lock``: a drop holds it while it deletes a table's keys, so a trim
        never writes a trim mark or seq counter under an id whose keys are gone."""
        with self.trim_lock:
            return self._trim_locked()

    def _trim_locked(self) -> int:
        dropped = 0
        now = now_ms()
        for table in list(self.tables.values()):
            feed = self.feeds.get(table.schema.table_id)
            if feed is None or not feed.logged or table._unusable:
                continue
            cutoff = now - table.schema.stream_retention * 1000
            consumers = [g for g in self.globals.values() if g.table is table]
            # First the seq counter, at least every seq a trim may drop: reopening recovers
            # the seq from it and the log's last records, and after a crash in the middle of
            # trimming, a log emptied without it would hand out seqs again.
            self.engine.put(layout.counter_key(_seq_counter(feed.table_id)), feed.seq.to_bytes(8, "big"))
            for shard in list(log.shards_with_records(self.engine, feed.table_id)):
                keep = min([g.checkpoint(shard) for g in consumers]
                           + [c(shard) for c in self.consumers.get(feed.table_id, {}).values()],
                           default=None)
                dropped += log.trim_shard(self.engine, feed.table_id, shard, cutoff, keep)
        return dropped

    def _trim_if_open(self) -> int:
        return 0 if self.ctx.closed else self.trim()

    def close(self) -> None:
        self.indexer.stop()


def wait_started(indexer: Indexer, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while indexer._thread is None and time.monotonic() < deadline:
        time.sleep(0.001)
    return indexer._thread is not None
