"""The official tablestore SDK's percentiles, top_rows, GroupByHistogram, GroupByDateHistogram,
GroupByGeoDistance and GroupByComposite against widetable serve, as the SDK's own search
examples write them; every figure is checked against one computed here from the rows."""

from __future__ import annotations

import calendar
import math
import time

import pytest
from tablestore import (
    ColumnReturnType, ColumnsToGet, FieldSchema, FieldSort, FieldType, MatchAllQuery,
    OTSServiceError, RangeQuery, SearchIndexMeta, SearchQuery, Sort, SortMode, SortOrder,
)
from tablestore.aggregation import Percentiles, Sum, TopRows
from tablestore.group_by import (
    DateTimeValue, FieldRange, GeoPoint, GroupByComposite, GroupByDateHistogram, GroupByField,
    GroupByGeoDistance, GroupByHistogram, GroupKeySort, RowCountSort,
)
from tablestore.metadata import DateTimeUnit

from widetable.search import geo

ROWS = 60
DAY = 86_400_000
T0 = calendar.timegm((2024, 1, 20, 0, 0, 0)) * 1000


def row(i: int) -> dict:
    return {"city": ["hangzhou", "beijing", "上海"][i % 3], "kind": ["a", "b"][i % 2], "price": i * 7 % 50,
            "w": i * 0.25, "day": T0 + i * 3 * DAY, "loc": f"{30 + i * 0.002},{120 + i * 0.002}",
            "tags": f'[{i % 5}, {i % 7}]'}


@pytest.fixture
def indexed(in_process):
    from . import serving
    db, server = in_process
    t = db.create_table("sale", [("id", "INTEGER")])
    for i in range(ROWS):
        r = row(i)
        if i % 10 == 9:
            del r["price"]  # some rows without the field
        t.put_row((i,), r)
    client = serving.official_client(f"http://127.0.0.1:{server.port}", "v4", "search-sdk-aggs")
    fields = [FieldSchema("city", FieldType.KEYWORD, index=True, enable_sort_and_agg=True),
              FieldSchema("kind", FieldType.KEYWORD, index=True, enable_sort_and_agg=True),
              FieldSchema("price", FieldType.LONG, index=True, enable_sort_and_agg=True),
              FieldSchema("w", FieldType.DOUBLE, index=True, enable_sort_and_agg=True),
              FieldSchema("day", FieldType.DATE, index=True, enable_sort_and_agg=True,
                          date_formats=["epoch_millis"]),
              FieldSchema("loc", FieldType.GEOPOINT, index=True, enable_sort_and_agg=True),
              FieldSchema("tags", FieldType.LONG, index=True, enable_sort_and_agg=True, is_array=True)]
    client.create_search_index("sale", "ix", SearchIndexMeta(fields))
    assert db.wait_for_search_indexes("sale", "ix")
    rows = {i: row(i) for i in range(ROWS)}
    for i in rows:
        if i % 10 == 9:
            del rows[i]["price"]
    return db, client, rows


def search(client, **kw):
    return client.search("sale", "ix", SearchQuery(MatchAllQuery(), limit=0, **kw),
                         ColumnsToGet(return_type=ColumnReturnType.NONE))


def exact_percentile(vals: list, p: float) -> float:
    vals = sorted(vals)
    r = (len(vals) - 1) * p / 100
    lo = math.floor(r)
    hi = min(lo + 1, len(vals) - 1)
    return vals[lo] + (vals[hi] - vals[lo]) * (r - lo)


