"""fetch_base while a global index lags: a base row is returned only while it still holds
the entry's values. The applier is stopped here and driven by hand, so the index is
stale exactly when the test says."""

from __future__ import annotations

import pytest

from widetable import INF_MAX, INF_MIN, ColumnPagination, col

PK = [("id", "STRING")]
DEFINED = [("status", "STRING"), ("amount", "INTEGER")]


def drain(db) -> None:
    while db._indexer.run_once():
        pass


@pytest.fixture
def orders(db):
    """Table ``orders`` with the GLOBAL index ``by_status`` (status, then id); three paid
    orders applied to the index, the applier then stopped."""
    db.create_table("orders", PK, defined_columns=DEFINED)
    db.create_index("orders", "by_status", primary_key=["status"])
    db._indexer.stop()
    t = db.table("orders")
    for i, amount in enumerate((10, 20, 30), 1):
        t.put_row((f"o{i}",), {"status": "paid", "amount": amount})
    drain(db)
    return db, t


def paid(index, **options) -> list[str]:
    rows = index.get_range(("paid", INF_MIN), ("paid", INF_MAX), fetch_base=True, **options).rows
    scanned = list(index.scan(("paid", INF_MIN), ("paid", INF_MAX), fetch_base=True, **options))
    assert [r.primary_key for r in scanned] == [r.primary_key for r in rows]
    return [r.primary_key[0] for r in rows]


def test_rows_changed_since_the_entry_are_left_out(orders) -> None:
    db, t = orders
    index = db.table("by_status")
    assert paid(index) == ["o1", "o2", "o3"]
    t.update_row(("o1",), put={"status": "refunded"})
    t.update_row(("o2",), delete_column=["status"])  # the row keeps no indexed value
    t.update_row(("o3",), put={"amount": 31})  # not an index column: still paid
    # the index has not caught up: it still holds all three under "paid"
    assert [r.primary_key for r in index.scan()] == [("paid", f"o{i}") for i in (1, 2, 3)]
    assert paid(index) == ["o3"]
    assert index.get_row(("paid", "o1"), fetch_base=True) is None
    assert index.get_row(("paid", "o2"), fetch_base=True) is None
    assert index.get_row(("paid", "o3"), fetch_base=True)["amount"] == 31
    # projections and filters do not hide the check
    assert paid(index, columns=["amount"]) == ["o3"]
    assert paid(index, filter=col("amount") > 0) == ["o3"]
    assert paid(index, filter=ColumnPagination(0, 1)) == ["o3"]
    drain(db)
    assert paid(index) == ["o3"]
    refunded = index.get_row(("refunded", "o1"), fetch_base=True)
    assert refunded["status"] == "refunded"


def test_a_row_changed_back_matches_again(orders) -> None:
    db, t = orders
    index = db.table("by_status")
    t.update_row(("o1",), put={"status": "refunded"})
    t.update_row(("o1",), put={"status": "paid", "amount": 11})
    assert index.get_row(("paid", "o1"), fetch_base=True)["amount"] == 11
    assert paid(index) == ["o1", "o2", "o3"]
