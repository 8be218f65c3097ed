"""Differential property tests of the features test_differential.py leaves out.

test_differential.py runs random row operations on four paths to the same data model
and compares every result. This file does the same for the rest of the API, with the
same paths and helpers:

* ``embedded``: ``widetable.open`` in this process, the reference;
* ``native``: ``widetable.connect`` to a served store (``widetable serve`` on a loopback
  port, one for the module), data calls over widetable's own protocol;
* ``tablestore``: the same client on Tablestore's protocol (``protocol="tablestore"``);
* ``sdk``: the official ``tablestore`` SDK on the same server, where it has the feature.

Each example makes fresh tables (one per path, the server's named apart by a suffix)
and runs one generated sequence of steps on every path, comparing each step's result
(values, keys, timestamps, error codes) and the state at the end:

1. Local transactions: start / commit / abort in two slots, reads and writes in and out
   of them (writes outside the partition key, conflicts with other writers and a second
   transaction, ended transactions), batch writes in a transaction; on a plain table, one
   with a LOCAL index, or one with a stream (its records compared at the end). A
   transaction left idle past its timeout is tested on a server in this process, whose
   transactions a test can age (the protocol carries no timeout).
2. Secondary indexes: create_index GLOBAL and LOCAL, with and without
   include_base_data, valid and not; reads of an index (get_row, get_range both ways with
   limits and pages, scan, batch_get_row); writes to an index (refused); describe_table's
   index list; drop_index. GLOBAL indexes are waited for (``wait_for_indexes``, remotely
   until ``describe_table`` reports no lag) before they are read.
3. Streams: list_stream, describe_stream, get_shard_iterator and get_stream_record pages
   over random writes (explicit timestamps), while the stream is read and at the end;
   turning the stream off and on, changing its retention. Sequence numbers are the
   store's own: they compare by order. (The SDK has no stream calls.)
4. Catalog: create_table / update_table / describe_table / list_tables / delete_table
   with max_versions, ttl, max_time_deviation, defined columns, stream flags, reserved
   throughput and split points, valid and not (the same error codes).

Known limits of the wire, left out of the generated inputs: partition options other
than ``reserved_throughput`` do not travel (``OTSNotSupported``), and it travels as an int32
of capacity units; a stream retention travels in whole hours; over Tablestore's protocol a
shard iterator starts at TRIM_HORIZON only.

The tests at the end pin each divergence these tests found.
"""

from __future__ import annotations

import functools
import itertools
import os
import time
from dataclasses import dataclass

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, Phase, event, given, settings

import widetable
from widetable import INF_MAX, INF_MIN, Condition, RowExistence, SingleColumnFilter, WidetableError
from widetable.errors import ParameterInvalid
from widetable.table.values import now_ms

from . import serving
from .test_differential import (
    ANY,
    Norm,
    error,
    key_repr,
    lib_columns,
    lib_read_options,
    lib_update,
    mostly,
    norm_value,
    sdk_cells,
    sdk_condition,
    sdk_key,
    sdk_read_options,
    sdk_update,
    sdk_value,
    slot_ts,
    write_result,
)

tablestore = pytest.importorskip("tablestore")
from tablestore import INF_MAX as SDK_INF_MAX
from tablestore import INF_MIN as SDK_INF_MIN
from tablestore import (
    BatchGetRowRequest,
    BatchWriteRowRequest,
    CapacityUnit,
    DeleteRowItem,
    OTSServiceError,
    PutRowItem,
    ReservedThroughput,
    ReturnType,
    SecondaryIndexMeta,
    SecondaryIndexType,
    TableInBatchGetRowItem,
    TableInBatchWriteRowItem,
    TableMeta,
    TableOptions,
    UpdateRowItem,
)
from tablestore import Row as SdkRow
from tablestore.retry import NoRetryPolicy

PK = [("a", "STRING"), ("b", "INTEGER")]
MISSING = "no_such_table"
MAX_PAGES = 4
PATHS = ("embedded", "native", "tablestore", "sdk")
SUFFIX = {"embedded": "", "native": "_n", "tablestore": "_t", "sdk": "_s"}
EXAMPLES = int(os.environ.get("WIDETABLE_FEATURE_EXAMPLES", "0"))  # 0: each test's own count


