"""Layout 3's order field ``_o`` (``search/frame.py``): order equivalence and its bounds.

* For any bounds (made as a full sync makes them, from pages of sorted keys) and any keys
  of every primary-key type, ``value`` never orders two keys against the key order.
* In a real index (several shards, bounds from the full sync, rows inserted and deleted
  after it): every shard's documents by ``_o`` are in key order, and pages in key order
  (both directions, any size, followed by their tokens) equal the sorted keys.
* The bounds survive a reopen, a torn last record is dropped, and an index of layout 2 is
  served as it is until a rebuild (``update_search_index(add_fields=...)``) makes it
  layout 3.
"""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import widetable
from widetable.keys import codec
from widetable.search import DESC, MatchAllQuery, PrimaryKeySort, TermQuery, frame, sync
from widetable.search.documents import decode_src
from widetable.search.schema import LAYOUT

from .layouts import as_layout

TYPES = ("STRING", "INTEGER", "BINARY")


def value_st(t: str):
    if t == "STRING":  # shared prefixes, zero bytes and long values: the frame's hard cases
        return st.one_of(st.text(max_size=12), st.text("ab\x00", max_size=80),
                         st.integers(0, 10**6).map(lambda i: f"card{i:08d}"))
    if t == "INTEGER":
        return st.one_of(st.integers(-2**63, 2**63 - 1), st.integers(-300, 300))
    return st.one_of(st.binary(max_size=12), st.binary(max_size=70).map(lambda b: b"\x00\xff" + b))


schema_st = st.lists(st.sampled_from(TYPES), min_size=1, max_size=3)


def keys_st(types: list[str], min_size: int = 0, max_size: int = 60):
    return st.lists(st.tuples(*[value_st(t) for t in types]), min_size=min_size,
                    max_size=max_size, unique=True)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_value_is_monotone_in_the_key(data):
    types = data.draw(schema_st)
    synced = sorted(codec.encode_tuple(k) for k in data.draw(keys_st(types)))
    later = [codec.encode_tuple(k) for k in data.draw(keys_st(types))]
    page = data.draw(st.integers(1, 9))
    fr = frame.OrderFrame()
    for i in range(0, len(synced), page):  # pages as the full sync reads them
        nxt = synced[i + page] if i + page < len(synced) else None
        fr.add_page(synced[i:i + page], nxt)
    assert fr.bounds == sorted(set(fr.bounds))
    raws = sorted(set(synced + later))
    values = [fr.value(r) for r in raws]
    assert all(-2**63 <= v < 2**63 for v in values)
    assert values == sorted(values)


def test_value_keeps_keys_apart_in_the_synced_shape():
    """Keys like the benchmark's (a long shared prefix) get distinct values, and so do keys
    written after the sync between the synced ones."""
    synced = [codec.encode_tuple((f"card{i:08d}",)) for i in range(0, 20000, 2)]
    fr = frame.OrderFrame()
    for i in range(0, len(synced), 2000):
        fr.add_page(synced[i:i + 2000], synced[i + 2000] if i + 2000 < len(synced) else None)
    later = [codec.encode_tuple((f"card{i:08d}",)) for i in range(1, 19999, 2)]
    assert len({fr.value(r) for r in synced + later}) == len(synced) + len(later)
    # Two columns (a seller, then a card): where an interval spans two sellers its keys may
    # tie, but never more than the STRIDE synced keys it holds.
    two = sorted(codec.encode_tuple((f"S{i % 50:03d}", f"card{i:08d}")) for i in range(5000))
    fr2 = frame.OrderFrame()
    fr2.add_page(two, None)
    ties: dict = {}
    for r in two:
        ties[fr2.value(r)] = ties.get(fr2.value(r), 0) + 1
    assert max(ties.values()) <= frame.STRIDE and len(ties) > 0.8 * len(two)


def test_golden_value():
    """The example in docs/format.md (embedded in on-disk data: DO NOT CHANGE)."""
    fr = frame.OrderFrame()
    fr.add_page([codec.encode_tuple(("card00000000",))], codec.encode_tuple(("card00000032",)))
    assert fr.lcps == [11]
    assert fr.value(codec.encode_tuple(("card00000020",))) + 2**63 == 0x132300000000
    assert fr.value(b"") + 2**63 == 0  # below every bound, sharing nothing
    assert fr.value(b"\xff") + 2**63 == (2 << 44) | (31 << 39) | (0xFF << 31)


