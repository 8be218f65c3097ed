"""Secondary indexes and predefined columns over the wire: the official SDK's
CreateTable with index metas, CreateIndex / DropIndex, DescribeTable, and index
reads (GetRow, GetRange on the index name); then the same through widetable.connect."""

from __future__ import annotations

import time

import pytest

tablestore = pytest.importorskip("tablestore")
from tablestore import (
    INF_MAX,
    INF_MIN,
    CapacityUnit,
    Direction,
    OTSServiceError,
    ReservedThroughput,
    Row,
    SecondaryIndexMeta,
    SecondaryIndexType,
    TableMeta,
    TableOptions,
)

import widetable
from widetable import WidetableError

PK = [("a", "STRING"), ("b", "INTEGER")]
DEFINED = [("c", "STRING"), ("d", "INTEGER")]


def poll(fn, want, timeout: float = 15.0):
    """``fn()`` until it returns ``want`` (a global index is eventually consistent)."""
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def index_range(ots, name: str, columns: list[str]) -> list:
    start = [(c, INF_MIN) for c in columns]
    end = [(c, INF_MAX) for c in columns]
    rows: list = []
    while start is not None:
        _, start, page, _ = ots.get_range(name, Direction.FORWARD, start, end)
        rows += [([v for _, v in r.primary_key], {n: v for n, v, _ in r.attribute_columns})
                 for r in page]
    return rows


def test_sdk_create_table_with_indexes_read_and_drop(ots) -> None:
    meta = TableMeta("t", PK, DEFINED)
    indexes = [
        SecondaryIndexMeta("by_c", ["c"], ["d"]),
        SecondaryIndexMeta("by_ad", ["a", "d"], ["c"], SecondaryIndexType.LOCAL_INDEX),
    ]
    ots.create_table(meta, TableOptions(), ReservedThroughput(CapacityUnit(0, 0)), indexes)
    d = ots.describe_table("t")
    assert d.table_meta.defined_columns == DEFINED
    got = {i.index_name: (i.primary_key_names, i.defined_column_names, i.index_type)
           for i in d.secondary_indexes}
    assert got == {  # the keys as declared (rows are keyed by the base key after them)
        "by_c": (["c"], ["d"], SecondaryIndexType.GLOBAL_INDEX),
        "by_ad": (["a", "d"], ["c"], SecondaryIndexType.LOCAL_INDEX),
    }
    for i in range(5):
        ots.put_row("t", Row([("a", f"k{i % 2}"), ("b", i)], [("c", f"v{4 - i}"), ("d", i * 10)]))
    want = [[f"v{4 - i}", f"k{i % 2}", i] for i in reversed(range(5))]
    rows = poll(lambda: [pk for pk, _ in index_range(ots, "by_c", ["c", "a", "b"])], want)
    assert rows == want
    assert index_range(ots, "by_c", ["c", "a", "b"])[0] == (["v0", "k0", 4], {"d": 40})
    # The local index is written with the row: no waiting.
    local = index_range(ots, "by_ad", ["a", "d", "b"])
    assert local[:2] == [(["k0", 0, 0], {"c": "v4"}), (["k0", 20, 2], {"c": "v2"})]
    _, row, _ = ots.get_row("by_ad", [("a", "k1"), ("d", 30), ("b", 3)])
    assert row.attribute_columns[0][:2] == ("c", "v1")
    # Writes to an index fail as the library's do; predefined types are enforced.
    e = pytest.raises(OTSServiceError, ots.put_row, "by_c",
                      Row([("c", "x"), ("a", "y"), ("b", 1)], [("z", 1)])).value
    assert (e.get_http_status(), e.get_error_code()) == (400, "OTSParameterInvalid")
    assert "index" in e.get_error_message()
    e = pytest.raises(OTSServiceError, ots.put_row, "t", Row([("a", "z"), ("b", 1)], [("d", "x")])).value
    assert e.get_error_code() == "OTSParameterInvalid"
    # An update moves the global entry.
    ots.update_row("t", Row([("a", "k0"), ("b", 0)], {"PUT": [("c", "zz")]}), None)
    rows = poll(lambda: index_range(ots, "by_c", ["c", "a", "b"])[-1][0], ["zz", "k0", 0])
    assert rows == ["zz", "k0", 0]
    ots.delete_secondary_index("t", "by_c")
    assert [i.index_name for i in ots.describe_table("t").secondary_indexes] == ["by_ad"]
    e = pytest.raises(OTSServiceError, ots.get_row, "by_c", [("c", "v0"), ("a", "k0"), ("b", 4)]).value
    assert e.get_error_code() == "OTSObjectNotExist"


