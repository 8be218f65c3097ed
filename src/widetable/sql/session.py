"""The SQL session of one store: statements in, results out (``db.sql``).

Statements are parsed and planned once per text and kept in a plan cache
(``?`` parameters are bound per call); DDL on mappings empties the cache. A
query's scans get their access paths when bound (``access.choose``), then
either the point path answers it with one ``get_row`` (no DuckDB) or DuckDB
runs the planned SQL over the scans' record batches.

Options of every statement (keyword arguments of ``db.sql``):

* ``max_scan_rows`` (100,000) and ``max_scan_bytes`` (128 MB): what one scan may
  read before the statement fails (None: no limit), as in Tablestore;
* ``timeout`` (30 s): how long a statement may run (None: no limit).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING

from ..errors import ObjectNotExist, ParameterInvalid, WidetableError, describe
from . import statements
from .access import Access, bind, choose
from .mapping import Mapping, MappingCatalog
from .planner import QueryPlan, plan_query
from .result import SQLResult
from .types import SQL_NAME, fits

if TYPE_CHECKING:
    from ..context import StoreContext

MAX_SCAN_ROWS = 100_000
MAX_SCAN_BYTES = 128 * 1024 * 1024
TIMEOUT = 30.0
PLAN_CACHE = 512
READS = frozenset({"query", "explain", "describe", "show_tables", "show_index"})
NO_PERMISSION = "OTSNoPermissionAccess"
_WORDS = {"copy": "COPY ... TO", "create": "CREATE TABLE (a mapping)",
          "alter_add": "ALTER TABLE ... ADD COLUMN", "alter_drop": "ALTER TABLE ... DROP COLUMN",
          "drop_mapping": "DROP MAPPING TABLE"}
_UNSET = object()


class SQLSession:
    """Runs SQL statements against one store. Thread-safe."""

    def __init__(self, ctx: StoreContext, instance: str | None = None, search=None) -> None:
        """``search``: the store's search-index calls (``list_search_index``,
        ``describe_search_index``, ``search``), for the search-index access path."""
        self._ctx = ctx
        self._search = search
        self.mappings = MappingCatalog(ctx.engine)
        path = ctx.path if isinstance(ctx.path, str) and not ctx.path.startswith(":") else None
        self.instance = instance or (os.path.basename(os.path.abspath(path)) if path else "memory")
        self._cache: OrderedDict[str, tuple[statements.Statement, QueryPlan | None]] = OrderedDict()
        self._lock = threading.Lock()
        self._duck = None

    # -- entry -------------------------------------------------------------------------

    def execute(self, text: str, params: object = None, max_scan_rows: object = _UNSET,
                max_scan_bytes: object = _UNSET, timeout: object = _UNSET,
                files: bool = True, read_only: str | None = None) -> SQLResult:
        """Run one statement; see the module doc for the options. ``files=False`` refuses
        COPY ... TO (a server must not write files for its callers). ``read_only``: the
        caller (an access key's id) may only read: a statement other than SELECT,
        EXPLAIN, DESCRIBE or SHOW is refused with ``OTSNoPermissionAccess``, unrun."""
        self._ctx.check_open()
        values = _params(params)
        limits = (_limit(max_scan_rows, MAX_SCAN_ROWS, "max_scan_rows"),
                  _limit(max_scan_bytes, MAX_SCAN_BYTES, "max_scan_bytes"),
                  _seconds(timeout))
        stmt, plan = self._prepared(text)
        if read_only is not None and stmt.kind not in READS:
            raise WidetableError(
                f"access key {read_only!r} is read-only: it may run SELECT, EXPLAIN, DESCRIBE "
                f"and SHOW, not {_WORDS.get(stmt.kind, stmt.kind)}", NO_PERMISSION)
        if stmt.params != len(values) and stmt.kind in ("query", "explain", "copy"):
            raise ParameterInvalid(f"the statement has {stmt.params} ? parameters but "
                                   f"{len(values)} were given")
        kind = stmt.kind
        if kind == "query":
            result = self._query(plan, values, limits)  # type: ignore[arg-type]
        elif kind == "explain":
            result = self._explain(plan, values)  # type: ignore[arg-type]
        elif kind == "copy":
            if files is not True:
                raise ParameterInvalid("COPY ... TO writes a file where the statement runs; a "
                                       "server does not run it (run it on the store, or export "
                                       "the result with widetable sql --format parquet)")
            result = self._copy(stmt, plan, values, limits)  # type: ignore[arg-type]
        else:
            result = self._ddl(stmt)
        result.kind = kind
        return result

    def _prepared(self, text: str) -> tuple[statements.Statement, QueryPlan | None]:
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        stmt = statements.parse(text)
        plan = None
        if stmt.kind in ("query", "explain", "copy"):
            plan = plan_query(stmt.query, self.mappings, stmt.params)  # type: ignore[arg-type]
            with self._lock:
                self._cache[text] = (stmt, plan)
                if len(self._cache) > PLAN_CACHE:
                    self._cache.popitem(last=False)
        return stmt, plan

    # -- queries -----------------------------------------------------------------------

    def _bind(self, plan: QueryPlan, values: list) -> list[Access]:
        out = []
        for spec in plan.scans:
            base = self._table(spec.mapping)
            access = choose(spec, base, values, self._ctx.catalog.table, self._searches(base))
            if spec.limit is not None and access.exact:
                n, m = (bind_value(spec.limit, values), bind_value(spec.offset, values))
                if type(n) is int and type(m) is int and n >= 0 and m >= 0:
                    access.limit = n + m
            out.append(access)
        return out

    def _searches(self, base) -> dict:
        """``{index: ({field: type}, page)}`` of ``base``'s search indexes."""
        search = self._search
        if search is None:
            return {}
        names = [n for t, n in search.list_search_index(base.name) if t == base.name]
        if not names:
            return {}
        from ..search.execute import RETURN_NONE
        out = {}
        for name in names:
            meta = search.describe_search_index(base.name, name).meta
            fields = {(f.column or f.name): f.type for f in meta.fields
                      if f.index and not f.is_array and (f.column or f.name) == f.name}

            def page(query, token, limit, columns, _name=name):
                r = search.search(base.name, _name, query, limit=limit, next_token=token,
                                  columns=columns or RETURN_NONE)
                return r.rows, r.next_token
            out[name] = (fields, page)
        return out

    def _table(self, mapping: Mapping):
        try:
            return self._ctx.catalog.base_table(mapping.table)
        except ObjectNotExist:
            raise ObjectNotExist(f"mapping table {mapping.name!r} maps table {mapping.table!r}, "
                                 "which does not exist") from None

    def _budget(self, limits):
        from .scan import Budget
        max_rows, max_bytes, timeout = limits
        deadline = None if timeout is None else time.monotonic() + timeout
        return Budget(max_rows, max_bytes, deadline, timeout)

    def _query(self, plan: QueryPlan, values: list, limits) -> SQLResult:
        if plan.point:
            result = self._point(plan, values)
            if result is not None:
                return result
        accesses = self._bind(plan, values)
        budget = self._budget(limits)
        if plan.direct and accesses[0].exact and budget.max_rows is not None:
            return self._direct(plan, accesses[0], values, budget)
        running = self._run(plan, accesses, values, budget)
        from .result import normalized_schema, sql_type
        schema = normalized_schema(running.reader.schema)
        columns = [(f.name, sql_type(f.type)) for f in schema]
        return SQLResult(columns, stream=iter(running), schema=schema, stats=budget.rows_read,
                         closer=running.close)

    def _sources(self, plan: QueryPlan, accesses: list[Access], budget) -> list:
        from .scan import batches
        sources = []
        for spec, access in zip(plan.scans, accesses):
            cuts = None if spec.early else self._boundaries(access)
            schema, it = batches(access, spec.columns, budget, cuts)
            sources.append((spec.view, schema, it))
        return sources

    def _run(self, plan: QueryPlan, accesses: list[Access], values: list, budget):
        return self._engine().run(plan.duck_sql, values, self._sources(plan, accesses, budget),
                                  budget)

    def _boundaries(self, access: Access) -> list | None:
        if access.kind != "full":
            return None
        try:
            tp = self._ctx.partitions.partitions(access.table)
        except Exception:  # noqa: BLE001 - an index view has no partitions: one range
            return None
        return [tp.value_of(p.start) for p in tp.router.parts[1:]]

    def _engine(self):
        with self._lock:
            if self._duck is None:
                from .duck import Duck
                self._duck = Duck()
            return self._duck

    def _direct(self, plan: QueryPlan, access: Access, values: list, budget) -> SQLResult:
        """Plain columns of exact key ranges: the rows, read in key order, without DuckDB
        (bounded by ``max_scan_rows``). LIMIT and OFFSET apply here."""
        from .planner import Param
        from .scan import rows
        spec = plan.scans[0]
        tree_limit, tree_offset = spec.limit, spec.offset
        n = bind_value(tree_limit, values) if tree_limit is not None else None
        m = bind_value(tree_offset, values) if tree_offset is not None else 0
        if (n is not None and (type(n) is not int or n < 0)) or type(m) is not int or m < 0:
            raise ParameterInvalid(f"LIMIT and OFFSET must be integers >= 0, got "
                                   f"{describe(n)} and {describe(m)}")
        _ = Param
        columns = [(name, SQL_NAME[c.wtype]) for name, c in plan.output]
        names = access.base.schema.pk_names if (access.kind == "index" and not access.covering) \
            or access.kind == "search" else access.table.schema.pk_names
        out: list[tuple] = []
        for page in rows(access, spec.columns, budget):
            for pk, cells in page:
                out.append(_tuple(pk, cells, plan.output, names, access.base.name))
        if m:
            out = out[m:]
        if n is not None:
            out = out[:n]
        return SQLResult(columns, out, stats=budget.rows_read)

    def _point(self, plan: QueryPlan, values: list) -> SQLResult | None:
        """The get_row path; None when the bound values do not fit the key (DuckDB decides)."""
        spec = plan.scans[0]
        table = self._table(spec.mapping)
        key_types = dict(table.schema.primary_key)
        by_col = {p.column: bind(p, values).values[0] for p in spec.preds}
        pk = []
        for name in table.schema.pk_names:
            v = by_col.get(name)
            if not fits(v, key_types[name]):
                return None
            pk.append(v)
        columns = [(name, SQL_NAME[c.wtype]) for name, c in plan.output]
        row = table.get_row(tuple(pk))
        if row is None:
            return SQLResult(columns, [], stats={table.name: 0})
        out = _tuple(row.primary_key, row.columns, plan.output, table.schema.pk_names, table.name)
        return SQLResult(columns, [out], stats={table.name: 1})

    def _explain(self, plan: QueryPlan, values: list) -> SQLResult:
        columns = [("table", "MEDIUMTEXT"), ("access", "MEDIUMTEXT"),
                   ("pushed down", "MEDIUMTEXT")]
        rows = []
        accesses = self._bind(plan, values)
        if plan.point and self._point_fits(plan, values):
            a = accesses[0]
            rows.append((plan.scans[0].mapping.name, a.describe(),
                         "columns: " + ", ".join(c.name for _, c in plan.output) +
                         "; get_row, no DuckDB"))
            return SQLResult(columns, rows)
        for spec, a in zip(plan.scans, accesses):
            path = a.describe()
            if a.kind == "full":
                cuts = None if spec.early else self._boundaries(a)
                path += f" ({len(cuts) + 1} partitions in parallel)" if cuts else ""
            pushed = ["columns: " + (", ".join(c.name for c in spec.columns) or "(none)")]
            if a.used:
                pushed.append("predicates: " + " AND ".join(_show_pred(p) for p in a.used))
            if a.limit is not None:
                pushed.append(f"limit: {a.limit}")
            name = spec.mapping.name + (f" AS {spec.alias}" if spec.alias != spec.mapping.name else "")
            rows.append((name, path, "; ".join(pushed)))
        if plan.direct and accesses[0].exact:
            rows.append(("(no duckdb)", "rows read directly", "plain columns of exact key ranges"
                         " (DuckDB runs it when max_scan_rows is None)"))
        else:
            rows.append(("(duckdb)", "runs the rest", plan.duck_sql))
        return SQLResult(columns, rows)

    def _point_fits(self, plan: QueryPlan, values: list) -> bool:
        spec = plan.scans[0]
        types = dict(self._table(spec.mapping).schema.primary_key)
        return all(fits(bind(p, values).values[0], types[p.column]) for p in spec.preds)

    def _copy(self, stmt, plan: QueryPlan, values: list, limits) -> SQLResult:
        accesses = self._bind(plan, values)
        budget = self._budget(limits)
        count = self._engine().copy(plan.duck_sql, values, self._sources(plan, accesses, budget),
                                    budget, stmt.path, stmt.copy_format)
        return SQLResult([("rows", "BIGINT")], [(count,)], stats=budget.rows_read)

    # -- DDL and catalog statements ----------------------------------------------------

    def _ddl(self, stmt: statements.Statement) -> SQLResult:
        kind = stmt.kind
        if kind == "show_tables":
            return SQLResult([(f"Tables_in_{self.instance}", "MEDIUMTEXT")],
                             [(n,) for n in self.mappings.names()])
        if kind == "describe":
            m = self.mappings.get(stmt.name)
            rows = [(c.name, c.sql_type.lower(), "NO" if c.name in m.primary_key else "YES",
                     "PRI" if c.name in m.primary_key else "", None, "") for c in m.columns]
            return SQLResult([("Field", "MEDIUMTEXT"), ("Type", "MEDIUMTEXT"),
                              ("Null", "MEDIUMTEXT"), ("Key", "MEDIUMTEXT"),
                              ("Default", "MEDIUMTEXT"), ("Extra", "MEDIUMTEXT")], rows)
        if kind == "show_index":
            return self._show_index(stmt.name)
        with self._lock:
            self._cache.clear()
        if kind == "create":
            table = self._ctx.catalog.base_table(stmt.table or stmt.name)
            if stmt.search_index is not None:
                found = [] if self._search is None else self._search.list_search_index(table.name)
                if (table.name, stmt.search_index) not in found:
                    raise ObjectNotExist(f"table {table.name!r} has no search index "
                                         f"{stmt.search_index!r}")
            self.mappings.create(Mapping(stmt.name, table.name, tuple(stmt.primary_key),
                                         tuple(stmt.columns), stmt.search_index), table)
        elif kind == "alter_add":
            m = self.mappings.get(stmt.name)
            self.mappings.add_column(stmt.name, stmt.columns[0], self._table(m))
        elif kind == "alter_drop":
            self.mappings.drop_column(stmt.name, stmt.column)
        elif kind == "drop_mapping":
            if stmt.if_exists and self.mappings.find(stmt.name) is None:
                return SQLResult([])
            self.mappings.drop(stmt.name)
        return SQLResult([])

    def _show_index(self, name: str) -> SQLResult:
        m = self.mappings.get(name)
        table = self._table(m)
        rows = [(m.name, 0, "PRIMARY", i + 1, col, "", "BASE")
                for i, col in enumerate(m.primary_key)]
        for spec in table.schema.indexes:
            view = self._ctx.catalog.table(spec.name)
            for i, col in enumerate(view.schema.pk_names):
                rows.append((m.name, 1, spec.name, i + 1, col, "", spec.index_type))
            for col in spec.defined_columns:
                rows.append((m.name, 1, spec.name, None, col, "INCLUDED", spec.index_type))
        return SQLResult([("Table", "MEDIUMTEXT"), ("Non_unique", "BIGINT"),
                          ("Key_name", "MEDIUMTEXT"), ("Seq_in_index", "BIGINT"),
                          ("Column_name", "MEDIUMTEXT"), ("Comment", "MEDIUMTEXT"),
                          ("Index_type", "MEDIUMTEXT")], rows)

    def close(self) -> None:
        if self._duck is not None:
            self._duck.close()
            self._duck = None


def _tuple(pk: tuple, cells: dict, output: list, key_names: tuple, table: str) -> tuple:
    """One output row of the direct paths, each value checked against its mapped type."""
    out = []
    for _, c in output:
        v = pk[key_names.index(c.name)] if c.name in key_names else cells.get(c.name)
        if v is not None and not fits(v, c.wtype):
            raise ParameterInvalid(
                f"column {c.name!r} of table {table!r} is mapped as {c.sql_type} but "
                f"row {pk!r} holds {type(v).__name__} {v!r}; map it with the type it holds")
        out.append(v)
    return tuple(out)


def bind_value(v: object, values: list) -> object:
    from .planner import Param
    if isinstance(v, Param):
        return values[v.n - 1] if v.n <= len(values) else None
    return v


def _show_pred(p) -> str:
    if p.op == "in":
        return f"{p.column} IN ({', '.join(map(repr, p.values))})"
    return f"{p.column} {p.op} {p.values[0]!r}"


def _params(params: object) -> list:
    if params is None:
        return []
    if isinstance(params, (list, tuple)):
        for v in params:
            if v is not None and type(v) not in (int, float, str, bytes, bool):
                raise ParameterInvalid(f"SQL parameters are int, float, str, bytes, bool or "
                                       f"None, got {describe(v)}")
        return list(params)
    raise ParameterInvalid(f"params must be a list of values, got {describe(params)}")


def _limit(value: object, default: int, what: str) -> int | None:
    if value is _UNSET:
        return default
    if value is None:
        return None
    if type(value) is not int or value < 1:
        raise ParameterInvalid(f"{what} must be a positive integer or None, got {describe(value)}")
    return value


def _seconds(value: object) -> float | None:
    if value is _UNSET:
        return TIMEOUT
    if value is None:
        return None
    if type(value) not in (int, float) or not value > 0:
        raise ParameterInvalid(f"timeout must be seconds > 0 or None, got {describe(value)}")
    return float(value)
