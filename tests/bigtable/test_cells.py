"""The family blob (bigtable/cells.py): golden bytes, round trips, cell edits."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from widetable.bigtable import cells as C
from widetable.bigtable.gc import MaxVersions, gc_expired
from widetable.bigtable.types import Cell

GOLDEN = "92 01 92 92 c4 02 71 31 92 92 cd 07 d0 c4 01 62 92 cd 03 e8 c4 01 61 92 c4 02 71 32 91 92 cd 03 e8 c4 00"


def test_golden_blob_is_in_format_md() -> None:
    from pathlib import Path

    blob = C.encode_columns({b"q2": [(1000, b"")], b"q1": [(2000, b"b"), (1000, b"a")]})
    assert blob.hex(" ") == GOLDEN  # DO NOT CHANGE: embedded in on-disk data
    assert GOLDEN in (Path(__file__).parents[2] / "docs" / "format.md").read_text()
    assert C.decode_columns(blob) == {b"q1": [(2000, b"b"), (1000, b"a")], b"q2": [(1000, b"")]}
    assert C.encode_columns({}) is None and C.encode_columns({b"q": []}) is None
    assert C.decode_columns(None) == {}


columns = st.dictionaries(
    st.binary(max_size=8),
    st.lists(st.tuples(st.integers(0, 2**50).map(lambda t: t * 1000), st.binary(max_size=8)),
             min_size=1, max_size=4, unique_by=lambda c: c[0]).map(lambda v: sorted(v, reverse=True)),
    max_size=5)


@given(columns)
def test_round_trip_and_row_order(cols) -> None:
    assert C.decode_columns(C.encode_columns(cols)) == cols if cols else C.encode_columns(cols) is None
    cells = C.to_cells("f", cols)
    assert cells == sorted(cells, key=lambda c: (c.qualifier, -c.timestamp))
    assert all(isinstance(c, Cell) for c in cells)


def test_put_and_delete_versions() -> None:
    cols: C.Columns = {}
    for ts in (2000, 1000, 3000, 2000):
        C.put_cell(cols, b"q", ts, b"%d" % ts)
    assert cols == {b"q": [(3000, b"3000"), (2000, b"2000"), (1000, b"1000")]}
    C.delete_versions(cols, b"q", 2000, 3000)
    assert cols == {b"q": [(3000, b"3000"), (1000, b"1000")]}
    C.delete_versions(cols, b"q", None, None)
    assert cols == {}
    C.put_cell(cols, b"q", 5000, b"a")
    C.put_cell(cols, b"q", 4000, b"b")
    assert C.collect_garbage(cols, gc_expired, MaxVersions(1), 0) is True
    assert cols == {b"q": [(5000, b"a")]}
    assert C.collect_garbage(cols, gc_expired, None, 0) is False
