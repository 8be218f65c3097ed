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
        (0x00, "store metadata"), (0x01, "catalog"), (0x02, "counters"), (0x03, "partitions"),
        (0x04, "statistics"),
        (0x05, "auto-increment"), (0x06, "change log"), (0x07, "checkpoints"),
        (0x08, "index refs"), (0x09, "index counts"), (0x0A, "search indexes"),
        (0x0B, "SQL mapping tables"),
        (0x10, "table rows"), (0x11, "family rows"),
    ]
    assert [b for b, _ in drawn] == sorted(b for b, _ in drawn)
    assert [bytes([b]) for b, _ in drawn] == [
        layout.META, layout.CATALOG, layout.COUNTERS, layout.PARTITIONS, layout.STATS,
        layout.AUTO_INCREMENT, layout.CHANGE_LOG, layout.CHECKPOINTS, layout.INDEX_REFS,
        layout.INDEX_COUNTS, layout.SEARCH_INDEXES, layout.SQL_MAPPINGS, layout.ROWS,
        layout.FAMILY_ROWS,
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
    (layout.index_count_key(9, 1, encode_tuple(("pos7",))), '/IndexCount/9/1/"pos7"'),
    (layout.index_count_key(9, 2, encode_tuple(("u1", 42))), '/IndexCount/9/2/"u1"/42'),
    (layout.index_count_state_key(9), "/IndexCount/9/state"),
    (layout.index_count_state_key(9) + b"\x01", "/IndexCount/9/state/?01"),
    (layout.index_count_key(9, 1, b"\x02ab"), "/IndexCount/9/1/?026162"),
    (layout.FORMAT_VERSION_KEY, "/Meta/'format_version'"),
    (b"\x00", "/Meta/''"),
    (layout.sql_mapping_key("orders"), "/SQLMapping/'orders'"),
    # Unassigned and reserved prefixes.
    (b"\x03abc", "/Raw/03616263"),
    (b"\x0f", "/Raw/0f"),
    (b"\x11\x00", "/Raw/1100"),
    (layout.family_row_key(7, 3, encode_tuple((b"ab",))), "/Table/7/f/3/0x6162"),
    (layout.family_prefix(7, 3) + b"\x15\x80", "/Table/7/f/3/?1580"),
    (b"\x12", "/Raw/12"),
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


# --- change log, checkpoints, index refs, store metadata: golden bytes -------------------

KEY_GOLDEN: list[tuple[str, bytes, str]] = [
    ("format version", layout.FORMAT_VERSION_KEY, "00666f726d61745f76657273696f6e"),
    ("meta key", layout.meta_key("format_version"), "00666f726d61745f76657273696f6e"),
    ("change-log prefix", layout.change_log_prefix(7), "0600000007"),
    ("change-log key", layout.change_log_key(7, 2, 42), "060000000700000002000000000000002a"),
    ("change-log encoder", layout.change_log_encoder(7)(2, 42),
     "060000000700000002000000000000002a"),
    ("shard range start", layout.change_log_range(7, 2, 41)[0],
     "060000000700000002000000000000002a"),
    ("shard range end", layout.change_log_range(7, 2, 41)[1], "060000000700000003"),
    ("shards from 2", layout.change_log_shards_from(7, 2)[0], "060000000700000002"),
    ("shards from 2, end", layout.change_log_shards_from(7, 2)[1], "0600000008"),
    ("checkpoint key", layout.checkpoint_key(9, 2), "070000000900000002"),
    ("index ref", layout.index_ref_key(9, encode_tuple(("u1", 42))),
     "08000000090275310015800000000000002a"),
    ("family row key", layout.family_row_key(7, 3, encode_tuple((b"ab",))), "1100000007000301616200"),
    ("family key of a row key", layout.family_key_of(layout.row_key(7, encode_tuple((b"ab",))), 3),
     "1100000007000301616200"),
    ("family range end", layout.family_range(7, 3)[1], "11000000070004"),
    ("families of a table, end", layout.family_range(7)[1], "1100000008"),
    ("index count", layout.index_count_key(9, 1, encode_tuple(("pos7",))),
     "09000000090102706f733700"),
    ("index count state", layout.index_count_state_key(9), "090000000900"),
    ("index counts, end", layout.index_count_range(9)[1], "090000000a"),
    ("index refs of rows", layout.index_ref_keys(9, [layout.row_key(7, encode_tuple(("u1", 42)))])[0],
     "08000000090275310015800000000000002a"),
]


@pytest.mark.parametrize(("what", "key", "hex_"), KEY_GOLDEN, ids=[w for w, _, _ in KEY_GOLDEN])
def test_key_golden(what: str, key: bytes, hex_: str) -> None:
    assert key.hex() == hex_


def test_change_log_and_checkpoint_keys_decode() -> None:
    key = layout.change_log_key(7, 2, 42)
    assert layout.decode_change_log_key(key) == (7, 2, 42)
    assert (layout.change_log_shard(key), layout.change_log_seq(key)) == (2, 42)
    assert layout.decode_checkpoint_key(layout.checkpoint_key(9, 3)) == (9, 3)
    assert layout.decode_row_pk(layout.row_key(7, encode_tuple(("u1", 42)))) == ("u1", 42)


@given(table_ids, st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 2))
def test_change_log_keys_round_trip_and_sit_in_their_ranges(table_id: int, shard: int,
                                                            seq: int) -> None:
    key = layout.change_log_key(table_id, shard, seq)
    assert layout.change_log_encoder(table_id)(shard, seq) == key
    assert layout.decode_change_log_key(key) == (table_id, shard, seq)
    assert contains(layout.change_log_range(table_id), key)
    assert contains(layout.change_log_range(table_id, shard), key)
    assert contains(layout.change_log_range(table_id, shard, seq - 1), key)
    assert not contains(layout.change_log_range(table_id, shard, seq), key)
    assert contains(layout.change_log_shards_from(table_id, shard), key)
    if shard < 2**32 - 1:
        assert not contains(layout.change_log_shards_from(table_id, shard + 1), key)


