"""The paths that skip DuckDB: output rows shaped straight from stored rows.

* :class:`Shaper` turns ``(pk, cells)`` into an output tuple of a plan's plain columns,
  checking a value against its mapped type only where the store does not already
  guarantee it (key columns, and predefined columns of the same type, are checked
  at write).
* :class:`PointPath` is a cached point SELECT (plain columns, equality on the whole
  key): bound per call with one tuple of key values and answered with one stored-row
  read. No sqlglot, no planner, no DuckDB on a plan-cache hit. ``run`` returns None
  whenever the general path must decide (a value not of its key column's type, the
  table dropped or replaced): that path then answers, or raises the clear error.
* :class:`KeyPath` is a cached direct read (plain columns) or direct count (a bare
  ``COUNT(*)``) whose WHERE is equality on a prefix of the primary key, or of a covering
  secondary index's key: bound per call into that one key range and read page by page
  with ``stored_range``. No sqlglot, no planner, no access-path choice, no budget object
  on a plan-cache hit. The choice it repeats depends only on the table's schema (its
  indexes), its search indexes and the parameters' types, so ``run`` returns None when
  one of these differs from the first call's, or when a scan limit is passed (the general
  path then reads again and raises the limit's error). A count over a secondary index
  whose key prefix the index counts (``index/counts.py``) is one read of that count
  (``count_prefix``), no entries read.
"""

from __future__ import annotations

import time
from operator import itemgetter
from typing import TYPE_CHECKING

from ..errors import ParameterInvalid
from ..keys.codec import INF_MAX, INF_MIN
from ..table import rowcodec
from .planner import Param, QueryPlan
from .result import SQLResult
from .scan import PAGES, timeout_error
from .types import SQL_NAME

if TYPE_CHECKING:
    from ..table.table import Table

_PY = {"INTEGER": int, "DOUBLE": float, "BOOLEAN": bool, "STRING": str, "BINARY": bytes}
_unpack = rowcodec.unpack


class Shaper:
    """``shape(pk, cells)``: one output row of ``output`` (``[(name, Column)]``)."""

    def __init__(self, output: list, key_names: tuple[str, ...], defined: dict[str, str],
                 table: str) -> None:
        """``defined``: the table's predefined columns and their widetable types."""
        pos = {n: i for i, n in enumerate(key_names)}
        self.items = [(pos.get(c.name, -1), c.name) for _, c in output]
        # Only these can hold a value of another type than mapped: schema-less columns,
        # and predefined ones mapped with another type.
        self.checks = [(j, c, _PY[c.wtype]) for j, (_, c) in enumerate(output)
                       if c.name not in pos and defined.get(c.name) != c.wtype]
        self.table = table
        # The checks as one C-level pass per wanted type: the types of those positions
        # must fall in {type, NoneType}.
        groups: dict[type, list[int]] = {}
        for j, _, want in self.checks:
            groups.setdefault(want, []).append(j)
        self.groups = [(itemgetter(*js) if len(js) > 1 else _single(js[0]), {want, type(None)})
                       for want, js in groups.items()]
        # The same checks over many rows: one C-level pass per column.
        self.fits = [(itemgetter(j), {want, type(None)}) for j, _, want in self.checks]
        n = len(key_names)
        # The common shape (SELECT * of a mapping: the key in order, then attributes):
        # each row is its key tuple plus its attributes, made by C-level calls.
        self.attrs = [name for i, name in self.items[n:]]
        self.keyed = [i for i, _ in self.items[:n]] == list(range(n)) and \
            all(i < 0 for i, _ in self.items[n:])
        # Stored rows decoded straight into key + the attributes used (``blobs``), then
        # picked into the output's order (none to pick for the common shape).
        names = list(dict.fromkeys(name for i, name in self.items if i < 0))
        self.projection = rowcodec.Projection(names)
        at = [i if i >= 0 else n + names.index(name) for i, name in self.items]
        self.pick = None if at == list(range(n + len(names))) else \
            (itemgetter(*at) if len(at) > 1 else _single(at[0]))

    def __call__(self, pk: tuple, cells: dict) -> tuple:
        if self.keyed:
            out = pk + tuple(map(cells.get, self.attrs))
        else:
            get = cells.get
            out = tuple([pk[i] if i >= 0 else get(n) for i, n in self.items])
        for get, allowed in self.groups:
            if not allowed.issuperset(map(type, get(out))):
                self._check([out], lambda k: pk)
        return out

    def one(self, blob: bytes) -> tuple:
        """The output row of one stored row as it is (``stored_row``'s blob), on a table
        whose plain reads return it unchanged (no TTL)."""
        out = self.projection.row(blob)
        if self.pick is not None:
            out = self.pick(out)
        for get, allowed in self.groups:
            if not allowed.issuperset(map(type, get(out))):
                self._check([out], lambda k: _unpack(blob)[1])
        return out

    def page(self, rows: list) -> list[tuple]:
        """The output rows of a page of rows whose items 1 and 2 are the pk and cells
        (``scan.rows``: a decoded stored row as it is)."""
        if self.keyed:
            attrs = self.attrs
            out = [r[1] + tuple(map(r[2].get, attrs)) for r in rows]
        else:
            items = self.items
            out = [tuple([r[1][i] if i >= 0 else r[2].get(n) for i, n in items])
                   for r in rows]
        if self.checks and not self._fit(out):
            self._check(out, lambda k: rows[k][1])
        return out

    def blobs(self, blobs: list[bytes]) -> list[tuple]:
        """The output rows of stored rows as they are (``stored_range``'s blobs), on a
        table whose plain reads return them unchanged (no TTL)."""
        out = self.projection.rows(blobs)
        if self.pick is not None:
            out = list(map(self.pick, out))
        if self.checks and not self._fit(out):
            self._check(out, lambda k: _unpack(blobs[k])[1])
        return out

    def _fit(self, out: list[tuple]) -> bool:
        """Whether every checked value of ``out`` is of its column's type or None: one
        C-level pass over each checked column."""
        return all(set(map(type, map(get, out))) <= allowed for get, allowed in self.fits)

    def _check(self, out: list[tuple], key_of) -> None:
        """Raise for the first value of ``out`` not of its column's type; ``key_of(k)``:
        the primary key of row ``k`` (for the message)."""
        none = type(None)
        for j, c, want in self.checks:
            kinds = {type(r[j]) for r in out}
            kinds.discard(none)
            if not kinds or kinds == {want}:
                continue
            for k, r in enumerate(out):
                v = r[j]
                if v is not None and type(v) is not want:
                    raise ParameterInvalid(
                        f"column {c.name!r} of table {self.table!r} is mapped as {c.sql_type} "
                        f"but row {tuple(key_of(k))!r} holds {type(v).__name__} {v!r}; map it "
                        "with the type it holds")


