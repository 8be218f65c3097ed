"""Where the server's answers must be the service's, through the official ``tablestore``
SDK: SingleColumnValueRegexFilter, the service's error wording (then ours), empty
batches, reserved read and write capacity apart, an index's declared key, a malformed
transaction id, ListSearchIndex."""

from __future__ import annotations

import pytest

tablestore = pytest.importorskip("tablestore")
from tablestore import (
    INF_MAX,
    INF_MIN,
    BatchGetRowRequest,
    BatchWriteRowRequest,
    CapacityUnit,
    CastType,
    ComparatorType,
    CompositeColumnCondition,
    Condition,
    Direction,
    LogicalOperator,
    OTSServiceError,
    PutRowItem,
    RegexRule,
    ReservedThroughput,
    Row,
    RowExistenceExpectation,
    SecondaryIndexMeta,
    SecondaryIndexType,
    SingleColumnCondition,
    SingleColumnRegexCondition,
    TableInBatchGetRowItem,
    TableInBatchWriteRowItem,
    TableMeta,
    TableOptions,
)

import widetable

from . import serving
from .test_sdk import PK, make


def error(fn, *args, **kwargs) -> OTSServiceError:
    with pytest.raises(OTSServiceError) as info:
        fn(*args, **kwargs)
    return info.value


def keys(ots, name: str, column_filter) -> list[str]:
    _, _, rows, _ = ots.get_range(name, Direction.FORWARD, [("a", INF_MIN), ("b", INF_MIN)],
                                  [("a", INF_MAX), ("b", INF_MAX)], column_filter=column_filter)
    return [r.primary_key[0][1] for r in rows]


def test_regex_filter(ots) -> None:
    make(ots)
    for a, info in [("x", "{name:a,lastupdatetime:12345}"), ("y", "{name:b,lastupdatetime:99}"),
                    ("z", "{price:2.5}"), ("w", "plain")]:
        ots.put_row("t", Row([("a", a), ("b", 1)], [("info", info)]))
    ots.put_row("t", Row([("a", "v"), ("b", 1)], [("other", 1)]))
    time = RegexRule(r"lastupdatetime:([0-9]+)", CastType.VT_INTEGER)
    f = SingleColumnRegexCondition("info", ComparatorType.GREATER_THAN, 100, time)
    assert keys(ots, "t", f) == ["x"]
    f = SingleColumnRegexCondition("info", ComparatorType.EQUAL, "b",
                                   RegexRule(r"name:(\w)", CastType.VT_STRING))
    assert keys(ots, "t", f) == ["y"]
    f = SingleColumnRegexCondition("info", ComparatorType.LESS_EQUAL, 2.5,
                                   RegexRule(r"price:([0-9.]+)", CastType.VT_DOUBLE))
    assert keys(ots, "t", f) == ["z"]
    both = CompositeColumnCondition(LogicalOperator.OR)
    both.add_sub_condition(SingleColumnRegexCondition("info", ComparatorType.LESS_THAN, 1000, time))
    both.add_sub_condition(SingleColumnCondition("other", 1, ComparatorType.EQUAL, pass_if_missing=False))
    assert keys(ots, "t", both) == ["v", "y"]
    assert ots.get_row("t", [("a", "x"), ("b", 1)], column_filter=SingleColumnRegexCondition(
        "info", ComparatorType.EQUAL, 12345, time))[1] is not None
    bad = SingleColumnRegexCondition("info", ComparatorType.EQUAL, 1,
                                     RegexRule("(unclosed", CastType.VT_INTEGER))
    e = error(ots.get_row, "t", [("a", "x"), ("b", 1)], column_filter=bad)
    assert e.get_error_code() == "OTSParameterInvalid" and "(unclosed" in e.get_error_message()


def test_a_composite_of_more_than_10_is_refused(ots) -> None:
    make(ots)
    many = CompositeColumnCondition(LogicalOperator.AND)
    for i in range(11):
        many.add_sub_condition(SingleColumnCondition("n", i, ComparatorType.NOT_EQUAL))
    e = error(ots.get_row, "t", [("a", "x"), ("b", 1)], column_filter=many)
    assert e.get_error_code() == "OTSParameterInvalid" and "at most 10" in e.get_error_message()


