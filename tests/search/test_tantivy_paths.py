"""Sorts and aggregations computed by tantivy (layouts 2 and 3) against brute force.

The rows are chosen for the cases the level-by-level search must get right:
many ties on the sort value across page boundaries, several shards and
segments, documents without the sort field (first, last, a stand-in value),
-0.0 and 0.0, keyword and boolean sorts, descending keys, and primary keys
longer than the 64 bytes the integer levels hold that agree on all of them.
Every page is followed by its token to the end. Aggregations are compared with
sums, counts and groups computed here, and a LONG sum past 2**53 must stay
exact (tantivy sums in doubles: that one is computed in Python).
"""

from __future__ import annotations

import functools
import json
import random

import pytest

import widetable
from widetable.keys import layout as keys

from .layouts import as_layout
from widetable.search import ordered
from widetable.search.schema import LAYOUT
from widetable.search import (
    ASC, DESC, AvgAgg, CountAgg, DistinctCountAgg, FieldSort, GroupByDateHistogram, GroupByField,
    GroupByFilter, GroupByHistogram, GroupByRange, MatchAllQuery, MaxAgg, MinAgg, PrimaryKeySort,
    RangeQuery, RowCountSort, SubAggSort, SumAgg, TermQuery, TopRowsAgg,
)

FIELDS = [("n", "LONG"), ("x", "DOUBLE"), ("k", "KEYWORD"), ("b", "BOOLEAN"), ("d", "DATE")]
LONG_PREFIX = "p" * 70  # keys longer than the integer levels, equal on all of them


def make_rows(seed: int) -> dict:
    rnd = random.Random(seed)
    rows = {}
    for i in range(160):
        pk = f"{LONG_PREFIX}{i:03d}" if i % 5 == 0 else f"r{rnd.randrange(10**6):06d}"
        r = {}
        if rnd.random() < 0.85:
            r["n"] = rnd.randrange(-3, 4)  # few values: ties everywhere
        if rnd.random() < 0.85:
            r["x"] = rnd.choice([-0.0, 0.0, 1.5, -2.25, 3.0])
        if rnd.random() < 0.85:
            r["k"] = rnd.choice(["a", "b", "杭州", "a b", ""])
        if rnd.random() < 0.85:
            r["b"] = rnd.random() < 0.5
        if rnd.random() < 0.85:
            r["d"] = 1_700_000_000_000 + rnd.randrange(5) * 86_400_000
        rows[pk] = r or {"other": 1}
    return rows


@pytest.fixture(scope="module", params=[LAYOUT, 2], ids=lambda n: f"layout{n}")
def store(request, tmp_path_factory):
    """The rows in an index of the current layout and in one of layout 2 (an index an older
    release made: still served as it is)."""
    path = str(tmp_path_factory.mktemp("tpaths"))
    db = widetable.open(path, purge_interval=None)
    t = db.create_table("t", [("id", "STRING")])
    rows = make_rows(1)
    items = list(rows.items())
    for pk, r in items[:100]:
        t.put_row((pk,), r)
    db.create_search_index("t", "ix", FIELDS, shards=3)
    assert db.wait_for_search_indexes("t", "ix", timeout=60)
    if request.param != LAYOUT:
        db.close()
        db = as_layout(path, "t", "ix", request.param)
        t = db.table("t")
    for j, (pk, r) in enumerate(items[100:]):  # later writes: more segments
        t.put_row((pk,), r)
        if j % 15 == 0:
            assert db.wait_for_search_indexes("t", "ix", timeout=60)
    assert db.wait_for_search_indexes("t", "ix", timeout=60)
    yield db, rows
    db.close()


def expected(rows: dict, keys_: list, sort: FieldSort | None, pk_desc: bool = False) -> list:
    def cmp(a, b):
        if sort is not None:
            va, vb = rows[a].get(sort.field_name), rows[b].get(sort.field_name)
            if va is None and sort.missing_value is not None:
                va = sort.missing_value
            if vb is None and sort.missing_value is not None:
                vb = sort.missing_value
            if (va is None) != (vb is None):
                first = sort.missing == "first"
                return (-1 if va is None else 1) if first else (1 if va is None else -1)
            if va is not None and va != vb:
                r = -1 if va < vb else 1
                return -r if sort.sort_order == DESC else r
        r = (a > b) - (a < b)
        return -r if pk_desc else r
    return sorted(keys_, key=functools.cmp_to_key(cmp))


