"""Differential test of RowFilters: hypothesis generates rows and nested filters, and
``widetable.bigtable.filters`` must agree exactly with the plain model (tests/bigtable/model.py).

Entry points for the other read paths: ``rows_and_filters`` (a strategy of
``(rows, filter, seed)``, rows as ``[(key, [Cell, ...]), ...]`` in key order with unique
keys) and ``model_read`` (the expected result of a filtered read). The embedded store
(test_filters_store.py) and the gRPC path write the rows, read them back with the filter
and compare with ``model_read(filter, rows, random.Random(seed))``.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.bigtable.model import model_draws, model_filter, model_read, model_valid, sort_key
from widetable.bigtable import filters as F
from widetable.bigtable.types import Cell
from widetable.errors import ParameterInvalid

__all__ = ["cells_of_a_row", "filter_trees", "model_read", "rows_and_filters"]

FAMILIES = ["a", "b", "cf", "f.1", "_x"]
QUALIFIERS = [b"", b"a", b"ab", b"b", b"q", b"q\x00", b"\x00", b"\xff", b"\xff\xfe", b"\n",
              b"a\nb", b"\xc3\x28", b"\xe2\x82", "é".encode()]
VALUES = [b"", b"a", b"ab", b"abc", b"\x00", b"\xff", b"\x0f\xf0", b"1\n2", b"\xc3\x28", b"zz"]

# a few qualifiers often, so columns of one name in two families sit side by side
qualifiers = st.one_of(st.sampled_from([b"q", b""]), st.sampled_from(QUALIFIERS),
                       st.binary(max_size=3))
values = st.one_of(st.sampled_from(VALUES), st.binary(max_size=4))
timestamps = st.integers(0, 12).map(lambda ms: ms * 1000)


@st.composite
def cells_of_a_row(draw) -> list[Cell]:
    """One row's cells: unique (family, qualifier, timestamp), in row order."""
    raw = draw(st.lists(st.tuples(st.sampled_from(FAMILIES), qualifiers, timestamps, values),
                        max_size=14, unique_by=lambda t: t[:3]))
    return sorted((Cell(f, q, ts, v) for f, q, ts, v in raw), key=sort_key)


BYTE_PATTERNS = [b"", b"a", b"ab", b"a.*", b"a\\C*", b"\\C*", b".*", b".", b"\\C", b"q\\x00",
                 b"\\xff.*", b"[\\x00-\\x7f]*", b"[^a]\\C*", b"(?s).*b", b"a|\\xff", b"\xff\\C",
                 b"\\x0a", b"a\nb", b"(a|b)+", b"\\d", b"[[:alpha:]]+", b"\xc3\\(", b"q\x00",
                 b"\\Qa.b\\E", b"ab?", b"a{1,2}b?", b"(?i)A.*"]
FAMILY_PATTERNS = ["a", "b", "cf", "a|b", "cf|_x", "f\\.1", "f.1", ".*", "c.*", "[ab]", "_x",
                   "(?i)CF", "zz", ""]
byte_patterns = st.one_of(st.sampled_from(BYTE_PATTERNS), st.sampled_from(QUALIFIERS))
bounds = st.one_of(st.none(), qualifiers)
labels = st.sampled_from(["x", "y", "lab-1", "0"])

_LEAVES = [
    st.builds(F.RowKeyRegex, byte_patterns),
    st.builds(F.FamilyNameRegex, st.sampled_from(FAMILY_PATTERNS)),
    st.builds(F.QualifierRegex, byte_patterns),
    st.builds(F.ValueRegex, st.one_of(byte_patterns, st.sampled_from(VALUES))),
    st.builds(F.ColumnRange, st.sampled_from(FAMILIES), bounds, bounds, st.booleans(),
              st.booleans()),
    st.builds(F.ValueRange, st.one_of(st.none(), values), st.one_of(st.none(), values),
              st.booleans(), st.booleans()),
    st.builds(F.TimestampRange, timestamps, st.one_of(st.none(), st.just(0), timestamps)),
    st.builds(F.ValueBitmask, st.binary(min_size=1, max_size=2)),
    st.builds(F.CellsPerRowOffset, st.integers(0, 5)),
    st.builds(F.CellsPerRowLimit, st.integers(0, 5)),
    st.builds(F.CellsPerColumnLimit, st.integers(0, 3)),
    st.just(F.StripValue()), st.builds(F.ApplyLabel, labels), st.just(F.Sink()),
    st.just(F.PassAll()), st.just(F.BlockAll()),
]
_SAMPLE = st.builds(F.RowSample, st.sampled_from([0.2, 0.5, 0.9]))


