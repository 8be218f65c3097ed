"""Differential property test: db.search against a brute-force evaluator in plain Python.

Hypothesis makes rows of every scalar field type (with an array field, missing
values, Chinese and English text and geo points) and random queries, sorts,
page sizes, aggregations and group-bys. The evaluator below reads the rows as
they were written and knows nothing of tantivy; keys, order (following
next_token to the end), totals and aggregation values must agree exactly
(doubles within 1e-9).
"""

from __future__ import annotations

import json
import math
import re
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import widetable
from widetable.search import (
    DESC, AvgAgg, BoolQuery, CountAgg, DistinctCountAgg, ExistsQuery, FieldSort, GeoDistanceQuery,
    GroupByField, GroupByRange, MatchAllQuery, MatchPhraseQuery, MatchQuery, MaxAgg, MinAgg,
    PrefixQuery, PrimaryKeySort, RangeQuery, SumAgg, TermQuery, TermsQuery, WildcardQuery,
)

CITIES = ["hangzhou", "beijing", "上海", "Hz", "a b"]
WORDS = ["hello", "world", "杭", "州", "西湖", "duck", "roast", "学生卡", "Beijing"]
TAGS = ["a", "b", "c", "dd"]
FIELDS = [
    ("city", "KEYWORD"), ("price", "LONG"), ("score", "DOUBLE"), ("ok", "BOOLEAN"),
    ("day", "DATE"), {"name": "title", "type": "TEXT"}, ("loc", "GEO_POINT"),
    {"name": "tags", "type": "KEYWORD", "is_array": True},
]
EARTH = 6371008.8

rows_st = st.lists(st.fixed_dictionaries({}, optional={
    "city": st.sampled_from(CITIES),
    "price": st.integers(-5, 30),
    "score": st.floats(-10, 10, allow_nan=False).map(lambda x: round(x, 3)),
    "ok": st.booleans(),
    "day": st.integers(0, 5) .map(lambda d: 1_700_000_000_000 + d * 86_400_000),
    "title": st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join),
    "loc": st.tuples(st.floats(30, 30.2), st.floats(120, 120.2)).map(lambda p: f"{p[0]:.5f},{p[1]:.5f}"),
    "tags": st.lists(st.sampled_from(TAGS), max_size=3).map(json.dumps),
}), min_size=0, max_size=25)


def leaf_st():
    return st.one_of(
        st.just(MatchAllQuery()),
        st.sampled_from(CITIES + ["nope"]).map(lambda v: TermQuery("city", v)),
        st.integers(-5, 30).map(lambda v: TermQuery("price", v)),
        st.booleans().map(lambda v: TermQuery("ok", v)),
        st.lists(st.sampled_from(TAGS), min_size=1, max_size=3).map(lambda v: TermsQuery("tags", v)),
        st.tuples(st.none() | st.integers(-5, 30), st.none() | st.integers(-5, 30), st.booleans(),
                  st.booleans()).filter(lambda t: t[0] is not None or t[1] is not None)
          .map(lambda t: RangeQuery("price", t[0], t[1], t[2], t[3])),
        st.tuples(st.none() | st.floats(-10, 10), st.none() | st.floats(-10, 10))
          .filter(lambda t: t[0] is not None or t[1] is not None)
          .map(lambda t: RangeQuery("score", t[0], t[1], True, True)),
        st.tuples(st.none() | st.sampled_from(CITIES), st.none() | st.sampled_from(CITIES), st.booleans())
          .filter(lambda t: t[0] is not None or t[1] is not None)
          .map(lambda t: RangeQuery("city", t[0], t[1], t[2], not t[2])),
        st.sampled_from(["h", "b", "上", "", "H"]).map(lambda v: PrefixQuery("city", v)),
        st.sampled_from(["h*", "*ou", "?z", "*", "a?b", "上*"]).map(lambda v: WildcardQuery("city", v)),
        st.sampled_from(["city", "price", "title", "tags", "loc", "day"]).map(ExistsQuery),
        st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
                  st.sampled_from(["OR", "AND"])).map(lambda t: MatchQuery("title", t[0], operator=t[1])),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=2).map(
            lambda w: MatchPhraseQuery("title", " ".join(w))),
        st.tuples(st.floats(30, 30.2), st.floats(120, 120.2), st.floats(100, 20000)).map(
            lambda t: GeoDistanceQuery("loc", f"{t[0]},{t[1]}", t[2])),
        st.integers(0, 5).map(lambda d: RangeQuery("day", 1_700_000_000_000 + d * 86_400_000, None)),
    )


