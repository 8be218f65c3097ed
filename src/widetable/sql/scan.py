"""Scans: an access path -> Arrow record batches of the projected columns.

The only module of ``sql/`` that builds Arrow data (with ``result.py``, which
converts DuckDB's answers). A scan reads pages of stored rows (``stored_range``
on tables without TTL; ``get_range`` otherwise, which applies TTL visibility),
takes only the mapped columns the query uses, and checks each value against the
column's declared type: a stored value of another type is ``OTSParameterInvalid``
naming the column, the row and the value.

A full scan reads every partition on its own thread and yields their batches
in partition order (key order). Pages start small and grow, so a LIMIT that
DuckDB satisfies early stops the scan after few rows.

Every scan counts rows and bytes read against the statement's limits
(:class:`Budget`): past ``max_rows`` or ``max_bytes`` it fails with an error
saying how to narrow the query, and past the deadline with ``OTSTimeout``.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pyarrow as pa

from ..errors import ParameterInvalid, WidetableError
from ..keys.codec import INF_MAX, INF_MIN
from ..table import rowcodec
from .access import Access
from .mapping import Column
from .types import BINARY, BOOLEAN, DOUBLE, INTEGER, STRING

if TYPE_CHECKING:
    from ..table.table import Table

ARROW = {INTEGER: pa.int64(), DOUBLE: pa.float64(), BOOLEAN: pa.bool_(), STRING: pa.string(),
         BINARY: pa.binary()}
_PY = {INTEGER: int, DOUBLE: float, BOOLEAN: bool, STRING: str, BINARY: bytes}
PAGES = (256, 1024, 4096, 5000)  # rows per page: the first pages small, for early LIMITs
_NONE_TYPE = type(None)
_unpack = rowcodec.unpack
TIMEOUT = "OTSTimeout"


class ScanLimitExceeded(ParameterInvalid):
    """A scan read more rows or bytes than the statement allows."""


class Budget:
    """The limits of one statement, shared by its scans (thread-safe)."""

    def __init__(self, max_rows: int | None, max_bytes: int | None, deadline: float | None,
                 timeout: float | None) -> None:
        self.max_rows, self.max_bytes = max_rows, max_bytes
        self.deadline, self.timeout = deadline, timeout
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        self._lock = threading.Lock()
        self.rows_read: dict[str, int] = {}
        self.bytes_read: dict[str, int] = {}

    def charge(self, table: str, rows: int, nbytes: int) -> None:
        with self._lock:
            r = self.rows_read[table] = self.rows_read.get(table, 0) + rows
            b = self.bytes_read[table] = self.bytes_read.get(table, 0) + nbytes
        if self.max_rows is not None and r > self.max_rows:
            self.fail(ScanLimitExceeded(
                f"the scan of table {table!r} read more than {self.max_rows} rows, the limit of "
                "one SQL scan; narrow the query: a WHERE on the leading primary-key columns "
                "(or an indexed column) reads only their range, or add LIMIT, or raise "
                "max_scan_rows"))
        if self.max_bytes is not None and b > self.max_bytes:
            self.fail(ScanLimitExceeded(
                f"the scan of table {table!r} read more than {self.max_bytes} bytes, the limit "
                "of one SQL scan; narrow the query: a WHERE on the leading primary-key columns "
                "(or an indexed column) reads only their range, or add LIMIT, or raise "
                "max_scan_bytes"))
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.fail(timeout_error(self.timeout))

    def fail(self, exc: BaseException) -> None:
        with self._lock:
            if self.failure is None:
                self.failure = exc
        self.stop.set()
        raise exc


def timeout_error(timeout: float | None) -> WidetableError:
    return WidetableError(
        f"the SQL statement ran longer than its time limit of {timeout:g} s; narrow the "
        "query or raise the timeout option", TIMEOUT)


def arrow_schema(columns: tuple[Column, ...]) -> pa.Schema:
    """The scan's schema; with no column used (``COUNT(*)``) one null column carries the rows."""
    if not columns:
        return pa.schema([pa.field("__rows", pa.null())])
    return pa.schema([pa.field(c.name, ARROW[c.wtype]) for c in columns])


