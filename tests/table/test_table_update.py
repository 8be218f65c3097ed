"""update_row in parts and combinations, increments, and conditional writes."""

from __future__ import annotations

import pytest

from widetable import (
    EXPECT_EXIST,
    EXPECT_NOT_EXIST,
    IGNORE,
    Condition,
    RowExistence,
    WriteResult,
    col,
)

from .helpers import cells, rejects, values

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


@pytest.fixture
def t(table):
    return table(max_versions=3)


# --- the four parts, alone -----------------------------------------------------


def test_update_put_creates_and_merges(t, now) -> None:
    t.update_row("k", put={"a": 1})
    t.update_row("k", put={"b": "x"})
    assert values(t.get_row("k")) == {"a": ("int", 1), "b": ("str", "x")}


def test_update_put_adds_versions(t, now) -> None:
    t.update_row("k", put=[("a", 1, now - 2000), ("a", 2, now - 1000)])
    assert t.get_row("k", max_versions=3).versions("a") == [(2, now - 1000), (1, now - 2000)]


def test_delete_column_removes_every_version(t, now) -> None:
    t.put_row("k", [("a", 1, now - 2000), ("a", 2, now - 1000), ("b", 3, now)])
    t.update_row("k", delete_column=["a"])
    assert cells(t.get_row("k", max_versions=3)) == {"b": [("int", 3, now)]}
    t.update_row("k", delete_column="missing")  # a missing column is not an error
    assert cells(t.get_row("k", max_versions=3)) == {"b": [("int", 3, now)]}


def test_delete_version_removes_exactly_that_version(t, now) -> None:
    t.put_row("k", [("a", 1, now - 3000), ("a", 2, now - 2000), ("a", 3, now - 1000)])
    t.update_row("k", delete_version={"a": now - 2000})
    assert t.get_row("k", max_versions=3).versions("a") == [(3, now - 1000), (1, now - 3000)]
    t.update_row("k", delete_version={"a": now - 1000})
    assert t.get_row("k").versions("a") == [(1, now - 3000)]
    t.update_row("k", delete_version=[("a", now - 12345)])  # no such version: no-op
    assert t.get_row("k", max_versions=3).versions("a") == [(1, now - 3000)]


def test_deleting_every_cell_keeps_the_row(t, db, now) -> None:
    """Tablestore's UpdateRow: "deleting all attribute columns of a row is not deleting the
    row; use DeleteRow for that". The row stays with its key alone, and an EXPECT_EXIST
    write to it then passes."""
    t.put_row("k", {"a": (1, now - 1000)})
    t.update_row("k", delete_version={"a": now - 1000})
    row = t.get_row("k")
    assert row is not None and row.primary_key == ("k",) and row.columns == {}
    t.put_row("k2", {"a": 1, "b": 2})
    t.update_row("k2", delete_column=["a", "b"])
    assert t.get_row("k2") is not None and t.get_row("k2").columns == {}
    assert [r.primary_key for r in t.scan()] == [("k",), ("k2",)]
    t.update_row("k2", put={"c": 3}, condition=EXPECT_EXIST)
    t.put_row("k", {"z": 1}, condition=EXPECT_EXIST)
    rejects(db, "OTSConditionCheckFail", t.put_row, "k", {"z": 2}, condition=EXPECT_NOT_EXIST)
    t.delete_row("k2")  # only DeleteRow deletes a row
    assert t.get_row("k2") is None


def test_update_that_only_deletes_inserts_a_missing_row(t, db) -> None:
    """Tablestore's UpdateRow documentation: "if the specified row does not exist, a new row
    is inserted", with no exception for an update made only of deletions; its capacity rules
    bill such an update of a missing row as a write of the key and the deleted columns' names.
    So an update that only deletes, on a missing row, leaves a row with its key alone (and an
    EXPECT_EXIST one fails and writes nothing)."""
    rejects(db, "OTSConditionCheckFail", t.update_row, "ghost", delete_column=["a"],
            condition=EXPECT_EXIST)
    assert t.get_row("ghost") is None and list(t.scan()) == []
    t.update_row("ghost", delete_column=["a"])
    row = t.get_row("ghost")
    assert row is not None and row.columns == {}
    t.update_row("ghost2", delete_version={"a": 1})
    assert t.get_row("ghost2").columns == {}
    assert [r.primary_key for r in t.scan()] == [("ghost",), ("ghost2",)]