def _pages(db, table, q, desc: bool, page: int) -> list:
    got, token = [], None
    sort = [PrimaryKeySort(DESC)] if desc else None
    while True:
        res = db.search(table, "ix", q, sort=sort, limit=page, next_token=token)
        got += [tuple(r.primary_key) for r in res.rows]
        token = res.next_token
        if token is None:
            return got
        assert len(got) <= 500


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.data())
def test_index_orders_by_key_after_inserts_and_deletes(tmp_path_factory, monkeypatch, data):
    monkeypatch.setattr(sync, "BACKFILL_ROWS", data.draw(st.integers(3, 40)))
    monkeypatch.setattr(frame, "STRIDE", data.draw(st.integers(1, 8)))
    types = data.draw(schema_st)
    first = data.draw(keys_st(types, 0, 80))
    later = [k for k in data.draw(keys_st(types, 0, 40)) if k not in first]
    gone = data.draw(st.lists(st.sampled_from(first), max_size=15)) if first else []
    db = widetable.open(str(tmp_path_factory.mktemp("frame")), purge_interval=None)
    try:
        t = db.create_table("t", [(f"p{i}", ty) for i, ty in enumerate(types)])
        for i, k in enumerate(first):
            t.put_row(k, {"g": i % 3})
        db.create_search_index("t", "ix", [("g", "LONG")], shards=3)
        assert db.wait_for_search_indexes("t", "ix", timeout=60)
        st_ = db._search.states[("t", "ix")]  # noqa: SLF001 - the test reads the shards
        assert bool(st_.frame.bounds) == bool(first)
        for i, k in enumerate(later):
            t.put_row(k, {"g": i % 3})
        for k in set(gone):
            t.delete_row(k)
        assert db.wait_for_search_indexes("t", "ix", timeout=60)
        live = sorted((set(first) - set(gone)) | set(later), key=codec.encode_tuple)
        for shard in st_.shards:  # the top k by _o is the key order
            se = shard.searcher()
            hits = shard.top_by(se, shard.q_rows(), "_o", max(se.num_docs, 1), False)
            by_value = [(v, codec.encode_tuple(decode_src(s)[0]))
                        for (v, _), s in zip(hits, shard.sources(se, [a for _, a in hits]))]
            assert [v for v, _ in sorted(by_value, key=lambda x: x[1])] == [v for v, _ in by_value]
        page = data.draw(st.integers(1, 12))
        assert _pages(db, "t", MatchAllQuery(), False, page) == live
        assert _pages(db, "t", MatchAllQuery(), True, page) == live[::-1]
        g = {k: i % 3 for i, k in enumerate(first)} | {k: i % 3 for i, k in enumerate(later)}
        assert _pages(db, "t", TermQuery("g", 1), False, page) == [k for k in live if g[k] == 1]
        rep = db.verify_search_index("t", "ix")
        assert not (rep.missing or rep.stale or rep.extra)
    finally:
        db.close()


def test_bounds_survive_a_reopen_and_a_torn_record(tmp_path):
    path = str(tmp_path / "s")
    db = widetable.open(path, purge_interval=None)
    t = db.create_table("t", [("id", "STRING")])
    for i in range(3000):
        t.put_row((f"k{i:06d}",), {"g": i % 7})
    db.create_search_index("t", "ix", [("g", "LONG")])
    assert db.wait_for_search_indexes("t", "ix", timeout=60)
    st_ = db._search.states[("t", "ix")]  # noqa: SLF001
    bounds = list(st_.frame.bounds)
    assert len(bounds) > 3000 // frame.STRIDE
    file = st_.frame.path
    db.close()
    with open(file, "ab") as f:  # a crash while appending a record
        f.write(b"\x00\x20abc")
    db = widetable.open(path, purge_interval=None)
    assert db.wait_for_search_indexes("t", "ix", timeout=60)
    assert db._search.states[("t", "ix")].frame.bounds == bounds  # noqa: SLF001
    assert os.path.getsize(file) == sum(2 + len(b) for b in bounds)
    t = db.table("t")
    t.put_row(("k000000x",), {"g": 1})
    assert db.wait_for_search_indexes("t", "ix", timeout=60)
    res = db.search("t", "ix", TermQuery("g", 1), limit=3)
    assert [r.primary_key[0] for r in res.rows] == ["k000000x", "k000001", "k000008"]
    db.close()