class _Page:
    """Turns pages of ``(pk, columns)`` into record batches of the projected columns."""

    def __init__(self, table_name: str, columns: tuple[Column, ...], key_names: tuple[str, ...]):
        self.table = table_name
        self.columns = columns
        self.schema = arrow_schema(columns)
        pos = {n: i for i, n in enumerate(key_names)}
        self.getters = [(c, pos.get(c.name)) for c in columns]

    def batch(self, rows: list[tuple[tuple, dict]]) -> pa.RecordBatch:
        arrays = []
        for c, i in self.getters:
            name = c.name
            values = [r[0][i] for r in rows] if i is not None else [r[1].get(name) for r in rows]
            kinds = set(map(type, values))
            kinds.discard(_NONE_TYPE)
            want = _PY[c.wtype]
            if kinds and kinds != {want}:
                self._mismatch(c, rows, values, want)
            arrays.append(pa.array(values, type=ARROW[c.wtype]))
        if not arrays:
            return pa.RecordBatch.from_arrays([pa.nulls(len(rows))], schema=self.schema)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _mismatch(self, c: Column, rows, values, want) -> None:
        for r, v in zip(rows, values):
            if v is not None and type(v) is not want:
                raise ParameterInvalid(
                    f"column {c.name!r} of table {self.table!r} is mapped as {c.sql_type} but "
                    f"row {r[0]!r} holds {type(v).__name__} {v!r}; map it with the type it holds")


def _search_pages(access: Access, attrs: list[str] | None, budget: Budget,
                  limit: int | None) -> Iterator[list[tuple[tuple, dict]]]:
    """Pages of ``(pk, columns)`` a search index finds (100 a page), counted."""
    token = None
    left = limit
    while not budget.stop.is_set():
        size = 100 if left is None else min(100, left)
        if size <= 0:
            return
        found, token = access.search_page(access.query, token, size, attrs)  # type: ignore[misc]
        rows = [(r.primary_key, r.columns) for r in found]
        budget.charge(access.base.name, len(rows), sum(len(repr(r[1])) for r in rows))
        if rows:
            yield rows
        if left is not None:
            left -= len(rows)
        if token is None:
            return


def _pages(table: Table, start: tuple, end: tuple, fetch_base: bool, attrs: list[str] | None,
           budget: Budget, limit: int | None, raw: bool = False,
           stored: bool = False) -> Iterator[list]:
    """Pages of ``(pk, columns)`` of ``[start, end)``, counted against the budget; ``raw``:
    rows whose items 1 and 2 are the pk and columns (a decoded stored row as it is, on a
    table with ``plain_reads``: one Python step less a row); ``stored``: the stored rows'
    bytes as they are (the caller checked ``plain_reads`` and that no base row is fetched)."""
    k = 0
    left = limit
    while not budget.stop.is_set():
        size = PAGES[min(k, len(PAGES) - 1)]
        if left is not None:
            size = min(size, left)
            if size <= 0:
                return
        k += 1
        if fetch_base:
            page = table.get_range(start, end, limit=size, fetch_base=True, columns=attrs)  # type: ignore[call-arg]
            rows = [(r.primary_key, r.columns) for r in page.rows]
            nbytes = sum(len(repr(r[1])) for r in rows)
            nxt = page.next_start_primary_key
        elif table.plain_reads:
            blobs, nxt = table.stored_range(start, end, limit=size)
            nbytes = sum(map(len, blobs))
            rows = blobs if stored else list(map(_unpack, blobs)) if raw else \
                [(r[1], r[2]) for r in map(_unpack, blobs)]
        else:
            page = table.get_range(start, end, limit=size)
            rows = [(r.primary_key, r.columns) for r in page.rows]
            nbytes = sum(len(repr(r[1])) for r in rows)
            nxt = page.next_start_primary_key
        if raw and not (table.plain_reads and not fetch_base):
            rows = [(None, tuple(pk), cells) for pk, cells in rows]

        budget.charge(table.name, len(rows), nbytes)
        if rows:
            yield rows
        if left is not None:
            left -= len(rows)
        if nxt is None:
            return
        start = nxt


