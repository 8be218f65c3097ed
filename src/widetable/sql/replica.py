"""Columnar replicas: each scanned data table kept as a DuckDB table, fed by its change log.

A full scan that reads stored rows one by one spends ~1 us per row decoding them in
Python, more than DuckDB needs for a whole aggregation. So a table that SQL scans in
full gets a **replica**: the columns its mappings declare (and its primary key), as
a table of the attached DuckDB database (``duck.ReplicaStore``, on disk in
``<store>/sql/replica.duckdb``), which DuckDB scans natively.

* **Built** in the background after the first full scan of the table asks for it:
  the replica registers as a change-log consumer (``stream/consumers.py``), so the
  table logs from then on, then reads every row (``stored_range``) into DuckDB, then
  catches up on the log from where it registered.
* **Kept** by applying the log: each record's row is read again as it is now
  (``stored_row``), its old replica row deleted and the new one, if any, inserted.
  Syncing a row is idempotent, so replaying records is harmless.
* **Exact**: before a query scans a replica it applies every record logged so far
  (the query sees every write acknowledged before it started); a replica not ready
  (building, failed, columns missing, a value that does not fit its mapped type)
  is not used: the scan reads the rows instead, and EXPLAIN says why.
* **Crash-safe**: rows, bad cells and the log position they cover change in one
  DuckDB transaction. The consumer holds log trimming back to that position, so
  after a crash the replica resumes from it; if trimming passed it anyway (the
  store ran without the replica registered), the replica is rebuilt.
* **Health**: one background thread (``widetable-sql-replica``) applies the log as
  it is written and checkpoints DuckDB's WAL; errors back off per replica
  (``health.LoopHealth``), shown by ``state()``.

Only tables without TTL are replicated (a read applies no options there:
``Table.plain_reads``); others are always read row by row.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import TYPE_CHECKING

import msgspec

from ..health import LoopHealth
from ..health import log as health_log
from ..stream import log as changelog_records
from ..table import rowcodec
from ..table.table import full_range
from .scan import key_rows, replica_rows

if TYPE_CHECKING:
    from ..context import StoreContext
    from ..table.table import Table

BUILD_PAGE = 5000
LOG_PAGE = 5000
CHECKPOINT_INTERVAL = 30.0  # seconds between DuckDB checkpoints of a changed replica
# Seconds between background passes of one replica: each pass costs a DuckDB delete by
# key (a join over the replica), so a table written without pause is applied in batches;
# a query still applies every record logged before it (``catch_up``).
APPLY_INTERVAL = 1.0
_pk_bytes = msgspec.msgpack.Encoder().encode
_unpack = rowcodec.unpack


def replica_path(path: object) -> str | None:
    """Where a store at ``path`` keeps its replicas (None: a memory store: in memory)."""
    if not isinstance(path, str) or path.startswith(":"):
        return None
    return os.path.join(path, "sql", "replica.duckdb")


class Replica:
    """The replica of one data table (see the module doc)."""

    def __init__(self, owner: Replicas, table: Table, columns: list[tuple[str, str]],
                 start: int, positions: dict[int, int] | None = None) -> None:
        self.owner = owner
        self.table = table
        self.table_id = table.schema.table_id
        self.columns = columns  # [(name, widetable type)], key columns first
        self.types = dict(columns)
        self.key_names = table.schema.pk_names
        self.start = start
        self.positions: dict[int, int] = dict(positions or {})
        self.ready = positions is not None
        self.dropped = False
        self.lock = threading.RLock()
        self.dirty = True
        self.bad: dict[tuple, set[str]] = {}
        self.rows = self.bytes = 0
        self.error: str | None = None
        self.last_checkpoint = time.monotonic()
        self.last_pass = 0.0  # when the background thread last applied the log
        self.changed = False
        self.health = LoopHealth(f"SQL columnar replica of table {table.name!r}")
        self.consumer = None

    @property
    def name(self) -> str:
        return f"sql-replica:{self.table.name}"

    def position(self, shard: int) -> int:
        """The last seq of log ``shard`` the replica's stored rows cover (trim holds here)."""
        return self.positions.get(shard, self.start)

    def wake(self) -> None:
        self.dirty = True
        self.owner.event.set()

    def meta(self) -> str:
        return json.dumps([list(c) for c in self.columns])

    # -- building ----------------------------------------------------------------------

    def build(self) -> None:
        """Read every row of the table into the (empty) replica, then mark it ready and
        catch up on the log from where it registered."""
        store = self.owner.store
        lo, hi = full_range(len(self.key_names), False)
        start = lo
        while not self.dropped and not self.owner.stopping:
            blobs, nxt = self.table.stored_range(start, hi, limit=BUILD_PAGE)
            rows, bad = self._arrow([_unpack(b) for b in blobs], blobs)
            store.insert(self.table_id, rows, [(_pk_bytes(pk), c) for pk, c in bad])
            for pk, c in bad:
                self.bad.setdefault(pk, set()).add(c)
            self.rows += rows.num_rows
            self.bytes += sum(map(len, blobs))
            if nxt is None:
                break
            start = nxt
        if self.dropped or self.owner.stopping:
            return
        with self.lock:
            store.apply(self.table_id, None, None, [], [], self._positions_json(), ready=True)
            self.ready = True
            self.dirty = True
        self.catch_up()

    def _arrow(self, decoded: list, blobs: list[bytes]):
        """The replica rows of decoded stored rows, and their bad cells ``(pk, column)``."""
        return replica_rows(self.columns, self.key_names, decoded, blobs)

    # -- keeping up ----------------------------------------------------------------------

    def catch_up(self) -> int:
        """Apply every change record logged so far; returns the rows synced. A query calls
        this before it scans the replica (read-your-writes)."""
        if not self.ready or self.dropped:
            return 0
        with self.lock:
            if not self.dirty:
                return 0
            self.dirty = False  # cleared first: a record logged from now on sets it again
            synced = 0
            try:
                while True:
                    page = self.owner.ctx.changelog.read(self.consumer, limit=LOG_PAGE)
                    if not page.checkpoints:
                        break
                    keys = list(dict.fromkeys(tuple(r.primary_key) for r in page.records))
                    self._sync(keys, page.checkpoints)
                    synced += len(keys)
                    if not page.more:
                        break
            except BaseException:
                self.dirty = True
                raise
            return synced

    def _sync(self, keys: list[tuple], checkpoints: dict[int, int]) -> None:
        """Replace the replica rows of ``keys`` by the rows as stored now, and advance the
        position to ``checkpoints``, in one transaction."""
        blobs = [self.table.stored_row(pk) for pk in keys]
        found = [(pk, b) for pk, b in zip(keys, blobs) if b is not None]
        rows, bad = self._arrow([_unpack(b) for _, b in found], [b for _, b in found])
        key_table = key_rows(self.key_names, [self.types[n] for n in self.key_names], keys)
        unbad = [_pk_bytes(pk) for pk in keys if pk in self.bad]
        moved = dict(self.positions)
        moved.update(checkpoints)
        deleted = self.owner.store.apply(
            self.table_id, key_table, rows, unbad, [(_pk_bytes(pk), c) for pk, c in bad],
            json.dumps({str(k): v for k, v in moved.items()}))
        self.positions = moved
        for pk in keys:
            self.bad.pop(pk, None)
        for pk, c in bad:
            self.bad.setdefault(pk, set()).add(c)
        self.rows += rows.num_rows - deleted[0]
        self.bytes += sum(len(b) for _, b in found) - deleted[1]
        self.changed = True

    def _positions_json(self) -> str:
        return json.dumps({str(k): v for k, v in self.positions.items()})

    # -- serving -----------------------------------------------------------------------

    def unusable(self, columns) -> str | None:
        """Why the replica cannot serve a scan of ``columns`` (mapping Columns), or None."""
        if self.dropped:
            return "the columnar replica was dropped"
        if not self.ready:
            return (f"the columnar replica is building ({self.rows:,} rows so far)"
                    + (f"; last error: {self.error}" if self.error else ""))
        for c in columns:
            if self.types.get(c.name) != c.wtype:
                return f"the columnar replica has no {c.wtype} column {c.name!r}"
        used = {c.name for c in columns}
        for pk, cols in self.bad.items():
            hit = cols & used
            if hit:
                return (f"row {pk!r} holds a value of another type than column "
                        f"{min(hit)!r} is mapped with")
        return None

    def describe(self) -> str:
        shards = ", ".join(f"{k}:{v}" for k, v in sorted(self.positions.items())) or \
            f"start {self.start}"
        return f"columnar replica ({self.rows:,} rows, log position {shards})"


