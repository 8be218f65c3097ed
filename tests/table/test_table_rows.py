"""Single-row reads and writes: CRUD, put replaces, versions, max_versions, time ranges, TTL."""

from __future__ import annotations

import time

import pytest

from widetable import INF_MAX, INF_MIN, Row, WriteResult

from .helpers import cells, values

PK2 = [("a", "STRING"), ("b", "INTEGER")]


# --- CRUD -------------------------------------------------------------------


def test_put_then_get_returns_every_type(table) -> None:
    t = table()
    row = {"s": "héllo", "i": -(2**63), "f": 1.5, "b": True, "y": b"\x00\xff", "big": 2**63 - 1}
    assert t.put_row("k1", row) == WriteResult(("k1",))
    got = t.get_row("k1")
    assert isinstance(got, Row)
    assert got.primary_key == ("k1",)
    assert values(got) == {n: (type(v).__name__, v) for n, v in row.items()}


def test_get_missing_row_is_none(table) -> None:
    t = table()
    assert t.get_row("nope") is None
    t.put_row("k", {"x": 1})
    assert t.get_row("nope") is None


def test_bool_and_int_stay_distinct(table) -> None:
    t = table()
    t.put_row("k", {"t": True, "one": 1, "zero": 0, "f": False, "fl": 1.0})
    assert values(t.get_row("k")) == {
        "t": ("bool", True), "one": ("int", 1), "zero": ("int", 0),
        "f": ("bool", False), "fl": ("float", 1.0),
    }


def test_pk_forms_name_the_same_row(table) -> None:
    t = table(pk=PK2)
    t.put_row(("u", 1), {"x": 1})
    assert t.get_row(["u", 1])["x"] == 1
    assert t.get_row({"a": "u", "b": 1})["x"] == 1
    assert t.get_row([("a", "u"), ("b", 1)])["x"] == 1
    assert t.get_row(("u", 2)) is None


def test_put_row_with_no_columns_makes_a_row(table) -> None:
    t = table()
    t.put_row("k", {})
    row = t.get_row("k")
    assert row is not None and row.columns == {}
    assert t.get_row("k", columns=["x"]) is None


def test_put_row_replaces_the_whole_row(table, now) -> None:
    t = table(max_versions=3)
    t.put_row("k", [("a", 1, now - 3000), ("a", 2, now - 2000), ("b", "x", now - 1000)])
    t.put_row("k", {"c": 3})
    row = t.get_row("k", max_versions=3)
    assert sorted(row.columns) == ["c"]
    assert row.versions("c") == [(3, row.timestamps["c"])]
    assert abs(row.timestamps["c"] - now) < 60_000


def test_put_row_with_older_timestamp_still_replaces(table, now) -> None:
    t = table(max_versions=3)
    t.put_row("k", {"a": (1, now)})
    t.put_row("k", {"b": (2, now - 5000)})
    assert cells(t.get_row("k", max_versions=3)) == {"b": [("int", 2, now - 5000)]}


def test_delete_row_and_delete_missing_row(table) -> None:
    t = table()
    t.put_row("k", {"x": 1})
    assert t.delete_row("k") == WriteResult(("k",))
    assert t.get_row("k") is None
    t.delete_row("k")  # not an error
    assert t.get_row("k") is None


def test_get_row_columns_projects(table) -> None:
    t = table()
    t.put_row("k", {"a": 1, "b": 2, "c": 3})
    assert values(t.get_row("k", columns=["a", "c", "zz"])) == {"a": ("int", 1), "c": ("int", 3)}
    assert t.get_row("k", columns=["zz"]) is None


def test_empty_columns_list_means_every_column(db, table) -> None:
    """As in Tablestore, where an empty columns_to_get is the same as none given."""
    t = table("e")
    t.put_row("k", {"a": 1, "b": 2})
    assert t.get_row("k", columns=[]).columns == {"a": 1, "b": 2}
    assert [r.columns for r in t.get_range(INF_MIN, INF_MAX, columns=[])] == [{"a": 1, "b": 2}]
    assert db.batch_get_row([("e", "k", {"columns": []})])[0].row.columns == {"a": 1, "b": 2}


def test_implicit_timestamp_is_now(table) -> None:
    t = table()
    before = int(time.time() * 1000)
    t.put_row("k", {"x": 1})
    after = int(time.time() * 1000)
    assert before - 1 <= t.get_row("k").timestamps["x"] <= after + 1


# --- versions ---------------------------------------------------------------