def _single(j: int):
    return lambda row: (row[j],)


def defined_types(table: Table) -> dict[str, str]:
    return dict(table.schema.defined_columns)


class PointPath:
    """A point SELECT of one table, compiled from its plan (see the module doc)."""

    def __init__(self, plan: QueryPlan, table: Table, tables: dict) -> None:
        spec = plan.scans[0]
        self.table = table
        self.name = table.name
        self.tables = tables  # the store's open tables by name (a drop replaces the entry)
        self.columns = [(name, SQL_NAME[c.wtype]) for name, c in plan.output]
        self.nparams = plan.params
        by_col = {p.column: p.values[0] for p in spec.preds}
        key_types = dict(table.schema.primary_key)
        # each key column: ("p", param index) or ("v", literal), and its Python type
        self.key = [(v.n - 1, None) if isinstance(v, Param) else (-1, v)
                    for v in (by_col[n] for n in table.schema.pk_names)]
        self.key_types = [_PY[key_types[n]] for n in table.schema.pk_names]
        self.shape = Shaper(plan.output, table.schema.pk_names, defined_types(table), table.name)
        self.plain = table.plain_reads
        # The usual statement binds every key column to its own ?, in key order: the key
        # is the parameters as they are (one C call).
        self.in_order = [i for i, _ in self.key] == list(range(self.nparams))
        self.key_types = tuple(self.key_types)

    def run(self, params: object) -> SQLResult | None:
        """The answer for ``params``, or None: the general path decides."""
        kind = type(params)
        if kind is not list and kind is not tuple:
            if params is not None or self.nparams:
                return None
            params = ()
        if len(params) != self.nparams:  # type: ignore[arg-type]
            return None
        table = self.table
        if table._unusable or self.tables.get(self.name) is not table:
            return None
        if self.in_order:
            pk = params if kind is tuple else tuple(params)  # type: ignore[arg-type]
        else:
            pk = tuple([params[i] if i >= 0 else v for i, v in self.key])  # type: ignore[index]
        if tuple(map(type, pk)) != self.key_types:  # type: ignore[arg-type]
            return None
        if self.plain:
            blob = table.stored_row(pk)
            if blob is None:
                return SQLResult(self.columns, [], stats={self.name: 0})
            return SQLResult(self.columns, [self.shape.one(blob)], stats={self.name: 1})
        row = table.get_row(pk)  # TTL applies
        if row is None:
            return SQLResult(self.columns, [], stats={self.name: 0})
        return SQLResult(self.columns, [self.shape(pk, row.columns)], stats={self.name: 1})


def count_prefix(plan: QueryPlan, access) -> tuple | None:
    """The key prefix whose count in a secondary index answers ``plan``'s bare COUNT(*)
    over ``access`` (one exact range of equality on a prefix the index counts), or None."""
    if not plan.count or len(plan.scans) != 1 or access.kind != "index" or not access.exact:
        return None
    if access.points or len(access.ranges) != 1 or not access.table.plain_reads:
        return None
    preds = plan.scans[0].preds
    cols = {p.column for p in preds}
    k = len(cols)
    names = access.table.schema.pk_names
    if not k or k >= len(names) or any(p.op != "=" for p in preds) or cols != set(names[:k]):
        return None
    start, end = access.ranges[0]
    prefix = start[:k]
    if end[:k] != prefix or not access.table.counted(k):
        return None
    return prefix


