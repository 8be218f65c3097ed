"""Differential property test: one random sequence of table operations, four ways in.

Each hypothesis example makes a fresh table with a ``(STRING, INTEGER)`` key, sometimes
with ``max_versions=3``, sometimes with a TTL, on four paths to the same data model:

* ``embedded``: ``widetable.open`` in this process, the reference;
* ``native``: ``widetable.connect`` to a served store, data calls over widetable's own
  protocol;
* ``tablestore``: the same client on Tablestore's protocol (``protocol="tablestore"``);
* ``sdk``: the official ``tablestore`` SDK on the same server.

It runs the generated writes (put, update with put / delete_version / delete_column /
increment, delete, conditions, batch writes) and reads (get_row with columns, versions,
time ranges and filters; get_range both ways with limits, followed page by page through
``next_start_primary_key``; batch_get_row) on each path, step by step, and compares
rows, cells, timestamps, next keys, increments and error codes, then every version of
every row at the end.

Now and then an input is one the store refuses (a key past int64, mistyped or of the
wrong length, text that is not Unicode, a key column's name for an attribute, a
timestamp outside max_time_deviation, a condition that fails, a batch naming a row
twice): every path must refuse it with the same code, and change nothing.

Timestamps are explicit (slots relative to the example's start, so they compare
exactly); those the store picks itself (increments, puts without one) compare as
``NOW``. The SDK cannot express column pagination, options past its int32 / int64
fields, or values it cannot encode (those reads skip it; after such a write it sits the
example out), nor return increments (its write results compare everything else).

The tests at the end pin each divergence this test found, fixed in ``client/`` and
``server/``.
"""

from __future__ import annotations

import itertools
import math
import struct
import time

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, event, given, settings

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

from . import serving

tablestore = pytest.importorskip("tablestore")
from tablestore import INF_MAX as SDK_INF_MAX
from tablestore import INF_MIN as SDK_INF_MIN
from tablestore import (
    BatchGetRowRequest,
    BatchWriteRowRequest,
    CapacityUnit,
    ComparatorType,
    CompositeColumnCondition,
    DeleteRowItem,
    LogicalOperator,
    OTSServiceError,
    PutRowItem,
    ReservedThroughput,
    ReturnType,
    RowExistenceExpectation,
    SingleColumnCondition,
    TableInBatchGetRowItem,
    TableInBatchWriteRowItem,
    TableMeta,
    TableOptions,
    UpdateRowItem,
)
from tablestore import Condition as SdkCondition
from tablestore import Row as SdkRow

PK = [("a", "STRING"), ("b", "INTEGER")]
PK_NAMES = ("a", "b")
MISSING = "no_such_table"
ALL_VERSIONS = 2**31 - 1
FAR = 2**62
TTL = 300  # seconds: slot OLD is past it, the other slots stay inside it for a minute


# -- timestamps ------------------------------------------------------------------------
# A slot is resolved against the example's start (``now0``): slots 0-4 are 4 minutes old,
# a second apart; OLD is past the TTL; BAD is outside max_time_deviation (rejected).

OLD, BAD = 5, 6


def slot_ts(slot: int, now0: int) -> int:
    if slot == OLD:
        return now0 - (TTL + 100) * 1000
    if slot == BAD:
        return 1
    return now0 - 240_000 + slot * 1000


# Time-range points: a slot, or one of these (BIG and HUGE are past int64: the embedded
# store takes them, a time range reaching past every version).
ZERO, AFTER, FARPOINT, BIG, HUGE = "zero", "after", "far", "big", "huge"
POINTS = {ZERO: 0, FARPOINT: FAR, BIG: 2**63, HUGE: 2**64}


def point_ts(point: object, now0: int) -> int:
    if point == AFTER:
        return slot_ts(4, now0) + 1  # past every explicit slot, before any "NOW"
    if point in POINTS:
        return POINTS[point]  # type: ignore[index]
    return slot_ts(point, now0)  # type: ignore[arg-type]


# -- strategies ----------------------------------------------------------------------------

STRS = ["", "a", "b"]
INTS = [-(2**63), -1, 0, 7, 2**63 - 1]
COLS = ["c0", "c1", "c2", "n"]
SURROGATE = "\udc00"  # a str that is not Unicode text: refused as a value, name or key


def mostly(common, rare, odds: int = 12):
    """``common``, and now and then ``rare`` (one draw in ``odds + 1``: one_of would draw
    each branch as often)."""
    return st.sampled_from([True] * odds + [False]).flatmap(lambda c: common if c else rare)


# Now and then a key column's name or an invalid one (all refused).
plain_col_names = mostly(st.sampled_from(COLS), st.sampled_from(["a", "bad-name"]))
col_names = mostly(plain_col_names, st.just("c" + SURROGATE), 40)
read_cols = st.sampled_from([*COLS, "m", "a", "b"])

