"""Running a search: shards in parallel, merged in sort order, paged, aggregated.

Each shard answers every document its query matches (``(score, pk, values,
stored)``); the merge orders them by the sort's total order, drops what a
``next_token`` says was already returned, and cuts the page. Totals and
aggregations are over all matching documents of the shards read, so they are
exact whatever the page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter

from ..errors import ParameterInvalid, describe
from ..table.row import Row
from ..table.values import now_ms
from . import ordered
from .aggs import Aggregator, TopRowsAgg
from .compile import Compiler, hex_after
from .documents import (
    PK_LEVELS, as_list, decode_part, decode_src, decode_src_lazy, order_key,
)
from .pool import POOL
from .query import (
    FunctionScoreQuery, GeoBoundingBoxQuery, GeoDistanceQuery, GeoPolygonQuery, Query, check_query,
)
from .sort import FieldSort, PrimaryKeySort, SortKeys, check_sort, sort_keys
from .tantivy_aggs import TantivyAggs

RETURN_NONE, RETURN_SPECIFIED = "RETURN_NONE", "RETURN_SPECIFIED"
RETURN_ALL, RETURN_ALL_FROM_INDEX = "RETURN_ALL", "RETURN_ALL_FROM_INDEX"
MAX_OFFSET_LIMIT = 100_000
MAX_LIMIT, MAX_LIMIT_STORED = 100, 1000
MAX_SCAN_LIMIT = 2000
_POOL = POOL
_KEY = itemgetter(1)  # a hit's primary key
GEO_QUERIES = (GeoDistanceQuery, GeoBoundingBoxQuery, GeoPolygonQuery)


@dataclass(slots=True)
class SearchHit:
    score: float
    row: Row


@dataclass(slots=True)
class SearchResult:
    """``total_count`` is -1 unless asked for; ``next_token`` None on the last page."""

    rows: list[Row]
    total_count: int
    next_token: bytes | None
    aggs: dict = field(default_factory=dict)
    group_bys: dict = field(default_factory=dict)
    search_hits: list[SearchHit] = field(default_factory=list)
    is_all_succeeded: bool = True


def check_columns(meta, columns: object) -> tuple[str, list[str]]:
    """``(mode, names)`` from ``columns``: a RETURN_* constant, ``(RETURN_SPECIFIED, names)``
    or a list of names."""
    if columns is None:
        return RETURN_NONE, []
    if columns in (RETURN_NONE, RETURN_ALL, RETURN_ALL_FROM_INDEX):
        return columns, []  # type: ignore[return-value]
    if isinstance(columns, tuple) and len(columns) == 2 and columns[0] == RETURN_SPECIFIED:
        columns = columns[1]
    if isinstance(columns, (list, tuple)) and columns and all(isinstance(c, str) for c in columns):
        return RETURN_SPECIFIED, list(columns)
    raise ParameterInvalid(f"columns must be RETURN_NONE, RETURN_ALL, RETURN_ALL_FROM_INDEX or a "
                           f"list of column names, got {describe(columns)}")


def check_page(meta, mode: str, names: list[str], offset: object, limit: object,
               stored: object = None) -> None:
    """``stored``: the columns ``meta`` stores, when the caller has them."""
    if type(offset) is not int or offset < 0:
        raise ParameterInvalid(f"offset must be a non-negative integer, got {describe(offset)}")
    if type(limit) is not int or limit < 0:
        raise ParameterInvalid(f"limit must be a non-negative integer, got {describe(limit)}")
    if stored is None:
        stored = {f.source for f in meta.fields if f.store}
    all_stored = mode in (RETURN_NONE, RETURN_ALL_FROM_INDEX) or (
        mode == RETURN_SPECIFIED and all(n in stored for n in names))  # type: ignore[operator]
    cap = MAX_LIMIT_STORED if all_stored else MAX_LIMIT
    if limit > cap:
        raise ParameterInvalid(f"limit {limit} exceeds {cap}" + (
            "" if all_stored else f" (up to {MAX_LIMIT_STORED} when every returned column is stored "
                                  "in the index)"))
    if offset + limit > MAX_OFFSET_LIMIT:
        raise ParameterInvalid(f"offset + limit = {offset + limit} exceeds {MAX_OFFSET_LIMIT}; "
                               "use next_token to page deeper")


class Searcher:
    """Runs searches on one index state (see ``sync.IndexState``)."""

    def __init__(self, state) -> None:
        self.state = state
        self.meta = state.meta
        self.layout = state.layout

    def visible_from(self) -> int | None:
        ttls = [t for t in (self.meta.ttl, self.state.table.schema.options.ttl) if t > 0]
        return None if not ttls else now_ms() - min(ttls) * 1000

    def base(self, shard, searcher, query: Query, since: int | None, comp=None):
        """``query`` compiled for ``shard``: row documents only (a query that matches every
        document kind is filtered to rows), visible under the TTLs."""
        comp = comp or Compiler(self.layout, shard, searcher)
        q = comp.compile(query)
        clauses = [("must", q)]
        if comp.wide:  # filters add no score
            clauses.append(("filter", shard.q_const(shard.q_rows(), 0.0)))
        if since is not None:
            clauses.append(("filter", shard.q_const(shard.q_ts_from(since), 0.0)))
        return q if len(clauses) == 1 else shard.q_bool(clauses)

    def matches(self, query: Query, shards: list[int]) -> list[tuple]:
        """Every ``(score, pk, values, stored)`` matching ``query`` in ``shards``."""
        check_query(query)
        since = self.visible_from()

        def one(i: int) -> list[tuple]:
            shard = self.state.shards[i]
            se = shard.searcher()
            q = self.base(shard, se, query, since)
            out = []
            for score, src in shard.run(se, q, max(se.num_docs, 1)):
                pk, values, stored = decode_src(src)
                out.append((score, pk, values, stored))
            return out

        if len(shards) == 1:
            hits = one(shards[0])
        else:
            hits = [h for part in _POOL.map(one, shards) for h in part]
        if isinstance(query, FunctionScoreQuery):
            fname = query.field_value_factor.field_name
            self.meta.field(fname)
            hits = [(s * _factor(v.get(fname)), pk, v, st) for s, pk, v, st in hits]
        return hits

    def search(self, query: Query, sort: object, offset: int, limit: int, next_token: object,
               columns: object, get_total_count: bool, aggs: object, group_bys: object,
               shards: list[int], fetch) -> SearchResult:
        mode, names = check_columns(self.meta, columns)
        check_page(self.meta, mode, names, offset, limit, self.layout.stored_set)
        check_query(query)
        keys = sort_keys(check_sort(self.meta, sort))
        after = None if next_token is None else keys.decode_token(next_token)
        sorters = keys.sorters
        scored = isinstance(query, FunctionScoreQuery)
        if not aggs and not group_bys and not scored and self._orderable(sorters):
            # the common search: a page found by tantivy, nothing to aggregate
            return self._ordered(query, keys, offset, limit, after, mode, names, get_total_count,
                                 shards, fetch)
        agg = Aggregator(self.meta, lambda q: {pk for _, pk, _, _ in self.matches(q, shards)},
                         lambda hs, a: self._top_rows(hs, a, fetch))
        agg_list, gb_list = agg.check(aggs, group_bys)
        self.fetch = fetch
        plain = not agg_list and not gb_list and not scored
        if not scored and self._orderable(sorters):
            page = self._ordered(query, keys, offset, limit, after, mode, names, get_total_count,
                                 shards, fetch)
            if plain:
                return page
            simple = TantivyAggs(self, query, shards, agg).run(agg_list, gb_list)
            page.aggs, page.group_bys = simple
            return page
        if plain and len(sorters) == 1 and (after is None or len(order_key(tuple(after[0][1]))) <= 100):
            # layout 1: its token becomes a regex over ``_pk``, which tantivy caps at 250 nested
            # groups: a longer key pages through the general path
            return self._by_key(query, keys, sorters[0].sort_order == "DESC", offset, limit, after,  # type: ignore[attr-defined]
                                mode, names, get_total_count, shards, fetch)
        hits = self.matches(query, shards)
        total = len(hits)
        simple = [(s, pk, v) for s, pk, v, _ in hits]
        agg_out = agg.aggregate_all(agg_list, simple)
        gb_out = agg.group_all(gb_list, simple)
        page, token = _sorted_page([(keys.key(h[0], h[1], h[2]), h) for h in hits], keys, after,
                                   offset, limit)
        rows = self._rows(page, mode, names, fetch)
        hits_out = [SearchHit(h[0], r) for h, r in zip(page, rows)]
        return SearchResult(rows, total if get_total_count else -1, token, agg_out, gb_out, hits_out)

    # -- sorts tantivy computes (layout 2) ----------------------------------------------------

    def _orderable(self, sorters: list) -> bool:
        """Whether tantivy can find the page: the primary key alone, or one FieldSort on a fast
        single-valued field, then the primary key."""
        if not self.layout.pk_levels:
            return False
        if len(sorters) == 1:
            return isinstance(sorters[0], PrimaryKeySort)
        if len(sorters) != 2 or not isinstance(sorters[0], FieldSort) or \
                not isinstance(sorters[1], PrimaryKeySort):
            return False
        fs = sorters[0]
        if self.layout.fast(fs.field_name) is None:
            return False
        if fs.sort_mode == "avg" and self.layout.slots[fs.field_name].kind == "int":
            return False  # the key is the value as a float: Python's order, not tantivy's
        mv = fs.missing_value
        return mv is None or _fits(self.meta.field(fs.field_name).type, mv)

    def _ordered(self, query: Query, keys: SortKeys, offset: int, limit: int, after: list | None,
                 mode: str, names: list[str], get_total_count: bool, shards: list[int],
                 fetch) -> SearchResult:
        """Each shard finds its first ``offset + limit + 1`` documents after the token with
        ``ordered.first`` (documents with the sort field and without it apart); Python
        decodes those, sorts them exactly and cuts the page."""
        since = self.visible_from()
        want = offset + limit + 1
        sorters = keys.sorters
        pk_desc = sorters[-1].sort_order == "DESC"  # type: ignore[attr-defined]
        fs = sorters[0] if isinstance(sorters[0], FieldSort) else None
        layout = self.layout
        order = self.state.order

        one_part = fs is None or (fs.missing == "last" and fs.missing_value is None)
        split = fs is None and after is None and limit and layout.order_field and \
            isinstance(query, GEO_QUERIES) and layout.slot(query.field_name).point is not None

        def one(i: int) -> tuple:
            """``(shard, searcher, addresses, valued, total)`` of shard ``i``: ``valued`` as
            ``ordered.first`` gives it, when the shard's part is one search by one level."""
            shard = self.state.shards[i]
            se = shard.searcher()
            if split:
                return self._geo_part(shard, se, query, since, pk_desc, want, get_total_count)
            base = self.base(shard, se, query, since)
            pk_levels = [(n, pk_desc) for n in shard.level_names]
            valued: list = []
            if limit and after is None and one_part and get_total_count:
                # the page's first search over ``base`` counts it too
                levels = pk_levels if fs is None else \
                    [(layout.fast(fs.field_name), fs.sort_order == "DESC",
                      shard.q_has(fs.field_name))] + pk_levels
                addrs, total = ordered.first(shard, se, base, levels, want, counted=True,
                                             valued=valued)
                return shard, se, addrs, valued, total
            total = shard.count(se, base) if get_total_count else -1
            if not limit:
                return shard, se, [], valued, total
            addrs: list = []
            if fs is None:
                addrs = _part(shard, se, order, base, pk_levels, None if after is None else after[0][1],
                              [], want, valued=valued)
            else:
                fname = layout.fast(fs.field_name)
                fdesc = fs.sort_order == "DESC"
                has = shard.q_has(fs.field_name)
                tok = None if after is None else after[0]
                tok_pk = None if after is None else after[1][1]
                mv = fs.missing_value
                if fs.missing == "last" and mv is None:
                    # one part: tantivy puts the documents without the field last itself
                    levels = [(fname, fdesc, has)] + pk_levels
                    if tok is None:
                        addrs = _part(shard, se, order, base, levels, None, [], want, valued=valued)
                    elif tok[0] == 1:
                        v = tok[1] + 0.0 if type(tok[1]) is float else tok[1]  # -0.0 is 0.0
                        addrs = _part(shard, se, order, base, levels, tok_pk, [v], want,
                                      shard.q_bool([("must_not", has), ("must", shard.q_rows())]),
                                      valued=valued)
                    else:
                        mq = shard.q_bool([("must", base), ("must_not", has)])
                        addrs = _part(shard, se, order, mq, pk_levels, tok_pk, [], want)
                    return shard, se, addrs, valued, total
                levels = [(fname, fdesc)] + pk_levels
                hq = shard.q_bool([("must", base), ("filter", has)])
                if tok is None:
                    addrs += _part(shard, se, order, hq, levels, None, [], want)
                elif tok[0] == 1:
                    v = tok[1] + 0.0 if type(tok[1]) is float else tok[1]  # indexed -0.0 is 0.0
                    addrs += _part(shard, se, order, hq, levels, tok_pk, [v], want)
                elif fs.missing == "first":  # the token is in the missing block: every value after
                    addrs += _part(shard, se, order, hq, levels, None, [], want)
                mq = shard.q_bool([("must", base), ("must_not", has)])
                if tok is None:
                    addrs += _part(shard, se, order, mq, pk_levels, None, [], want)
                elif mv is not None:
                    if mv == tok[1]:
                        addrs += _part(shard, se, order, mq, pk_levels, tok_pk, [], want)
                    elif (mv < tok[1]) == fdesc:  # the stand-in value sorts after the token's
                        addrs += _part(shard, se, order, mq, pk_levels, None, [], want)
                elif tok[0] == 0:
                    addrs += _part(shard, se, order, mq, pk_levels, tok_pk, [], want)
                elif fs.missing == "last":
                    addrs += _part(shard, se, order, mq, pk_levels, None, [], want)
            return shard, se, addrs, valued, total

        found = [one(i) for i in shards]  # small per shard: the pool's hand-offs cost more
        parts = _decoded(found, want, fs is not None,
                         pk_desc if fs is None else fs.sort_order == "DESC")
        if fs is None:
            # key order alone: the keys as tuples are the sort keys (``SortKeys.compare``
            # compares them so), and only the last row's becomes a token
            items = [(0.0, pk, values, stored) for part, _ in parts for pk, values, stored in part]
            if after is not None:
                ak = tuple(after[0][1])
                items = [h for h in items if (h[1] < ak if pk_desc else h[1] > ak)]
            items.sort(key=_KEY, reverse=pk_desc)
            hits = items[offset:offset + limit]
            token = keys.encode_token(keys.key(0.0, hits[-1][1], {})) \
                if hits and len(items) > offset + limit else None
        else:
            items = [(0.0, pk, values, stored) for part, _ in parts for pk, values, stored in part]
            hits = None
            if after is None and not pk_desc:
                hits, token = _field_page(items, fs, keys, offset, limit)
        if hits is None:
            hits, token = _sorted_page([(keys.key(0.0, h[1], h[2]), h) for h in items], keys,
                                       after, offset, limit)
        rows = self._rows(hits, mode, names, fetch)
        total = sum(t for _, t in parts) if get_total_count else -1
        return SearchResult(rows, total, token, {}, {}, [SearchHit(0.0, r) for r in rows])

    def _geo_part(self, shard, se, query, since: int | None, desc: bool, want: int,
                  counted: bool) -> tuple:
        """``one`` of ``_ordered`` for a top-level geo query in key order (layout 3): the first
        ``want`` of the inner cells' documents by tantivy, merged by ``_o`` with the edge
        cells' documents that pass the exact test (``Compiler.split_geo``); the two sets are
        apart (a point lies in one cell of the partition)."""
        comp = Compiler(self.layout, shard, se)
        comp.split_geo, comp.since = True, since
        base = self.base(shard, se, query, since, comp)
        passed = comp.passed or []
        levels = [(n, desc) for n in shard.level_names]
        inner, total = ordered.first(shard, se, base, levels, want, counted=True) if counted \
            else (ordered.first(shard, se, base, levels, want), -1)
        if counted:
            total += len(passed)
        both = inner + passed
        if shard.constant("_o") or len(both) <= want:
            return shard, se, both, [], total
        hits = list(zip(shard.fast_values(se, "_o", both), both))
        cut = _nth([v for v, _ in hits], want, desc)
        hits = [h for h in hits if (h[0] >= cut if desc else h[0] <= cut)]  # type: ignore[operator]
        return shard, se, [a for _, a in hits], [("_o", ()), hits], total

    def _by_key(self, query: Query, keys: SortKeys, desc: bool, offset: int, limit: int,
                after: list | None, mode: str, names: list[str], get_total_count: bool,
                shards: list[int], fetch) -> SearchResult:
        """A search in primary-key order: each shard gives its first ``offset + limit + 1``
        matches after the token (tantivy orders them by ``_pk``, and a regex over ``_pk``
        skips what the token covers), so a page costs the same at any depth."""
        since = self.visible_from()
        want = offset + limit + 1
        after_key = None if after is None else order_key(tuple(after[0][1]))

        def one(i: int) -> tuple[list, int]:
            shard = self.state.shards[i]
            se = shard.searcher()
            comp = Compiler(self.layout, shard, se)
            clauses = [("must", comp.compile(query)), ("filter", shard.q_rows())]
            if since is not None:
                clauses.append(("filter", shard.q_ts_from(since)))
            total = shard.count(se, shard.q_bool(clauses)) if get_total_count else -1
            if after_key is not None:
                clauses.append(("filter", shard.q_regex("_pk", hex_after(after_key, desc))))
            return shard.run_ordered(se, shard.q_bool(clauses), want, desc), total

        parts = [one(i) for i in shards]  # small per shard: the pool's hand-offs cost more
        merged = sorted((h for part, _ in parts for h in part), key=lambda h: h[0], reverse=desc)
        page = [decode_src(src) for _, src in merged[offset:offset + limit]]
        token = None
        if page and len(merged) > offset + limit:
            token = keys.encode_token([[1, list(page[-1][0])]])
        hits = [(0.0, pk, values, stored) for pk, values, stored in page]
        rows = self._rows(hits, mode, names, fetch)
        total = sum(t for _, t in parts) if get_total_count else -1
        return SearchResult(rows, total, token, {}, {}, [SearchHit(0.0, r) for r in rows])

    def _rows(self, hits: list[tuple], mode: str, names: list[str], fetch) -> list[Row]:
        if mode == RETURN_NONE:
            return [Row(h[1], {}, 0) for h in hits]
        if mode == RETURN_ALL_FROM_INDEX:
            return [Row(h[1], dict(sorted(decode_part(h[3]).items())), 0) for h in hits]
        return fetch([h[1] for h in hits], None if mode == RETURN_ALL else names)

    def _top_rows(self, hits: list, agg: TopRowsAgg, fetch) -> list[Row]:
        keys = SortKeys(check_sort(self.meta, agg.sort))
        ordered = sorted(hits, key=lambda h: keys.cmp_key(keys.key(h[0], h[1], h[2])))
        return fetch([h[1] for h in ordered[:agg.limit]], None)


