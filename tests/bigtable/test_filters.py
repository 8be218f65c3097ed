"""RowFilter semantics, one documented fact at a time (the differential test covers the
combinations): Bigtable's v2 RowFilter documentation is the reference."""

from __future__ import annotations

import random

import pytest

from widetable.bigtable.filters import (
    ApplyLabel,
    BlockAll,
    CellsPerColumnLimit,
    CellsPerRowLimit,
    CellsPerRowOffset,
    Chain,
    ColumnRange,
    Condition,
    FamilyNameRegex,
    Interleave,
    PassAll,
    QualifierRegex,
    RowKeyRegex,
    RowSample,
    Sink,
    StripValue,
    TimestampRange,
    ValueBitmask,
    ValueRange,
    ValueRegex,
    apply_filter,
    check_filter,
    compile_filter,
    filter_families,
)
from widetable.bigtable.types import Cell
from widetable.errors import ParameterInvalid


def C(family, qualifier, ts, value=b"v", labels=()):
    return Cell(family, qualifier, ts, value, tuple(labels))


def show(cells):
    return [(c.family, c.qualifier, c.timestamp, c.value, c.labels) for c in cells]


# The row of the proto's Sink example: A:A@1 w, A:B@2 x, B:B@4 z
SINK_ROW = [C("A", b"A", 1000, b"w"), C("A", b"B", 2000, b"x"), C("B", b"B", 4000, b"z")]


def test_sink_example_of_the_proto():
    f = Chain((FamilyNameRegex("A"),
               Interleave((PassAll(), Chain((ApplyLabel("foo"), Sink())))),
               QualifierRegex(b"B")))
    # a copy of every cell reaching the sink is in the result despite the qualifier filter
    assert show(apply_filter(f, b"r", SINK_ROW)) == [
        ("A", b"A", 1000, b"w", ("foo",)),
        ("A", b"B", 2000, b"x", ()),
        ("A", b"B", 2000, b"x", ("foo",)),
    ]


def test_sink_passes_nothing_to_its_parent():
    assert apply_filter(Chain((Sink(), BlockAll())), b"r", SINK_ROW) == SINK_ROW
    # the chain after a sink sees no cells
    f = Chain((Sink(), CellsPerRowOffset(0)))
    assert apply_filter(f, b"r", SINK_ROW) == SINK_ROW
    # only what reaches the sink is sunk
    f = Chain((ColumnRange("A", b"B", b"B", True, True), Sink()))
    assert show(apply_filter(f, b"r", SINK_ROW)) == [("A", b"B", 2000, b"x", ())]


def test_interleave_keeps_duplicates_in_row_order():
    row = [C("a", b"q", 3000, b"1"), C("a", b"q", 2000, b"2"), C("b", b"q", 1000, b"3")]
    f = Interleave((FamilyNameRegex("b"), PassAll(), CellsPerRowLimit(1)))
    assert show(apply_filter(f, b"r", row)) == [
        ("a", b"q", 3000, b"1", ()), ("a", b"q", 3000, b"1", ()),
        ("a", b"q", 2000, b"2", ()),
        ("b", b"q", 1000, b"3", ()), ("b", b"q", 1000, b"3", ()),
    ]


def test_copies_of_one_cell_are_ordered_by_label_then_value():
    row = [C("a", b"q", 1000, b"v")]
    f = Interleave((ApplyLabel("zz"), Chain((StripValue(), ApplyLabel("aa"))), PassAll(),
                    StripValue()))
    assert show(apply_filter(f, b"r", row)) == [
        ("a", b"q", 1000, b"", ()), ("a", b"q", 1000, b"v", ()),
        ("a", b"q", 1000, b"", ("aa",)), ("a", b"q", 1000, b"v", ("zz",)),
    ]


def test_limits_count_each_copy():
    row = [C("a", b"q", 3000), C("a", b"q", 2000)]
    doubled = Interleave((PassAll(), PassAll()))
    assert len(apply_filter(Chain((doubled, CellsPerRowLimit(3))), b"r", row)) == 3
    assert len(apply_filter(Chain((doubled, CellsPerRowOffset(1))), b"r", row)) == 3
    got = apply_filter(Chain((doubled, CellsPerColumnLimit(1))), b"r", row)
    assert show(got) == [("a", b"q", 3000, b"v", ())]


def test_cells_per_column_limit_counts_per_family_and_qualifier():
    row = [C("a", b"q", 3000), C("a", b"q", 2000), C("a", b"r", 3000),
           C("b", b"q", 3000), C("b", b"q", 1000)]
    assert show(apply_filter(CellsPerColumnLimit(1), b"r", row)) == [
        ("a", b"q", 3000, b"v", ()), ("a", b"r", 3000, b"v", ()), ("b", b"q", 3000, b"v", ())]
    assert apply_filter(CellsPerColumnLimit(0), b"r", row) == []
    # one qualifier in two families, side by side in row order: two columns
    row = [C("a", b"z", 3000), C("b", b"z", 3000), C("b", b"z", 2000)]
    assert show(apply_filter(CellsPerColumnLimit(1), b"r", row)) == [
        ("a", b"z", 3000, b"v", ()), ("b", b"z", 3000, b"v", ())]