query_st = st.recursive(leaf_st(), lambda inner: st.builds(
    BoolQuery, must_queries=st.lists(inner, max_size=2), must_not_queries=st.lists(inner, max_size=2),
    filter_queries=st.lists(inner, max_size=1), should_queries=st.lists(inner, max_size=3),
), max_leaves=5)

sort_st = st.one_of(
    st.none(),
    st.just([PrimaryKeySort(DESC)]),
    st.lists(st.builds(FieldSort, st.sampled_from(["price", "city", "score", "tags", "day", "ok"]),
                       st.sampled_from(["ASC", "DESC"]), st.sampled_from([None, "min", "max", "avg"]),
                       st.sampled_from(["last", "first"])).map(
        lambda s: s if s.sort_mode != "avg" or s.field_name in ("price", "score", "day")
        else FieldSort(s.field_name, s.sort_order, None, s.missing)), min_size=1, max_size=2),
)


# -- the brute-force evaluator -------------------------------------------------------------

def tokens(text: str) -> list[str]:
    out = []
    for m in re.finditer(r"[\u4e00-\u9fff]|[^\W\u4e00-\u9fff]+", text.lower()):
        out.append(m.group())
    return out


def values(row: dict, name: str) -> list:
    v = row.get(name)
    if v is None:
        return []
    if name == "tags":
        return json.loads(v)
    if name == "loc":
        a, b = v.split(",")
        return [(float(a), float(b))]
    if name == "score":
        return [float(v)]
    return [v]


def haversine(a, b, c, d):
    p1, p2 = math.radians(a), math.radians(c)
    x = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(d - b) / 2) ** 2
    return 2 * EARTH * math.asin(min(1.0, math.sqrt(x)))


def matches(q, row: dict) -> bool:
    if isinstance(q, MatchAllQuery):
        return True
    if isinstance(q, BoolQuery):
        need = q.minimum_should_match
        if need is None:
            need = 1 if q.should_queries and not (q.must_queries or q.filter_queries) else 0
        return (all(matches(x, row) for x in q.must_queries + q.filter_queries)
                and not any(matches(x, row) for x in q.must_not_queries)
                and sum(matches(x, row) for x in q.should_queries) >= need)
    if isinstance(q, ExistsQuery):
        return bool(values(row, q.field_name))
    vs = values(row, q.field_name)
    if isinstance(q, TermQuery):
        return any(v == q.column_value for v in vs)
    if isinstance(q, TermsQuery):
        return any(v in q.column_values for v in vs)
    if isinstance(q, RangeQuery):
        def ok(v):
            lo, hi = q.range_from, q.range_to
            return ((lo is None or v > lo or (q.include_lower and v == lo))
                    and (hi is None or v < hi or (q.include_upper and v == hi)))
        return any(ok(v) for v in vs)
    if isinstance(q, PrefixQuery):
        return any(v.startswith(q.prefix) for v in vs)
    if isinstance(q, WildcardQuery):
        rx = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in q.value)
        return any(re.fullmatch(rx, v, re.S) for v in vs)
    if isinstance(q, MatchQuery):
        have = set(tokens(vs[0])) if vs else set()
        want = list(dict.fromkeys(tokens(q.text)))
        if not want:
            return False
        return all(t in have for t in want) if q.operator == "AND" else any(t in have for t in want)
    if isinstance(q, MatchPhraseQuery):
        have, want = (tokens(vs[0]) if vs else []), tokens(q.text)
        return bool(want) and any(have[i:i + len(want)] == want for i in range(len(have)))
    if isinstance(q, GeoDistanceQuery):
        a, b = map(float, q.center_point.split(","))
        return any(haversine(a, b, la, lo) <= q.distance for la, lo in vs)
    raise AssertionError(q)