def test_versions_newest_first_and_max_versions_keeps_newest(table, now) -> None:
    t = table(max_versions=2)
    for i in range(4):
        t.update_row("k", put={"x": (i, now - 10_000 + i * 1000)})
    row = t.get_row("k", max_versions=5)
    assert row.versions("x") == [(3, now - 7000), (2, now - 8000)]
    assert row["x"] == 3
    assert t.get_row("k").versions("x") == [(3, now - 7000)]


def test_older_version_written_late_is_dropped_past_max_versions(table, now) -> None:
    t = table(max_versions=2)
    t.update_row("k", put={"x": (1, now - 1000)})
    t.update_row("k", put={"x": (2, now - 2000)})
    t.update_row("k", put={"x": (3, now - 3000)})
    assert t.get_row("k", max_versions=3).versions("x") == [(1, now - 1000), (2, now - 2000)]


def test_same_timestamp_overwrites_the_version(table, now) -> None:
    t = table(max_versions=3)
    t.update_row("k", put={"x": ("a", now - 1000)})
    t.update_row("k", put={"x": ("b", now - 1000)})
    assert t.get_row("k", max_versions=3).versions("x") == [("b", now - 1000)]


def test_put_row_with_many_versions_of_one_column(table, now) -> None:
    t = table(max_versions=2)
    t.put_row("k", [("x", 1, now - 3000), ("x", 3, now - 1000), ("x", 2, now - 2000)])
    assert t.get_row("k", max_versions=9).versions("x") == [(3, now - 1000), (2, now - 2000)]


def test_lowering_max_versions_hides_extra_versions_at_once(table, db, now) -> None:
    """Tablestore: versions past max_versions are unreadable even before GC removes them."""
    t = table("mv", max_versions=3)
    t.put_row("k", [("x", 1, now - 3000), ("x", 2, now - 2000), ("x", 3, now - 1000)])
    db.update_table("mv", max_versions=1)
    assert t.get_row("k", max_versions=3).versions("x") == [(3, now - 1000)]
    rows = t.get_range((INF_MIN,), (INF_MAX,), max_versions=3).rows
    assert [r.versions("x") for r in rows] == [[(3, now - 1000)]]


def test_versions_past_lowered_max_versions_stay_hidden_from_every_read(table, db, now) -> None:
    """Hidden versions must not come back through a time range, a filter or a condition."""
    from widetable import col

    from .helpers import rejects

    t = table("mvh", max_versions=3)
    t.put_row("k", [("x", 1, now - 3000), ("x", 2, now - 2000), ("x", 3, now - 1000)])
    db.update_table("mvh", max_versions=1)
    assert t.get_row("k", time_range=(now - 3000, now - 1500)) is None
    assert t.get_row("k", max_versions=3, time_range=now - 3000) is None
    assert t.get_range((INF_MIN,), (INF_MAX,), time_range=(now - 3000, now - 1500)).rows == []
    any_version = col("x").eq(1, latest_version_only=False, pass_if_missing=False)
    assert t.get_row("k", filter=any_version) is None
    rejects(db, "OTSConditionCheckFail", t.update_row, "k", put={"y": 1}, condition=any_version)


def test_raising_max_versions_keeps_new_versions(table, db, now) -> None:
    t = table("mv2", max_versions=1)
    t.update_row("k", put={"x": (1, now - 2000)})
    db.update_table("mv2", max_versions=3)
    t.update_row("k", put={"x": (2, now - 1000)})
    assert t.get_row("k", max_versions=3).versions("x") == [(2, now - 1000), (1, now - 2000)]


# --- time ranges -------------------------------------------------------------


@pytest.fixture
def versioned(table, now):
    t = table(max_versions=5)
    for i in range(5):
        t.update_row("k", put={"x": (i, now - 5000 + i * 1000), "y": (i * 10, now - 5000 + i * 1000)})
    return t


def test_time_range_is_half_open(versioned, now) -> None:
    row = versioned.get_row("k", max_versions=5, time_range=(now - 4000, now - 2000))
    assert row.versions("x") == [(2, now - 3000), (1, now - 4000)]
    assert row["x"] == 2 and row.timestamps["x"] == now - 3000


def test_time_range_with_default_max_versions_gives_newest_in_range(versioned, now) -> None:
    row = versioned.get_row("k", time_range=(now - 5000, now - 2500))
    assert row["x"] == 2 and row["y"] == 20
    assert row.versions("x") == [(2, now - 3000)]


