"""The official ``tablestore`` SDK, unchanged, against ``widetable serve``: every served API,
V2 and V4 signatures (the ``ots`` fixture), the async client, and the error codes."""

from __future__ import annotations

import asyncio

import pytest

tablestore = pytest.importorskip("tablestore")
from tablestore import (
    INF_MAX,
    INF_MIN,
    BatchGetRowRequest,
    BatchWriteRowRequest,
    CapacityUnit,
    ComparatorType,
    CompositeColumnCondition,
    Condition,
    DeleteRowItem,
    Direction,
    LogicalOperator,
    OTSServiceError,
    PutRowItem,
    ReservedThroughput,
    ReturnType,
    Row,
    RowExistenceExpectation,
    SingleColumnCondition,
    TableInBatchGetRowItem,
    TableInBatchWriteRowItem,
    TableMeta,
    TableOptions,
    UpdateRowItem,
)

from . import serving

PK = [("a", "STRING"), ("b", "INTEGER")]


def make(ots, name="t", pk=PK, **options):
    ots.create_table(TableMeta(name, pk), TableOptions(**options), ReservedThroughput(CapacityUnit(0, 0)))


def error(fn, *args, **kwargs) -> OTSServiceError:
    with pytest.raises(OTSServiceError) as info:
        fn(*args, **kwargs)
    return info.value


def test_table_apis(ots) -> None:
    make(ots, "t", max_version=3, time_to_live=-1)
    assert ots.list_table() == ("t",)
    d = ots.describe_table("t")
    assert d.table_meta.schema_of_primary_key == PK
    assert d.table_options.max_version == 3 and d.table_options.time_to_live == -1
    u = ots.update_table("t", TableOptions(max_version=5))
    assert u.table_options.max_version == 5
    e = error(make, ots, "t")
    assert (e.get_http_status(), e.get_error_code()) == (409, "OTSObjectAlreadyExist")
    ots.delete_table("t")
    e = error(ots.describe_table, "t")
    assert (e.get_http_status(), e.get_error_code()) == (404, "OTSObjectNotExist")
    assert e.get_error_message().startswith("Requested table does not exist.")


def test_rows_and_capacity_units(ots) -> None:
    make(ots)
    cu, ret = ots.put_row("t", Row([("a", "x"), ("b", 1)], [("i", 5), ("s", "hi"), ("bin", bytearray(b"\0z")),
                                                           ("f", 1.5), ("ok", True)]))
    assert (cu.read, cu.write) == (0, 1)
    cu, row, _ = ots.get_row("t", [("a", "x"), ("b", 1)])
    assert cu.read == 1 and row.primary_key == [("a", "x"), ("b", 1)]
    assert {n: v for n, v, _ in row.attribute_columns} == {
        "bin": bytearray(b"\0z"), "f": 1.5, "i": 5, "ok": True, "s": "hi"}
    cu, row, _ = ots.get_row("t", [("a", "x"), ("b", 2)])
    assert row is None and cu.read == 1  # a missing row costs 1 read CU
    big = "x" * 10000
    ots.put_row("t", Row([("a", "big"), ("b", 1)], [("v", big)]))
    cu, _, _ = ots.get_row("t", [("a", "big"), ("b", 1)])
    assert cu.read == 3  # ceil((1 + 3 + 1 + 8 + 1 + 10000) / 4096)
    cu, ret = ots.update_row("t", Row([("a", "x"), ("b", 1)], {"PUT": [("n", 1)], "DELETE_ALL": ["s"],
                                                               "INCREMENT": [("i", 2)]}),
                             Condition(RowExistenceExpectation.EXPECT_EXIST), return_type=ReturnType.RT_PK)
    assert ret.primary_key == [("a", "x"), ("b", 1)] and cu.read == 1
    _, row, _ = ots.get_row("t", [("a", "x"), ("b", 1)], columns_to_get=["i", "n", "s"])
    assert {n: v for n, v, _ in row.attribute_columns} == {"i": 7, "n": 1}
    ots.delete_row("t", Row([("a", "x"), ("b", 1)]), Condition(RowExistenceExpectation.IGNORE))
    assert ots.get_row("t", [("a", "x"), ("b", 1)])[1] is None


