"""A stateful model test: every table operation against a plain-Python reference model.

The model is ``{pk: {column: [(ts, value), ...] newest first}}`` for a table with a
``(STRING, INTEGER)`` key and ``max_versions=3``. Explicit timestamps come from a
small pool so versions collide and get trimmed. Writes without a timestamp use the
library's clock: the model learns that timestamp by reading the row back and checks
it lies within the call. TTL is left to the behaviour tests (test_table_rows.py).

Runs on the memory engine and on RocksDB (where it also closes and reopens the store).
"""

from __future__ import annotations

import atexit
import copy
import operator
import shutil
import tempfile

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import widetable
from widetable import (
    INF_MAX,
    INF_MIN,
    ColumnPagination,
    CompositeFilter,
    Condition,
    RowExistence,
    SingleColumnFilter,
    WidetableError,
)
from widetable.table.values import now_ms

MAX_VERSIONS = 3
STRS = ["", "\x00", "a", "b"]
INTS = [-2, -1, 0, 3]
COLS = ["c0", "c1", "c2"]
ALL_COLS = [*COLS, "n", "m"]
BASE = now_ms() - 200_000  # well inside max_time_deviation, well before any implicit "now"
TS = [BASE + k * 1000 for k in range(5)]
FAR = 2**62

OPS = {"==": operator.eq, "!=": operator.ne, ">": operator.gt, ">=": operator.ge,
       "<": operator.lt, "<=": operator.le}

# --- strategies -------------------------------------------------------------------------

# One hot row gets most writes, so versions pile up past max_versions and collide.
pks = st.one_of(st.just(("a", 0)), st.tuples(st.sampled_from(STRS), st.sampled_from(INTS)))
values = st.one_of(
    st.integers(-3, 3), st.sampled_from(["x", "y", "", b"\x00", 1.5, -0.5, True, False])
)
cols = st.sampled_from(COLS)
# Counters live mostly in their own columns, so most increments succeed; c0 clashes.
increments = st.dictionaries(st.sampled_from(["n", "m", "c0"]), st.integers(-3, 3), max_size=2)
stamps = st.sampled_from(TS)
cells = st.lists(st.tuples(cols, values, stamps), max_size=5)
plain_cells = st.dictionaries(cols, values, max_size=3)

simple_filters = st.builds(
    SingleColumnFilter,
    column=cols,
    op=st.sampled_from(list(OPS)),
    value=values,
    pass_if_missing=st.booleans(),
    latest_version_only=st.booleans(),
)
read_filters = st.one_of(
    st.none(),
    simple_filters,
    st.builds(lambda a, b: CompositeFilter("AND", (a, b)), simple_filters, simple_filters),
    st.builds(lambda a, b: CompositeFilter("OR", (a, b)), simple_filters, simple_filters),
    st.builds(lambda a: CompositeFilter("NOT", (a,)), simple_filters),
    st.builds(ColumnPagination, offset=st.integers(0, 3), limit=st.integers(1, 3)),
)
conditions = st.one_of(
    st.none(),
    st.builds(
        Condition,
        row_existence=st.sampled_from(list(RowExistence)),
        column_condition=st.one_of(st.none(), simple_filters),
    ),
)
columns_opt = st.one_of(
    st.none(), st.lists(st.sampled_from(ALL_COLS), min_size=1, max_size=3, unique=True)
)
max_versions_opt = st.one_of(st.none(), st.integers(1, 4))
time_ranges = st.one_of(
    st.none(),
    stamps,
    st.lists(st.sampled_from([0, *TS, TS[-1] + 1, FAR]), min_size=2, max_size=2, unique=True)
    .map(lambda p: tuple(sorted(p))),
)
read_options = st.fixed_dictionaries(
    {}, optional={"columns": columns_opt, "max_versions": max_versions_opt,
                  "time_range": time_ranges, "filter": read_filters},
)
bound_elems = st.sampled_from([*STRS, INF_MIN, INF_MAX])
bounds = st.one_of(
    st.sampled_from([INF_MIN, INF_MAX]),
    st.tuples(),
    st.tuples(bound_elems),
    st.tuples(bound_elems, st.sampled_from([*INTS, 1, INF_MIN, INF_MAX])),
    st.tuples(bound_elems, st.sampled_from([*INTS, 1, INF_MIN, INF_MAX])),
)


