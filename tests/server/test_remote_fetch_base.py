"""fetch_base through widetable.connect while a global index lags (both protocols): the
client's reads of base rows are checked against each entry's key, as the store's are.
The store is served in this process, so its applier can be stopped and driven by hand."""

from __future__ import annotations

import pytest
from index.test_fetch_base import DEFINED, PK, drain  # type: ignore[import-not-found]

import widetable
from widetable import INF_MAX, INF_MIN, ColumnPagination, col

from . import serving


@pytest.fixture(params=["native", "tablestore"])
def lagging(request, in_process):
    """``(store, remote)``: ``orders`` and its GLOBAL index ``by_status`` with three paid
    orders applied, the applier stopped; ``remote`` is widetable.connect on the store."""
    store, server = in_process
    store.create_table("orders", PK, defined_columns=DEFINED)
    store.create_index("orders", "by_status", primary_key=["status"])
    store._indexer.stop()
    for i in (1, 2, 3):
        store.table("orders").put_row((f"o{i}",), {"status": "paid", "amount": 10 * i})
    drain(store)
    remote = widetable.connect(server.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                               access_key_secret=serving.ACCESS_KEY_SECRET,
                               protocol=request.param)
    yield store, remote
    remote.close()


def paid(index, **options) -> list[str]:
    rows = index.get_range(("paid", INF_MIN), ("paid", INF_MAX), fetch_base=True, **options).rows
    scanned = list(index.scan(("paid", INF_MIN), ("paid", INF_MAX), fetch_base=True, **options))
    assert [r.primary_key for r in scanned] == [r.primary_key for r in rows]
    return [r.primary_key[0] for r in rows]


def test_rows_changed_since_the_entry_are_left_out(lagging) -> None:
    store, remote = lagging
    index = remote.table("by_status")
    assert paid(index) == ["o1", "o2", "o3"]
    remote.table("orders").update_row(("o1",), put={"status": "refunded"})
    remote.table("orders").update_row(("o2",), delete_column=["status"])
    assert [r.primary_key for r in index.scan()] == [("paid", f"o{i}") for i in (1, 2, 3)]
    assert paid(index) == ["o3"]
    assert index.get_row(("paid", "o1"), fetch_base=True) is None
    assert index.get_row(("paid", "o3"), fetch_base=True)["amount"] == 30
    assert paid(index, columns=["amount"]) == ["o3"]
    assert index.get_row(("paid", "o3"), fetch_base=True, columns=["amount"]).columns == {
        "amount": 30}
    assert paid(index, filter=col("amount") > 0) == ["o3"]
    assert paid(index, filter=col("amount") > 100) == []
    assert paid(index, filter=ColumnPagination(0, 1)) == ["o3"]
    drain(store)
    assert paid(index) == ["o3"]
    assert index.get_row(("refunded", "o1"), fetch_base=True)["status"] == "refunded"