def _decoded(found: list, want: int, full: bool, desc: bool) -> list[tuple[list, int]]:
    """``([(pk, values, stored)], total)`` of each shard's ``(shard, searcher, addresses,
    valued, total)``, ``full``: every value decoded (else only the keys). When every shard
    found its part by one search on one level after the same constant levels
    (``valued``), only the documents up to the ``want``-th value of all the shards are
    read: one after it has ``want`` documents before it in the order, wherever they are."""
    d = decode_src if full else decode_src_lazy
    cut: object = _ALL
    valued = [f[3] for f in found]
    if all(valued) and len({v[0] for v in valued if v[1]}) <= 1:
        cut = _nth([x for v in valued for x, _ in v[1]], want, desc)
    out = []
    for shard, se, addrs, v, total in found:
        if cut is not _ALL:
            addrs = [a for x, a in v[1] if x is not None and (x >= cut if desc else x <= cut)]
        out.append(([d(src) for src in shard.sources(se, addrs)], total))
    return out


_ALL = object()


def _nth(values: list, n: int, desc: bool) -> object:
    """The ``n``-th of ``values`` in their order (None, a missing value, last), or ``_ALL``
    when there are not ``n`` before the missing ones."""
    present = [x for x in values if x is not None]
    if len(present) < n:
        return _ALL
    present.sort(reverse=desc)
    return present[n - 1]


