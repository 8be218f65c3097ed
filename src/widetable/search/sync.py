"""Keeping one search index in step with its base table: full sync, then the change log.

State of an index (``IndexState``): N tantivy shards and the sync position,
which every commit of every shard records as its checkpoint payload (JSON)::

    {"pass": n, "phase": "FULL"|"INCR", "start": seq, "next": pk | null,
     "ckpt": {log shard: seq}, "rejected": n, "last_rejected": text | null}

* FULL: rows are read from the base table in key order, ``BACKFILL_ROWS`` per
  step, from ``next``; records after ``start`` (the log's last seq when the
  index was created) are applied meanwhile. When the scan ends: INCR.
* Applying a record, or a backfilled row, *syncs* its row: the row's documents
  are deleted and, if the row is visible now, added again from the row as it is
  read now. Syncing is idempotent, so replaying records after a crash has no
  visible effect; a record not yet applied is always after ``ckpt``.
* After a crash the index resumes from the payload of the lowest ``pass`` among
  its shards: each shard holds at least what that pass committed.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time

from ..storage.tantivy_index import Shard
from ..table.table import full_range
from ..table.values import now_ms
from ..keys import codec
from .builder import RowBuilder
from .documents import ROW_ID, FieldLayout, Rejected, encode_src, locate
from .frame import FILE as FRAME_FILE
from .frame import OrderFrame
from .schema import IndexMeta

BACKFILL_ROWS = 2000
FULL_COMMIT_INTERVAL = 30.0  # seconds between commits while backfilling: each makes segments,
# which every later search pays for; a crash redoes at most this much of the backfill
LOG_GROUP = 5000
REFRESH_INTERVAL = 5.0  # seconds between reader reloads of an idle index (merged segments)


class IndexState:
    """One search index being served and kept in sync."""

    def __init__(self, meta: IndexMeta, table, root: str | None, source) -> None:
        self.meta = meta
        self.table = table
        self.source = source
        self.layout = FieldLayout(meta)
        self.pk_names = table.schema.pk_names
        self.builder = RowBuilder(self.layout, self.pk_names)
        self.dir = None if root is None else os.path.join(root, str(meta.index_id))
        self.shards = [Shard(None if self.dir is None else os.path.join(self.dir, f"shard-{i}"),
                             self.layout.tantivy_fields, self.layout.pk_levels,
                             order_field=self.layout.order_field)
                       for i in range(meta.shards)]
        # layout 3: the bounds of the order field ``_o`` (search/frame.py), made by the first
        # full sync
        self.frame = OrderFrame(None if self.dir is None or not self.layout.order_field
                                else os.path.join(self.dir, FRAME_FILE))
        # layout 3 with a fast GEO_POINT: the next ``_rid`` of each shard (past every one in it)
        self.rids = [s.max_value(ROW_ID) + 1 if self.layout.row_ids else 0 for s in self.shards]
        self.lock = threading.RLock()
        self.error: str | None = None
        self.dropped = False
        self.last_commit = 0.0
        self.last_ttl_purge = 0.0
        self.last_refresh = 0.0
        payloads = [s.checkpoint() for s in self.shards]
        states = [json.loads(p) for p in payloads if p is not None]
        if len(states) == len(self.shards):
            st = min(states, key=lambda x: x["pass"])
        else:
            st = {"pass": 0, "phase": "FULL", "start": source.last_seq(table), "next": None,
                  "ckpt": {}, "rejected": 0, "last_rejected": None, "fresh": True}
            if states:  # a crash before the first commit of every shard: start again
                for s in self.shards:
                    with s.lock:
                        s.clear()
            self.frame.clear()
        self.pass_no = st["pass"]
        self.phase = st["phase"]
        self.start = st["start"]
        self.next = None if st["next"] is None else pk_from_json(st["next"])
        self.ckpt = {int(k): v for k, v in st["ckpt"].items()}
        self.committed = dict(self.ckpt)  # what the shards' last commit holds: trimming keeps
        # every record after it (the in-memory ``ckpt`` runs ahead until the next commit)
        self.rejected = st["rejected"]
        # The first backfill of an empty index: no row at or after ``next`` has documents
        # (log records for those rows are left to the backfill, which reads them later), so
        # backfilled rows are added without a delete. False once a later pass begins (a
        # longer TTL syncs every row again over the documents there).
        self.fresh = bool(st.get("fresh", False)) and self.phase == "FULL"
        self.last_rejected = st["last_rejected"]
        self.dirty = not states

    def order(self, pk: tuple) -> list[int]:
        """The order values a row document of ``pk`` carries (layouts 2 and 3)."""
        return self.layout.order(pk, self.frame)  # type: ignore[return-value]

    def checkpoint(self, shard: int) -> int:
        """The last seq of log ``shard`` applied (in memory; a commit may still be due)."""
        return self.ckpt.get(shard, self.start)

    def committed_checkpoint(self, shard: int) -> int:
        """The last seq of log ``shard`` that every shard's commit covers: the trim limit."""
        return self.committed.get(shard, self.start)

    # -- one step ---------------------------------------------------------------------

    def step(self, commit_interval: float) -> int:
        """Apply what is pending (a backfill chunk, log records); commit when due.
        Returns the rows synced."""
        with self.lock:
            if self.dropped:
                return 0
            n = 0
            was_full = self.phase == "FULL"
            if was_full:
                n += self._backfill()
            n += self._apply_log()
            now = time.monotonic()
            if self.meta.ttl > 0 and now - self.last_ttl_purge > 60:
                self.last_ttl_purge = now
                cutoff = now_ms() - self.meta.ttl * 1000
                for s in self.shards:
                    s.delete_older(cutoff)
                self.dirty = True
            # While backfilling, commit every few seconds (each commit costs a segment) or as
            # the backfill ends; afterwards every commit_interval.
            due = FULL_COMMIT_INTERVAL if self.phase == "FULL" else commit_interval
            if self.dirty and (now - self.last_commit >= due or (self.phase == "INCR" and
                                                                  was_full)):
                self.commit()
            elif now - self.last_refresh >= REFRESH_INTERVAL:
                # tantivy merges segments in the background after commits; searches see the
                # merged segments (fewer to visit) only once the reader reloads
                self.last_refresh = now
                for s in self.shards:
                    s.refresh()
            return n

    def commit(self) -> None:
        self.pass_no += 1
        payload = json.dumps({
            "pass": self.pass_no, "phase": self.phase, "start": self.start,
            "next": None if self.next is None else list(self.next),
            "ckpt": {str(k): v for k, v in self.ckpt.items()},
            "rejected": self.rejected, "last_rejected": self.last_rejected, "fresh": self.fresh,
        }, default=_jsonable).encode()
        self.frame.flush()  # the bounds the documents' ``_o`` values used, durable first
        for s in self.shards:
            with s.lock:
                s.commit(payload)
        self.committed = dict(self.ckpt)
        self.dirty = False
        self.last_commit = time.monotonic()

    def _backfill(self) -> int:
        names = self.pk_names
        lo, hi = full_range(len(names), False)
        start = self.next if self.next is not None else lo
        page = self.table.get_range(start, hi, limit=BACKFILL_ROWS)
        fresh = self.fresh
        if fresh and self.layout.order_field:
            enc = codec.encode_tuple
            nxt = page.next_start_primary_key
            self.frame.add_page([enc(tuple(r.primary_key)) for r in page.rows],
                                None if nxt is None else enc(tuple(nxt)))
        for row in page.rows:
            self.sync_row(tuple(row.primary_key), row, fresh)
        self.next = page.next_start_primary_key
        if self.next is None:
            self.phase = "INCR"
            self.fresh = False
        self.dirty = True
        return len(page.rows)

    def _apply_log(self) -> int:
        pks: dict[tuple, None] = {}
        moved = {}
        for shard in self.source.shards(self.table):
            last = None
            for seq, pk, _ts in self.source.read(self.table, shard, self.checkpoint(shard), LOG_GROUP):
                pks[tuple(pk)] = None
                last = seq
            if last is not None:
                moved[shard] = last
        if not moved:
            return 0
        get = self.table.get_row
        ahead = self._ahead()
        for pk in pks:
            if ahead is not None and ahead(pk):
                continue  # the backfill reads this row later, as it is then
            self.sync_row(pk, get(pk))
        self.ckpt.update(moved)
        self.dirty = True
        return len(pks)

    def sync_row(self, pk: tuple, row, fresh: bool = False) -> None:
        """Make the documents of ``pk`` those of ``row`` (None: no row); ``fresh``: ``pk`` has
        no documents (a first backfill's row), so there is nothing to delete."""
        layout = self.layout
        owner, i = locate(self.meta, self.pk_names, pk)
        shard = self.shards[i]
        with shard.lock:
            if not fresh:
                shard.delete(owner)
            if row is None:
                return
            columns = row.columns
            try:
                values, has, pairs, children = self.builder.build(pk, columns)
            except Rejected as exc:
                self.rejected += 1
                self.last_rejected = f"row {list(pk)!r}: {exc}"
                return
            stamps = row._stamps
            ts = stamps if type(stamps) is int else max(stamps.values(), default=0)
            stored = {c: columns[c] for c in layout.stored_sources if c in columns}
            src = encode_src(pk, values, stored)
            if layout.row_ids:
                pairs.append((ROW_ID, self.rids[i]))
                self.rids[i] += 1
            shard.add(owner, "row", has, ts, src, pairs, layout.order(pk, self.frame))
            ob = owner.encode()
            for kind, chas, cpairs in children:
                shard.add(owner, kind, chas, ts, ob, cpairs)

    def _ahead(self):
        """While a first backfill runs, the test of a key the backfill has not reached (its
        rows have no documents yet); None otherwise."""
        if not (self.fresh and self.phase == "FULL"):
            return None
        if self.next is None:
            return lambda pk: True
        start = codec.encode_tuple(tuple(self.next))
        return lambda pk: codec.encode_tuple(tuple(pk)) >= start

    # -- observing ----------------------------------------------------------------------

    def oldest_unapplied(self) -> int | None:
        oldest = None
        for shard in self.source.shards(self.table):
            ts = self.source.oldest_after(self.table, shard, self.checkpoint(shard))
            if ts is not None and (oldest is None or ts < oldest):
                oldest = ts
        return oldest

    def caught_up(self) -> bool:
        """Every row backfilled, every record applied, and committed."""
        return self.phase == "INCR" and not self.dirty and self.oldest_unapplied() is None

    def close(self) -> None:
        for s in self.shards:
            s.close()

    def destroy(self) -> None:
        self.dropped = True
        self.close()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)


def _jsonable(v: object) -> object:
    if isinstance(v, bytes):
        return {"__bytes__": v.hex()}
    raise TypeError(type(v))


def pk_from_json(v: list) -> tuple:
    return tuple(bytes.fromhex(x["__bytes__"]) if isinstance(x, dict) else x for x in v)

