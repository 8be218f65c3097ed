"""hypothesis: random cells in a table with a bytes family and an int64 sum family, and a
set of GoogleSQL query templates with random parameters; each answer of
``db.bigtable.execute_query`` must equal a plain-Python evaluation over the same cells,
through DuckDB and through the direct path (``googlesql.direct``) where a template takes it.

The reference follows Bigtable's SQL model: a family column maps each qualifier to its
newest value (the sum family to its total); ``with_history`` lists every version newest
first; a row is in the answer when it has a cell in a family the query reads (any
family, for a query that reads none)."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from widetable.bigtable import AddToCell, FamilySpec, SetCell
from widetable.sql.googlesql.engine import infer_type

KEYS = [b"\x00", b"a", b"a\x00", b"ab", b"abc", b"b", b"b\xff", b"c", b"\xff"]
keys = st.sampled_from(KEYS)
cf_cell = st.tuples(st.just("cf"), keys, st.sampled_from([b"a", b"b", b"c"]),
                    st.integers(1, 5).map(lambda t: t * 1000), st.binary(max_size=2))
n_cell = st.tuples(st.just("n"), keys, st.sampled_from([b"x", b"y"]), st.just(1000),
                   st.integers(-5, 5))
cells = st.lists(st.one_of(cf_cell, n_cell), max_size=25)
params = st.fixed_dictionaries({
    "lo": st.sampled_from(KEYS + [b"", b"aa"]), "hi": st.sampled_from(KEYS + [b"zz"]),
    "p": st.sampled_from([b"a", b"ab", b"b", b"\xff", b"q"]),
    "v": st.integers(-6, 6), "k1": keys, "k2": keys, "val": st.binary(max_size=2),
    "lim": st.integers(0, 4)})

_counter = itertools.count()


class Model:
    """The table as plain data: key -> family -> qualifier -> {timestamp: value}."""

    def __init__(self, writes) -> None:
        self.rows: dict = {}
        for family, key, qual, ts, value in writes:
            col = self.rows.setdefault(key, {}).setdefault(family, {}).setdefault(qual, {})
            if family == "n":
                col[ts] = col.get(ts, 0) + value
            else:
                col[ts] = value

    def visible(self, families: tuple[str, ...]):
        for key in sorted(self.rows):
            row = self.rows[key]
            if any(row.get(f) for f in (families or ("cf", "n"))):
                yield key, row

    @staticmethod
    def latest(row, family: str, qual: bytes):
        col = row.get(family, {}).get(qual)
        return None if not col else col[max(col)]

    def family(self, row, family: str) -> list:
        return [(q, col[max(col)]) for q, col in sorted(row.get(family, {}).items()) if col]

    def history(self, row) -> list:
        return [(q, [v for _, v in sorted(col.items(), reverse=True)])
                for q, col in sorted(row.get("cf", {}).items())]


def _nulls_first(v):
    return (v is not None, v if v is not None else b"")


TEMPLATES = [
    ("SELECT _key, cf['a'] AS a FROM {t} WHERE _key >= @lo AND _key < @hi ORDER BY _key",
     ("lo", "hi"),
     lambda m, p: [(k, m.latest(r, "cf", b"a")) for k, r in m.visible(("cf",))
                   if p["lo"] <= k < p["hi"]]),
    ("SELECT _key FROM {t} WHERE STARTS_WITH(_key, @p) ORDER BY _key", ("p",),
     lambda m, p: [(k,) for k, _ in m.visible(()) if k.startswith(p["p"])]),
    ("SELECT cf['a'] AS v, COUNT(*) AS c FROM {t} GROUP BY v ORDER BY v", (),
     lambda m, p: sorted(((v, sum(1 for _ in g)) for v, g in itertools.groupby(
         sorted((m.latest(r, "cf", b"a") for _, r in m.visible(("cf",))), key=_nulls_first))),
         key=lambda vc: _nulls_first(vc[0]))),
    ("SELECT _key, n['x'] AS x FROM {t} WHERE n['x'] > @v ORDER BY _key", ("v",),
     lambda m, p: [(k, m.latest(r, "n", b"x")) for k, r in m.visible(("n",))
                   if m.latest(r, "n", b"x") is not None and m.latest(r, "n", b"x") > p["v"]]),
    ("SELECT COUNT(*) AS c FROM {t} WHERE _key IN (@k1, @k2)", ("k1", "k2"),
     lambda m, p: [(sum(1 for k, _ in m.visible(()) if k in (p["k1"], p["k2"])),)]),
    ("SELECT _key, cf FROM {t}(with_history => TRUE) WHERE _key = @k1", ("k1",),
     lambda m, p: [(k, m.history(r)) for k, r in m.visible(("cf",)) if k == p["k1"]]),
    ("SELECT SUM(n['x']) AS s, MAX(cf['b']) AS b FROM {t} WHERE _key LIKE @pat", ("pat",),
     lambda m, p: [_sum_max([(m.latest(r, "n", b"x"), m.latest(r, "cf", b"b"))
                             for k, r in m.visible(("cf", "n")) if k.startswith(p["p"])])]),
    (("SELECT _key, cf, n FROM {t} WHERE _key IN (@k1, @k2) OR _key > @hi "
      "ORDER BY _key DESC LIMIT @lim OFFSET 1"), ("k1", "k2", "hi", "lim"),
     lambda m, p: [(k, m.family(r, "cf"), m.family(r, "n")) for k, r in reversed(list(m.visible(("cf", "n"))))
                   if k in (p["k1"], p["k2"]) or k > p["hi"]][1:1 + p["lim"]]),
    ("SELECT n['y'] AS y, _key FROM {t} WHERE _key LIKE 'a%' LIMIT 2", (),
     lambda m, p: [(m.latest(r, "n", b"y"), k) for k, r in m.visible(("n",)) if k.startswith(b"a")][:2]),
    ("SELECT _key FROM {t} WHERE cf['a'] = @val OR _key = @k1 ORDER BY _key DESC LIMIT 3",
     ("val", "k1"),
     lambda m, p: [(k,) for k, r in reversed(list(m.visible(("cf",))))
                   if m.latest(r, "cf", b"a") == p["val"] or k == p["k1"]][:3]),
]


def _sum_max(pairs):
    sums = [s for s, _ in pairs if s is not None]
    maxes = [b for _, b in pairs if b is not None]
    return (sum(sums) if sums else None, max(maxes) if maxes else None)


def _history_of(value):
    """The SQL answer's history map as [(qualifier, [values newest first])]."""
    return [(q, [v["value"] for v in versions]) for q, versions in value]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=cells, p=params)
def test_queries_agree_with_the_reference(db, writes, p) -> None:
    bt = db.bigtable
    name = f"d{next(_counter)}"
    bt.create_table(name, [FamilySpec("cf"), FamilySpec("n", aggregate="sum")])
    try:
        t = bt.table(name)
        for family, key, qual, ts, value in writes:
            m = SetCell(family, qual, ts, value) if family == "cf" else AddToCell(family, qual, ts, value)
            t.mutate_row(key, [m])
        model = Model(writes)
        values = dict(p, pat=p["p"] + b"%")
        for sql, used, expect in TEMPLATES:
            args = {k: values[k] for k in used}
            prepared = bt.prepare_query(sql.format(t=name), {k: infer_type(k, v) for k, v in args.items()})
            want = expect(model, p)
            for direct in (True, False):  # the direct path (where it applies) and DuckDB agree
                got = bt.sql.execute(prepared, args, direct=direct).rows
                if "with_history" in sql:
                    got = [(k, _history_of(h)) for k, h in got]
                assert got == want, (sql, direct)
    finally:
        bt.delete_table(name)