def test_conditions_and_filters(ots) -> None:
    make(ots)
    pk = [("a", "x"), ("b", 1)]
    ots.put_row("t", Row(pk, [("n", 5)]))
    e = error(ots.put_row, "t", Row(pk, [("n", 1)]), Condition(RowExistenceExpectation.EXPECT_NOT_EXIST))
    assert (e.get_http_status(), e.get_error_code()) == (403, "OTSConditionCheckFail")
    assert e.get_error_message().startswith("Condition check failed.")
    cond = Condition(RowExistenceExpectation.EXPECT_EXIST, SingleColumnCondition("n", 4, ComparatorType.GREATER_THAN))
    ots.update_row("t", Row(pk, {"PUT": [("n", 6)]}), cond)
    both = CompositeColumnCondition(LogicalOperator.AND)
    both.add_sub_condition(SingleColumnCondition("n", 6, ComparatorType.EQUAL))
    both.add_sub_condition(SingleColumnCondition("m", 1, ComparatorType.EQUAL, pass_if_missing=False))
    assert ots.get_row("t", pk, column_filter=both)[1] is None
    assert ots.get_row("t", pk, column_filter=SingleColumnCondition("n", 6, ComparatorType.EQUAL))[1]


def test_get_range_both_directions_with_next_start(ots) -> None:
    make(ots)
    for i in range(12):
        ots.put_row("t", Row([("a", "r"), ("b", i)], [("v", i)]))
    start, end, seen = [("a", INF_MIN), ("b", INF_MIN)], [("a", INF_MAX), ("b", INF_MAX)], []
    while start:
        _, start, rows, _ = ots.get_range("t", Direction.FORWARD, start, end, limit=5)
        seen += [r.primary_key[1][1] for r in rows]
    assert seen == list(range(12))
    _, nxt, rows, _ = ots.get_range("t", Direction.BACKWARD, [("a", "r"), ("b", INF_MAX)],
                                    [("a", "r"), ("b", 3)], limit=4,
                                    column_filter=SingleColumnCondition("v", 10, ComparatorType.NOT_EQUAL))
    assert [r.primary_key[1][1] for r in rows] == [11, 9, 8, 7] and nxt == [("a", "r"), ("b", 6)]


def test_batches_have_a_result_per_row(ots) -> None:
    make(ots)
    req = BatchWriteRowRequest()
    req.add(TableInBatchWriteRowItem("t", [
        PutRowItem(Row([("a", "p"), ("b", 1)], [("v", 1)]), Condition("IGNORE")),
        UpdateRowItem(Row([("a", "p"), ("b", 2)], {"PUT": [("v", 2)]}), Condition("EXPECT_EXIST")),
        DeleteRowItem(Row([("a", "p"), ("b", 3)]), Condition("IGNORE")),
    ]))
    res = ots.batch_write_row(req)
    assert not res.is_all_succeed()
    assert [r.is_ok for r in res.get_put_by_table("t")] == [True]
    assert [r.error_code for r in res.get_update_by_table("t")] == ["OTSConditionCheckFail"]
    req = BatchGetRowRequest()
    req.add(TableInBatchGetRowItem("t", [[("a", "p"), ("b", 1)], [("a", "p"), ("b", 9)]], max_version=1))
    req.add(TableInBatchGetRowItem("missing", [[("a", "p"), ("b", 1)]], max_version=1))
    res = ots.batch_get_row(req)
    got = res.get_result_by_table("t")
    assert got[0].is_ok and got[0].row.attribute_columns[0][:2] == ("v", 1)
    assert got[1].is_ok and got[1].row is None
    assert res.get_result_by_table("missing")[0].error_code == "OTSObjectNotExist"


