"""Range reads: bounds, directions, key ordering, limits, page tokens and the 5000-row / 4 MB caps."""

from __future__ import annotations

import itertools
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from widetable import INF_MAX, INF_MIN, WidetableError, col
from widetable.table import table as table_module

from .helpers import pks, rejects

PK3 = [("s", "STRING"), ("i", "INTEGER"), ("b", "BINARY")]
_CUT_TABLES = itertools.count()


@pytest.fixture
def grid(table):
    """Rows (s, i, b) for s in a/b/c, i in -2..2, b in two binaries."""
    t = table(pk=PK3)
    keys = list(itertools.product(["a", "b", "c"], [-2, -1, 0, 1, 2], [b"\x00", b"\x00\x01"]))
    for k in keys:
        t.put_row(k, {"v": f"{k[0]}{k[1]}{k[2].hex()}"})
    return t, sorted(keys)


def test_forward_whole_table(grid) -> None:
    t, keys = grid
    assert pks(t.get_range((INF_MIN,) * 3, (INF_MAX,) * 3)) == keys
    assert pks(t.get_range(INF_MIN, INF_MAX)) == keys  # a bare INF stands for every column
    assert pks(t.scan()) == keys


@pytest.mark.parametrize("start, end, direction", [
    ((INF_MIN,) * 3, (INF_MIN,) * 3, "forward"),
    ((INF_MAX,) * 3, (INF_MAX,) * 3, "backward"),
    (INF_MIN, (INF_MIN, "z", b"z"), "forward"),  # everything after the first INF is padding
    ((INF_MAX, "a"), INF_MAX, "backward"),
    (("b",), ("b", INF_MIN), "forward"),  # forward pads a short bound with INF_MIN
    (("b", INF_MAX), ("b",), "backward"),  # and backward with INF_MAX
    (("b", 1, b"\x00"), ["b", 1, b"\x00"], "forward"),
    (("b", 1, b"\x00"), {"s": "b", "i": 1, "b": b"\x00"}, "backward"),
])
def test_bounds_that_encode_equal_are_rejected(grid, db, start, end, direction) -> None:
    """Different tuples that encode to one key bound an empty range: refused as equal ones
    are, by get_range and by scan (backward, the start is the larger key)."""
    t, _ = grid
    err = rejects(db, "OTSParameterInvalid", t.get_range, start, end, direction)
    assert err.message.startswith(FORWARD_ORDER if direction == "forward" else BACKWARD_ORDER)
    with pytest.raises(WidetableError) as info:
        list(t.scan(start, end, direction))
    assert info.value.code == "OTSParameterInvalid"


def test_backward_whole_table(grid) -> None:
    t, keys = grid
    assert pks(t.get_range((INF_MAX,) * 3, (INF_MIN,) * 3, "backward")) == keys[::-1]
    assert pks(t.get_range(INF_MAX, INF_MIN, direction="BACKWARD")) == keys[::-1]
    assert pks(t.scan(direction="backward")) == keys[::-1]


def test_forward_start_inclusive_end_exclusive(grid) -> None:
    t, keys = grid
    start, end = ("a", 1, b"\x00"), ("b", -1, b"\x00\x01")
    assert pks(t.get_range(start, end)) == [k for k in keys if start <= k < end]


def test_backward_start_inclusive_end_exclusive(grid) -> None:
    t, keys = grid
    start, end = ("b", -1, b"\x00\x01"), ("a", 1, b"\x00")
    assert pks(t.get_range(start, end, "backward")) == [k for k in keys[::-1] if end < k <= start]


def test_short_bounds_are_padded(grid) -> None:
    t, keys = grid
    assert pks(t.get_range(("b",), ("c",))) == [k for k in keys if k[0] == "b"]
    assert pks(t.get_range(("b", 0), ("b", 2))) == [k for k in keys if k[0] == "b" and 0 <= k[1] < 2]
    assert pks(t.get_range(("b",), ("a",), "backward")) == [k for k in keys[::-1] if k[0] == "b"]
    assert pks(t.get_range(("b", 1), ("b", -1), "backward")) == [
        k for k in keys[::-1] if k[0] == "b" and -1 < k[1] <= 1
    ]
    assert pks(t.get_range({"s": "c"}, {"s": INF_MAX})) == [k for k in keys if k[0] == "c"]


def test_inf_inside_a_bound(grid) -> None:
    t, keys = grid
    assert pks(t.get_range(("a", INF_MAX), ("c", INF_MIN))) == [k for k in keys if k[0] == "b"]
    assert pks(t.get_range(("c", INF_MIN), ("a", INF_MAX), "backward")) == [
        k for k in keys[::-1] if k[0] == "b"
    ]


FORWARD_ORDER = "Begin key must less than end key in FORWARD"
BACKWARD_ORDER = "Begin key must more than end key in BACKWARD"


