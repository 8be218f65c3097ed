"""Every geo plan a shard may pick (coarse cells and many candidates, or fine cells and
few) answers exactly: the same rows as a brute-force test of every point."""

from __future__ import annotations

import math
import random

import pytest

import widetable
from widetable.search import BoolQuery, GeoBoundingBoxQuery, GeoDistanceQuery, GeoPolygonQuery, TermQuery
from widetable.search import compile as compile_
from widetable.search.schema import LAYOUT

from .layouts import as_layout

R = 6371008.8


def haversine(a: float, b: float, c: float, d: float) -> float:
    p1, p2 = math.radians(a), math.radians(c)
    h = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(d - b) / 2) ** 2
    return 2 * R * math.asin(min(1.0, math.sqrt(h)))


@pytest.fixture(scope="module", params=[LAYOUT, 2], ids=lambda n: f"layout{n}")
def store(request, tmp_path_factory):
    """1,500 points in an index of the current layout (points tested from fast values) and
    of layout 2 (from the stored sources)."""
    path = str(tmp_path_factory.mktemp("geo") / "s")
    db = widetable.open(path, purge_interval=None)
    t = db.create_table("t", [("id", "INTEGER")])
    rnd = random.Random(11)
    points = {}
    for i in range(1500):
        lat, lon = 30.5 + rnd.uniform(-0.06, 0.06), 120.5 + rnd.uniform(-0.06, 0.06)
        points[i] = (lat, lon)
        t.put_row((i,), {"loc": f"{lat},{lon}", "k": "ab"[i % 2]})
    db.create_search_index("t", "ix", [("loc", "GEO_POINT"), ("k", "KEYWORD")])
    assert db.wait_for_search_indexes("t", "ix")
    if request.param != LAYOUT:
        db.close()
        db = as_layout(path, "t", "ix", request.param)
    yield db, points
    db.close()


QUERIES = [
    (GeoDistanceQuery("loc", "30.5,120.5", d), lambda la, lo, d=d: haversine(30.5, 120.5, la, lo) <= d)
    for d in (40, 300, 1000, 2500, 6000)
] + [
    (GeoBoundingBoxQuery("loc", "30.52,120.47", "30.49,120.53"),
     lambda la, lo: 30.49 <= la <= 30.52 and 120.47 <= lo <= 120.53),
    (GeoPolygonQuery("loc", ["30.46,120.46", "30.54,120.47", "30.50,120.55"]), None),
]


@pytest.mark.parametrize("cost", [0.0, 4.0, 1e9])  # the coarsest plan, the default, the finest
@pytest.mark.parametrize("case", range(len(QUERIES)))
def test_every_plan_is_exact(store, monkeypatch, cost, case):
    db, points = store
    monkeypatch.setattr(compile_, "CANDIDATE_COST", cost)
    monkeypatch.setattr(compile_, "FAST_CANDIDATE_COST", cost)
    q, test = QUERIES[case]
    if test is None:  # the polygon: the engine's own point-in-polygon test is the reference
        from widetable.search import geo
        poly = [tuple(map(float, p.split(","))) for p in q.points]
        test = lambda la, lo: geo.in_polygon(la, lo, poly)  # noqa: E731
    want = sorted(i for i, (la, lo) in points.items() if test(la, lo))
    res = db.search("t", "ix", q, limit=100, get_total_count=True)
    assert res.total_count == len(want)
    assert [r.primary_key[0] for r in res.rows] == want[:100]
    both = db.search("t", "ix", BoolQuery(must_queries=[q], must_not_queries=[TermQuery("k", "a")]),
                     limit=100, get_total_count=True)
    odd = [i for i in want if i % 2]
    assert both.total_count == len(odd) and [r.primary_key[0] for r in both.rows] == odd[:100]
