"""Aggregations and group-bys computed by tantivy's aggregation API, merged per shard in Python.

Each shard answers one aggregation request (Elasticsearch's JSON form) over the
query's documents; Python merges the shards' partial results and finishes them
exactly as ``aggs.Aggregator`` would over all matches. What tantivy runs:

* avg, sum, min, max: ``stats`` on a fast LONG, DATE or DOUBLE field (``missing``
  passed through). A LONG or DATE sum, min or max is an integer: exact while every
  partial sum is below 2**53, which ``count * max(|min|, |max|)`` bounds; past it the
  aggregation is computed in Python;
* count: a count query on the field's presence (top level), ``value_count`` in a group;
* distinct_count: exact, as the number of keys of a ``terms`` request that returns
  every key (tantivy's ``cardinality`` is a HyperLogLog estimate, not used);
* GroupByField: ``terms`` returning every key (``size`` and ``segment_size`` at
  their maximum, so counts are exact: the answer's ``sum_other_doc_count`` and
  ``doc_count_error_upper_bound`` are checked to be 0), then sorted and cut in Python;
* GroupByRange: one ``range`` request per range (tantivy refuses overlapping ranges);
* GroupByHistogram, and GroupByDateHistogram with a fixed interval: ``histogram``;
* GroupByFilter: one request per filter over ``query AND filter``;
* top_rows at the top level: the sorted page of ``execute.Searcher._ordered``.

Everything else (fields tantivy does not hold as single-valued fast fields,
arrays, percentiles, calendar date histograms, geo distance, composite, top_rows
inside groups) falls back to the Python aggregator over every match, computed
once for all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .aggs import (
    AvgAgg, CountAgg, DistinctCountAgg, Group, GroupByDateHistogram, GroupByField, GroupByFilter,
    GroupByHistogram, GroupByRange, MaxAgg, MinAgg, SubAggSort, SumAgg, TopRowsAgg, order_groups,
)
from .pool import POOL
from .query import check_query
from .sort import SortKeys, check_sort

ALL = 2**31 - 1  # tantivy's terms size: every key
RETURN_ALL = "RETURN_ALL"
EXACT = 2**53
_METRIC = (AvgAgg, SumAgg, MinAgg, MaxAgg)


class Inexact(Exception):
    """A partial result tantivy could not give exactly: compute it in Python."""


@dataclass
class _Node:
    obj: object  # the Agg or GroupBy
    key: str  # its name in the tantivy request
    fname: str | None = None  # the tantivy field
    kind: str | None = None  # the field's adapter kind
    children: list = field(default_factory=list)


class TantivyAggs:
    """Runs ``aggs`` and ``group_bys`` for one search: tantivy where it can, Python for the rest."""

    def __init__(self, searcher, query, shards: list[int], aggregator) -> None:
        self.s = searcher
        self.layout = searcher.layout
        self.query = query
        self.shards = shards
        self.agg = aggregator
        self._n = 0

    # -- planning ------------------------------------------------------------------------

    def _field(self, name: str) -> tuple[str, str] | None:
        f = self.layout.fast(name)
        if f is None:
            return None
        return f, self.layout.slots[name].kind

    def _plan_agg(self, a: object, top: bool) -> _Node | None:
        self._n += 1
        key = f"a{self._n}"
        if isinstance(a, TopRowsAgg):
            return _Node(a, key) if top else None
        fk = self._field(a.field_name) if hasattr(a, "field_name") else None  # type: ignore[attr-defined]
        if isinstance(a, CountAgg):
            if top:
                return _Node(a, key)
            return None if fk is None else _Node(a, key, *fk)
        if fk is None:
            return None
        if isinstance(a, _METRIC) and fk[1] in ("int", "float"):
            mv = a.missing  # type: ignore[attr-defined]
            if mv is not None and (type(mv) is bool or not isinstance(mv, (int, float))):
                return None
            return _Node(a, key, *fk)
        if isinstance(a, DistinctCountAgg) and fk[1] in ("int", "float", "rawfast"):
            mv = a.missing
            if mv is not None and not _same_kind(fk[1], mv):
                return None
            return _Node(a, key, *fk)
        return None

    def _plan_group(self, g: object) -> _Node | None:
        self._n += 1
        key = f"g{self._n}"
        if isinstance(g, GroupByFilter):
            node = _Node(g, key)
        else:
            fk = self._field(getattr(g, "field_name", ""))
            if fk is None:
                return None
            if isinstance(g, GroupByField):
                if fk[1] not in ("int", "float", "rawfast"):
                    return None
            elif isinstance(g, GroupByRange):
                bounds = [b for r in g.ranges for b in r if b is not None]
                if fk[1] not in ("int", "float") or not all(_number(b, fk[1]) for b in bounds):
                    return None  # tantivy converts bounds to the field's type: exact for these
            elif isinstance(g, GroupByHistogram):
                if fk[1] not in ("int", "float") or not (_number(g.interval, fk[1]) and
                                                         _number(g.offset, fk[1])):
                    return None
            elif isinstance(g, GroupByDateHistogram):
                if fk[1] != "int" or type(g.interval) is not int:
                    return None
            else:
                return None
            if isinstance(g, (GroupByHistogram, GroupByDateHistogram)) and (
                    g.field_range is not None or g.missing is not None or g.group_by_sort):
                return None  # bounds, stand-ins and sorts of buckets: Python
            node = _Node(g, key, *fk)
        for a in getattr(g, "sub_aggs", ()):
            child = self._plan_agg(a, False)
            if child is None:
                return None
            node.children.append(child)
        for sub in getattr(g, "sub_group_bys", ()):
            if isinstance(sub, GroupByFilter):
                return None  # a filter inside a bucket: Python
            child = self._plan_group(sub)
            if child is None:
                return None
            node.children.append(child)
        return node

    # -- the request ---------------------------------------------------------------------

    def _spec(self, nodes: list[_Node]) -> dict:
        out: dict = {}
        for n in nodes:
            o = n.obj
            subs = self._spec(n.children) if n.children else None
            if isinstance(o, (TopRowsAgg, GroupByFilter)) or (isinstance(o, CountAgg) and n.fname is None):
                continue  # not part of the request
            if isinstance(o, _METRIC):
                body: dict = {"field": n.fname}
                if o.missing is not None:
                    body["missing"] = float(o.missing)
                out[n.key] = {"stats": body}
            elif isinstance(o, CountAgg):
                out[n.key] = {"value_count": {"field": n.fname}}
            elif isinstance(o, DistinctCountAgg):
                body = {"field": n.fname, "size": ALL, "segment_size": ALL}
                if o.missing is not None:
                    body["missing"] = o.missing
                out[n.key] = {"terms": body}
            elif isinstance(o, GroupByField):
                out[n.key] = _with({"terms": {"field": n.fname, "size": ALL, "segment_size": ALL}}, subs)
            elif isinstance(o, GroupByRange):
                for i, (lo, hi) in enumerate(o.ranges):
                    r: dict = {"key": "x"}
                    if lo is not None:
                        r["from"] = float(lo)
                    if hi is not None:
                        r["to"] = float(hi)
                    out[f"{n.key}_{i}"] = _with({"range": {"field": n.fname, "ranges": [r]}}, subs)
            elif isinstance(o, GroupByHistogram):
                out[n.key] = _with({"histogram": {"field": n.fname, "interval": float(o.interval),
                                                  "offset": float(o.offset)}}, subs)
            elif isinstance(o, GroupByDateHistogram):
                out[n.key] = _with({"histogram": {"field": n.fname, "interval": float(o.interval)}},
                                   subs)
        return out

    # -- running ---------------------------------------------------------------------------

    def run(self, aggs: list, group_bys: list) -> tuple[dict, dict]:
        """``(aggs, group_bys)`` results, as ``Aggregator.aggregate_all`` / ``group_all``."""
        plans_a = [(a, self._plan_agg(a, True)) for a in aggs]
        plans_g = [(g, self._plan_group(g)) for g in group_bys]
        nodes = [n for _, n in plans_a + plans_g if n is not None]
        out_a: dict = {}
        out_g: dict = {}
        fallback_a = [a for a, n in plans_a if n is None]
        fallback_g = [g for g, n in plans_g if n is None]
        if nodes:
            parts = self._shard_parts(nodes)
            for a, n in plans_a:
                if n is not None:
                    try:
                        out_a[a.name] = self._final(n, [p[n.key] for p in parts])
                    except Inexact:
                        fallback_a.append(a)
            for g, n in plans_g:
                if n is not None:
                    try:
                        out_g[g.name] = self._final(n, [p[n.key] for p in parts])
                    except Inexact:
                        fallback_g.append(g)
        if fallback_a or fallback_g:
            hits = [(sc, pk, v) for sc, pk, v, _ in self.s.matches(self.query, self.shards)]
            out_a.update(self.agg.aggregate_all(fallback_a, hits))
            out_g.update(self.agg.group_all(fallback_g, hits))
        return ({a.name: out_a[a.name] for a in aggs}, {g.name: out_g[g.name] for g in group_bys})

    def _shard_parts(self, nodes: list[_Node]) -> list[dict]:
        """Per shard, ``{node key: partial}`` for every node (shards in parallel: an
        aggregation visits every match, and tantivy runs it without the GIL)."""
        since = self.s.visible_from()
        spec = self._spec(nodes)

        def one(i: int) -> dict:
            shard = self.s.state.shards[i]
            se = shard.searcher()
            base = self.s.base(shard, se, self.query, since)
            raw = shard.aggregate(se, base, spec) if spec else {}
            return {n.key: self._partial(n, raw, shard, se, base, since) for n in nodes}

        if len(self.shards) == 1:
            return [one(self.shards[0])]
        return list(POOL.map(one, self.shards))

    def _partial(self, n: _Node, raw: dict, shard, se, base, since) -> object:
        """The partial result of node ``n`` from one shard's answer ``raw`` (the dict holding
        ``n.key``; a bucket's for children)."""
        o = n.obj
        if isinstance(o, TopRowsAgg):
            return None  # computed once at the end
        if isinstance(o, CountAgg):
            if n.fname is None:  # top level: documents with the field
                return shard.count(se, shard.q_bool([("must", base), ("filter", shard.q_has(o.field_name))]))
            return int(raw[n.key]["value"] or 0)
        if isinstance(o, _METRIC):
            st = raw[n.key]
            return (st["count"], st["sum"], st["min"], st["max"])
        if isinstance(o, DistinctCountAgg):
            _exact_terms(raw[n.key])
            return {b["key"] for b in raw[n.key]["buckets"]}
        if isinstance(o, GroupByFilter):
            comp_parts = []
            sub_spec = self._spec(n.children)
            for fq in o.filters:
                check_query(fq)
                fb = self.s.base(shard, se, fq, since)
                q = shard.q_bool([("must", base), ("filter", fb)])
                cnt = shard.count(se, q)
                sub = shard.aggregate(se, q, sub_spec) if sub_spec else {}
                comp_parts.append((cnt, {c.key: self._partial(c, sub, shard, se, q, since)
                                         for c in n.children}))
            return comp_parts
        if isinstance(o, GroupByRange):
            parts = []
            for i in range(len(o.ranges)):
                bucket = next((b for b in raw[f"{n.key}_{i}"]["buckets"] if b.get("key") == "x"), None)
                if bucket is None:
                    raise Inexact
                parts.append((bucket["doc_count"], bucket))
            return parts
        body = raw[n.key]
        if isinstance(o, GroupByField):
            _exact_terms(body)
        # buckets stay raw: their children are read only for the groups kept
        return {b["key"]: (b["doc_count"], b) for b in body["buckets"] if b["doc_count"] > 0}

    def _children(self, n: _Node, bucket: dict) -> dict:
        return {c.key: self._partial(c, bucket, None, None, None, None) for c in n.children}

    # -- merging and finishing -----------------------------------------------------------------

    def _final(self, n: _Node, partials: list) -> object:
        o = n.obj
        if isinstance(o, TopRowsAgg):
            return self._top_rows(o)
        if isinstance(o, CountAgg):
            return sum(partials)
        if isinstance(o, _METRIC):
            return _metric(o, n.kind, partials)
        if isinstance(o, DistinctCountAgg):
            keys: set = set()
            for p in partials:
                keys |= p
            return len(keys)
        if isinstance(o, (GroupByFilter, GroupByRange)):
            labels = o.filters if isinstance(o, GroupByFilter) else o.ranges
            out = []
            for i, label in enumerate(labels):
                cnt = sum(p[i][0] for p in partials)
                out.append(self._group(n, label, cnt, [p[i][1] for p in partials],
                                       raw=isinstance(o, GroupByRange)))
            return out
        merged: dict = {}
        for p in partials:
            for k, (cnt, ch) in p.items():
                m = merged.setdefault(k, [0, []])
                m[0] += cnt
                m[1].append(ch)
        if isinstance(o, GroupByField):
            if any(isinstance(x, SubAggSort) for x in o.group_by_sort):
                groups = [self._group(n, k, c, chs) for k, (c, chs) in merged.items()
                          if c >= o.min_doc_count]
                groups.sort(key=lambda x: x.key)
                return order_groups(groups, o)[:o.size]
            # ordered by counts and keys: only the groups kept are finished
            light = [Group(k, c) for k, (c, _) in merged.items() if c >= o.min_doc_count]
            light.sort(key=lambda x: x.key)
            return [self._group(n, x.key, x.row_count, merged[x.key][1])
                    for x in order_groups(light, o)[:o.size]]
        as_int = isinstance(o, GroupByDateHistogram) or (type(o.interval) is int and type(o.offset) is int)  # type: ignore[union-attr]
        out = []
        for k in sorted(merged):
            cnt, chs = merged[k]
            if cnt >= o.min_doc_count:  # type: ignore[union-attr]
                out.append(self._group(n, int(k) if as_int else float(k), cnt, chs))
        return out

    def _group(self, n: _Node, key: object, count: int, child_parts: list[dict],
               raw: bool = True) -> Group:
        """The group of ``key``; ``child_parts``: the shards' raw buckets (``raw``) or their
        children's partial results already read."""
        aggs, gbs = {}, {}
        if raw:
            child_parts = [self._children(n, b) for b in child_parts]
        for c in n.children:
            value = self._final(c, [cp[c.key] for cp in child_parts])
            if isinstance(c.obj, (GroupByField, GroupByRange, GroupByHistogram, GroupByDateHistogram)):
                gbs[c.obj.name] = value
            else:
                aggs[c.obj.name] = value  # type: ignore[attr-defined]
        if n.kind == "int" and isinstance(n.obj, GroupByField):
            key = int(key)  # type: ignore[call-overload]
        return Group(key, count, aggs, gbs)

    def _top_rows(self, a: TopRowsAgg) -> list:
        keys = SortKeys(check_sort(self.s.meta, a.sort))
        if self.s._orderable(keys.sorters):
            res = self.s._ordered(self.query, keys, 0, a.limit, None, RETURN_ALL, [], False,
                                  self.shards, self.s.fetch)
            return res.rows
        raise Inexact


