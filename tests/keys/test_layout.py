"""The keyspace layout: prefixes in sort order, table ranges, and the key pretty-printer."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from widetable.keys import layout
from widetable.keys.codec import INT64_MAX, INT64_MIN, encode_tuple

table_ids = st.integers(0, layout.MAX_TABLE_ID)
pk_values = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=20),
    st.integers(INT64_MIN, INT64_MAX),
    st.binary(max_size=20),
)
pk_tuples = st.lists(pk_values, min_size=1, max_size=4).map(tuple)


def contains(bounds: tuple[bytes, bytes], key: bytes) -> bool:
    start, end = bounds
    return start <= key < end


# --- prefixes -----------------------------------------------------------------


def test_prefix_bytes() -> None:
    assert (layout.CATALOG, layout.COUNTERS, layout.ROWS) == (b"\x01", b"\x02", b"\x10")


def documented_prefixes() -> list[tuple[int, str]]:
    """``(byte, what)`` for each prefix line of layout's docstring, in the order drawn."""
    doc = layout.__doc__ or ""
    lines = re.findall(r"^\s+0x([0-9A-Fa-f]{2}) .*?\s{2,}(.+?):", doc, re.MULTILINE)
    return [(int(h, 16), what) for h, what in lines]


def test_prefixes_are_drawn_in_sort_order() -> None:
    drawn = documented_prefixes()
    assert drawn == [
        (0x01, "catalog"), (0x02, "counters"), (0x03, "partitions"), (0x04, "statistics"),
        (0x05, "auto-increment"), (0x06, "change log"), (0x07, "checkpoints"),
        (0x08, "index refs"), (0x0A, "search indexes"), (0x0B, "SQL mapping tables"),
        (0x10, "table rows"),
    ]
    assert [b for b, _ in drawn] == sorted(b for b, _ in drawn)
    assert [bytes([b]) for b, _ in drawn] == [
        layout.CATALOG, layout.COUNTERS, layout.PARTITIONS, layout.STATS,
        layout.AUTO_INCREMENT, layout.CHANGE_LOG, layout.CHECKPOINTS, layout.INDEX_REFS,
        layout.SEARCH_INDEXES, layout.SQL_MAPPINGS, layout.ROWS,
    ]


def test_search_index_key_golden() -> None:
    key = layout.search_index_key(7, "ix")
    assert key == b"\x0a\x00\x00\x00\x07ix"
    assert layout.pretty(key) == "/SearchIndex/7/'ix'"
    assert layout.search_index_range(7)[0] <= key < layout.search_index_range(7)[1]
    assert not layout.search_index_range(8)[0] <= key < layout.search_index_range(8)[1]


@given(st.text(alphabet="abcXYZ_09", min_size=1, max_size=30), table_ids, pk_tuples)
def test_keyspaces_sort_catalog_then_counters_then_rows(
    name: str, table_id: int, pk: tuple
) -> None:
    catalog = layout.catalog_key(name)
    counter = layout.counter_key(name)
    row = layout.row_key(table_id, encode_tuple(pk))
    assert catalog < counter < row
    assert contains(layout.catalog_range(), catalog)
    assert not contains(layout.catalog_range(), counter)
    assert not contains(layout.catalog_range(), row)


def test_every_row_key_sorts_below_the_reserved_range_above_rows() -> None:
    _, end = layout.table_range(layout.MAX_TABLE_ID)
    assert end == b"\x10\xff\xff\xff\xff\xff"
    assert end < b"\x11"


# --- table ranges ---------------------------------------------------------------


@given(table_ids, pk_tuples)
def test_table_range_holds_the_tables_rows(table_id: int, pk: tuple) -> None:
    key = layout.row_key(table_id, encode_tuple(pk))
    assert key.startswith(layout.table_prefix(table_id))
    assert contains(layout.table_range(table_id), key)


@given(table_ids, pk_tuples)
def test_table_range_holds_no_rows_of_neighbouring_tables(table_id: int, pk: tuple) -> None:
    bounds = layout.table_range(table_id)
    for other in (table_id - 1, table_id + 1):
        if 0 <= other <= layout.MAX_TABLE_ID:
            assert not contains(bounds, layout.row_key(other, encode_tuple(pk)))
            assert not contains(bounds, layout.table_prefix(other))


