"""GoogleSQL over Bigtable tables: ``db.bigtable.prepare_query`` / ``execute_query``.

The SQL view of a Bigtable table is Bigtable's own: ``_key BYTES`` and one column per
column family (``scan``: ``MAP<BYTES, BYTES>`` of the newest values, ``MAP<BYTES,
INT64>`` for int64 aggregate families, arrays of versions ``with_history => TRUE``).

A query goes through the same steps as the Tablestore dialect's (``session.py``):

1. **Prepare** (once per text, parameter types and table schema; cached): parse and check
   (``plan.parse_query``), then learn the answer's column types by running the
   statement on an empty source (parameters typed NULLs). A :class:`PreparedQuery` is what
   Bigtable's PrepareQuery answers: the columns, and ``token()`` bytes that carry the text,
   the parameter types, the table's schema fingerprint and ``valid_until``.
2. **Execute**: the parameters are checked against their declared types; a prepared query
   whose table's families changed (or that is past ``valid_until``) is refused with
   FAILED_PRECONDITION (prepare it again, as Bigtable asks); the ``_key`` predicates
   become the row set read (``rowranges``), the families named the families read
   (``scan``), the statement is bound (``plan.bind``) and DuckDB runs it over
   the scan's Arrow batches (``duck.py``), streaming its answer.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from ...errors import ConditionCheckFail, ParameterInvalid
from ..result import SQLResult
from ..scan import Budget
from .direct import Shape, answer, count_of, shape_of
from .plan import MACROS, SOURCE, Parsed, bind, parse_query, template
from .rowranges import key_row_set
from .scan import ScanSpec, batches
from .types import (
    Typed,
    answer_schema,
    check_type,
    check_value,
    from_json,
    infer_type,
    of_arrow,
    type_name,
)

PREPARED_TTL = 3600.0  # seconds a prepared query is valid (valid_until)
TOKEN_VERSION = 1
PLAN_CACHE = 256
EXPIRED = "prepared query expired"  # FAILED_PRECONDITION's message starts with this


@dataclass(frozen=True)
class PreparedQuery:
    """A prepared statement: ``columns`` [(name, GoogleSQL type)], ``param_types``."""
    query: str
    param_types: dict
    columns: tuple
    table: str
    fingerprint: str
    valid_until: float  # epoch seconds

    def token(self) -> bytes:
        """The opaque ``prepared_query`` bytes (everything needed to run it again)."""
        return json.dumps({"v": TOKEN_VERSION, "q": self.query, "p": self.param_types,
                           "t": self.table, "f": self.fingerprint, "u": self.valid_until},
                          separators=(",", ":")).encode()


@dataclass(frozen=True)
class _Plan:
    """A checked statement with its answer's columns, its table's fingerprint, and its
    DuckDB SQL with ``$name`` parameters (None: bound per call)."""
    parsed: Parsed
    columns: list
    fingerprint: str
    sql: str | None
    shape: Shape | None  # answered without DuckDB (direct), or None


class GoogleSQLResult(SQLResult):
    """An answer: ``columns`` [(name, type name)], ``types`` (GoogleSQL types), rows,
    ``to_arrow()``, ``stats`` (rows read per table)."""

    def __init__(self, types: list, **kwargs) -> None:
        super().__init__(**kwargs)
        self.types = types


class GoogleSQL:
    """GoogleSQL over the Bigtable tables of ``bt`` (a BigtableInstance). Thread-safe."""

    def __init__(self, bt, direct: bool = True) -> None:
        """``direct``: answer the queries ``direct`` can without DuckDB."""
        self._bt = bt
        self.direct = direct
        self._lock = threading.Lock()
        self._duck = None
        self._plans: OrderedDict = OrderedDict()

    def _duckdb(self):
        with self._lock:
            if self._duck is None:
                from ..duck import Duck
                duck = Duck(threads=1)
                for statement in MACROS:
                    duck.run(statement, [], [], _budget(None)).close()
                self._duck = duck
            return self._duck

    def close(self) -> None:
        with self._lock:
            if self._duck is not None:
                self._duck.close()
                self._duck = None

    # -- prepare ---------------------------------------------------------------------------

    def _fingerprint(self, table: str) -> tuple[str, dict]:
        info = self._bt.get_table(table)
        families = {n: s.aggregate for n, s in info.families.items()}
        raw = json.dumps([info.created, sorted(families.items(), key=lambda kv: kv[0])],
                         default=str).encode()
        return hashlib.sha256(raw).hexdigest()[:32], families

    def prepare(self, query: str, param_types: dict | None = None) -> PreparedQuery:
        """Check ``query`` and type its answer. ``param_types``: {name: type} for every
        ``@name`` it uses. ParameterInvalid (INVALID_ARGUMENT) naming what is wrong,
        ObjectNotExist (NOT_FOUND) for an unknown table."""
        types = {str(k): check_type(v, f"parameter @{k}") for k, v in (param_types or {}).items()}
        plan = self._planned(query, types)
        return PreparedQuery(query, types, tuple(plan.columns), plan.parsed.table,
                             plan.fingerprint, time.time() + PREPARED_TTL)

    def _planned(self, query: str, types: dict, known: str | None = None) -> _Plan:
        """The plan of ``query`` (cached; ``known``: the table's fingerprint if the
        caller just read it)."""
        fingerprints: dict[str, tuple[str, dict]] = {}

        def families_of(table: str) -> dict:
            fingerprints[table] = self._fingerprint(table)
            return fingerprints[table][1]
        key = (query, tuple(sorted(types.items())))  # types are strings and tuples
        with self._lock:
            hit = self._plans.get(key)
        if hit is not None and (known or self._fingerprint(hit.parsed.table)[0]) == hit.fingerprint:
            return hit
        parsed = parse_query(query, families_of)
        missing = [p for p in parsed.params if p not in types]
        if missing:
            raise ParameterInvalid(f"query parameter @{missing[0]} has no type: declare it in "
                                   "param_types")
        used = {p: types[p] for p in parsed.params}
        sql = template(parsed, used)
        columns = self._answer_types(parsed, sql, used)
        shape = shape_of(parsed.tree, {f for f, _ in parsed.families}, parsed.literals,
                         parsed.history, used)
        plan = _Plan(parsed, columns, fingerprints[parsed.table][0], sql, shape)
        with self._lock:
            self._plans[key] = plan
            while len(self._plans) > PLAN_CACHE:
                self._plans.popitem(last=False)
        return plan

    def _answer_types(self, parsed: Parsed, sql: str | None, types: dict) -> list:
        spec = _spec(parsed)
        nulls = {p: (None, t) for p, t in types.items()}
        if sql is None:
            sql, nulls = bind(parsed, nulls), {}
        budget = _budget(None)
        running = self._duckdb().run(sql, {p: None for p in nulls} or [],  # type: ignore[arg-type]
                                     [(SOURCE, spec.schema(), iter(()))], budget)
        try:
            schema = running.reader.schema
        finally:
            running.close()
        return [(name, of_arrow(f.type, name or f"#{i + 1}"))
                for i, (name, f) in enumerate(zip(parsed.names, schema))]

    def knows(self, query: str) -> bool:
        """Whether a plan of ``query`` is cached (preparing it again is quick)."""
        with self._lock:
            return any(k[0] == query for k in self._plans)

    def from_token(self, token: bytes) -> PreparedQuery:
        """The prepared query ``token()`` made; ParameterInvalid if it is not one."""
        try:
            j = json.loads(bytes(token))
            if j.get("v") != TOKEN_VERSION:
                raise ValueError("version")
            types = {k: check_type(from_json(v), f"parameter @{k}") for k, v in j["p"].items()}
            return PreparedQuery(j["q"], types, (), j["t"], j["f"], float(j["u"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ParameterInvalid("prepared_query is not one PrepareQuery answered") from None

    # -- execute ---------------------------------------------------------------------------

    def execute(self, prepared: PreparedQuery, params: dict | None = None,
                timeout: float | None = None, direct: bool | None = None) -> GoogleSQLResult:
        """Run a prepared query with ``params`` {name: value} (values of the declared
        types; a ``Typed`` value's type must be the declared one). The answer
        streams. ConditionCheckFail (FAILED_PRECONDITION) if the query expired."""
        if time.time() > prepared.valid_until:
            raise ConditionCheckFail(f"{EXPIRED}: it was valid until "
                                     f"{dt.datetime.fromtimestamp(prepared.valid_until, dt.UTC)}; prepare it again")
        fingerprint, _ = self._fingerprint(prepared.table)
        if fingerprint != prepared.fingerprint:
            raise ConditionCheckFail(f"{EXPIRED}: the column families of table "
                                     f"{prepared.table!r} changed since it was prepared; "
                                     "prepare it again")
        plan = self._planned(prepared.query, prepared.param_types, fingerprint)
        bound = _bind_params(plan.parsed, prepared.param_types, params or {})
        return self._run(plan, bound, timeout, self.direct if direct is None else direct)

    def execute_query(self, query: str, params: dict | None = None,
                      param_types: dict | None = None, timeout: float | None = None
                      ) -> GoogleSQLResult:
        """Prepare and run ``query`` at once; parameter types are inferred from the
        values where ``param_types`` does not give them."""
        params = params or {}
        types = dict(param_types or {})
        for name, value in params.items():
            if name not in types:
                types[name] = infer_type(name, value)
        return self.execute(self.prepare(query, types), params, timeout)

    def explain(self, prepared: PreparedQuery, params: dict | None = None) -> dict:
        """What an execution would read and run: the row set (None: the whole table),
        the families read, and DuckDB's SQL."""
        parsed = self._planned(prepared.query, prepared.param_types).parsed
        bound = _bind_params(parsed, prepared.param_types, params or {})
        plan = self._planned(prepared.query, prepared.param_types)
        return {"table": parsed.table, "row_set": key_row_set(parsed.tree.args.get("where"),
                                                               parsed.literals, bound),
                "families": [f for f, _ in parsed.families],
                "path": "direct" if self.direct and plan.shape is not None else "duckdb",
                "duckdb": bind(parsed, bound)}

    def _run(self, plan: _Plan, bound: dict, timeout: float | None, direct: bool
             ) -> GoogleSQLResult:
        parsed, columns = plan.parsed, plan.columns
        row_set = key_row_set(parsed.tree.args.get("where"), parsed.literals, bound)
        spec = _spec(parsed)
        if direct and plan.shape is not None:
            return self._direct(plan, row_set, spec, bound, timeout)
        if plan.sql is not None:
            sql, values = plan.sql, {p: bound[p][0] for p in parsed.params}
        else:
            sql, values = bind(parsed, bound), {}
        budget = _budget(timeout)
        table = self._bt.table(parsed.table)
        if row_set is not None and not row_set.ranges:
            source = iter(())  # the WHERE's _key predicates select nothing
        else:
            source = batches(table, row_set, spec, budget, parsed.table)
        running = self._duckdb().run(sql, values or [],  # type: ignore[arg-type]
                                     [(SOURCE, spec.schema(), source)], budget)
        schema = answer_schema(columns)
        return GoogleSQLResult([t for _, t in columns],
                               columns=[(n, type_name(t)) for n, t in columns], stream=running,
                               schema=schema, stats=budget.rows_read, closer=running.close)


    def _direct(self, plan: _Plan, row_set, spec: ScanSpec, bound: dict,
                timeout: float | None) -> GoogleSQLResult:
        """The answer from the scan alone (``direct``)."""
        shape, parsed = plan.shape, plan.parsed
        offset = count_of(shape.offset, bound) or 0  # type: ignore[union-attr]
        limit = count_of(shape.limit, bound)  # type: ignore[union-attr]
        budget = _budget(timeout)
        schema = answer_schema(plan.columns)
        if (row_set is not None and not row_set.ranges) or limit == 0:
            stream: Iterator = iter(())
        else:
            scan = batches(self._bt.table(parsed.table), row_set, spec, budget, parsed.table,
                           shape.reverse, 0 if limit is None else offset + limit)  # type: ignore[union-attr]
            stream = answer(scan, shape, spec.schema().names, schema, offset, limit)  # type: ignore[arg-type]
        return GoogleSQLResult([t for _, t in plan.columns],
                               columns=[(n, type_name(t)) for n, t in plan.columns],
                               stream=stream, schema=schema, stats=budget.rows_read,
                               closer=budget.stop.set)


def _spec(parsed: Parsed) -> ScanSpec:
    return ScanSpec(parsed.families, parsed.history, parsed.latest_n)


def _budget(timeout: float | None) -> Budget:
    deadline = None if timeout is None else time.monotonic() + timeout
    return Budget(None, None, deadline, timeout)


def _bind_params(parsed: Parsed, types: dict, params: dict) -> dict:
    """{name: (value, type)} for every parameter given, checked against its declared type
    (a ``Typed`` value's own type must be the declared one)."""
    out = {}
    for name, value in params.items():
        if name not in types:
            raise ParameterInvalid(f"parameter @{name} was not declared when the query was prepared")
        declared = types[name]
        if isinstance(value, Typed):
            if value.type != declared:
                raise ParameterInvalid(f"parameter @{name} is of type {type_name(value.type)}, but "
                                       f"the query was prepared with it as {type_name(declared)}")
            value = value.value
        out[name] = (check_value(value, declared, f"parameter @{name}"), declared)
    for name in parsed.params:
        if name not in out:
            raise ParameterInvalid(f"query parameter @{name} has no value")
    return out


__all__ = ["EXPIRED", "GoogleSQL", "GoogleSQLResult", "PreparedQuery", "Typed", "infer_type"]