# A few keys, so that writes meet and reads find them; one hot key takes more of them.
# Rarely a key the store refuses: out of int64, not text, too short or long, mistyped.
pks = mostly(
    st.sampled_from([("a", 0), ("a", 0), ("a", 7), ("a", -1), ("", -(2**63)),
                     ("b", 2**63 - 1), ("b", 0)]),
    st.sampled_from([("a", 2**63), ("a", -(2**63) - 1), ("a", 2**64), (SURROGATE, 0), ("a",),
                     ("a", "x"), ("a", 0, 1)]),
    30,
)
plain_values = mostly(
    st.one_of(
        st.sampled_from(["", "x", "y", "é", "\x00z"]),
        st.sampled_from([-1, 0, 1, 5, 2**63 - 1, -(2**63)]),
        st.sampled_from([0.0, -0.0, 1.5, -2.5, float("inf"), float("nan")]),
        st.booleans(),
        st.sampled_from([b"", b"\x00", b"x", b"\xff"]),
    ),
    # Now and then a large one: longer protobuf lengths, and calls the server runs in its
    # pool (over 64 KB) rather than on its event loop.
    st.sampled_from(["é" * 9000, b"\x01" * 70_000]),
    40,
)
# Rarely a value the store refuses: past int64, or not Unicode text.
values = mostly(plain_values, st.sampled_from([SURROGATE, 2**63, 2**64]), 30)
filter_values = st.one_of(
    st.sampled_from(["", "x", "y"]), st.sampled_from([-1, 0, 1, 5]),
    st.sampled_from([0.0, 1.5]), st.booleans(), st.sampled_from([b"", b"x"]),
)
# Slots 0-4 mostly; OLD (past the TTL) sometimes; BAD (refused) rarely.
slots = mostly(st.integers(0, 4), mostly(st.just(OLD), st.just(BAD), 2), 6)
maybe_slot = st.one_of(st.none(), slots, slots, slots)

single_filters = st.builds(
    SingleColumnFilter,
    column=st.sampled_from([*COLS, "m", "a"]),
    op=st.sampled_from(["==", "!=", ">", ">=", "<", "<="]),
    value=filter_values,
    pass_if_missing=st.booleans(),
    latest_version_only=st.booleans(),
)
column_filters = st.one_of(
    single_filters,
    single_filters,
    st.builds(lambda a, b: CompositeFilter("AND", (a, b)), single_filters, single_filters),
    st.builds(lambda a, b: CompositeFilter("OR", (a, b)), single_filters, single_filters),
    st.builds(lambda a: CompositeFilter("NOT", (a,)), single_filters),
)
read_filters = st.one_of(
    column_filters,
    st.builds(ColumnPagination, offset=st.integers(0, 3), limit=st.integers(1, 3)),
)
conditions = st.one_of(
    st.none(),
    st.builds(Condition, row_existence=st.sampled_from(list(RowExistence)),
              column_condition=st.one_of(st.none(), column_filters)),
)


def repr_ts(point: object) -> int:
    """A time-range point's place in time (``point_ts`` at an arbitrary start)."""
    return point_ts(point, 10**9)


points = st.sampled_from([ZERO, 0, 1, 2, 3, 4, OLD, AFTER, FARPOINT])
far_points = mostly(points, st.sampled_from([BIG, HUGE]), 8)
time_ranges = st.one_of(
    st.tuples(st.just("at"), st.integers(0, 4)),
    # (start, end) in order mostly; now and then empty or reversed (refused). Only valid
    # pairs reach past int64: a refused one that the message cannot hold is refused by
    # the client at once, where the embedded get_row of a missing row checks no option.
    mostly(st.tuples(far_points, far_points)
           .filter(lambda p: p[0] != p[1] or p[0] not in (BIG, HUGE))
           .map(lambda p: ("range", *sorted(p, key=repr_ts))),
           st.tuples(st.just("range"), points, points), 6),
)
read_options = st.fixed_dictionaries({}, optional={
    "columns": st.lists(read_cols, max_size=3, unique=True),
    # Past int32 (rarely): the embedded store reads every version, as with ALL_VERSIONS.
    "max_versions": mostly(st.sampled_from([1, 2, 5, ALL_VERSIONS]),
                           st.sampled_from([2**31, 2**64]), 10),
    "time_range": time_ranges,
    "filter": read_filters,
})
forms = st.sampled_from(["list", "dict"])


# A deleted version's timestamp: a slot mostly, rarely one outside [0, 2**63) (refused).
dv_slots = mostly(st.integers(0, 4), st.sampled_from([-1, 2**64]), 20)


def dv_ts(slot: int, now0: int) -> int:
    """The timestamp of a delete_version slot: a slot's, or the refused value as it is."""
    return slot_ts(slot, now0) if 0 <= slot <= BAD else slot


def write_ops(names, vals) -> tuple:
    """Strategies of put, update and delete steps whose cells have these names and values."""
    cells = st.lists(st.tuples(names, vals, maybe_slot), max_size=4)
    parts = {  # each part of an update, holding at least one change
        "put": st.lists(st.tuples(names, vals, maybe_slot), min_size=1, max_size=3),
        "delete_version": st.lists(st.tuples(names, dv_slots), min_size=1, max_size=2),
        "delete_column": st.lists(names, min_size=1, max_size=2, unique=True),
        # Counters live in "n" and "m" mostly ("c0" holds any type); big deltas overflow.
        "increment": st.dictionaries(mostly(st.sampled_from(["n", "m"]), st.just("c0"), 4),
                                     mostly(st.sampled_from([-1, 1, 2, 3]),
                                            st.sampled_from([2**62, -(2**63)]), 4),
                                     min_size=1, max_size=2),
    }
    any_parts = st.fixed_dictionaries({}, optional=parts)
    # Updates that change something, mostly; an empty one now and then (refused).
    update_parts = mostly(
        st.sampled_from(sorted(parts)).flatmap(
            lambda kind: st.builds(lambda one, rest: {**rest, kind: one}, parts[kind], any_parts)),
        st.just({}))
    return (st.tuples(st.just("put"), pks, cells, forms, conditions),
            st.tuples(st.just("update"), pks, update_parts, forms, conditions),
            st.tuples(st.just("delete"), pks, conditions))


