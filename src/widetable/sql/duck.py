"""The DuckDB adapter: the only module that imports ``duckdb``.

One in-memory DuckDB database per SQL session; each statement runs on its own
cursor with its scans registered as Arrow record batch readers, and its answer
is read as Arrow batches (streamed: DuckDB pulls the scans as the answer is
read). DuckDB types and errors stay here: errors become ``WidetableError``s.

A statement's readers must be wound down before they are dropped (DuckDB's
threads may still pull a Python source): :meth:`Running.close` stops the
scans, drains what is left, then closes the cursor; every statement still
open at interpreter exit is closed then.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import pyarrow as pa

from ..errors import ParameterInvalid, WidetableError
from .scan import Budget, timeout_error

_open: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for running in list(_open):
        running.close()


def translate(exc: BaseException, budget: Budget | None) -> BaseException:
    """The WidetableError for a DuckDB failure (a scan's own failure first)."""
    if budget is not None and budget.failure is not None:
        return budget.failure
    if isinstance(exc, WidetableError):
        return exc
    message = str(exc).strip()
    if isinstance(exc, duckdb.InterruptException):
        return timeout_error(budget.timeout if budget else None)
    if isinstance(exc, duckdb.ParserException):
        return ParameterInvalid(f"SQL syntax error: {message}")
    if isinstance(exc, (duckdb.ConversionException, duckdb.InvalidInputException,
                        duckdb.OutOfRangeException)):
        return ParameterInvalid(f"SQL type mismatch: {message}")
    if isinstance(exc, (duckdb.BinderException, duckdb.CatalogException)):
        return ParameterInvalid(f"SQL: {message}")
    if isinstance(exc, duckdb.Error):
        return WidetableError(f"SQL execution failed: {message}")
    return exc


def _guard(batches: Iterator, budget: Budget) -> Iterator:
    """The scan's batches, recording its failure (DuckDB rewords what it passes on)."""
    try:
        for b in batches:
            if budget.stop.is_set():
                return
            yield b
    except BaseException as exc:
        if budget.failure is None:
            budget.failure = exc
        budget.stop.set()
        raise


def _interrupt(cursor) -> None:
    """The statement's timer: interrupt its cursor (already closed: nothing to stop)."""
    try:
        cursor.interrupt()
    except duckdb.Error:
        pass


class _Alarm:
    """One statement's deadline in the :class:`_Watchdog`; ``cancel()`` disarms it."""

    __slots__ = ("cancelled", "cursor")

    def __init__(self, cursor) -> None:
        self.cursor = cursor
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        self.cursor = None


class _Watchdog:
    """One thread interrupting every statement past its deadline (a thread started per
    statement cost more than a small query's whole run)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Alarm]] = []
        self._cond = threading.Condition()
        self._n = 0
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, cursor) -> _Alarm:
        import heapq
        import time
        alarm = _Alarm(cursor)
        with self._cond:
            self._n += 1
            heapq.heappush(self._heap, (time.monotonic() + seconds, self._n, alarm))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="widetable-sql-timeout",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()
        return alarm

    def _run(self) -> None:
        import heapq
        import time
        while True:
            with self._cond:
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait(5.0)
                    if not self._heap:
                        self._thread = None
                        return
                    continue
                due, _, alarm = self._heap[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._cond.wait(min(wait, 1.0))
                    continue
                heapq.heappop(self._heap)
                cursor = alarm.cursor
            if cursor is not None and not alarm.cancelled:
                _interrupt(cursor)


_watchdog = _Watchdog()


class Running:
    """A statement DuckDB is running: ``reader`` streams its answer."""

    def __init__(self, cursor, reader: pa.RecordBatchReader, budget: Budget,
                 timer: _Alarm | None) -> None:
        self._cursor = cursor
        self.reader = reader
        self._budget = budget
        self._timer = timer
        self._closed = False
        _open.add(self)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        try:
            while True:
                try:
                    batch = self.reader.read_next_batch()
                except StopIteration:
                    if self._budget.failure is not None:  # a scan failed where DuckDB
                        raise self._budget.failure from None  # could not see it
                    break
                except Exception as exc:  # noqa: BLE001 - translated
                    raise translate(exc, self._budget) from None
                yield batch
        finally:
            self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        self._budget.stop.set()  # scans end: what DuckDB still pulls is quick
        try:
            for _ in self.reader:
                pass
        except Exception:  # noqa: BLE001 - closing: the statement's answer is gone anyway
            pass
        try:
            self.reader.close()
        finally:
            self._cursor.close()
        _open.discard(self)


class Duck:
    """An in-memory DuckDB database for one SQL session, with the columnar replicas'
    database attached as ``wt_replica`` (a file, or in memory for a memory store)."""

    def __init__(self, threads: int = 1, replica_path: str | None = None) -> None:
        # One thread: the scans are Python (the GIL bounds them), and DuckDB then reads
        # ahead of the answer less, so a LIMIT it satisfies stops the scans sooner.
        self._db = duckdb.connect(":memory:", config={"threads": threads})
        self._lock = threading.Lock()
        self._running: weakref.WeakSet = weakref.WeakSet()
        self.replicas = ReplicaStore(self._db, replica_path)

    def run(self, sql: str, params: list, sources: list[tuple[str, pa.Schema, Iterator]],
            budget: Budget, batch_rows: int = 8192) -> Running:
        """Start ``sql`` with each source registered under its name; the answer streams."""
        with self._lock:
            cursor = self._db.cursor()
        timer = None
        try:
            for name, schema, batches in sources:
                if schema is None:  # a replica's table: batches is the SELECT to view
                    cursor.execute(f'CREATE TEMP VIEW "{name}" AS {batches}')
                    continue
                cursor.register(name, pa.RecordBatchReader.from_batches(
                    schema, _guard(batches, budget)))
            if budget.timeout is not None:
                timer = _watchdog.arm(budget.timeout, cursor)
            result = cursor.execute(sql, params or None)
            reader = result.to_arrow_reader(batch_rows)
        except Exception as exc:  # noqa: BLE001 - translated
            if timer is not None:
                timer.cancel()
            budget.stop.set()
            cursor.close()
            raise translate(exc, budget) from None
        running = Running(cursor, reader, budget, timer)
        self._running.add(running)
        return running

    def explain(self, sql: str, params: list, sources: list[tuple[str, pa.Schema | None, object]]
                ) -> list[dict]:
        """DuckDB's physical plan of ``sql`` as a list of operators, depth first:
        ``{"name", "depth", "info"}`` (``info``: DuckDB's extra_info, e.g. a scan's
        ``Filters`` and ``Projections``). Nothing is read: each Python source is
        registered as an empty reader of its schema."""
        import json
        with self._lock:
            cursor = self._db.cursor()
        try:
            for name, schema, what in sources:
                if schema is None:
                    cursor.execute(f'CREATE TEMP VIEW "{name}" AS {what}')
                else:
                    cursor.register(name, pa.RecordBatchReader.from_batches(schema, iter(())))
            rows = cursor.execute(f"EXPLAIN (FORMAT json) {sql}", params or None).fetchall()
        except Exception as exc:  # noqa: BLE001 - translated
            raise translate(exc, None) from None
        finally:
            cursor.close()
        out: list[dict] = []

        def walk(node: dict, depth: int) -> None:
            out.append({"name": node.get("name", "?"), "depth": depth,
                        "info": node.get("extra_info") or {}})
            for child in node.get("children") or []:
                walk(child, depth + 1)
        for row in rows:
            for node in json.loads(row[1]):
                walk(node, 0)
        return out

    def copy(self, sql: str, params: list, sources: list, budget: Budget, path: str,
             fmt: str) -> int:
        """``COPY (sql) TO path``; the number of rows written."""
        options = {"parquet": "(FORMAT PARQUET)", "csv": "(FORMAT CSV, HEADER)"}
        if fmt == "arrow":
            running = self.run(sql, params, sources, budget)
            count = 0
            try:
                with pa.OSFile(path, "wb") as sink:
                    writer = None
                    for batch in running:
                        if writer is None:
                            writer = pa.ipc.new_file(sink, batch.schema)
                        writer.write_batch(batch)
                        count += batch.num_rows
                    if writer is None:
                        writer = pa.ipc.new_file(sink, running.reader.schema)
                    writer.close()
            finally:
                running.close()
            return count
        quoted = path.replace("'", "''")
        running = self.run(f"COPY ({sql}) TO '{quoted}' {options[fmt]}", params, sources, budget)
        try:
            rows = [b.to_pylist() for b in running]
        finally:
            running.close()
        flat = [r for b in rows for r in b]
        return int(next(iter(flat[0].values()))) if flat else 0

    def close(self) -> None:
        """Close the database, first winding down every statement still open."""
        for running in list(self._running):
            running.close()
        self.replicas.close()
        self._db.close()


# A widetable type -> the DuckDB type of its replica column.
DUCK_TYPES = {"INTEGER": "BIGINT", "DOUBLE": "DOUBLE", "BOOLEAN": "BOOLEAN", "STRING": "VARCHAR",
              "BINARY": "BLOB"}
SCHEMA = "wt_replica"


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class ReplicaStore:
    """The DuckDB side of the columnar replicas (``sql/replica.py`` holds their logic).

    Layout of the attached database ``wt_replica`` (DO NOT CHANGE: embedded in on-disk
    data; the file is ``<store>/sql/replica.duckdb``)::

        meta(table_id BIGINT, name VARCHAR, columns VARCHAR, start BIGINT,
             positions VARCHAR, ready BOOLEAN)      one row per replica (JSON columns)
        bad(table_id BIGINT, pk BLOB, col VARCHAR)  cells whose value is not of the
                                                     column's mapped type (stored NULL)
        t_<table_id>(<key columns>, <attribute columns>, __bytes BIGINT)
                                                     the rows; __bytes: the stored row's size

    Every change of a replica (rows, bad cells, its log position) is one DuckDB
    transaction, so the position a replica records always matches its rows.
    Writers are serialized (one lock); queries read their own snapshot.
    """

    def __init__(self, db, path: str | None) -> None:
        self._db = db
        self._lock = threading.Lock()
        self.path = path
        target = ":memory:" if path is None else path.replace("'", "''")
        try:
            db.execute(f"ATTACH '{target}' AS {SCHEMA}")
        except duckdb.Error:
            if path is None:
                raise
            # unreadable (another DuckDB's format, a torn file): the replicas are rebuilt
            import os
            for p in (path, path + ".wal"):
                if os.path.exists(p):
                    os.remove(p)
            db.execute(f"ATTACH '{target}' AS {SCHEMA}")
        db.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.meta (table_id BIGINT PRIMARY KEY, "
                   "name VARCHAR, columns VARCHAR, start BIGINT, positions VARCHAR, "
                   "ready BOOLEAN)")
        db.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.bad (table_id BIGINT, pk BLOB, "
                   "col VARCHAR)")

    def _table(self, table_id: int) -> str:
        return f'{SCHEMA}."t_{int(table_id)}"'

    def view_sql(self, table_id: int, columns: list[str]) -> str:
        """The SELECT of ``columns`` of a replica (no column: one NULL column per row)."""
        cols = ", ".join(quote(c) for c in columns) if columns else 'NULL AS "__rows"'
        return f"SELECT {cols} FROM {self._table(table_id)}"

    def load(self) -> list[tuple]:
        """``(table_id, name, columns, start, positions, ready)`` of every replica."""
        with self._lock:
            cur = self._db.cursor()
            try:
                return cur.execute(f"SELECT table_id, name, columns, start, positions, ready "
                                   f"FROM {SCHEMA}.meta ORDER BY table_id").fetchall()
            finally:
                cur.close()

    def bad_cells(self, table_id: int) -> list[tuple[bytes, str]]:
        with self._lock:
            cur = self._db.cursor()
            try:
                return cur.execute(f"SELECT pk, col FROM {SCHEMA}.bad WHERE table_id = ?",
                                   [table_id]).fetchall()
            finally:
                cur.close()

    def stats(self, table_id: int) -> tuple[int, int]:
        """``(rows, bytes)`` of a replica."""
        with self._lock:
            cur = self._db.cursor()
            try:
                n, b = cur.execute(f'SELECT COUNT(*), COALESCE(SUM("__bytes"), 0) FROM '
                                   f"{self._table(table_id)}").fetchone()
                return int(n), int(b)
            finally:
                cur.close()

    def create(self, table_id: int, name: str, columns: list[tuple[str, str]], meta: str,
               start: int) -> None:
        """(Re)create an empty replica, not ready."""
        cols = ", ".join(f"{quote(n)} {DUCK_TYPES[t]}" for n, t in columns)
        self._write([
            (f"DROP TABLE IF EXISTS {self._table(table_id)}", None),
            (f"DELETE FROM {SCHEMA}.meta WHERE table_id = ?", [table_id]),
            (f"DELETE FROM {SCHEMA}.bad WHERE table_id = ?", [table_id]),
            (f'CREATE TABLE {self._table(table_id)} ({cols}, "__bytes" BIGINT)', None),
            (f"INSERT INTO {SCHEMA}.meta VALUES (?, ?, ?, ?, '{{}}', false)",
             [table_id, name, meta, start]),
        ])

    def drop(self, table_id: int) -> None:
        self._write([
            (f"DROP TABLE IF EXISTS {self._table(table_id)}", None),
            (f"DELETE FROM {SCHEMA}.meta WHERE table_id = ?", [table_id]),
            (f"DELETE FROM {SCHEMA}.bad WHERE table_id = ?", [table_id]),
        ])

    def insert(self, table_id: int, rows: pa.Table, bad: list[tuple[bytes, str]]) -> None:
        """Append rows (and their bad cells) while a replica is built."""
        self.apply(table_id, None, rows, [], bad, None)

    def apply(self, table_id: int, keys: pa.Table | None, rows: pa.Table | None,
              unbad: list[bytes], bad: list[tuple[bytes, str]], positions: str | None,
              ready: bool | None = None) -> tuple[int, int]:
        """In one transaction: delete the rows whose key is in ``keys`` (and the bad cells
        of ``unbad`` keys), insert ``rows`` and ``bad`` cells, and record ``positions``
        (and ``ready``). Returns ``(rows, bytes)`` deleted."""
        with self._transaction() as cur:
            deleted = (0, 0)
            target = self._table(table_id)
            if keys is not None and keys.num_rows:
                cur.register("__wt_keys", keys)
                on = " AND ".join(f"t.{quote(c)} = d.{quote(c)}" for c in keys.column_names)
                gone = cur.execute(f'DELETE FROM {target} AS t USING "__wt_keys" AS d '
                                   f'WHERE {on} RETURNING t."__bytes"').fetchall()
                deleted = (len(gone), sum(g[0] or 0 for g in gone))
                cur.unregister("__wt_keys")
            if unbad:
                cur.executemany(f"DELETE FROM {SCHEMA}.bad WHERE table_id = ? AND pk = ?",
                                [[table_id, k] for k in unbad])
            if rows is not None and rows.num_rows:
                cur.register("__wt_rows", rows)
                cur.execute(f'INSERT INTO {target} SELECT * FROM "__wt_rows"')
                cur.unregister("__wt_rows")
            if bad:
                cur.executemany(f"INSERT INTO {SCHEMA}.bad VALUES (?, ?, ?)",
                                [[table_id, k, c] for k, c in bad])
            if positions is not None:
                cur.execute(f"UPDATE {SCHEMA}.meta SET positions = ? WHERE table_id = ?",
                            [positions, table_id])
            if ready is not None:
                cur.execute(f"UPDATE {SCHEMA}.meta SET ready = ? WHERE table_id = ?",
                            [ready, table_id])
            return deleted

    def _write(self, statements: list[tuple[str, list | None]]) -> None:
        with self._transaction() as cur:
            for sql, params in statements:
                cur.execute(sql, params)

    @contextmanager
    def _transaction(self) -> Iterator:
        """A cursor inside BEGIN ... COMMIT under the store's lock; any exception rolls the
        transaction back (a failed ROLLBACK is ignored: the original error is raised)."""
        with self._lock:
            cur = self._db.cursor()
            try:
                cur.execute("BEGIN")
                yield cur
                cur.execute("COMMIT")
            except BaseException:
                try:
                    cur.execute("ROLLBACK")
                except duckdb.Error:
                    pass
                raise
            finally:
                cur.close()

    def checkpoint(self) -> None:
        """Fold the WAL into the file (and reclaim deleted rows' space)."""
        with self._lock:
            cur = self._db.cursor()
            try:
                cur.execute(f"CHECKPOINT {SCHEMA}")
            finally:
                cur.close()

    def close(self) -> None:
        """Detach the replicas' database; a file holding no replica (none built, or every
        build cut short) is removed, so the next open of the store does not load SQL."""
        import os
        with self._lock:
            try:
                ready = self._db.execute(f"SELECT COUNT(*) FROM {SCHEMA}.meta WHERE ready"
                                         ).fetchone()[0]
                self._db.execute(f"DETACH {SCHEMA}")
            except duckdb.Error:
                return
            if self.path is not None and not ready:
                for p in (self.path, self.path + ".wal"):
                    if os.path.exists(p):
                        os.remove(p)