def batches(access: Access, columns: tuple[Column, ...], budget: Budget,
            boundaries: list | None = None, workers: int = 4) -> tuple[pa.Schema, Iterator]:
    """The schema and the record batches of one scan. ``boundaries``: the partition-key
    values where the table's partitions start (all but the first), for a parallel full scan."""
    table = access.table
    fetch = access.kind == "index" and not access.covering
    key_names = access.base.schema.pk_names if fetch else table.schema.pk_names
    page = _Page(access.base.name, columns, key_names)
    base_keys = access.base.schema.pk_names
    attrs = [c.name for c in columns if c.name not in base_keys] or None
    limit = access.limit
    arity = len(table.schema.pk_names)

    if access.kind == "search":
        key_names = access.base.schema.pk_names
        page = _Page(access.base.name, columns, key_names)
        return page.schema, (page.batch(rows) for rows in _search_pages(access, attrs, budget,
                                                                         limit))
    if access.points:
        return page.schema, _point_batches(access, page, budget, fetch, attrs)
    if access.kind == "full":
        lo, hi = (INF_MIN,) * arity, (INF_MAX,) * arity
        cuts = list(boundaries or [])
        if len(cuts) >= 1 and limit is None and workers > 1:
            edges = [lo] + [(v,) + (INF_MIN,) * (arity - 1) for v in cuts] + [hi]
            ranges = list(zip(edges, edges[1:]))
            return page.schema, _parallel(table, ranges, page, budget, workers)
        ranges = [(lo, hi)]
    else:
        ranges = access.ranges

    def run() -> Iterator[pa.RecordBatch]:
        left = limit
        for start, end in ranges:
            for rows in _pages(table, start, end, fetch, attrs, budget, left):
                yield page.batch(rows)
                if left is not None:
                    left -= len(rows)
            if left is not None and left <= 0:
                return
    return page.schema, run()


def stored_pages(access: Access) -> bool:
    """Whether ``rows(access, ..., stored=True)`` may yield stored rows as they are: the
    rows read are the table's (or a covering index's) own, on a table without TTL."""
    return access.kind in ("point", "range", "full", "index") and access.covering and \
        access.table.plain_reads


def rows(access: Access, columns: tuple[Column, ...], budget: Budget,
         stored: bool = False) -> Iterator[list]:
    """Pages of rows of an access path, read in key order, without Arrow (the session's
    direct path); counted against the budget like ``batches``. A row's items 1 and 2
    are its pk and columns; with ``stored`` (where ``stored_pages(access)``), each row is
    its stored bytes as they are."""
    table = access.table
    fetch = access.kind == "index" and not access.covering
    base_keys = access.base.schema.pk_names
    attrs = [c.name for c in columns if c.name not in base_keys] or None
    arity = len(table.schema.pk_names)
    if access.kind == "search":
        for page in _search_pages(access, attrs, budget, access.limit):
            yield [(None, tuple(pk), cells) for pk, cells in page]
        return
    if access.points:
        for pk in access.points:
            if fetch:
                row = table.get_row(pk, columns=attrs, fetch_base=True)  # type: ignore[call-arg]
                found = [] if row is None else [(None, tuple(row.primary_key), row.columns)]
                budget.charge(access.base.name, 1, 0)
            elif table.plain_reads:
                blob = table.stored_row(pk)
                budget.charge(table.name, 1, len(blob) if blob else 0)
                found = [] if blob is None else [blob if stored else _unpack(blob)]
            else:
                row = table.get_row(pk)
                budget.charge(table.name, 1, 0)
                found = [] if row is None else [(None, tuple(row.primary_key), row.columns)]
            if found:
                yield found
        return
    ranges = access.ranges if access.kind != "full" else [((INF_MIN,) * arity,
                                                           (INF_MAX,) * arity)]
    left = access.limit
    for start, end in ranges:
        for page in _pages(table, start, end, fetch, attrs, budget, left, raw=True,
                           stored=stored):
            yield page
            if left is not None:
                left -= len(page)
        if left is not None and left <= 0:
            return