def _sorted_page(decorated: list, keys: SortKeys, after, offset: int,
                 limit: int) -> tuple[list, object]:
    """``(hits, next token)`` of one page of ``decorated`` ``(sort key, hit)`` pairs: those
    after the token's key ``after`` (None: from the start), in sort order, ``offset`` and
    ``limit`` applied; the token is None when nothing follows the page."""
    if after is not None:
        cmp = keys.compare
        decorated = [d for d in decorated if cmp(d[0], after) > 0]
    keys.sort(decorated)
    page = decorated[offset:offset + limit]
    token = keys.encode_token(page[-1][0]) if page and len(decorated) > offset + limit else None
    return [h for _, h in page], token


def _field_page(items: list, fs: FieldSort, keys: SortKeys, offset: int,
                limit: int) -> tuple[list | None, bytes | None]:
    """The page of ``items`` under one FieldSort on a single-valued field then the key
    (ascending), sorted by plain tuples; ``(None, None)`` when a value does not negate (a
    descending string): ``SortKeys`` sorts those."""
    fname, desc, mv = fs.field_name, fs.sort_order == "DESC", fs.missing_value
    gone = 0 if fs.missing == "first" else 2

    def key(h: tuple) -> tuple:
        v = h[2].get(fname)
        if v is None:
            v = mv
        if v is None:
            return (gone, 0, h[1])
        return (1, -v if desc else v, h[1])
    try:
        items.sort(key=key)
    except TypeError:
        return None, None
    page = items[offset:offset + limit]
    token = keys.encode_token(keys.key(0.0, page[-1][1], page[-1][2])) \
        if page and len(items) > offset + limit else None
    return page, token