def all_pages(db, q, sort, page: int) -> tuple[list, int]:
    got, token = [], None
    while True:
        res = db.search("t", "ix", q, sort=sort, limit=page, next_token=token, get_total_count=True)
        got += [r.primary_key[0] for r in res.rows]
        token = res.next_token
        if token is None:
            return got, res.total_count
        assert len(got) <= 400


SORTS = [
    FieldSort("n", ASC), FieldSort("n", DESC), FieldSort("n", ASC, missing="first"),
    FieldSort("n", DESC, missing="first"), FieldSort("x", ASC), FieldSort("x", DESC, missing="first"),
    FieldSort("k", ASC), FieldSort("k", DESC), FieldSort("b", ASC), FieldSort("b", DESC, missing="first"),
    FieldSort("d", DESC), FieldSort("n", ASC, missing_value=0), FieldSort("n", DESC, missing_value=2),
    FieldSort("k", ASC, missing_value="b"),
]


@pytest.fixture(params=[(ordered.SLACK, ordered.GROUP_LIMIT, ordered.HIT_PER_COLUMN_ROWS),
                        (0, ordered.GROUP_LIMIT, 0), (0, 1, 0)],
                ids=["slack", "no-slack", "no-slack-no-group"])
def slack(request, monkeypatch):
    """With the default slack most ties end among the hits asked for; with none every tie
    at a boundary goes down the levels (and, for the long keys, past the last one): the
    tied group ordered from its fast values, or, with no room for a group, filtered level
    by level."""
    monkeypatch.setattr(ordered, "SLACK", request.param[0])
    monkeypatch.setattr(ordered, "GROUP_LIMIT", request.param[1])
    monkeypatch.setattr(ordered, "HIT_PER_COLUMN_ROWS", request.param[2])
    return request.param[0]


@pytest.mark.parametrize("sort", SORTS, ids=repr)
@pytest.mark.parametrize("page", [1, 4, 11])
def test_field_sorts_follow_tokens_to_the_end(store, sort, page, slack):
    db, rows = store
    for q, pred in ((MatchAllQuery(), lambda r: True),
                    (RangeQuery("d", 1_700_000_000_000, 1_700_000_000_000 + 2 * 86_400_000),
                     lambda r: "d" in r and r["d"] < 1_700_000_000_000 + 2 * 86_400_000)):
        want = expected(rows, [k for k, r in rows.items() if pred(r)], sort)
        got, total = all_pages(db, q, [sort], page)
        assert total == len(want)
        assert got == want


@pytest.mark.parametrize("desc", [False, True])
@pytest.mark.parametrize("page", [1, 7])
def test_primary_key_order_with_long_keys(store, desc, page, slack):
    db, rows = store
    sort = [PrimaryKeySort(DESC)] if desc else None
    want = expected(rows, list(rows), None, pk_desc=desc)
    got, total = all_pages(db, MatchAllQuery(), sort, page)
    assert total == len(want) and got == want
    q = TermQuery("k", "a")
    want = expected(rows, [k for k, r in rows.items() if r.get("k") == "a"], None, pk_desc=desc)
    assert all_pages(db, q, sort, page)[0] == want


def test_offsets_agree_with_tokens(store, slack):
    db, rows = store
    sort = [FieldSort("n", DESC)]
    want = expected(rows, list(rows), sort[0])
    for offset in (0, 3, 50, 150):
        res = db.search("t", "ix", MatchAllQuery(), sort=sort, offset=offset, limit=9)
        assert [r.primary_key[0] for r in res.rows] == want[offset:offset + 9]


def _vals(rows, name, missing=None):
    out = []
    for r in rows.values():
        if name in r:
            out.append(r[name])
        elif missing is not None:
            out.append(missing)
    return out


