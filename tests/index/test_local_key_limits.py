"""A LOCAL index and rows whose index key value is over the key limits (a string column of
more than 1 KB): the write that would need such an entry fails alone, a create_index that
would need one leaves nothing behind, and a row that predates the index stays writable."""

from __future__ import annotations

import pytest

from widetable import WidetableError
from widetable.keys.codec import MAX_KEY_VALUE_BYTES

PK = [("k", "STRING"), ("n", "INTEGER")]
BIG = "x" * (MAX_KEY_VALUE_BYTES + 1)


@pytest.fixture
def t(db):
    db.create_table("t", PK, defined_columns=[("c", "STRING")])
    return db.table("t")


def test_a_put_whose_local_entry_is_over_the_limits_fails_and_writes_nothing(db, t):
    db.create_index("t", "l", ["k", "c"], index_type="LOCAL", progress=False)
    with pytest.raises(WidetableError) as err:
        t.put_row(("a", 1), {"c": BIG})
    assert err.value.code == "OTSParameterInvalid"  # a key value over 1 KB
    assert t.get_row(("a", 1)) is None
    assert list(db.table("l").scan()) == []


def test_batch_rows_a_local_index_refuses_fail_alone(db, t):
    db.create_table("other", [("k", "STRING")])
    db.create_index("t", "l", ["k", "c"], index_type="LOCAL", progress=False)
    results = db.batch_write_row([
        ("t", "put", ("a", 1), {"c": "ok"}),
        ("t", "put", ("a", 2), {"c": BIG}),
        ("other", "put", ("z",), {"v": 1}),
        ("t", "update", ("a", 3), {"put": {"c": "fine"}}),
        ("t", "update", ("a", 4), {"put": {"c": BIG}}),
    ])
    assert [r.error.code if r.error else None for r in results] == [
        None, "OTSParameterInvalid", None, None, "OTSParameterInvalid"]
    assert [r.primary_key for r in t.scan()] == [("a", 1), ("a", 3)]
    assert db.table("other").get_row(("z",))["v"] == 1
    assert [r.primary_key for r in db.table("l").scan()] == [("a", "fine", 3), ("a", "ok", 1)]
    assert db.verify_index("t", "l").ok


def test_create_index_that_cannot_backfill_a_row_leaves_nothing(db, t):
    t.put_row(("a", 1), {"c": "ok"})
    t.put_row(("a", 2), {"c": BIG})
    with pytest.raises(WidetableError) as err:
        db.create_index("t", "l", ["k", "c"], index_type="LOCAL", progress=False)
    assert err.value.code == "OTSParameterInvalid"  # a key value over 1 KB
    assert db.describe_table("t").indexes == []
    with pytest.raises(WidetableError) as missing:
        db.table("l")
    assert missing.value.code == "OTSObjectNotExist"
    t.delete_row(("a", 2))  # the table works as before
    db.create_index("t", "l", ["k", "c"], index_type="LOCAL", progress=False)
    assert [r.primary_key for r in db.table("l").scan()] == [("a", "ok", 1)]


def test_a_row_predating_the_index_stays_writable(db, t):
    t.put_row(("a", 1), {"c": BIG})
    db.create_index("t", "l", ["k", "c"], index_type="LOCAL", include_base_data=False,
                    progress=False)
    assert db.verify_index("t", "l").ok  # no index can hold that row
    t.update_row(("a", 1), put={"c": "short"})  # the old row had no entry to remove
    assert [r.primary_key for r in db.table("l").scan()] == [("a", "short", 1)]
    t.put_row(("a", 2), {"c": "y"})
    db.table("t").delete_row(("a", 1))
    assert [r.primary_key for r in db.table("l").scan()] == [("a", "y", 2)]
    assert db.verify_index("t", "l").ok


def test_a_global_index_skips_such_rows(db, t):
    db.create_index("t", "g", ["c"], progress=False)
    t.put_row(("a", 1), {"c": BIG})
    t.put_row(("a", 2), {"c": "ok"})
    assert db.wait_for_indexes(30)
    assert [r.primary_key for r in db.table("g").scan()] == [("ok", "a", 2)]
    assert db.verify_index("t", "g").ok