def sort_key_fns(sort):
    specs = []
    for s in sort or []:
        specs.append(s)
    return specs


def expected_order(rows: dict, keys: list, sort) -> list:
    """Keys in the sort's order, primary key (ascending) as the last tie-break."""
    def cmp(a, b):
        for s in sort or []:
            if isinstance(s, PrimaryKeySort):
                r = (a > b) - (a < b)
                return -r if s.sort_order == DESC else r
            va, vb = values(rows[a], s.field_name), values(rows[b], s.field_name)
            mode = s.sort_mode or ("max" if s.sort_order == DESC else "min")
            f = {"min": min, "max": max, "avg": lambda x: sum(x) / len(x)}[mode]
            xa = f(va) if va else None
            xb = f(vb) if vb else None
            if (xa is None) != (xb is None):
                missing_a = xa is None
                if s.missing == "first":
                    return -1 if missing_a else 1
                return 1 if missing_a else -1
            if xa is None or xa == xb:
                continue
            r = -1 if xa < xb else 1
            return -r if s.sort_order == DESC else r
        return (a > b) - (a < b)
    import functools
    return sorted(keys, key=functools.cmp_to_key(cmp))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = widetable.open(str(tmp_path_factory.mktemp("diff")), purge_interval=None)
    yield db
    db.close()


