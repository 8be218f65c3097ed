"""Table DDL: create, describe, update, list, delete, recreate; persistence across reopen."""

from __future__ import annotations

import pytest

from widetable import INF_MAX, INF_MIN, TableOptions

from .helpers import engine_state, pks, rejects


def test_create_describe_list(db) -> None:
    db.create_table("users", [("org", "STRING"), ("id", "INTEGER"), ("blob", "binary")],
                    max_versions=3, ttl=86400, max_time_deviation=600)
    db.create_table("a_first", [("k", "STRING")])
    assert db.list_tables() == ["a_first", "users"]
    d = db.describe_table("users")
    assert d.name == "users"
    assert d.primary_key == [("org", "STRING"), ("id", "INTEGER"), ("blob", "BINARY")]
    assert d.options == TableOptions(max_versions=3, ttl=86400, max_time_deviation=600)
    assert db.describe_table("a_first").options == TableOptions(1, -1, 86400)
    assert d.table_id != db.describe_table("a_first").table_id


def test_update_table_changes_only_given_options(db) -> None:
    db.create_table("t", [("k", "STRING")], max_versions=2, ttl=100)
    d = db.update_table("t", max_versions=5)
    assert d.options == TableOptions(5, 100, 86400)
    assert db.update_table("t", ttl=-1, max_time_deviation=10).options == TableOptions(5, -1, 10)
    assert db.describe_table("t").options == TableOptions(5, -1, 10)


def test_update_table_option_takes_effect_on_writes(db, now) -> None:
    t = db.create_table("t", [("k", "STRING")])
    db.update_table("t", max_time_deviation=10)
    rejects(db, "OTSParameterInvalid", t.put_row, "k", {"x": (1, now - 60_000)},
            names=[str(now - 60_000), "'x'"])
    db.update_table("t", max_versions=2)
    t.update_row("k", put={"x": (1, now - 2000)})
    t.update_row("k", put={"x": (2, now - 1000)})
    assert [v for v, _ in t.get_row("k", max_versions=2).versions("x")] == [2, 1]


def test_delete_table(db) -> None:
    t = db.create_table("t", [("k", "STRING")])
    t.put_row("k", {"x": 1})
    db.delete_table("t")
    assert db.list_tables() == []
    rejects(db, "OTSObjectNotExist", db.table, "t", names=["'t'"])
    rejects(db, "OTSObjectNotExist", db.describe_table, "t", names=["'t'"])
    # A handle taken before the drop is dead too.
    rejects(db, "OTSObjectNotExist", t.get_row, "k", names=["'t'"])
    rejects(db, "OTSObjectNotExist", t.put_row, "k", {"x": 2}, names=["'t'"])
    rejects(db, "OTSObjectNotExist", t.update_row, "k", put={"x": 2})
    rejects(db, "OTSObjectNotExist", t.delete_row, "k")
    rejects(db, "OTSObjectNotExist", t.get_range, INF_MIN, INF_MAX)
    assert not [k for k, _ in engine_state(db) if k.startswith(b"\x10")], "rows left behind"


def test_recreated_table_starts_empty(db) -> None:
    t = db.create_table("t", [("k", "STRING")], max_versions=3)
    for i in range(50):
        t.put_row(f"k{i}", {"x": i})
    db.delete_table("t")
    t2 = db.create_table("t", [("k", "STRING")])
    assert t2.get_row("k1") is None
    assert list(t2.scan()) == []
    assert db.describe_table("t").options.max_versions == 1
    t2.put_row("k1", {"y": 1})
    assert pks(t2.scan()) == [("k1",)] and t2.get_row("k1").columns == {"y": 1}


def test_recreate_with_another_key_schema(db) -> None:
    t = db.create_table("t", [("k", "STRING")])
    t.put_row("a", {"x": 1})
    db.delete_table("t")
    t2 = db.create_table("t", [("n", "INTEGER"), ("s", "STRING")])
    t2.put_row((1, "a"), {"x": 2})
    assert pks(t2.scan()) == [(1, "a")]


def test_tables_do_not_see_each_other(db) -> None:
    a = db.create_table("a", [("k", "STRING")])
    b = db.create_table("b", [("k", "STRING")])
    a.put_row("x", {"v": 1})
    b.put_row("y", {"v": 2})
    assert pks(a.scan()) == [("x",)] and pks(b.scan()) == [("y",)]
    assert pks(b.scan(direction="backward")) == [("y",)]
    db.delete_table("a")
    assert pks(b.scan()) == [("y",)]


@pytest.mark.parametrize("engine_name", ["rocksdb"], indirect=True)
def test_reopen_keeps_tables_rows_and_options(db, open_db, now) -> None:
    t = db.create_table("t", [("s", "STRING"), ("i", "INTEGER")], max_versions=5, ttl=86400 * 30)
    t.put_row(("a", -1), [("x", 1, now - 2000), ("x", 2, now - 1000), ("b", b"\x00")])
    t.update_row(("a", 2), increment={"n": 5})
    db.update_table("t", max_versions=2)  # an update must persist too
    gone = db.create_table("gone", [("k", "STRING")])
    gone.put_row("k", {"x": 1})
    db.delete_table("gone")
    db.close()
    with open_db() as again:
        assert again.list_tables() == ["t"]
        d = again.describe_table("t")
        assert d.options == TableOptions(2, 86400 * 30, 86400)
        assert d.primary_key == [("s", "STRING"), ("i", "INTEGER")]
        t2 = again.table("t")
        assert t2.get_row(("a", -1), max_versions=2).versions("x") == [(2, now - 1000), (1, now - 2000)]
        assert t2.get_row(("a", 2))["n"] == 5
        # A table created after reopen gets a fresh id: it must not see old rows.
        g = again.create_table("gone", [("k", "STRING")])
        assert g.get_row("k") is None
        assert g.schema.table_id > d.table_id


def test_operations_on_a_closed_database(open_db) -> None:
    store = open_db("c")
    t = store.create_table("t", [("k", "STRING")])
    store.close()
    store.close()  # idempotent
    for call in (lambda: t.get_row("k"), lambda: t.put_row("k", {"x": 1}),
                 lambda: store.list_tables(), lambda: store.create_table("u", [("k", "STRING")])):
        with pytest.raises(Exception) as info:
            call()
        assert getattr(info.value, "code", None) == "OTSParameterInvalid"
