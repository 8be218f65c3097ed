"""A bare COUNT(*) with equality on a key prefix a secondary index counts: one read of the
index's count (index/counts.py), equal to what DuckDB counts, named in EXPLAIN."""

from __future__ import annotations

import random

import pytest

from widetable import WidetableError

MAPPING = ("CREATE TABLE t (k VARCHAR(10), s BIGINT, c VARCHAR(10), n BIGINT, d DOUBLE, "
           "PRIMARY KEY(k, s))")
DUCK = {"max_scan_rows": None}


@pytest.fixture
def loaded(db):
    db.create_table("t", [("k", "STRING"), ("s", "INTEGER")],
                    defined_columns=[("c", "STRING"), ("n", "INTEGER"), ("d", "DOUBLE")])
    rnd = random.Random(11)
    t = db.table("t")
    for i in range(600):
        cols = {"d": rnd.random()}
        if rnd.random() < 0.8:
            cols["c"] = rnd.choice(["a", "b", "c", "d"])
        if rnd.random() < 0.7:
            cols["n"] = rnd.randrange(5)
        t.put_row((f"k{i % 6}", i), cols)
    db.create_index("t", "by_c", ["c"], progress=False)
    db.create_index("t", "by_cn", ["c", "n"], progress=False)
    db.create_index("t", "loc", ["k", "c"], index_type="LOCAL", progress=False)
    assert db.wait_for_indexes(30)
    db.sql(MAPPING)
    return db


def _explain(db, sql, params):
    return db.sql("EXPLAIN " + sql, params).rows


def test_a_counted_prefix_is_read_and_equals_duckdbs_count(loaded):
    db = loaded
    cases = [("SELECT COUNT(*) FROM t WHERE c = ?", [v], "by_c", "global, eventually consistent",
              f"c = {v!r}") for v in ["a", "b", "zz"]]
    cases += [("SELECT COUNT(1) AS n FROM t WHERE k = ? AND c = ?", [k, v], "loc",
               "local, strongly consistent", f"k = {k!r} AND c = {v!r}")
              for k, v in [("k1", "a"), ("k5", "d"), ("k9", "a")]]
    cases += [("SELECT COUNT(*) FROM t WHERE n = ? AND c = ?", [n, v], "by_cn",
               "global, eventually consistent", f"c = {v!r} AND n = {n!r}")
              for n, v in [(1, "a"), (4, "c")]]
    seen = 0
    for sql, params, index, consistency, where in cases:
        plan = _explain(db, sql, params)
        assert plan[-1][0] == "(no duckdb)", plan
        assert plan[-1][1] == f"index count: {index} ({consistency})", plan
        assert f"key prefix {where}: one read" in plan[-1][2], plan
        ours = db.sql(sql, params)
        assert ours.rows == db.sql(sql, params, **DUCK).rows, (sql, params)
        assert ours.stats == {index: 0}
        assert db.sql(sql, params).rows == ours.rows  # the cached path: the same
        seen += ours.rows[0][0]
    assert seen > 100


def test_the_cached_count_reads_no_entries_and_sees_a_write(loaded, monkeypatch):
    db = loaded
    sql = "SELECT COUNT(*) FROM t WHERE k = ? AND c = ?"
    before = db.sql(sql, ["k2", "b"]).rows[0][0]  # compiles the statement
    view = db.table("loc")

    def refuse(*args, **kwargs):
        raise AssertionError("the count read entries")
    monkeypatch.setattr(type(view), "stored_range", refuse)
    db.table("t").put_row(("k2", 10_000), {"c": "b"})  # a local index: seen at once
    assert db.sql(sql, ["k2", "b"]).rows == [(before + 1,)]
    db.table("t").update_row(("k2", 10_000), put={"c": "a"})
    assert db.sql(sql, ["k2", "b"]).rows == [(before,)]


def test_what_is_not_read_from_a_count(loaded):
    """Counting rows, not a count: a range, an IN, another predicate, a prefix the index
    does not count, COUNT(column); and no index at all where a row lacking a later
    attribute column of the index may match (c = ? alone never reads by_cn)."""
    db = loaded
    for sql, params in [
        ("SELECT COUNT(*) FROM t WHERE c > ?", ["b"]),
        ("SELECT COUNT(*) FROM t WHERE c IN ('a', 'b')", []),
        ("SELECT COUNT(*) FROM t WHERE c = ? AND d > 0.5", ["a"]),
        ("SELECT COUNT(*) FROM t WHERE k = ?", ["k1"]),
        ("SELECT COUNT(n) FROM t WHERE c = ?", ["a"]),
        ("SELECT COUNT(NULL) FROM t WHERE c = ?", ["a"]),
        ("SELECT COUNT(*) FROM t USE INDEX(by_cn) WHERE c = ?", ["a"]),
    ]:
        plan = _explain(db, sql, params)
        assert not plan[-1][1].startswith("index count"), (sql, plan)
        if "USE INDEX" not in sql:
            assert db.sql(sql, params).rows == db.sql(sql, params, **DUCK).rows, sql
    plan = _explain(db, "SELECT * FROM t WHERE n = ?", [1])
    assert "by_cn" not in plan[0][1], plan
    sql = "SELECT COUNT(*) FROM t WHERE c = ?"
    assert _explain(db, sql, ["a"])[0][1].startswith("secondary index by_c "), "by_c counts c"


def test_parameters_of_another_type_answer_as_before(loaded):
    """A value not of the key column's type is not pushed down: DuckDB decides, with or
    without a compiled statement."""
    db = loaded
    sql = "SELECT COUNT(*) FROM t WHERE c = ?"
    db.sql(sql, ["a"])  # compiled
    for value in [5, 1.5, b"a", None]:
        plan = _explain(db, sql, [value])
        assert not plan[-1][1].startswith("index count"), (value, plan)
        try:
            ours = db.sql(sql, [value]).rows
        except WidetableError as exc:
            with pytest.raises(WidetableError) as theirs:
                db.sql(sql, [value], **DUCK)
            assert theirs.value.code == exc.code
        else:
            assert ours == db.sql(sql, [value], **DUCK).rows, value
    assert db.sql(sql, ["a"]).rows == db.sql(sql, ["a"], **DUCK).rows
    with pytest.raises(WidetableError, match="exceeds the MaxLength"):  # as before counts
        db.sql(sql, ["x" * 2000])


def test_an_index_dropped_or_made_again_is_followed(loaded):
    db = loaded
    sql = "SELECT COUNT(*) FROM t WHERE c = ?"
    want = db.sql(sql, ["a"], **DUCK).rows
    assert db.sql(sql, ["a"]).rows == want
    db.drop_index("t", "by_c")
    assert not _explain(db, sql, ["a"])[-1][1].startswith("index count")
    assert db.sql(sql, ["a"]).rows == want
    db.create_index("t", "by_c", ["c"], progress=False)
    assert db.wait_for_indexes(30)
    assert _explain(db, sql, ["a"])[-1][1].startswith("index count: by_c")
    assert db.sql(sql, ["a"]).rows == want
