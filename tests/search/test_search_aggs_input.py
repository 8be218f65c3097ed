"""Aggregations that compute on numbers, given what is not one (found by bench.fuzz: a
mutated Search request's aggregation named a KEYWORD field): OTSParameterInvalid naming
the field or value, not a TypeError from inside the sum (answered 500 over the wire)."""

from __future__ import annotations

import pytest

import widetable
from widetable.errors import WidetableError
from widetable.search import AvgAgg, MatchAllQuery, MaxAgg, PercentilesAgg, SumAgg


@pytest.fixture
def db(tmp_path):
    d = widetable.open(str(tmp_path / "s"), purge_interval=None)
    t = d.create_table("t", [("id", "INTEGER")])
    for i in range(6):
        t.put_row((i,), {"kw": "abc"[i % 3], "n": i})
    d.create_search_index("t", "ix", [("kw", "KEYWORD"), ("n", "LONG")])
    assert d.wait_for_search_indexes("t", "ix")
    yield d
    d.close()


@pytest.mark.parametrize("agg", [AvgAgg("a", "kw"), SumAgg("a", "kw"),
                                 PercentilesAgg("a", "kw", (50.0,)),
                                 AvgAgg("a", "n", missing="x"), SumAgg("a", "n", missing=b"x")])
def test_numeric_aggregations_refuse_what_is_not_a_number(db, agg) -> None:
    with pytest.raises(WidetableError) as info:
        db.search("t", "ix", MatchAllQuery(), limit=0, aggs=[agg])
    assert info.value.code == "OTSParameterInvalid"
    assert "'kw'" in info.value.message or "'x'" in info.value.message or "b'x'" in info.value.message


def test_numeric_aggregations_of_numbers_still_work(db) -> None:
    res = db.search("t", "ix", MatchAllQuery(), limit=0,
                    aggs=[AvgAgg("a", "n"), SumAgg("s", "n", missing=0), MaxAgg("m", "kw")])
    assert res.aggs == {"a": 2.5, "s": 15, "m": "c"}