def test_sdk_create_index_backfills_existing_rows(ots) -> None:
    ots.create_table(TableMeta("t", PK, DEFINED), TableOptions(), ReservedThroughput(CapacityUnit(0, 0)))
    for i in range(3):
        ots.put_row("t", Row([("a", "x"), ("b", i)], [("c", "same"), ("d", 7 - i)]))
    ots.create_secondary_index("t", SecondaryIndexMeta("by_d", ["d"], ["c"]), True)
    ots.create_secondary_index("t", SecondaryIndexMeta("empty", ["c"], []), False)
    want = [[5, "x", 2], [6, "x", 1], [7, "x", 0]]
    assert poll(lambda: [pk for pk, _ in index_range(ots, "by_d", ["d", "a", "b"])], want) == want
    assert index_range(ots, "empty", ["c", "a", "b"]) == []  # include_base_data=False
    e = pytest.raises(OTSServiceError, ots.create_secondary_index, "t",
                      SecondaryIndexMeta("by_d", ["c"], []), True).value
    assert e.get_error_code() == "OTSObjectAlreadyExist"
    e = pytest.raises(OTSServiceError, ots.create_secondary_index, "t",
                      SecondaryIndexMeta("bad", ["nope"], []), True).value
    assert e.get_error_code() == "OTSParameterInvalid"
    e = pytest.raises(OTSServiceError, ots.delete_secondary_index, "t", "missing").value
    assert e.get_error_code() == "OTSObjectNotExist"


def test_sdk_bad_index_in_create_table_creates_nothing(ots) -> None:
    bad = [SecondaryIndexMeta("ok", ["c"], []), SecondaryIndexMeta("bad", ["a", "zzz"], [],
                                                                   SecondaryIndexType.LOCAL_INDEX)]
    e = pytest.raises(OTSServiceError, ots.create_table, TableMeta("t", PK, DEFINED), TableOptions(),
                      ReservedThroughput(CapacityUnit(0, 0)), bad).value
    assert e.get_error_code() == "OTSParameterInvalid"
    assert "t" not in ots.list_table()


def test_connect_indexes(remote_db) -> None:
    t = remote_db.create_table("t", PK, defined_columns=DEFINED)
    t.put_row(("x", 1), {"c": "m", "d": 3})
    g = remote_db.create_index("t", "g", primary_key=["c"], defined_columns=["d"])
    loc = remote_db.create_index("t", "l", primary_key=["a", "d"], index_type="LOCAL")
    t.put_row(("x", 2), {"c": "a", "d": 1})
    d = remote_db.describe_table("t")
    assert d.defined_columns == DEFINED
    assert [(i.name, i.index_type, i.primary_key, i.base_key, i.defined_columns)
            for i in d.indexes] == [
        ("g", "GLOBAL", ("c",), ("a", "b"), ("d",)), ("l", "LOCAL", ("a", "d"), ("b",), ()),
    ]
    want = [(("a", "x", 2), {"d": 1}), (("m", "x", 1), {"d": 3})]
    got = poll(lambda: [(r.primary_key, r.columns) for r in g.scan()], want)
    assert got == want
    assert [r.primary_key for r in loc.scan()] == [("x", 1, 2), ("x", 3, 1)]
    page = g.get_range(("m", widetable.INF_MIN, widetable.INF_MIN), (widetable.INF_MAX,) * 3)
    assert [r.primary_key for r in page.rows] == [("m", "x", 1)]
    assert g.get_row(("a", "x", 2)).columns == {"d": 1}
    with pytest.raises(WidetableError) as info:
        g.put_row(("q", "x", 9), {"d": 1})
    assert info.value.code == "OTSParameterInvalid"
    remote_db.drop_index("t", "g")
    assert [i.name for i in remote_db.describe_table("t").indexes] == ["l"]
    with pytest.raises(WidetableError) as info:
        remote_db.table("g")
    assert info.value.code == "OTSObjectNotExist"


def test_sdk_batch_get_row_on_an_index_returns_its_keys(ots) -> None:
    from tablestore import BatchGetRowRequest, TableInBatchGetRowItem

    meta = TableMeta("t", PK, DEFINED)
    local = SecondaryIndexMeta("by_ac", ["a", "c"], ["d"], SecondaryIndexType.LOCAL_INDEX)
    ots.create_table(meta, TableOptions(), ReservedThroughput(CapacityUnit(0, 0)), [local])
    ots.put_row("t", Row([("a", "x"), ("b", 1)], [("c", "cv"), ("d", 5)]))
    key = [("a", "x"), ("c", "cv"), ("b", 1)]
    req = BatchGetRowRequest()
    req.add(TableInBatchGetRowItem("by_ac", [key, [("a", "x"), ("c", "no"), ("b", 1)]],
                                   max_version=1))
    got = ots.batch_get_row(req).get_result_by_table("by_ac")
    assert got[0].is_ok and got[0].row.primary_key == key
    assert [c[:2] for c in got[0].row.attribute_columns] == [("d", 5)]
    assert got[1].is_ok and got[1].row is None


def test_connect_describes_index_health_and_background(remote_db) -> None:
    """describe_table over widetable.connect carries the rows too long for a global index and
    the store's background loops (over the native protocol; Tablestore's has no fields for
    them)."""
    t = remote_db.create_table("h", PK, defined_columns=DEFINED)
    remote_db.create_index("h", "g", primary_key=["c"])
    t.put_row(("x", 1), {"c": "y" * 2000})
    if remote_db.protocol != "native":
        pytest.skip("Tablestore's DescribeTable carries no index health or background state")
    assert poll(lambda: remote_db.describe_table("h").indexes[0].too_long_rows, 1) == 1
    d = remote_db.describe_table("h")
    assert d.indexes[0].error is None
    assert {b.name for b in d.background} == {"purge", "maintenance", "indexer"}
    assert all(b.ok for b in d.background)