put_ops, update_ops, delete_ops = write_ops(col_names, values)
batch_write_ops = st.tuples(
    st.just("batch_write"),
    st.lists(st.one_of(*write_ops(plain_col_names, values)),
             min_size=1, max_size=4, unique_by=lambda op: op[1]),
    st.sampled_from(["", "", "", "dup", "missing"]),
)
get_ops = st.tuples(st.just("get"), pks, read_options)
bound_elems_s = st.sampled_from([*STRS, "ab", INF_MIN, INF_MAX])
bound_elems_i = st.sampled_from([*INTS, 1, INF_MIN, INF_MAX])
tuple_bounds = st.one_of(
    st.tuples(bound_elems_s, bound_elems_i),
    st.tuples(bound_elems_s, bound_elems_i),
    st.tuples(bound_elems_s),  # padded by the client and the store
)
# A bound may also name its columns; rarely one that is no key column (refused).
bounds = mostly(
    tuple_bounds,
    st.one_of(tuple_bounds.map(lambda b: dict(zip(PK_NAMES, b))),
              tuple_bounds.map(lambda b: {"z": b[0]})),
    4,
)


def as_tuple(bound: object, direction: str) -> tuple:
    """A tuple or dict bound as the full key tuple it stands for in ``direction``."""
    fill = INF_MAX if direction == "backward" else INF_MIN
    if isinstance(bound, dict):
        return tuple(bound.get(n, fill) for n in PK_NAMES)
    return bound + (fill,) * (len(PK_NAMES) - len(bound))  # type: ignore[operator]


def bound_order(bound: object, direction: str) -> tuple:
    """A sort key of a bound in ``direction`` (INF_MIN below every value, INF_MAX above;
    the key bytes compare the same way)."""
    return tuple((0,) if v is INF_MIN else (2,) if v is INF_MAX else (1, v)
                 for v in as_tuple(bound, direction))


def ordered_range(start: object, end: object, direction: str, swap: bool) -> tuple:
    """``(start, end)`` in the order ``direction`` reads them, or the other way (refused)
    when ``swap``."""
    low, high = sorted((start, end), key=lambda b: bound_order(b, direction))
    first, second = (high, low) if direction == "backward" else (low, high)
    return (second, first) if swap and first != second else (first, second)


range_ops = st.builds(
    lambda b1, b2, direction, swap, limit, opts: (
        "range", *ordered_range(b1, b2, direction, swap), direction, limit, opts),
    bounds, bounds, st.sampled_from(["forward", "backward"]),
    st.sampled_from([False] * 8 + [True]), st.one_of(st.none(), st.integers(1, 3)),
    read_options,
)
# Forward from the start, or backward from the end: ranges that hold rows, mostly.
whole_range_ops = st.builds(
    lambda direction, limit, opts: (
        "range", *(((INF_MIN, INF_MIN), (INF_MAX, INF_MAX)) if direction == "forward"
                   else ((INF_MAX, INF_MAX), (INF_MIN, INF_MIN))), direction, limit, opts),
    st.sampled_from(["forward", "backward"]), st.one_of(st.none(), st.integers(1, 3)),
    read_options,
)
# Items of a batch read: (key, options or None for the batch's shared ones). Now and then
# an item has options of its own, or an option the store does not know (refused).
batch_get_ops = st.tuples(
    st.just("batch_get"),
    st.lists(st.tuples(pks, mostly(st.none(), mostly(read_options, st.just({"bogus": 1}), 6),
                                   5)),
             min_size=1, max_size=4),
    read_options, st.booleans())
# Every sequence starts with a batch of valid puts, so that there are rows to read.
good_cells = st.lists(st.tuples(st.sampled_from(COLS), plain_values,
                                st.one_of(st.none(), st.integers(0, 4), st.integers(0, 4))),
                      min_size=1, max_size=4)
prelude = st.builds(
    lambda puts: ("batch_write", puts, ""),
    st.lists(st.tuples(st.just("put"), pks, good_cells, forms, st.none()),
             min_size=1, max_size=5, unique_by=lambda op: op[1]),
)
steps = st.builds(
    lambda first, rest: [first, *rest],
    prelude,
    st.lists(st.one_of(put_ops, put_ops, update_ops, update_ops, delete_ops, batch_write_ops,
                       get_ops, range_ops, whole_range_ops, batch_get_ops),
             min_size=2, max_size=20),
)
table_options = st.tuples(st.sampled_from([1, 1, 3]), st.sampled_from([None, None, TTL]))


# -- results as plain comparable values ---------------------------------------------------


class _Any:
    """Stands for a part of a result one path cannot return."""

    def __eq__(self, other: object) -> bool:
        return True

    def __repr__(self) -> str:
        return "ANY"


ANY = _Any()


def norm_value(v: object) -> tuple:
    if type(v) is bool:
        return ("BOOLEAN", v)
    if type(v) is int:
        return ("INTEGER", v)
    if type(v) is float:
        return ("DOUBLE", "nan" if math.isnan(v) else struct.pack("<d", v).hex())
    if type(v) is str:
        return ("STRING", v)
    if isinstance(v, (bytes, bytearray)):
        return ("BINARY", bytes(v))
    return ("?", type(v).__name__, repr(v))


class Norm:
    """Turns rows and keys of one example into comparable tuples."""

    def __init__(self, now0: int) -> None:
        self.now0 = now0

    def ts(self, ts: int) -> object:
        """An explicit slot's timestamp as its offset from ``now0``; one the store chose, NOW."""
        return "NOW" if ts >= self.now0 - 1000 else ts - self.now0

    def row(self, row) -> tuple | None:
        if row is None:
            return None
        return (tuple(row.primary_key),
                tuple((n, norm_value(v), self.ts(t)) for n, v, t in row.cells))

    def sdk_row(self, row) -> tuple | None:
        if row is None:
            return None
        return (tuple(v for _, v in row.primary_key),
                tuple((c[0], norm_value(c[1]), self.ts(c[2])) for c in row.attribute_columns))