@given(table_ids, pk_tuples)
def test_an_index_ref_of_a_row_key_is_the_ref_of_its_encoded_key(index_id: int, pk: tuple) -> None:
    encoded = encode_tuple(pk)
    assert layout.index_ref_keys(index_id, [layout.row_key(3, encoded)]) == [
        layout.index_ref_key(index_id, encoded)]
    assert contains(layout.index_ref_range(index_id), layout.index_ref_key(index_id, encoded))


@given(table_ids, pk_tuples)
def test_the_count_keys_of_an_entry_are_those_of_its_prefixes(index_id: int, pk: tuple) -> None:
    entry = layout.row_key(index_id, encode_tuple(pk))
    lengths = tuple(range(1, len(pk) + 1))
    keys = layout.index_count_keys(index_id, lengths, entry)
    assert keys == [layout.index_count_key(index_id, k, encode_tuple(pk[:k])) for k in lengths]
    for k, key in zip(lengths, keys):
        assert layout.decode_index_count_key(key) == (index_id, k, pk[:k])
        assert key == layout.index_count_head(index_id, k) + encode_tuple(pk[:k])
        assert contains(layout.index_count_range(index_id), key)
        assert contains(layout.index_counts_of_length(index_id, k), key)
        assert layout.index_count_state_key(index_id) < key
        if index_id < layout.MAX_TABLE_ID:
            assert not contains(layout.index_count_range(index_id + 1), key)
    assert layout.index_count_keys(index_id, (len(pk),), entry)[0][6:] == entry[5:]


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_checkpoint_range_holds_every_shard(consumer_id: int, shard: int) -> None:
    assert contains(layout.checkpoint_range(consumer_id), layout.checkpoint_key(consumer_id, shard))
    if consumer_id < 2**32 - 1:
        assert not contains(layout.checkpoint_range(consumer_id),
                            layout.checkpoint_key(consumer_id + 1, 0))