def test_empty_and_inverted_ranges(grid, db) -> None:
    """Tablestore answers a range whose start is not below its end (forward; not above it
    backward) with OTSParameterInvalid in its own wording, equal bounds included."""
    t, _ = grid
    k = ("b", 0, b"\x00")
    err = rejects(db, "OTSParameterInvalid", t.get_range, k, k, names=["'b'"])
    assert err.message.startswith(FORWARD_ORDER)
    err = rejects(db, "OTSParameterInvalid", t.get_range, k, k, "backward", names=["'b'"])
    assert err.message.startswith(BACKWARD_ORDER)
    err = rejects(db, "OTSParameterInvalid", t.get_range, ("c",), ("a",), names=["'c'"])
    assert err.message.startswith(FORWARD_ORDER)
    err = rejects(db, "OTSParameterInvalid", t.get_range, ("a",), ("c",), "backward",
                  names=["'a'"])
    assert err.message.startswith(BACKWARD_ORDER)
    rejects(db, "OTSParameterInvalid", t.get_range, INF_MIN, INF_MAX, "sideways",
            names=["sideways"])


def test_negative_integers_sort_numerically(table) -> None:
    t = table(pk=[("i", "INTEGER")])
    nums = [-(2**63), -(2**40), -300, -256, -255, -1, 0, 1, 255, 256, 2**40, 2**63 - 1]
    for n in reversed(nums):
        t.put_row((n,), {"n": n})
    assert pks(t.scan()) == [(n,) for n in nums]
    assert pks(t.scan(direction="backward")) == [(n,) for n in reversed(nums)]
    assert pks(t.get_range((-256,), (1,))) == [(-256,), (-255,), (-1,), (0,)]


def test_binary_keys_with_zero_bytes(table) -> None:
    t = table(pk=[("b", "BINARY"), ("i", "INTEGER")])
    bins = [b"", b"\x00", b"\x00\x00", b"\x00\x01", b"\x00\xff", b"\x01", b"\xff", b"\xff\x00"]
    for b in bins:
        t.put_row((b, 1), {"x": b})
        t.put_row((b, -1), {"x": b})
    expected = sorted((b, i) for b in bins for i in (-1, 1))
    assert pks(t.scan()) == expected
    assert [r["x"] for r in t.get_range((b"\x00",), (b"\x00\xff",))] == [
        b"\x00", b"\x00", b"\x00\x00", b"\x00\x00", b"\x00\x01", b"\x00\x01",
    ]
    assert pks(t.get_range((b"\x00", INF_MAX), (b"\x00", INF_MIN), "backward")) == [
        (b"\x00", 1), (b"\x00", -1),
    ]


def test_string_keys_with_nul_and_unicode(table) -> None:
    t = table()
    keys = ["", "\x00", "a", "a\x00", "a\x00b", "ab", "é", "\U0001f600"]
    for k in keys:
        t.put_row(k, {"key": k})
    assert pks(t.scan()) == [(k,) for k in sorted(keys, key=lambda s: s.encode())]


def test_limit_and_page_token_forward(grid) -> None:
    t, keys = grid
    page = t.get_range(INF_MIN, INF_MAX, limit=7)
    assert pks(page) == keys[:7]
    assert page.next_start_primary_key == keys[7]
    got = []
    start = INF_MIN
    while True:
        page = t.get_range(start, INF_MAX, limit=4)
        assert len(page) <= 4
        got += pks(page)
        if page.next_start_primary_key is None:
            break
        start = page.next_start_primary_key
    assert got == keys


def test_limit_and_page_token_backward(grid) -> None:
    t, keys = grid
    got = []
    start = INF_MAX
    while True:
        page = t.get_range(start, ("a", 0), "backward", limit=5)
        got += pks(page)
        if page.next_start_primary_key is None:
            break
        start = page.next_start_primary_key
    assert got == [k for k in keys[::-1] if k >= ("a", 1)]


def test_limit_exactly_the_rest_leaves_no_token(grid) -> None:
    t, keys = grid
    page = t.get_range(INF_MIN, INF_MAX, limit=len(keys))
    assert pks(page) == keys and page.next_start_primary_key is None


def test_limit_with_filter_pages_to_the_same_rows(grid) -> None:
    t, keys = grid
    f = col("v").ge("b", pass_if_missing=False) & col("v").lt("c", pass_if_missing=False)
    expected = [k for k in keys if k[0] == "b"]
    assert pks(t.get_range(INF_MIN, INF_MAX, filter=f)) == expected
    assert pks(t.scan(filter=f, page_size=3)) == expected
    assert pks(t.scan(direction="backward", filter=f, page_size=2)) == expected[::-1]


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3"])
def test_bad_limit(grid, db, bad) -> None:
    t, _ = grid
    rejects(db, "OTSParameterInvalid", t.get_range, INF_MIN, INF_MAX, limit=bad, names=[repr(bad)])


def test_scan_with_bounds_and_small_pages(grid) -> None:
    t, keys = grid
    assert pks(t.scan(("a", 2), ("c", -1), page_size=1)) == [k for k in keys if ("a", 2) <= k < ("c", -1)]
    assert pks(t.scan(("c", -1), ("a", 2), "backward", page_size=3)) == [
        k for k in keys[::-1] if ("a", 2) < k[:2] <= ("c", -1)  # backward pads with INF_MAX
    ]


