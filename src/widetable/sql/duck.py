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


class Running:
    """A statement DuckDB is running: ``reader`` streams its answer."""

    def __init__(self, cursor, reader: pa.RecordBatchReader, budget: Budget,
                 timer: threading.Timer | None) -> None:
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
    """An in-memory DuckDB database for one SQL session."""

    def __init__(self, threads: int = 1) -> None:
        # One thread: the scans are Python (the GIL bounds them), and DuckDB then reads
        # ahead of the answer less, so a LIMIT it satisfies stops the scans sooner.
        self._db = duckdb.connect(":memory:", config={"threads": threads})
        self._lock = threading.Lock()
        self._running: weakref.WeakSet = weakref.WeakSet()

    def run(self, sql: str, params: list, sources: list[tuple[str, pa.Schema, Iterator]],
            budget: Budget, batch_rows: int = 8192) -> Running:
        """Start ``sql`` with each source registered under its name; the answer streams."""
        with self._lock:
            cursor = self._db.cursor()
        timer = None
        try:
            for name, schema, batches in sources:
                cursor.register(name, pa.RecordBatchReader.from_batches(
                    schema, _guard(batches, budget)))
            if budget.timeout is not None:
                timer = threading.Timer(budget.timeout, _interrupt, (cursor,))
                timer.daemon = True
                timer.start()
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
        self._db.close()
