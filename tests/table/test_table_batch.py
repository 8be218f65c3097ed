"""batch_get_row and batch_write_row: per-row results, limits, duplicates, cross-table use."""

from __future__ import annotations

import pytest

from widetable import EXPECT_EXIST, EXPECT_NOT_EXIST, Condition, col

from .helpers import rejects, values


@pytest.fixture
def two(table):
    a = table("a", max_versions=2)
    b = table("b", pk=[("i", "INTEGER")])
    a.put_row("x", {"v": 1})
    a.put_row("y", {"v": 2, "w": "two"})
    b.put_row(1, {"v": 10})
    return a, b


# --- batch_get_row ------------------------------------------------------------------


def test_batch_get_across_tables_in_request_order(db, two) -> None:
    res = db.batch_get_row([("b", (1,)), ("a", "y"), ("a", "missing"), ("a", ("x",))])
    assert [r.ok for r in res] == [True] * 4
    assert [(r.table, r.primary_key) for r in res] == [
        ("b", (1,)), ("a", ("y",)), ("a", ("missing",)), ("a", ("x",)),
    ]
    assert [values(r.row) for r in res] == [
        {"v": ("int", 10)}, {"v": ("int", 2), "w": ("str", "two")}, None, {"v": ("int", 1)},
    ]


def test_batch_get_options_per_row(db, two, now) -> None:
    a, _ = two
    a.update_row("x", put={"v": (0, now - 5000)})
    res = db.batch_get_row([
        ("a", "x", {"max_versions": 2}),
        ("a", "y", {"columns": ["w"]}),
        ("a", "y", {"filter": col("v") == 3}),
        ("a", "x", {"time_range": (now - 6000, now - 4000)}),
    ])
    assert [v for v, _ in res[0].row.versions("v")] == [1, 0]
    assert res[1].row.columns == {"w": "two"}
    assert res[2].row is None and res[2].ok
    assert res[3].row.columns == {"v": 0}


def test_batch_get_per_row_errors(db, two) -> None:
    res = db.batch_get_row([
        ("a", "x"), ("nope", "x"), ("b", ("str",)), ("a", "x", {"max_versions": 0}),
        ("a", "x", {"bogus": 1}),
    ])
    assert res[0].ok and res[0].row["v"] == 1
    assert [r.error.code for r in res[1:]] == [
        "OTSObjectNotExist", "OTSInvalidPK", "OTSParameterInvalid", "OTSParameterInvalid",
    ]
    assert "nope" in res[1].error.message and "'str'" in res[2].error.message


def test_batch_get_limit(db, two) -> None:
    assert len(db.batch_get_row([("a", f"k{i}") for i in range(100)])) == 100
    rejects(db, "OTSParameterInvalid", db.batch_get_row, [("a", f"k{i}") for i in range(101)],
            names=["101", "100"])
    rejects(db, "OTSParameterInvalid", db.batch_get_row, [], names=["0"])


def test_batch_get_same_row_twice_is_fine(db, two) -> None:
    res = db.batch_get_row([("a", "x"), ("a", "x")])
    assert [r.row["v"] for r in res] == [1, 1]


# --- batch_write_row ----------------------------------------------------------------


def test_batch_write_put_update_delete_across_tables(db, two) -> None:
    a, b = two
    res = db.batch_write_row([
        ("a", "put", "new", {"v": 5}),
        ("a", "update", "x", {"increment": {"v": 10}, "put": {"z": True}}),
        ("a", "delete", "y"),
        ("b", "put", (2,), [("v", 20)]),
        ("b", "update", 1, {"delete_column": ["v"]}),
    ])
    assert all(r.ok for r in res), [r.error for r in res]
    assert [r.operation for r in res] == ["put", "update", "delete", "put", "update"]
    assert res[1].result.increments == {"v": 11}
    assert values(a.get_row("new")) == {"v": ("int", 5)}
    assert values(a.get_row("x")) == {"v": ("int", 11), "z": ("bool", True)}
    assert a.get_row("y") is None
    assert b.get_row(2)["v"] == 20 and b.get_row(1).columns == {}  # an update keeps its row


def test_batch_write_per_row_errors_do_not_stop_other_rows(db, two) -> None:
    a, _ = two
    a.put_row("d", {"v": 1})
    res = db.batch_write_row([
        ("a", "put", "ok1", {"v": 1}),
        ("a", "put", "x", {"v": 9}, EXPECT_NOT_EXIST),
        ("a", "update", "y", {"increment": {"w": 1}}),
        ("nope", "put", "k", {"v": 1}),
        ("b", "put", ("bad",), {"v": 1}),
        ("a", "put", "bad_value", {"v": object()}),
        ("a", "update", "ok2", {"put": {"v": 2}}, Condition(EXPECT_NOT_EXIST)),
        ("a", "delete", "d", None, Condition(EXPECT_EXIST, col("v") == 99)),
    ])
    assert [r.ok for r in res] == [True, False, False, False, False, False, True, False]
    assert [r.error.code for r in res if not r.ok] == [
        "OTSConditionCheckFail", "OTSParameterInvalid", "OTSObjectNotExist", "OTSInvalidPK",
        "OTSParameterInvalid", "OTSConditionCheckFail",
    ]
    assert "'w'" in res[2].error.message and "nope" in res[3].error.message
    assert a.get_row("ok1")["v"] == 1 and a.get_row("ok2")["v"] == 2
    assert a.get_row("x")["v"] == 1
    assert values(a.get_row("y")) == {"v": ("int", 2), "w": ("str", "two")}
    assert a.get_row("bad_value") is None and a.get_row("d")["v"] == 1