@given(st.integers(0, layout.MAX_TABLE_ID - 1))
def test_table_ranges_are_disjoint_and_ordered(table_id: int) -> None:
    _, end = layout.table_range(table_id)
    start, _ = layout.table_range(table_id + 1)
    assert end < start


def test_table_range_is_prefix_to_prefix_0xff() -> None:
    assert layout.table_range(7) == (b"\x10\x00\x00\x00\x07", b"\x10\x00\x00\x00\x07\xff")
    assert layout.table_prefix(258) == b"\x10\x00\x00\x01\x02"


# --- pretty printer ---------------------------------------------------------------

PRETTY_GOLDEN: list[tuple[bytes, str]] = [
    (b"", "/Min"),
    (layout.catalog_key("users"), "/Catalog/'users'"),
    (b"\x01\xff", "/Catalog/'\ufffd'"),
    (layout.counter_key("table_id"), "/Counter/'table_id'"),
    (layout.table_prefix(7), "/Table/7/r"),
    (layout.row_key(7, encode_tuple(("u1",))), '/Table/7/r/"u1"'),
    (layout.row_key(7, encode_tuple(("u1", 42))), '/Table/7/r/"u1"/42'),
    (layout.row_key(42, encode_tuple((-1,))), "/Table/42/r/-1"),
    (
        layout.row_key(1, encode_tuple((INT64_MIN, INT64_MAX))),
        f"/Table/1/r/{INT64_MIN}/{INT64_MAX}",
    ),
    (layout.row_key(1, encode_tuple((b"\x00\xff",))), "/Table/1/r/0x00ff"),
    (layout.row_key(1, encode_tuple((b"",))), "/Table/1/r/0x"),
    (layout.row_key(1, encode_tuple(("",))), '/Table/1/r/""'),
    (
        layout.row_key(3, encode_tuple(("\u00e9/x", 0, b"k"))),
        '/Table/3/r/"\u00e9/x"/0/0x6b',
    ),
    (
        layout.row_key(layout.MAX_TABLE_ID, encode_tuple(('say "hi" \\o/',))),
        '/Table/4294967295/r/"say \\"hi\\" \\\\o/"',
    ),
    # Not row keys: bounds and broken bytes under the rows prefix.
    (layout.table_range(7)[1], "/Table/7/r/?ff"),
    (layout.table_prefix(7) + b"\x02ab", "/Table/7/r/?026162"),
    (layout.table_prefix(7) + b"\x15\x80", "/Table/7/r/?1580"),
    (b"\x10\x00\x00", "/Raw/100000"),
    (layout.change_log_key(7, 2, 42), "/ChangeLog/7/2/42"),
    (layout.checkpoint_key(9, 2), "/Checkpoint/9/2"),
    (layout.index_ref_key(9, encode_tuple(("u1", 42))), '/IndexRef/9/"u1"/42'),
    (layout.sql_mapping_key("orders"), "/SQLMapping/'orders'"),
    # Unassigned and reserved prefixes.
    (b"\x00", "/Raw/00"),
    (b"\x03abc", "/Raw/03616263"),
    (b"\x0f", "/Raw/0f"),
    (b"\x11\x00", "/Raw/1100"),
    (b"\xff\xff", "/Raw/ffff"),
]


@pytest.mark.parametrize(("key", "expected"), PRETTY_GOLDEN, ids=[e for _, e in PRETTY_GOLDEN])
def test_pretty_golden(key: bytes, expected: str) -> None:
    assert layout.pretty(key) == expected


@given(st.binary(max_size=40))
def test_pretty_renders_any_bytes(key: bytes) -> None:
    assert isinstance(layout.pretty(key), str)


@given(table_ids, st.lists(st.integers(INT64_MIN, INT64_MAX), min_size=1, max_size=4))
def test_pretty_row_keys_of_integers(table_id: int, pk: list[int]) -> None:
    key = layout.row_key(table_id, encode_tuple(pk))
    assert layout.pretty(key) == f"/Table/{table_id}/r/" + "/".join(map(str, pk))