# --- the reference model ------------------------------------------------------------------


def comparable(a: object, b: object) -> bool:
    ta, tb = type(a), type(b)
    return ta is tb or (ta in (int, float) and tb in (int, float))


def model_match(f, latest: dict, versions: dict) -> bool:
    if isinstance(f, SingleColumnFilter):
        def ok(v: object) -> bool:
            return comparable(v, f.value) and OPS[f.op](v, f.value)

        if f.latest_version_only:
            return ok(latest[f.column]) if f.column in latest else f.pass_if_missing
        vs = versions.get(f.column)
        return any(ok(v) for _, v in vs) if vs else f.pass_if_missing
    results = [model_match(g, latest, versions) for g in f.filters]
    if f.op == "AND":
        return all(results)
    if f.op == "OR":
        return any(results)
    return not results[0]


def latest_of(row: dict) -> dict:
    return {c: vs[0][1] for c, vs in row.items()}


def merge(vs: list, ts: int, value: object) -> None:
    for i, (t, _) in enumerate(vs):
        if t == ts:
            vs[i] = (ts, value)
            return
        if t < ts:
            vs.insert(i, (ts, value))
            return
    vs.append((ts, value))


def trim(row: dict) -> dict:
    return {c: vs[:MAX_VERSIONS] for c, vs in row.items() if vs}


def model_read(row: dict | None, columns=None, max_versions=None, time_range=None, filter=None):
    """What a read returns for one stored row: ``{column: [(ts, value)...]}`` or None."""
    if row is None:
        return None
    pagination = filter if isinstance(filter, ColumnPagination) else None
    if filter is not None and pagination is None and not model_match(filter, latest_of(row), row):
        return None
    if type(time_range) is int:
        time_range = (time_range, time_range + 1)
    out = {}
    for c in sorted(row):
        if columns is not None and c not in columns:
            continue
        vs = row[c]
        if time_range is not None:
            vs = [tv for tv in vs if time_range[0] <= tv[0] < time_range[1]]
        vs = vs[: max_versions or 1]
        if vs:
            out[c] = vs
    names = sorted(out)
    if pagination is not None:
        names = names[pagination.offset : pagination.offset + pagination.limit]
    if columns is not None and not names:
        return None
    if time_range is not None and row and not names:
        return None
    return {c: out[c] for c in names}


def typed(cells_by_col: dict | None) -> dict | None:
    if cells_by_col is None:
        return None
    return {c: [(ts, type(v).__name__, v) for ts, v in vs] for c, vs in cells_by_col.items()}


def observed(row) -> dict | None:
    if row is None:
        return None
    return {c: [(ts, type(v).__name__, v) for v, ts in row.versions(c)] for c in sorted(row.columns)}


def bound_key(bound: object, pad: object) -> tuple:
    """A bound as a comparable tuple; everything after the first INF follows it."""
    if isinstance(bound, tuple):
        vals = list(bound)
    else:
        vals = [bound]
    vals += [pad] * (2 - len(vals))
    out: list[tuple] = []
    inf = None
    for v in vals:
        if inf is None and (v is INF_MIN or v is INF_MAX):
            inf = v
        v = inf if inf is not None else v
        out.append((0,) if v is INF_MIN else (2,) if v is INF_MAX else (1, v))
    return tuple(out)


def row_key(pk: tuple) -> tuple:
    return tuple((1, v) for v in pk)


# --- the machine --------------------------------------------------------------------------