def key_repr(key: object) -> object:
    if key is None:
        return None
    return tuple("INF_MIN" if v is INF_MIN else "INF_MAX" if v is INF_MAX else v for v in key)


# -- turning generated operations into calls ------------------------------------------------


def lib_columns(cell_list: list, form: str, now0: int) -> object:
    """Cells in the library's list form ``[(name, value[, ts])]`` or dict form."""
    if form == "dict":
        return {n: v if s is None else (v, slot_ts(s, now0)) for n, v, s in cell_list}
    return [(n, v) if s is None else (n, v, slot_ts(s, now0)) for n, v, s in cell_list]


def lib_update(parts: dict, form: str, now0: int) -> dict:
    out: dict = {}
    if "put" in parts:
        out["put"] = lib_columns(parts["put"], form, now0)
    if "delete_version" in parts:
        dv = [(n, dv_ts(s, now0)) for n, s in parts["delete_version"]]
        out["delete_version"] = dict(dv) if form == "dict" else dv
    if "delete_column" in parts:
        out["delete_column"] = list(parts["delete_column"])
    if "increment" in parts:
        out["increment"] = dict(parts["increment"])
    return out


def lib_read_options(opts: dict, now0: int) -> dict:
    out = dict(opts)
    tr = opts.get("time_range")
    if tr is not None:
        if tr[0] == "at":
            out["time_range"] = slot_ts(tr[1], now0)
        else:
            out["time_range"] = (point_ts(tr[1], now0), point_ts(tr[2], now0))
    return out


def write_result(result) -> tuple:
    return ("ok", tuple(result.primary_key), dict(result.increments))


def error(code: str) -> tuple:
    return ("error", code)


class LibraryPath:
    """The embedded store or ``widetable.connect``: the same API, the same calls."""

    def __init__(self, db, table: str, norm: Norm) -> None:
        self.db = db
        self.name = table
        self.norm = norm
        self.t = db.table(table)

    def put(self, pk, cell_list, form, cond):
        return write_result(self.t.put_row(pk, lib_columns(cell_list, form, self.norm.now0), cond))

    def update(self, pk, parts, form, cond):
        return write_result(self.t.update_row(pk, condition=cond,
                                              **lib_update(parts, form, self.norm.now0)))

    def delete(self, pk, cond):
        return write_result(self.t.delete_row(pk, cond))

    def batch_write(self, items, extra):
        requests = []
        for op in items:
            kind, pk = op[0], op[1]
            if kind == "put":
                payload = lib_columns(op[2], op[3], self.norm.now0)
                cond = op[4]
            elif kind == "update":
                payload = lib_update(op[2], op[3], self.norm.now0)
                cond = op[4]
            else:
                payload, cond = None, op[2]
            requests.append((self.name, kind, pk, payload, cond))
        if extra == "dup":
            requests.append(requests[0])
        elif extra == "missing":
            requests.append((MISSING, "delete", ("a", 0), None, None))
        out = []
        for r in self.db.batch_write_row(requests):
            if r.ok:
                out.append((r.table == self.name, r.operation, *write_result(r.result)))
            else:
                out.append((r.table == self.name, r.operation, *error(r.error.code)))
        return out

    def get(self, pk, opts):
        return self.norm.row(self.t.get_row(pk, **lib_read_options(opts, self.norm.now0)))

    def range_page(self, start, end, direction, limit, opts):
        page = self.t.get_range(start, end, direction, limit=limit,
                                **lib_read_options(opts, self.norm.now0))
        return [self.norm.row(r) for r in page.rows], page.next_start_primary_key

    def batch_get(self, items, shared, missing):
        now0 = self.norm.now0
        requests = [(self.name, pk, lib_read_options(shared if opts is None else opts, now0))
                    for pk, opts in items]
        if missing:
            requests.append((MISSING, *requests[0][1:]))
        out = []
        for r in self.db.batch_get_row(requests):
            if r.ok:
                out.append((r.table == self.name, tuple(r.primary_key), self.norm.row(r.row)))
            else:
                out.append((r.table == self.name, error(r.error.code)))
        return out

    def everything(self):
        return [self.norm.row(r) for r in self.t.scan(max_versions=ALL_VERSIONS)]


# -- the official SDK --------------------------------------------------------------------

SDK_OPS = {"==": ComparatorType.EQUAL, "!=": ComparatorType.NOT_EQUAL,
           ">": ComparatorType.GREATER_THAN, ">=": ComparatorType.GREATER_EQUAL,
           "<": ComparatorType.LESS_THAN, "<=": ComparatorType.LESS_EQUAL}
SDK_LOGIC = {"AND": LogicalOperator.AND, "OR": LogicalOperator.OR, "NOT": LogicalOperator.NOT}


def sdk_value(v: object) -> object:
    return bytearray(v) if type(v) is bytes else v  # the SDK sends bytes as a STRING


def sdk_filter(f) -> object:
    if isinstance(f, SingleColumnFilter):
        return SingleColumnCondition(f.column, sdk_value(f.value), SDK_OPS[f.op],
                                     pass_if_missing=f.pass_if_missing,
                                     latest_version_only=f.latest_version_only)
    comp = CompositeColumnCondition(SDK_LOGIC[f.op])
    for sub in f.filters:
        comp.add_sub_condition(sdk_filter(sub))
    return comp


def sdk_condition(cond: Condition | None) -> SdkCondition:
    if cond is None:
        return SdkCondition(RowExistenceExpectation.IGNORE)
    column = sdk_filter(cond.column_condition) if cond.column_condition is not None else None
    return SdkCondition(getattr(RowExistenceExpectation, cond.row_existence.value), column)