def test_layout_2_is_served_until_a_rebuild(tmp_path):
    path = str(tmp_path / "s")
    db = widetable.open(path, purge_interval=None)
    t = db.create_table("t", [("a", "STRING"), ("b", "INTEGER")])
    keys = [(f"u{i % 13}", i) for i in range(400)]
    for i, k in enumerate(keys):
        t.put_row(k, {"g": i % 4, "loc": f"30.{i:03d},120.5"})
    db.create_search_index("t", "ix", [("g", "LONG"), ("loc", "GEO_POINT")])
    assert db.wait_for_search_indexes("t", "ix", timeout=60)
    db.close()
    db = as_layout(path, "t", "ix", 2)
    db.close()
    db = widetable.open(path, purge_interval=None)  # opened again: still layout 2, as it is
    assert db.wait_for_search_indexes("t", "ix", timeout=60)
    assert db.describe_search_index("t", "ix").meta.layout == 2
    st_ = db._search.states[("t", "ix")]  # noqa: SLF001
    assert all("_o" not in s.level_names for s in st_.shards) and not st_.layout.row_ids
    live = sorted(keys)
    assert _pages(db, "t", MatchAllQuery(), False, 9) == live
    assert _pages(db, "t", TermQuery("g", 2), True, 7) == sorted(
        (k for i, k in enumerate(keys) if i % 4 == 2), reverse=True)
    db.update_search_index("t", "ix", add_fields=[("b2", "LONG")])  # a rebuild: the current layout
    assert db.wait_for_search_indexes("t", "ix", timeout=60)  # the rebuild caught up
    end = time.monotonic() + 30
    while db.describe_search_index("t", "ix").meta.layout != LAYOUT and time.monotonic() < end:
        time.sleep(0.05)  # then the sync thread switches reads to it
    assert db.describe_search_index("t", "ix").meta.layout == LAYOUT
    assert _pages(db, "t", MatchAllQuery(), False, 9) == live
    rep = db.verify_search_index("t", "ix")
    assert not (rep.missing or rep.stale or rep.extra)
    db.close()


@pytest.mark.parametrize("layout", [LAYOUT, 2])
def test_shards_merge_by_value_only_after_the_same_constant_levels(tmp_path, layout):
    """Routed by the first key column, each shard's keys share their first 8 bytes (a
    constant level skipped there) and differ from the other shard's: the shards' values of
    the next level do not compare, so the page must not be cut by them."""
    from widetable.search.documents import shard_of
    from widetable.search.schema import IndexMeta
    path = str(tmp_path / "s")
    db = widetable.open(path, purge_interval=None)
    t = db.create_table("t", [("a", "STRING"), ("b", "STRING")])
    meta = IndexMeta("t", "ix", 0, (), routing_fields=("a",), shards=2)
    heads = {}
    for c in "abcdefghij":  # two 7-byte values that route to different shards
        heads.setdefault(shard_of(meta, ("a", "b"), (c * 7, "")), c * 7)
    lo, hi = sorted(heads.values())
    keys = [(lo, f"z{i:03d}") for i in range(30)] + [(hi, f"a{i:03d}") for i in range(30)]
    for k in keys:
        t.put_row(k, {"g": 1})
    db.create_search_index("t", "ix", [("g", "LONG")], routing_fields=["a"], shards=2)
    assert db.wait_for_search_indexes("t", "ix", timeout=60)
    if layout != LAYOUT:
        db.close()
        db = as_layout(path, "t", "ix", layout)
    for page in (5, 31):
        assert _pages(db, "t", MatchAllQuery(), False, page) == sorted(keys)
        assert _pages(db, "t", TermQuery("g", 1), True, page) == sorted(keys, reverse=True)
    db.close()
