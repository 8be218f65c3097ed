"""mutate_rows' one-pass path (``bigtable/bulk.py``) against mutate_row, its per-row
reference: the same statuses entry by entry (a bad entry fails alone and changes
nothing) and the same cells after, with entries of one row applied in their order,
GC rules and aggregates; and writers of overlapping rows on several threads lose
nothing. Both engines."""

from __future__ import annotations

import itertools
import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from widetable.bigtable import (
    AddToCell,
    Cell,
    DeleteFromColumn,
    DeleteFromFamily,
    DeleteFromRow,
    FamilySpec,
    SetCell,
)
from widetable.bigtable.gc import MaxVersions
from widetable.errors import ObjectNotExist, ParameterInvalid, WidetableError

COUNTER = itertools.count()
FAMILIES = [FamilySpec("a"), FamilySpec("b", compression="zstd"),
            FamilySpec("v", gc=MaxVersions(2)), FamilySpec("n", aggregate="sum")]

row_keys = st.sampled_from([b"k", b"k\x00", b"l", b"m", b"", b"x" * 4097, "str"])
quals = st.sampled_from([b"q", b"r", b"", b"s" * 16385])
stamps = st.sampled_from([0, 1000, 2000, 3000, 1500, -5])
plain = st.builds(SetCell, st.sampled_from(["a", "b", "v"]), st.sampled_from([b"q", b"r"]),
                  st.sampled_from([1000, 2000, 3000]), st.binary(max_size=3))
mutation = st.one_of(
    plain, plain,  # most entries are plain SetCells, as in a bulk load
    st.builds(SetCell, st.sampled_from(["a", "v", "n", "nope"]), quals, stamps, st.binary(max_size=3)),
    st.builds(DeleteFromColumn, st.sampled_from(["a", "b", "v"]), quals,
              st.sampled_from([None, 1000]), st.sampled_from([None, 3000, 500])),
    st.builds(DeleteFromFamily, st.sampled_from(["a", "v", "nope"])),
    st.just(DeleteFromRow()),
    st.builds(AddToCell, st.sampled_from(["n", "a"]), st.just(b"c"), st.sampled_from([1000, 0]),
              st.sampled_from([1, -2, 2**62, "x"])),
)
entries = st.lists(st.tuples(row_keys, st.lists(mutation, max_size=4)), min_size=1, max_size=15)


def cells(t) -> list:
    return [(r.key, r.cells) for r in t.read_rows()]


def serially(t, es) -> list:
    """What mutate_row gives entry by entry: None or the error's type."""
    out = []
    for key, muts in es:
        try:
            t.mutate_row(key, muts)
            out.append(None)
        except WidetableError as exc:
            out.append(type(exc))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(calls=st.lists(entries, min_size=1, max_size=3))
def test_mutate_rows_gives_what_mutate_row_gives_entry_by_entry(open_db, calls) -> None:
    db = open_db(f"s{next(COUNTER)}")
    for name in ("bulk", "serial"):
        db.bigtable.create_table(name, FAMILIES)
    bulk, serial = db.bigtable.table("bulk"), db.bigtable.table("serial")
    for es in calls:
        statuses = bulk.mutate_rows(es)
        assert [None if s is None else type(s) for s in statuses] == serially(serial, es)
        assert cells(bulk) == cells(serial)


def test_a_rejected_entry_changes_nothing_and_the_others_apply_in_order(db) -> None:
    db.bigtable.create_table("t", FAMILIES)
    t = db.bigtable.table("t")
    t.mutate_row(b"r", [SetCell("a", b"old", 1000, b"o"), AddToCell("n", b"c", 0, 5)])
    statuses = t.mutate_rows([
        (b"r", [SetCell("a", b"q", 1000, b"1")]),
        (b"r", [DeleteFromColumn("a", b"old"), SetCell("nope", b"q", 1000, b"x")]),  # unknown family
        (b"s", [SetCell("a", b"q", 1001, b"x")]),  # not a millisecond
        (b"r", [AddToCell("n", b"c", 0, 2), SetCell("a", b"q", 1000, b"2")]),  # replaces entry 0's cell
        (b"r", [AddToCell("a", b"c", 0, 1)]),  # AddToCell into a plain family
        (b"r", [DeleteFromColumn("a", b"old")]),
        (b"s", [SetCell("v", b"q", 1000, b"1"), SetCell("v", b"q", 2000, b"2"),
                SetCell("v", b"q", 3000, b"3")]),  # GC keeps two versions
        (b"t", []),
    ])
    assert statuses[0] is None and statuses[3] is None and statuses[5] is None and statuses[6] is None
    assert isinstance(statuses[1], ObjectNotExist) and "nope" in statuses[1].message
    assert isinstance(statuses[2], ParameterInvalid) and "1001" in statuses[2].message
    assert isinstance(statuses[4], ParameterInvalid) and isinstance(statuses[7], ParameterInvalid)
    assert t.read_row(b"r").cells == (Cell("a", b"q", 1000, b"2"), Cell("n", b"c", 0, (7).to_bytes(8, "big")))
    assert t.read_row(b"s").cells == (Cell("v", b"q", 3000, b"3"), Cell("v", b"q", 2000, b"2"))
    assert t.read_row(b"t") is None


