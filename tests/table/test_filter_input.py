"""Filters built from odd input: bytes-like values, bad flags and options, deep nesting,
Python's ``and``/``or``/chained comparisons, and the reads and writes that take them."""

from __future__ import annotations

import pytest

from widetable import CompositeFilter, SingleColumnFilter, WidetableError, col, parse_filter
from widetable.table.filters import MAX_FILTER_DEPTH

from .helpers import rejects

INVALID = "OTSParameterInvalid"


def _invalid(fn, *args, match: str, **kwargs) -> None:
    with pytest.raises(WidetableError, match=match) as info:
        fn(*args, **kwargs)
    assert info.value.code == INVALID


@pytest.mark.parametrize("make", [bytearray, memoryview], ids=["bytearray", "memoryview"])
def test_bytes_like_filter_values_compare_as_the_bytes_a_write_stores(db, table, make) -> None:
    t = table()
    t.put_row("r", {"bin": make(b"xy")})
    assert t.get_row("r")["bin"] == b"xy"
    assert t.get_row("r", filter=col("bin") == make(b"xy")) is not None
    assert t.get_row("r", filter=col("bin") != make(b"zz")) is not None
    assert t.get_row("r", filter=col("bin") == make(b"zz")) is None
    t.update_row("r", put={"n": 1}, condition=col("bin") == make(b"xy"))
    assert t.get_row("r")["n"] == 1
    assert type((col("bin") == make(b"xy")).value) is bytes


@pytest.mark.parametrize("flag", ["pass_if_missing", "latest_version_only"])
@pytest.mark.parametrize("value", ["False", 0, 1, None])
def test_filter_flags_must_be_booleans(flag, value) -> None:
    _invalid(SingleColumnFilter, "n", "==", 1, **{flag: value}, match=f"{flag} must be True or False")
    _invalid(col("n").eq, 1, **{flag: value}, match=f"{flag} must be True or False")


def test_malformed_filter_pieces_are_parameter_errors() -> None:
    _invalid(col("n").eq, 5, passifmissing=True, match="unknown filter option 'passifmissing'")
    _invalid(SingleColumnFilter, "n", ["=="], 1, match="unknown comparison")
    _invalid(CompositeFilter, "AND", col("n") == 1, match="tuple or list of filters")
    _invalid(CompositeFilter, ["AND"], (col("n") == 1,), match="unknown logical operator")
    _invalid(parse_filter, 123, match="must be text")
    _invalid(parse_filter, "not " * 1500 + "x == 1", match="nests deeper")
    both = CompositeFilter("AND", [col("n") == 1, col("m") == 2])  # a list is taken as a tuple
    assert both.filters == (col("n") == 1, col("m") == 2)


def test_nesting_is_limited_and_chains_stay_flat(db, table) -> None:
    t = table()
    t.put_row("r", {"n": 1})
    f = col("n") == 1
    for _ in range(MAX_FILTER_DEPTH - 1):
        f = ~f
    assert f.depth == MAX_FILTER_DEPTH
    assert t.get_row("r", filter=f) is None  # 31 NOTs around a true test: false
    _invalid(lambda: ~f, match=f"deeper than {MAX_FILTER_DEPTH} levels")
    chain = col("n") == 1
    for i in range(9):  # one AND of 10, not 9 nested ANDs
        chain = chain & (col(f"c{i}") != -1)
    assert chain.depth == 2 and len(chain.filters) == 10
    assert t.get_row("r", filter=chain) is not None
    # Tablestore's limit: 10 sub-filters in one composite; the 11th is refused
    _invalid(lambda: chain & (col("c9") != -1), match="at most 10 sub-filters")
    either = (col("n") == 5) | (col("n") == 6) | (col("n") == 1)
    assert either.depth == 2 and t.get_row("r", filter=either) is not None
    mixed = ((col("n") == 1) & (col("m") == 2)) | (col("n") == 3)
    assert mixed.depth == 3


def test_deepest_filter_works_as_a_write_condition(table) -> None:
    t = table()
    t.put_row("r", {"n": 1})
    text = "not " * (MAX_FILTER_DEPTH - 1) + "n == 2"  # odd: true for n == 1
    t.put_row("r", {"n": 3}, condition=parse_filter(text))
    assert t.get_row("r")["n"] == 3
    _invalid(parse_filter, "not " + text, match=f"deeper than {MAX_FILTER_DEPTH} levels")


def test_filters_have_no_truth_value(table) -> None:
    t = table()
    for n in (-5, 1, 7):
        t.put_row(f"k{n}", {"n": n})
    with pytest.raises(WidetableError, match="no truth value") as info:
        0 < col("n") < 3  # noqa: B015 - the chained comparison is the point
    assert info.value.code == INVALID
    with pytest.raises(WidetableError, match="no truth value"):
        (col("n") > 0) and (col("n") < 3)
    in_range = (col("n") > 0) & (col("n") < 3)
    assert [r.primary_key for r in t.scan(filter=in_range)] == [("k1",)]


@pytest.mark.parametrize("bad", [["x"], {"x"}, ("x",)], ids=["list", "set", "tuple"])
def test_unhashable_or_odd_column_names_in_writes_are_parameter_errors(db, table, bad) -> None:
    t = table()
    t.put_row("r", {"n": 1})
    rejects(db, INVALID, t.put_row, "r", [(bad, 1)])
    rejects(db, INVALID, t.update_row, "r", put=[(bad, 1)])
    rejects(db, INVALID, t.update_row, "r", delete_column=[bad])
    rejects(db, INVALID, t.update_row, "r", increment=[(bad, 1)])
    rejects(db, INVALID, t.update_row, "r", delete_version=[(bad, 1)])


@pytest.mark.parametrize("bad", [-5, 2**63 - 1, 2**64])
def test_one_timestamp_time_range_is_range_checked(db, table, bad) -> None:
    t = table()
    t.put_row("r", {"n": 1})
    rejects(db, INVALID, t.get_row, "r", time_range=bad, names=[str(bad)])
    assert t.get_row("r", time_range=0) is None  # 0 is a valid, if empty, version