def test_local_transactions(ots) -> None:
    make(ots)
    tid = ots.start_local_transaction("t", [("a", "k")])
    ots.put_row("t", Row([("a", "k"), ("b", 1)], [("v", 1)]), transaction_id=tid)
    assert ots.get_row("t", [("a", "k"), ("b", 1)])[1] is None
    assert ots.get_row("t", [("a", "k"), ("b", 1)], transaction_id=tid)[1] is not None
    ots.commit_transaction(tid)
    assert ots.get_row("t", [("a", "k"), ("b", 1)])[1] is not None
    tid = ots.start_local_transaction("t", [("a", "k")])
    ots.delete_row("t", Row([("a", "k"), ("b", 1)]), Condition("IGNORE"), transaction_id=tid)
    ots.abort_transaction(tid)
    assert ots.get_row("t", [("a", "k"), ("b", 1)])[1] is not None
    assert error(ots.commit_transaction, tid).get_error_code() == "OTSSessionNotExist"


def test_auto_increment_returns_the_key(ots) -> None:
    from tablestore import PK_AUTO_INCR

    make(ots, "m", [("c", "STRING"), ("s", "INTEGER", PK_AUTO_INCR)])
    assert ots.describe_table("m").table_meta.schema_of_primary_key[1] == ("s", "INTEGER", PK_AUTO_INCR)
    _, ret = ots.put_row("m", Row([("c", "x"), ("s", PK_AUTO_INCR)], [("t", 1)]), return_type=ReturnType.RT_PK)
    assert ret.primary_key[0] == ("c", "x") and ret.primary_key[1][1] > 0


def test_unsupported_apis_say_so(ots) -> None:
    make(ots)
    # search indexes are served now (tests/server/test_search_sdk.py): a missing one is named
    e = error(ots.compute_splits, "t", "idx")
    assert e.get_error_code() == "OTSObjectNotExist" and "'idx'" in e.get_error_message()
    # SQL is served now (tests/sql/test_sql_sdk.py): a statement without tables runs
    rows, _, _ = ots.exe_sql_query("select 1")
    assert [r.attribute_columns for r in rows] == [[("1", 1)]]


def test_async_client(server) -> None:
    from tablestore import AsyncOTSClient

    async def run():
        async with AsyncOTSClient(server.endpoint, serving.ACCESS_KEY_ID, serving.ACCESS_KEY_SECRET,
                                  serving.INSTANCE) as client:
            await client.create_table(TableMeta("at", PK), TableOptions(),
                                      ReservedThroughput(CapacityUnit(0, 0)))
            await asyncio.gather(*[client.put_row("at", Row([("a", "x"), ("b", i)], [("v", i)]))
                                   for i in range(20)])
            _, row, _ = await client.get_row("at", [("a", "x"), ("b", 7)])
            await client.delete_table("at")
            return row

    row = asyncio.run(run())
    assert row.attribute_columns[0][:2] == ("v", 7)


def test_wrong_secret_is_auth_failed(server) -> None:
    from tablestore import OTSClient

    for region in (None, "cn-test"):
        bad = OTSClient(server.endpoint, serving.ACCESS_KEY_ID, "wrong", serving.INSTANCE,
                        region=region, logger_name="widetable-tests-sdk")
        e = error(bad.list_table)
        assert (e.get_http_status(), e.get_error_code()) == (403, "OTSAuthFailed")


def test_a_time_range_alone_reads_every_version_in_it(ots) -> None:
    import time

    make(ots, "t", max_version=5, time_to_live=-1)
    key = [("a", "p"), ("b", 1)]
    t0 = int(time.time() * 1000) - 60_000
    ots.put_row("t", Row(key, [("x", 1, t0 + 1000)]))
    for n in (2, 3):
        ots.update_row("t", Row(key, {"PUT": [("x", n, t0 + n * 1000)]}), None)

    def versions(**read):
        _, row, _ = ots.get_row("t", key, **read)
        return [(v, t - t0) for _, v, t in row.attribute_columns]

    assert versions(max_version=None, time_range=(t0 + 1500, t0 + 4000)) == [(3, 3000), (2, 2000)]
    assert versions(max_version=1, time_range=(t0 + 1500, t0 + 4000)) == [(3, 3000)]
    assert versions(max_version=None, time_range=t0 + 2000) == [(2, 2000)]
