"""Secondary indexes: declaration rules, local and global maintenance, reads, backfill, verify."""

from __future__ import annotations

import random
import threading

import pytest

from widetable import WidetableError
from widetable.table.values import now_ms

PK = [("k", "STRING"), ("s", "INTEGER")]
DEFINED = [("c", "STRING"), ("n", "INTEGER"), ("d", "DOUBLE")]


@pytest.fixture
def base(db):
    db.create_table("t", PK, defined_columns=DEFINED)
    return db.table("t")


def test_predefined_column_types_are_enforced(db, base):
    with pytest.raises(WidetableError, match="predefined as STRING") as err:
        base.put_row(("a", 1), {"c": 5})
    assert err.value.code == "OTSParameterInvalid"
    with pytest.raises(WidetableError, match="predefined as DOUBLE"):
        base.update_row(("a", 1), put={"d": 1})
    with pytest.raises(WidetableError, match="predefined as STRING"):
        base.update_row(("a", 1), increment={"c": 1})
    res = db.batch_write_row([("t", "put", ("a", 2), {"n": "x"})])
    assert not res[0].ok and "predefined as INTEGER" in str(res[0].error)
    assert base.get_row(("a", 1)) is None and base.get_row(("a", 2)) is None
    base.put_row(("a", 1), {"c": "x", "n": 1, "d": 1.5, "free": [1] and 3})
    assert db.describe_table("t").defined_columns == DEFINED


def test_index_declaration_errors(db, base):
    cases = [
        ({"primary_key": ["zz"]}, "neither a primary key column nor a predefined"),
        ({"primary_key": ["d"]}, "key columns must be STRING, INTEGER or BINARY"),
        ({"primary_key": ["c"], "index_type": "LOCAL"}, "must start with the partition key 'k'"),
        ({"primary_key": ["c"], "defined_columns": ["c"]}, "already in the index key"),
        ({"primary_key": ["c"], "defined_columns": ["nope"]}, "not a predefined column"),
        ({"primary_key": ["c"], "index_type": "BTREE"}, "index_type must be"),
    ]
    for kwargs, message in cases:
        with pytest.raises(WidetableError, match=message) as err:
            db.create_index("t", "ix", **kwargs)
        assert err.value.code == "OTSParameterInvalid"
    db.create_table("mv", PK, max_versions=2, defined_columns=DEFINED)
    with pytest.raises(WidetableError, match="max_versions 1"):
        db.create_index("mv", "ix", primary_key=["c"])
    db.create_index("t", "ix", primary_key=["c"])
    with pytest.raises(WidetableError) as err:
        db.create_index("t", "ix", primary_key=["n"])
    assert err.value.code == "OTSObjectAlreadyExist"
    with pytest.raises(WidetableError):
        db.create_table("ix", PK)


def test_index_key_appends_the_base_key(db, base):
    db.create_index("t", "by_c", primary_key=["c"], defined_columns=["n"])
    db.create_index("t", "by_k_n", primary_key=["k", "n"], index_type="LOCAL")
    assert db.table("by_c").schema.pk_names == ("c", "k", "s")
    assert db.table("by_k_n").schema.pk_names == ("k", "n", "s")
    base.put_row(("a", 1), {"c": "x", "n": 10})
    base.put_row(("a", 2), {"n": 11})  # no c: not in by_c
    db.wait_for_indexes(10)
    assert [r.primary_key for r in db.table("by_c").scan()] == [("x", "a", 1)]
    assert db.table("by_c").get_row(("x", "a", 1))["n"] == 10
    assert [r.primary_key for r in db.table("by_k_n").scan()] == [("a", 10, 1), ("a", 11, 2)]


def test_local_index_is_visible_when_the_write_returns(db, base):
    db.create_index("t", "loc", primary_key=["k", "c"], defined_columns=["n"], index_type="LOCAL")
    ix = db.table("loc")
    base.put_row(("a", 1), {"c": "x", "n": 1})
    assert ix.get_row(("a", "x", 1))["n"] == 1
    base.update_row(("a", 1), put={"c": "y"})
    assert ix.get_row(("a", "x", 1)) is None and ix.get_row(("a", "y", 1))["n"] == 1
    base.update_row(("a", 1), increment={"n": 4})
    assert ix.get_row(("a", "y", 1))["n"] == 5
    base.update_row(("a", 1), delete_column=["c"])
    assert list(ix.scan()) == []
    base.put_row(("a", 1), {"c": "z"})
    db.batch_write_row([("t", "put", ("a", 2), {"c": "w"}), ("t", "delete", ("a", 1))])
    assert [r.primary_key for r in ix.scan()] == [("a", "w", 2)]
    with db.start_local_transaction("t", "a") as txn:
        txn.put_row(("a", 3), {"c": "v"})
        txn.delete_row(("a", 2))
    assert [r.primary_key for r in ix.scan()] == [("a", "v", 3)]
    assert db.verify_index("t", "loc").ok


def test_local_entries_are_those_of_the_row_written(db, base):
    """put_row hands the feed the row as it encoded it: the entry is the stored row's,
    whatever the caller does with its dict afterwards, and timed cells take the slow path."""
    db.create_index("t", "loc", primary_key=["k", "c"], defined_columns=["n", "d"], index_type="LOCAL")
    ix = db.table("loc")
    cols = {"c": "x", "n": 1, "other": "o"}
    base.put_row(("a", 1), cols)
    cols["c"], cols["n"] = "y", 2  # the caller reuses its dict
    assert [(r.primary_key, r["n"]) for r in ix.scan()] == [(("a", "x", 1), 1)]
    base.put_row(("a", 1), cols)
    base.put_row(("a", 1), cols)  # an identical rewrite
    now = now_ms()
    base.put_row(("a", 2), {"c": ("t", now - 1), "n": (3, now), "d": 0.5})  # timed cells
    assert [(r.primary_key, r["n"]) for r in ix.scan()] == [(("a", "t", 2), 3), (("a", "y", 1), 2)]
    assert ix.get_row(("a", "t", 2)).columns["d"] == 0.5
    assert db.verify_index("t", "loc").ok


