"""The sync's fast paths: a first backfill adds documents without deleting and leaves the
log records of rows it has not reached to itself; the row builder gives what the general
conversion functions give."""

from __future__ import annotations

import json
import random
import time

from hypothesis import given, settings
from hypothesis import strategies as st

import widetable
from widetable.search import MatchAllQuery, TermQuery, manager, sync
from widetable.search.builder import RowBuilder
from widetable.search.documents import FieldLayout, Rejected, build_documents, row_values
from widetable.search.schema import IndexMeta, check_index
from widetable.table.schema import TableSchema


def _step_until_caught_up(state) -> None:
    while not state.caught_up():
        state.step(0.3)
        if state.phase == "INCR" and state.dirty:
            state.commit()


def test_writes_during_the_first_backfill_land_exactly(tmp_path, monkeypatch):
    monkeypatch.setattr(sync, "BACKFILL_ROWS", 64)
    monkeypatch.setattr(manager.SearchManager, "_start", lambda self: None)  # steps by hand
    db = widetable.open(str(tmp_path / "s"), purge_interval=None)
    try:
        t = db.create_table("t", [("id", "INTEGER")])
        model = {}
        for i in range(1000):
            t.put_row((i,), {"k": "a", "n": i})
            model[i] = ("a", i)
        db.create_search_index("t", "ix", [("k", "KEYWORD"), ("n", "LONG")])
        state = db._search.states[("t", "ix")]
        assert state.fresh and state.phase == "FULL"
        rnd = random.Random(5)
        steps = 0
        while state.phase == "FULL":
            state.step(0.3)
            steps += 1
            for _ in range(15):  # behind the scan, ahead of it, past the last row
                i = rnd.randrange(1100)
                if rnd.random() < 0.25:
                    t.delete_row((i,))
                    model.pop(i, None)
                else:
                    k = rnd.choice("abc")
                    t.put_row((i,), {"k": k, "n": -i})
                    model[i] = (k, -i)
        assert steps > 5 and not state.fresh
        _step_until_caught_up(state)
        report = db.verify_search_index("t", "ix")
        assert report.ok, report
        for k in "abc":
            res = db.search("t", "ix", TermQuery("k", k), limit=100, get_total_count=True,
                            columns=["n"])
            want = sorted(i for i, (kk, _) in model.items() if kk == k)
            assert res.total_count == len(want)
            assert [r.primary_key[0] for r in res.rows] == want[:100]
            assert [r.columns["n"] for r in res.rows] == [model[i][1] for i in want[:100]]
        assert db.search("t", "ix", MatchAllQuery(), limit=0, get_total_count=True).total_count == len(model)
        payload = json.loads(state.shards[0].checkpoint())
        assert payload["fresh"] is False and payload["phase"] == "INCR"
    finally:
        db.close()


def test_a_later_pass_is_not_fresh(tmp_path):
    """A longer TTL syncs every row again over the documents already there: that pass
    deletes before it adds (a fresh one would leave two documents per row)."""
    db = widetable.open(str(tmp_path / "s"), purge_interval=None)
    try:
        t = db.create_table("t", [("id", "INTEGER")], ttl=3 * 86400)
        for i in range(300):
            t.put_row((i,), {"k": "a"})
        db.create_search_index("t", "ix", [("k", "KEYWORD")], ttl=86400)
        assert db.wait_for_search_indexes("t", "ix")
        db.update_search_index("t", "ix", ttl=2 * 86400)
        state = db._search.states[("t", "ix")]
        assert not state.fresh
        assert db.wait_for_search_indexes("t", "ix")
        assert db.verify_search_index("t", "ix").ok
        assert db.search("t", "ix", MatchAllQuery(), limit=0, get_total_count=True).total_count == 300
    finally:
        db.close()