def sdk_key(values: tuple) -> list:
    def one(v):
        return SDK_INF_MIN if v is INF_MIN else SDK_INF_MAX if v is INF_MAX else v

    names = [*PK_NAMES, *(f"extra{i}" for i in range(len(values) - len(PK_NAMES)))]
    return [(n, one(v)) for n, v in zip(names, values)]


def sdk_cells(cell_list: list, form: str, now0: int) -> list:
    """The same cells as ``lib_columns`` sends (a dict keeps each column's last cell)."""
    if form == "dict":
        cell_list = list({n: (n, v, s) for n, v, s in cell_list}.values())
    return [(n, sdk_value(v)) if s is None else (n, sdk_value(v), slot_ts(s, now0))
            for n, v, s in cell_list]


def sdk_update(parts: dict, form: str, now0: int) -> dict:
    out: dict = {}
    if parts.get("put"):
        out["PUT"] = sdk_cells(parts["put"], form, now0)
    dv = parts.get("delete_version")
    if dv:
        if form == "dict":
            dv = list(dict(dv).items())
        out["DELETE"] = [(n, None, dv_ts(s, now0)) for n, s in dv]
    if parts.get("delete_column"):
        out["DELETE_ALL"] = list(parts["delete_column"])
    if parts.get("increment"):
        out["INCREMENT"] = list(parts["increment"].items())
    return out


def sdk_read_options(opts: dict, now0: int) -> dict | None:
    """Keyword arguments of the SDK's reads, or None if it cannot express them."""
    f = opts.get("filter")
    if isinstance(f, ColumnPagination):
        return None
    tr = lib_read_options(opts, now0).get("time_range")
    return {
        "columns_to_get": opts.get("columns") or None,
        "column_filter": None if f is None else sdk_filter(f),
        "max_version": opts.get("max_versions", 1),
        "time_range": tuple(tr) if isinstance(tr, tuple) else tr,
    }


class SdkPath:
    """The official SDK on the served store."""

    def __init__(self, client, table: str, norm: Norm) -> None:
        self.c = client
        self.name = table
        self.norm = norm

    def _written(self, row) -> tuple:
        pk = tuple(v for _, v in row.primary_key) if row is not None else None
        return ("ok", pk, ANY)

    def put(self, pk, cell_list, form, cond):
        row = SdkRow(sdk_key(pk), sdk_cells(cell_list, form, self.norm.now0))
        _, row = self.c.put_row(self.name, row, sdk_condition(cond), return_type=ReturnType.RT_PK)
        return self._written(row)

    def update(self, pk, parts, form, cond):
        change = sdk_update(parts, form, self.norm.now0)
        _, row = self.c.update_row(self.name, SdkRow(sdk_key(pk), change), sdk_condition(cond),
                                   return_type=ReturnType.RT_PK)
        return self._written(row)

    def delete(self, pk, cond):
        _, row = self.c.delete_row(self.name, SdkRow(sdk_key(pk)), sdk_condition(cond),
                                   return_type=ReturnType.RT_PK)
        return self._written(row)

    def _item(self, op):
        kind, pk = op[0], op[1]
        now0 = self.norm.now0
        if kind == "put":
            return PutRowItem(SdkRow(sdk_key(pk), sdk_cells(op[2], op[3], now0)),
                              sdk_condition(op[4]), return_type=ReturnType.RT_PK)
        if kind == "update":
            return UpdateRowItem(SdkRow(sdk_key(pk), sdk_update(op[2], op[3], now0)),
                                 sdk_condition(op[4]), return_type=ReturnType.RT_PK)
        return DeleteRowItem(SdkRow(sdk_key(pk)), sdk_condition(op[2]),
                             return_type=ReturnType.RT_PK)

    def batch_write(self, items, extra):
        ops = list(items)
        if extra == "dup":
            ops.append(ops[0])
        req = BatchWriteRowRequest()
        req.add(TableInBatchWriteRowItem(self.name, [self._item(op) for op in ops]))
        if extra == "missing":
            req.add(TableInBatchWriteRowItem(MISSING, [self._item(("delete", ("a", 0), None))]))
        res = self.c.batch_write_row(req)
        out = []
        for table, table_ops in ((self.name, ops),
                                 *(((MISSING, [("delete",)]),) if extra == "missing" else ())):
            by_kind = {
                "put": iter(res.get_put_by_table(table)),
                "update": iter(res.get_update_by_table(table)),
                "delete": iter(res.get_delete_by_table(table)),
            }
            for op in table_ops:
                item = next(by_kind[op[0]])
                if item.is_ok:
                    out.append((table == self.name, op[0], *self._written(item.row)))
                else:
                    out.append((table == self.name, op[0], *error(item.error_code)))
        return out

    def get(self, pk, opts):
        kw = sdk_read_options(opts, self.norm.now0)
        _, row, _ = self.c.get_row(self.name, sdk_key(pk), **kw)
        return self.norm.sdk_row(row)

    def range_page(self, start, end, direction, limit, opts):
        kw = sdk_read_options(opts, self.norm.now0)
        _, nxt, rows, _ = self.c.get_range(
            self.name, direction.upper(), sdk_key(as_tuple(start, direction)),
            sdk_key(as_tuple(end, direction)), limit=limit, **kw)
        return ([self.norm.sdk_row(r) for r in rows],
                None if nxt is None else tuple(v for _, v in nxt))

    def batch_get(self, items, shared, missing):
        kw = sdk_read_options(shared, self.norm.now0)  # sdk_can: every item reads with these
        keys = [pk for pk, _ in items]
        req = BatchGetRowRequest()
        req.add(TableInBatchGetRowItem(self.name, [sdk_key(pk) for pk in keys], **kw))
        if missing:
            req.add(TableInBatchGetRowItem(MISSING, [sdk_key(keys[0])], **kw))
        res = self.c.batch_get_row(req)
        out = []
        for table, wanted in ((self.name, keys), *(((MISSING, keys[:1]),) if missing else ())):
            for pk, item in zip(wanted, res.get_result_by_table(table), strict=True):
                if item.is_ok:
                    out.append((table == self.name, tuple(pk), self.norm.sdk_row(item.row)))
                else:
                    out.append((table == self.name, error(item.error_code)))
        return out

    def everything(self):
        start, out = sdk_key((INF_MIN, INF_MIN)), []
        while start is not None:
            _, nxt, rows, _ = self.c.get_range(self.name, "FORWARD", start,
                                               sdk_key((INF_MAX, INF_MAX)),
                                               max_version=ALL_VERSIONS)
            out += [self.norm.sdk_row(r) for r in rows]
            start = nxt
        return out