def test_batch_write_row_limit_200(db, two) -> None:
    res = db.batch_write_row([("a", "put", f"r{i}", {"v": i}) for i in range(200)])
    assert len(res) == 200 and all(r.ok for r in res)
    rejects(db, "OTSParameterInvalid", db.batch_write_row,
            [("a", "put", f"s{i}", {"v": i}) for i in range(201)], names=["201", "200"])
    rejects(db, "OTSParameterInvalid", db.batch_write_row, [])
    assert db.table("a").get_row("s0") is None


def test_batch_write_over_4mb_is_rejected_whole(db, two) -> None:
    mb = b"x" * (1024 * 1024)
    ok = db.batch_write_row([("a", "put", f"m{i}", {"v": mb}) for i in range(3)])
    assert all(r.ok for r in ok)
    rejects(db, "OTSParameterInvalid", db.batch_write_row,
            [("a", "put", f"n{i}", {"v": mb}) for i in range(5)], names=["4194304"])
    rejects(db, "OTSParameterInvalid", db.batch_write_row,
            [("a", "update", f"n{i}", {"put": {"v": mb}}) for i in range(5)])
    rejects(db, "OTSParameterInvalid", db.batch_write_row,
            [("a", "put", "n0", {"v": 1})]
            + [("a", "put", f"n{i}", {"v": mb, "w": mb}) for i in range(1, 3)])
    assert db.table("a").get_row("n0") is None


def test_batch_write_same_row_twice_is_rejected_whole(db, two) -> None:
    rejects(db, "OTSParameterInvalid", db.batch_write_row,
            [("a", "put", "dup", {"v": 1}), ("a", "put", "other", {"v": 1}),
             ("a", "update", ("dup",), {"put": {"v": 2}})], names=["dup"])
    assert db.table("a").get_row("other") is None
    res = db.batch_write_row([("a", "put", "dup", {"v": 1}), ("b", "put", 1, {"v": 1})])
    assert all(r.ok for r in res)


def test_batch_write_malformed_item_rejects_whole(db, two) -> None:
    rejects(db, "OTSParameterInvalid", db.batch_write_row,
            [("a", "put", "k1", {"v": 1}), ("a", "upsert", "k2", {"v": 1})], names=["upsert"])
    rejects(db, "OTSParameterInvalid", db.batch_write_row,
            [("a", "put", "k1", {"v": 1}), ("a", "update", "k2", {"bogus": 1})])
    rejects(db, "OTSParameterInvalid", db.batch_write_row, [("a", "put")])


def test_batch_write_honours_max_versions_and_timestamps(db, two, now) -> None:
    a, _ = two
    res = db.batch_write_row([
        ("a", "put", "v3", [("v", 1, now - 3000), ("v", 2, now - 2000), ("v", 3, now - 1000)]),
    ])
    assert res[0].ok
    assert a.get_row("v3", max_versions=5).versions("v") == [(3, now - 1000), (2, now - 2000)]
    res = db.batch_write_row([("a", "put", "old", {"v": (1, now - 10 * 86400 * 1000)})])
    assert res[0].error.code == "OTSParameterInvalid"
    assert a.get_row("old") is None


def test_batch_write_column_named_twice_is_a_row_error(db, two) -> None:
    """A value error must stay a per-row error whatever the column is called."""
    res = db.batch_write_row([
        ("a", "put", "t1", {"twice": None}),
        ("a", "put", "t2", {"v": 1}),
    ])
    assert not res[0].ok and res[0].error.code == "OTSParameterInvalid"
    assert res[1].ok and db.table("a").get_row("t2")["v"] == 1


def test_table_name_of_wrong_type_is_a_row_error(db, two) -> None:
    """As batch_get_row does: a per-row OTSObjectNotExist, never a bare TypeError."""
    got = db.batch_get_row([(["a"], "x"), ("a", "x")])
    assert got[0].error.code == "OTSObjectNotExist" and got[1].row["v"] == 1
    res = db.batch_write_row([(["a"], "put", "k", {"v": 1}), ("a", "put", "k2", {"v": 2})])
    assert res[0].error.code == "OTSObjectNotExist" and "['a']" in res[0].error.message
    assert res[1].ok and db.table("a").get_row("k2")["v"] == 2
    only = db.batch_write_row([(["a"], "put", ("k3",), {"v": 3})])  # the one-table bulk path
    assert only[0].error.code == "OTSObjectNotExist"