class SdkSearcher:
    """The same searches made with the official tablestore SDK, its answers read back into the
    shape the test compares (rows' keys, token, total, aggregation values, groups)."""

    def __init__(self, client) -> None:
        self.client = client

    def _q(self, q):
        import tablestore as ts
        if isinstance(q, MatchAllQuery):
            return ts.MatchAllQuery()
        if isinstance(q, BoolQuery):
            return ts.BoolQuery(must_queries=[self._q(x) for x in q.must_queries],
                                must_not_queries=[self._q(x) for x in q.must_not_queries],
                                filter_queries=[self._q(x) for x in q.filter_queries],
                                should_queries=[self._q(x) for x in q.should_queries],
                                minimum_should_match=q.minimum_should_match)
        if isinstance(q, TermQuery):
            return ts.TermQuery(q.field_name, q.column_value)
        if isinstance(q, TermsQuery):
            return ts.TermsQuery(q.field_name, list(q.column_values))
        if isinstance(q, RangeQuery):
            return ts.RangeQuery(q.field_name, q.range_from, q.range_to, q.include_lower, q.include_upper)
        if isinstance(q, PrefixQuery):
            return ts.PrefixQuery(q.field_name, q.prefix)
        if isinstance(q, WildcardQuery):
            return ts.WildcardQuery(q.field_name, q.value)
        if isinstance(q, ExistsQuery):
            return ts.ExistsQuery(q.field_name)
        if isinstance(q, MatchQuery):
            op = ts.QueryOperator.AND if q.operator == "AND" else ts.QueryOperator.OR
            return ts.MatchQuery(q.field_name, q.text, operator=op)
        if isinstance(q, MatchPhraseQuery):
            return ts.MatchPhraseQuery(q.field_name, q.text)
        if isinstance(q, GeoDistanceQuery):
            return ts.GeoDistanceQuery(q.field_name, q.center_point, q.distance)
        raise AssertionError(q)

    def _sort(self, sort):
        import tablestore as ts
        order = {"ASC": ts.SortOrder.ASC, "DESC": ts.SortOrder.DESC}
        mode = {"min": ts.SortMode.MIN, "max": ts.SortMode.MAX, "avg": ts.SortMode.AVG}
        out = []
        for x in sort:
            if isinstance(x, PrimaryKeySort):
                out.append(ts.PrimaryKeySort(order[x.sort_order]))
            else:
                out.append(ts.FieldSort(x.field_name, order[x.sort_order], mode.get(x.sort_mode)))
        return ts.Sort(out)

    def search(self, table, index, q, sort=None, limit=10, next_token=None, get_total_count=False,
               aggs=None, group_bys=None):
        import tablestore as ts
        from tablestore import aggregation as ta
        from tablestore import group_by as tg
        sdk_aggs = None
        if aggs:
            kinds = {SumAgg: ta.Sum, MinAgg: ta.Min, MaxAgg: ta.Max, AvgAgg: ta.Avg, CountAgg: ta.Count,
                     DistinctCountAgg: ta.DistinctCount}
            sdk_aggs = [kinds[type(a)](a.field_name, name=a.name) for a in aggs]
        sdk_gbs = None
        if group_bys:
            sdk_gbs = []
            for g in group_bys:
                if isinstance(g, GroupByField):
                    sdk_gbs.append(tg.GroupByField(g.field_name, size=g.size, name=g.name))
                else:
                    sdk_gbs.append(tg.GroupByRange(g.field_name, [
                        (float("-inf") if lo is None else lo, float("inf") if hi is None else hi)
                        for lo, hi in g.ranges], name=g.name))
        resp = self.client.search(table, index, ts.SearchQuery(
            self._q(q), sort=self._sort(sort) if sort else None, limit=limit, next_token=next_token,
            get_total_count=get_total_count, aggs=sdk_aggs, group_bys=sdk_gbs),
            ts.ColumnsToGet(return_type=ts.ColumnReturnType.NONE))
        out = SimpleNamespace(rows=[SimpleNamespace(primary_key=tuple(v for _, v in r[0]))
                                    for r in resp.rows],
                              next_token=resp.next_token or None, total_count=resp.total_count)
        out.aggs = {}
        for a in resp.agg_results or []:
            v = a.value
            if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
                v = None  # Tablestore's "no value"
            out.aggs[a.name] = v
        out.group_bys = {}
        for g in resp.group_by_results or []:
            if g.items and hasattr(g.items[0], "range_from"):
                out.group_bys[g.name] = [SimpleNamespace(key=(i.range_from, i.range_to), row_count=i.row_count)
                                         for i in g.items]
            else:
                out.group_bys[g.name] = [SimpleNamespace(key=i.key, row_count=i.row_count) for i in g.items]
        return out


@pytest.fixture(scope="module")
def served(store):
    """A server on the store for the module (draining it closes the store: once, at the end)."""
    import threading

    from tests.server import serving
    from widetable.server import KeyStore, WidetableServer
    server = WidetableServer(store, KeyStore({serving.ACCESS_KEY_ID: serving.ACCESS_KEY_SECRET}), port=0)
    threading.Thread(target=server.serve_forever, name="diff-serve", daemon=True).start()
    yield server
    server.drain(5)


@pytest.fixture(scope="module", params=["embedded", "wire", "sdk"])
def searcher(request, store):
    """Who runs the searches: the store itself, widetable.connect through a server on the
    same store (Tablestore's protocol: queries, sorts, tokens, aggregations and group-bys
    encoded and decoded both ways), or the official tablestore SDK through that server."""
    if request.param == "embedded":
        yield store
        return
    from tests.server import serving
    server = request.getfixturevalue("served")
    if request.param == "sdk":
        yield SdkSearcher(serving.official_client(f"http://127.0.0.1:{server.port}", "v4", "diff-sdk"))
        return
    remote = widetable.connect(f"http://127.0.0.1:{server.port}", access_key_id=serving.ACCESS_KEY_ID,
                               access_key_secret=serving.ACCESS_KEY_SECRET, protocol="tablestore")
    yield remote
    remote.close()