def test_range_options_apply_to_every_row(table, now) -> None:
    t = table(max_versions=3)
    for i in range(3):
        t.put_row(f"k{i}", [("a", i, now - 2000), ("a", i + 10, now - 1000), ("b", i, now)])
    rows = t.get_range(INF_MIN, INF_MAX, columns=["a"], max_versions=2).rows
    assert [r.versions("a") for r in rows] == [
        [(i + 10, now - 1000), (i, now - 2000)] for i in range(3)
    ]
    assert all(sorted(r.columns) == ["a"] for r in rows)
    rows = t.get_range(INF_MIN, INF_MAX, time_range=(now - 2500, now - 1500)).rows
    assert [r.columns for r in rows] == [{"a": i} for i in range(3)]


def test_5000_row_cap(table, db) -> None:
    t = table("big", pk=[("i", "INTEGER")])
    n = 5203
    for start in range(0, n, 200):
        res = db.batch_write_row([("big", "put", (i,), {"v": i}) for i in range(start, min(n, start + 200))])
        assert all(r.ok for r in res)
    page = t.get_range(INF_MIN, INF_MAX)
    assert len(page) == 5000
    assert page.next_start_primary_key == (5000,)
    page2 = t.get_range(page.next_start_primary_key, INF_MAX)
    assert pks(page2) == [(i,) for i in range(5000, n)] and page2.next_start_primary_key is None
    back = t.get_range(INF_MAX, INF_MIN, "backward", limit=10_000)
    assert len(back) == 5000 and back.next_start_primary_key == (n - 5001,)
    assert sum(1 for _ in t.scan()) == n


def test_5000_row_cap_counts_rows_a_filter_drops(table, db) -> None:
    t = table("bigf", pk=[("i", "INTEGER")])
    for start in range(0, 5100, 200):
        db.batch_write_row([("bigf", "put", (i,), {"v": i}) for i in range(start, start + 200)])
    page = t.get_range(INF_MIN, INF_MAX, filter=col("v") >= 4990)
    assert pks(page) == [(i,) for i in range(4990, 5000)]
    assert page.next_start_primary_key == (5000,)
    assert [r["v"] for r in t.scan(filter=col("v") >= 4990)] == list(range(4990, 5200))


def test_4mb_cap(table) -> None:
    t = table(pk=[("i", "INTEGER")])
    blob = b"x" * (1024 * 1024)
    for i in range(10):
        t.put_row((i,), {"blob": blob, "n": i})
    page = t.get_range(INF_MIN, INF_MAX)
    assert 1 <= len(page) <= 4
    assert sum(len(r["blob"]) for r in page) <= 4 * 1024 * 1024 + 64 * 1024
    assert page.next_start_primary_key == (len(page),)
    assert [r["n"] for r in t.scan()] == list(range(10))
    assert [r["n"] for r in t.scan(direction="backward")] == list(range(9, -1, -1))


def test_range_bound_type_errors(grid, db) -> None:
    t, _ = grid
    rejects(db, "OTSInvalidPK", t.get_range, (1,), INF_MAX, names=["'s'", "1"])
    rejects(db, "OTSInvalidPK", t.get_range, ("a", "x"), INF_MAX, names=["'i'", "'x'"])
    rejects(db, "OTSInvalidPK", t.get_range, ("a", 1, b"", "extra"), INF_MAX, names=["extra"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 3000), min_size=0, max_size=40),
       budget=st.integers(1, 20_000), limit=st.integers(1, 45), start=st.integers(0, 40),
       first=st.integers(1, 40))
def test_page_cut_by_rows_and_bytes(db, sizes, budget, limit, start, first) -> None:
    """A page holds each row that has fewer than ``limit`` rows and fewer than the byte budget
    before it (forward: read in chunks of values, the first of ``first`` rows; backward: row
    by row), and names the first row left out as the next start."""
    name = f"cut{next(_CUT_TABLES)}"
    t = db.create_table(name, [("i", "INTEGER")])
    if sizes:
        db.batch_write_row([(name, "put", (i,), {"v": b"x" * n}) for i, n in enumerate(sizes)])
    stored = [len(t.stored_row((i,))) for i in range(len(sizes))]

    def expect(order: list[int]) -> tuple[list[int], tuple | None]:
        kept, before = [], 0
        for i in order:
            if len(kept) >= limit or before >= budget:
                return kept, (i,)
            kept.append(i)
            before += stored[i]
        return kept, None

    with mock.patch.object(table_module, "MAX_RANGE_BYTES", budget), \
            mock.patch.object(table_module, "_FIRST_CHUNK", first):
        forward = t.get_range((start,), INF_MAX, limit=limit)
        blobs, nxt = t.stored_range((start,), INF_MAX, limit=limit)
        backward = t.get_range((start,), INF_MIN, "backward", limit=limit)
    want, want_next = expect(list(range(start, len(sizes))))
    assert [r.primary_key[0] for r in forward] == want
    assert forward.next_start_primary_key == want_next
    assert len(blobs) == len(want) and nxt == want_next
    want, want_next = expect(list(range(min(start, len(sizes) - 1), -1, -1)))
    assert [r.primary_key[0] for r in backward] == want
    assert backward.next_start_primary_key == want_next
