"""SingleColumnRegexFilter (Tablestore's SingleColumnValueRegexFilter): a regex picks a
substring of a STRING value, cast to STRING, INTEGER or DOUBLE, then compared; and the
limit of 10 sub-filters in one composite filter."""

from __future__ import annotations

import pytest

from widetable import (
    EXPECT_EXIST,
    INF_MAX,
    INF_MIN,
    CompositeFilter,
    Condition,
    SingleColumnRegexFilter,
    WidetableError,
    col,
    parse_filter,
)

ROWS = {
    "a": {"info": "{cluster_name:name 1,lastupdatetime:12345}", "n": 1},
    "b": {"info": "{cluster_name:name 2,lastupdatetime:99}", "n": 2},
    "c": {"info": "{cluster_name:other,lastupdatetime:12346,price:2.5}", "n": 3},
    "d": {"info": "no time here", "n": 4},
    "e": {"info": 12345, "n": 5},  # not a STRING: never matches
    "f": {"n": 6},  # no info column
    "g": {"info": "lastupdatetime:99999999999999999999", "n": 7},  # past int64
    "h": {"info": "{price:1e3}", "n": 8},
}


@pytest.fixture
def t(table):
    t = table(max_versions=3)
    for k, cols in ROWS.items():
        t.put_row(k, cols)
    return t


def matching(t, f) -> list[str]:
    """The keys a filter passes, by get_range and by get_row (which must agree)."""
    by_range = [r.primary_key[0] for r in t.get_range((INF_MIN,), (INF_MAX,), filter=f).rows]
    by_get = [k for k in ROWS if t.get_row(k, filter=f) is not None]
    assert by_range == by_get
    return by_range


def test_integer_cast_compares_numerically(t) -> None:
    f = col("info").regex(r"lastupdatetime:([0-9]+)", "INTEGER") > 12345
    assert f == SingleColumnRegexFilter("info", ">", 12345, r"lastupdatetime:([0-9]+)", "INTEGER")
    assert matching(t, f) == ["c"]
    assert matching(t, col("info").regex(r"lastupdatetime:([0-9]+)", "INTEGER") <= 12345) == [
        "a", "b"]  # "g" overflows int64: no match
    assert matching(t, col("info").regex(r"lastupdatetime:(\d+)", "INTEGER") == 99) == ["b"]
    assert matching(t, col("info").regex(r"lastupdatetime:(\d+)", "INTEGER") > 100.5) == [
        "a", "c"]  # an INTEGER compares with a DOUBLE value too


def test_string_cast_and_whole_match(t) -> None:
    # without a group, the whole match is what compares
    assert matching(t, col("info").regex(r"name \d", "STRING") == "name 2") == ["b"]
    assert matching(t, col("info").regex(r"cluster_name:([a-z]+)") == "other") == ["c"]
    assert matching(t, col("info").regex(r"cluster_name:([^,]+)") >= "name 2") == ["b", "c"]
    # a STRING cast never equals a number
    assert matching(t, col("info").regex(r"lastupdatetime:(\d+)") == 99) == []


def test_double_cast(t) -> None:
    f = col("info").regex(r"price:([0-9.e+-]+)", "DOUBLE")
    assert matching(t, f > 2) == ["c", "h"]
    assert matching(t, f == 2.5) == ["c"]
    assert matching(t, f < 1000) == ["c"]


def test_a_value_that_does_not_cast_does_not_match(t) -> None:
    # "1 " is not an integer; "name" is not a number
    assert matching(t, col("info").regex(r"name (\d,)", "INTEGER") != 0) == []
    assert matching(t, col("info").regex(r"cluster_name:(\w+)", "DOUBLE") != 0) == []
    # != passes only values that cast: a non-match is not "different"
    assert matching(t, col("info").regex(r"lastupdatetime:(\d+)", "INTEGER") != 99) == ["a", "c"]


def test_missing_column_fails_unless_pass_if_missing(t) -> None:
    rule = col("info").regex(r"lastupdatetime:(\d+)", "INTEGER")
    assert "f" not in matching(t, rule >= 0)
    assert matching(t, rule.ge(0, pass_if_missing=True)) == ["a", "b", "c", "f"]