# -- running a step on every path ----------------------------------------------------------

MAX_PAGES = 4
READS = ("get", "range", "batch_get")


def wire_values(obj: object) -> bool:
    """Whether every str in ``obj`` is Unicode text and every int an int64: what the SDK
    can encode (it raises UnicodeEncodeError or struct.error itself on the others)."""
    if type(obj) is str:
        return SURROGATE not in obj
    if type(obj) is int:
        return -(2**63) <= obj < 2**63
    if isinstance(obj, (tuple, list)):
        return all(map(wire_values, obj))
    if isinstance(obj, dict):
        return wire_values(list(obj.items()))
    return True  # filters: their values are drawn from plain ones


def sdk_reads(opts: dict) -> bool:
    """Whether the SDK can send these read options (column pagination it has not; its
    max_versions is an int32 and its time range an int64 pair; it knows no other option)."""
    tr = opts.get("time_range")
    return (not isinstance(opts.get("filter"), ColumnPagination)
            and opts.get("max_versions", 1) <= ALL_VERSIONS
            and not (tr is not None and (BIG in tr or HUGE in tr))
            and set(opts) <= {"columns", "max_versions", "time_range", "filter"})


def sdk_can(op: tuple) -> bool:
    """Whether the SDK can express ``op`` (the other paths run it all the same)."""
    if not wire_values(op):
        return False
    if op[0] == "get":
        return sdk_reads(op[2])
    if op[0] == "range":
        named = [b for b in op[1:3] if isinstance(b, dict)]
        return sdk_reads(op[5]) and all(set(b) <= set(PK_NAMES) for b in named)
    if op[0] == "batch_get":  # one set of options per table
        items, shared = op[1], op[2]
        return sdk_reads(shared) and all(opts is None or opts == shared for _, opts in items)
    return True


def run(path, op: tuple) -> object:
    """One step's result on one path: a value, or ``("error", code)``."""
    kind = op[0]
    try:
        if kind == "range":
            return run_range(path, *op[1:])
        return getattr(path, kind)(*op[1:])
    except WidetableError as exc:
        return error(exc.code)
    except OTSServiceError as exc:
        return error(exc.get_error_code())
    except Exception as exc:  # noqa: BLE001 - a raw exception is a result that differs
        return ("raised", type(exc).__name__, str(exc)[:200])


def run_range(path, start, end, direction, limit, opts) -> list:
    """Pages of a range read, each started at the previous page's next key."""
    pages: list = []
    for _ in range(MAX_PAGES):
        try:
            rows, nxt = path.range_page(start, end, direction, limit, opts)
        except WidetableError as exc:
            pages.append(error(exc.code))
            break
        except OTSServiceError as exc:
            pages.append(error(exc.get_error_code()))
            break
        pages.append((rows, key_repr(nxt)))
        if nxt is None:
            break
        start = tuple(nxt)
    return pages


def stamps_now(op: tuple) -> bool:
    """Whether ``op`` may write a version stamped with the store's clock."""
    if op[0] == "put":
        return any(s is None for _, _, s in op[2])
    if op[0] == "update":
        return "increment" in op[2] or any(s is None for _, _, s in op[2].get("put", ()))
    if op[0] == "batch_write":
        return any(stamps_now(item) for item in op[1])
    return False


def outcome(kind: str, result: object) -> str:
    """A step's result in a few words, for ``--hypothesis-show-statistics``."""
    if type(result) is tuple and result and result[0] in ("error", "raised"):
        return result[1]
    if kind == "range":
        if result and result[-1][0] == "error":
            return f"{len(result)} page(s), then {result[-1][1]}"
        return f"{len(result)} page(s), " + (
            "some rows" if any(rows for rows, _ in result) else "no rows")
    if kind in ("batch_get", "batch_write"):
        errors = sum(1 for r in result if "error" in r)
        return f"{len(result) - errors} ok, {errors} refused"
    return "none" if result is None else "ok"


_names = itertools.count()


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    """``(embedded db, native client, Tablestore-protocol client, SDK client)``: a store
    in this process and one served on a loopback port, for the whole module."""
    served = serving.start(tmp_path_factory.mktemp("differential") / "served")
    embedded = widetable.open(str(tmp_path_factory.mktemp("differential") / "embedded"),
                              purge_interval=None)
    connect = {p: widetable.connect(served.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                                    access_key_secret=serving.ACCESS_KEY_SECRET, protocol=p)
               for p in ("native", "tablestore")}
    sdk = serving.official_client(served.endpoint, "v2", "widetable-differential")
    try:
        yield embedded, connect["native"], connect["tablestore"], sdk
    finally:
        for client in connect.values():
            client.close()
        embedded.close()
        served.stop()