class TableMachine(RuleBasedStateMachine):
    """Each example gets a fresh table; on RocksDB the examples share one store, since
    creating a RocksDB directory per example would dominate the run time."""

    engine = "memory"
    _store: dict = {}  # engine -> (directory, Database), shared by examples on RocksDB
    _tables = iter(range(10**9))

    def __init__(self) -> None:
        super().__init__()
        if self.engine == "rocksdb":
            if "rocksdb" not in self._store:
                directory = tempfile.mkdtemp(prefix="wt-model-")
                self._store["rocksdb"] = [directory, self._open(directory)]
                atexit.register(self._cleanup)
            self.db = self._store["rocksdb"][1]
        else:
            self.db = self._open(None)
        self.name = f"m{next(self._tables)}"
        self.t = self.db.create_table(self.name, [("s", "STRING"), ("i", "INTEGER")],
                                      max_versions=MAX_VERSIONS)
        self.rows: dict[tuple, dict] = {}
        self.reopened = False

    def _open(self, directory: str | None) -> widetable.Database:
        if self.engine == "rocksdb":
            return widetable.open(directory, engine="rocksdb", purge_interval=None)
        return widetable.open(":memory:", engine="memory", purge_interval=None)

    @classmethod
    def _cleanup(cls) -> None:
        directory, db = cls._store.pop("rocksdb")
        db.close()
        shutil.rmtree(directory, ignore_errors=True)

    def teardown(self) -> None:
        if self.engine == "rocksdb":
            self.db.delete_table(self.name)
        else:
            self.db.close()

    # -- helpers --

    def call(self, fn, *args, **kwargs):
        """Run a library call; return (result, error code or None, t0, t1)."""
        t0 = now_ms()
        try:
            result, code = fn(*args, **kwargs), None
        except WidetableError as exc:
            result, code = None, exc.code
        return result, code, t0, now_ms()

    def condition_fails(self, pk: tuple, cond) -> bool:
        if cond is None:
            return False
        row = self.rows.get(pk)
        exists = row is not None
        if cond.row_existence is RowExistence.EXPECT_EXIST and not exists:
            return True
        if cond.row_existence is RowExistence.EXPECT_NOT_EXIST and exists:
            return True
        if cond.column_condition is not None:
            row = row or {}
            return not model_match(cond.column_condition, latest_of(row), row)
        return False

    def implicit_ts(self, pk: tuple, column: str, t0: int, t1: int) -> int:
        """The timestamp the library gave a write without one: read back, within the call."""
        ts = self.t.get_row(pk, columns=[column]).timestamps[column]
        assert t0 <= ts <= t1, (t0, ts, t1)
        return ts

    # -- writes --

    @rule(pk=pks, data=st.one_of(cells, plain_cells), form=st.booleans(), cond=conditions)
    def put_row(self, pk, data, form, cond) -> None:
        if isinstance(data, list) and form and len({c for c, _, _ in data}) == len(data):
            arg: object = {c: (v, ts) for c, v, ts in data}  # the dict-with-timestamps form
        else:
            arg = data
        _, code, t0, t1 = self.call(self.t.put_row, pk, arg, condition=cond)
        if self.condition_fails(pk, cond):
            assert code == "OTSConditionCheckFail"
            return
        assert code is None
        row: dict = {}
        if isinstance(data, dict):
            if data:
                ts = self.implicit_ts(pk, next(iter(data)), t0, t1)
                row = {c: [(ts, v)] for c, v in data.items()}
        else:
            for c, v, ts in data:
                merge(row.setdefault(c, []), ts, v)
        self.rows[pk] = trim(row)

    @rule(rows=st.dictionaries(pks, cells.filter(bool), min_size=1, max_size=8))
    def load(self, rows) -> None:
        """Fill several rows at once, so ranges have something to walk."""
        for pk, cs in rows.items():
            self.put_row(pk, cs, False, None)

    @rule(
        pk=pks,
        put=st.one_of(cells, plain_cells),
        delete_version=st.lists(st.tuples(cols, stamps), max_size=2),
        delete_column=st.lists(cols, max_size=2),
        increment=increments,
        cond=conditions,
    )
    def update_row(self, pk, put, delete_version, delete_column, increment, cond) -> None:
        result, code, t0, t1 = self.call(
            self.t.update_row, pk, put=put, delete_version=delete_version,
            delete_column=delete_column, increment=increment, condition=cond,
        )
        self.check_update(pk, put, delete_version, delete_column, increment, cond,
                          result, code, t0, t1)

    def check_update(self, pk, put, delete_version, delete_column, increment, cond,
                     result, code, t0, t1) -> None:
        total = len(put) + len(delete_version) + len(delete_column) + len(increment)
        put_cols = set(put) if isinstance(put, dict) else {c for c, _, _ in put}
        if total == 0 or set(increment) & (put_cols | set(delete_column)):
            assert code == "OTSParameterInvalid"
            return
        if self.condition_fails(pk, cond):
            assert code == "OTSConditionCheckFail"
            return
        row = copy.deepcopy(self.rows.get(pk, {}))
        for c in delete_column:
            row.pop(c, None)
        for c, ts in delete_version:
            if c in row:
                row[c] = [tv for tv in row[c] if tv[0] != ts]
        new_values = {}
        for c, d in increment.items():
            current = row.get(c)
            old = current[0][1] if current else 0
            if type(old) is not int:
                assert code == "OTSParameterInvalid"
                return
            new_values[c] = old + d
        assert code is None
        implicit = (list(put) if isinstance(put, dict) else []) + list(increment)
        now = self.implicit_ts(pk, implicit[0], t0, t1) if implicit else None
        if isinstance(put, dict):
            for c, v in put.items():
                merge(row.setdefault(c, []), now, v)
        else:
            for c, v, ts in put:
                merge(row.setdefault(c, []), ts, v)
        for c, v in new_values.items():
            merge(row.setdefault(c, []), now, v)
        assert dict(result.increments) == new_values
        # Tablestore: an update never deletes the row, and inserts a missing one.
        self.rows[pk] = trim(row)

    @rule(pk=pks, cond=conditions)
    def delete_row(self, pk, cond) -> None:
        _, code, _, _ = self.call(self.t.delete_row, pk, condition=cond)
        if self.condition_fails(pk, cond):
            assert code == "OTSConditionCheckFail"
            return
        assert code is None
        self.rows.pop(pk, None)

    @rule(rows=st.dictionaries(pks, plain_cells, min_size=1, max_size=6))
    def batch_plain_puts(self, rows) -> None:
        """Unconditional ``{name: value}`` puts to one table: the bulk path of batch_write_row."""
        results, code, t0, t1 = self.call(
            self.db.batch_write_row, [(self.name, "put", pk, cs) for pk, cs in rows.items()]
        )
        assert code is None and all(r.ok for r in results), [r.error for r in results]
        for pk, cs in rows.items():
            if cs:
                ts = self.implicit_ts(pk, next(iter(cs)), t0, t1)
                self.rows[pk] = {c: [(ts, v)] for c, v in cs.items()}
            else:
                self.rows[pk] = {}

    @rule(
        ops=st.lists(
            st.tuples(pks, st.sampled_from(["put", "update", "delete"]), cells,
                      increments, conditions),
            min_size=1, max_size=5, unique_by=lambda op: op[0],
        ),
        duplicate=st.integers(0, 5).map(lambda n: n == 0),
    )
    def batch_write_row(self, ops, duplicate) -> None:
        requests = []
        for pk, op, cs, inc, cond in ops:
            if op == "put":
                requests.append((self.name, "put", pk, cs, cond))
            elif op == "update":
                requests.append((self.name, "update", pk, {"put": cs, "increment": inc}, cond))
            else:
                requests.append((self.name, "delete", pk, None, cond))
        if duplicate:
            requests.append((self.name, "delete", ops[0][0]))
        results, code, t0, t1 = self.call(self.db.batch_write_row, requests)
        if duplicate:
            assert code == "OTSParameterInvalid"
            return
        assert code is None and len(results) == len(ops)
        for (pk, op, cs, inc, cond), res in zip(ops, results):
            assert res.primary_key == pk and res.operation == op
            code = None if res.ok else res.error.code
            if op == "put":
                if self.condition_fails(pk, cond):
                    assert code == "OTSConditionCheckFail"
                    continue
                assert code is None
                row: dict = {}
                for c, v, ts in cs:
                    merge(row.setdefault(c, []), ts, v)
                self.rows[pk] = trim(row)
            elif op == "update":
                self.check_update(pk, cs, [], [], inc, cond, res.result, code, t0, t1)
            else:
                if self.condition_fails(pk, cond):
                    assert code == "OTSConditionCheckFail"
                    continue
                assert code is None
                self.rows.pop(pk, None)

    @precondition(lambda self: self.engine == "rocksdb" and not self.reopened)
    @rule()
    def reopen(self) -> None:
        """Close and reopen the store: everything written so far must come back."""
        store = self._store["rocksdb"]
        store[1].close()
        store[1] = self.db = self._open(store[0])
        self.t = self.db.table(self.name)
        self.reopened = True

    # -- reads --

    @rule(pk=pks, options=read_options)
    def get_row(self, pk, options) -> None:
        got = self.t.get_row(pk, **options)
        assert observed(got) == typed(model_read(self.rows.get(pk), **options))
        if got is not None:
            assert got.primary_key == pk

    @rule(keys=st.lists(pks, min_size=1, max_size=4), options=read_options)
    def batch_get_row(self, keys, options) -> None:
        results = self.db.batch_get_row([(self.name, pk, options) for pk in keys])
        for pk, res in zip(keys, results, strict=True):
            assert res.ok and res.primary_key == pk
            assert observed(res.row) == typed(model_read(self.rows.get(pk), **options))

    @staticmethod
    def in_order(start, end, direction, ordered: bool) -> tuple:
        """Swap the bounds into walking order when ``ordered`` (most ranges should be valid)."""
        if not ordered:
            return start, end
        pad = INF_MAX if direction == "backward" else INF_MIN
        s, e = bound_key(start, pad), bound_key(end, pad)
        if (s < e) if direction == "backward" else (s > e):
            return end, start
        return start, end

    def model_range(self, start, end, direction, options) -> list | None:
        backward = direction == "backward"
        pad = INF_MAX if backward else INF_MIN
        s, e = bound_key(start, pad), bound_key(end, pad)
        if (s <= e) if backward else (s >= e):  # Tablestore refuses an empty range
            return None
        keys = sorted(self.rows, reverse=backward)
        if backward:
            keys = [k for k in keys if e < row_key(k) <= s]
        else:
            keys = [k for k in keys if s <= row_key(k) < e]
        out = []
        for k in keys:
            r = model_read(self.rows[k], **options)
            if r is not None:
                out.append((k, typed(r)))
        return out

    @rule(start=bounds, end=bounds, direction=st.sampled_from(["forward", "backward"]),
          limit=st.one_of(st.none(), st.integers(1, 4)), options=read_options,
          ordered=st.integers(0, 3).map(bool))
    def get_range(self, start, end, direction, limit, options, ordered) -> None:
        start, end = self.in_order(start, end, direction, ordered)
        expected = self.model_range(start, end, direction, options)
        got: list = []
        first = start
        for _ in range(100):
            try:
                page = self.t.get_range(first, end, direction, limit=limit, **options)
            except WidetableError as exc:
                assert expected is None and exc.code == "OTSParameterInvalid" and not got
                return
            assert expected is not None
            assert limit is None or len(page) <= limit
            got += [(r.primary_key, observed(r)) for r in page]
            if page.next_start_primary_key is None:
                break
            first = page.next_start_primary_key
        else:
            raise AssertionError("paging did not finish")
        assert got == expected

    @rule(start=bounds, end=bounds, direction=st.sampled_from(["forward", "backward"]),
          page_size=st.integers(1, 5), options=read_options,
          ordered=st.integers(0, 3).map(bool))
    def scan(self, start, end, direction, page_size, options, ordered) -> None:
        start, end = self.in_order(start, end, direction, ordered)
        expected = self.model_range(start, end, direction, options)
        try:
            got = [(r.primary_key, observed(r))
                   for r in self.t.scan(start, end, direction, page_size=page_size, **options)]
        except WidetableError as exc:
            assert expected is None and exc.code == "OTSParameterInvalid"
            return
        assert got == expected

    @invariant()
    def whole_table_matches(self) -> None:
        # Ask for one version more than the table keeps: extra versions must not exist.
        got = [(r.primary_key, observed(r)) for r in self.t.scan(max_versions=MAX_VERSIONS + 1)]
        expected = [(k, typed(model_read(self.rows[k], max_versions=MAX_VERSIONS + 1)))
                    for k in sorted(self.rows)]
        assert got == expected


MODEL_SETTINGS = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


class MemoryTableMachine(TableMachine):
    engine = "memory"


class RocksTableMachine(TableMachine):
    engine = "rocksdb"


TestModelMemory = MemoryTableMachine.TestCase
TestModelMemory.settings = MODEL_SETTINGS
TestModelRocksDB = RocksTableMachine.TestCase
TestModelRocksDB.settings = MODEL_SETTINGS