# -- the service's wording first, then ours ------------------------------------------------

def starts(e: OTSServiceError, status: int, code: str, text: str) -> None:
    assert (e.get_http_status(), e.get_error_code()) == (status, code), e
    assert e.get_error_message().startswith(text), e.get_error_message()


def test_error_messages_start_with_the_services_wording(ots) -> None:
    make(ots)
    starts(error(make, ots), 409, "OTSObjectAlreadyExist", "Requested table already exists.")
    starts(error(ots.describe_table, "nope"), 404, "OTSObjectNotExist",
           "Requested table does not exist.")
    starts(error(ots.get_row, "nope", [("a", "x"), ("b", 1)]), 404, "OTSObjectNotExist",
           "Requested table does not exist.")
    starts(error(ots.create_table, TableMeta("dup", [("PK0", "STRING"), ("PK0", "INTEGER")]),
                 TableOptions(), ReservedThroughput(CapacityUnit(0, 0))),
           400, "OTSParameterInvalid", "Duplicated primary key name: 'PK0'.")
    assert "dup" not in ots.list_table()
    ots.create_table(TableMeta("one", [("PK1", "STRING")]), TableOptions(),
                     ReservedThroughput(CapacityUnit(0, 0)))
    e = error(ots.put_row, "one", Row([("PK2", "blah")], [("v", 1)]))
    starts(e, 400, "OTSInvalidPK", "Validate PK name fail. Input: PK2, Meta: PK1.")
    assert "names columns" not in e.get_error_message()  # the garbled form is gone
    for call in (lambda: ots.get_row("one", [("PK2", "blah")]),
                 lambda: ots.delete_row("one", Row([("PK2", "blah")]), None)):
        starts(error(call), 400, "OTSInvalidPK", "Validate PK name fail. Input: PK2, Meta: PK1.")
    ots.put_row("one", Row([("PK1", "x")], [("v", 1)]))
    cond = Condition(RowExistenceExpectation.EXPECT_NOT_EXIST)
    starts(error(ots.put_row, "one", Row([("PK1", "x")], [("v", 2)]), cond), 403,
           "OTSConditionCheckFail", "Condition check failed.")
    big = "s" * 1025
    starts(error(ots.put_row, "one", Row([("PK1", big)], [("v", 1)])), 400, "OTSParameterInvalid",
           "The length of primary key column: 'PK1' exceeds the MaxLength:1024 with "
           "CurrentLength:1025.")
    starts(error(ots.get_range, "one", Direction.FORWARD, [("PK1", "x")], [("PK1", "x")]), 400,
           "OTSParameterInvalid", "Begin key must less than end key in FORWARD")
    starts(error(ots.get_range, "one", Direction.BACKWARD, [("PK1", "a")], [("PK1", "b")]), 400,
           "OTSParameterInvalid", "Begin key must more than end key in BACKWARD")


def test_empty_batches_are_refused_as_the_service_refuses_them(ots) -> None:
    make(ots)
    starts(error(ots.batch_write_row, BatchWriteRowRequest()), 400, "OTSParameterInvalid",
           "No row is specified in BatchWriteRow.")
    starts(error(ots.batch_get_row, BatchGetRowRequest()), 400, "OTSParameterInvalid",
           "No row specified in the request of BatchGetRow.")
    empty = BatchWriteRowRequest()
    empty.add(TableInBatchWriteRowItem("t", []))
    starts(error(ots.batch_write_row, empty), 400, "OTSParameterInvalid",
           "No operation is specified for table: 't'.")
    one_empty = BatchWriteRowRequest()  # one table with a row, one without: refused whole
    one_empty.add(TableInBatchWriteRowItem("t", [PutRowItem(Row([("a", "x"), ("b", 1)], [("v", 1)]),
                                                            Condition(RowExistenceExpectation.IGNORE))]))
    one_empty.add(TableInBatchWriteRowItem("u", []))
    starts(error(ots.batch_write_row, one_empty), 400, "OTSParameterInvalid",
           "No operation is specified for table: 'u'.")
    assert ots.get_row("t", [("a", "x"), ("b", 1)])[1] is None  # nothing was written
    # The service answers a BatchGetRow table with no rows (the SDK's own tests say so).
    got = BatchGetRowRequest()
    got.add(TableInBatchGetRowItem("t", [], [], None, 1))
    assert ots.batch_get_row(got).get_result_by_table("t") == []