counter = iter(range(10**6))


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=rows_st, later=st.lists(st.tuples(st.integers(0, 40), rows_st.map(lambda r: r[0] if r else None)),
                                   max_size=12),
       queries=st.lists(st.tuples(query_st, sort_st, st.integers(1, 7)), min_size=1, max_size=4),
       shards=st.integers(1, 3))
def test_search_agrees_with_brute_force(store, searcher, rows, later, queries, shards):
    """Rows written before the index (full sync), then puts, overwrites and deletes after it
    (incremental sync, one commit each: several tantivy segments)."""
    name = f"t{next(counter)}"
    t = store.create_table(name, [("id", "STRING")])
    data = {}

    def put(pk, r):
        data[pk] = r
        t.put_row((pk,), r if r else {"other": 1})

    for i, r in enumerate(rows):
        put(f"r{i:02d}", r)
    store.create_search_index(name, "ix", FIELDS, shards=shards)
    assert store.wait_for_search_indexes(name, "ix", timeout=60)
    for i, r in later:
        pk = f"r{i:02d}"
        if r is None:
            data.pop(pk, None)
            t.delete_row((pk,))
        else:
            put(pk, r)
        assert store.wait_for_search_indexes(name, "ix", timeout=60)
    for q, sort, page in queries:
        if searcher is not store and any(getattr(s, "missing", "last") != "last" for s in sort or []):
            continue  # Tablestore's FieldSort message has no missing-first option
        want = [k for k in data if matches(q, data[k])]
        want = expected_order(data, want, sort)
        got, token, total = [], None, None
        while True:
            res = searcher.search(name, "ix", q, sort=sort, limit=page, next_token=token,
                               get_total_count=True)
            total = res.total_count
            got += [r.primary_key[0] for r in res.rows]
            token = res.next_token
            if token is None:
                break
            assert len(got) < 200
        assert total == len(want), (q, sort)
        assert got == want, (q, sort)
        res = searcher.search(name, "ix", q, limit=0, aggs=[
            SumAgg("sum", "price"), MinAgg("min", "score"), MaxAgg("max", "day"),
            AvgAgg("avg", "score"), CountAgg("count", "tags"), DistinctCountAgg("dc", "tags"),
        ], group_bys=[GroupByField("g", "city", size=10),
                      GroupByRange("r", "price", ((None, 0), (0, 10), (10, None)))])
        prices = [v for k in want for v in values(data[k], "price")]
        scores = [v for k in want for v in values(data[k], "score")]
        days = [v for k in want for v in values(data[k], "day")]
        tags = [v for k in want for v in values(data[k], "tags")]
        assert res.aggs["sum"] == (sum(prices) if prices else None)
        assert res.aggs["min"] == (min(scores) if scores else None)
        assert res.aggs["max"] == (max(days) if days else None)
        if scores:
            assert abs(res.aggs["avg"] - sum(scores) / len(scores)) < 1e-9
        else:
            assert res.aggs["avg"] is None
        assert res.aggs["count"] == sum(1 for k in want if values(data[k], "tags"))
        assert res.aggs["dc"] == len(set(tags))
        counts = {}
        for k in want:
            for c in set(values(data[k], "city")):
                counts[c] = counts.get(c, 0) + 1
        groups = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
        assert [(g.key, g.row_count) for g in res.group_bys["g"]] == groups
        ranges = [sum(1 for k in want if any((lo is None or v >= lo) and (hi is None or v < hi)
                                            for v in values(data[k], "price")))
                  for lo, hi in ((None, 0), (0, 10), (10, None))]
        assert [g.row_count for g in res.group_bys["r"]] == ranges
    store.delete_table(name)