def test_row_limit_and_offset():
    row = [C("a", b"q%d" % i, 1000) for i in range(5)]
    assert apply_filter(CellsPerRowLimit(2), b"r", row) == row[:2]
    assert apply_filter(CellsPerRowOffset(2), b"r", row) == row[2:]
    assert apply_filter(CellsPerRowOffset(9), b"r", row) == []


def test_regexes_are_full_match_on_raw_bytes():
    row = [C("a", b"ab", 1000), C("a", b"abc", 1000), C("a", b"a\nb", 1000),
           C("a", b"\xff\x00", 1000), C("a", b"\xc3\x28", 1000)]
    q = lambda p: [c.qualifier for c in apply_filter(QualifierRegex(p), b"r", row)]
    assert q(b"ab") == [b"ab"]                     # anchored at both ends
    assert q(b"a.b") == []                         # . does not match the newline
    assert q(b"a\\Cb") == [b"a\nb"]                # \C is any byte, newline included
    assert q(b"a.*") == [b"ab", b"abc"]            # . is [^\n]
    assert q(b"a\\C*") == [b"ab", b"abc", b"a\nb"]
    assert q(b"\xff\\x00") == [b"\xff\x00"]       # raw bytes, not UTF-8
    assert q(b"\\xc3\\C") == [b"\xc3\x28"]       # invalid UTF-8 is just bytes
    assert q(b"[\\x80-\\xff]\\C") == [b"\xff\x00", b"\xc3\x28"]
    assert q(b"(?s)a.b") == [b"a\nb"]


def test_row_key_and_value_regex():
    row = [C("a", b"q", 1000, b"hello"), C("a", b"r", 1000, b"\x00\x01")]
    assert apply_filter(RowKeyRegex(b"user#\\d+"), b"user#12", row) == row
    assert apply_filter(RowKeyRegex(b"user#\\d+"), b"user#12x", row) == []
    assert apply_filter(RowKeyRegex(b"k\\C*"), b"k\n\xff", row) == row
    assert apply_filter(ValueRegex(b"h.*o"), b"k", row) == row[:1]
    assert apply_filter(ValueRegex(b"\\x00\\C"), b"k", row) == row[1:]


def test_family_regex():
    row = [C("fam", b"c2", 0), C("fam0", b"c", 0), C("fam1", b"c", 0), C("fam2", b"c", 0)]
    got = apply_filter(FamilyNameRegex("fam[02]"), b"k", row)
    assert [c.family for c in got] == ["fam0", "fam2"]
    with pytest.raises(ParameterInvalid, match="':'"):
        check_filter(FamilyNameRegex("fam:c"))


def test_column_range():
    row = [C("a", b"", 0), C("a", b"b", 0), C("a", b"c", 0), C("a", b"d", 0), C("b", b"c", 0)]
    q = lambda f: [(c.family, c.qualifier) for c in apply_filter(f, b"k", row)]
    assert q(ColumnRange("a")) == [("a", b""), ("a", b"b"), ("a", b"c"), ("a", b"d")]
    assert q(ColumnRange("a", b"b", b"d")) == [("a", b"b"), ("a", b"c")]
    assert q(ColumnRange("a", b"b", b"d", False, True)) == [("a", b"c"), ("a", b"d")]
    assert q(ColumnRange("b", None, b"c", True, True)) == [("b", b"c")]
    assert q(ColumnRange("a", b"d", b"b")) == []


def test_value_range_and_bitmask():
    row = [C("a", b"1", 0, b""), C("a", b"2", 0, b"a"), C("a", b"3", 0, b"b\x00"),
           C("a", b"4", 0, b"\xff\x0f")]
    q = lambda f: [c.qualifier for c in apply_filter(f, b"k", row)]
    assert q(ValueRange()) == [b"1", b"2", b"3", b"4"]
    assert q(ValueRange(b"a", b"b\x00")) == [b"2"]
    assert q(ValueRange(b"a", b"b\x00", False, True)) == [b"3"]
    assert q(ValueRange(None, b"a", True, True)) == [b"1", b"2"]
    assert q(ValueBitmask(b"\x0f\x0f")) == [b"4"]
    assert q(ValueBitmask(b"\x00")) == [b"2"]      # the length must match exactly