def test_percentiles_and_top_rows(indexed):
    db, client, rows = indexed
    resp = search(client, aggs=[
        Percentiles("w", [0, 25, 50, 99.5, 100], name="pw"),
        Percentiles("price", [50], name="pp"),
        TopRows(3, Sort([FieldSort("price", SortOrder.DESC)]), name="top"),
        TopRows(2, Sort([FieldSort("tags", SortOrder.ASC, sort_mode=SortMode.MAX)]), name="top_arr"),
    ])
    got = {a.name: a.value for a in resp.agg_results}
    ws = [r["w"] for r in rows.values()]
    assert [(p.key, p.value) for p in got["pw"]] == [
        (float(p), exact_percentile(ws, p)) for p in (0, 25, 50, 99.5, 100)]
    prices = [r["price"] for r in rows.values() if "price" in r]
    assert [(p.key, p.value) for p in got["pp"]] == [(50.0, exact_percentile(prices, 50))]
    want = sorted((k for k in rows if "price" in rows[k]), key=lambda k: (-rows[k]["price"], k))[:3]
    assert [r[0][0][1] for r in got["top"]] == want
    assert {c[0]: c[1] for c in got["top"][0][1]}["price"] == rows[want[0]]["price"]
    tmax = {k: max(i % 5, i % 7) for k, i in ((k, k) for k in rows)}
    assert [r[0][0][1] for r in got["top_arr"]] == sorted(rows, key=lambda k: (tmax[k], k))[:2]


