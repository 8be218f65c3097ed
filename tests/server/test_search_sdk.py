"""The official tablestore SDK's search-index calls against widetable serve, as a user's code
writes them (following the SDK's own search examples): create, describe, list, search with
queries, sorts, paging tokens, totals, aggregations and group-bys, parallel scan, delete."""

from __future__ import annotations

import time

import pytest
from tablestore import (
    BoolQuery, ColumnReturnType, ColumnsToGet, FieldSchema, FieldSort, FieldType, GeoDistanceQuery,
    MatchAllQuery, MatchQuery, OTSServiceError, RangeQuery, ScanQuery,
    SearchIndexMeta, SearchQuery, Sort, SortOrder, TermQuery, TermsQuery, WildcardQuery,
)
from tablestore.aggregation import Avg, Count, Max, Min, Sum
from tablestore.group_by import GroupByField, GroupByRange

from widetable.search import GeoDistanceQuery as WGeo
from widetable.search import MatchAllQuery as WAll
from widetable.search import TermQuery as WTerm

ROWS = 40


@pytest.fixture
def indexed(in_process):
    import tablestore
    from . import serving
    db, server = in_process
    t = db.create_table("sale", [("id", "INTEGER")])
    for i in range(ROWS):
        t.put_row((i,), {"city": ["hangzhou", "beijing", "上海"][i % 3], "price": i, "w": i * 0.5,
                         "title": "我们在杭州西湖边上卖学生卡" if i % 4 == 0 else "roast duck",
                         "loc": f"{30 + i * 0.001},{120 + i * 0.001}"})
    client = serving.official_client(f"http://127.0.0.1:{server.port}", "v4", "search-sdk")
    fields = [FieldSchema("city", FieldType.KEYWORD, index=True, enable_sort_and_agg=True),
              FieldSchema("price", FieldType.LONG, index=True, enable_sort_and_agg=True),
              FieldSchema("w", FieldType.DOUBLE, index=True, enable_sort_and_agg=True),
              FieldSchema("title", FieldType.TEXT, index=True, analyzer=tablestore.AnalyzerType.MAXWORD),
              FieldSchema("loc", FieldType.GEOPOINT, index=True)]
    client.create_search_index("sale", "ix", SearchIndexMeta(fields))
    assert db.wait_for_search_indexes("sale", "ix")
    return db, client


def test_ddl_and_describe(indexed):
    db, client = indexed
    assert [(i[0], i[1]) for i in client.list_search_index("sale")] == [("sale", "ix")]
    assert [(i[0], i[1]) for i in client.list_search_index()] == [("sale", "ix")]
    meta, stat = client.describe_search_index("sale", "ix")
    assert [f.field_name for f in meta.fields] == ["city", "price", "w", "title", "loc"]
    assert stat.sync_phase.name == "INCR" and stat.current_sync_timestamp > 0
    with pytest.raises(OTSServiceError) as ei:
        client.create_search_index("sale", "ix", SearchIndexMeta([FieldSchema("city", FieldType.KEYWORD)]))
    assert ei.value.get_error_code() == "OTSObjectAlreadyExist"
    client.delete_search_index("sale", "ix")
    assert client.list_search_index("sale") == []


def test_search_matches_the_embedded_answer(indexed):
    db, client = indexed
    q = BoolQuery(must_queries=[RangeQuery("price", 5, 30, include_lower=True)],
                  must_not_queries=[TermQuery("city", "beijing")])
    got, token = [], None
    while True:
        resp = client.search("sale", "ix", SearchQuery(
            q, sort=Sort([FieldSort("price", SortOrder.DESC)]), limit=4, next_token=token,
            get_total_count=True), ColumnsToGet(["city", "price"], ColumnReturnType.SPECIFIED))
        assert len(resp.search_hits) == len(resp.rows)
        got += [(r[0][0][1], {c[0]: c[1] for c in r[1]}["price"]) for r in resp.rows]
        assert resp.total_count == 17
        token = resp.next_token
        if not token:
            break
    want = sorted([i for i in range(5, 30) if i % 3 != 1], reverse=True)  # include_upper False
    assert got == [(i, i) for i in want]
    resp = client.search("sale", "ix", SearchQuery(MatchQuery("title", "西湖"), limit=100,
                                                   get_total_count=True),
                         ColumnsToGet(return_type=ColumnReturnType.NONE))
    assert sorted(r[0][0][1] for r in resp.rows) == [i for i in range(ROWS) if i % 4 == 0]
    for q_sdk, q_lib in [(GeoDistanceQuery("loc", "30.01,120.01", 500), WGeo("loc", "30.01,120.01", 500)),
                         (TermsQuery("city", ["上海", "nope"]), None), (WildcardQuery("city", "h*u"), None)]:
        resp = client.search("sale", "ix", SearchQuery(q_sdk, limit=100, get_total_count=True))
        if q_lib is not None:
            assert resp.total_count == db.search("sale", "ix", q_lib, get_total_count=True).total_count
        assert resp.total_count == len(resp.rows) > 0