def _point_batches(access: Access, page: _Page, budget: Budget, fetch: bool,
                   attrs: list[str] | None) -> Iterator[pa.RecordBatch]:
    table = access.table
    rows = []
    for pk in access.points:
        if budget.stop.is_set():
            return
        if fetch:
            row = table.get_row(pk, columns=attrs, fetch_base=True)  # type: ignore[call-arg]
            if row is not None:
                rows.append((row.primary_key, row.columns))
            budget.charge(access.base.name, 1, 0)
            continue
        if table.plain_reads:
            blob = table.stored_row(pk)
            budget.charge(table.name, 1, len(blob) if blob else 0)
            if blob is not None:
                r = _unpack(blob)
                rows.append((r[1], r[2]))
        else:
            row = table.get_row(pk)
            budget.charge(table.name, 1, 0)
            if row is not None:
                rows.append((row.primary_key, row.columns))
        if len(rows) >= 5000:
            yield page.batch(rows)
            rows = []
    if rows:
        yield page.batch(rows)


def _parallel(table: Table, ranges: list, page: _Page, budget: Budget,
              workers: int) -> Iterator[pa.RecordBatch]:
    """Batches of every range, each range read on a worker, yielded in range order."""
    queues = [queue.Queue(maxsize=4) for _ in ranges]
    done = object()
    local = threading.Event()  # the consumer is gone: workers stop

    def put(q: queue.Queue, item: object) -> bool:
        while not (local.is_set() or budget.stop.is_set()):
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work(i: int) -> None:
        q = queues[i]
        try:
            for rows in _pages(table, ranges[i][0], ranges[i][1], False, None, budget, None):
                if not put(q, page.batch(rows)):
                    return
            put(q, done)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            put(q, exc)

    def run() -> Iterator[pa.RecordBatch]:
        pool = ThreadPoolExecutor(max_workers=min(workers, len(ranges)),
                                  thread_name_prefix="widetable-sql-scan")
        try:
            for i in range(len(ranges)):
                pool.submit(work, i)
            for q in queues:
                while True:
                    try:
                        item = q.get(timeout=0.05)
                    except queue.Empty:
                        if budget.failure is not None:
                            raise budget.failure from None
                        if budget.stop.is_set():
                            return
                        continue
                    if item is done:
                        break
                    if isinstance(item, BaseException):
                        raise item
                    yield item  # type: ignore[misc]
        finally:
            local.set()
            pool.shutdown(wait=True, cancel_futures=True)
    return run()


def replica_rows(columns: list[tuple[str, str]], key_names: tuple[str, ...], decoded: list,
                 blobs: list[bytes]) -> tuple[pa.Table, list[tuple[tuple, str]]]:
    """The rows of a columnar replica (``replica.py``) from decoded stored rows: each
    column of ``columns`` (``(name, widetable type)``), then ``__bytes``, the stored size.
    A value not of its column's type is stored NULL and returned as a bad cell
    ``(pk, column)`` (a scan of that column then reads rows, and fails as they do)."""
    pos = {n: i for i, n in enumerate(key_names)}
    arrays, names, bad = [], [], []
    for name, wtype in columns:
        i = pos.get(name)
        values = [r[1][i] for r in decoded] if i is not None else \
            [r[2].get(name) for r in decoded]
        want = _PY[wtype]
        kinds = set(map(type, values))
        kinds.discard(_NONE_TYPE)
        if kinds and kinds != {want}:
            for k, v in enumerate(values):
                if v is not None and type(v) is not want:
                    bad.append((tuple(decoded[k][1]), name))
                    values[k] = None
        arrays.append(pa.array(values, type=ARROW[wtype]))
        names.append(name)
    arrays.append(pa.array([len(b) for b in blobs], type=pa.int64()))
    names.append("__bytes")
    return pa.Table.from_arrays(arrays, names=names), bad


def key_rows(key_names: tuple[str, ...], key_types: list[str], keys: list[tuple]) -> pa.Table:
    """A table of primary keys, one column per key column."""
    return pa.Table.from_arrays([pa.array([pk[i] for pk in keys], type=ARROW[t])
                                 for i, t in enumerate(key_types)], names=list(key_names))