def test_time_range_single_timestamp(versioned, now) -> None:
    row = versioned.get_row("k", time_range=now - 4000, max_versions=5)
    assert cells(row) == {"x": [("int", 1, now - 4000)], "y": [("int", 10, now - 4000)]}


def test_time_range_matching_nothing_reads_absent(versioned, now) -> None:
    assert versioned.get_row("k", time_range=(now - 100_000, now - 90_000)) is None


def test_time_range_with_columns(versioned, now) -> None:
    row = versioned.get_row("k", columns=["y"], max_versions=2, time_range=(now - 5000, now))
    assert cells(row) == {"y": [("int", 40, now - 1000), ("int", 30, now - 2000)]}


# --- TTL ----------------------------------------------------------------------


def test_expired_cells_are_invisible_at_once(table, now) -> None:
    t = table(ttl=1, max_versions=3)
    t.put_row("old", {"x": (1, now - 5000)})
    t.put_row("mixed", [("x", 1, now - 5000), ("x", 2, now + 60_000), ("y", 3, now - 9000)])
    assert t.get_row("old") is None
    assert t.get_row("old", max_versions=3, time_range=(0, now)) is None
    mixed = t.get_row("mixed", max_versions=3)
    assert cells(mixed) == {"x": [("int", 2, now + 60_000)]}
    assert [r.primary_key for r in t.scan()] == [("mixed",)]


def test_expired_row_does_not_exist_for_conditions(table, now) -> None:
    from widetable import EXPECT_EXIST, EXPECT_NOT_EXIST, WidetableError

    t = table(ttl=1)
    t.put_row("k", {"x": (1, now - 5000)})
    with pytest.raises(WidetableError) as info:
        t.update_row("k", put={"y": 1}, condition=EXPECT_EXIST)
    assert info.value.code == "OTSConditionCheckFail"
    t.put_row("k", {"x": 2}, condition=EXPECT_NOT_EXIST)
    assert t.get_row("k")["x"] == 2


def test_increment_ignores_expired_value(table, now) -> None:
    t = table(ttl=1)
    t.put_row("k", {"n": (100, now - 5000)})
    assert t.update_row("k", increment={"n": 1}).increments == {"n": 1}
    assert t.get_row("k")["n"] == 1


def test_purge_expired_removes_expired_rows_physically(db, table, physical_rows, now) -> None:
    t = table("ttl", ttl=1, max_versions=3)
    for i in range(10):
        t.put_row(f"old{i}", {"x": (i, now - 5000)})
    t.put_row("live", [("x", 1, now - 5000), ("x", 2, now + 60_000)])
    assert physical_rows("ttl") == 11
    assert [r.primary_key for r in t.scan()] == [("live",)]
    changed = db.purge_expired()
    assert changed == 11
    assert physical_rows("ttl") == 1
    assert cells(t.get_row("live", max_versions=3)) == {"x": [("int", 2, now + 60_000)]}
    assert db.purge_expired("ttl") == 0


def test_purge_trims_versions_past_max_versions(db, table, physical_rows, now) -> None:
    t = table("mvp", max_versions=3)
    t.put_row("k", [("x", i, now - 5000 + i) for i in range(3)])
    db.update_table("mvp", max_versions=1)
    assert db.purge_expired("mvp") == 1
    db.update_table("mvp", max_versions=3)
    assert t.get_row("k", max_versions=3).versions("x") == [(2, now - 4998)]


def test_lowering_ttl_hides_cells_at_once(db, table, now) -> None:
    t = table("ttl2")
    t.put_row("k", {"x": (1, now - 5000)})
    assert t.get_row("k")["x"] == 1
    db.update_table("ttl2", ttl=1)
    assert t.get_row("k") is None
    db.update_table("ttl2", ttl=-1)
    assert t.get_row("k")["x"] == 1


def test_columns_naming_a_key_column_read_a_present_row_as_its_key(table) -> None:
    t = table("keyed", pk=[("a", "STRING"), ("b", "INTEGER")])
    t.put_row(("x", 1), {"c": 1})
    row = t.get_row(("x", 1), columns=["a"])  # Tablestore's cheap existence check
    assert row is not None and row.primary_key == ("x", 1) and row.columns == {}
    assert t.get_row(("x", 2), columns=["a"]) is None  # no such row
    assert t.get_row(("x", 1), columns=["zz"]) is None  # none of the columns: absent
    assert t.get_row(("x", 1), columns=["b", "c"]).columns == {"c": 1}
    page = t.get_range(("x", 0), ("x", 9), columns=["b"]).rows
    assert [(r.primary_key, r.columns) for r in page] == [(("x", 1), {})]
