"""hypothesis: random mutation sequences through mutate_row / mutate_rows agree with a
plain reference (a dict of cells), read back by read_row and by read_rows over random
row ranges, forward and reverse, on both engines."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from widetable.bigtable import (
    DeleteFromColumn,
    DeleteFromFamily,
    DeleteFromRow,
    FamilySpec,
    RowRange,
    RowSet,
    SetCell,
)

FAMILIES = ("a", "b", "z")
row_keys = st.sampled_from([b"", b"\x00", b"a", b"a\x00", b"ab", b"b", b"\xff"]).map(lambda k: k + b"k")
quals = st.sampled_from([b"", b"q", b"q\x00", b"r"])
stamps = st.integers(0, 6).map(lambda t: t * 1000)
families = st.sampled_from(FAMILIES)
mutation = st.one_of(
    st.builds(SetCell, families, quals, stamps, st.binary(max_size=3)),
    st.builds(lambda f, q, lo, width: DeleteFromColumn(
        f, q, lo, None if width is None else (lo or 0) + width),
        families, quals, st.none() | stamps, st.none() | st.integers(1, 4).map(lambda w: w * 1000)),
    st.builds(DeleteFromFamily, families),
    st.just(DeleteFromRow()),
)
entries = st.lists(st.tuples(row_keys, st.lists(mutation, min_size=1, max_size=4)), min_size=1, max_size=12)


def apply(model: dict, key: bytes, mutations: list) -> None:
    row = model.setdefault(key, {})
    for m in mutations:
        if isinstance(m, SetCell):
            row[(m.family, m.qualifier, m.timestamp)] = m.value
        elif isinstance(m, DeleteFromColumn):
            lo, hi = m.start or 0, m.end
            for c in [c for c in row if c[:2] == (m.family, m.qualifier)
                      and c[2] >= lo and (hi is None or c[2] < hi)]:
                del row[c]
        elif isinstance(m, DeleteFromFamily):
            for c in [c for c in row if c[0] == m.family]:
                del row[c]
        else:
            row.clear()


def expected_cells(row: dict) -> list:
    return sorted(((f, q, ts, v) for (f, q, ts), v in row.items()), key=lambda c: (c[0], c[1], -c[2]))


def as_tuples(row) -> list:
    return [(c.family, c.qualifier, c.timestamp, c.value) for c in row.cells]


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(batches=st.lists(st.tuples(st.booleans(), entries), min_size=1, max_size=3),
       start=st.none() | row_keys, end=st.none() | row_keys, si=st.booleans(), ei=st.booleans())
def test_mutations_agree_with_the_reference(open_db, batches, start, end, si, ei) -> None:
    db = open_db(f"s{next(COUNTER)}")
    db.bigtable.create_table("t", [FamilySpec("a"), FamilySpec("b", compression="zstd"),
                                   FamilySpec("z", block_cache=False)])
    t = db.bigtable.table("t")
    model: dict = {}
    for as_batch, es in batches:
        if as_batch:
            assert t.mutate_rows(es) == [None] * len(es)
        else:
            for key, muts in es:
                t.mutate_row(key, muts)
        for key, muts in es:
            apply(model, key, muts)
    live = {k: expected_cells(r) for k, r in model.items() if r}
    for key in model:
        row = t.read_row(key)
        assert (as_tuples(row) if row else []) == live.get(key, [])
    assert [(r.key, as_tuples(r)) for r in t.read_rows()] == sorted(live.items())
    rng = RowRange(start, end, si, ei)

    def inside(k: bytes) -> bool:
        lo = start is None or (k >= start if si else k > start)
        hi = end is None or (k <= end if ei else k < end)
        return lo and hi

    want = [(k, c) for k, c in sorted(live.items()) if inside(k)]
    assert [(r.key, as_tuples(r)) for r in t.read_rows(RowSet(ranges=(rng,)))] == want
    assert [(r.key, as_tuples(r)) for r in t.read_rows(RowSet(ranges=(rng,)), reverse=True)] == want[::-1]
    db.close()


COUNTER = itertools.count()
