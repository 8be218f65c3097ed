"""The row blob: round trips over every attribute type, version merging and trimming.

The frozen bytes of row blobs are checked by the tripwire in tests/keys/test_codec.py.
"""

from __future__ import annotations

import math

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from widetable.table.row import Row
from widetable.table.rowcodec import (
    FORMAT,
    Projection,
    decode_versions,
    encode_latest,
    encode_versions,
    merge_version,
    trim,
    unpack,
)

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# --- strategies --------------------------------------------------------------

column_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
timestamps = st.integers(0, INT64_MAX)
attribute_values = st.one_of(
    st.text(max_size=30),
    st.integers(INT64_MIN, INT64_MAX),
    st.floats(),  # NaN, infinities and -0.0 included
    st.booleans(),
    st.binary(max_size=30),
    # Values that collide across types if the codec were careless.
    st.sampled_from([0, 1, 0.0, 1.0, -0.0, True, False, "", b"", "1", b"1"]),
)
pk_values = st.one_of(
    st.text(max_size=10), st.integers(INT64_MIN, INT64_MAX), st.binary(max_size=10)
)
pks = st.lists(pk_values, min_size=1, max_size=4).map(tuple)


def newest_first(versions: list[tuple[int, object]]) -> list[tuple[int, object]]:
    return sorted(versions, key=lambda tv: tv[0], reverse=True)


versions_lists = st.lists(
    st.tuples(timestamps, attribute_values), min_size=1, max_size=5, unique_by=lambda tv: tv[0]
).map(newest_first)
columns_maps = st.dictionaries(column_names, versions_lists, max_size=6)