def test_increment_missing_column_counts_from_zero(t) -> None:
    r = t.update_row("k", increment={"n": 5})
    assert r == WriteResult(("k",), {"n": 5})
    assert t.update_row("k", increment={"n": -7}).increments == {"n": -2}
    assert t.get_row("k")["n"] == -2


def test_increment_several_columns_at_once(t) -> None:
    t.put_row("k", {"a": 10, "b": 20})
    assert t.update_row("k", increment={"a": 1, "b": -1, "c": 3}).increments == {
        "a": 11, "b": 19, "c": 3,
    }
    assert values(t.get_row("k")) == {"a": ("int", 11), "b": ("int", 19), "c": ("int", 3)}


@pytest.mark.parametrize("bad", ["7", 1.0, True, b"\x01"])
def test_increment_of_non_integer_is_rejected(t, db, bad) -> None:
    t.put_row("k", {"n": bad, "other": 1})
    rejects(db, "OTSParameterInvalid", t.update_row, "k", increment={"n": 1}, names=["'n'"])
    rejects(
        db, "OTSParameterInvalid", t.update_row, "k",
        put={"other": 2}, increment={"n": 1}, names=["'n'"],
    )
    assert t.get_row("k")["other"] == 1


@pytest.mark.parametrize(
    "start, delta",
    [(INT64_MAX, 1), (INT64_MIN, -1), (INT64_MAX - 5, 6), (1, INT64_MAX)],
)
def test_increment_overflow_is_rejected(t, db, start, delta) -> None:
    t.put_row("k", {"n": start})
    rejects(db, "OTSParameterInvalid", t.update_row, "k", increment={"n": delta}, names=["'n'"])
    assert t.get_row("k")["n"] == start


def test_increment_to_the_int64_edges(t) -> None:
    t.put_row("k", {"hi": INT64_MAX - 1, "lo": INT64_MIN + 1})
    assert t.update_row("k", increment={"hi": 1, "lo": -1}).increments == {
        "hi": INT64_MAX, "lo": INT64_MIN,
    }


@pytest.mark.parametrize("delta", [1.5, "1", True, 2**63, None])
def test_increment_delta_must_be_int64(t, db, delta) -> None:
    t.put_row("k", {"n": 1})
    rejects(db, "OTSParameterInvalid", t.update_row, "k", increment={"n": delta}, names=["'n'"])


def test_increment_keeps_versions(t, now) -> None:
    t.update_row("k", put={"n": (10, now - 5000)})
    t.update_row("k", increment={"n": 1})
    versions = t.get_row("k", max_versions=3).versions("n")
    assert [v for v, _ in versions] == [11, 10]
    assert versions[0][1] >= now


def test_increment_of_column_with_future_version_stays_newest(t, now) -> None:
    t.update_row("k", put={"n": (10, now + 60_000)})
    t.update_row("k", increment={"n": 1})
    assert t.get_row("k")["n"] == 11


# --- combinations, in the documented order -------------------------------------


def test_delete_column_then_put_same_column(t, now) -> None:
    t.put_row("k", [("a", 1, now - 2000), ("a", 2, now - 1000)])
    t.update_row("k", delete_column=["a"], put={"a": (9, now - 3000)})
    assert t.get_row("k", max_versions=3).versions("a") == [(9, now - 3000)]


def test_delete_version_then_put_same_timestamp(t, now) -> None:
    t.put_row("k", {"a": (1, now - 1000)})
    t.update_row("k", delete_version={"a": now - 1000}, put={"a": (2, now - 1000)})
    assert t.get_row("k", max_versions=3).versions("a") == [(2, now - 1000)]


def test_delete_version_then_increment_sees_the_older_value(t, now) -> None:
    t.put_row("k", [("n", 1, now - 2000), ("n", 100, now - 1000)])
    r = t.update_row("k", delete_version={"n": now - 1000}, increment={"n": 1})
    assert r.increments == {"n": 2}