def test_aggregations_group_bys_and_parallel_scan(indexed):
    db, client = indexed
    resp = client.search("sale", "ix", SearchQuery(
        MatchAllQuery(), limit=0, get_total_count=True,
        aggs=[Sum("price", name="s"), Avg("w", name="a"), Max("price", name="mx"), Min("w", name="mn"),
              Count("city", name="c")],
        group_bys=[GroupByField("city", size=5, sub_aggs=[Sum("price", name="cs")], name="g"),
                   GroupByRange("price", [(0, 10), (10, 100)], name="r")]))
    aggs = {a.name: a.value for a in resp.agg_results}
    assert aggs == {"s": sum(range(ROWS)), "a": sum(i * 0.5 for i in range(ROWS)) / ROWS,
                    "mx": ROWS - 1, "mn": 0.0, "c": ROWS}
    groups = {g.name: g for g in resp.group_by_results}
    items = [(i.key, i.row_count, i.sub_aggs[0].value) for i in groups["g"].items]
    want = sorted(((c, sum(1 for i in range(ROWS) if i % 3 == k), sum(i for i in range(ROWS) if i % 3 == k))
                   for k, c in enumerate(["hangzhou", "beijing", "上海"])), key=lambda x: (-x[1], x[0]))
    assert items == want
    assert [i.row_count for i in groups["r"].items] == [10, ROWS - 10]
    splits = client.compute_splits("sale", "ix")
    seen = []
    for pid in range(splits.splits_size):
        token = None
        while True:
            resp = client.parallel_scan("sale", "ix", ScanQuery(
                MatchAllQuery(), limit=7, next_token=token, current_parallel_id=pid,
                max_parallel=splits.splits_size), splits.session_id,
                ColumnsToGet(return_type=ColumnReturnType.NONE))
            token = resp.next_token
            seen += [r[0][0][1] for r in resp.rows]
            if not token:
                break
    assert sorted(seen) == list(range(ROWS))


def test_writes_become_searchable_within_a_second(indexed):
    db, client = indexed
    t = db.table("sale")
    start = time.monotonic()
    t.put_row((1000,), {"city": "新城"})
    while True:
        resp = client.search("sale", "ix", SearchQuery(TermQuery("city", "新城"), get_total_count=True))
        if resp.total_count == 1:
            break
        assert time.monotonic() - start < 5
        time.sleep(0.02)
    assert db.search("sale", "ix", WTerm("city", "新城"), get_total_count=True).total_count == 1
    assert db.search("sale", "ix", WAll(), get_total_count=True).total_count == ROWS + 1


def test_widetable_connect_has_the_search_calls(in_process):
    """widetable.connect: the embedded store's search calls, through the server."""
    import widetable
    from widetable.search import (
        DESC, BoolQuery as B, FieldSort as FS, GroupByField as GF, RangeQuery as R, SumAgg,
    )

    from . import serving
    db, server = in_process
    t = db.create_table("s", [("id", "INTEGER")])
    for i in range(30):
        t.put_row((i,), {"city": ["a", "b", "c"][i % 3], "price": i})
    remote = widetable.connect(f"http://127.0.0.1:{server.port}", access_key_id=serving.ACCESS_KEY_ID,
                               access_key_secret=serving.ACCESS_KEY_SECRET)
    try:
        remote.create_search_index("s", "ix", [("city", "KEYWORD"), ("price", "LONG")], shards=3)
        assert remote.wait_for_search_indexes("s", "ix")
        assert remote.list_search_index("s") == [("s", "ix")]
        d = remote.describe_search_index("s", "ix")
        assert [f.name for f in d.meta.fields] == ["city", "price"] and d.sync_phase == "INCR"
        q = B(must_queries=[R("price", 5, 25)], must_not_queries=[WTerm("city", "b")])
        args = dict(sort=[FS("price", DESC)], limit=4, get_total_count=True, columns=["price"],
                    aggs=[SumAgg("s", "price")], group_bys=[GF("g", "city")])
        local = db.search("s", "ix", q, **args)
        got = remote.search("s", "ix", q, **args)
        assert [r.primary_key for r in got.rows] == [r.primary_key for r in local.rows]
        assert [r["price"] for r in got.rows] == [r["price"] for r in local.rows]
        assert got.total_count == local.total_count and got.aggs == local.aggs
        assert [(g.key, g.row_count) for g in got.group_bys["g"]] == \
            [(g.key, g.row_count) for g in local.group_bys["g"]]
        keys, token = [], None
        while True:
            page = remote.search("s", "ix", q, sort=[FS("price", DESC)], limit=3, next_token=token)
            keys += [r.primary_key for r in page.rows]
            token = page.next_token
            if token is None:
                break
        assert keys == [r.primary_key for r in db.search("s", "ix", q, sort=[FS("price", DESC)],
                                                          limit=100).rows]
        splits = remote.compute_splits("s", "ix")
        seen = []
        for pid in range(splits["splits_count"]):
            token = None
            while True:
                page = remote.search_parallel_scan("s", "ix", None, splits["session_id"],
                                                   splits["splits_count"], pid, 4, token)
                seen += [r.primary_key for r in page.rows]
                token = page.next_token
                if token is None:
                    break
        assert sorted(seen) == [(i,) for i in range(30)]
        remote.delete_search_index("s", "ix")
        assert remote.list_search_index() == []
    finally:
        remote.close()
