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
    CastType,
    ComparatorType,
    CompositeColumnCondition,
    Direction,
    LogicalOperator,
    OTSServiceError,
    RegexRule,
    Row,
    SingleColumnCondition,
    SingleColumnRegexCondition,
)

from .test_sdk import make


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
