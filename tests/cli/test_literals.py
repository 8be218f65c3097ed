"""The text forms of values: literals round-trip with their types; JSON forms too."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from widetable import INF_MAX, INF_MIN
from widetable.cli.literals import (
    LiteralError,
    format_literal,
    from_json,
    parse_bound,
    parse_literal,
    parse_pk,
    to_json,
)

values = st.one_of(
    st.text(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True),
    st.booleans(),
    st.binary(),
)


def same(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)  # type: ignore[arg-type]
    return repr(a) == repr(b)


@given(values)
def test_literal_round_trip(value):
    assert same(parse_literal(format_literal(value)), value)


@given(values)
def test_json_round_trip(value):
    assert same(from_json(to_json(value)), value)


@given(st.text())
def test_format_literal_writes_plain_strings_bare(text):
    out = format_literal(text)
    assert out == text or out.startswith('"')


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("120", 120),
        ("-5", -5),
        ("1.0", 1.0),
        ("1e3", 1000.0),
        ("true", True),
        ("false", False),
        ('"120"', "120"),
        ("Hangzhou", "Hangzhou"),
        ("two words", "two words"),
        ("", ""),
        ('{"$binary": "AAE="}', b"\x00\x01"),
        ("01234", "01234"),
        ("True", "True"),
    ],
)
def test_parse_literal(text, value):
    assert same(parse_literal(text), value)


@pytest.mark.parametrize(
    "text", ["null", "[1]", '{"a": 1}', "[oops", '"open', "{", '{"$binary": 5}']
)
def test_parse_literal_rejects(text):
    with pytest.raises(LiteralError):
        parse_literal(text)


def test_keys_and_bounds():
    assert parse_pk('["c1", 5]') == ("c1", 5)
    assert parse_pk('{"CardID": "c1", "Seq": 5}') == {"CardID": "c1", "Seq": 5}
    assert parse_pk('{"$binary": "AAE="}') == b"\x00\x01"
    assert parse_bound('["c1", "INF_MAX"]') == ("c1", INF_MAX)
    assert parse_bound("INF_MIN") == (INF_MIN,)
    assert parse_bound('"c1"') == ("c1",)
    with pytest.raises(LiteralError):
        parse_bound('{"a": 1}')
