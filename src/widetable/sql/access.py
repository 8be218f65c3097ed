"""Access paths: a scan's predicates, bound to values, -> how the store reads the table.

For a key (the table's primary key, or an index's key) the usable predicates
are: equality on a prefix of its columns, then one IN or range on the next
column (seed 002's reasoning: a range read is the fastest access). From them
come key ranges in ``get_range`` form (start inclusive, end exclusive, short
bounds padded with ``INF_MIN``/``INF_MAX``). A predicate whose value is not of
the column's type (a float against an INTEGER key, say) is not used; DuckDB
still applies it.

Choice, in order (``choose``):

* ``USE INDEX(i)`` forces index ``i``; ``USE INDEX()`` forces the table itself;
* otherwise the key (primary or a secondary index's) matching more leading
  predicate columns, the primary key winning ties; between indexes, a local one
  (strongly consistent) before a global one, then one covering the columns used;
* with no predicate on the leading key column, a search index indexing a predicate's
  column (KEYWORD, LONG, DOUBLE or BOOLEAN fields: terms and ranges), before a
  secondary index;
* with no predicate on a leading column, a full scan in parallel over partitions.

A secondary index is chosen by itself only when WHERE has a predicate on every
attribute column of its declared key: a row lacking one of them has no entry, and
without such a predicate (which NULL fails) the row may be in the answer.

A global index is eventually consistent, and the access says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import ObjectNotExist, ParameterInvalid
from ..keys.codec import INF_MAX, INF_MIN
from ..table.values import INT64_MAX
from .planner import Param, Pred, ScanSpec
from .types import fits

if TYPE_CHECKING:
    from ..table.table import Table

MAX_RANGES = 1000  # an IN list longer than this reads the table as if it had no IN


@dataclass
class Access:
    """How one scan reads. ``kind``: point, range, index or full."""

    kind: str
    table: Table  # what is read: the data table or an index's view
    base: Table
    ranges: list[tuple[tuple, tuple]] = field(default_factory=list)
    points: list[tuple] = field(default_factory=list)
    index: str | None = None
    index_type: str | None = None
    covering: bool = True
    exact: bool = False  # the ranges return exactly the rows the pushed predicates select
    matched: int = 0
    used: list[Pred] = field(default_factory=list)
    limit: int | None = None
    query: object = None  # a search index's query (kind "search")
    query_text: str = ""
    search_page: object = None  # (next_token, limit, columns) -> (rows, next_token)

    def describe(self) -> str:
        """The access path for EXPLAIN."""
        if self.kind == "point":
            keys = ", ".join(_show(p) for p in self.points[:5])
            more = f" (+{len(self.points) - 5} more)" if len(self.points) > 5 else ""
            return f"primary-key point: {keys}{more}"
        if self.kind == "full":
            return "full scan"
        if self.kind == "search":
            return (f"search index {self.index} (eventually consistent): query "
                    f"{self.query_text}")
        ranges = "; ".join(f"[{_show(a)}, {_show(b)})" for a, b in self.ranges[:5])
        more = f" (+{len(self.ranges) - 5} more)" if len(self.ranges) > 5 else ""
        if self.kind == "range":
            return f"primary-key range: {ranges}{more}"
        consistency = ("global, eventually consistent" if self.index_type == "GLOBAL"
                       else "local, strongly consistent")
        points = "; ".join(_show(p) for p in self.points[:5])
        where = f"points {points}" if self.points else f"range {ranges}{more}"
        fetch = "covering" if self.covering else "reads the base rows"
        return f"secondary index {self.index} ({consistency}, {fetch}): {where}"


def _show(key: tuple) -> str:
    parts = []
    for v in key:
        if v is INF_MIN:
            parts.append("INF_MIN")
        elif v is INF_MAX:
            parts.append("INF_MAX")
        else:
            parts.append(repr(v))
    return "(" + ", ".join(parts) + ")"


def bind(pred: Pred, params: list) -> Pred:
    if not any(isinstance(v, Param) for v in pred.values):
        return pred
    values = []
    for v in pred.values:
        if isinstance(v, Param):
            if v.n > len(params):
                raise ParameterInvalid(f"the statement has parameter {v.n} but {len(params)} "
                                       "were given")
            values.append(params[v.n - 1])
        else:
            values.append(v)
    return Pred(pred.column, pred.op, tuple(values))


@dataclass
class _Match:
    matched: int
    prefix: list
    next_op: list[Pred]  # the IN or range predicates on the column after the prefix
    used: list[Pred]
    exact: bool
    empty: bool = False


def _match(names: tuple[str, ...], types: tuple[str, ...], preds: list[Pred]) -> _Match:
    by_col: dict[str, list[Pred]] = {}
    for p in preds:
        by_col.setdefault(p.column, []).append(p)
    prefix: list = []
    used: list[Pred] = []
    for i, (name, wtype) in enumerate(zip(names, types)):
        mine = [p for p in by_col.get(name, []) if all(fits(v, wtype) for v in p.values)]
        eqs = {p.values[0] for p in mine if p.op == "="}
        if len(eqs) > 1:
            return _Match(i + 1, prefix, [], used, True, empty=True)
        if eqs:
            v = eqs.pop()
            prefix.append(v)
            used += [p for p in mine if p.op == "="]
            rest = [p for p in mine if p.op != "="]
            if rest:  # other predicates on an equal column: checked here, kept for DuckDB
                if not all(_holds(v, p) for p in rest):
                    return _Match(i + 1, prefix, [], used, True, empty=True)
                used += rest
            continue
        nxt = [p for p in mine if p.op != "="]
        if nxt:
            used += nxt
            exact = len(used) == len(preds)
            return _Match(i + 1, prefix, nxt, used, exact)
        return _Match(i, prefix, [], used, len(used) == len(preds))
    return _Match(len(names), prefix, [], used, len(used) == len(preds))


def _holds(v: object, p: Pred) -> bool:
    w = p.values
    if p.op == "in":
        return v in w
    return {"<": v < w[0], "<=": v <= w[0], ">": v > w[0], ">=": v >= w[0]}[p.op]  # type: ignore[operator]


def _successor(v: object, wtype: str) -> object:
    """The smallest key value above ``v``, or INF_MAX."""
    if wtype == "INTEGER":
        return v + 1 if v < INT64_MAX else INF_MAX  # type: ignore[operator]
    return v + ("\x00" if wtype == "STRING" else b"\x00")  # type: ignore[operator]


def _ranges(m: _Match, types: tuple[str, ...]) -> tuple[list[tuple[tuple, tuple]], list[tuple]]:
    """The key ranges (and full-key points) of a match."""
    arity = len(types)
    prefix = tuple(m.prefix)
    if m.empty:
        return [], []
    if not m.next_op:
        if len(prefix) == arity:
            return [], [prefix]
        rest = arity - len(prefix)
        return [(prefix + (INF_MIN,) * rest, prefix + (INF_MAX,) * rest)], []
    col = len(prefix)
    wtype = types[col]
    rest = arity - col - 1
    ins = [p for p in m.next_op if p.op == "in"]
    if ins:
        values = set(ins[0].values)
        for p in ins[1:]:
            values &= set(p.values)
        values = {v for v in values if all(_holds(v, p) for p in m.next_op)}
        if len(values) > MAX_RANGES:
            return [(prefix + (INF_MIN,) * (rest + 1), prefix + (INF_MAX,) * (rest + 1))], []
        ordered = sorted(values)  # type: ignore[type-var]
        if rest == 0:
            return [], [prefix + (v,) for v in ordered]
        return [(prefix + (v,) + (INF_MIN,) * rest, prefix + (v,) + (INF_MAX,) * rest)
                for v in ordered], []
    lo = hi = None
    lo_inc = hi_inc = True
    for p in m.next_op:
        v = p.values[0]
        if p.op in (">", ">="):
            inc = p.op == ">="
            if lo is None or v > lo or (v == lo and not inc):  # type: ignore[operator]
                lo, lo_inc = v, inc
        else:
            inc = p.op == "<="
            if hi is None or v < hi or (v == hi and not inc):  # type: ignore[operator]
                hi, hi_inc = v, inc
    if lo is not None and hi is not None and (lo > hi or (lo == hi and not (lo_inc and hi_inc))):  # type: ignore[operator]
        return [], []
    if lo is None:
        start = prefix + (INF_MIN,) * (rest + 1)
    elif rest == 0:
        start = prefix + ((lo if lo_inc else _successor(lo, wtype)),)
    else:
        start = prefix + (lo,) + ((INF_MIN if lo_inc else INF_MAX),) * rest
    if hi is None:
        end = prefix + (INF_MAX,) * (rest + 1)
    elif rest == 0:
        end = prefix + ((_successor(hi, wtype) if hi_inc else hi),)
    else:
        end = prefix + (hi,) + ((INF_MAX if hi_inc else INF_MIN),) * rest
    if start[col] is INF_MAX or start == end:  # no key between them (k > 5 AND k < 6)
        return [], []  # and get_range refuses equal bounds, as Tablestore does
    return [(start, end)], []


# A search index's field types -> the Python values a term or range on them takes.
_SEARCH_TYPES = {"KEYWORD": (str,), "LONG": (int,), "DOUBLE": (float, int), "BOOLEAN": (bool,)}


def _search_match(fields: dict[str, str], preds: list[Pred], key: tuple[str, ...]):
    """The predicates a search index (``{field: type}``) serves: non-key columns indexed
    as KEYWORD, LONG, DOUBLE or BOOLEAN, with values of that type. ``(used, query, text)``."""
    from ..search import query as Q
    used, queries, text = [], [], []
    for p in preds:
        want = _SEARCH_TYPES.get(fields.get(p.column, ""))
        if want is None or p.column in key or not all(type(v) in want for v in p.values):
            continue
        if fields[p.column] == "LONG" and any(type(v) is bool for v in p.values):
            continue
        if p.op == "=":
            queries.append(Q.TermQuery(p.column, p.values[0]))
        elif p.op == "in":
            if len(p.values) > 1000:
                continue
            queries.append(Q.TermsQuery(p.column, tuple(p.values)))
        elif p.op in (">", ">="):
            queries.append(Q.RangeQuery(p.column, range_from=p.values[0],
                                        include_lower=p.op == ">="))
        else:
            queries.append(Q.RangeQuery(p.column, range_to=p.values[0],
                                        include_upper=p.op == "<="))
        used.append(p)
        text.append(_show_pred_text(p))
    if not queries:
        return [], None, ""
    query = queries[0] if len(queries) == 1 else Q.BoolQuery(must_queries=tuple(queries))
    return used, query, " AND ".join(text)


def _show_pred_text(p: Pred) -> str:
    if p.op == "in":
        return f"{p.column} IN ({', '.join(map(repr, p.values))})"
    return f"{p.column} {p.op} {p.values[0]!r}"


def choose(spec: ScanSpec, base: Table, params: list, lookup, searches=None) -> Access:
    """The access path of ``spec`` over ``base``; ``lookup(name)`` gives an index's view;
    ``searches``: ``{index name: ({field: type}, page)}`` of the table's search indexes,
    where ``page(query, next_token, limit, columns)`` reads one page."""
    preds = [bind(p, params) for p in spec.preds]
    names, types = base.schema.pk_names, base.schema.pk_types
    best = _match(names, types, preds)
    chosen: tuple[_Match, Table | None] = (best, None)
    specs = {s.name: s for s in base.schema.indexes if not s.building}
    searches = searches or {}
    if spec.hint in searches or (spec.hint is None and best.matched == 0 and not best.empty):
        for name in ([spec.hint] if spec.hint in searches else sorted(searches)):
            fields, page = searches[name]
            used, query, text = _search_match(fields, preds, names)
            if query is None and spec.hint != name:
                continue
            if query is None:
                from ..search.query import MatchAllQuery
                query, text = MatchAllQuery(), "match all"
            return Access("search", base, base, index=name, index_type="SEARCH",
                          exact=len(used) == len(preds), matched=len(used), used=used,
                          query=query, query_text=text, search_page=page)
    if spec.hint:
        if spec.hint not in specs:
            raise ObjectNotExist(f"USE INDEX({spec.hint}): table {base.name!r} has no index "
                                 f"{spec.hint!r}; its indexes: "
                                 f"{sorted(specs) + sorted(searches) or 'none'}")
        view = lookup(spec.hint)
        chosen = (_match(view.schema.pk_names, view.schema.pk_types, preds), view)
    elif spec.hint is None:
        # More matched leading columns wins; among equals a local (strongly consistent)
        # index before a global one, then a covering one; the primary key wins every tie.
        ranked = []
        constrained = {p.column for p in preds}
        for name in sorted(specs):
            declared = specs[name].declared_key(names)
            if any(c not in names and c not in constrained for c in declared):
                continue  # rows lacking that column have no entry, and may match
            view = lookup(name)
            m = _match(view.schema.pk_names, view.schema.pk_types, preds)
            have = set(view.schema.pk_names) | set(specs[name].defined_columns)
            covering = all(c.name in have for c in spec.columns)
            if m.matched > best.matched:
                ranked.append(((m.matched, specs[name].index_type == "LOCAL", covering), m, view))
        if ranked:
            ranked.sort(key=lambda r: r[0], reverse=True)
            chosen = (ranked[0][1], ranked[0][2])
    m, view = chosen
    if view is None:
        if m.matched == 0 and not m.empty:
            return Access("full", base, base, exact=not preds)
        ranges, points = _ranges(m, types)
        kind = "point" if points else "range"
        return Access(kind, base, base, ranges, points, exact=m.exact, matched=m.matched,
                      used=m.used)
    ranges, points = _ranges(m, view.schema.pk_types)
    if not ranges and not points and not m.empty:
        n = len(view.schema.pk_names)
        ranges = [((INF_MIN,) * n, (INF_MAX,) * n)]
    have = set(view.schema.pk_names) | set(specs[view.name].defined_columns)
    covering = all(c.name in have for c in spec.columns)
    index_type = specs[view.name].index_type
    return Access("index", view, base, ranges, points, view.name, index_type, covering,
                  m.exact, m.matched, m.used)
