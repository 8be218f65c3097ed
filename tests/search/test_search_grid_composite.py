"""GroupByGeoGrid and GroupByComposite with histogram sources and sub group-bys, embedded:
every figure checked against one computed here from the rows, and each bad request an
OTSParameterInvalid naming what is wrong."""

from __future__ import annotations

import math

import pytest

import widetable
from widetable.errors import WidetableError
from widetable.search import (
    GroupByComposite, GroupByDateHistogram, GroupByField, GroupByGeoGrid, GroupByHistogram,
    MatchAllQuery, RangeQuery, SumAgg, geo,
)

DAY = 86_400_000
ROWS = 90


def row(i: int) -> dict:
    r = {"city": ["hz", "bj", "sh"][i % 3], "price": i * 7 % 50, "day": i * DAY // 3,
         "loc": f"{30 + (i % 9) * 0.3:.4f},{120 + (i % 4) * 0.4:.4f}"}
    if i % 10 == 9:
        del r["price"]
    if i % 15 == 14:
        del r["loc"]
    return r


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    d = widetable.open(str(tmp_path_factory.mktemp("grid") / "s"), purge_interval=None)
    t = d.create_table("t", [("id", "INTEGER")])
    for i in range(ROWS):
        t.put_row((i,), row(i))
    d.create_search_index("t", "ix", [
        {"name": "city", "type": "KEYWORD", "enable_sort_and_agg": True},
        {"name": "price", "type": "LONG", "enable_sort_and_agg": True},
        {"name": "day", "type": "DATE", "enable_sort_and_agg": True},
        {"name": "loc", "type": "GEO_POINT", "enable_sort_and_agg": True},
        {"name": "plain", "type": "KEYWORD", "enable_sort_and_agg": False}])
    assert d.wait_for_search_indexes("t", "ix")
    yield d
    d.close()


def _point(r: dict) -> tuple[float, float]:
    lat, lon = r["loc"].split(",")
    return float(lat), float(lon)


@pytest.mark.parametrize("precision", [1, 4, 5, 9])
def test_geo_grid_counts_rows_per_cell_most_first(db, precision) -> None:
    rows = {i: row(i) for i in range(ROWS)}
    cells: dict = {}
    for i, r in rows.items():
        if "loc" in r:
            cells.setdefault(geo.encode(*_point(r), precision), []).append(i)
    want = sorted(cells, key=lambda c: (-len(cells[c]), c))[:7]
    res = db.search("t", "ix", MatchAllQuery(), limit=0, group_bys=[
        GroupByGeoGrid("g", "loc", precision, size=7, sub_aggs=(SumAgg("s", "price"),),
                       sub_group_bys=(GroupByField("c", "city"),))])
    got = res.group_bys["g"]
    assert [g.key for g in got] == want
    for g in got:
        members = cells[g.key]
        assert g.row_count == len(members)
        assert g.aggs["s"] == sum(rows[i].get("price", 0) for i in members)
        by_city = {c.key: c.row_count for c in g.group_bys["c"]}
        assert by_city == {c: sum(rows[i]["city"] == c for i in members)
                           for c in {rows[i]["city"] for i in members}}
        lat_min, lat_max, lon_min, lon_max = geo.bounds(g.key)
        assert all(lat_min <= _point(rows[i])[0] <= lat_max and lon_min <= _point(rows[i])[1] <= lon_max
                   for i in members)


def _composite_pages(db, gb_of, query=None) -> list:
    out, token = [], None
    while True:
        res = db.search("t", "ix", query or MatchAllQuery(), limit=0, group_bys=[gb_of(token)])
        page, token = res.group_bys["comp"]
        out += page
        if token is None:
            return out


def test_composite_of_field_histogram_and_date_histogram_pages_every_combination(db) -> None:
    rows = {i: row(i) for i in range(ROWS)}

    def keys(r: dict) -> tuple:
        price = r.get("price", -5)  # the histogram's missing value stands in
        return (r["city"], math.floor(price / 10) * 10 if 0 <= price + 5 < 45 else None,
                r["day"] // (7 * DAY) * (7 * DAY))

    want: dict = {}
    for i, r in rows.items():
        want.setdefault(keys(r), []).append(i)
    order = sorted(want, key=lambda k: tuple((0, "") if v is None else (1, v) for v in k))
    sources = (GroupByField("c", "city"),
               GroupByHistogram("p", "price", 10, field_range=(-5, 40), missing=-5),
               GroupByDateHistogram("w", "day", 7 * DAY))
    got = _composite_pages(db, lambda token: GroupByComposite(
        "comp", sources, size=4, next_token=token, sub_aggs=(SumAgg("s", "price"),),
        sub_group_bys=(GroupByField("sub", "city"),)))
    assert [g.key for g in got] == order
    for g in got:
        members = want[g.key]
        assert g.row_count == len(members)
        assert g.aggs["s"] == (sum(rows[i]["price"] for i in members if "price" in rows[i])
                               if any("price" in rows[i] for i in members) else None)
        assert [(s.key, s.row_count) for s in g.group_bys["sub"]] == [(g.key[0], len(members))]


def test_composite_of_names_still_groups_by_fields(db) -> None:
    rows = [row(i) for i in range(ROWS) if row(i).get("price", 0) >= 20]
    got = _composite_pages(db, lambda token: GroupByComposite("comp", ("city",), 2, token),
                           RangeQuery("price", 20, None, True))
    assert [(g.key, g.row_count) for g in got] == sorted(
        {((c,), sum(r["city"] == c for r in rows)) for c in {r["city"] for r in rows}})


@pytest.mark.parametrize("gb, message", [
    (GroupByGeoGrid("g", "city", 5), "field 'city' is not a GEO_POINT"),
    (GroupByGeoGrid("g", "loc", 13), "precision must be in [1, 12], got 13"),
    (GroupByGeoGrid("g", "loc", 5, size=0), "size must be in [1, 2000], got 0"),
    (GroupByComposite("comp", ()), "needs at least one source"),
    (GroupByComposite("comp", (GroupByField("a", "city"), GroupByField("a", "price"))),
     "duplicate source names ['a', 'a']"),
    (GroupByComposite("comp", (GroupByGeoGrid("g", "loc", 3),)), "a source is a field name"),
    (GroupByComposite("comp", ("loc",)), "cannot group GEO_POINT field 'loc'"),
    (GroupByComposite("comp", (GroupByHistogram("p", "price", 0),)), "interval must be positive"),
    (GroupByComposite("comp", ("plain",)), "enable_sort_and_agg is off"),
])
def test_bad_grids_and_composites_are_refused_naming_the_value(db, gb, message) -> None:
    with pytest.raises(WidetableError) as info:
        db.search("t", "ix", MatchAllQuery(), limit=0, group_bys=[gb])
    assert info.value.code == "OTSParameterInvalid"
    assert message in info.value.message