def test_a_row_over_its_limit_fails_alone_in_a_call(db) -> None:
    """An entry of plain SetCells whose row would pass 256 MiB is checked in full and
    refused; the row's other entries around it apply."""
    import warnings

    db.bigtable.create_table("t", FAMILIES)
    t = db.bigtable.table("t")
    big = b"x" * (60 * 2**20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        statuses = t.mutate_rows([
            (b"r", [SetCell("a", b"q%d" % i, 1000, big) for i in range(3)]),
            (b"r", [SetCell("a", b"w%d" % i, 1000, big) for i in range(2)]),  # 300 MiB in all
            (b"r", [SetCell("b", b"small", 1000, b"s")]),
        ])
    assert statuses[0] is None and statuses[2] is None
    assert isinstance(statuses[1], ParameterInvalid) and "row limit" in statuses[1].message
    assert [(c.family, c.qualifier) for c in t.read_row(b"r").cells] == [
        ("a", b"q0"), ("a", b"q1"), ("a", b"q2"), ("b", b"small")]


def test_a_first_entry_failing_in_its_merge_leaves_the_stored_cells_to_the_next(db) -> None:
    """An entry that passes its checks but takes its row over the limit once merged (the
    first of its row: applied in place) is undone before the row's next entry."""
    import warnings

    db.bigtable.create_table("t", FAMILIES)
    t = db.bigtable.table("t")
    big = b"x" * (100 * 2**20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t.mutate_row(b"p", [SetCell("a", b"keep", 1000, b"k"), SetCell("a", b"big1", 1000, big)])
        t.mutate_row(b"p", [SetCell("a", b"big2", 1000, big)])  # 200 MiB stored
        statuses = t.mutate_rows([
            (b"p", [DeleteFromColumn("a", b"keep"), SetCell("a", b"big3", 1000, big[:60 * 2**20])]),
            (b"p", [SetCell("a", b"new", 1000, b"n")]),
            (b"q", [SetCell("a", b"big", 1000, big)]),
            (b"q", [SetCell("b", b"big", 1000, big),
                    SetCell("v", b"big", 1000, big)]),  # plain, but over the limit with the first
        ])
    assert isinstance(statuses[0], ParameterInvalid) and "row limit" in statuses[0].message
    assert statuses[1] is None and statuses[2] is None
    assert isinstance(statuses[3], ParameterInvalid) and "row limit" in statuses[3].message
    assert [c.qualifier for c in t.read_row(b"p").cells] == [b"big1", b"big2", b"keep", b"new"]
    assert [(c.family, c.qualifier) for c in t.read_row(b"q").cells] == [("a", b"big")]


def test_writers_of_overlapping_rows_lose_nothing(db) -> None:
    """Four threads bulk-write the same rows at once (plain SetCells of their own
    timestamps, some with an aggregate add): the end is what any serial order gives,
    every cell written and every add summed, none lost to a read-merge-write race."""
    db.bigtable.create_table("t", [FamilySpec("a"), FamilySpec("n", aggregate="sum")])
    t = db.bigtable.table("t")
    rows, calls, threads = 30, 40, 4
    errors: list[BaseException] = []

    def entries(w: int, c: int) -> list:
        out = []
        for j in range(15):
            key = b"r%02d" % ((w * 7 + c * 3 + j * 11) % rows)
            ts = ((w * calls + c) * 15 + j + 1) * 1000  # every cell its own timestamp
            muts = [SetCell("a", b"q", ts, b"%d" % ts)]
            if j % 3 == 0:
                muts.append(AddToCell("n", b"c", 0, 1))
            out.append((key, muts))
        return out

    def writer(w: int) -> None:
        try:
            for c in range(calls):
                assert t.mutate_rows(entries(w, c)) == [None] * 15
        except BaseException as exc:  # noqa: BLE001 - checked below
            errors.append(exc)

    ths = [threading.Thread(target=writer, args=(w,)) for w in range(threads)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert not errors, errors
    want: dict[bytes, tuple[set, int]] = {}
    for w in range(threads):
        for c in range(calls):
            for key, muts in entries(w, c):
                stamps, adds = want.get(key, (set(), 0))
                want[key] = (stamps | {muts[0].timestamp}, adds + len(muts) - 1)
    got = {}
    for row in t.read_rows():
        stamps = {c.timestamp for c in row.cells if c.family == "a"}
        adds = sum(int.from_bytes(c.value, "big", signed=True) for c in row.cells if c.family == "n")
        got[row.key] = (stamps, adds)
    assert got == want