def test_histograms(indexed):
    db, client, rows = indexed
    resp = search(client, group_bys=[
        GroupByHistogram("price", 10, FieldRange(0, 40), name="h",
                         sub_aggs=[Sum("w", name="sw")]),
        # the SDK's GroupByHistogram cannot send a group_by_sort (it calls a _get_enum it lacks);
        # its GroupByDateHistogram can, below
        GroupByHistogram("w", 2.5, FieldRange(0.0, 100.0), min_doc_count=1, name="hw"),
        GroupByHistogram("price", 20, FieldRange(-100, 100), missing_value=-5, name="hm"),
        GroupByDateHistogram("day", DateTimeValue(1, DateTimeUnit.MONTH), name="month"),
        GroupByDateHistogram("day", DateTimeValue(10, DateTimeUnit.DAY), time_zone="+00:00", name="d10",
                             group_by_sort=[RowCountSort(SortOrder.DESC), GroupKeySort(SortOrder.DESC)]),
    ])
    g = {x.name: x.items for x in resp.group_by_results}
    h: dict = {}
    for r in rows.values():
        if "price" in r and 0 <= r["price"] < 40:
            h.setdefault(r["price"] // 10 * 10, []).append(r)
    assert [(i.key, i.value, i.sub_aggs[0].value) for i in g["h"]] == [
        (k, len(m), sum(r["w"] for r in m)) for k, m in sorted(h.items())]
    hw: dict = {}
    for r in rows.values():
        b = math.floor(r["w"] / 2.5) * 2.5
        hw[b] = hw.get(b, 0) + 1
    assert [(i.key, i.value) for i in g["hw"]] == sorted(hw.items())
    hm: dict = {}
    for r in rows.values():
        b = r.get("price", -5) // 20 * 20
        hm[b] = hm.get(b, 0) + 1
    assert [(i.key, i.value) for i in g["hm"]] == sorted(hm.items())
    months: dict = {}
    for r in rows.values():
        y, m = time.gmtime(r["day"] / 1000)[:2]
        k = calendar.timegm((y, m, 1, 0, 0, 0)) * 1000
        months[k] = months.get(k, 0) + 1
    assert [(i.timestamp, i.row_count) for i in g["month"]] == sorted(months.items())
    d10: dict = {}
    for r in rows.values():
        k = r["day"] // (10 * DAY) * (10 * DAY)
        d10[k] = d10.get(k, 0) + 1
    assert [(i.timestamp, i.row_count) for i in g["d10"]] == sorted(d10.items(),
                                                                    key=lambda kv: (-kv[1], -kv[0]))
    with pytest.raises(OTSServiceError) as ei:
        search(client, group_bys=[GroupByDateHistogram("day", DateTimeValue(1, DateTimeUnit.DAY),
                                                       time_zone="+08:00", name="tz")])
    assert ei.value.get_error_code() == "OTSNotSupported"


def test_geo_distance_and_composite(indexed):
    db, client, rows = indexed
    resp = search(client, group_bys=[
        GroupByGeoDistance("loc", GeoPoint(30.0, 120.0), [(0, 5000), (5000, 10000), (10000, float("inf"))],
                           sub_aggs=[Sum("price", name="sp")], name="geo"),
    ])
    items = resp.group_by_results[0].items
    dist = {k: geo.haversine(30.0, 120.0, *map(float, r["loc"].split(","))) for k, r in rows.items()}
    for it, (lo, hi) in zip(items, [(0, 5000), (5000, 10000), (10000, math.inf)]):
        members = [k for k in rows if lo <= dist[k] < hi]
        assert (it.range_from, it.range_to, it.row_count) == (lo, hi, len(members))
        assert it.sub_aggs[0].value == sum(rows[k].get("price", 0) for k in members)
    want = sorted({(r["city"], r["kind"]) for r in rows.values()})
    got, token = [], None
    while True:
        resp = search(client, group_bys=[GroupByComposite(
            [GroupByField("city", name="c"), GroupByField("kind", name="k")], size=2, next_token=token,
            sub_aggs=[Sum("w", name="sw")], name="comp")])
        res = resp.group_by_results[0]
        assert res.source_group_by_names == ["c", "k"]  # the sources' names
        for it in res.items:
            members = [r for r in rows.values() if (r["city"], r["kind"]) == tuple(it.keys)]
            assert it.row_count == len(members) and it.sub_aggs[0].value == sum(r["w"] for r in members)
            got.append(tuple(it.keys))
        token = res.next_token
        if not token:
            break
    assert got == want


def test_geo_grid_and_composite_of_histograms_through_the_sdk(indexed):
    """GroupByGeoGrid (cells, their boxes, sub-aggregations) and a GroupByComposite whose
    sources are a histogram and a date histogram, with a sub group-by, paged by token."""
    from tablestore.group_by import GroupByGeoGrid
    from tablestore.metadata import GeoHashPrecision

    db, client, rows = indexed
    resp = search(client, group_bys=[GroupByGeoGrid(
        "loc", GeoHashPrecision.GHP_1200M_609M_6, size=5, sub_aggs=[Sum("price", name="sp")],
        name="grid")])
    cells: dict = {}
    for k, r in rows.items():
        cells.setdefault(geo.encode(*map(float, r["loc"].split(",")), 6), []).append(k)
    items = resp.group_by_results[0].items
    assert [it.key for it in items] == sorted(cells, key=lambda c: (-len(cells[c]), c))[:5]
    for it in items:
        lat_min, lat_max, lon_min, lon_max = geo.bounds(it.key)
        assert (it.geo_grid.top_left.lat, it.geo_grid.top_left.lon) == (lat_max, lon_min)
        assert (it.geo_grid.bottom_right.lat, it.geo_grid.bottom_right.lon) == (lat_min, lon_max)
        assert it.row_count == len(cells[it.key])
        assert it.sub_aggs[0].value == sum(rows[k].get("price", 0) for k in cells[it.key])
    want: dict = {}
    for r in rows.values():
        key = (None if "price" not in r else str(r["price"] // 20 * 20),
               str((r["day"] // (10 * DAY)) * 10 * DAY))
        want.setdefault(key, []).append(r)
    got, token = [], None
    while True:
        resp = search(client, group_bys=[GroupByComposite(
            [GroupByHistogram("price", 20, FieldRange(0, 100), name="p"),
             GroupByDateHistogram("day", DateTimeValue(10, DateTimeUnit.DAY), name="d")],
            size=3, next_token=token, sub_group_bys=[GroupByField("kind", name="kind")],
            name="comp")])
        res = resp.group_by_results[0]
        assert res.source_group_by_names == ["p", "d"]
        for it in res.items:
            members = want[tuple(it.keys)]
            assert it.row_count == len(members)
            kinds = {i.key: i.row_count for i in it.sub_group_bys[0].items}
            assert kinds == {k: sum(m["kind"] == k for m in members) for k in {m["kind"] for m in members}}
            got.append(tuple(it.keys))
        token = res.next_token
        if not token:
            break
    assert set(got) == set(want) and len(got) == len(want)
    assert got == sorted(got, key=lambda k: tuple((0, 0) if v is None else (1, int(v)) for v in k))


def test_sort_modes_and_range_with_sort_through_the_sdk(indexed):
    """FieldSort's sort modes on an array field travel (the SDK's FieldSort has no missing
    options: Tablestore's message has none)."""
    db, client, rows = indexed
    for mode, fn in ((SortMode.MIN, min), (SortMode.MAX, max), (SortMode.AVG, lambda v: sum(v) / len(v))):
        resp = client.search("sale", "ix", SearchQuery(
            RangeQuery("price", 0, 100), sort=Sort([FieldSort("tags", SortOrder.DESC, sort_mode=mode)]),
            limit=10), ColumnsToGet(return_type=ColumnReturnType.NONE))
        key = {k: fn([k % 5, k % 7]) for k in rows if "price" in rows[k]}
        assert [r[0][0][1] for r in resp.rows] == sorted(key, key=lambda k: (-key[k], k))[:10]


def test_widetable_connect_sends_them_too(indexed, in_process):
    """widetable.connect encodes the same aggregations and group-bys and decodes their results
    into the library's values: equal to the embedded store's (composite keys come back as the
    protocol's text)."""
    import widetable
    from widetable.search import (
        DESC, FieldSort as FS, GroupByComposite as WComp, GroupByDateHistogram as WDH,
        GroupByGeoDistance as WGeo, GroupByGeoGrid as WGrid, GroupByHistogram as WH, MatchAllQuery as WAll, PercentilesAgg,
        SumAgg, TopRowsAgg,
    )

    from . import serving
    db, server = in_process
    remote = widetable.connect(f"http://127.0.0.1:{server.port}", access_key_id=serving.ACCESS_KEY_ID,
                               access_key_secret=serving.ACCESS_KEY_SECRET)
    try:
        aggs = [PercentilesAgg("p", "w", (10.0, 90.0)), TopRowsAgg("top", 2, [FS("price", DESC)])]
        gbs = [WH("h", "price", 10, 0, 1, (SumAgg("s", "w"),), (), (0, 40), -1),
               WDH("m", "day", "month"), WDH("d", "day", 5 * DAY),
               WGeo("g", "loc", "30,120", ((None, 5000), (5000, None))),
               WComp("c", ("city", "kind"), 4),
               WGrid("grid", "loc", 5, 3, (SumAgg("gs", "w"),)),
               WComp("ch", (WH("hp", "price", 25), WDH("hd", "day", 20 * DAY)), 50)]
        local = db.search("sale", "ix", WAll(), limit=0, aggs=aggs, group_bys=gbs)
        got = remote.search("sale", "ix", WAll(), limit=0, aggs=aggs, group_bys=gbs)
        assert got.aggs["p"] == local.aggs["p"]
        assert [r.primary_key for r in got.aggs["top"]] == [r.primary_key for r in local.aggs["top"]]
        for name in ("h", "m", "d", "g", "grid"):
            assert [(x.key, x.row_count, x.aggs) for x in got.group_bys[name]] == \
                [(x.key, x.row_count, x.aggs) for x in local.group_bys[name]], name
        hist, local_hist = got.group_bys["ch"][0], local.group_bys["ch"][0]
        assert [(x.key, x.row_count) for x in hist] == [  # keys travel as text
            (tuple(None if k is None else str(k) for k in x.key), x.row_count) for x in local_hist]
        page, token = got.group_bys["c"]
        lpage, ltoken = local.group_bys["c"]
        assert [(x.key, x.row_count) for x in page] == [(x.key, x.row_count) for x in lpage]
        assert token == ltoken and token is not None
        more = [WComp("c", ("city", "kind"), 4, token)]
        nxt = remote.search("sale", "ix", WAll(), limit=0, group_bys=more)
        assert [x.key for x in nxt.group_bys["c"][0]] == \
            [x.key for x in db.search("sale", "ix", WAll(), limit=0, group_bys=more).group_bys["c"][0]]
    finally:
        remote.close()