def test_global_index_follows_updates_and_deletes(db, base):
    db.create_index("t", "glob", primary_key=["c"], defined_columns=["n"])
    base.put_row(("a", 1), {"c": "x", "n": 1})
    base.put_row(("b", 1), {"c": "x", "n": 2})
    base.update_row(("a", 1), put={"c": "y"})
    base.delete_row(("b", 1))
    assert db.wait_for_indexes(10)
    assert [r.primary_key for r in db.table("glob").scan()] == [("y", "a", 1)]
    assert db.verify_index("t", "glob").ok
    lag = db.describe_table("t").indexes[0]
    assert lag.index_type == "GLOBAL" and lag.lag_ms == 0


def test_index_views_read_like_tables_and_refuse_writes(db, base):
    db.create_index("t", "glob", primary_key=["c"], defined_columns=["n"])
    for i in range(20):
        base.put_row(("a", i), {"c": f"c{i % 5}", "n": i, "other": "o"})
    db.wait_for_indexes(10)
    ix = db.table("glob")
    page = ix.get_range(("c1",), ("c2",), limit=10)
    assert [r.primary_key for r in page.rows] == [("c1", "a", i) for i in (1, 6, 11, 16)]
    full = ix.get_range(("c1",), ("c2",), fetch_base=True)
    assert [r.primary_key for r in full.rows] == [("a", i) for i in (1, 6, 11, 16)]
    assert full.rows[0]["other"] == "o"
    assert ix.get_row(("c1", "a", 1), fetch_base=True)["other"] == "o"
    assert len(list(ix.scan(fetch_base=True))) == 20
    for write in (lambda: ix.put_row(("c1", "a", 1), {"n": 1}),
                  lambda: ix.update_row(("c1", "a", 1), put={"n": 1}),
                  lambda: ix.delete_row(("c1", "a", 1))):
        with pytest.raises(WidetableError, match="cannot write to index 'glob'") as err:
            write()
        assert err.value.code == "OTSParameterInvalid"
    res = db.batch_write_row([("glob", "put", ("c1", "a", 1), {"n": 1})])
    assert not res[0].ok and "cannot write to index" in str(res[0].error)
    assert "glob" not in db.list_tables()


def test_drop_index_and_table(db, base):
    db.create_index("t", "glob", primary_key=["c"])
    db.create_index("t", "loc", primary_key=["k", "c"], index_type="LOCAL")
    base.put_row(("a", 1), {"c": "x"})
    db.drop_index("t", "glob")
    with pytest.raises(WidetableError) as err:
        db.table("glob")
    assert err.value.code == "OTSObjectNotExist"
    assert [i.name for i in db.describe_table("t").indexes] == ["loc"]
    db.delete_table("t")
    with pytest.raises(WidetableError):
        db.table("loc")


@pytest.mark.parametrize("kind", ["LOCAL", "GLOBAL"])
def test_backfill_with_concurrent_writers_stays_correct(db, base, kind):
    for i in range(3000):
        base.put_row((f"k{i % 7}", i), {"c": f"c{i % 13}", "n": i})
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while not stop.is_set():
                i = rng.randrange(3500)
                op = rng.random()
                if op < 0.5:
                    base.put_row((f"k{i % 7}", i), {"c": f"c{rng.randrange(13)}", "n": i})
                elif op < 0.8:
                    base.update_row((f"k{i % 7}", i), put={"c": f"c{rng.randrange(13)}"})
                else:
                    base.delete_row((f"k{i % 7}", i))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    try:
        db.create_index("t", "ix", primary_key=["k", "c"] if kind == "LOCAL" else ["c"],
                        defined_columns=["n"], index_type=kind, progress=False)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors
    assert db.wait_for_indexes(30)
    report = db.verify_index("t", "ix")
    assert report.ok, (report.missing[:5], report.stale[:5])
    assert report.entries == len([r for r in base.scan() if "c" in r])


def test_include_base_data_false_leaves_old_rows_out(db, base):
    base.put_row(("a", 1), {"c": "x"})
    db.create_index("t", "ix", primary_key=["c"], include_base_data=False)
    base.put_row(("a", 2), {"c": "y"})
    db.wait_for_indexes(10)
    report = db.verify_index("t", "ix")
    assert report.missing == [("x", "a", 1)] and report.stale == []


def test_indexes_survive_reopen(open_db, engine_name):
    if engine_name == "memory":
        pytest.skip("a memory store does not survive close")
    db = open_db()
    db.create_table("t", PK, defined_columns=DEFINED)
    db.create_index("t", "glob", primary_key=["c"])
    db.create_index("t", "loc", primary_key=["k", "c"], index_type="LOCAL")
    db.table("t").put_row(("a", 1), {"c": "x"})
    db.wait_for_indexes(10)
    db.close()
    db = open_db()
    t = db.table("t")
    t.update_row(("a", 1), put={"c": "y"})
    assert db.table("loc").get_row(("a", "y", 1)) is not None
    assert db.wait_for_indexes(10)
    assert [r.primary_key for r in db.table("glob").scan()] == [("y", "a", 1)]
    assert db.verify_index("t", "glob").ok and db.verify_index("t", "loc").ok
