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
"""

from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING

from ..errors import ParameterInvalid
from ..table import rowcodec
from .planner import Param, QueryPlan
from .result import SQLResult
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
        n = len(key_names)
        # The common shape (SELECT * of a mapping: the key in order, then attributes):
        # each row is its key tuple plus its attributes, made by C-level calls.
        self.attrs = [name for i, name in self.items[n:]]
        self.keyed = [i for i, _ in self.items[:n]] == list(range(n)) and \
            all(i < 0 for i, _ in self.items[n:])

    def __call__(self, pk: tuple, cells: dict) -> tuple:
        if self.keyed:
            out = pk + tuple(map(cells.get, self.attrs))
        else:
            get = cells.get
            out = tuple([pk[i] if i >= 0 else get(n) for i, n in self.items])
        for get, allowed in self.groups:
            if not allowed.issuperset(map(type, get(out))):
                self._check([out], [pk])
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
        if self.checks:
            self._check(out, [r[1] for r in rows])
        return out

    def _check(self, out: list[tuple], keys: list[tuple]) -> None:
        none = type(None)
        for j, c, want in self.checks:
            kinds = {type(r[j]) for r in out}
            kinds.discard(none)
            if not kinds or kinds == {want}:
                continue
            for r, pk in zip(out, keys):
                v = r[j]
                if v is not None and type(v) is not want:
                    raise ParameterInvalid(
                        f"column {c.name!r} of table {self.table!r} is mapped as {c.sql_type} "
                        f"but row {pk!r} holds {type(v).__name__} {v!r}; map it with the type "
                        "it holds")


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

    def run(self, params: object) -> SQLResult | None:
        """The answer for ``params``, or None: the general path decides."""
        if type(params) is not list and type(params) is not tuple:
            if params is not None or self.nparams:
                return None
            params = ()
        if len(params) != self.nparams:  # type: ignore[arg-type]
            return None
        table = self.table
        if table._unusable or self.tables.get(self.name) is not table:
            return None
        pk = tuple([params[i] if i >= 0 else v for i, v in self.key])  # type: ignore[index]
        for v, want in zip(pk, self.key_types):
            if type(v) is not want:
                return None
        if self.plain:
            blob = table.stored_row(pk)
            if blob is None:
                return SQLResult(self.columns, [], stats={self.name: 0})
            cells = _unpack(blob)[2]
        else:
            row = table.get_row(pk)
            if row is None:
                return SQLResult(self.columns, [], stats={self.name: 0})
            cells = row.columns
        return SQLResult(self.columns, [self.shape(pk, cells)], stats={self.name: 1})
