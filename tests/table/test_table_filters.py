"""Read filters: every comparison, AND/OR/NOT, pass_if_missing, all versions, column pages."""

from __future__ import annotations

import pytest

from widetable import (
    INF_MAX,
    INF_MIN,
    ColumnPagination,
    CompositeFilter,
    SingleColumnFilter,
    WidetableError,
    col,
    parse_filter,
)

from .helpers import cells, pks


@pytest.fixture
def t(table, now):
    t = table(max_versions=3)
    t.put_row("i5", {"n": 5, "s": "m"})
    t.put_row("i7", {"n": 7, "s": "z"})
    t.put_row("f6", {"n": 6.0, "s": "a"})
    t.put_row("str", {"n": "5", "s": "m"})
    t.put_row("bool", {"n": True})
    t.put_row("none", {"s": "q"})
    return t


def matching(t, f) -> list[str]:
    rows = t.get_range((INF_MIN,), (INF_MAX,), filter=f).rows
    via_get = sorted(k for k in ("bool", "f6", "i5", "i7", "none", "str")
                     if t.get_row(k, filter=f) is not None)
    assert sorted(p[0] for p in pks(rows)) == via_get
    return via_get


@pytest.mark.parametrize(
    "f, expected",
    [
        (col("n") == 5, ["i5", "none"]),
        (col("n") != 5, ["f6", "i7", "none"]),
        (col("n") > 5, ["f6", "i7", "none"]),
        (col("n") >= 6, ["f6", "i7", "none"]),
        (col("n") < 6, ["i5", "none"]),
        (col("n") <= 6, ["f6", "i5", "none"]),
        (col("n") == 6, ["f6", "none"]),  # int and float compare as numbers
        (col("n") == "5", ["none", "str"]),
        (col("n") == True, ["bool", "none"]),
        (col("s") >= "m", ["bool", "i5", "i7", "none", "str"]),  # bool has no s
    ],
)
def test_every_comparison(t, f, expected) -> None:
    assert matching(t, f) == expected


def test_pass_if_missing_false(t) -> None:
    assert matching(t, col("n").eq(5, pass_if_missing=False)) == ["i5"]
    assert matching(t, col("zz").eq(1, pass_if_missing=False)) == []
    assert matching(t, col("zz") == 1) == ["bool", "f6", "i5", "i7", "none", "str"]


def test_and_or_not(t) -> None:
    assert matching(t, (col("n").ge(5, pass_if_missing=False)) & (col("s") == "m")) == ["i5"]
    assert matching(t, (col("n") == 7) | (col("s") == "a")) == ["bool", "f6", "i7", "none"]
    assert matching(t, ~(col("n") == 5)) == ["bool", "f6", "i7", "str"]
    assert matching(t, ~((col("n") == 5) | (col("n") == 7))) == ["bool", "f6", "str"]
    three = CompositeFilter("OR", (col("s") == "a", col("s") == "z", col("n") == True))
    assert matching(t, three) == ["bool", "f6", "i7", "none"]


def test_parse_filter_matches_builder(t) -> None:
    assert matching(t, parse_filter("n >= 6 and not s == 'a'")) == matching(
        t, (col("n") >= 6) & ~(col("s") == "a")
    )
    assert matching(t, parse_filter("5 == n")) == matching(t, col("n") == 5)


def test_filter_sees_columns_not_projected(t) -> None:
    row = t.get_row("i5", columns=["s"], filter=col("n") == 5)
    assert row.columns == {"s": "m"}
    assert t.get_row("i5", columns=["s"], filter=col("n") == 6) is None


def test_latest_version_only_false_matches_any_version(table, now) -> None:
    t = table(max_versions=3)
    t.put_row("k", [("v", 1, now - 2000), ("v", 2, now - 1000)])
    assert t.get_row("k", filter=col("v") == 1) is None
    row = t.get_row("k", filter=col("v").eq(1, latest_version_only=False))
    assert row["v"] == 2
    assert t.get_row("k", filter=col("v").eq(3, latest_version_only=False)) is None
    assert pks(t.get_range(INF_MIN, INF_MAX, filter=col("v").lt(2, latest_version_only=False))) \
        == [("k",)]
    assert t.get_row("k", filter=~col("v").eq(1, latest_version_only=False)) is None


def test_filter_with_max_versions_and_time_range(table, now) -> None:
    t = table(max_versions=3)
    t.put_row("k", [("v", 1, now - 2000), ("v", 2, now - 1000)])
    row = t.get_row("k", max_versions=3, time_range=(0, now - 1500), filter=col("v") == 2)
    assert cells(row) == {"v": [("int", 1, now - 2000)]}


def test_column_pagination(table) -> None:
    t = table()
    t.put_row("k", {f"c{i:02d}": i for i in range(10)})
    assert sorted(t.get_row("k", filter=ColumnPagination(0, 3)).columns) == ["c00", "c01", "c02"]
    assert sorted(t.get_row("k", filter=ColumnPagination(8, 5)).columns) == ["c08", "c09"]
    got: list[str] = []
    offset = 0
    while True:
        page = t.get_row("k", filter=ColumnPagination(offset, 4)).columns
        if not page:
            break
        got += sorted(page)
        offset += 4
    assert got == [f"c{i:02d}" for i in range(10)]
    paged = t.get_row("k", columns=["c03", "c05", "c07"], filter=ColumnPagination(1, 1))
    assert paged.columns == {"c05": 5}


def test_column_pagination_with_versions(table, now) -> None:
    t = table(max_versions=3)
    t.put_row("k", [("a", 1, now - 2000), ("a", 2, now - 1000), ("b", 3, now - 1000), ("c", 4, now)])
    row = t.get_row("k", max_versions=3, filter=ColumnPagination(0, 2))
    assert cells(row) == {
        "a": [("int", 2, now - 1000), ("int", 1, now - 2000)],
        "b": [("int", 3, now - 1000)],
    }


@pytest.mark.parametrize(
    "make",
    [
        lambda: ColumnPagination(-1, 1),
        lambda: ColumnPagination(0, 0),
        lambda: col("1bad"),
        lambda: SingleColumnFilter("x", "=~", 1),
        lambda: SingleColumnFilter("x", "==", None),
        lambda: (col("x") == 1) & 1,
        lambda: CompositeFilter("XOR", (col("x") == 1,)),
        lambda: CompositeFilter("NOT", (col("x") == 1, col("y") == 1)),
        lambda: parse_filter("x ="),
    ],
)
def test_malformed_filters_are_parameter_invalid(make) -> None:
    with pytest.raises(WidetableError) as info:
        make()
    assert info.value.code == "OTSParameterInvalid"


def test_filter_argument_of_wrong_type(table, db) -> None:
    from .helpers import rejects

    t = table()
    t.put_row("k", {"a": 1})
    rejects(db, "OTSParameterInvalid", t.get_row, "k", filter="a == 1", names=["a == 1"])
    rejects(db, "OTSParameterInvalid", t.get_range, INF_MIN, INF_MAX, filter=42, names=["42"])