def check_sequence(paths, options: tuple, ops: list) -> None:
    """Run ``ops`` on a fresh table on every path; fail at the first differing result."""
    embedded, native, over_tablestore, sdk = paths
    max_versions, ttl = options
    base = f"d{next(_names)}"
    names = {"embedded": base, "native": base + "_n", "tablestore": base + "_t", "sdk": base + "_s"}
    embedded.create_table(names["embedded"], PK, max_versions=max_versions, ttl=ttl)
    native.create_table(names["native"], PK, max_versions=max_versions, ttl=ttl)
    over_tablestore.create_table(names["tablestore"], PK, max_versions=max_versions, ttl=ttl)
    sdk.create_table(TableMeta(names["sdk"], PK),
                     TableOptions(time_to_live=-1 if ttl is None else ttl,
                                  max_version=max_versions),
                     ReservedThroughput(CapacityUnit(0, 0)))
    try:
        norm = Norm(now_ms())
        runners = {
            "embedded": LibraryPath(embedded, names["embedded"], norm),
            "native": LibraryPath(native, names["native"], norm),
            "tablestore": LibraryPath(over_tablestore, names["tablestore"], norm),
            "sdk": SdkPath(sdk, names["sdk"], norm),
        }
        for i, op in enumerate(ops):
            if "sdk" in runners and not sdk_can(op) and op[0] not in READS:
                del runners["sdk"]  # a write it cannot send: its table would differ from now on
            results = {name: run(path, op) for name, path in runners.items()
                       if name != "sdk" or sdk_can(op)}
            if stamps_now(op):
                time.sleep(0.002)  # the next write stamped NOW gets a later ms on every path
            want = results.pop("embedded")
            event(f"{op[0]}: {outcome(op[0], want)}")
            for name, got in results.items():
                assert got == want, (
                    f"step {i} {op!r} on {name}:\n  embedded: {want!r}\n  {name}: {got!r}")
        want = runners["embedded"].everything()
        for name in runners.keys() - {"embedded"}:
            got = runners[name].everything()
            assert got == want, f"final rows on {name}:\n  embedded: {want!r}\n  {name}: {got!r}"
    finally:
        embedded.delete_table(names["embedded"])
        for name in ("native", "tablestore", "sdk"):
            native.delete_table(names[name])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(options=table_options, ops=steps)
def test_every_path_agrees_with_the_embedded_store(paths, options, ops) -> None:
    check_sequence(paths, options, ops)


# -- regressions: divergences found by the test above, each fixed in client/ or server/ ----


@pytest.fixture
def trio(paths):
    """``{path: (db, table)}``: one new table on the embedded store and through both of
    widetable.connect's protocols, each holding row ("a", 0) with versions at slots 0-2."""
    embedded, native, over_tablestore, _ = paths
    base = f"r{next(_names)}"
    now0 = now_ms()
    made = {}
    for path, db in (("embedded", embedded), ("native", native), ("tablestore", over_tablestore)):
        table = db.create_table(f"{base}_{path}", PK, max_versions=3)
        table.put_row(("a", 0), [("c", f"v{k}", slot_ts(k, now0)) for k in range(3)])
        made[path] = (db, table)
    yield made
    for db, table in made.values():
        db.delete_table(table.name)


def each_path(trio, call) -> dict[str, object]:
    """``call(db, table)`` on each path: its result made comparable, or its error's code."""
    out = {}
    for path, (db, table) in trio.items():
        try:
            got = call(db, table)
        except WidetableError as exc:
            got = error(exc.code)
        except Exception as exc:  # noqa: BLE001 - recorded, to fail the comparison
            got = ("raised", type(exc).__name__)
        if isinstance(got, widetable.Row):
            got = (got.primary_key, got.cells)
        elif isinstance(got, widetable.RangeResult):
            got = ([(r.primary_key, r.cells) for r in got.rows], got.next_start_primary_key)
        elif isinstance(got, list):  # batch results
            got = [error(r.error.code) if r.error else ("ok", tuple(r.primary_key)) for r in got]
        elif isinstance(got, widetable.WriteResult):
            got = ("ok", got.primary_key)
        out[path] = got
    return out


def assert_everywhere(trio, call, want: object) -> None:
    got = each_path(trio, call)
    assert got == dict.fromkeys(trio, want), got


def test_text_that_is_not_unicode_is_refused_on_every_path(trio) -> None:
    """A lone surrogate (a str that is not Unicode text) as a value, a column name or a key
    was a raw UnicodeEncodeError out of widetable.connect on both protocols (MessagePack
    cannot pack it, and the PlainBuffer encoder let str.encode raise); the store refuses it
    with OTSParameterInvalid, or OTSInvalidPK for a key, and so does every path now."""
    bad = "c" + SURROGATE
    invalid, invalid_pk = error("OTSParameterInvalid"), error("OTSInvalidPK")
    assert_everywhere(trio, lambda db, t: t.put_row(("a", 1), {"c": SURROGATE}), invalid)
    assert_everywhere(trio, lambda db, t: t.put_row(("a", 1), {bad: 1}), invalid)
    assert_everywhere(trio, lambda db, t: t.update_row(("a", 0), put={"c": SURROGATE}), invalid)
    assert_everywhere(trio, lambda db, t: t.put_row((SURROGATE, 1), {"c": 1}), invalid_pk)
    assert_everywhere(trio, lambda db, t: t.delete_row((SURROGATE, 1)), invalid_pk)
    assert_everywhere(trio, lambda db, t: t.get_row((SURROGATE, 0)), invalid_pk)
    assert_everywhere(trio, lambda db, t: t.get_row(("a", 0), columns=[bad]), invalid)
    assert_everywhere(trio, lambda db, t: t.get_range((SURROGATE,), (INF_MAX,)), invalid_pk)
    # In a batch, the row alone fails.
    assert_everywhere(
        trio, lambda db, t: db.batch_get_row([(t.name, (SURROGATE, 0)), (t.name, ("a", 0))]),
        [invalid_pk, ("ok", ("a", 0))])
    assert_everywhere(
        trio, lambda db, t: db.batch_write_row([(t.name, "put", (SURROGATE, 1), {"c": 1}),
                                                (t.name, "put", ("a", 2), {"c": SURROGATE}),
                                                (t.name, "put", ("a", 3), {"c": 1})]),
        [invalid_pk, invalid, ("ok", ("a", 3))])


