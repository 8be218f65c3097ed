"""The search indexes of one database: DDL, the sync thread, searches, verification.

``SearchManager`` is given what it needs explicitly (no ``Database`` internals):
the engine (for its catalog entries, ``keys.layout.search_index_key``), a
directory for the tantivy shards (None: in memory), a table lookup, an id
allocator, and a :class:`~widetable.search.changes.LogSource`.

One daemon thread (``widetable-search``) steps every index every POLL seconds:
a backfill chunk while FULL, then the change-log records after its
checkpoints; it commits at most every ``commit_interval`` seconds, so a write
is searchable within about ``commit_interval + POLL`` (under 1 s by default).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from dataclasses import replace

import msgpack

from ..errors import ObjectAlreadyExist, ParameterInvalid, WidetableError, describe
from ..keys import layout as keys
from ..table.row import Row
from ..table.table import full_range
from ..table.values import now_ms
from .documents import Rejected, decode_src, routed_shards, row_values, shard_of
from .execute import (
    MAX_SCAN_LIMIT, RETURN_NONE, SearchResult, Searcher, check_columns,
)
from .query import MatchAllQuery, Query, check_query
from .results import SearchIndexDescription, SearchIndexReport
from .schema import LAYOUT, IndexMeta, add_fields, check_index, check_ttl, missing
from .sort import PrimaryKeySort, SortKeys
from .sync import IndexState

logger = logging.getLogger("widetable.search")
POLL = 0.1
DEFAULT_COMMIT_INTERVAL = 0.3
SESSION_TTL = 3600.0


class SearchManager:
    def __init__(self, engine, root: str | None, get_table, take_id, source,
                 commit_interval: float = DEFAULT_COMMIT_INTERVAL) -> None:
        self.engine = engine
        self.root = root
        self.get_table = get_table
        self.take_id = take_id
        self.source = source
        self.commit_interval = commit_interval
        self.states: dict[tuple[str, str], IndexState] = {}
        self.building: dict[tuple[str, str], IndexState] = {}
        self.lock = threading.RLock()
        self.sessions: dict[str, tuple[str, str, float]] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def open(self, tables: dict) -> None:
        """Open every catalogued search index of ``tables`` (name -> Table)."""
        lo, hi = keys.search_index_range()
        for _, raw in self.engine.scan(lo, hi):
            meta = IndexMeta.from_json(raw)
            table = tables.get(meta.table)
            if table is None:
                continue
            self._open_state(meta, table)
        self._start()

    def _open_state(self, meta: IndexMeta, table) -> None:
        live = replace(meta, pending=None)
        state = IndexState(live, table, self.root, self.source)
        self.states[(meta.table, meta.name)] = state
        self.source.attach(table, _consumer(meta), state.committed_checkpoint)
        if meta.pending is not None:
            b = IndexState(meta.pending, table, self.root, self.source)
            self.building[(meta.table, meta.name)] = b
            self.source.attach(table, _consumer(meta.pending), b.committed_checkpoint)

    def _start(self) -> None:
        if self._thread is None and self.states:
            self._thread = threading.Thread(target=self._loop, name="widetable-search", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        for st in [*self.states.values(), *self.building.values()]:
            with st.lock:
                if st.dirty and not st.dropped:
                    try:
                        st.commit()
                    except Exception:  # noqa: BLE001 - closing anyway
                        logger.exception("search index %s: final commit failed", st.meta.name)
                st.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            busy = False
            for key, st in list(self.states.items()) + list(self.building.items()):
                try:
                    if st.step(self.commit_interval):
                        busy = True
                    st.error = None
                except Exception as exc:  # noqa: BLE001 - keep serving the other indexes
                    if self._stop.is_set():
                        return
                    st.error = f"{type(exc).__name__}: {exc}"
                    logger.exception("search index %s of %s: sync failed", st.meta.name, st.meta.table)
            self._finish_rebuilds()
            if not busy:
                self._wake.wait(POLL)
                self._wake.clear()

    # -- DDL -----------------------------------------------------------------------------

    def create(self, table, name: str, fields: object, index_sort: object, routing_fields: object,
               ttl: object, shards: object) -> IndexMeta:
        with self.lock:
            if (table.name, name) in self.states:
                raise ObjectAlreadyExist(f"table {table.name!r} already has a search index "
                                         f"{describe(name)}")
            meta = check_index(table.schema, name, fields, index_sort, routing_fields, ttl, shards)
            batch = self.engine.batch()
            meta = replace(meta, index_id=self.take_id(batch), created_at=time.time())
            batch.put(keys.search_index_key(table.schema.table_id, name), meta.to_json())
            self.engine.write(batch)
            self._open_state(meta, table)
            self._start()
            self._wake.set()
            return meta

    def state(self, table, name: str) -> IndexState:
        st = self.states.get((table.name, name))
        if st is None or st.table is not table:
            raise missing(table.name, name)
        return st

    def list(self, table=None) -> list[tuple[str, str]]:
        return sorted(k for k, st in self.states.items()
                      if table is None or st.table is table)

    def delete(self, table, name: str) -> None:
        with self.lock:
            st = self.state(table, name)
            self.engine.delete(keys.search_index_key(table.schema.table_id, name))
            for s in (self.states.pop((table.name, name)), self.building.pop((table.name, name), None)):
                if s is None:
                    continue
                with s.lock:
                    s.destroy()
                self.source.detach(table, _consumer(s.meta))
            del st

    def drop_table(self, table) -> None:
        for t, n in self.list(table):
            self.delete(table, n)

    def update(self, table, name: str, ttl: object = None, add: object = None) -> IndexMeta:
        """Change the TTL, or add fields (rebuilt in the background; reads keep the old
        index until the new one has caught up, then switch)."""
        with self.lock:
            st = self.state(table, name)
            meta = st.meta
            if ttl is None and add is None:
                raise ParameterInvalid("update_search_index needs ttl or add_fields")
            if (table.name, name) in self.building and add is not None:
                raise ParameterInvalid(f"search index {name!r} is already being rebuilt")
            pending = self.building.get((table.name, name))
            if ttl is not None:
                meta = replace(meta, ttl=check_ttl(ttl, table.schema.options.ttl))
            new_pending = None
            if add is not None:
                new_fields = add_fields(meta, add, table.schema)
                batch = self.engine.batch()
                new_pending = replace(meta, fields=new_fields, index_id=self.take_id(batch),
                                      layout=LAYOUT)  # a new index: the current layout
                self.engine.write(batch)
            elif pending is not None:
                new_pending = replace(pending.meta, ttl=meta.ttl)
            stored = replace(meta, pending=new_pending)
            self.engine.put(keys.search_index_key(table.schema.table_id, name), stored.to_json())
            with st.lock:
                raised = meta.ttl == -1 and st.meta.ttl != -1 or 0 < st.meta.ttl < meta.ttl
                st.meta = meta
                if raised:  # documents the old TTL dropped come back: sync every row again
                    st.phase, st.next, st.dirty, st.fresh = "FULL", None, True, False
            if pending is not None and new_pending is not None:
                pending.meta = new_pending
            if add is not None:
                b = IndexState(new_pending, table, self.root, self.source)  # type: ignore[arg-type]
                self.building[(table.name, name)] = b
                self.source.attach(table, _consumer(new_pending), b.committed_checkpoint)  # type: ignore[arg-type]
                self._wake.set()
            return stored

    def _finish_rebuilds(self) -> None:
        for key, b in list(self.building.items()):
            with self.lock:
                if self.building.get(key) is not b or not b.caught_up():
                    continue
                old = self.states[key]
                table = old.table
                self.engine.put(keys.search_index_key(table.schema.table_id, key[1]),
                                replace(b.meta, pending=None).to_json())
                self.states[key] = b
                del self.building[key]
            with old.lock:
                old.destroy()
            self.source.detach(table, _consumer(old.meta))

    # -- observing ---------------------------------------------------------------------------

    def describe(self, table, name: str) -> SearchIndexDescription:
        st = self.state(table, name)
        oldest = st.oldest_unapplied()
        now = now_ms()
        if st.phase == "FULL":
            current = 0
        else:
            current = now if oldest is None and not st.dirty else (oldest or now) - 1
        lag = 0 if oldest is None else max(now - oldest, 0)
        rows = sum(s.num_rows() for s in st.shards)
        size = sum(s.size_bytes() for s in st.shards)
        stored = st.meta
        b = self.building.get((table.name, name))
        if b is not None:
            stored = replace(stored, pending=b.meta)
        return SearchIndexDescription(stored, st.phase, current, lag, rows, size, st.rejected,
                                      st.last_rejected, st.error, b is not None)

    def wait(self, table=None, name: str | None = None, timeout: float = 30.0) -> bool:
        """Block until the indexes (all, a table's, or one) have caught up and committed."""
        deadline = time.monotonic() + timeout
        while True:
            todo = [st for (t, n), st in [*self.states.items(), *self.building.items()]
                    if (table is None or st.table is table) and (name is None or n == name)]
            if all(st.caught_up() for st in todo):
                return True
            if time.monotonic() >= deadline:
                return False
            for st in todo:
                if st.phase == "INCR" and st.dirty:
                    with st.lock:
                        st.commit()
            self._wake.set()
            time.sleep(0.01)

    # -- searching ---------------------------------------------------------------------------

    def _shards(self, st: IndexState, routing_values: object) -> list[int]:
        if routing_values is None:
            return list(range(st.meta.shards))
        return routed_shards(st.meta, st.pk_names, routing_values)

    def search(self, table, name: str, query: Query, sort=None, offset: int = 0, limit: int = 10,
               next_token=None, columns=None, get_total_count: bool = False, aggs=None,
               group_bys=None, routing_values=None) -> SearchResult:
        st = self.state(table, name)
        return Searcher(st).search(query, sort, offset, limit, next_token, columns, get_total_count,
                                   aggs, group_bys, self._shards(st, routing_values),
                                   lambda pks, names: _fetch(table, pks, names))

    def compute_splits(self, table, name: str) -> dict:
        st = self.state(table, name)
        now = time.monotonic()
        self.sessions = {k: v for k, v in self.sessions.items() if now - v[2] < SESSION_TTL}
        sid = uuid.uuid4().hex
        self.sessions[sid] = (table.name, name, now)
        return {"session_id": sid, "splits_count": st.meta.shards}

    def parallel_scan(self, table, name: str, query: Query | None = None, session_id: str | None = None,
                      max_parallel: int = 1, current_parallel_id: int = 0, limit: int = 100,
                      next_token: bytes | None = None, columns=None) -> SearchResult:
        """Rows of split ``current_parallel_id`` of ``max_parallel`` matching ``query``, by primary
        key, ``limit`` (<= 2000) at a time; ``next_token`` continues. Together the splits return
        every matching row exactly once."""
        st = self.state(table, name)
        sess = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if sess is None or sess[:2] != (table.name, name):
            raise WidetableError(f"parallel scan session {describe(session_id)} does not exist or "
                                 "has expired", "OTSSessionNotExist")
        if type(max_parallel) is not int or not 1 <= max_parallel <= st.meta.shards:
            raise ParameterInvalid(f"max_parallel must be in [1, {st.meta.shards}] (the splits "
                                   f"count), got {describe(max_parallel)}")
        if type(current_parallel_id) is not int or not 0 <= current_parallel_id < max_parallel:
            raise ParameterInvalid(f"current_parallel_id must be in [0, {max_parallel}), got "
                                   f"{describe(current_parallel_id)}")
        if type(limit) is not int or not 1 <= limit <= MAX_SCAN_LIMIT:
            raise ParameterInvalid(f"parallel scan limit must be in [1, {MAX_SCAN_LIMIT}], got "
                                   f"{describe(limit)}")
        mode, names = check_columns(st.meta, columns)
        if mode not in (RETURN_NONE, "RETURN_ALL_FROM_INDEX") and mode != "RETURN_SPECIFIED":
            raise ParameterInvalid("parallel scan returns RETURN_NONE, RETURN_SPECIFIED or "
                                   "RETURN_ALL_FROM_INDEX columns")
        shards = [i for i in range(st.meta.shards) if i % max_parallel == current_parallel_id]
        return self._scan_page(st, table, query or MatchAllQuery(), shards, limit, next_token, mode,
                               names)

    def _scan_page(self, st, table, query, shards, limit, next_token, mode, names) -> SearchResult:
        keys_ = SortKeys([PrimaryKeySort()])
        after = None if next_token is None else keys_.decode_token(next_token)
        hits = Searcher(st).matches(check_query(query), shards)
        dec = sorted(((keys_.key(h[0], h[1], h[2]), h) for h in hits), key=lambda d: keys_.cmp_key(d[0]))
        if after is not None:
            dec = [d for d in dec if keys_.compare(d[0], after) > 0]
        page = dec[:limit]
        token = keys_.encode_token(page[-1][0]) if len(dec) > limit else None
        rows = Searcher(st)._rows([h for _, h in page], mode, names,
                                  lambda pks, ns: _fetch(table, pks, ns))
        return SearchResult(rows, -1, token)

    # -- verification ------------------------------------------------------------------------------

    def verify(self, table, name: str, limit: int = 1000, wait: float = 30.0) -> SearchIndexReport:
        """Compare every document with the base table (after waiting up to ``wait`` s for sync)."""
        self.wait(table, name, wait)
        st = self.state(table, name)
        found: dict[tuple, tuple[int, dict]] = {}
        extra: list = []
        since = Searcher(st).visible_from()
        for i, shard in enumerate(st.shards):
            se = shard.searcher()
            q = shard.q_rows() if since is None else shard.q_bool(
                [("must", shard.q_rows()), ("filter", shard.q_ts_from(since))])
            for _, src in shard.run(se, q, max(se.num_docs, 1)):
                pk, values, _ = decode_src(src)
                if pk in found:
                    extra.append(pk)  # a second document for one row
                found[pk] = (i, values)
        missing_, stale, rejected = [], [], []
        checked = 0
        lo, hi = full_range(len(st.pk_names), False)
        for row in table.scan(lo, hi):
            pk = tuple(row.primary_key)
            stamps = row._stamps
            ts = stamps if type(stamps) is int else max(stamps.values(), default=0)
            if since is not None and ts < since:  # past the index's TTL: expected absent
                found.pop(pk, None)
                continue
            checked += 1
            try:
                expect = row_values(st.meta, st.pk_names, pk, row.columns)
            except Rejected:
                rejected.append(pk)
                if pk in found:
                    extra.append(pk)
                found.pop(pk, None)
                continue
            got = found.pop(pk, None)
            if got is None:
                missing_.append(pk)
            elif got[0] != shard_of(st.meta, st.pk_names, pk) or not _same(got[1], expect):
                stale.append(pk)
        extra += list(found)
        return SearchIndexReport(checked, missing_[:limit], stale[:limit], extra[:limit], rejected[:limit])


def _same(a: dict, b: dict) -> bool:
    return msgpack.packb(a, use_bin_type=True) == msgpack.packb(b, use_bin_type=True)


def _consumer(meta: IndexMeta) -> str:
    return f"search:{meta.index_id}"


def _fetch(table, pks: list[tuple], names: list[str] | None) -> list[Row]:
    """The rows of ``pks`` (their ``names`` columns, None: all), columns sorted by name; a row
    gone since it was indexed comes back empty. One multi-row read for the page."""
    got = table.get_rows(pks, names or None)
    if names:  # a projection's columns come sorted
        return [Row(pk, {}, 0) if row is None else Row(pk, row.columns, row._stamps)
                for pk, row in zip(pks, got)]
    return [Row(pk, {}, 0) if row is None else Row(pk, dict(sorted(row.columns.items())), row._stamps)
            for pk, row in zip(pks, got)]


def search_root(path: str | None) -> str | None:
    """Where a store at ``path`` keeps its tantivy shards (None: a memory store, whose path
    may be None or ":memory:"; the latter used to put the shards in a ``:memory:`` folder
    of the working directory, where the next run found them)."""
    return None if path is None or path == ":memory:" else os.path.join(path, "search")