def _composites(sub):
    maybe = st.one_of(st.none(), sub)
    return st.one_of(
        st.builds(F.Chain, st.lists(sub, min_size=2, max_size=4).map(tuple)),
        st.builds(F.Interleave, st.lists(sub, min_size=2, max_size=3).map(tuple)),
        st.builds(F.Condition, maybe, maybe, maybe),
    )


def filter_trees(with_sample: bool = True):
    """Nested filters of every kind (valid or not: check with ``model_valid``)."""
    leaves = st.one_of(*_LEAVES, *([_SAMPLE] if with_sample else []))
    return st.recursive(leaves, _composites, max_leaves=10)


filters = filter_trees()


@st.composite
def rows_and_filters(draw, with_sample: bool = True):
    """(rows in key order, a valid filter, an RNG seed) for any read path. Without
    ``with_sample`` no RowSample appears, for paths that draw from ``random`` itself."""
    keys = draw(st.lists(st.one_of(st.sampled_from([b"a", b"ab", b"q\x00", b"\xff", b"a\nb"]),
                                   st.binary(min_size=1, max_size=4)),
                         min_size=1, max_size=5, unique=True))
    rows = [(k, draw(cells_of_a_row())) for k in sorted(keys)]
    f = draw(filter_trees(with_sample))
    assume(model_valid(f))
    return rows, f, draw(st.integers(0, 2**32))


def _accepts(f) -> bool:
    try:
        F.check_filter(f)
        return True
    except ParameterInvalid:
        return False


@settings(max_examples=1000, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(filters, st.binary(min_size=1, max_size=4), st.lists(cells_of_a_row(), min_size=1,
                                                              max_size=3), st.integers(0, 2**32))
def test_apply_filter_agrees_with_the_model(f, key, rows, seed):
    assert _accepts(f) == model_valid(f), f
    assume(model_valid(f))
    fn = F.compile_filter(f, random.Random(seed))
    rng = random.Random(seed)
    for cells in rows:     # one compiled filter over several rows, as a read uses it
        expected = model_filter(f, key, cells, model_draws(f, rng))
        assert fn(key, cells) == expected


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(filters, st.binary(min_size=1, max_size=4), cells_of_a_row(), st.integers(0, 2**32))
def test_filter_families_never_changes_the_answer(f, key, cells, seed):
    assume(model_valid(f))
    need = F.filter_families(f)
    full = F.apply_filter(f, key, cells, random.Random(seed))
    assert full == model_filter(f, key, cells, model_draws(f, random.Random(seed)))
    if need is not None:
        some = [c for c in cells if c.family in need]
        assert F.apply_filter(f, key, some, random.Random(seed)) == full
        assert {c.family for c in full} <= need


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(rows_and_filters())
def test_a_filtered_read_of_many_rows(case):
    rows, f, seed = case
    fn = F.compile_filter(f, random.Random(seed))
    got = []
    for key, cells in rows:
        out = fn(key, cells)
        if out:
            got.append((key, out))
    assert got == model_read(f, rows, random.Random(seed))


_BAD_LEAVES = [
    st.builds(F.CellsPerRowLimit, st.integers(-2, -1)),
    st.builds(F.CellsPerColumnLimit, st.integers(-2, -1)),
    st.builds(F.CellsPerRowOffset, st.integers(-2, -1)),
    st.builds(F.ApplyLabel, st.sampled_from(["", "UP", "a_b", "x" * 16, "é"])),
    st.builds(F.RowSample, st.sampled_from([0.0, 1.0, -0.5, 2.0])),
    st.builds(F.QualifierRegex, st.sampled_from([b"(", b"[z-a]", b"a{2,1}", b"\\"])),
    st.builds(F.FamilyNameRegex, st.sampled_from(["a:b", "(", ":"])),
    st.builds(F.TimestampRange, st.sampled_from([1500, -1000, 0]),
              st.sampled_from([None, 2500, -1000])),
    st.just(F.ValueBitmask(b"")),
    st.just(F.ColumnRange("")),
    st.builds(lambda f: F.Chain((f,)), st.sampled_from([F.PassAll(), F.StripValue()])),
    st.just(F.Interleave(())),
]


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(st.one_of(*_LEAVES, _SAMPLE, *_BAD_LEAVES), _composites, max_leaves=8))
def test_check_filter_accepts_exactly_what_the_model_accepts(f):
    assert _accepts(f) == model_valid(f), f