def test_ranges_of_fixed_width_ids_reach_the_top_shard_and_seq() -> None:
    """Regression: ``prefix + 0xFF`` ended the ranges below shard 0xFF000000 (and seq
    0xFF00...), so such keys fell outside their table's log range."""
    top = layout.change_log_key(5, 2**32 - 1, 2**64 - 1)
    assert contains(layout.change_log_range(5), top)
    assert contains(layout.change_log_range(5, 2**32 - 1), top)
    assert contains(layout.change_log_range(2**32 - 1), layout.change_log_key(2**32 - 1, 7, 7))
    assert layout.change_log_range(2**32 - 1)[1] == b"\x07"
    assert contains(layout.checkpoint_range(5), layout.checkpoint_key(5, 2**32 - 1))


def test_store_metadata_sorts_before_the_catalog() -> None:
    assert layout.FORMAT_VERSION_KEY < layout.catalog_range()[0]
    assert not contains(layout.catalog_range(), layout.FORMAT_VERSION_KEY)


@given(table_ids, st.integers(1, layout.MAX_FAMILY_ID), pk_tuples)
def test_family_keys_round_trip_and_sit_in_their_ranges(table_id: int, family_id: int, pk: tuple) -> None:
    row = layout.row_key(table_id, encode_tuple(pk))
    key = layout.family_key_of(row, family_id)
    assert key == layout.family_row_key(table_id, family_id, encode_tuple(pk))
    assert layout.decode_family_key(key) == (table_id, family_id, tuple(pk))
    assert layout.row_key_of_family_key(key) == row
    assert contains(layout.family_range(table_id, family_id), key)
    assert contains(layout.family_range(table_id), key)
    assert contains(layout.family_bounds(table_id, family_id, *layout.table_range(table_id)), key)
    assert not contains(layout.table_range(table_id), key)
    if family_id < layout.MAX_FAMILY_ID:
        assert not contains(layout.family_range(table_id, family_id + 1), key)
    assert key > layout.table_range(layout.MAX_TABLE_ID)[1]  # above every 0x10 row


@given(st.binary(min_size=1, max_size=5000), st.binary(min_size=1, max_size=50))
def test_bigtable_row_keys_keep_byte_order_and_prefixes(a: bytes, b: bytes) -> None:
    ka, kb = layout.bigtable_row_key(7, a), layout.bigtable_row_key(7, b)
    assert (ka < kb) == (a < b) and (ka == kb) == (a == b)
    assert layout.decode_bigtable_row_key(ka) == a
    assert layout.decode_bigtable_row_key(layout.family_key_of(ka, 2), layout.FAMILY_PK_OFFSET) == a
    assert contains(layout.table_range(7), ka)
    assert contains(layout.bigtable_prefix_range(7, b), ka) == a.startswith(b)
    for si in (True, False):
        for ei in (True, False):
            lo_ok = b <= a if si else b < a
            hi_ok = a <= b + b"\x05" if ei else a < b + b"\x05"
            assert contains(layout.bigtable_range(7, b, b + b"\x05", si, ei), ka) == (lo_ok and hi_ok)
    assert contains(layout.bigtable_range(7, None, None), ka)


@given(table_ids, st.lists(st.tuples(st.binary(min_size=1, max_size=40),
                                     st.integers(1, layout.MAX_FAMILY_ID)), max_size=20))
def test_bulk_key_builders_give_the_one_key_builders_bytes(table_id: int, pairs) -> None:
    keys = [k for k, _ in pairs]
    rows = layout.bigtable_row_keys(table_id, keys)
    assert rows == [layout.bigtable_row_key(table_id, k) for k in keys]
    fids = [f for _, f in pairs]
    assert layout.family_keys_of(rows, fids) == [layout.family_key_of(r, f) for r, f in zip(rows, fids)]


def test_bigtable_row_key_golden() -> None:
    assert layout.bigtable_row_key(7, b"a\x00b").hex() == "1000000007016100ff6200"
    assert layout.bigtable_prefix_range(7, b"a\x00") == (
        bytes.fromhex("1000000007016100ff"), bytes.fromhex("10000000070161 01".replace(" ", "")))