def test_all_versions(table, now) -> None:
    t = table(max_versions=3)
    t.put_row("k", [("info", "v:1", now - 2000), ("info", "v:5", now - 1000)])
    rule = col("info").regex(r"v:(\d)", "INTEGER")
    assert t.get_row("k", filter=rule == 1) is None
    assert t.get_row("k", filter=rule.eq(1, latest_version_only=False)) is not None


def test_in_composites_and_conditions(t) -> None:
    rule = col("info").regex(r"lastupdatetime:(\d+)", "INTEGER")
    assert matching(t, (rule > 100) & (col("n") < 3)) == ["a"]
    assert matching(t, ~(rule > 100) & (col("n") < 5)) == ["b", "d"]
    t.update_row("c", put={"n": 30}, condition=Condition(EXPECT_EXIST, rule == 12346))
    assert t.get_row("c")["n"] == 30
    with pytest.raises(WidetableError) as info:
        t.update_row("a", put={"n": 10}, condition=rule == 12346)
    assert info.value.code == "OTSConditionCheckFail"
    assert t.get_row("a")["n"] == 1


@pytest.mark.parametrize("make, named", [
    (lambda: col("info").regex("(unclosed", "INTEGER") == 1, "(unclosed"),
    (lambda: col("info").regex(r"(a)\1") == "a", r"(a)\\1"),  # backreferences: not RE2
    (lambda: col("info").regex("", "STRING") == "x", "''"),
    (lambda: col("info").regex(b"x", "STRING") == "x", "b'x'"),
    (lambda: col("info").regex("x" * 1025) == "x", "longer than 1024"),
    (lambda: col("info").regex("x", "BOOLEAN") == 1, "BOOLEAN"),
    (lambda: col("info").regex("x", "INTEGER") == None, "None"),
    (lambda: col("info").regex("x").eq(1, pass_if_missing="yes"), "'yes'"),
    (lambda: SingleColumnRegexFilter("info", "~", 1, "x"), "'~'"),
])
def test_bad_regex_filters_are_parameter_invalid(make, named) -> None:
    with pytest.raises(WidetableError) as info:
        make()
    assert info.value.code == "OTSParameterInvalid"
    assert named in info.value.message


def test_a_composite_filter_holds_at_most_10_sub_filters(t, db) -> None:
    """Tablestore: "a filter condition can include up to 10 subconditions"."""
    ten = [col("n") != i for i in range(2, 12)]  # n is 1..8: only "a" (n == 1) passes
    assert CompositeFilter("AND", ten).matches({"n": 1}, None)
    chained = ten[0]
    for f in ten[1:]:
        chained = chained & f
    assert len(chained.filters) == 10
    with pytest.raises(WidetableError) as info:
        CompositeFilter("OR", [*ten, col("n") == 99])
    assert info.value.code == "OTSParameterInvalid" and "at most 10" in info.value.message
    with pytest.raises(WidetableError) as info:
        chained & (col("n") != 1)  # the flattened chain would hold 11
    assert "11 filters" in info.value.message
    # nesting keeps each composite within the limit
    assert matching(t, CompositeFilter("AND", ten)) == ["a"]
    nested = CompositeFilter("OR", [CompositeFilter("AND", ten), col("n") == 8])
    assert matching(t, nested) == ["a", "h"]


def test_parse_filter_reads_regex_rules(t) -> None:
    f = parse_filter("regex(info, 'lastupdatetime:([0-9]+)', 'INTEGER') > 12345 and n < 5")
    assert f == (col("info").regex("lastupdatetime:([0-9]+)", "INTEGER") > 12345) & (col("n") < 5)
    assert matching(t, f) == ["c"]
    assert parse_filter("'other' == regex(info, 'cluster_name:([a-z]+)')") == (
        col("info").regex("cluster_name:([a-z]+)") == "other")
    for bad in ("regex(info) > 1", "regex(info, 5) > 1", "regex('info', 'x') > 1",
                "regex(info, 'x', cast='INTEGER') > 1", "regex(info, 'x', 'BOOL') > 1",
                "regex(info, '(') == 'a'"):
        with pytest.raises(WidetableError) as info:
            parse_filter(bad)
        assert info.value.code == "OTSParameterInvalid", bad