def test_reserved_read_and_write_are_stored_apart(ots, server) -> None:
    make(ots, "rw")
    ots.create_table(TableMeta("cu", PK), TableOptions(), ReservedThroughput(CapacityUnit(1, 2)))
    cu = ots.describe_table("cu").reserved_throughput_details.capacity_unit
    assert (cu.read, cu.write) == (1, 2)
    ots.update_table("cu", reserved_throughput=ReservedThroughput(CapacityUnit(5, 7)))
    cu = ots.describe_table("cu").reserved_throughput_details.capacity_unit
    assert (cu.read, cu.write) == (5, 7)
    ots.update_table("cu", reserved_throughput=ReservedThroughput(CapacityUnit(4, 0)))
    cu = ots.describe_table("cu").reserved_throughput_details.capacity_unit
    assert (cu.read, cu.write) == (4, 0)
    cu = ots.describe_table("rw").reserved_throughput_details.capacity_unit
    assert (cu.read, cu.write) == (0, 0)
    # widetable.connect sees the pool (what throttling uses) and the split
    remote = widetable.connect(server.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                               access_key_secret=serving.ACCESS_KEY_SECRET, protocol="tablestore")
    try:
        ots.update_table("cu", reserved_throughput=ReservedThroughput(CapacityUnit(1, 2)))
        o = remote.describe_table("cu").options
        assert (o.reserved_throughput, o.reserved_read, o.reserved_write) == (3, 1, 2)
    finally:
        remote.close()


def test_an_index_key_is_described_as_declared(ots, server) -> None:
    meta = TableMeta("ix", [("a", "STRING"), ("b", "INTEGER")], [("s", "STRING"), ("d", "INTEGER")])
    indexes = [SecondaryIndexMeta("by_s", ["s", "b"], ["d"]),
               SecondaryIndexMeta("by_ad", ["a", "d"], [], SecondaryIndexType.LOCAL_INDEX)]
    ots.create_table(meta, TableOptions(), ReservedThroughput(CapacityUnit(0, 0)), indexes)
    got = {i.index_name: i.primary_key_names for i in ots.describe_table("ix").secondary_indexes}
    assert got == {"by_s": ["s", "b"], "by_ad": ["a", "d"]}
    for protocol in ("native", "tablestore"):
        remote = widetable.connect(server.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                                   access_key_secret=serving.ACCESS_KEY_SECRET, protocol=protocol)
        try:
            described = {i.name: (i.primary_key, i.base_key)
                         for i in remote.describe_table("ix").indexes}
            assert described == {"by_s": (("s", "b"), ("a",)), "by_ad": (("a", "d"), ("b",))}
            assert remote.table("by_s").schema.pk_names == ("s", "b", "a")  # rows: the whole key
        finally:
            remote.close()


def test_a_malformed_transaction_id_is_parameter_invalid(ots) -> None:
    make(ots)
    for bad in ("nope", "0" * 31, "g" * 32, "0123456789abcdef0123456789abcdef"):
        starts(error(ots.get_row, "t", [("a", "x"), ("b", 1)], transaction_id=bad), 400,
               "OTSParameterInvalid", "TransactionID is invalid.")
        starts(error(ots.commit_transaction, bad), 400, "OTSParameterInvalid",
               "TransactionID is invalid.")
    tid = ots.start_local_transaction("t", [("a", "x")])
    ots.abort_transaction(tid)
    e = error(ots.commit_transaction, tid)  # well formed, but ended: as before
    assert e.get_error_code() == "OTSSessionNotExist"


def test_list_search_index_answers_an_empty_list(ots) -> None:
    make(ots)
    assert list(ots.list_search_index("t")) == []
    assert list(ots.list_search_index()) == []
    starts(error(ots.list_search_index, "nope"), 404, "OTSObjectNotExist",
           "Requested table does not exist.")
