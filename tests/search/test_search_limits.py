"""Limits and errors of search indexes: each a WidetableError with its code, naming the value;
and behaviours the differential test does not reach (rejected rows, TTL, nested, routing,
parallel scan, schema rebuild, reopen)."""

from __future__ import annotations

import pytest

import widetable
from widetable.errors import WidetableError
from widetable.search import (
    RETURN_ALL_FROM_INDEX, FieldSchema, GroupByDateHistogram, MatchAllQuery, MatchQuery, NestedQuery,
    TermQuery, TermsQuery, WildcardQuery,
)


@pytest.fixture
def db(tmp_path):
    d = widetable.open(str(tmp_path / "s"), purge_interval=None)
    yield d
    d.close()


def _err(code, fn, *a, **k):
    with pytest.raises(WidetableError) as ei:
        fn(*a, **k)
    assert ei.value.code == code, ei.value
    return str(ei.value)


def test_definition_errors(db):
    db.create_table("t", [("id", "STRING")], defined_columns=[("n", "INTEGER")])
    assert "bogus" in _err("OTSParameterInvalid", db.create_search_index, "t", "i",
                           [{"name": "x", "type": "TEXT", "analyzer": "bogus"}])
    assert "'n'" in _err("OTSParameterInvalid", db.create_search_index, "t", "i", [("n", "KEYWORD")])
    assert "3600" in _err("OTSParameterInvalid", db.create_search_index, "t", "i", [("a", "KEYWORD")],
                          ttl=3600)
    assert "NOPE" in _err("OTSParameterInvalid", db.create_search_index, "t", "i", [("a", "NOPE")])
    db.create_search_index("t", "i", [("a", "KEYWORD"), ("n", "LONG")])
    assert "'i'" in _err("OTSObjectAlreadyExist", db.create_search_index, "t", "i", [("a", "KEYWORD")])
    _err("OTSObjectNotExist", db.describe_search_index, "t", "nope")
    assert db.list_search_index("t") == [("t", "i")]
    db.delete_search_index("t", "i")
    assert db.list_search_index() == []


def test_query_and_page_limits(db):
    t = db.create_table("t", [("id", "STRING")])
    t.put_row(("a",), {"k": "x"})
    db.create_search_index("t", "i", [("k", "KEYWORD", )])
    assert db.wait_for_search_indexes("t", "i")
    _err("OTSParameterInvalid", TermsQuery, "k", ["v"] * 1025)
    _err("OTSParameterInvalid", WildcardQuery, "k", "*" * 33)
    assert "101" in _err("OTSParameterInvalid", db.search, "t", "i", MatchAllQuery(), limit=101,
                         columns=["other"])
    db.search("t", "i", MatchAllQuery(), limit=1000, columns=RETURN_ALL_FROM_INDEX)
    _err("OTSParameterInvalid", db.search, "t", "i", MatchAllQuery(), limit=1001)
    assert "100001" in _err("OTSParameterInvalid", db.search, "t", "i", MatchAllQuery(), offset=99_901,
                            limit=100, columns=RETURN_ALL_FROM_INDEX)
    _err("OTSParameterInvalid", db.search, "t", "i", MatchAllQuery(), next_token=b"garbage")
    _err("OTSParameterInvalid", db.search, "t", "i", TermQuery("nofield", 1))
    res = db.search("t", "i", MatchAllQuery())
    assert res.total_count == -1  # not asked for


def test_rejected_rows_are_reported(db):
    t = db.create_table("t", [("id", "STRING")])
    t.put_row(("a",), {"n": "not a number"})
    t.put_row(("b",), {"n": 5})
    db.create_search_index("t", "i", [("n", "LONG")])
    assert db.wait_for_search_indexes("t", "i")
    d = db.describe_search_index("t", "i")
    assert d.rejected_rows == 1 and "not a number" in d.last_rejected
    assert d.row_count == 1 and d.sync_phase == "INCR" and d.lag_ms == 0