def test_timestamp_range_is_half_open_and_end_zero_is_unbounded():
    row = [C("a", b"q", 5000), C("a", b"q", 4000), C("a", b"q", 3000)]
    ts = lambda f: [c.timestamp for c in apply_filter(f, b"k", row)]
    assert ts(TimestampRange(3000, 5000)) == [4000, 3000]
    assert ts(TimestampRange(4000)) == [5000, 4000]
    assert ts(TimestampRange(4000, 0)) == [5000, 4000]
    assert ts(TimestampRange()) == [5000, 4000, 3000]


def test_strip_value_keeps_cells_with_an_empty_value():
    row = [C("a", b"q", 2000, b"x" * 100, ("l",)), C("a", b"r", 1000, b"")]
    assert show(apply_filter(StripValue(), b"k", row)) == [
        ("a", b"q", 2000, b"", ("l",)), ("a", b"r", 1000, b"", ())]


def test_condition_uses_the_predicate_only_to_choose():
    row = [C("a", b"q", 1000, b"x"), C("b", b"q", 1000, b"y")]
    labelled = Chain((FamilyNameRegex("a"), ApplyLabel("pred")))
    f = Condition(labelled, FamilyNameRegex("b"), BlockAll())
    assert show(apply_filter(f, b"k", row)) == [("b", b"q", 1000, b"y", ())]  # no "pred" label
    f = Condition(FamilyNameRegex("zzz"), PassAll(), ApplyLabel("no"))
    assert [c.labels for c in apply_filter(f, b"k", row)] == [("no",), ("no",)]
    # a missing branch outputs nothing
    assert apply_filter(Condition(PassAll()), b"k", row) == []
    assert apply_filter(Condition(BlockAll(), PassAll()), b"k", row) == []
    # a missing predicate is pass-all: true when the row has cells
    assert apply_filter(Condition(None, StripValue()), b"k", row)[0].value == b""
    assert apply_filter(Condition(None, PassAll(), PassAll()), b"k", []) == []


def test_condition_predicate_sees_the_whole_input():
    row = [C("a", b"q", 1000), C("b", b"q", 1000)]
    f = Chain((Condition(Chain((CellsPerRowOffset(1), FamilyNameRegex("b"))),
                         FamilyNameRegex("a")), PassAll()))
    assert [c.family for c in apply_filter(f, b"k", row)] == ["a"]


def test_labels_one_per_cell():
    check_filter(Interleave((ApplyLabel("a"), ApplyLabel("b"))))
    check_filter(Chain((Condition(ApplyLabel("pred"), PassAll()), ApplyLabel("out"))))
    for bad in (Chain((ApplyLabel("a"), ApplyLabel("b"))),
                Chain((Interleave((ApplyLabel("a"), PassAll())), ApplyLabel("b"))),
                Chain((Condition(PassAll(), ApplyLabel("a")),
                       Chain((PassAll(), ApplyLabel("b")))))):
        with pytest.raises(ParameterInvalid, match="one sub-filter with ApplyLabel"):
            check_filter(bad)
    row = [C("a", b"q", 1000)]
    f = Interleave((ApplyLabel("a"), ApplyLabel("b")))
    assert [c.labels for c in apply_filter(f, b"k", row)] == [("a",), ("b",)]


def test_sink_is_refused_inside_a_condition():
    for bad in (Condition(Sink(), PassAll()), Condition(PassAll(), Chain((PassAll(), Sink()))),
                Condition(PassAll(), None, Interleave((Sink(), PassAll())))):
        with pytest.raises(ParameterInvalid, match="Sink"):
            check_filter(bad)


def test_row_sample_draws_once_per_row_per_node():
    rows = [(b"k%d" % i, [C("a", b"q", 1000)]) for i in range(2000)]
    fn = compile_filter(RowSample(0.25), random.Random(7))
    kept = [key for key, cells in rows if fn(key, cells)]
    assert 400 < len(kept) < 600
    again = compile_filter(RowSample(0.25), random.Random(7))
    assert kept == [key for key, cells in rows if again(key, cells)]
    # pre-order: a sample inside a branch that is not taken still draws
    rng, ref = random.Random(3), random.Random(3)
    f = Chain((Condition(BlockAll(), RowSample(0.5), PassAll()), RowSample(0.5)))
    fn = compile_filter(f, rng)
    for key, cells in rows[:200]:
        ref.random()
        expect = cells if ref.random() < 0.5 else []
        assert fn(key, cells) == expect