def test_metric_aggregations(store):
    db, rows = store
    res = db.search("t", "ix", MatchAllQuery(), limit=0, aggs=[
        SumAgg("sn", "n"), AvgAgg("ax", "x"), MinAgg("mn", "n"), MaxAgg("md", "d"),
        CountAgg("ck", "k"), DistinctCountAgg("dk", "k"), DistinctCountAgg("dn", "n", missing=99),
        SumAgg("snm", "n", missing=10), AvgAgg("anm", "n", missing=1),
    ])
    a = res.aggs
    assert a["sn"] == sum(_vals(rows, "n")) and type(a["sn"]) is int
    assert abs(a["ax"] - sum(_vals(rows, "x")) / len(_vals(rows, "x"))) < 1e-12
    assert a["mn"] == min(_vals(rows, "n")) and type(a["mn"]) is int
    assert a["md"] == max(_vals(rows, "d"))
    assert a["ck"] == len(_vals(rows, "k"))
    assert a["dk"] == len(set(_vals(rows, "k")))
    assert a["dn"] == len(set(_vals(rows, "n", 99)))
    assert a["snm"] == sum(_vals(rows, "n", 10))
    assert abs(a["anm"] - sum(_vals(rows, "n", 1)) / len(rows)) < 1e-12


def test_group_bys(store):
    db, rows = store
    res = db.search("t", "ix", MatchAllQuery(), limit=0, group_bys=[
        GroupByField("byk", "k", size=3, sub_aggs=(SumAgg("s", "n"), CountAgg("c", "x"))),
        GroupByField("bys", "n", size=10, group_by_sort=(SubAggSort("s", "DESC"),),
                     sub_aggs=(SumAgg("s", "d"),)),
        GroupByField("nested", "k", size=10, sub_group_bys=(GroupByField("inner", "n", size=10),)),
        GroupByRange("r", "n", ((None, 0), (-1, 2), (2, None))),
        GroupByHistogram("h", "x", 1.5),
        GroupByDateHistogram("dh", "d", 2 * 86_400_000),
        GroupByFilter("f", (TermQuery("b", True), RangeQuery("n", 1, None)),
                      sub_aggs=(MaxAgg("m", "x"),)),
    ])
    g = res.group_bys
    by_k: dict = {}
    for r in rows.values():
        if "k" in r:
            by_k.setdefault(r["k"], []).append(r)
    top = sorted(by_k.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:3]
    assert [(x.key, x.row_count, x.aggs["s"], x.aggs["c"]) for x in g["byk"]] == [
        (k, len(m), sum(r["n"] for r in m if "n" in r) if any("n" in r for r in m) else None,
         sum(1 for r in m if "x" in r)) for k, m in top]
    by_n: dict = {}
    for r in rows.values():
        if "n" in r:
            by_n.setdefault(r["n"], []).append(r)
    sums = {k: (sum(r["d"] for r in m if "d" in r) if any("d" in r for r in m) else None)
            for k, m in by_n.items()}
    order = sorted((k for k in by_n if sums[k] is not None), key=lambda k: (-sums[k], k))
    order += sorted(k for k in by_n if sums[k] is None)
    assert [x.key for x in g["bys"]] == order
    for x in g["nested"]:
        inner: dict = {}
        for r in by_k[x.key]:
            if "n" in r:
                inner[r["n"]] = inner.get(r["n"], 0) + 1
        assert [(y.key, y.row_count) for y in x.group_bys["inner"]] == sorted(
            inner.items(), key=lambda kv: (-kv[1], kv[0]))
    ranges = ((None, 0), (-1, 2), (2, None))
    assert [x.row_count for x in g["r"]] == [
        sum(1 for r in rows.values() if "n" in r and (lo is None or r["n"] >= lo) and
            (hi is None or r["n"] < hi)) for lo, hi in ranges]
    hist: dict = {}
    for r in rows.values():
        if "x" in r:
            b = (r["x"] // 1.5) * 1.5
            hist[b] = hist.get(b, 0) + 1
    assert [(x.key, x.row_count) for x in g["h"]] == sorted(hist.items())
    dh: dict = {}
    for r in rows.values():
        if "d" in r:
            b = r["d"] // (2 * 86_400_000) * (2 * 86_400_000)
            dh[b] = dh.get(b, 0) + 1
    assert [(x.key, x.row_count) for x in g["dh"]] == sorted(dh.items())
    f1 = [r for r in rows.values() if r.get("b") is True]
    f2 = [r for r in rows.values() if r.get("n", -9) >= 1]
    assert [(x.row_count, x.aggs["m"]) for x in g["f"]] == [
        (len(m), max((r["x"] for r in m if "x" in r), default=None)) for m in (f1, f2)]


def test_top_rows_and_inexact_sums(tmp_path):
    db = widetable.open(str(tmp_path / "s"), purge_interval=None)
    t = db.create_table("t", [("id", "INTEGER")])
    big = 2**62
    for i in range(6):
        t.put_row((i,), {"n": big + i, "k": f"k{i % 2}"})
    db.create_search_index("t", "ix", [("n", "LONG"), ("k", "KEYWORD")], shards=2)
    assert db.wait_for_search_indexes("t", "ix", timeout=60)
    res = db.search("t", "ix", MatchAllQuery(), limit=0, aggs=[
        SumAgg("s", "n"), MaxAgg("m", "n"), TopRowsAgg("top", 2, [FieldSort("n", DESC)])],
        group_bys=[GroupByField("g", "k", sub_aggs=(SumAgg("s", "n"),), group_by_sort=(RowCountSort("DESC"),))])
    assert res.aggs["s"] == sum(big + i for i in range(6))  # past 2**53: computed exactly
    assert res.aggs["m"] == big + 5
    assert [r.primary_key for r in res.aggs["top"]] == [(5,), (4,)]
    assert res.aggs["top"][0].columns["n"] == big + 5
    assert [(x.key, x.aggs["s"]) for x in res.group_bys["g"]] == [
        ("k0", sum(big + i for i in (0, 2, 4))), ("k1", sum(big + i for i in (1, 3, 5)))]
    db.close()


def test_an_index_of_layout_1_still_searches(tmp_path):
    """A definition catalogued before layout 2 (no "layout" entry) keeps its old documents
    (``_pk`` text order, keywords not fast): searches, sorts and aggregations still work,
    through the Python paths."""
    path = str(tmp_path / "s")
    db = widetable.open(path, purge_interval=None)
    t = db.create_table("t", [("id", "STRING")])
    rows = make_rows(2)
    for pk, r in rows.items():
        t.put_row((pk,), r)
    db.close()
    db = widetable.open(path, purge_interval=None)
    db.create_search_index("t", "ix", FIELDS, shards=2)
    assert db.wait_for_search_indexes("t", "ix", timeout=60)
    table_id = db.table("t").schema.table_id
    db.close()
    # What an older store holds: the same definition without the entry, and its shards
    # written in layout 1 (removed here; the index backfills again on open).
    import shutil

    from widetable.search.schema import IndexMeta
    from widetable.storage import open_engine
    eng = open_engine(path)
    k = keys.search_index_key(table_id, "ix")
    d = json.loads(eng.get(k))
    d.pop("layout")
    eng.put(k, json.dumps(d).encode())
    eng.close()
    shutil.rmtree(f"{path}/search/{IndexMeta.from_dict(d).index_id}")
    db = widetable.open(path, purge_interval=None)
    assert db.wait_for_search_indexes("t", "ix", timeout=60)
    assert db.describe_search_index("t", "ix").meta.layout == 1
    sort = FieldSort("n", DESC, missing="first")
    want = expected(rows, list(rows), sort)
    got, total = all_pages(db, MatchAllQuery(), [sort], 13)
    assert got == want and total == len(rows)
    assert all_pages(db, MatchAllQuery(), None, 13)[0] == sorted(rows)
    res = db.search("t", "ix", MatchAllQuery(), limit=0, aggs=[SumAgg("s", "n")],
                    group_bys=[GroupByField("g", "k")])
    assert res.aggs["s"] == sum(_vals(rows, "n"))
    db.close()


@pytest.mark.parametrize("mode,order", [
    ("max", ["A", "C", "B"]), ("min", ["C", "A", "B"]), ("avg", ["C", "A", "B"]),
    ("total", ["A", "C", "B"]), ("none", ["A", "B", "C"]),
])
def test_nested_score_modes(tmp_path, mode, order):
    """A NestedQuery scores a row by its matching objects' scores, combined by the score mode.
    An object whose text is only "x" scores more for x than one with "x z z z" (BM25's length
    norm): A has one of each, B the long one, C the short one."""
    from widetable.search import FieldSchema, MatchQuery, NestedQuery, ScoreSort

    db = widetable.open(str(tmp_path / "s"), purge_interval=None)
    t = db.create_table("t", [("id", "STRING")])
    objs = {"A": ["x", "x z z z"], "B": ["x z z z"], "C": ["x"], "D": ["z"]}
    for k, texts in objs.items():
        t.put_row((k,), {"items": json.dumps([{"txt": x} for x in texts])})
    db.create_search_index("t", "ix", [FieldSchema("items", "NESTED", sub_fields=(
        FieldSchema("txt", "TEXT"),))], shards=1)
    assert db.wait_for_search_indexes("t", "ix", timeout=60)
    q = NestedQuery("items", MatchQuery("items.txt", "x"), score_mode=mode)
    res = db.search("t", "ix", q, sort=[ScoreSort()], limit=10)
    assert [r.primary_key[0] for r in res.rows] == order
    scores = {h.row.primary_key[0]: h.score for h in res.search_hits}
    if mode == "none":
        assert set(scores.values()) == {0.0}
    else:
        hi, lo = scores["C"], scores["B"]
        assert hi > lo > 0
        assert scores["A"] == pytest.approx({"max": hi, "min": lo, "avg": (hi + lo) / 2,
                                             "total": hi + lo}[mode])
    db.close()


def test_tantivy_plans_what_it_can(store):
    """The aggregations and group-bys tantivy answers exactly are planned for it (a planner
    that gives up answers right, through Python, but linear in the matches)."""
    from widetable.search import GroupByComposite, PercentilesAgg
    from widetable.search.aggs import Aggregator
    from widetable.search.execute import Searcher
    from widetable.search.tantivy_aggs import TantivyAggs

    db, _ = store
    st = db._search.states[("t", "ix")]
    ta = TantivyAggs(Searcher(st), MatchAllQuery(), [0], Aggregator(st.meta, None, None))
    for g in (GroupByField("f", "k", sub_aggs=(SumAgg("s", "n"), AvgAgg("a", "x"), CountAgg("c", "d"),
                                            DistinctCountAgg("dc", "n"))),
              GroupByField("f2", "n", sub_group_bys=(GroupByRange("r", "x", ((None, 1.5),)),)),
              GroupByRange("r", "n", ((None, 0), (0, None))), GroupByHistogram("h", "x", 0.5),
              GroupByDateHistogram("dh", "d", 86_400_000),
              GroupByFilter("gf", (TermQuery("k", "a"),), sub_aggs=(MaxAgg("m", "n"),))):
        assert ta._plan_group(g) is not None, g
    for a in (SumAgg("s", "n"), MinAgg("m", "x"), MaxAgg("M", "d"), CountAgg("c", "k"),
              DistinctCountAgg("dc", "k"), TopRowsAgg("t", 2, [FieldSort("n", DESC)])):
        assert ta._plan_agg(a, True) is not None, a
    for g in (GroupByComposite("c", ("k",)), GroupByHistogram("h", "x", 0.5, field_range=(0, 1)),
              GroupByDateHistogram("m", "d", "month"), GroupByField("b", "b")):
        assert ta._plan_group(g) is None, g  # these stay in Python
    assert ta._plan_agg(PercentilesAgg("p", "n"), True) is None