def _with(spec: dict, subs: dict | None) -> dict:
    if subs:
        spec["aggs"] = subs
    return spec


def _exact_terms(body: dict) -> None:
    if body.get("sum_other_doc_count", 0) or body.get("doc_count_error_upper_bound", 0):
        raise Inexact


def _number(v: object, kind: str) -> bool:
    """Whether ``v`` is a bound tantivy applies exactly to a field of ``kind``."""
    if type(v) is bool:
        return False
    return type(v) is int if kind == "int" else isinstance(v, (int, float))


def _same_kind(kind: str, v: object) -> bool:
    if kind == "rawfast":
        return type(v) is str
    if kind == "int":
        return type(v) is int
    return type(v) in (int, float)


def _metric(o: object, kind: str | None, partials: list) -> object:
    count = sum(p[0] for p in partials)
    if not count:
        return None
    total = sum(p[1] for p in partials)
    lo = min(p[2] for p in partials if p[0])
    hi = max(p[3] for p in partials if p[0])
    if kind == "int":
        if count * max(abs(lo), abs(hi)) >= EXACT:
            raise Inexact
        total, lo, hi = int(round(total)), int(lo), int(hi)
        mv = o.missing  # type: ignore[attr-defined]
        if type(mv) is float:  # a float stand-in makes the values floats, as in Python
            total, lo, hi = float(total), float(lo), float(hi)
    if isinstance(o, SumAgg):
        return total
    if isinstance(o, AvgAgg):
        return total / count
    if isinstance(o, MinAgg):
        return lo
    return hi