def test_nested_chinese_text_and_date_histogram(db):
    t = db.create_table("t", [("id", "INTEGER")])
    t.put_row((1,), {"items": '[{"sku": "a1", "qty": 3}, {"sku": "b2", "qty": 9}]',
                     "title": "我们在杭州西湖边上卖学生卡", "day": 1_704_067_200_000})  # 2024-01-01
    t.put_row((2,), {"items": '[{"sku": "a1", "qty": 9}]', "title": "北京烤鸭",
                     "day": 1_712_000_000_000})  # 2024-04-01
    db.create_search_index("t", "i", [
        FieldSchema("items", "NESTED", sub_fields=(FieldSchema("sku", "KEYWORD"), FieldSchema("qty", "LONG"))),
        FieldSchema("title", "TEXT", analyzer="max_word"), FieldSchema("day", "DATE")])
    assert db.wait_for_search_indexes("t", "i")
    from widetable.search import BoolQuery
    q = NestedQuery("items", BoolQuery(must_queries=[TermQuery("items.sku", "b2"), TermQuery("items.qty", 9)]))
    assert [r.primary_key for r in db.search("t", "i", q).rows] == [(1,)]
    q = NestedQuery("items", BoolQuery(must_queries=[TermQuery("items.sku", "a1"), TermQuery("items.qty", 9)]))
    assert [r.primary_key for r in db.search("t", "i", q).rows] == [(2,)]  # same object only
    assert [r.primary_key for r in db.search("t", "i", MatchQuery("title", "西湖")).rows] == [(1,)]
    res = db.search("t", "i", MatchAllQuery(), limit=0,
                    group_bys=[GroupByDateHistogram("q", "day", "quarter")])
    assert [(g.key, g.row_count) for g in res.group_bys["q"]] == [(1_704_067_200_000, 1),
                                                                    (1_711_929_600_000, 1)]


def test_routing_parallel_scan_rebuild_and_reopen(tmp_path):
    path = str(tmp_path / "s")
    db = widetable.open(path, purge_interval=None)
    t = db.create_table("t", [("u", "STRING"), ("n", "INTEGER")])
    for u in range(6):
        for n in range(10):
            t.put_row((f"u{u}", n), {"k": f"k{n % 3}"})
    db.create_search_index("t", "i", [("k", "KEYWORD")], routing_fields=["u"], shards=4)
    assert db.wait_for_search_indexes("t", "i")
    res = db.search("t", "i", MatchAllQuery(), routing_values=[("u3",)], get_total_count=True, limit=100,
                    columns=RETURN_ALL_FROM_INDEX)
    assert {r.primary_key[0] for r in res.rows} >= {"u3"} and res.total_count >= 10
    splits = db.compute_splits("t", "i")
    seen = []
    for pid in range(splits["splits_count"]):
        token = None
        while True:
            page = db.search_parallel_scan("t", "i", MatchAllQuery(), splits["session_id"],
                                    splits["splits_count"], pid, 7, token)
            seen += [r.primary_key for r in page.rows]
            token = page.next_token
            if token is None:
                break
    assert sorted(seen) == sorted({(f"u{u}", n) for u in range(6) for n in range(10)})
    _err("OTSSessionNotExist", db.search_parallel_scan, "t", "i", MatchAllQuery(), "nope", 1, 0)
    db.update_search_index("t", "i", add_fields=[("n", "LONG")])
    assert db.wait_for_search_indexes("t", "i", timeout=60)
    import time
    deadline = time.time() + 30
    while db.describe_search_index("t", "i").rebuilding and time.time() < deadline:
        time.sleep(0.05)
    assert db.search("t", "i", TermQuery("n", 4), get_total_count=True).total_count == 6
    db.close()
    db = widetable.open(path, purge_interval=None)
    assert db.search("t", "i", TermQuery("n", 4), get_total_count=True).total_count == 6
    assert db.verify_search_index("t", "i").ok
    db.close()


def test_trim_keeps_records_the_last_commit_does_not_cover(db):
    """The applied position runs ahead of the tantivy commit (commits come every
    commit_interval); trimming must keep every record after the committed one, or a crash
    before the next commit would lose those writes."""
    import time
    t = db.create_table("t", [("id", "INTEGER")])
    db.create_search_index("t", "i", [("k", "KEYWORD")], shards=1)
    assert db.wait_for_search_indexes("t", "i")
    manager = db._search
    manager.commit_interval = 3600.0  # no commit from now on but the one wait makes
    st = manager.states[("t", "i")]
    t.put_row((1,), {"k": "a"})
    deadline = time.time() + 20
    while not st.ckpt and time.time() < deadline:  # applied, not committed
        time.sleep(0.01)
    (shard, applied), = st.ckpt.items()
    keep = {c.name: c.checkpoint for c in db._ctx.changelog.consumers(t) if c.holds_log}
    (limit,) = [fn(shard) for fn in keep.values()]
    assert limit < applied
    assert db.wait_for_search_indexes("t", "i")
    assert [fn(shard) for fn in keep.values()] == [applied]