def test_keys_past_int64_are_invalid_pk_on_every_path(trio) -> None:
    """An INTEGER key outside int64 was OTSParameterInvalid over Tablestore's protocol (the
    PlainBuffer encoder named it as any value), and failed a whole batch_get_row; the store
    says OTSInvalidPK, for that row alone."""
    invalid_pk = error("OTSInvalidPK")
    for big in (2**63, -(2**63) - 1, 2**64):
        assert_everywhere(trio, lambda db, t, v=big: t.put_row(("a", v), {"c": 1}), invalid_pk)
        assert_everywhere(trio, lambda db, t, v=big: t.update_row(("a", v), put={"c": 1}),
                          invalid_pk)
        assert_everywhere(trio, lambda db, t, v=big: t.get_row(("a", v)), invalid_pk)
        assert_everywhere(trio, lambda db, t, v=big: t.get_range(("a", v), (INF_MAX,)),
                          invalid_pk)
        assert_everywhere(
            trio, lambda db, t, v=big: db.batch_get_row([(t.name, ("a", v)), (t.name, ("a", 0))]),
            [invalid_pk, ("ok", ("a", 0))])
        assert_everywhere(
            trio, lambda db, t, v=big: db.batch_write_row([(t.name, "delete", ("a", v)),
                                                           (t.name, "delete", ("a", 9))]),
            [invalid_pk, ("ok", ("a", 9))])


def newest_cells(trio) -> list:
    """The cells of row ("a", 0) of ``trio``'s tables, newest version only."""
    return trio["embedded"][1].get_row(("a", 0)).cells


def test_a_range_bound_naming_no_key_column_is_refused_on_every_path(trio) -> None:
    """Over Tablestore's protocol a dict bound's unknown names were dropped, so
    ``{"z": "a"}`` read from the table's first row; the store refuses it (OTSInvalidPK)."""
    assert_everywhere(trio, lambda db, t: t.get_range({"z": "a"}, (INF_MAX, INF_MAX)),
                      error("OTSInvalidPK"))
    assert_everywhere(trio, lambda db, t: t.get_range({"a": "a"}, {"a": "b"}),
                      ([(("a", 0), newest_cells(trio))], None))


def test_reads_past_what_the_message_holds_read_as_in_the_store(trio) -> None:
    """Over Tablestore's protocol ``max_versions`` past int32 and a time range reaching past
    int64 were refused; the store takes them, and they read what the largest the message
    holds reads (no table keeps more versions, no version is stamped there). Pairs the
    store refuses are still refused."""
    def versions(db, t, **options):
        return t.get_row(("a", 0), **options)

    every = each_path(trio, lambda db, t: versions(db, t, max_versions=ALL_VERSIONS))
    assert len(every["embedded"][1]) == 3 and len(set(map(repr, every.values()))) == 1
    for mv in (2**31, 2**64):
        assert_everywhere(trio, lambda db, t, mv=mv: versions(db, t, max_versions=mv),
                          every["embedded"])
        assert_everywhere(
            trio, lambda db, t, mv=mv: db.batch_get_row([(t.name, ("a", 0), {"max_versions": mv})]),
            [("ok", ("a", 0))])
        assert_everywhere(
            trio, lambda db, t, mv=mv: t.get_range((INF_MIN, INF_MIN), (INF_MAX, INF_MAX),
                                                   max_versions=mv),
            ([every["embedded"]], None))
    for end in (2**63, 2**64):
        assert_everywhere(
            trio, lambda db, t, end=end: versions(db, t, max_versions=5, time_range=(0, end)),
            every["embedded"])
    assert_everywhere(trio, lambda db, t: versions(db, t, time_range=(2**63, 2**64)), None)
    for refused in ((2**64, 5), (2**64, 2**63), (5, 5), 2**63, 2**64, -1, (-1, 5)):
        assert_everywhere(trio, lambda db, t, tr=refused: versions(db, t, time_range=tr),
                          error("OTSParameterInvalid"))
    assert_everywhere(trio, lambda db, t: versions(db, t, max_versions=0),
                      error("OTSParameterInvalid"))


def test_batch_get_refuses_an_option_it_does_not_know_on_every_path(trio) -> None:
    """Over Tablestore's protocol batch_get_row dropped options it does not know; the store
    refuses the item (OTSParameterInvalid), alone."""
    assert_everywhere(
        trio, lambda db, t: db.batch_get_row([(t.name, ("a", 0), {"bogus": 1}),
                                              (t.name, ("a", 0))]),
        [error("OTSParameterInvalid"), ("ok", ("a", 0))])


def test_a_batch_naming_a_row_twice_is_refused_even_if_one_cannot_travel(trio) -> None:
    """A batch naming a row twice is refused whole, nothing written. Over Tablestore's
    protocol a row whose value cannot travel failed in the client, was not sent, and its
    twin was written; the client now refuses the batch as the store does."""
    batch = [("put", ("a", 0), {"c": 2**64}), ("delete", ("a", 0))]
    assert_everywhere(trio, lambda db, t: db.batch_write_row([(t.name, *item) for item in batch]),
                      error("OTSParameterInvalid"))
    assert_everywhere(trio, lambda db, t: t.get_row(("a", 0)) is not None, True)