def _part(shard, searcher, order, query, levels: list, after_pk: list | None,
          after_values: list, want: int, also=None, valued: list | None = None) -> list:
    """``ordered.first`` of ``query`` after the key ``after_values + pk`` (None: from the
    start), ``order`` giving a key's level values; ``also``: documents after the token
    besides those ``levels`` compare (the ones without the sort field, when they come
    last)."""
    if after_pk is None:
        return ordered.first(shard, searcher, query, levels, want, valued=valued)
    pk = tuple(after_pk)
    long = ordered.long_key(pk, PK_LEVELS)
    values = after_values + order(pk)
    q, equal = ordered.beyond(shard, [lv[:2] for lv in levels], values, inclusive_tail=long)
    if also is not None:
        q = shard.q_bool([("should", q), ("should", also)], 1)
    q = shard.q_bool([("must", query), ("filter", q)])
    if long:  # documents that agree with the token on every level come back too: room for them
        want += shard.count(searcher, shard.q_bool([("must", query), ("filter", equal)]))
        valued = None  # more than ``want`` of them are needed: no cut by value
    return ordered.first(shard, searcher, q, levels, want, valued=valued)


def _fits(field_type: str, v: object) -> bool:
    """Whether a FieldSort's missing value compares with the field's values."""
    if field_type in ("LONG", "DATE"):
        return type(v) is int
    if field_type == "DOUBLE":
        return type(v) in (int, float)
    if field_type == "BOOLEAN":
        return type(v) is bool
    return type(v) is str


def _factor(v: object) -> float:
    vs = as_list(v)
    if not vs or not isinstance(vs[0], (int, float)) or isinstance(vs[0], bool):
        return 1.0
    return float(vs[0])