def same_value(a: object, b: object) -> bool:
    """Equal and of the same type: bool stays bool, int and float stay apart, -0.0 stays -0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        assert isinstance(b, float)
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


def same_versions(a: dict, b: dict) -> bool:
    if list(a) != list(b):
        return False
    for name, versions in a.items():
        va, vb = list(versions), list(b[name])
        if len(va) != len(vb):
            return False
        for (ta, xa), (tb, xb) in zip(va, vb):
            if type(ta) is not int or type(tb) is not int or ta != tb or not same_value(xa, xb):
                return False
    return True


# --- round trips -----------------------------------------------------------------


@given(pks, columns_maps)
def test_encode_versions_round_trips(pk: tuple, columns: dict) -> None:
    blob = encode_versions(pk, columns)
    row = unpack(blob)
    assert row[0] == FORMAT == 1
    assert len(row) == 5
    assert row[1] == tuple(pk)  # the key decodes as a tuple, ready for Row.primary_key
    assert [type(v) for v in row[1]] == [type(v) for v in pk]
    assert same_versions(decode_versions(row), columns)
    # Any MessagePack reader sees the same row: lists or tuples, decoding must not care.
    as_lists = msgpack.unpackb(blob, use_list=True, raw=False)
    assert same_versions(decode_versions(as_lists), columns)


@given(pks, st.dictionaries(column_names, st.tuples(timestamps, attribute_values), max_size=6))
def test_encode_latest_round_trips(pk: tuple, cells: dict) -> None:
    latest = {n: v for n, (_, v) in cells.items()}
    stamps = {n: t for n, (t, _) in cells.items()}
    expected = {n: [(t, v)] for n, (t, v) in cells.items()}
    for blob in (encode_latest(pk, latest, stamps), encode_versions(pk, expected)):
        row = unpack(blob)
        assert row[1] == tuple(pk)  # the key decodes as a tuple, ready for Row.primary_key
        assert row[4] is None
        assert same_versions(decode_versions(row), expected)


@given(pks, st.dictionaries(column_names, attribute_values, min_size=1, max_size=6), timestamps)
def test_encode_latest_with_one_shared_timestamp(pk: tuple, latest: dict, ts: int) -> None:
    expected = {n: [(ts, v)] for n, v in latest.items()}
    from_int = encode_latest(pk, latest, ts)
    from_dict = encode_latest(pk, latest, dict.fromkeys(latest, ts))
    assert from_int == from_dict
    assert unpack(from_int)[3] == ts
    assert same_versions(decode_versions(unpack(from_int)), expected)
    assert Row(pk, latest, unpack(from_int)[3]).timestamps == dict.fromkeys(latest, ts)


@given(pks, columns_maps, st.data())
def test_projection_is_the_key_and_the_newest_values(pk: tuple, columns: dict, data) -> None:
    """``Projection(names).rows`` is, per blob, the key then the newest value of each name
    (None where the row has none), types kept: what ``unpack`` gives, other columns and
    older versions left out."""
    present = sorted(n for n, vs in columns.items() if vs)
    names = data.draw(st.lists(st.sampled_from(present), unique=True) if present else
                      st.just([]))
    names = list(dict.fromkeys(names + data.draw(st.lists(column_names, max_size=3))))
    blobs = [encode_versions(pk, columns), encode_latest(pk, {}, 1)]
    projection = Projection(names)
    latest = unpack(blobs[0])[2]
    want = [tuple(pk) + tuple(latest.get(n) for n in names), tuple(pk) + (None,) * len(names)]
    for got in (projection.rows(blobs), [projection.row(b) for b in blobs]):
        assert len(got) == 2 and all(type(g) is tuple for g in got)
        for g, w in zip(got, want):
            assert len(g) == len(w) and all(same_value(a, b) or (a is b is None)
                                            for a, b in zip(g, w))


def test_rows_with_a_stamp_per_column_still_decode() -> None:
    """A stamps map whose values are all equal is valid too (the grammar allows both forms)."""
    blob = msgpack.packb([1, ["k"], {"a": 1, "b": True}, {"a": 5, "b": 5}, None], use_bin_type=True)
    assert decode_versions(unpack(blob)) == {"a": [(5, 1)], "b": [(5, True)]}


@pytest.mark.parametrize(
    "value",
    [
        True,
        False,
        1,
        0,
        1.0,
        0.0,
        -0.0,
        math.inf,
        -math.inf,
        "1",
        b"1",
        "",
        b"",
        INT64_MIN,
        INT64_MAX,
    ],
)
def test_each_attribute_type_keeps_its_type(value: object) -> None:
    blob = encode_versions(("k",), {"c": [(2, value), (1, value)]})
    got = decode_versions(unpack(blob))["c"]
    assert len(got) == 2
    assert all(same_value(v, value) for _, v in got)


def test_nan_stays_a_float_nan() -> None:
    got = decode_versions(unpack(encode_latest(("k",), {"c": math.nan}, 1)))["c"][0][1]
    assert isinstance(got, float) and math.isnan(got)


def test_empty_columns_are_dropped() -> None:
    row = unpack(encode_versions(("k",), {"gone": [], "kept": [(1, "x")]}))
    assert row[2] == {"kept": "x"}
    assert decode_versions(row) == {"kept": [(1, "x")]}
    assert decode_versions(unpack(encode_versions(("k",), {}))) == {}


def test_history_holds_only_columns_with_older_versions() -> None:
    row = unpack(encode_versions(("k",), {"a": [(3, 1), (2, 2), (1, 3)], "b": [(3, "x")]}))
    assert row[2] == {"a": 1, "b": "x"}
    assert row[4] == {"a": [2, 2, 1, 3]}
    assert unpack(encode_versions(("k",), {"b": [(3, "x")]}))[4] is None


# --- merge_version -----------------------------------------------------------------


@given(st.lists(st.tuples(st.integers(0, 20), attribute_values), max_size=30))
def test_merge_version_keeps_newest_first_and_replaces_same_timestamp(
    writes: list[tuple[int, object]],
) -> None:
    versions: list[tuple[int, object]] = []
    model: dict[int, object] = {}
    for ts, value in writes:
        merge_version(versions, ts, value)
        model[ts] = value  # the last write at a timestamp wins
    expected = sorted(model.items(), key=lambda tv: tv[0], reverse=True)
    assert same_versions({"c": versions}, {"c": expected})


def test_merge_version_examples() -> None:
    versions: list[tuple[int, object]] = []
    merge_version(versions, 5, "b")
    merge_version(versions, 9, "c")
    merge_version(versions, 1, "a")
    merge_version(versions, 7, "x")
    assert versions == [(9, "c"), (7, "x"), (5, "b"), (1, "a")]
    merge_version(versions, 5, 5.0)
    assert versions == [(9, "c"), (7, "x"), (5, 5.0), (1, "a")]
    assert type(versions[2][1]) is float


# --- trim ------------------------------------------------------------------------------


@given(
    columns_maps,
    st.integers(1, 6),
    st.one_of(st.none(), timestamps, st.integers(-1, 100)),
)
def test_trim_keeps_newest_versions_after_the_cutoff(
    columns: dict, max_versions: int, cutoff
) -> None:
    expected = {}
    for name, versions in columns.items():
        kept = [tv for tv in versions if cutoff is None or tv[0] > cutoff][:max_versions]
        if kept:
            expected[name] = kept
    trimmed = {n: list(vs) for n, vs in columns.items()}
    trim(trimmed, max_versions, cutoff)
    assert same_versions(trimmed, expected)


def test_trim_examples() -> None:
    columns: dict[str, list[tuple[int, object]]] = {
        "a": [(30, 3), (20, 2), (10, 1)],
        "b": [(10, "old")],
        "c": [(40, True), (35, False)],
    }
    trim(columns, 2, None)
    assert columns == {"a": [(30, 3), (20, 2)], "b": [(10, "old")], "c": [(40, True), (35, False)]}
    # A version exactly at the cutoff has expired; a column left empty is removed.
    trim(columns, 2, 20)
    assert columns == {"a": [(30, 3)], "c": [(40, True), (35, False)]}
    trim(columns, 1, 35)
    assert columns == {"c": [(40, True)]}
    trim(columns, 1, 40)
    assert columns == {}


# --- the one-version update path (table._put_latest) -----------------------------

stored_rows = st.one_of(
    st.none(),
    st.dictionaries(column_names, st.tuples(timestamps, attribute_values), max_size=6).map(
        lambda cols: [FORMAT, ["k"], {n: v for n, (_, v) in cols.items()},
                      {n: t for n, (t, _) in cols.items()}, None]),
    st.tuples(timestamps, st.dictionaries(column_names, attribute_values, max_size=6)).map(
        lambda tc: [FORMAT, ["k"], tc[1], tc[0], None]),  # one shared timestamp
)
puts_lists = st.lists(st.tuples(column_names, attribute_values, timestamps), min_size=1,
                      max_size=6)


@given(stored_rows, puts_lists)
def test_put_latest_is_the_general_merge_for_one_version(row, puts) -> None:
    """update_row's shortcut for tables of one version without TTL gives the very bytes of
    the general path (visible versions, merge, trim to one, encode), older, equal and
    newer timestamps alike."""
    from widetable.table.reader import visible_versions
    from widetable.table.table import _put_latest

    stored = None if row is None else unpack(msgpack.packb(row))
    versions = visible_versions(stored, None, 1) if stored is not None else {}
    for name, value, ts in puts:
        merge_version(versions.setdefault(name, []), ts, value)
    trim(versions, 1, None)
    assert _put_latest(("k",), stored, puts) == encode_versions(("k",), versions)


def test_rows_read_are_not_tracked_by_the_cycle_collector(tmp_path) -> None:
    """A range read makes thousands of Rows at a time; they hold plain values only, so the
    cycle collector does not track them (``Row`` is ``gc=False``)."""
    import gc

    import widetable

    db = widetable.open(str(tmp_path / "d"))
    try:
        table = db.create_table("t", [("k", "STRING")])
        for i in range(3):
            table.put_row((f"k{i}",), {"a": i, "b": "x"})
        rows = table.get_range((widetable.INF_MIN,), (widetable.INF_MAX,)).rows
        rows.append(table.get_row(("k0",)))
        assert len(rows) == 4 and not any(map(gc.is_tracked, rows))
    finally:
        db.close()