class KeyPath:
    """A direct read or count over one key range, compiled from its plan and the access
    path the general path chose for it (see the module doc), when ``eligible``."""

    def __init__(self, plan: QueryPlan, access, tables: dict, searched, limits: tuple) -> None:
        spec = plan.scans[0]
        base, view = access.base, access.table
        self.base, self.view, self.name = base, view, base.name
        self.schema = base.schema  # a secondary index made, built or dropped replaces it
        self.tables = tables
        self.searched = searched  # () -> whether base has a search index now, or None
        self.nparams = plan.params
        self.max_rows, self.max_bytes, self.timeout = limits
        by_col = {p.column: p.values[0] for p in spec.preds}
        names = view.schema.pk_names
        k = len(by_col)
        self.key = [(v.n - 1, None) if isinstance(v, Param) else (-1, v)
                    for v in (by_col[n] for n in names[:k])]
        self.key_types = tuple(_PY[t] for t in view.schema.pk_types[:k])
        self.low, self.high = (INF_MIN,) * (len(names) - k), (INF_MAX,) * (len(names) - k)
        self.limit, self.offset = spec.limit, spec.offset
        # a count the index keeps (read per call: None sends it to the range)
        self.counted = bool(plan.count) and view is not base and view.counted(k)
        if plan.count:
            self.columns = [(plan.output[0][0], "BIGINT")]
            self.shape = None
        else:
            self.columns = [(name, SQL_NAME[c.wtype]) for name, c in plan.output]
            defined = defined_types(base) if view is base else {}
            self.shape = Shaper(plan.output, names, defined, base.name)

    @staticmethod
    def eligible(plan: QueryPlan, access) -> bool:
        """Whether ``access`` (chosen for ``plan``'s one scan) is one exact range of a
        prefix of a key, every pushed predicate an equality on one of its columns."""
        if len(plan.scans) != 1 or not (plan.direct or plan.count):
            return False
        spec = plan.scans[0]
        if spec.hint is not None or access.kind not in ("range", "index") or not access.exact:
            return False
        if access.points or len(access.ranges) != 1 or not access.covering:
            return False
        if not access.table.plain_reads or access.table._unusable:
            return False
        cols = [p.column for p in spec.preds]
        names = access.table.schema.pk_names
        k = len(cols)
        if not cols or any(p.op != "=" for p in spec.preds) or len(set(cols)) != k:
            return False
        return k < len(names) and set(cols) == set(names[:k])

    def run(self, params: object) -> SQLResult | None:
        """The answer for ``params``, or None: the general path decides."""
        kind = type(params)
        if kind is not list and kind is not tuple:
            if params is not None or self.nparams:
                return None
            params = ()
        if len(params) != self.nparams:  # type: ignore[arg-type]
            return None
        base = self.base
        if base._unusable or self.tables.get(self.name) is not base or \
                base.schema is not self.schema:
            return None
        if self.searched is not None and self.searched():
            return None  # a search index now competes for the choice
        prefix = tuple([params[i] if i >= 0 else v for i, v in self.key])  # type: ignore[index]
        if tuple(map(type, prefix)) != self.key_types:
            return None
        if self.counted:
            count = self.view.prefix_count(prefix)
            if count is not None:
                return SQLResult(self.columns, [(count,)], stats={self.view.name: 0})
        n = m = None
        if self.limit is not None:
            n = params[self.limit.n - 1] if isinstance(self.limit, Param) else self.limit  # type: ignore[index]
            m = params[self.offset.n - 1] if isinstance(self.offset, Param) else self.offset  # type: ignore[index]
            if type(n) is not int or type(m) is not int or n < 0 or m < 0:
                return None
        return self._read(prefix + self.low, prefix + self.high, n, m or 0)

    def _read(self, start: tuple, end: tuple, n: int | None, m: int) -> SQLResult | None:
        """Read ``[start, end)`` page by page, as ``scan.rows`` pages it: at most ``n + m``
        rows when ``n`` is given, counted against the statement's limits."""
        view, shape = self.view, self.shape
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        left = None if n is None else n + m
        out: list[tuple] = []
        read = nbytes = pages = 0
        while True:
            size = PAGES[min(pages, len(PAGES) - 1)]
            if left is not None:
                size = min(size, left - read)
                if size <= 0:
                    break
            pages += 1
            blobs, nxt = view.stored_range(start, end, limit=size)
            read += len(blobs)
            nbytes += sum(map(len, blobs))
            if (self.max_rows is not None and read > self.max_rows) or \
                    (self.max_bytes is not None and nbytes > self.max_bytes):
                return None  # the general path reads again and raises the limit's error
            if deadline is not None and time.monotonic() > deadline:
                raise timeout_error(self.timeout)
            if shape is not None and blobs:
                out += shape.blobs(blobs)
            if nxt is None:
                break
            start = nxt
        stats = {view.name: read} if pages else {}
        if shape is None:
            return SQLResult(self.columns, [(read,)], stats=stats)
        if m:
            out = out[m:]
        if n is not None:
            out = out[:n]
        return SQLResult(self.columns, out, stats=stats)