class Replicas:
    """The columnar replicas of one store and the thread that keeps them. Thread-safe."""

    def __init__(self, ctx: StoreContext, store) -> None:
        """``store``: the DuckDB side (``duck.ReplicaStore``)."""
        self.ctx = ctx
        self.store = store
        self.by_table: dict[int, Replica] = {}
        self.event = threading.Event()
        self.stopping = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._load()

    def _load(self) -> None:
        """Resume the replicas recorded in DuckDB: register each as a consumer again,
        from its recorded position; drop those whose table is gone or whose log records
        were trimmed past that position."""
        tables = {t.schema.table_id: t for t in list(self.ctx.tables.values())}
        for table_id, name, columns, start, positions, ready in self.store.load():
            table = tables.get(table_id)
            pos = {int(k): v for k, v in json.loads(positions or "{}").items()}
            if table is None or table.name != name or not ready or not table.plain_reads \
                    or self._trimmed_past(table, start, pos):
                self.store.drop(table_id)
                continue
            try:
                cols = [(n, t) for n, t in json.loads(columns)]
                r = Replica(self, table, cols, start, pos)
                for pk_blob, col in self.store.bad_cells(table_id):
                    pk = tuple(msgspec.msgpack.decode(pk_blob))
                    r.bad.setdefault(pk, set()).add(col)
                r.rows, r.bytes = self.store.stats(table_id)
            except Exception as exc:  # noqa: BLE001 - a damaged replica is built again
                health_log.warning("widetable: SQL replica of table %r unreadable (%s); it is "
                                   "dropped and built again at the next full scan", name, exc)
                self.store.drop(table_id)
                continue
            self._register(r, start)
            self.by_table[table_id] = r
        if self.by_table:
            self._start()

    def _trimmed_past(self, table: Table, start: int, pos: dict[int, int]) -> bool:
        engine, tid = self.ctx.engine, table.schema.table_id
        for shard in range(self.ctx.partitions.partitions(table).next_id):
            if changelog_records.trim_mark(engine, tid, shard) > pos.get(shard, start):
                return True
        return False

    def _register(self, r: Replica, start: int | None) -> int:
        log = self.ctx.changelog
        old = log.get(r.name)
        if old is not None:
            log.unregister(r.name)
        r.consumer = log.register(r.name, r.table, None, start, wake=r.wake,
                                  position=r.position)
        r.consumer.health = r.health  # the registry reports the replica's own state
        return r.consumer.start_seq

    # -- what queries use ----------------------------------------------------------------

    def for_scan(self, table: Table, columns, wanted: list[tuple[str, str]],
                 start: bool = True) -> tuple:
        """``(replica, None)`` if the replica of ``table`` can serve a scan of ``columns``
        now, else ``(None, why)``; with ``start``, a missing or outdated replica starts
        building (``wanted``: the columns its mappings declare)."""
        if not table.plain_reads:
            return None, "the table has a TTL: its rows are read with it applied"
        with self._lock:
            r = self.by_table.get(table.schema.table_id)
            stale = r is not None and (r.table is not table or r.dropped or (
                r.ready and any(r.types.get(n) != t for n, t in wanted)))
            if not start and (r is None or stale):
                return None, ("the replica lacks columns its mappings declare now: the next "
                              "full scan builds it again" if stale else
                              "none yet: the first full scan builds one")
            if stale:
                self._drop(r)  # its table is gone, or its mappings declare more columns
                r = None
            if r is None:
                r = self._create(table, wanted)
                return None, "the columnar replica is building (started by this scan)"
        if r.ready:
            r.catch_up()  # every write acknowledged so far: a bad cell among them counts
        why = r.unusable(columns)
        return (None, why) if why else (r, None)

    def _create(self, table: Table, columns: list[tuple[str, str]]) -> Replica:
        r = Replica(self, table, columns, -1)
        r.start = self._register(r, None)
        self.store.create(r.table_id, table.name, columns, r.meta(), r.start)
        self.by_table[r.table_id] = r
        self._start()
        self.event.set()
        return r

    def _drop(self, r: Replica) -> None:
        r.dropped = True
        self.by_table.pop(r.table_id, None)
        with r.lock:
            if self.ctx.changelog.get(r.name) is not None and \
                    self.ctx.changelog.get(r.name).table is r.table:
                self.ctx.changelog.unregister(r.name)
            self.store.drop(r.table_id)

    def forget(self, keep: set[int]) -> None:
        """Drop the replicas of tables not in ``keep`` (table ids that still have a
        mapping)."""
        with self._lock:
            for r in list(self.by_table.values()):
                if r.table_id not in keep or r.table._unusable:
                    self._drop(r)

    def wait(self, timeout: float) -> bool:
        """Wait until no replica is building; whether none is."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(r.ready or r.dropped for r in list(self.by_table.values())):
                return True
            time.sleep(0.02)
        return False

    def state(self) -> dict[str, dict]:
        """Each replica's table -> its state: ready, rows, position, lag, error."""
        out = {}
        for r in list(self.by_table.values()):
            out[r.table.name] = {"ready": r.ready, "rows": r.rows, "positions": dict(r.positions),
                                 "lag_ms": None if r.consumer is None else
                                 self.ctx.changelog.lag_ms(r.consumer),
                                 "health": r.health.state()}
        return out

    # -- the background thread -----------------------------------------------------------

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="widetable-sql-replica",
                                            daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        backoff: dict[int, float] = {}
        wait = 0.5
        while not self.stopping:
            self.event.wait(wait)
            self.event.clear()
            wait = 0.5
            if self.stopping:
                return
            now = time.monotonic()
            for r in list(self.by_table.values()):
                if r.dropped or backoff.get(r.table_id, 0) > now:
                    continue
                if r.ready and now - r.last_pass < APPLY_INTERVAL:
                    if r.dirty:  # come back for it once its interval is over
                        wait = min(wait, APPLY_INTERVAL - (now - r.last_pass))
                    continue
                r.last_pass = now
                try:
                    if not r.ready:
                        r.build()
                    else:
                        r.catch_up()
                        if r.changed and now - r.last_checkpoint > CHECKPOINT_INTERVAL:
                            self.store.checkpoint()
                            r.changed, r.last_checkpoint = False, now
                    r.error = None
                    r.health.ok()
                    backoff.pop(r.table_id, None)
                except Exception as exc:  # noqa: BLE001 - logged, backed off, retried
                    if self.stopping:
                        return
                    if r.table._unusable or r.table.name not in self.ctx.tables:
                        with self._lock:  # the table was dropped: so is its replica
                            self._drop(r)
                        continue
                    r.error = str(exc)
                    backoff[r.table_id] = now + r.health.failed(exc, "keeping the replica")
                    if not r.ready:  # a build starts again from an empty replica
                        self._restart_build(r)

    def _restart_build(self, r: Replica) -> None:
        try:
            with self._lock:
                self.store.create(r.table_id, r.table.name, r.columns, r.meta(), r.start)
                r.rows = r.bytes = 0
                r.bad.clear()
        except Exception as exc:  # noqa: BLE001 - the next pass tries again
            r.health.failed(exc, "emptying the replica to build it again")

    def close(self) -> None:
        self.stopping = True
        self.event.set()
        if self._thread is not None:
            self._thread.join(10)
