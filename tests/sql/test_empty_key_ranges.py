"""A WHERE clause whose key bounds hold no key between them (``k > 5 AND k < 6``) reads
nothing: the planner makes no range of it, since get_range refuses a range whose
bounds are equal (as Tablestore does) and those bounds would be."""

from __future__ import annotations

import pytest


@pytest.fixture
def numbers(db):
    db.create_table("n", [("k", "INTEGER")])
    db.create_table("s", [("p", "STRING"), ("k", "STRING")])
    for i in range(10):
        db.table("n").put_row((i,), {"v": i})
        db.table("s").put_row(("a", f"{i}"), {"v": i})
    db.sql("CREATE TABLE n (k BIGINT, v BIGINT, PRIMARY KEY(k))")
    db.sql("CREATE TABLE s (p VARCHAR(8), k VARCHAR(8), v BIGINT, PRIMARY KEY(p, k))")
    return db


@pytest.mark.parametrize("where, want", [
    ("k > 5 AND k < 6", []),
    ("k > 5 AND k < 7", [(6, 6)]),
    ("k >= 3 AND k <= 3", [(3, 3)]),
    ("k > 9223372036854775806 AND k < 9223372036854775807", []),
])
def test_integer_bounds_with_no_key_between(numbers, where, want) -> None:
    assert numbers.sql(f"SELECT * FROM n WHERE {where}").rows == want


def test_string_bounds_with_no_key_between(numbers) -> None:
    # '3' and '3\x00' have no string between them: the planner's bounds are equal
    got = numbers.sql("SELECT k FROM s WHERE p = 'a' AND k > ? AND k < ?", ["3", "3\x00"])
    assert got.rows == []
    assert numbers.sql("SELECT k FROM s WHERE p = 'a' AND k > '3' AND k < '5'").rows == [("4",)]
