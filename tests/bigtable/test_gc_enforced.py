"""GC rules are enforced at read time (expired cells are never returned) and by the
background purge (they are deleted), for every rule of unions and intersections."""

from __future__ import annotations

import time

import pytest

from widetable.bigtable import FamilySpec, SetCell
from widetable.bigtable import cells as C
from widetable.bigtable.gc import Intersection, MaxAge, MaxVersions, Union
from widetable.keys import layout

HOUR = 3600 * 1_000_000


def stored(db, table: str, family: str, key: bytes) -> list[tuple[bytes, int]]:
    """The cells the engine holds for one row's family, expired or not."""
    backing = db.table(table)
    fid = backing.families[family].family_id
    blob = backing.stores[family].get(layout.family_key_of(backing.row_key(key), fid))
    return [(q, ts) for q, versions in C.decode_columns(blob).items() for ts, _ in versions]


def shown(t, key: bytes) -> list[tuple[bytes, int]]:
    row = t.read_row(key)
    return [] if row is None else [(c.qualifier, c.timestamp) for c in row.cells]


RULES = [
    # (rule, expected survivors among a@now, a@now-2h, a@now-3h, b@now-2h)
    (MaxVersions(1), {("a", 0), ("b", 2)}),
    (MaxAge(HOUR), {("a", 0)}),
    (Union((MaxAge(HOUR), MaxVersions(2))), {("a", 0)}),
    (Union((MaxVersions(2), MaxVersions(1))), {("a", 0), ("b", 2)}),
    (Intersection((MaxAge(HOUR), MaxVersions(1))), {("a", 0), ("b", 2)}),
    (Intersection((MaxAge(HOUR), MaxVersions(2))), {("a", 0), ("a", 2), ("b", 2)}),
    (Union((Intersection((MaxAge(HOUR), MaxVersions(2))), MaxVersions(1))), {("a", 0), ("b", 2)}),
    (Intersection((Union((MaxAge(HOUR), MaxVersions(1))), MaxVersions(2))), {("a", 0), ("a", 2), ("b", 2)}),
]


@pytest.mark.parametrize(("rule", "survivors"), RULES, ids=[repr(r) for r, _ in RULES])
def test_a_rule_holds_at_read_time_and_after_the_purge(db, rule, survivors) -> None:
    bt = db.bigtable
    bt.create_table("t", [FamilySpec("cf")])
    t = bt.table("t")
    now = C.now_micros()
    written = {("a", 0): now, ("a", 2): now - 2 * HOUR, ("a", 3): now - 3 * HOUR, ("b", 2): now - 2 * HOUR}
    t.mutate_row(b"r", [SetCell("cf", q.encode(), ts, b"v") for (q, _), ts in written.items()])
    # The rule comes after the cells: they are stored, and only reads and the purge apply it.
    bt.modify_families("t", update=[FamilySpec("cf", gc=rule)])
    expected = sorted(((q.encode(), written[(q, h)]) for q, h in survivors), key=lambda c: (c[0], -c[1]))
    assert shown(t, b"r") == expected
    assert [r.key for r in t.read_rows()] == [b"r"]
    assert len(stored(db, "t", "cf", b"r")) == 4  # not purged yet
    assert db.purge_expired("t") == (1 if len(survivors) < 4 else 0)
    assert sorted(stored(db, "t", "cf", b"r"), key=lambda c: (c[0], -c[1])) == expected
    assert shown(t, b"r") == expected


def test_cells_that_age_out_vanish_then_are_purged_in_the_background(open_db) -> None:
    db = open_db(purge_interval=0.2)
    bt = db.bigtable
    bt.create_table("t", [FamilySpec("cf", gc=MaxAge(1_500_000)), FamilySpec("keep")])
    t = bt.table("t")
    now = C.now_micros()
    t.mutate_row(b"r", [SetCell("cf", b"q", now, b"v"), SetCell("keep", b"q", now - HOUR, b"v")])
    assert [c.family for c in t.read_row(b"r").cells] == ["cf", "keep"]
    deadline = time.monotonic() + 20
    while stored(db, "t", "cf", b"r") and time.monotonic() < deadline:
        time.sleep(0.1)
        if C.now_micros() > now + 1_500_000:
            assert [c.family for c in t.read_row(b"r").cells] == ["keep"]  # never returned
    assert stored(db, "t", "cf", b"r") == []  # the purge deleted the family's record
    assert [c.family for c in t.read_row(b"r").cells] == ["keep"]
    assert db.background_state()[0].ok


def test_writes_trim_by_max_versions(db) -> None:
    bt = db.bigtable
    bt.create_table("t", [FamilySpec("cf", gc=MaxVersions(2))])
    t = bt.table("t")
    for ts in (1000, 2000, 3000, 4000):
        t.mutate_row(b"r", [SetCell("cf", b"q", ts, b"v")])
    assert stored(db, "t", "cf", b"r") == [(b"q", 4000), (b"q", 3000)]