@pytest.mark.parametrize("bad, named", [
    (RowSample(0.0), "0.0"), (RowSample(1.0), "1.0"), (RowSample(1.5), "1.5"),
    (CellsPerRowLimit(-1), "-1"), (CellsPerRowOffset(-2), "-2"), (CellsPerColumnLimit(-3), "-3"),
    (CellsPerRowLimit(2.0), "2.0"),
    (ApplyLabel("Upper"), "Upper"), (ApplyLabel("x" * 16), "xxxxxxxxxxxxxxxx"),
    (ApplyLabel(""), "''"),
    (QualifierRegex(b"a("), "a("), (ValueRegex(b"[z-a]"), "z-a"), (RowKeyRegex("text"), "text"),
    (FamilyNameRegex(b"bytes"), "bytes"),
    (ColumnRange(""), "''"), (ColumnRange("a", "s"), "'s'"),
    (ValueRange(start="s"), "'s'"),
    (TimestampRange(-1000), "-1000"), (TimestampRange(0, 1500), "1500"),
    (ValueBitmask(b""), "b''"),
    (Chain((PassAll(),)), "at least two"), (Interleave(()), "at least two"),
    (Chain((PassAll(), None)), "None"), ("not a filter", "not a filter"),
])
def test_check_filter_names_the_bad_value(bad, named):
    with pytest.raises(ParameterInvalid) as info:
        check_filter(bad)
    assert named in str(info.value)
    with pytest.raises(ParameterInvalid):
        compile_filter(bad)


def test_depth_limit():
    f = PassAll()
    for _ in range(20):
        f = Chain((f, PassAll()))
    check_filter(f)
    with pytest.raises(ParameterInvalid, match="deeper than 20"):
        check_filter(Chain((f, PassAll())))


def test_lists_become_tuples_and_filters_hash():
    assert Chain([PassAll(), BlockAll()]) == Chain((PassAll(), BlockAll()))
    assert hash(Interleave([PassAll(), StripValue()]))


def test_none_filter_passes_all_and_tuples_are_accepted():
    row = (C("a", b"q", 1000),)
    assert compile_filter(None)(b"k", row) == list(row)
    assert apply_filter(CellsPerRowLimit(5), b"k", row) == list(row)


def test_filter_families():
    assert filter_families(None) is None
    assert filter_families(PassAll()) is None
    assert filter_families(FamilyNameRegex("cf1")) == {"cf1"}
    assert filter_families(FamilyNameRegex("cf1|cf2")) == {"cf1", "cf2"}
    assert filter_families(FamilyNameRegex("cf.*")) is None
    assert filter_families(ColumnRange("x", b"a")) == {"x"}
    assert filter_families(Chain((FamilyNameRegex("a|b"), ColumnRange("b")))) == {"b"}
    assert filter_families(Interleave((ColumnRange("a"), ColumnRange("b")))) == {"a", "b"}
    assert filter_families(BlockAll()) == set()
    # a row count before the family is chosen depends on every family
    assert filter_families(Chain((CellsPerRowLimit(2), FamilyNameRegex("a")))) is None
    assert filter_families(Chain((FamilyNameRegex("a"), CellsPerRowLimit(2)))) == {"a"}
    # the predicate steers the output: its families are needed too
    assert filter_families(Condition(ColumnRange("p"), FamilyNameRegex("t"),
                                     FamilyNameRegex("f"))) == {"p", "t", "f"}
    # a sink before the narrowing outputs every family
    assert filter_families(Chain((Interleave((Sink(), PassAll())), FamilyNameRegex("a")))) is None
    assert filter_families(Chain((FamilyNameRegex("a"), Sink()))) == {"a"}


def test_native_and_public_full_match_agree():
    from widetable.bigtable import filters as F

    class PublicOnly:     # what _full_match falls back to without the native object
        def __init__(self, rx):
            self.fullmatch = rx.fullmatch

    subjects = [b"", b"a", b"ab", b"a\nb", b"\xff", b"\x00\x00", b"abab", b"b"]
    for pattern in (b"a*", b"(ab)+", b"\\C", b"a.b", b"a\\Cb", b"[^a]*", b"", b"(?s).*"):
        rx = F._regex(pattern, "test")
        native, public = F._full_match(rx), F._full_match(PublicOnly(rx))
        for s in subjects:
            assert native(s) == public(s) == (rx.fullmatch(s) is not None), (pattern, s)


def test_compiled_filters_are_remembered_by_repr():
    f = Chain((QualifierRegex(b"c[0-9]"), CellsPerColumnLimit(1)))
    assert compile_filter(f) is compile_filter(Chain((QualifierRegex(b"c[0-9]"),
                                                       CellsPerColumnLimit(1))))
    # equal but not the same filter to check_filter: True == 1, yet True is refused
    compile_filter(CellsPerRowLimit(1))
    with pytest.raises(ParameterInvalid, match="got True"):
        compile_filter(CellsPerRowLimit(True))
    # an explicit RNG compiles afresh, so its draws are its own
    assert compile_filter(RowSample(0.5), random.Random(1)) is not compile_filter(
        RowSample(0.5), random.Random(1))
