"""Bigtable's messages <-> the library's values (wire/bigtable): round trips, the ReadRows
chunk stream's shape, and the errors a bad message gets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from widetable.bigtable import filters as F
from widetable.bigtable import gc as G
from widetable.bigtable.types import (
    AddToCell,
    BigtableRow,
    Cell,
    DeleteFromColumn,
    DeleteFromFamily,
    DeleteFromRow,
    FamilySpec,
    MergeToCell,
    ReadModifyWriteRule,
    RowRange,
    RowSet,
    SetCell,
    TableInfo,
)
from widetable.errors import NotSupported, ParameterInvalid
from widetable.wire.bigtable import admin, v2
from widetable.wire.bigtable import convert as C
from widetable.wire.bigtable.rows import InvalidChunk, encode_rows, merge_rows

keys = st.binary(min_size=1, max_size=12)
families = st.sampled_from(["a", "cf", "cf2", "z_1"])
qualifiers = st.binary(max_size=6)
stamps = st.integers(0, 2**50).map(lambda t: t * 1000)
labels = st.lists(st.sampled_from(["x", "lbl", "é"]), max_size=2).map(tuple)


@st.composite
def rows(draw, max_value: int = 40):
    key = draw(keys)
    cells = draw(st.lists(st.builds(Cell, families, qualifiers, stamps,
                                    st.binary(max_size=max_value), labels),
                          min_size=1, max_size=8))
    cells.sort(key=lambda c: (c.family, c.qualifier, -c.timestamp))
    return BigtableRow(key, tuple(cells))


@st.composite
def row_streams(draw, max_value: int = 40):
    out = draw(st.lists(rows(max_value), max_size=6, unique_by=lambda r: r.key))
    return sorted(out, key=lambda r: r.key)


def _parse(messages):
    return [v2.ReadRowsResponse.FromString(m) for m in messages]


@settings(max_examples=300, deadline=None)
@given(row_streams(), st.integers(40, 400), st.integers(1, 50))
def test_rows_survive_chunking_at_any_message_and_piece_size(stream, max_message, max_piece):
    messages = list(encode_rows(stream, max_message=max_message, max_piece=max_piece))
    parsed = _parse(messages)
    assert list(merge_rows(parsed)) == stream
    for msg in parsed:
        # client 2.39.0 refuses a message whose first chunk has no row key
        assert msg.chunks and msg.chunks[0].row_key


@settings(max_examples=100, deadline=None)
@given(row_streams(max_value=200))
def test_a_row_that_fits_is_never_split_across_messages(stream):
    budget = 600
    where: dict[bytes, set[int]] = {}
    for i, msg in enumerate(_parse(encode_rows(stream, max_message=budget, max_piece=10_000))):
        key = None
        for c in msg.chunks:
            key = c.row_key or key
            where.setdefault(key, set()).add(i)
            if c.commit_row:
                key = None
    for row in stream:
        alone = sum(len(m) for m in encode_rows([row], max_message=10**9))
        if alone + 16 <= budget:
            assert len(where[row.key]) == 1, row.key


def test_a_large_cell_is_split_into_pieces_and_no_message_reaches_4_mib():
    big = bytes(range(256)) * (9 * 2**20 // 256)  # 9 MiB
    row = BigtableRow(b"k", (Cell("cf", b"big", 1000, big), Cell("cf", b"small", 1000, b"s")))
    messages = list(encode_rows([row]))
    assert len(messages) >= 9
    assert max(len(m) for m in messages) < 4 * 2**20
    parsed = _parse(messages)
    sizes = [c.value_size for m in parsed for c in m.chunks]
    assert sizes[0] == len(big) and sizes[-1] == 0
    assert list(merge_rows(parsed)) == [row]


def test_rows_without_cells_are_not_sent():
    assert list(encode_rows([BigtableRow(b"a", ())])) == []


def test_the_merger_refuses_broken_streams():
    CellChunk = v2.ReadRowsResponse.CellChunk
    no_key = v2.ReadRowsResponse(chunks=[CellChunk(value=b"v", commit_row=True)])
    with pytest.raises(InvalidChunk):
        list(merge_rows([no_key]))
    unfinished = v2.ReadRowsResponse(chunks=[CellChunk(row_key=b"k", value=b"v")])
    unfinished.chunks[0].family_name.value = "cf"
    unfinished.chunks[0].qualifier.value = b"q"
    with pytest.raises(InvalidChunk):
        list(merge_rows([unfinished]))


def test_reset_row_drops_the_row_so_far():
    CellChunk = v2.ReadRowsResponse.CellChunk
    first = CellChunk(row_key=b"k", value=b"old")
    first.family_name.value = "cf"
    first.qualifier.value = b"q"
    again = CellChunk(row_key=b"k", value=b"new", commit_row=True)
    again.family_name.value = "cf"
    again.qualifier.value = b"q"
    msg = v2.ReadRowsResponse(chunks=[first, CellChunk(reset_row=True), again])
    assert list(merge_rows([msg])) == [BigtableRow(b"k", (Cell("cf", b"q", 0, b"new"),))]


# -- row sets -----------------------------------------------------------------------------

bounds = st.one_of(st.none(), keys)
ranges = st.builds(RowRange, bounds, bounds, st.booleans(), st.booleans()).map(
    lambda r: RowRange(r.start, r.end, r.start_inclusive or r.start is None,
                       r.end_inclusive and r.end is not None))


@given(st.builds(RowSet, st.lists(keys, max_size=3).map(tuple),
                 st.lists(ranges, max_size=3).map(tuple)))
def test_row_sets_round_trip(rs):
    decoded = C.decode_row_set(v2.RowSet.FromString(C.encode_row_set(rs).SerializeToString()))
    assert decoded == (None if not rs.keys and not rs.ranges else rs)


def test_an_empty_key_bound_is_unbounded():
    r = v2.RowRange(start_key_closed=b"", end_key_open=b"")
    assert C.decode_row_range(r) == RowRange(None, None, True, False)


# -- mutations and rules ------------------------------------------------------------------

mutations = st.one_of(
    st.builds(SetCell, families, qualifiers, st.one_of(stamps, st.just(-1)), st.binary(max_size=8)),
    st.builds(DeleteFromColumn, families, qualifiers, st.one_of(st.none(), stamps.filter(bool)),
              st.one_of(st.none(), stamps.filter(bool))),
    st.builds(DeleteFromFamily, families),
    st.just(DeleteFromRow()),
    st.builds(AddToCell, families, qualifiers, stamps,
              st.one_of(st.integers(-2**63, 2**63 - 1), st.binary(max_size=8))),
    st.builds(MergeToCell, families, qualifiers, stamps, st.binary(max_size=8)),
)


@given(st.lists(mutations, min_size=1, max_size=6))
def test_mutations_round_trip(muts):
    wire = [v2.Mutation.FromString(C.encode_mutation(m).SerializeToString()) for m in muts]
    assert C.decode_mutations(wire) == muts


@given(st.builds(ReadModifyWriteRule, families, qualifiers, st.binary(max_size=4), st.none())
       | st.builds(ReadModifyWriteRule, families, qualifiers, st.none(),
                   st.integers(-2**63, 2**63 - 1)))
def test_rules_round_trip(rule):
    assert C.decode_rule(v2.ReadModifyWriteRule.FromString(
        C.encode_rule(rule).SerializeToString())) == rule


def test_bad_mutations_name_what_is_wrong():
    with pytest.raises(ParameterInvalid, match="No mutations"):
        C.decode_mutations([])
    with pytest.raises(ParameterInvalid, match="no mutation"):
        C.decode_mutation(v2.Mutation())
    add = v2.Mutation()
    add.add_to_cell.family_name = "agg"
    add.add_to_cell.column_qualifier.raw_value = b"q"
    add.add_to_cell.input.bool_value = True
    with pytest.raises(ParameterInvalid, match="add_to_cell.input"):
        C.decode_mutation(add)
    with pytest.raises(ParameterInvalid, match="neither append_value nor increment_amount"):
        C.decode_rule(v2.ReadModifyWriteRule(family_name="cf"))


# -- GC rules and families ----------------------------------------------------------------

leaf_gc = st.one_of(st.builds(G.MaxVersions, st.integers(1, 100)),
                    st.builds(G.MaxAge, st.integers(1, 10**9).map(lambda n: n * 1000)))
gc_rules = st.recursive(leaf_gc, lambda inner: st.one_of(
    st.builds(G.Union, st.lists(inner, min_size=1, max_size=3).map(tuple)),
    st.builds(G.Intersection, st.lists(inner, min_size=1, max_size=3).map(tuple))), max_leaves=6)


@given(gc_rules)
def test_gc_rules_round_trip(rule):
    wire = admin.GcRule.FromString(C.encode_gc(rule).SerializeToString())
    assert C.decode_gc(wire) == rule


@given(st.one_of(st.none(), gc_rules), st.sampled_from([None, "sum", "min", "max", "hll"]))
def test_families_round_trip(rule, aggregate):
    spec = FamilySpec("cf", gc=rule, aggregate=aggregate)
    wire = admin.ColumnFamily.FromString(C.encode_family(spec).SerializeToString())
    assert C.decode_family("cf", wire) == spec


def test_a_table_lists_its_families_unless_asked_for_its_name_only():
    info = TableInfo("t", {"a": FamilySpec("a", gc=G.MaxVersions(1)), "b": FamilySpec("b")})
    full = C.encode_table(info, "projects/p/instances/i/tables/t")
    assert sorted(full.column_families) == ["a", "b"]
    assert full.column_families["a"].gc_rule.max_num_versions == 1
    assert not C.encode_table(info, "projects/p/instances/i/tables/t", view=1).column_families


def test_value_types_other_than_aggregates_are_refused_by_name():
    cf = admin.ColumnFamily()
    cf.value_type.string_type.SetInParent()
    with pytest.raises(NotSupported, match="string_type"):
        C.decode_family("cf", cf)


# -- filters ------------------------------------------------------------------------------

regex = st.sampled_from([b"a.*", b"\\C+", b"x|y", b""])
leaf_filters = st.one_of(
    st.builds(F.RowKeyRegex, regex), st.builds(F.FamilyNameRegex, st.sampled_from(["cf", "a|b"])),
    st.builds(F.QualifierRegex, regex), st.builds(F.ValueRegex, regex),
    st.builds(F.ColumnRange, families, st.one_of(st.none(), qualifiers), st.one_of(st.none(), qualifiers),
              st.booleans(), st.booleans()).map(
        lambda r: F.ColumnRange(r.family, r.start, r.end, r.start_inclusive or r.start is None,
                                r.end_inclusive and r.end is not None)),
    st.builds(F.ValueRange, st.one_of(st.none(), qualifiers), st.one_of(st.none(), qualifiers),
              st.booleans(), st.booleans()).map(
        lambda r: F.ValueRange(r.start, r.end, r.start_inclusive or r.start is None,
                               r.end_inclusive and r.end is not None)),
    st.builds(F.TimestampRange, stamps, st.one_of(st.none(), stamps.filter(bool))),
    st.builds(F.CellsPerRowOffset, st.integers(0, 5)), st.builds(F.CellsPerRowLimit, st.integers(1, 5)),
    st.builds(F.CellsPerColumnLimit, st.integers(1, 5)), st.just(F.StripValue()),
    st.builds(F.ApplyLabel, st.sampled_from(["lbl", "x1"])), st.just(F.Sink()), st.just(F.PassAll()),
    st.just(F.BlockAll()), st.builds(F.RowSample, st.sampled_from([0.25, 0.5, 0.9])),
    st.builds(F.ValueBitmask, st.binary(min_size=1, max_size=3)),
)


def _valid(flt) -> bool:
    try:
        F.check_filter(flt)
    except ParameterInvalid:
        return False
    return True


row_filters = st.recursive(leaf_filters, lambda inner: st.one_of(
    st.builds(F.Chain, st.lists(inner, min_size=2, max_size=3).map(tuple)),
    st.builds(F.Interleave, st.lists(inner, min_size=2, max_size=3).map(tuple)),
    st.builds(F.Condition, inner, st.one_of(st.none(), inner), st.one_of(st.none(), inner))),
    max_leaves=6).filter(_valid)


@settings(max_examples=300, deadline=None)
@given(row_filters)
def test_filters_round_trip(flt):
    wire = v2.RowFilter.FromString(C.encode_filter(flt).SerializeToString())
    assert C.decode_filter(wire) == flt


def test_no_filter_kind_is_no_filter_and_false_flags_are_refused():
    assert C.decode_filter(v2.RowFilter()) is None
    for flag in ("sink", "pass_all_filter", "block_all_filter", "strip_value_transformer"):
        with pytest.raises(ParameterInvalid, match=flag):
            C.decode_filter(v2.RowFilter(**{flag: False}))


def test_a_bad_regex_is_invalid_argument_naming_it():
    with pytest.raises(ParameterInvalid, match="abc"):
        C.decode_filter(v2.RowFilter(row_key_regex_filter=b"(abc"))


@given(st.lists(st.one_of(st.just((0, "")), st.tuples(st.integers(1, 16), st.text(max_size=20))),
                max_size=30))
def test_mutate_rows_responses_encoded_by_hand_parse_as_protobuf(statuses):
    from widetable.wire.bigtable.rows import encode_mutate_rows_response

    resp = v2.MutateRowsResponse.FromString(encode_mutate_rows_response(statuses))
    assert [(e.index, e.status.code, e.status.message) for e in resp.entries] == [
        (i, c, m) for i, (c, m) in enumerate(statuses)]
    assert all(e.HasField("status") for e in resp.entries)