def test_put_then_increment_other_column_and_delete_third(t, now) -> None:
    t.put_row("k", {"a": 1, "n": 5, "gone": "x"})
    r = t.update_row("k", put={"a": 2}, increment={"n": 5}, delete_column=["gone"])
    assert r.increments == {"n": 10}
    assert values(t.get_row("k")) == {"a": ("int", 2), "n": ("int", 10)}


def test_all_four_parts_together(t, now) -> None:
    t.put_row("k", [("a", 1, now - 3000), ("a", 2, now - 2000), ("b", 1, now), ("n", 1, now)])
    t.update_row(
        "k",
        delete_column=["b"],
        delete_version={"a": now - 2000},
        put={"c": ("new", now - 500)},
        increment={"n": 41},
    )
    row = t.get_row("k", max_versions=3)
    assert sorted(row.columns) == ["a", "c", "n"]
    assert row.versions("a") == [(1, now - 3000)]
    assert row["c"] == "new" and row["n"] == 42


def test_put_then_delete_everything_keeps_row(t, now) -> None:
    t.put_row("k", {"a": 1})
    t.update_row("k", delete_column=["a"])
    assert t.get_row("k").columns == {}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"put": {"n": 1}, "increment": {"n": 1}},
        {"delete_column": ["n"], "increment": {"n": 1}},
    ],
)
def test_increment_and_write_of_same_column_is_rejected(t, db, kwargs) -> None:
    t.put_row("k", {"n": 1})
    rejects(db, "OTSParameterInvalid", t.update_row, "k", names=["'n'"], **kwargs)


def test_empty_update_is_rejected(t, db) -> None:
    rejects(db, "OTSParameterInvalid", t.update_row, "k")
    rejects(db, "OTSParameterInvalid", t.update_row, "k", put={})


# --- conditions ------------------------------------------------------------------


def test_expect_not_exist(t, db) -> None:
    t.put_row("k", {"a": 1}, condition=EXPECT_NOT_EXIST)
    rejects(
        db, "OTSConditionCheckFail", t.put_row, "k", {"a": 2}, condition=EXPECT_NOT_EXIST,
        names=["'k'"],
    )
    rejects(db, "OTSConditionCheckFail", t.update_row, "k", put={"a": 2},
            condition=Condition(RowExistence.EXPECT_NOT_EXIST))
    rejects(db, "OTSConditionCheckFail", t.delete_row, "k", condition="EXPECT_NOT_EXIST")
    assert t.get_row("k")["a"] == 1


def test_expect_exist(t, db) -> None:
    rejects(db, "OTSConditionCheckFail", t.put_row, "k", {"a": 1}, condition=EXPECT_EXIST,
            names=["'k'"])
    rejects(db, "OTSConditionCheckFail", t.update_row, "k", increment={"n": 1},
            condition=EXPECT_EXIST)
    rejects(db, "OTSConditionCheckFail", t.delete_row, "k", condition=EXPECT_EXIST)
    t.put_row("k", {"a": 1})
    t.update_row("k", put={"a": 2}, condition=EXPECT_EXIST)
    t.put_row("k", {"a": 3}, condition=EXPECT_EXIST)
    assert t.get_row("k")["a"] == 3
    t.delete_row("k", condition=EXPECT_EXIST)
    assert t.get_row("k") is None


def test_ignore_always_passes(t) -> None:
    t.put_row("k", {"a": 1}, condition=IGNORE)
    t.put_row("k", {"a": 2}, condition=Condition())
    t.delete_row("k", condition=IGNORE)
    t.delete_row("k", condition=IGNORE)


def test_row_with_no_columns_exists(t, db) -> None:
    t.put_row("k", {})
    rejects(db, "OTSConditionCheckFail", t.put_row, "k", {"a": 1}, condition=EXPECT_NOT_EXIST)
    t.update_row("k", put={"a": 1}, condition=EXPECT_EXIST)


