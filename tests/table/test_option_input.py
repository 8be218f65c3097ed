"""Options and call arguments outside the row calls: each bad value is refused up front
with OTSParameterInvalid (or OTSInvalidPK) naming it, and nothing changes."""

from __future__ import annotations

import math
import time

import pytest

import widetable
from widetable import INF_MAX
from widetable.errors import InvalidPK, ParameterInvalid


@pytest.mark.parametrize("value", [math.nan, math.inf, -1, "1"])
def test_partition_options_are_finite_numbers(db, value):
    with pytest.raises(ParameterInvalid, match=f"capacity must be a finite number >= 0, got {value!r}"):
        db.create_table("t", [("k", "STRING")], capacity=value)
    assert db.list_tables() == []
    db.create_table("t", [("k", "STRING")], capacity=100)
    with pytest.raises(ParameterInvalid, match="split_size must be a finite number"):
        db.update_table("t", split_size=value)
    desc = db.describe_table("t")
    assert desc.options.capacity == 100 and math.isfinite(desc.options.split_size)
    db.table("t").put_row(("a",), {"v": 1})  # not throttled for good


@pytest.mark.parametrize("option, value", [("ttl", 2**31), ("ttl", 0), ("max_time_deviation", 2**70),
                                           ("max_versions", 2**31)])
def test_int32_options_are_bounded(db, option, value):
    with pytest.raises(ParameterInvalid, match=f"{option} must be .*got {value}"):
        db.create_table("t", [("k", "STRING")], **{option: value})
    db.create_table("t", [("k", "STRING")], ttl=2**31 - 1, max_time_deviation=2**31 - 1)


def test_a_range_bound_naming_no_key_column_is_refused(db):
    t = db.create_table("t", [("k", "STRING"), ("n", "INTEGER")])
    t.put_row(("x", 1), {"v": 1})
    with pytest.raises(InvalidPK, match="names 'typo', not one of the key columns"):
        t.get_range({"typo": "y"}, INF_MAX)
    assert [r.primary_key for r in t.get_range({"k": "x"}, INF_MAX).rows] == [("x", 1)]


def test_batch_items_that_cannot_be_hashed_or_carry_a_stray_payload(db):
    db.create_table("t", [("k", "STRING")])
    with pytest.raises(ParameterInvalid, match=r"op must be put, update or delete, got \['put'\]"):
        db.batch_write_row([("t", ["put"], ("a",), {"x": 1})])
    with pytest.raises(ParameterInvalid, match="got {None: 1}"):
        db.batch_write_row([("t", {None: 1}, ("a",), {"x": 1})])
    db.batch_write_row([("t", "put", ("a",), {"x": 1})])
    with pytest.raises(ParameterInvalid, match="a delete carries no payload"):
        db.batch_write_row([("t", "delete", ("a",), {"x": 2})])
    assert db.table("t").get_row(("a",))["x"] == 1
    db.batch_write_row([("t", "delete", ("a",), {}), ("t", "delete", ("b",))])
    assert db.table("t").get_row(("a",)) is None


def test_other_call_arguments(db, tmp_path):
    db.create_table("t", [("k", "STRING")])
    with pytest.raises(ParameterInvalid, match="parallel_scan takes columns, filter and max_versions, "
                                               "not 'time_range'"):
        db.parallel_scan("t", time_range=(0, 1))
    with pytest.raises(ParameterInvalid, match="since must be unix seconds or None, got 'x'"):
        db.table_stats("t", since="x")
    with pytest.raises(ParameterInvalid, match="until must be unix seconds"):
        db.table_stats("t", until=math.nan)
    for what in ("purge_interval", "maintenance_interval"):
        for bad in ("x", -1, 0, math.inf):
            with pytest.raises(ParameterInvalid, match=f"{what} must be seconds > 0 or None"):
                widetable.open(str(tmp_path / "s"), **{what: bad})


@pytest.mark.parametrize("options, message", [
    ({"max_versions": 0}, "max_versions must be an integer >= 1, got 0"),
    ({"time_range": (5, 1)}, r"time_range must be .* got \(5, 1\)"),
    ({"columns": "c"}, "columns must be a list of column names, got 'c'"),
    ({"filter": 5}, "filter must be a Filter or ColumnPagination, got 5"),
])
def test_get_row_checks_its_options_whether_or_not_the_row_exists(db, options, message):
    t = db.create_table("t", [("k", "STRING")])
    t.put_row(("here",), {"c": 1})
    for key in ("here", "absent"):  # absent: it used to answer None without a look
        with pytest.raises(ParameterInvalid, match=message):
            t.get_row((key,), **options)


@pytest.mark.parametrize("ts", [-1, 2**63, 2**64])
def test_delete_version_timestamps_are_milliseconds_in_range(db, ts):
    t = db.create_table("t", [("k", "STRING")], max_versions=3)
    stamp = int(time.time() * 1000)
    t.put_row(("a",), {"c": (1, stamp)})
    with pytest.raises(ParameterInvalid, match=rf"delete_version of 'c': timestamp {ts} must be "
                                               r"milliseconds in \[0, 2\*\*63\)"):
        t.update_row(("a",), delete_version={"c": ts})
    assert t.get_row(("a",)).versions("c") == [(1, stamp)]


def test_batch_rows_with_text_that_is_not_unicode_are_refused_alone(db):
    """The batch sized each payload by encoding its text before checking it: a lone
    surrogate in an update or a conditional put raised UnicodeEncodeError out of the call."""
    db.create_table("t", [("k", "STRING")])
    bad = "x\udc00"
    results = db.batch_write_row([
        ("t", "update", ("a",), {"put": {"c": bad}}),
        ("t", "put", ("b",), {"c": bad}, widetable.Condition("EXPECT_NOT_EXIST")),
        ("t", "update", ("c",), {"delete_column": [bad]}),
        ("t", "put", ("d",), {"c": 1}),
    ])
    assert [r.error.code if r.error else None for r in results] == [
        "OTSParameterInvalid", "OTSParameterInvalid", "OTSParameterInvalid", None]
    assert [r.primary_key for r in db.table("t").scan()] == [("d",)]
