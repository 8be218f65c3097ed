"""scan: bounds with INF_MIN/INF_MAX, direction, limit, projection, filters and formats."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def cards(orders):
    """Cards c0..c2, Seq 1..10 each; price = 10 * Seq; odd Seq in city 'x'."""
    rows = [
        ("t", "put", (f"c{c}", s), {"price": 10 * s, "city": "x" if s % 2 else "y"})
        for c in range(3)
        for s in range(1, 11)
    ]
    with orders.open() as db:
        assert all(r.ok for r in db.batch_write_row(rows))
    return orders


def keys(result) -> list:
    return [tuple(json.loads(line)["pk"]) for line in result.stdout.splitlines()]


def test_full_scan_both_directions(cards):
    forward = keys(cards("scan", "t", "--format", "jsonl"))
    assert forward == [(f"c{c}", s) for c in range(3) for s in range(1, 11)]
    assert keys(cards("scan", "t", "--format", "jsonl", "--reverse")) == forward[::-1]
    assert keys(cards("scan", "t", "--format", "jsonl", "--limit", "4")) == forward[:4]
    assert (
        keys(cards("scan", "t", "--format", "jsonl", "--reverse", "--limit", "2"))
        == forward[::-1][:2]
    )


def test_bounds(cards):
    one_card = keys(
        cards("scan", "t", "--start", '["c1"]', "--end", '["c1", "INF_MAX"]', "--format", "jsonl")
    )
    assert one_card == [("c1", s) for s in range(1, 11)]
    # end is exclusive; a short bound is padded with INF_MIN going forward
    assert keys(
        cards("scan", "t", "--start", '["c1", 3]', "--end", '["c1", 5]', "--format", "jsonl")
    ) == [("c1", 3), ("c1", 4)]
    # equal bounds hold no key: refused, in Tablestore's wording
    assert cards("scan", "t", "--start", '["c1"]', "--end", '["c1"]', "--format", "jsonl",
                 code=1).stderr.startswith(
        "Error [OTSParameterInvalid]: Begin key must less than end key in FORWARD")
    back = keys(
        cards(
            "scan",
            "t",
            "--reverse",
            "--start",
            '["c1", "INF_MAX"]',
            "--end",
            '["c1", "INF_MIN"]',
            "--format",
            "jsonl",
        )
    )
    assert back == [("c1", s) for s in range(10, 0, -1)]
    assert keys(
        cards("scan", "t", "--start", "INF_MIN", "--end", '["c0", 3]', "--format", "jsonl")
    ) == [("c0", 1), ("c0", 2)]
    assert keys(cards("scan", "t", "--start", '["c2", 9]', "--format", "jsonl")) == [
        ("c2", 9),
        ("c2", 10),
    ]


def test_filter_and_columns(cards):
    result = cards(
        "scan",
        "t",
        "--start",
        '["c0"]',
        "--end",
        '["c0", "INF_MAX"]',
        "--filter",
        "price >= 50 and city == 'x'",
        "--columns",
        "price",
        "--format",
        "jsonl",
    )
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows == [{"pk": ["c0", s], "columns": {"price": 10 * s}} for s in (5, 7, 9)]
    result = cards(
        "scan", "t", "--filter", "not (price < 100)", "--limit", "2", "--format", "jsonl"
    )
    assert keys(result) == [("c0", 10), ("c1", 10)]


def test_table_format(cards):
    result = cards("scan", "t", "--start", '["c2", 9]', "--columns", "price")
    assert "CardID" in result.stdout and "price" in result.stdout and "100" in result.stdout
    assert "2 rows" in result.stderr
    empty = cards("scan", "t", "--filter", "price > 1000")
    assert empty.stdout == "" and "No rows." in empty.stderr


def test_scan_errors(cards):
    err = cards("scan", "t", "--start", '["c1"]', "--end", '["c0"]', code=1).stderr
    assert err.startswith("Error [OTSParameterInvalid]: Begin key must less than end key in FORWARD")
    assert "not valid JSON" in cards("scan", "t", "--start", "[c1]", code=2).stderr
    assert "--end" in cards("scan", "t", "--end", '{"a": 1}', code=2).stderr
    assert cards("scan", "t", "--filter", "price >>= 3", code=1).stderr.startswith(
        "Error [OTSParameterInvalid]: cannot parse filter"
    )
    cards("scan", "t", "--limit", "0", code=2)
    assert "Error [OTSInvalidPK]" in cards("scan", "t", "--start", '["c1", "x"]', code=1).stderr


# parse_filter reads true/false as literals only where a value stands, keeps string
# literals as written, and takes signed numbers.
def test_filter_column_starting_with_true(orders):
    orders("put", "t", "--pk", '["c", 1]', "--col", "a=1", "--col", "true_count=1")
    # Parsed as column 'True_count', which is missing, so the row wrongly passes.
    result = orders("scan", "t", "--filter", "a == 1 and true_count > 3", "--format", "jsonl")
    assert result.stdout == ""


def test_filter_string_literal_containing_true(orders):
    orders("put", "t", "--pk", '["c", 1]', "--col", "note=is true")
    result = orders("scan", "t", "--filter", "note == 'is true'", "--format", "jsonl")
    assert len(result.stdout.splitlines()) == 1


def test_filter_negative_number(orders):
    orders("put", "t", "--pk", '["c", 1]', "--col", "delta=-3")
    result = orders("scan", "t", "--filter", "delta < -1", "--format", "jsonl")
    assert len(result.stdout.splitlines()) == 1