def test_column_condition_on_put_update_delete(t, db) -> None:
    t.put_row("k", {"v": 5, "s": "x"})
    cond = Condition(EXPECT_EXIST, col("v") == 4)
    rejects(db, "OTSConditionCheckFail", t.put_row, "k", {"v": 6}, condition=cond, names=["'k'"])
    rejects(db, "OTSConditionCheckFail", t.update_row, "k", increment={"v": 1}, condition=cond)
    rejects(db, "OTSConditionCheckFail", t.delete_row, "k", condition=cond)
    t.update_row("k", increment={"v": 1}, condition=Condition(EXPECT_EXIST, col("v") == 5))
    t.put_row("k", {"v": 0}, condition=col("v") >= 6)  # a bare filter means IGNORE + filter
    t.delete_row("k", condition=Condition(IGNORE, col("v") < 1))
    assert t.get_row("k") is None


def test_column_condition_missing_column(t, db) -> None:
    t.put_row("k", {"a": 1})
    t.update_row("k", put={"a": 2}, condition=col("zz") == 1)  # pass_if_missing by default
    rejects(db, "OTSConditionCheckFail", t.update_row, "k", put={"a": 3},
            condition=col("zz").eq(1, pass_if_missing=False))
    assert t.get_row("k")["a"] == 2


def test_column_condition_on_missing_row_with_ignore(t, db) -> None:
    t.update_row("new", put={"a": 1}, condition=col("a") == 1)
    rejects(db, "OTSConditionCheckFail", t.update_row, "new2", put={"a": 1},
            condition=col("a").eq(1, pass_if_missing=False))
    assert t.get_row("new2") is None


def test_column_condition_composite(t, db) -> None:
    t.put_row("k", {"a": 1, "b": "x"})
    ok = Condition(EXPECT_EXIST, (col("a") == 1) & ~(col("b") == "y"))
    t.update_row("k", put={"c": 1}, condition=ok)
    bad = Condition(EXPECT_EXIST, (col("a") == 2) | (col("b") == "y"))
    rejects(db, "OTSConditionCheckFail", t.update_row, "k", put={"c": 2}, condition=bad)
    assert t.get_row("k")["c"] == 1


def test_column_condition_sees_only_newest_version(t, db, now) -> None:
    t.put_row("k", [("a", 1, now - 2000), ("a", 2, now - 1000)])
    rejects(db, "OTSConditionCheckFail", t.update_row, "k", put={"b": 1},
            condition=col("a") == 1)
    t.update_row("k", put={"b": 1}, condition=col("a").eq(1, latest_version_only=False))


def test_failed_condition_changes_nothing_even_with_increments(t, db, now) -> None:
    t.put_row("k", [("a", 1, now - 2000), ("n", 1, now - 2000)])
    rejects(
        db, "OTSConditionCheckFail", t.update_row, "k",
        put={"a": 2}, delete_column=["x"], increment={"n": 1},
        condition=Condition(EXPECT_EXIST, col("a") > 1),
    )
    assert cells(t.get_row("k", max_versions=3)) == {
        "a": [("int", 1, now - 2000)], "n": [("int", 1, now - 2000)],
    }


def test_bad_condition_is_parameter_invalid(t, db) -> None:
    rejects(db, "OTSParameterInvalid", t.put_row, "k", {"a": 1}, condition="MAYBE",
            names=["MAYBE"])
    rejects(db, "OTSParameterInvalid", t.put_row, "k", {"a": 1}, condition=42, names=["42"])


def test_one_version_table_keeps_the_newer_of_a_put_and_the_stored_value(table, now) -> None:
    t1 = table(max_versions=1)
    t1.put_row("k", {"a": (1, now), "b": (2, now)})
    t1.update_row("k", put={"a": (10, now - 5), "b": (20, now), "c": (30, now - 9)})
    row = t1.get_row("k")
    assert row.columns == {"a": 1, "b": 20, "c": 30}  # older loses, equal replaces
    assert row.timestamps == {"a": now, "b": now, "c": now - 9}
    t1.update_row("k", put={"a": 11})  # now: newer
    assert t1.get_row("k")["a"] == 11 and t1.get_row("k", max_versions=5).versions("a") == [
        (11, t1.get_row("k").timestamps["a"])]