def feature_settings(examples: int):
    """Hypothesis settings of a test here: ``examples`` examples (or
    WIDETABLE_FEATURE_EXAMPLES, for a longer hunt), no deadline (a step waits on a server),
    and no explain phase (it reruns a failing example hundreds of times)."""
    return settings(max_examples=EXAMPLES or examples, deadline=None,
                    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


_names = itertools.count()


# -- the paths -----------------------------------------------------------------------------


@dataclass
class Wire:
    embedded: widetable.Database
    native: object  # RemoteDatabase over widetable's own protocol
    tablestore: object  # RemoteDatabase over Tablestore's protocol
    sdk: object  # the official SDK's OTSClient

    def library(self) -> dict:
        """The three paths with the library's API."""
        return {"embedded": self.embedded, "native": self.native, "tablestore": self.tablestore}


@pytest.fixture(scope="module")
def wire(tmp_path_factory):
    """One ``widetable serve`` for the module, an embedded store, and the three clients."""
    served = serving.start(tmp_path_factory.mktemp("features") / "served")
    embedded = widetable.open(str(tmp_path_factory.mktemp("features") / "embedded"),
                              purge_interval=None)
    connect = {p: widetable.connect(served.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                                    access_key_secret=serving.ACCESS_KEY_SECRET, protocol=p)
               for p in ("native", "tablestore")}
    # Without retries: the SDK retries OTSRowOperationConflict for a minute by default, and
    # a conflict is a result to compare here.
    sdk = serving.official_client(served.endpoint, "v2", "widetable-differential-features",
                                  retry_policy=NoRetryPolicy())
    try:
        yield Wire(embedded, connect["native"], connect["tablestore"], sdk)
    finally:
        for client in connect.values():
            client.close()
        embedded.close()
        served.stop()


def fresh_names() -> dict[str, str]:
    """One new table name per path (the server holds the remote paths' tables side by side)."""
    base = f"f{next(_names)}"
    return {path: base + SUFFIX[path] for path in PATHS}


def attempt(call) -> object:
    """``call()``, or ``("error", code)``, or the raw exception (which differs)."""
    try:
        return call()
    except WidetableError as exc:
        return error(exc.code)
    except OTSServiceError as exc:
        return error(exc.get_error_code())
    except Exception as exc:  # noqa: BLE001 - a raw exception is a result that differs
        return ("raised", type(exc).__name__, str(exc)[:200])


def agree(results: dict, what: object) -> object:
    """Assert every path's result equals the embedded one; return it."""
    want = results["embedded"]
    for name, got in results.items():
        assert got == want, f"{what!r} on {name}:\n  embedded: {want!r}\n  {name}: {got!r}"
    return want


def call_step(runner, step: tuple) -> object:
    """``runner``'s method for ``step`` (``(method, *args)``; commit and abort are ``end``)."""
    op, args = step[0], step[1:]
    if op in ("commit", "abort"):
        return runner.end(op, *args)
    return getattr(runner, op)(*args)


def run_everywhere(runners: dict, step: tuple, skip: tuple = ()) -> dict:
    """``step`` on every path but those in ``skip``: each path's result."""
    return {p: attempt(functools.partial(call_step, r, step)) for p, r in runners.items()
            if p not in skip}


def outcome(result: object) -> str:
    """A step's result in a word or two, for ``--hypothesis-show-statistics``."""
    if type(result) is tuple and result and result[0] in ("error", "raised"):
        return str(result[1])
    return "ok"


def pages(read_page, start) -> list:
    """Up to MAX_PAGES pages of a range, each started at the previous page's next key:
    ``read_page(start)`` gives ``(rows, next)``."""
    out: list = []
    for _ in range(MAX_PAGES):
        rows, nxt = read_page(start)
        out.append((rows, key_repr(nxt)))
        if nxt is None:
            break
        start = tuple(nxt)
    return out


def sdk_named_key(names, values) -> list:
    """A key (or range bound) of the named columns in the SDK's form."""
    def one(v):
        return SDK_INF_MIN if v is INF_MIN else SDK_INF_MAX if v is INF_MAX else sdk_value(v)

    return [(n, one(v)) for n, v in zip(names, values, strict=True)]


def sdk_positional_key(names, values) -> list:
    """``values`` given to the key columns ``names`` in order, as the library's key tuples are
    (a name made up for a value past the last column)."""
    names = [*names, *(f"extra{i}" for i in range(len(values) - len(names)))]
    return sdk_named_key(names[:len(values)], values)


def sdk_range_pages(sdk, table: str, names, start, end, direction: str, limit, **options) -> list:
    """``pages`` of an SDK range read of ``table`` (key columns ``names``)."""
    def page(at):
        _, nxt, rows, _ = sdk.get_range(table, direction.upper(), sdk_named_key(names, at),
                                        sdk_named_key(names, end), limit=limit, **options)
        return rows, None if nxt is None else tuple(v for _, v in nxt)
    return pages(page, start)


def sdk_batch_results(res, table: str, kinds: list[str], written) -> list:
    """Per-row results of an SDK batch write of ``table``, in request order (the SDK groups
    them by operation kind)."""
    by_kind = {"put": iter(res.get_put_by_table(table)),
               "update": iter(res.get_update_by_table(table)),
               "delete": iter(res.get_delete_by_table(table))}
    out = []
    for kind in kinds:
        item = next(by_kind[kind])
        out.append((kind, *(written(item.row) if item.is_ok else error(item.error_code))))
    return out


def sdk_written(row) -> tuple:
    """An SDK write's result as ``write_result`` shapes the library's (no increments)."""
    return ("ok", tuple(v for _, v in row.primary_key) if row is not None else None, ANY)


def sdk_item(op: tuple, now0: int):
    """The SDK's batch item of a generated write ``(kind, pk, ...)``."""
    kind, pk = op[0], op[1]
    if kind == "put":
        return PutRowItem(SdkRow(sdk_key(pk), sdk_cells(op[2], "list", now0)),
                          sdk_condition(op[3]), return_type=ReturnType.RT_PK)
    if kind == "update":
        return UpdateRowItem(SdkRow(sdk_key(pk), sdk_update(op[2], "list", now0)),
                             sdk_condition(op[3]), return_type=ReturnType.RT_PK)
    return DeleteRowItem(SdkRow(sdk_key(pk)), sdk_condition(op[2]), return_type=ReturnType.RT_PK)


def lib_item(table: str, op: tuple, now0: int) -> tuple:
    """The library's batch item ``(table, kind, pk, payload, condition)`` of a generated write."""
    kind, pk = op[0], op[1]
    if kind == "put":
        return (table, kind, pk, lib_columns(op[2], "list", now0), op[3])
    if kind == "update":
        return (table, kind, pk, lib_update(op[2], "list", now0), op[3])
    return (table, kind, pk, None, op[2])


def lib_batch_results(results, table: str) -> list:
    """A library batch write's per-row results: ``(kind, *write_result)`` or ``(kind, "error",
    code)`` for rows of ``table``, ``("other", kind, outcome)`` for rows of another table."""
    return [(r.operation, *(write_result(r.result) if r.ok else error(r.error.code)))
            if r.table == table else ("other", r.operation, error(r.error.code) if r.error else "ok")
            for r in results]


# -- writes, shared by the sections ------------------------------------------------------------

COLS = ["c", "v"]
plain_values = st.one_of(st.sampled_from([0, 1, 5, -(2**63)]), st.sampled_from(["", "x"]))
maybe_slot = st.one_of(st.none(), st.integers(0, 4), st.integers(0, 4))


def cells_of(names, values) -> st.SearchStrategy:
    return st.lists(st.tuples(names, values, maybe_slot), min_size=1, max_size=3)


conditions = mostly(
    st.one_of(st.none(), st.none(),
              st.builds(Condition, st.sampled_from(list(RowExistence)))),
    st.builds(Condition, st.sampled_from(list(RowExistence)),
              st.builds(SingleColumnFilter, st.just("v"), st.sampled_from(["==", ">"]),
                        st.sampled_from([0, 1]), pass_if_missing=st.booleans())),
    6)


def update_parts(names, values):
    parts = {
        "put": st.lists(st.tuples(names, values, maybe_slot), min_size=1, max_size=2),
        "delete_column": st.lists(names, min_size=1, max_size=2, unique=True),
        "delete_version": st.lists(st.tuples(names, st.integers(0, 4)), min_size=1, max_size=1),
        "increment": st.dictionaries(st.just("n"), st.sampled_from([1, 2]), min_size=1),
    }
    return st.sampled_from(sorted(parts)).flatmap(
        lambda kind: st.builds(lambda one, rest: {**rest, kind: one}, parts[kind],
                               st.fixed_dictionaries({}, optional=parts)))


def writes(pks, names, values) -> st.SearchStrategy:
    """A put ``("put", pk, cells, cond)``, update ``("update", pk, parts, cond)`` or delete
    ``("delete", pk, cond)`` of the given keys, column names and values."""
    return st.one_of(
        st.tuples(st.just("put"), pks, cells_of(names, values), conditions),
        st.tuples(st.just("put"), pks, cells_of(names, values), conditions),
        st.tuples(st.just("update"), pks, update_parts(names, values), conditions),
        st.tuples(st.just("delete"), pks, conditions),
    )


def stamps_now(op: tuple) -> bool:
    """Whether a generated write may stamp a version with the store's clock."""
    if op[0] == "put":
        return any(s is None for _, _, s in op[2])
    if op[0] == "update":
        return "increment" in op[2] or any(s is None for _, _, s in op[2].get("put", ()))
    return False


def lib_write(table, op: tuple, now0: int) -> tuple:
    """Run a generated write on a library Table (or transaction)."""
    kind, pk = op[0], op[1]
    if kind == "put":
        return write_result(table.put_row(pk, lib_columns(op[2], "list", now0), op[3]))
    if kind == "update":
        return write_result(table.update_row(pk, condition=op[3],
                                             **lib_update(op[2], "list", now0)))
    return write_result(table.delete_row(pk, op[2]))


def sdk_write(sdk, table: str, op: tuple, now0: int, **extra) -> tuple:
    """Run a generated write with the SDK."""
    kind, pk = op[0], op[1]
    if kind == "put":
        _, row = sdk.put_row(table, SdkRow(sdk_key(pk), sdk_cells(op[2], "list", now0)),
                             sdk_condition(op[3]), return_type=ReturnType.RT_PK, **extra)
    elif kind == "update":
        _, row = sdk.update_row(table, SdkRow(sdk_key(pk), sdk_update(op[2], "list", now0)),
                                sdk_condition(op[3]), return_type=ReturnType.RT_PK, **extra)
    else:
        _, row = sdk.delete_row(table, SdkRow(sdk_key(pk)), sdk_condition(op[2]),
                                return_type=ReturnType.RT_PK, **extra)
    return sdk_written(row)


def everything(db, table: str, norm: Norm) -> list:
    """Every row of a library table (or index), every version."""
    return [norm.row(r) for r in db.table(table).scan(max_versions=2**31 - 1)]


def sdk_everything(sdk, table: str, names, norm: Norm) -> list:
    """``everything`` through the SDK (``names``: the key columns)."""
    n = len(names)
    rows = []
    for page_rows, _ in sdk_range_pages(sdk, table, names, (INF_MIN,) * n, (INF_MAX,) * n,
                                        "forward", None, max_version=2**31 - 1):
        rows += page_rows
    return [norm.sdk_row(r) for r in rows]


def no_bare_ignore(op: tuple) -> tuple:
    """``op`` with a condition that checks nothing (IGNORE, no column condition) as none.

    The embedded store's batch_write_row writes its plain puts first, in one engine batch,
    then the other rows one by one; a put whose condition checks nothing counts as
    conditional there, so it commits after the batch's deletes and updates, where the
    same put without a condition commits before them. Tablestore's protocol carries such a
    condition as none (and so does widetable's own, in the same message), so the stream's
    record order would differ by that alone (``table/batch.py``, reported)."""
    cond = op[-1]
    if (op[0] == "put" and cond is not None and cond.row_existence is RowExistence.IGNORE
            and cond.column_condition is None):
        return (*op[:-1], None)
    return op


# == 1. local transactions =====================================================================

PVS = ["p", "q"]  # partition-key values transactions take; "r" only plain writers use
SLOTS = st.sampled_from([0, 0, 1])
# Where a step runs (a transaction slot, or None: outside any) and the partition-key value
# its keys have: mostly the one the slot's transaction holds (slot 0 starts on "p", slot 1
# mostly on "q"), now and then another (refused in a transaction; a plain writer meeting a
# transaction's value waits 50 ms for it, then fails).
placed = st.sampled_from([(0, "p"), (0, "p"), (0, "p"), (1, "q"), (1, "q"), (0, "q"),
                          (1, "p"), (None, "p"), (None, "q"), (None, "r"), (None, "r")])


def txn_writes(pv: str) -> st.SearchStrategy:
    return writes(st.tuples(st.just(pv), st.integers(0, 2)), st.sampled_from(COLS), plain_values)


txn_read_options = st.fixed_dictionaries({}, optional={
    "columns": st.lists(st.sampled_from(["c", "v", "n"]), min_size=1, max_size=2, unique=True),
    "max_versions": st.sampled_from([1, 2]),
    "time_range": st.tuples(st.just("range"), st.sampled_from(["zero", 1]),
                            st.sampled_from([3, "far"])),
    "filter": st.builds(SingleColumnFilter, st.just("v"), st.sampled_from(["==", ">"]),
                        st.sampled_from([0, 1]), pass_if_missing=st.booleans()),
})
txn_steps = st.one_of(
    # Rarely a partition-key value of another type, a table that does not exist, or an
    # index (refused).
    mostly(st.sampled_from([("start", 1, "q"), ("start", 1, "q"), ("start", 0, "q"),
                            ("start", 1, "p"), ("start", 0, "p")]),
           st.one_of(st.tuples(st.just("start"), SLOTS, st.just(7)),
                     st.tuples(st.just("start_on"), SLOTS, st.sampled_from(["missing", "index"]))),
           8),
    *[placed.flatmap(lambda w: st.tuples(st.just("write"), st.just(w[0]), txn_writes(w[1])))] * 3,
    placed.flatmap(lambda w: st.tuples(st.just("get"), st.just(w[0]),
                                       st.tuples(st.just(w[1]), st.integers(0, 2)),
                                       txn_read_options)),
    placed.flatmap(lambda w: st.tuples(
        st.just("range"), st.just(w[0]), st.just(w[1]), st.sampled_from([False] * 5 + [True]),
        st.sampled_from(["forward", "backward"]), st.one_of(st.none(), st.integers(1, 2)))),
    placed.flatmap(lambda w: st.tuples(
        st.just("batch"), st.just(w[0]),
        st.lists(mostly(txn_writes(w[1]), txn_writes("q" if w[1] == "p" else "p"), 4)
                 .map(no_bare_ignore), min_size=1, max_size=3, unique_by=lambda op: op[1]),
        st.sampled_from(["", "", "", "missing"]))),
    st.tuples(st.sampled_from(["commit", "commit", "abort"]), SLOTS),
)
txn_sequences = st.lists(txn_steps, min_size=3, max_size=14).map(
    lambda rest: [("start", 0, "p"), *rest])
# A plain table; one with a LOCAL index on (a, c) ("c" a typed INTEGER column); one with a
# stream.
TXN_KINDS = st.sampled_from(["plain", "plain", "local", "stream"])


def txn_elsewhere(table: str, what: str) -> str:
    """A table no transaction takes: one that does not exist, or the table's LOCAL index
    (of a table of kind "local"; elsewhere no such index exists either)."""
    return MISSING if what == "missing" else table + "_by_c"


def txn_range_bounds(pv: str, across: bool, direction: str) -> tuple:
    """A range over partition-key value ``pv`` (or, ``across``, into the next one: refused in
    a transaction), in ``direction``'s order."""
    lo, hi = (pv, INF_MIN), (("q" if pv == "p" else "r", INF_MIN) if across else (pv, INF_MAX))
    return (lo, hi) if direction == "forward" else (hi, lo)


class TxnLibrary:
    """A table and its transactions on the embedded store or through widetable.connect."""

    def __init__(self, db, table: str, norm: Norm, remote: bool) -> None:
        self.db, self.name, self.norm, self.remote = db, table, norm, remote
        self.t = db.table(table)
        self.txns: dict = {}
        self.opened: list = []

    def _target(self, where):
        txn = self.txns.get(where) if where is not None else None
        return self.t if txn is None else txn

    def start(self, slot, pv, table=None):
        txn = self.db.start_local_transaction(table or self.name, pv)
        self.txns[slot] = txn
        self.opened.append(txn)
        return "started"

    def start_on(self, slot, what):
        return self.start(slot, "p", txn_elsewhere(self.name, what))

    def end(self, kind, slot):
        txn = self.txns.get(slot)
        if txn is None:
            return "no transaction"
        getattr(txn, kind)()
        return kind

    def write(self, where, op):
        return lib_write(self._target(where), op, self.norm.now0)

    def get(self, where, pk, opts):
        return self.norm.row(self._target(where).get_row(
            pk, **lib_read_options(opts, self.norm.now0)))

    def range(self, where, pv, across, direction, limit):
        start, end = txn_range_bounds(pv, across, direction)
        target = self._target(where)

        def page(at):
            got = target.get_range(at, end, direction, limit=limit)
            return [self.norm.row(r) for r in got.rows], got.next_start_primary_key
        return pages(page, start)

    def batch(self, where, ops, extra):
        items = [lib_item(self.name, op, self.norm.now0) for op in ops]
        if extra == "missing":
            items.append((MISSING, "delete", ("p", 0), None, None))
        txn = self.txns.get(where) if where is not None else None
        if txn is None:
            return lib_batch_results(self.db.batch_write_row(items), self.name)
        if self.remote:
            return lib_batch_results(
                self.db.batch_write_row(items, transaction_id=txn.transaction_id), self.name)
        return self._batch_in(txn, items)

    def _batch_in(self, txn, items) -> list:
        """The embedded store's batch in a transaction: each row as the same row call in the
        transaction; a row of another table is outside it, one of a table that does not
        exist fails as outside a transaction. An ended transaction fails the whole batch,
        one that ends under it (timed out) too."""
        self.db.transaction(txn.transaction_id)
        out = []
        for table, kind, pk, payload, cond in items:
            try:
                self.db.table(table)
                if table != self.name:
                    raise ParameterInvalid(f"{table!r} is not in the transaction")
                if kind == "put":
                    result = write_result(txn.put_row(pk, payload, cond))
                elif kind == "update":
                    result = write_result(txn.update_row(pk, condition=cond, **payload))
                else:
                    result = write_result(txn.delete_row(pk, cond))
                out.append((kind, *result))
            except WidetableError as exc:
                if exc.code == "OTSSessionNotExist":
                    raise
                out.append((kind, *error(exc.code)) if table == self.name
                           else ("other", kind, error(exc.code)))
        return out

    def close(self) -> None:
        """Abort every transaction still open (the example's end)."""
        for txn in self.opened:
            if txn.state == "active":
                try:
                    txn.abort()
                except WidetableError:
                    pass  # ended on the server meanwhile
        self.opened.clear()

    def rows(self):
        return everything(self.db, self.name, self.norm)


class TxnSdk:
    """The same through the official SDK (transaction ids, ``transaction_id=`` on calls)."""

    def __init__(self, sdk, table: str, norm: Norm) -> None:
        self.c, self.name, self.norm = sdk, table, norm
        self.txns: dict = {}
        self.opened: list = []

    def _tid(self, where) -> dict:
        tid = self.txns.get(where) if where is not None else None
        return {} if tid is None else {"transaction_id": tid}

    def start(self, slot, pv, table=None):
        tid = self.c.start_local_transaction(table or self.name, [("a", pv)])
        self.txns[slot] = tid
        self.opened.append(tid)
        return "started"

    def start_on(self, slot, what):
        return self.start(slot, "p", txn_elsewhere(self.name, what))

    def end(self, kind, slot):
        tid = self.txns.get(slot)
        if tid is None:
            return "no transaction"
        getattr(self.c, f"{kind}_transaction")(tid)
        return kind

    def write(self, where, op):
        return sdk_write(self.c, self.name, op, self.norm.now0, **self._tid(where))

    def get(self, where, pk, opts):
        _, row, _ = self.c.get_row(self.name, sdk_key(pk), **sdk_read_options(
            opts, self.norm.now0), **self._tid(where))
        return self.norm.sdk_row(row)

    def range(self, where, pv, across, direction, limit):
        start, end = txn_range_bounds(pv, across, direction)
        got = sdk_range_pages(self.c, self.name, ("a", "b"), start, end, direction, limit,
                              max_version=1, **self._tid(where))
        return [([self.norm.sdk_row(r) for r in rows], nxt) for rows, nxt in got]

    def batch(self, where, ops, extra):
        req = BatchWriteRowRequest()
        req.add(TableInBatchWriteRowItem(self.name, [sdk_item(op, self.norm.now0) for op in ops]))
        if extra == "missing":
            req.add(TableInBatchWriteRowItem(MISSING, [DeleteRowItem(
                SdkRow(sdk_key(("p", 0))), sdk_condition(None))]))
        tid = self._tid(where).get("transaction_id")
        if tid is not None:
            req.set_transaction_id(tid)
        res = self.c.batch_write_row(req)
        out = sdk_batch_results(res, self.name, [op[0] for op in ops], sdk_written)
        if extra == "missing":
            item = res.get_delete_by_table(MISSING)[0]
            out.append(("other", "delete", "ok" if item.is_ok else error(item.error_code)))
        return out

    def close(self) -> None:
        """Abort every transaction still open (the example's end)."""
        for tid in self.opened:
            try:
                self.c.abort_transaction(tid)
            except OTSServiceError:
                pass  # ended already
        self.opened.clear()

    def rows(self):
        return sdk_everything(self.c, self.name, ("a", "b"), self.norm)


def make_txn_tables(wire: Wire, names: dict, kind: str) -> None:
    """The example's table on every path (the SDK's made through widetable.connect: the SDK
    cannot ask for a stream)."""
    options: dict = {}
    if kind == "local":
        options["defined_columns"] = [("c", "INTEGER")]
    if kind == "stream":
        options["stream"] = True
    for path, db in (("embedded", wire.embedded), ("native", wire.native),
                     ("tablestore", wire.tablestore), ("sdk", wire.native)):
        db.create_table(names[path], PK, **options)
        if kind == "local":
            db.create_index(names[path], names[path] + "_by_c", ["a", "c"], index_type="LOCAL")


def stream_records(db, table: str, norm: Norm) -> list:
    """Every record of the table's stream (one shard here), normalised."""
    (stream,) = db.list_stream(table)
    out = []
    for shard in db.describe_stream(stream.stream_id).shards:
        it = db.get_shard_iterator(stream.stream_id, shard.shard_id)
        while it is not None:
            page = db.get_stream_record(it, 100)
            out += [record_shape(r, norm) for r in page.records]
            if not page.records:
                break
            it = page.next_iterator
    return out


def record_shape(r, norm: Norm) -> tuple:
    """A stream record without its sequence number and commit time (the stores' own)."""
    return (r.operation, tuple(r.primary_key),
            tuple((c.name, c.kind, None if c.value is None else norm_value(c.value),
                   None if c.timestamp is None else norm.ts(c.timestamp)) for c in r.columns))


def check_transactions(wire: Wire, kind: str, steps: list) -> None:
    names = fresh_names()
    make_txn_tables(wire, names, kind)
    norm = Norm(now_ms())
    runners = {
        "embedded": TxnLibrary(wire.embedded, names["embedded"], norm, remote=False),
        "native": TxnLibrary(wire.native, names["native"], norm, remote=True),
        "tablestore": TxnLibrary(wire.tablestore, names["tablestore"], norm, remote=True),
        "sdk": TxnSdk(wire.sdk, names["sdk"], norm),
    }
    # The SDK's table is read through widetable.connect where the SDK has no call for it.
    readers = {"embedded": wire.embedded, "native": wire.native, "tablestore": wire.tablestore,
               "sdk": wire.native}
    try:
        for i, step in enumerate(steps):
            op = step[0]
            results = run_everywhere(runners, step)
            if op == "write" and stamps_now(step[2]) or op == "batch":
                time.sleep(0.002)  # the next write stamped NOW gets a later ms on every path
            where = "in" if op in ("start", "start_on", "commit", "abort") or step[1] is not None \
                else "out"
            event(f"transactions: {op} {where} -> {outcome(results['embedded'])}")
            agree(results, (i, step))
        for r in runners.values():
            r.close()
        agree({p: r.rows() for p, r in runners.items()}, "rows at the end")
        if kind == "local":
            agree({p: everything(db, names[p] + "_by_c", norm) for p, db in readers.items()},
                  "the local index at the end")
        if kind == "stream":
            agree({p: stream_records(db, names[p], norm) for p, db in readers.items()},
                  "the stream at the end")
    finally:
        for r in runners.values():
            r.close()
        wire.embedded.delete_table(names["embedded"])
        for path in ("native", "tablestore", "sdk"):
            wire.native.delete_table(names[path])


@feature_settings(40)
@given(kind=TXN_KINDS, steps=txn_sequences)
def test_transactions_agree_with_the_embedded_store(wire, kind, steps) -> None:
    check_transactions(wire, kind, steps)


# -- a transaction idle past its timeout -------------------------------------------------------
# The protocol carries no timeout (the server's is 60 s), so the server runs in this process
# and the test ages its transaction, as it ages the embedded store's.

AFTER_EXPIRY = [
    ("get", 0, ("p", 0), {}), ("write", 0, ("put", ("p", 3), [("v", 9, None)], None)),
    ("batch", 0, [("delete", ("p", 0), None)], ""), ("commit", 0), ("abort", 0),
    ("write", None, ("put", ("p", 2), [("v", 7, 1)], None)), ("start", 1, "p"),
]


@pytest.mark.parametrize("first", AFTER_EXPIRY, ids=lambda s: f"{s[0]}-{s[1]}")
def test_a_transaction_idle_past_its_timeout_ends_alike_everywhere(wire, in_process, first):
    """Whatever meets an idle transaction first (a call in it, its commit or abort, a plain
    writer or another transaction on its value) finds it ended: OTSSessionNotExist for the
    transaction's calls, its value free for others, and none of its writes committed."""
    served, server = in_process
    remote = {p: widetable.connect(server.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                                   access_key_secret=serving.ACCESS_KEY_SECRET, protocol=p)
              for p in ("native", "tablestore")}
    sdk = serving.official_client(server.endpoint, "v2", "widetable-differential-timeout",
                                  retry_policy=NoRetryPolicy())
    names = fresh_names()
    wire.embedded.create_table(names["embedded"], PK)
    for path in ("native", "tablestore", "sdk"):
        remote["native"].create_table(names[path], PK)
    norm = Norm(now_ms())
    runners = {
        "embedded": TxnLibrary(wire.embedded, names["embedded"], norm, remote=False),
        "native": TxnLibrary(remote["native"], names["native"], norm, remote=True),
        "tablestore": TxnLibrary(remote["tablestore"], names["tablestore"], norm, remote=True),
        "sdk": TxnSdk(sdk, names["sdk"], norm),
    }
    stores = {"embedded": wire.embedded, "native": served, "tablestore": served, "sdk": served}
    steps = [("write", None, ("put", ("p", 0), [("v", 1, 0)], None)), ("start", 0, "p"),
             ("write", 0, ("put", ("p", 1), [("v", 2, 1)], None)),
             ("write", 0, ("update", ("p", 0), {"put": [("v", 3, 2)]}, None)),
             "age", first, *AFTER_EXPIRY, ("start", 1, "p"), ("commit", 1)]
    try:
        for i, step in enumerate(steps):
            if step == "age":
                for path, r in runners.items():
                    txn = r.txns[0]
                    tid = txn if isinstance(txn, str) else txn.transaction_id
                    stores[path].transaction(tid)._deadline = time.monotonic() - 1
                continue
            agree(run_everywhere(runners, step), (i, step))
        agree({p: r.rows() for p, r in runners.items()}, "rows at the end")
    finally:
        for r in runners.values():
            r.close()
        for client in remote.values():
            client.close()
        wire.embedded.delete_table(names["embedded"])


# == 2. secondary indexes ======================================================================

DEFINED = [("c", "STRING"), ("d", "INTEGER"), ("e", "BINARY"), ("f", "DOUBLE")]
INDEX_COLS = ["c", "d", "e", "f", "g"]  # "g" is no predefined column
KEY_VALUES = {"a": ["x", "y"], "b": [0, 1, 2], "c": ["m", "n", ""], "d": [-1, 0, 5],
              "e": [b"", b"k"]}
CELL_VALUES = {"c": ["m", "n", ""], "d": [-1, 0, 5], "e": [b"", b"k"], "f": [1.5, -0.0],
               "g": [1, "m"]}
# Now and then a value of another type than the column's predefined one (refused).
ix_cells = st.lists(st.sampled_from(INDEX_COLS).flatmap(lambda n: st.tuples(
    st.just(n), mostly(st.sampled_from(CELL_VALUES[n]), st.sampled_from([7, "z"]), 15),
    maybe_slot)), min_size=1, max_size=4)
ix_pks = st.tuples(st.sampled_from(KEY_VALUES["a"]), st.sampled_from(KEY_VALUES["b"]))
_ix_parts = {
    "put": ix_cells, "delete_column": st.lists(st.sampled_from(INDEX_COLS), min_size=1,
                                               max_size=2, unique=True),
    "increment": st.dictionaries(st.just("d"), st.sampled_from([1, -1]), min_size=1),
}
ix_parts = st.sampled_from(sorted(_ix_parts)).flatmap(
    lambda kind: st.builds(lambda one, rest: {**rest, kind: one}, _ix_parts[kind],
                           st.fixed_dictionaries({}, optional=_ix_parts)))
ix_writes = st.one_of(
    st.tuples(st.just("put"), ix_pks, ix_cells, conditions),
    st.tuples(st.just("put"), ix_pks, ix_cells, st.none()),
    st.tuples(st.just("update"), ix_pks, ix_parts, conditions),
    st.tuples(st.just("delete"), ix_pks, st.none()),
)
GLOBAL_KEYS = [["c"], ["d"], ["e"], ["d", "c"], ["c", "b"], ["b"], ["a", "d"]]
LOCAL_KEYS = [["a", "d"], ["a", "c"], ["a", "e"], ["a"], ["a", "d", "c"]]
BAD_KEYS = [["f"], ["g"], [], ["c", "c"], ["d", "a"]]  # DOUBLE, undeclared, none, twice, ...


@st.composite
def index_specs(draw, valid: bool = False) -> dict:
    """create_index arguments: mostly valid for their type, now and then (unless ``valid``)
    not: a key or defined column that cannot be one, a LOCAL index not led by the partition
    key, a name that is taken or no name."""
    kind = draw(st.sampled_from(["GLOBAL", "GLOBAL", "LOCAL"]))
    keys = st.sampled_from(GLOBAL_KEYS if kind == "GLOBAL" else LOCAL_KEYS)
    key = draw(keys if valid else mostly(keys, st.sampled_from(BAD_KEYS + GLOBAL_KEYS), 6))
    free = [c for c in ("c", "d", "e", "f") if c not in key]
    defined = st.lists(st.sampled_from(free), unique=True, max_size=2) if free else st.just([])
    if not valid:
        defined = mostly(defined, st.sampled_from([["g"], ["c", "c"], key[:1]]), 10)
    return {"index": 0 if valid else draw(mostly(st.integers(0, 2), st.just("bad-name"), 15)),
            "kind": kind, "primary_key": key, "defined_columns": draw(defined),
            "include_base_data": draw(st.booleans()),
            # Rarely on a table that does not exist, or on an index (refused).
            "on": None if valid else draw(mostly(st.none(), st.sampled_from(["missing", 0]), 15))}


def index_base(table: str, on: object) -> str:
    """The table a create_index names: the example's, one that does not exist, or an index."""
    return table if on is None else MISSING if on == "missing" else index_name(table, on)


def index_name(table: str, index: object) -> str:
    return f"{table}_i{index}" if isinstance(index, int) else str(index)


def index_key_names(spec: dict) -> list[str]:
    """An index's whole key: its columns, then the base key columns it lacks."""
    return [*spec["primary_key"], *(n for n in ("a", "b") if n not in spec["primary_key"])]


def index_shape(description) -> list:
    """describe_table's index list, without lag (eventual, and absent over Tablestore's
    protocol) and with the path's suffix taken out of the names."""
    return [(i.name.rsplit("_i", 1)[-1], i.index_type, tuple(i.primary_key),
             tuple(i.defined_columns)) for i in description.indexes]


class IndexLibrary:
    """A table with indexes on the embedded store or through widetable.connect."""

    def __init__(self, db, table: str, norm: Norm) -> None:
        self.db, self.name, self.norm = db, table, norm
        self.t = db.table(table)

    def write(self, op):
        return lib_write(self.t, op, self.norm.now0)

    def batch(self, ops, to_index):
        items = [lib_item(self.name, op, self.norm.now0) for op in ops]
        if to_index is not None:
            items.append((index_name(self.name, to_index), "delete", ("m", "x", 0), None, None))
        return lib_batch_results(self.db.batch_write_row(items), self.name)

    def create(self, spec):
        self.db.create_index(index_base(self.name, spec["on"]),
                             index_name(self.name, spec["index"]), spec["primary_key"],
                             spec["defined_columns"], spec["kind"], spec["include_base_data"])
        return "created"

    def drop(self, index):
        self.db.drop_index(self.name, index_name(self.name, index))
        return "dropped"

    def describe(self):
        return index_shape(self.db.describe_table(self.name))

    def describe_index(self, index):
        d = self.db.describe_table(index_name(self.name, index))
        return (d.primary_key, d.options.max_versions, d.options.ttl)

    def _index(self, index):
        return self.db.table(index_name(self.name, index))

    def get(self, index, pk, opts, fetch_base):
        extra = {"fetch_base": True} if fetch_base else {}
        return self.norm.row(self._index(index).get_row(
            pk, **lib_read_options(opts, self.norm.now0), **extra))

    def range(self, index, start, end, direction, limit, opts, fetch_base):
        view = self._index(index)
        extra = {"fetch_base": True} if fetch_base else {}
        options = lib_read_options(opts, self.norm.now0)

        def page(at):
            got = view.get_range(at, end, direction, limit=limit, **options, **extra)
            return [self.norm.row(r) for r in got.rows], got.next_start_primary_key
        return pages(page, start)

    def scan(self, index, direction, fetch_base):
        extra = {"fetch_base": True} if fetch_base else {}
        return [self.norm.row(r) for r in self._index(index).scan(direction=direction,
                                                                  page_size=2, **extra)]

    def batch_get(self, index, keys):
        name = index_name(self.name, index)
        return [(r.primary_key, self.norm.row(r.row)) if r.ok else error(r.error.code)
                for r in self.db.batch_get_row([(name, pk) for pk in keys])]

    def write_index(self, index, kind):
        view = self._index(index)
        if kind == "put":
            return write_result(view.put_row(("m", "x", 0), {"d": 1}))
        if kind == "update":
            return write_result(view.update_row(("m", "x", 0), put={"d": 1}))
        return write_result(view.delete_row(("m", "x", 0)))


class IndexSdk:
    """The same through the official SDK (which reads an index by its name, without the
    option to fetch base rows)."""

    def __init__(self, sdk, table: str, norm: Norm, specs: dict) -> None:
        self.c, self.name, self.norm = sdk, table, norm
        self.specs = specs  # index -> its spec, as created on the reference: its key names

    def write(self, op):
        return sdk_write(self.c, self.name, op, self.norm.now0)

    def batch(self, ops, to_index):
        req = BatchWriteRowRequest()
        req.add(TableInBatchWriteRowItem(self.name, [sdk_item(op, self.norm.now0) for op in ops]))
        iname = None if to_index is None else index_name(self.name, to_index)
        if iname is not None:
            req.add(TableInBatchWriteRowItem(iname, [DeleteRowItem(
                SdkRow(sdk_positional_key(self._names(to_index), ("m", "x", 0))),
                sdk_condition(None))]))
        res = self.c.batch_write_row(req)
        out = sdk_batch_results(res, self.name, [op[0] for op in ops], sdk_written)
        if iname is not None:
            item = res.get_delete_by_table(iname)[0]
            out.append(("other", "delete", "ok" if item.is_ok else error(item.error_code)))
        return out

    def create(self, spec):
        kind = (SecondaryIndexType.GLOBAL_INDEX if spec["kind"] == "GLOBAL"
                else SecondaryIndexType.LOCAL_INDEX)
        meta = SecondaryIndexMeta(index_name(self.name, spec["index"]), spec["primary_key"],
                                  spec["defined_columns"], kind)
        self.c.create_secondary_index(index_base(self.name, spec["on"]), meta,
                                      spec["include_base_data"])
        return "created"

    def drop(self, index):
        self.c.delete_secondary_index(self.name, index_name(self.name, index))
        return "dropped"

    def describe(self):
        kinds = {SecondaryIndexType.GLOBAL_INDEX: "GLOBAL", SecondaryIndexType.LOCAL_INDEX: "LOCAL"}
        return [(i.index_name.rsplit("_i", 1)[-1], kinds[i.index_type],
                 tuple(i.primary_key_names), tuple(i.defined_column_names))
                for i in self.c.describe_table(self.name).secondary_indexes]

    def describe_index(self, index):
        d = self.c.describe_table(index_name(self.name, index))
        return (list(d.table_meta.schema_of_primary_key), d.table_options.max_version,
                d.table_options.time_to_live)

    def _names(self, index):
        spec = self.specs.get(index)
        return index_key_names(spec) if spec else ["c", "a", "b"]

    def get(self, index, pk, opts, fetch_base):
        _, row, _ = self.c.get_row(index_name(self.name, index),
                                   sdk_named_key(self._names(index), pk),
                                   **sdk_read_options(opts, self.norm.now0))
        return self.norm.sdk_row(row)

    def range(self, index, start, end, direction, limit, opts, fetch_base):
        got = sdk_range_pages(self.c, index_name(self.name, index), self._names(index), start,
                              end, direction, limit, **sdk_read_options(opts, self.norm.now0))
        return [([self.norm.sdk_row(r) for r in rows], nxt) for rows, nxt in got]

    def scan(self, index, direction, fetch_base):
        n = len(self._names(index))
        lo, hi = (INF_MIN,) * n, (INF_MAX,) * n
        start, end = (lo, hi) if direction == "forward" else (hi, lo)
        out = []
        at = start
        while at is not None:
            _, nxt, rows, _ = self.c.get_range(
                index_name(self.name, index), direction.upper(),
                sdk_named_key(self._names(index), at), sdk_named_key(self._names(index), end),
                limit=2, max_version=1)
            out += [self.norm.sdk_row(r) for r in rows]
            at = None if nxt is None else tuple(v for _, v in nxt)
        return out

    def batch_get(self, index, keys):
        req = BatchGetRowRequest()
        names = self._names(index)
        req.add(TableInBatchGetRowItem(index_name(self.name, index),
                                       [sdk_named_key(names, pk) for pk in keys], max_version=1))
        res = self.c.batch_get_row(req)
        return [(tuple(pk), self.norm.sdk_row(item.row)) if item.is_ok
                else error(item.error_code)
                for pk, item in zip(keys, res.get_result_by_table(index_name(self.name, index)),
                                    strict=True)]

    def write_index(self, index, kind):
        key = sdk_positional_key(self._names(index), ("m", "x", 0))
        iname = index_name(self.name, index)
        if kind == "put":
            _, row = self.c.put_row(iname, SdkRow(key, [("d", 1)]), return_type=ReturnType.RT_PK)
        elif kind == "update":
            _, row = self.c.update_row(iname, SdkRow(key, {"PUT": [("d", 1)]}), sdk_condition(None),
                                       return_type=ReturnType.RT_PK)
        else:
            _, row = self.c.delete_row(iname, SdkRow(key), sdk_condition(None),
                                       return_type=ReturnType.RT_PK)
        return sdk_written(row)


def settle(wire: Wire, names: dict) -> None:
    """Wait until every global index of the example's tables has applied every write: the
    embedded store's ``wait_for_indexes``, and remotely until ``describe_table`` reports no
    lag (a record 3 ms old unapplied would show a lag of 3 ms at least)."""
    settle_one(wire, wire.embedded, names["embedded"])
    for path in ("native", "tablestore", "sdk"):
        settle_one(wire, wire.native, names[path])


def index_bounds(names: list[str], first: object, direction: str) -> tuple:
    """The whole index, or (``first`` given) the entries whose first key column is it, in
    ``direction``'s order."""
    n = len(names)
    if first is None:
        lo, hi = (INF_MIN,) * n, (INF_MAX,) * n
    else:
        lo, hi = (first,) + (INF_MIN,) * (n - 1), (first,) + (INF_MAX,) * (n - 1)
    return (lo, hi) if direction == "forward" else (hi, lo)


def check_indexes(wire: Wire, data, max_versions: int) -> None:
    names = fresh_names()
    for path, db in (("embedded", wire.embedded), ("native", wire.native),
                     ("tablestore", wire.tablestore)):
        db.create_table(names[path], PK, max_versions=max_versions, defined_columns=DEFINED)
    wire.sdk.create_table(TableMeta(names["sdk"], PK, DEFINED),
                          TableOptions(max_version=max_versions),
                          ReservedThroughput(CapacityUnit(0, 0)))
    norm = Norm(now_ms())
    specs: dict = {}  # index -> spec, of the indexes the reference has now
    runners = {
        "embedded": IndexLibrary(wire.embedded, names["embedded"], norm),
        "native": IndexLibrary(wire.native, names["native"], norm),
        "tablestore": IndexLibrary(wire.tablestore, names["tablestore"], norm),
        "sdk": IndexSdk(wire.sdk, names["sdk"], norm, specs),
    }
    dirty = False
    # Rows first, then an index (its base data backfilled or not), then anything.
    first = [("batch", data.draw(st.lists(ix_writes, min_size=1, max_size=4,
                                          unique_by=lambda op: op[1]), label="rows"), None),
             ("create", data.draw(index_specs(valid=True), label="first index"))]
    try:
        for i in range(data.draw(st.integers(3, 14), label="steps") + len(first)):
            kind = "given" if i < len(first) else data.draw(st.sampled_from(
                ["write"] * 8 + ["batch"] * 2 + ["create"] * 2 + ["drop"] + ["describe"] * 2
                + ["read"] * 12 + ["write_index"]), label=f"step {i}")
            # An index there is, mostly; now and then one there is not (any more).
            index = data.draw(mostly(st.sampled_from(sorted(specs, key=str)), st.integers(0, 2),
                                     8) if specs else st.integers(0, 2), label="index")
            if kind == "given":
                step: tuple = first[i]
            elif kind == "write":
                step = ("write", data.draw(ix_writes, label="write"))
            elif kind == "batch":
                step = ("batch", data.draw(st.lists(ix_writes, min_size=1, max_size=3,
                                                    unique_by=lambda op: op[1])),
                        data.draw(mostly(st.none(), st.just(index), 4)))
            elif kind == "create":
                step = ("create", data.draw(index_specs(), label="spec"))
            elif kind == "drop":
                step = ("drop", index)
            elif kind == "describe":
                step = data.draw(st.sampled_from([("describe",), ("describe_index", index)]))
            elif kind == "write_index":
                step = ("write_index", index, data.draw(st.sampled_from(["put", "update",
                                                                         "delete"])))
            else:
                step = read_step(data, index, specs)
            if step[0] not in ("write", "batch", "create", "drop") and dirty:
                settle(wire, names)
                dirty = False
            # fetch_base: a read of base rows, which Tablestore (and its SDK) has not
            fetch_base = step[0] in ("get", "range", "scan") and step[-1] is True
            results = run_everywhere(runners, step, ("sdk",) if fetch_base else ())
            event(f"indexes: {step[0]}{' fetch_base' if fetch_base else ''} -> "
                  f"{outcome(results['embedded'])}")
            agree(results, (i, step))
            if step[0] == "create" and results["embedded"] == "created":
                specs[step[1]["index"]] = step[1]
            if step[0] == "drop" and results["embedded"] == "dropped":
                del specs[step[1]]
            if step[0] in ("write", "batch", "create"):
                dirty = True
            if stamps_now(step[1]) if step[0] == "write" else step[0] == "batch":
                time.sleep(0.002)
        settle(wire, names)
        for index, spec in specs.items():
            agree(run_everywhere(runners, ("scan", index, "forward", False)),
                  f"index {index} ({spec}) at the end")
    finally:
        wire.embedded.delete_table(names["embedded"])
        for path in ("native", "tablestore", "sdk"):
            wire.native.delete_table(names[path])


# Read options (as test_differential's, of this table's columns): with fetch_base the
# version options read the index entry and the base row, the others the base row only.
ix_read_options = st.fixed_dictionaries({}, optional={
    "columns": st.lists(st.sampled_from(["c", "d", "e", "f", "g", "a"]), min_size=1,
                        max_size=2, unique=True),
    "max_versions": st.sampled_from([1, 2]),
    "time_range": st.one_of(st.tuples(st.just("at"), st.integers(0, 4)),
                            st.tuples(st.just("range"), st.sampled_from(["zero", 0, 2]),
                                      st.sampled_from([3, "after", "far"]))),
    "filter": st.builds(SingleColumnFilter, st.sampled_from(["d", "c"]),
                        st.sampled_from(["==", ">", "<="]), st.sampled_from([0, "m"]),
                        pass_if_missing=st.booleans()),
})


def read_step(data, index: object, specs: dict) -> tuple:
    """A read of index ``index``: its key columns are those of its spec (a made-up key of
    three columns if there is no such index: every path then says it does not exist)."""
    spec = specs.get(index)
    key_names = index_key_names(spec) if spec else ["c", "a", "b"]
    keys = st.tuples(*(st.sampled_from(KEY_VALUES[n]) for n in key_names))
    fetch_base = st.sampled_from([False, False, True])
    kind = data.draw(st.sampled_from(["get", "range", "range", "scan", "batch_get"]))
    if kind == "get":
        return ("get", index, data.draw(keys), data.draw(ix_read_options), data.draw(fetch_base))
    if kind == "scan":
        return ("scan", index, data.draw(st.sampled_from(["forward", "backward"])),
                data.draw(fetch_base))
    if kind == "batch_get":
        return ("batch_get", index, data.draw(st.lists(keys, min_size=1, max_size=3)))
    direction = data.draw(st.sampled_from(["forward", "backward"]))
    first = data.draw(st.one_of(st.none(), st.sampled_from(KEY_VALUES[key_names[0]])))
    start, end = index_bounds(key_names, first, direction)
    return ("range", index, start, end, direction,
            data.draw(st.one_of(st.none(), st.integers(1, 3))), data.draw(ix_read_options),
            data.draw(fetch_base))


@feature_settings(60)
@given(data=st.data(), max_versions=st.sampled_from([1] * 9 + [2]))  # 2: no index takes it
def test_indexes_agree_with_the_embedded_store(wire, data, max_versions) -> None:
    check_indexes(wire, data, max_versions)


# == 3. streams ================================================================================
# The SDK has no stream calls: the library's three paths. Over Tablestore's protocol a shard
# iterator starts at TRIM_HORIZON only (OTSNotSupported otherwise, a documented limit).


stream_pks = st.tuples(st.sampled_from(["a", "n", "z"]), st.integers(0, 1))  # "m" splits them
stream_writes = writes(stream_pks, st.sampled_from(COLS), plain_values)
limits = mostly(st.integers(1, 4), st.sampled_from([0, 1001]), 15)  # rarely out of 1-1000
stream_steps = st.one_of(
    *[st.tuples(st.just("write"), stream_writes)] * 4,
    st.tuples(st.just("batch"), st.lists(stream_writes.map(no_bare_ignore), min_size=1,
                                         max_size=3, unique_by=lambda op: op[1])),
    *[st.tuples(st.just("read"), st.integers(0, 1), limits)] * 2,
    st.tuples(st.just("position"), st.integers(0, 1),
              st.one_of(st.just("LATEST"), st.integers(0, 3)), st.integers(1, 4)),
    st.sampled_from([("toggle",), ("describe_stream",), ("list_stream",), ("bad_shard",)]),
    st.tuples(st.just("retention"), mostly(st.sampled_from([3600, 7200, 86400 * 7]),
                                           st.sampled_from([0, -3600]), 6)),
)


class StreamLibrary:
    """A table with a stream, and readers of its shards (an iterator each, kept between
    steps, and the sequence numbers they have read)."""

    def __init__(self, db, table: str, norm: Norm, over_tablestore: bool) -> None:
        self.db, self.name, self.norm = db, table, norm
        self.over_tablestore = over_tablestore
        self.t = db.table(table)
        self.iters: dict[int, str | None] = {}
        self.seen: dict[int, list[int]] = {}

    def _stream(self):
        (stream,) = self.db.list_stream(self.name)
        return stream.stream_id

    def _shard(self, which: int) -> int:
        shards = self.db.describe_stream(self._stream()).shards
        return shards[which % len(shards)].shard_id

    def write(self, op):
        return lib_write(self.t, op, self.norm.now0)

    def batch(self, ops):
        items = [lib_item(self.name, op, self.norm.now0) for op in ops]
        return lib_batch_results(self.db.batch_write_row(items), self.name)

    def _page(self, it: str, limit: int, shard: int) -> tuple:
        page = self.db.get_stream_record(it, limit)
        seqs = [r.sequence for r in page.records]
        assert seqs == sorted(set(seqs)), f"sequence numbers out of order: {seqs}"
        self.seen.setdefault(shard, []).extend(seqs)
        return page, [record_shape(r, self.norm) for r in page.records]

    def read(self, which, limit):
        shard = self._shard(which)
        it = self.iters.get(shard)
        if it is None:
            it = self.db.get_shard_iterator(self._stream(), shard, "TRIM_HORIZON")
        try:
            page, records = self._page(it, limit, shard)
        except WidetableError as exc:
            if exc.code == "OTSObjectNotExist":
                self.iters[shard] = None  # the stream was made anew: read it from its start
            raise
        self.iters[shard] = page.next_iterator
        return records, page.next_iterator is None

    def position(self, which, at, limit):
        """A page from an iterator at LATEST, or at the ``at``-th record this reader has read
        of the shard (its own sequence number: the stores number apart)."""
        shard = self._shard(which)
        seen = self.seen.get(shard, [])
        if at != "LATEST" and at >= len(seen):
            return "not read yet"
        position = "LATEST" if at == "LATEST" else seen[at]
        it = self.db.get_shard_iterator(self._stream(), shard, position)
        return self._page(it, limit, shard)[1]

    def toggle(self):
        self.db.update_table(self.name, stream=False)
        off = self.db.list_stream(self.name)
        self.db.update_table(self.name, stream=True)
        return off, self.list_stream()

    def retention(self, seconds):
        return self.db.update_table(self.name, stream_retention=seconds).stream_retention

    def list_stream(self):
        """The table's streams: whether their id names the table, and whether it is a stream
        made anew (ids hold the stores' own table ids and sequence numbers)."""
        return [(s.table == self.name, s.stream_id.startswith(self.name + "/"),
                 s.stream_id.count("/")) for s in self.db.list_stream(self.name)]

    def describe_stream(self):
        d = self.db.describe_stream(self._stream())
        return (d.table == self.name, d.status, d.retention,
                [(s.shard_id, s.parents, s.children, s.closed) for s in d.shards])

    def bounds(self):
        """Each shard's key range: not carried over Tablestore's protocol."""
        return [(s.start, s.end) for s in self.db.describe_stream(self._stream()).shards]

    def bad_shard(self):
        return self.db.get_shard_iterator(self._stream(), 99)

    def drain(self, limit: int) -> list:
        """Every record of every shard from TRIM_HORIZON, in pages of ``limit``."""
        out = []
        stream = self._stream()
        for shard in self.db.describe_stream(stream).shards:
            it, records = self.db.get_shard_iterator(stream, shard.shard_id), []
            while it is not None:
                page, got = self._page(it, limit, shard.shard_id)
                records += got
                if not got:
                    break
                it = page.next_iterator
            out.append((shard.shard_id, records))
        return out


def check_streams(wire: Wire, options: dict, steps: list, drain_limit: int) -> None:
    names = fresh_names()
    for path, db in wire.library().items():
        db.create_table(names[path], PK, stream=True, **options)
    norm = Norm(now_ms())
    runners = {path: StreamLibrary(db, names[path], norm, path == "tablestore")
               for path, db in wire.library().items()}
    try:
        for i, step in enumerate(steps):
            if step[0] == "position":
                results = run_everywhere(runners, step, ("tablestore",))
                # Over Tablestore's protocol only TRIM_HORIZON: a documented limit.
                got = attempt(functools.partial(call_step, runners["tablestore"], step))
                assert got in (error("OTSNotSupported"), "not read yet"), got
            else:
                results = run_everywhere(runners, step)
            event(f"streams: {step[0]} -> {outcome(results['embedded'])}")
            agree(results, (i, step))
            if step[0] in ("write", "batch"):
                time.sleep(0.002)  # the next write stamped NOW gets a later ms on every path
        agree(run_everywhere(runners, ("drain", drain_limit)), "records at the end")
        agree(run_everywhere(runners, ("describe_stream",)), "shards at the end")
        agree(run_everywhere(runners, ("bounds",), ("tablestore",)), "shard bounds at the end")
    finally:
        for path, db in wire.library().items():
            db.delete_table(names[path])


stream_options = st.fixed_dictionaries({
    "max_versions": st.sampled_from([1, 3]),
    "split_points": st.sampled_from([None, None, ["m"]]),  # two shards
    "stream_retention": st.sampled_from([3600, 86400]),
})


@feature_settings(80)
@given(options=stream_options, steps=st.lists(stream_steps, min_size=2, max_size=16),
       drain_limit=st.integers(1, 5))
def test_streams_agree_with_the_embedded_store(wire, options, steps, drain_limit) -> None:
    check_streams(wire, options, steps, drain_limit)


# == 4. catalog ================================================================================

AUTO = widetable.AUTO_INCREMENT
MAX_RETENTION = (2**31 - 1) * 3600
# Primary keys: valid ones (type names in any case, auto-increment in each form the store
# takes), and now and then one the store refuses.
good_keys = st.sampled_from([
    [("a", "STRING")], [("a", "STRING"), ("b", "INTEGER")], [("a", "INTEGER")],
    [("a", "BINARY"), ("b", "INTEGER"), ("c", "STRING"), ("d", "INTEGER")],
    [("a", "STRING"), ("b", "INTEGER", AUTO)], [("a", "string"), ("b", "Integer")],
    [("a", "STRING"), ("b", AUTO)], [("a", "STRING"), ("b", "INTEGER", "AUTO_INCREMENT")],
])
bad_keys = st.sampled_from([
    [], [("a", "STRING"), ("b", "STRING"), ("c", "STRING"), ("d", "STRING"), ("e", "STRING")],
    [("a", "DOUBLE")], [("a", "STRING"), ("a", "INTEGER")], [("bad-name", "STRING")],
    [("a", "STRING", "x")], [("a", "INTEGER", AUTO)], [("a", "STRING"), ("b", "STRING", AUTO)],
    [("a", "STRING"), ("b", "INTEGER", AUTO), ("c", "INTEGER", AUTO)], [("a",)],
])


def int_option(good: list, bad: list) -> st.SearchStrategy:
    return mostly(st.sampled_from(good), st.sampled_from(bad), 8)


MAX_VERSIONS = int_option([1, 1, 3, 2**31 - 1], [0, -1, 2**31, 2**63, "3", 1.5])
TTLS = int_option([None, -1, 86400, 2**31 - 1], [0, -5, 2**31, 2**63, "1"])
DEVIATIONS = int_option([86400, 1, 2**31 - 1], [0, -1, 2**31, 2**64])
RETENTIONS = int_option([3600, 7200, 86400], [0, -3600, MAX_RETENTION + 3600, "3600"])
RESERVED = int_option([0, 100], [-1])  # travels as int32 capacity units: no more, no floats
FLAGS = mostly(st.booleans(), st.just("yes"), 15)
defined_sets = mostly(
    st.sampled_from([[("c", "STRING"), ("d", "INTEGER")], [("x", "DOUBLE"), ("y", "BOOLEAN")],
                     [("z", "BINARY")], [("c", "string")]]),
    st.sampled_from([[("a", "STRING")], [("c", "STRING"), ("c", "INTEGER")], [("c", "DATE")],
                     [("bad-name", "STRING")], [("c",)]]),
    6)
create_specs = st.fixed_dictionaries(
    {"primary_key": mostly(good_keys, bad_keys, 5)},
    optional={"max_versions": MAX_VERSIONS, "ttl": TTLS, "max_time_deviation": DEVIATIONS,
              "defined_columns": defined_sets, "stream": FLAGS,
              "stream_retention": RETENTIONS, "reserved_throughput": RESERVED,
              "split_points": st.sampled_from([["m"], [5], ["c", "m"], ["m", "c"], [b"k"]])})
update_specs = st.fixed_dictionaries({}, optional={
    "max_versions": MAX_VERSIONS, "ttl": int_option([-1, 86400], [0, 2**31, "1"]),
    "max_time_deviation": DEVIATIONS, "stream": FLAGS, "stream_retention": RETENTIONS,
    "reserved_throughput": RESERVED})
table_slots = mostly(st.sampled_from([0, 0, 1]), st.sampled_from(["bad", "long", "int"]), 12)
catalog_steps = st.one_of(
    *[st.tuples(st.just("create"), table_slots, create_specs)] * 3,
    *[st.tuples(st.just("update"), table_slots, update_specs)] * 2,
    st.tuples(st.just("describe"), table_slots),
    st.tuples(st.just("index"), table_slots, st.sampled_from(["GLOBAL", "LOCAL"])),
    st.tuples(st.sampled_from(["delete", "list", "list", "delete_index"]), table_slots),
)
SDK_CANNOT = ("the SDK cannot send this",)


def slot_table(base: str, slot: object, suffix: str) -> str:
    """The path's name of a table slot: ``bad``, ``long`` and ``int`` give names the store
    refuses."""
    if slot == "bad":
        return "bad-name"
    if slot == "long":
        return "t" * 256
    if slot == "int":
        return 5  # type: ignore[return-value]
    return f"{base}_{slot}{suffix}"


def catalog_shape(d, suffix: str) -> tuple:
    """What describe_table (and update_table) says, as every path can say it: Tablestore's
    DescribeTable carries no partitions, no other partition option than the reserved
    throughput, and no index lag."""
    o = d.options
    return (d.name[:len(d.name) - len(suffix)] if suffix else d.name, list(map(tuple, d.primary_key)),
            d.auto_increment, o.max_versions, o.ttl, o.max_time_deviation,
            o.reserved_throughput, list(map(tuple, d.defined_columns)), d.stream,
            d.stream_retention, d.stream_id is not None,
            [(i.name[:len(i.name) - len(suffix) - 3] if suffix else i.name[:-3], i.index_type,
              tuple(i.primary_key), tuple(i.defined_columns)) for i in d.indexes])


class CatalogLibrary:
    """create_table and the rest on the embedded store or through widetable.connect."""

    def __init__(self, db, base: str, suffix: str, with_partitions: bool) -> None:
        self.db, self.base, self.suffix = db, base, suffix
        self.with_partitions = with_partitions  # DescribeTable carries none

    def _name(self, slot):
        return slot_table(self.base, slot, self.suffix)

    def _shape(self, d):
        shape = catalog_shape(d, self.suffix)
        if self.with_partitions:
            return (*shape, [(p.start, p.end) for p in d.partitions])
        return (*shape, ANY)

    def create(self, slot, spec):
        self.db.create_table(self._name(slot), **spec)
        return "created"

    def update(self, slot, changes):
        return self._shape(self.db.update_table(self._name(slot), **changes))

    def describe(self, slot):
        return self._shape(self.db.describe_table(self._name(slot)))

    def index(self, slot, kind):
        name = self._name(slot)
        self.db.create_index(name, name[:len(name) - len(self.suffix)] + "_ix" + self.suffix,
                             ["a"], index_type=kind)
        return "indexed"

    def delete(self, slot):
        self.db.delete_table(self._name(slot))
        return "deleted"

    def delete_index(self, slot):
        """delete_table of the slot's index: refused (drop_index drops an index)."""
        name = self._name(slot)
        if not isinstance(name, str):
            return "no index"
        self.db.delete_table(name[:len(name) - len(self.suffix)] + "_ix" + self.suffix)
        return "deleted"

    def list(self, slot):
        tables = set(self.db.list_tables())
        return [s for s in (0, 1) if self._name(s) in tables]


class CatalogSdk:
    """The same with the official SDK, where it can send the call (no stream, no split
    points, option values of its types); else SDK_CANNOT, and it sits the example out."""

    def __init__(self, sdk, base: str) -> None:
        self.c, self.base = sdk, base

    def __getattribute__(self, attr: str):
        """Each call, or SDK_CANNOT for a table name that is no string (the SDK's encoder
        raises on it before sending)."""
        method = object.__getattribute__(self, attr)
        if attr.startswith("_") or attr in ("c", "base"):
            return method

        def call(slot, *args):
            if not isinstance(slot_table("", slot, ""), str):
                return SDK_CANNOT
            return method(slot, *args)
        return call

    def _name(self, slot):
        return slot_table(self.base, slot, "_s")

    def create(self, slot, spec):
        if set(spec) - {"primary_key", "max_versions", "ttl", "max_time_deviation",
                        "defined_columns", "reserved_throughput"}:
            return SDK_CANNOT
        key = []
        for col in spec["primary_key"]:
            if len(col) == 3 and col[1] == "INTEGER" and col[2] is AUTO:
                col = (col[0], "INTEGER", tablestore.PK_AUTO_INCR)
            elif len(col) != 2 or col[1] not in ("STRING", "INTEGER", "BINARY", "DOUBLE"):
                return SDK_CANNOT
            key.append(tuple(col))
        defined = [tuple(c) for c in spec.get("defined_columns") or []]
        ttl = spec.get("ttl")
        try:
            self.c.create_table(
                TableMeta(self._name(slot), key, defined),
                TableOptions(time_to_live=-1 if ttl is None else ttl,
                             max_version=spec.get("max_versions", 1),
                             max_time_deviation=spec.get("max_time_deviation", 86400)),
                ReservedThroughput(CapacityUnit(spec.get("reserved_throughput", 0), 0)))
        except (tablestore.OTSClientError, ValueError, TypeError, IndexError):
            return SDK_CANNOT
        return "created"

    def update(self, slot, changes):
        if set(changes) - {"max_versions", "ttl", "max_time_deviation", "reserved_throughput"}:
            return SDK_CANNOT
        reserved = changes.get("reserved_throughput")
        try:
            self.c.update_table(
                self._name(slot),
                TableOptions(time_to_live=changes.get("ttl"),
                             max_version=changes.get("max_versions"),
                             max_time_deviation=changes.get("max_time_deviation")),
                None if reserved is None else ReservedThroughput(CapacityUnit(reserved, 0)))
        except (tablestore.OTSClientError, ValueError, TypeError, IndexError):
            return SDK_CANNOT
        return self.describe(slot)

    def describe(self, slot):
        d = self.c.describe_table(self._name(slot))
        key = [tuple(c[:2]) for c in d.table_meta.schema_of_primary_key]
        auto = next((c[0] for c in d.table_meta.schema_of_primary_key if len(c) == 3), None)
        o = d.table_options
        return (self._name(slot)[:-2], key, auto, o.max_version, o.time_to_live,
                o.max_time_deviation, d.reserved_throughput_details.capacity_unit.read,
                [tuple(c) for c in d.table_meta.defined_columns], ANY, ANY, ANY,
                [(i.index_name[:-5], "GLOBAL" if i.index_type == SecondaryIndexType.GLOBAL_INDEX
                  else "LOCAL", tuple(i.primary_key_names), tuple(i.defined_column_names))
                 for i in d.secondary_indexes], ANY)

    def index(self, slot, kind):
        name = self._name(slot)
        kinds = {"GLOBAL": SecondaryIndexType.GLOBAL_INDEX, "LOCAL": SecondaryIndexType.LOCAL_INDEX}
        self.c.create_secondary_index(name, SecondaryIndexMeta(name[:-2] + "_ix_s", ["a"], [],
                                                               kinds[kind]), True)
        return "indexed"

    def delete(self, slot):
        self.c.delete_table(self._name(slot))
        return "deleted"

    def delete_index(self, slot):
        name = self._name(slot)
        if not isinstance(name, str):
            return "no index"
        self.c.delete_table(name[:-2] + "_ix_s")
        return "deleted"

    def list(self, slot):
        tables = set(self.c.list_table())
        return [s for s in (0, 1) if self._name(s) in tables]


def check_catalog(wire: Wire, steps: list) -> None:
    base = f"f{next(_names)}"
    runners = {
        "embedded": CatalogLibrary(wire.embedded, base, "", True),
        "native": CatalogLibrary(wire.native, base, "_n", True),
        "tablestore": CatalogLibrary(wire.tablestore, base, "_t", False),
        "sdk": CatalogSdk(wire.sdk, base),
    }
    try:
        for i, step in enumerate(steps):
            results = run_everywhere(runners, step)
            if results.get("sdk") == SDK_CANNOT:
                del results["sdk"], runners["sdk"]  # its tables differ from here on
            event(f"catalog: {step[0]} -> {outcome(results['embedded'])}")
            agree(results, (i, step))
        agree(run_everywhere(runners, ("list", 0)), "tables at the end")
    finally:
        for db, suffixes in ((wire.embedded, ("",)), (wire.native, ("_n", "_t", "_s"))):
            tables = set(db.list_tables())
            for name in (slot_table(base, slot, x) for slot in (0, 1) for x in suffixes):
                if name in tables:
                    db.delete_table(name)


@feature_settings(80)
@given(steps=st.builds(
    lambda second, rest: [("create", 0, {"primary_key": [("a", "STRING"), ("b", "INTEGER")]}),
                          ("create", 1, second), *rest],
    create_specs, st.lists(catalog_steps, min_size=1, max_size=10)))
def test_catalog_agrees_with_the_embedded_store(wire, steps) -> None:
    check_catalog(wire, steps)


# -- regressions: divergences found by the tests above, fixed in client/ and server/ ----------


def path_suffix(name: str) -> str:
    """The suffix ``fresh_names`` gave a path's table name ("" for the embedded store's)."""
    return name[name.index("_"):] if "_" in name else ""


def each_library_path(wire: Wire, call) -> dict:
    """``call(db, name)`` on the three library paths, each with a fresh table name of its
    own: the result, or the error's code (or the raw exception, which differs)."""
    names = fresh_names()
    return {path: attempt(functools.partial(call, db, names[path]))
            for path, db in wire.library().items()}


def everywhere(wire: Wire, call, want: object) -> None:
    got = each_library_path(wire, call)
    assert got == dict.fromkeys(got, want), got


def test_fetch_base_reads_base_rows_through_widetable_connect(wire) -> None:
    """``fetch_base`` (an index read that returns the base rows its entries point to) was a
    TypeError through widetable.connect on both protocols; it reads what the store reads:
    get_row (the entry read with the version options, then the base row), get_range (in
    index order, the page's next key) and scan, rows the options read as nothing left out.
    On a table that is no index it is refused."""
    norm = Norm(now_ms())

    def reads(db, name):
        t = db.create_table(name, PK, defined_columns=DEFINED)
        for b, c in enumerate(["n", "m", "m", "o"]):
            t.put_row(("x", b), [("c", c, slot_ts(b, norm.now0)), ("d", b, slot_ts(0, norm.now0))])
        ix = db.create_index(name, name + "_ix", ["c"], ["d"])
        local = db.create_index(name, name + "_lx", ["a", "c"], index_type="LOCAL")
        settle_one(wire, db, name)
        page = ix.get_range(("m", INF_MIN, INF_MIN), (INF_MAX,) * 3, limit=2, fetch_base=True,
                            filter=SingleColumnFilter("d", ">", 1))
        return [norm.row(ix.get_row(("m", "x", 2), fetch_base=True)),
                norm.row(ix.get_row(("m", "x", 2), ["d"], fetch_base=True)),
                # The entry's only version (d, slot 0) is outside the time range: no row,
                # though the base row has a version in it (c, slot 3).
                norm.row(ix.get_row(("o", "x", 3), time_range=(slot_ts(1, norm.now0), 2**62),
                                    fetch_base=True)),
                norm.row(ix.get_row(("z", "x", 2), fetch_base=True)),
                ([norm.row(r) for r in page.rows], page.next_start_primary_key),
                [norm.row(r) for r in local.scan(direction="backward", page_size=1,
                                                 columns=["c"], fetch_base=True)]]

    got = agree(each_library_path(wire, reads), "fetch_base")
    assert got[0] == (("x", 2), (("c", ("STRING", "m"), -238000), ("d", ("INTEGER", 2), -240000)))
    assert got[1] == (("x", 2), (("d", ("INTEGER", 2), -240000),))
    assert got[2] is None and got[3] is None
    assert got[4] == ([got[0]], ("n", "x", 0))  # ("m", "x", 1) has d = 1: filtered out
    assert [pk for pk, _ in got[5]] == [("x", 3), ("x", 0), ("x", 2), ("x", 1)]  # by c, back
    for db in (wire.native, wire.tablestore):
        table = db.create_table(fresh_names()["native"], PK)
        with pytest.raises(WidetableError) as info:
            table.get_row(("x", 0), fetch_base=True)
        assert info.value.code == "OTSParameterInvalid" and "not an index" in info.value.message


def settle_one(wire: Wire, db, name: str) -> None:
    """Wait until the global indexes of table ``name`` (of ``db``'s path) have applied every
    write: ``settle`` for one table."""
    if db is wire.embedded:
        assert db.wait_for_indexes(20)
        return
    time.sleep(0.003)
    deadline = time.monotonic() + 20
    while any(i.lag_ms != 0 for i in wire.native.describe_table(name).indexes
              if i.index_type == "GLOBAL"):
        assert time.monotonic() < deadline, f"the indexes of {name} lag on"
        time.sleep(0.005)


def test_a_row_of_a_missing_table_in_a_transactions_batch_is_object_not_exist(wire) -> None:
    """In a transaction's batch, a row of a table that does not exist was OTSParameterInvalid
    through the server (widetable's own protocol, the SDK) but OTSObjectNotExist over
    widetable.connect's Tablestore protocol, which looks tables up itself. The same row
    call in the transaction is OTSObjectNotExist, as the row is outside one: so it is now
    on every path. A row of another table that exists is outside the transaction
    (OTSParameterInvalid)."""
    names, others = fresh_names(), fresh_names()
    for path in ("native", "tablestore", "sdk"):
        for name in (names[path], others[path]):
            wire.native.create_table(name, PK)
    want = [("put", "ok", ("p", 1), {}), ("other", "delete", error("OTSObjectNotExist")),
            ("other", "put", error("OTSParameterInvalid"))]
    for path in ("native", "tablestore"):
        db = getattr(wire, path)
        txn = db.start_local_transaction(names[path], "p")
        items = [(names[path], "put", ("p", 1), {"v": 1}), (MISSING, "delete", ("p", 0)),
                 (others[path], "put", ("p", 1), {"v": 1})]
        got = lib_batch_results(db.batch_write_row(items, transaction_id=txn.transaction_id),
                                names[path])
        assert got == want, path
        assert attempt(lambda db=db, txn=txn: db.table(MISSING).get_row(
            ("p", 0), transaction_id=txn.transaction_id)) == error("OTSObjectNotExist")
        txn.abort()
    tid = wire.sdk.start_local_transaction(names["sdk"], [("a", "p")])
    req = BatchWriteRowRequest()
    req.add(TableInBatchWriteRowItem(names["sdk"], [sdk_item(("put", ("p", 1), [("v", 1, None)],
                                                              None), 0)]))
    for table in (MISSING, others["sdk"]):
        req.add(TableInBatchWriteRowItem(table, [PutRowItem(SdkRow(sdk_key(("p", 1)), [("v", 1)]),
                                                            sdk_condition(None))]))
    req.set_transaction_id(tid)
    res = wire.sdk.batch_write_row(req)
    assert [res.get_put_by_table(t)[0].error_code for t in (MISSING, others["sdk"])] == [
        "OTSObjectNotExist", "OTSParameterInvalid"]
    wire.sdk.abort_transaction(tid)
    for path in ("native", "tablestore", "sdk"):
        for name in (names[path], others[path]):
            wire.native.delete_table(name)


def test_a_batch_in_a_transaction_that_timed_out_fails_whole(in_process) -> None:
    """A transaction idle past its timeout that nothing had reaped yet took a batch row by
    row: each row OTSSessionNotExist, where a reaped one (a moment later) failed the whole
    batch, so the answer depended on the reaper's timing. It fails the whole batch now,
    on every path, as every other call in an ended transaction does."""
    served, server = in_process
    remote = {p: widetable.connect(server.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                                   access_key_secret=serving.ACCESS_KEY_SECRET, protocol=p)
              for p in ("native", "tablestore")}
    sdk = serving.official_client(server.endpoint, "v2", "widetable-differential-timeout",
                                  retry_policy=NoRetryPolicy())
    try:
        for path in ("native", "tablestore", "sdk"):
            name = f"aged_{path}"
            remote["native"].create_table(name, PK)
            if path == "sdk":
                tid = sdk.start_local_transaction(name, [("a", "p")])
            else:
                tid = remote[path].start_local_transaction(name, "p").transaction_id
            served.transaction(tid)._deadline = time.monotonic() - 1  # idle past its timeout
            if path == "sdk":
                req = BatchWriteRowRequest()
                req.add(TableInBatchWriteRowItem(name, [PutRowItem(
                    SdkRow(sdk_key(("p", 1)), [("v", 1)]), sdk_condition(None))]))
                req.set_transaction_id(tid)
                got = attempt(lambda req=req: sdk.batch_write_row(req))
            else:
                got = attempt(lambda p=path, n=name, t=tid: remote[p].batch_write_row(
                    [(n, "put", ("p", 1), {"v": 1})], transaction_id=t))
            assert got == error("OTSSessionNotExist"), path
            assert remote["native"].table(name).put_row(("p", 2), {"v": 2})  # "p" is free
            assert remote["native"].table(name).get_row(("p", 1)) is None
    finally:
        for client in remote.values():
            client.close()


def test_writes_to_an_index_are_refused_whatever_their_key(wire) -> None:
    """The store refuses every write to an index (OTSParameterInvalid) before it reads the
    row. A key that did not fit the index was OTSInvalidPK instead: checked by
    widetable.connect before sending over Tablestore's protocol, and by the server before
    the store refused the write (the SDK's path)."""
    def refused(db, name, kind, key):
        db.create_table(name, PK, defined_columns=DEFINED)
        view = db.create_index(name, name + "_ix", ["d"])
        if kind == "put":
            return view.put_row(key, {"c": "x"})
        if kind == "update":
            return view.update_row(key, put={"c": "x"})
        return view.delete_row(key)

    for kind in ("put", "update", "delete"):
        for key in ((0, "x", 1), ("m", "x", 1), (0, "x"), (0, "x", 1, 2), (2**64, "x", 1)):
            everywhere(wire, functools.partial(refused, kind=kind, key=key),
                       error("OTSParameterInvalid"))
    name = fresh_names()["sdk"]
    wire.sdk.create_table(TableMeta(name, PK, DEFINED), TableOptions(),
                          ReservedThroughput(CapacityUnit(0, 0)))
    wire.sdk.create_secondary_index(name, SecondaryIndexMeta(name + "_ix", ["d"], []), False)
    for key in ([("d", "m"), ("a", "x"), ("b", 1)], [("d", 0), ("a", "x")], [("q", 1)]):
        assert attempt(lambda k=key: wire.sdk.put_row(name + "_ix", SdkRow(k, [("c", "x")]))) \
            == error("OTSParameterInvalid"), key
        assert attempt(lambda k=key: wire.sdk.update_row(
            name + "_ix", SdkRow(k, {"PUT": [("c", "x")]}), sdk_condition(None))) \
            == error("OTSParameterInvalid"), key
        assert attempt(lambda k=key: wire.sdk.delete_row(
            name + "_ix", SdkRow(k), sdk_condition(None))) == error("OTSParameterInvalid"), key


def test_create_table_takes_every_key_declaration_the_store_takes(wire) -> None:
    """Type names in another case, and an auto-increment column declared as
    ``(name, AUTO_INCREMENT)`` or with the option as text, were OTSParameterInvalid through
    widetable.connect (it knew upper-case names and the AUTO_INCREMENT object only); the
    store takes them, and so does every path now."""
    for key in ([("a", "string"), ("b", "Integer"), ("c", "binary")],
                [("a", "STRING"), ("b", AUTO)], [("a", "STRING"), ("b", "INTEGER", "auto_increment")],
                [("a", "STRING"), ("b", "integer", "PK_AUTO_INCR")]):
        got = each_library_path(wire, lambda db, name, key=key: catalog_shape(
            db.describe_table(db.create_table(name, key).name), path_suffix(name)))
        agree(got, key)
        assert got["embedded"][1][:2] == [("a", "STRING"), ("b", "INTEGER")], got
    everywhere(wire, lambda db, name: db.create_table(name, [("a", "STRING"), ("b", "STRING", AUTO)]),
               error("OTSParameterInvalid"))


def test_options_past_what_the_message_holds_are_refused_as_the_store_refuses_them(wire) -> None:
    """max_versions, ttl or max_time_deviation past what their int32 (or int64) field holds
    was a raw ValueError out of widetable.connect's create_table and update_table (protobuf
    would not set the field); the store refuses them with OTSParameterInvalid, as every
    path does now."""
    for option, value in (("max_versions", 2**31), ("ttl", 2**31), ("ttl", -(2**63)),
                          ("max_time_deviation", 2**63), ("max_time_deviation", 2**64)):
        everywhere(wire, lambda db, name, o=option, v=value: db.create_table(name, PK, **{o: v}),
                   error("OTSParameterInvalid"))
        everywhere(wire, lambda db, name, o=option, v=value: db.update_table(
            db.create_table(name, PK).name, **{o: v}), error("OTSParameterInvalid"))


def test_catalog_calls_look_the_table_up_first_as_the_store_does(wire) -> None:
    """The store looks the table up before it checks the rest of update_table and
    create_index: a table that does not exist is OTSObjectNotExist, whatever else is wrong.
    widetable.connect checked the rest first (OTSParameterInvalid), and so did the server's
    UpdateTable (the reserved throughput). A table name that is no string was a raw
    TypeError out of delete_table, drop_index and create_index."""
    missing = error("OTSObjectNotExist")
    for changes in ({"reserved_throughput": -1}, {"max_versions": "3"}, {"ttl": 2**31},
                    {"stream": True, "stream_retention": 0}):
        everywhere(wire, lambda db, name, c=changes: db.update_table(MISSING, **c), missing)
    everywhere(wire, lambda db, name: db.create_index(MISSING, "ix", ["a"], index_type="BOGUS"),
               missing)
    everywhere(wire, lambda db, name: db.create_index(MISSING, "ix", "a"), missing)
    for call in (lambda db: db.delete_table(5), lambda db: db.drop_index(5, "ix"),
                 lambda db: db.create_index(5, "ix", ["a"]), lambda db: db.update_table(5, ttl=9),
                 lambda db: db.drop_index(db.create_table(fresh_names()["embedded"], PK).name, 5)):
        everywhere(wire, lambda db, name, call=call: call(db), missing)
    assert attempt(lambda: wire.sdk.update_table(
        MISSING, None, ReservedThroughput(CapacityUnit(-1, 0)))) == missing