_FIELDS = [
    ("kw", "KEYWORD"), ("n", "LONG"), ("x", "DOUBLE"), ("b", "BOOLEAN"), ("d", "DATE"),
    ("g", "GEO_POINT"), {"name": "txt", "type": "TEXT"},
    {"name": "sp", "type": "TEXT", "analyzer": "split", "analyzer_parameter": {"delimiter": ","}},
    {"name": "arr", "type": "LONG", "is_array": True},
    {"name": "kw2", "type": "KEYWORD", "index": False, "column": "kwsrc"},
    {"name": "pkf", "type": "KEYWORD", "column": "id"},
]
_NESTED = {"name": "nest", "type": "NESTED", "sub_fields": [("s", "KEYWORD"), ("v", "LONG")]}
_VALUES = st.one_of(
    st.none(), st.text(max_size=12), st.integers(-2**64, 2**64), st.floats(allow_nan=True),
    st.booleans(), st.just("30.5,120.25"), st.just("95,1"), st.just("[1, 2, null]"),
    st.just('[{"s": "x", "v": 3}]'), st.just("2024-01-02T03:04:05"), st.just("not json"),
)


def _meta(nested: bool) -> tuple[IndexMeta, TableSchema]:
    schema = TableSchema("t", 1, (("id", "STRING"),))
    fields = _FIELDS + ([_NESTED] if nested else [])
    return check_index(schema, "ix", fields, None, None, -1, 2), schema


@settings(max_examples=300, deadline=None)
@given(st.booleans(), st.text(max_size=6),
       st.dictionaries(st.sampled_from(["kw", "n", "x", "b", "d", "g", "txt", "sp", "arr",
                                        "kwsrc", "nest", "other"]), _VALUES))
def test_row_builder_agrees_with_the_general_functions(nested, pk_value, columns):
    meta, schema = _meta(nested)
    layout = FieldLayout(meta)
    pk = (pk_value,)
    try:
        values = row_values(meta, schema.pk_names, pk, columns)
        want = (values, *build_documents(layout, values))
    except Rejected as exc:
        want = ("rejected", str(exc))
    try:
        values, has, pairs, children = RowBuilder(layout, schema.pk_names).build(pk, columns)
        # the builder joins single_word tokens; the general path hands the token list
        pairs = [(n, v.split(" ")) if isinstance(v, str) and layout.slots["txt"].name == n else (n, v)
                 for n, v in pairs]
        got = (values, has, pairs, children)
    except Rejected as exc:
        got = ("rejected", str(exc))
    assert got == want


def test_returned_columns_are_sorted_by_name(tmp_path):
    db = widetable.open(str(tmp_path / "s"), purge_interval=None)
    try:
        t = db.create_table("t", [("id", "INTEGER")])
        t.put_row((1,), {"z": 1, "a": 2, "m": 3, "k": "x"})
        t.put_row((2,), {"m": 4, "k": "x"})
        db.create_search_index("t", "ix", [("k", "KEYWORD")])
        assert db.wait_for_search_indexes("t", "ix")
        for columns in (["z", "a", "m"], "RETURN_ALL"):
            rows = db.search("t", "ix", TermQuery("k", "x"), columns=columns).rows
            assert [list(r.columns) for r in rows] == (
                [["a", "m", "z"], ["m"]] if columns != "RETURN_ALL" else [["a", "k", "m", "z"], ["k", "m"]])
    finally:
        db.close()


def test_searches_see_segments_merged_after_the_last_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(sync, "REFRESH_INTERVAL", 0.0)
    monkeypatch.setattr(manager.SearchManager, "_start", lambda self: None)  # steps by hand
    db = widetable.open(str(tmp_path / "s"), purge_interval=None)
    try:
        t = db.create_table("t", [("id", "INTEGER")])
        db.create_search_index("t", "ix", [("k", "KEYWORD")], shards=1)
        state = db._search.states[("t", "ix")]
        _step_until_caught_up(state)
        for c in range(8):  # a commit, and so a segment, each: the 8th starts a merge
            for i in range(20):
                t.put_row((c * 20 + i,), {"k": "a"})
            _step_until_caught_up(state)
        shard = state.shards[0]
        before = shard.searcher().num_segments
        assert before >= 8
        for _ in range(200):  # tantivy merges in the background; an idle step reloads
            state.step(0.3)
            if shard.searcher().num_segments < before:
                break
            time.sleep(0.05)
        assert shard.searcher().num_segments < before
        res = db.search("t", "ix", TermQuery("k", "a"), limit=100, get_total_count=True)
        assert res.total_count == 160 and [r.primary_key[0] for r in res.rows] == list(range(100))
    finally:
        db.close()
