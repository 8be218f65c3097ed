"""The SQL session of one store: statements in, results out (``db.sql``).

Statements are parsed and planned once per text and kept in a plan cache
(``?`` parameters are bound per call); DDL on mappings empties the cache. A
query's scans get their access paths when bound (``access.choose``), then
either the point path answers it with one ``get_row`` (no DuckDB), or the direct
path reads plain columns of exact key or index ranges itself (LIMIT and OFFSET
applied here), or the direct count counts the rows of a bare ``COUNT(*)`` over exact
key or index ranges, or DuckDB runs the planned SQL over the scans' record batches.
The direct paths run only under a ``max_scan_rows`` budget: with ``max_scan_rows=None``
DuckDB runs every statement (EXPLAIN says which path a statement takes).

A point SELECT, and a direct read or count over one key range (equality on a prefix of
a key), is compiled on its first call (``fastpath``): later calls with the same text and
the default limits bind their parameters into it and skip parsing, planning and the
access-path choice.

Options of every statement (keyword arguments of ``db.sql``):

* ``max_scan_rows`` (100,000) and ``max_scan_bytes`` (128 MB): what one scan may
  read before the statement fails (None: no limit), as in Tablestore;
* ``timeout`` (30 s): how long a statement may run (None: no limit);
* ``columnar`` (True): a full scan may read the table's columnar replica
  (``replica.py``) instead of its rows; False always reads the rows.
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
from .fastpath import KeyPath, PointPath, Shaper, count_prefix, defined_types
from .mapping import Mapping, MappingCatalog
from .planner import Param, QueryPlan, plan_query
from .result import SQLResult, normalized_schema, sql_type
from .scan import Budget, arrow_schema, batches, rows, stored_pages
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
        self._replicas = None
        self._fast: dict = {}  # statement text -> its compiled fastpath.PointPath or KeyPath

    # -- entry -------------------------------------------------------------------------

    def execute(self, text: str, params: object = None, max_scan_rows: object = _UNSET,
                max_scan_bytes: object = _UNSET, timeout: object = _UNSET,
                files: bool = True, read_only: str | None = None,
                columnar: bool = True) -> SQLResult:
        """Run one statement; see the module doc for the options. ``files=False`` refuses
        COPY ... TO (a server must not write files for its callers). ``read_only``: the
        caller (an access key's id) may only read: a statement other than SELECT,
        EXPLAIN, DESCRIBE or SHOW is refused with ``OTSNoPermissionAccess``, unrun."""
        self._ctx.check_open()
        fast = self._fast.get(text)
        if fast is not None and max_scan_rows is _UNSET and max_scan_bytes is _UNSET \
                and timeout is _UNSET:
            result = fast.run(params)  # a compiled statement: bound, read, shaped
            if result is not None:
                return result
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
        if columnar is not True and columnar is not False:
            raise ParameterInvalid(f"columnar must be True or False, got {describe(columnar)}")
        kind = stmt.kind
        limits = (*limits, columnar)
        if kind == "query":
            result = self._query(plan, values, limits, text)  # type: ignore[arg-type]
        elif kind == "explain":
            result = self._explain(plan, values, columnar,  # type: ignore[arg-type]
                                   limits[0] is not None)
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
                    gone, _ = self._cache.popitem(last=False)
                    self._fast.pop(gone, None)
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
        max_rows, max_bytes, timeout, _ = limits
        deadline = None if timeout is None else time.monotonic() + timeout
        return Budget(max_rows, max_bytes, deadline, timeout)

    def _query(self, plan: QueryPlan, values: list, limits, text: str | None = None
               ) -> SQLResult:
        if plan.point:
            result = self._point(plan, values, text)
            if result is not None:
                return result
        accesses = self._bind(plan, values)
        budget = self._budget(limits)
        if plan.direct and accesses[0].exact and budget.max_rows is not None:
            result = self._direct(plan, accesses[0], values, budget)
            self._remember(text, self._key_path(plan, accesses[0]))
            return result
        if plan.count and _countable(accesses[0]) and budget.max_rows is not None:
            result = self._count(plan, accesses[0], budget)
            self._remember(text, self._key_path(plan, accesses[0]))
            return result
        running = self._run(plan, accesses, values, budget, limits[3])
        schema = normalized_schema(running.reader.schema)
        columns = [(f.name, sql_type(f.type)) for f in schema]
        return SQLResult(columns, stream=iter(running), schema=schema, stats=budget.rows_read,
                         closer=running.close)

    def _sources(self, plan: QueryPlan, accesses: list[Access], budget,
                 columnar: bool = True) -> list:
        sources = []
        for spec, access in zip(plan.scans, accesses):
            replica = self._replica(spec, access) if columnar else None
            if replica is not None:
                replica.catch_up()  # every write acknowledged before the query: exact
                budget.charge(access.base.name, replica.rows, replica.bytes)
                sql = self._engine().replicas.view_sql(replica.table_id,
                                                       [c.name for c in spec.columns])
                sources.append((spec.view, None, sql))
                continue
            cuts = None if spec.early else self._boundaries(access)
            schema, it = batches(access, spec.columns, budget, cuts)
            sources.append((spec.view, schema, it))
        return sources

    def _run(self, plan: QueryPlan, accesses: list[Access], values: list, budget,
             columnar: bool = True):
        return self._engine().run(plan.duck_sql, values,
                                  self._sources(plan, accesses, budget, columnar), budget)

    # -- columnar replicas -------------------------------------------------------------

    def _replica(self, spec, access: Access, start: bool = True):
        """The replica serving ``spec``'s scan, or None (``start``: a missing one starts
        building). Only a full scan that no LIMIT stops early reads a replica."""
        why = self._no_replica(spec, access)
        if why is not None:
            return None
        r, _ = self._engine_replicas().for_scan(access.base, spec.columns,
                                                self._wanted(access.base), start)
        return r

    def _no_replica(self, spec, access: Access) -> str | None:
        if access.kind != "full":
            return "not a full scan"
        if spec.early:
            return "a LIMIT may stop the scan early: rows are read"
        return None

    def _wanted(self, table) -> list[tuple[str, str]]:
        """The columns a replica of ``table`` keeps: its key, then every column its
        mappings declare (the first mapping's type where two differ)."""
        out = dict(table.schema.primary_key)
        for name in self.mappings.names():
            m = self.mappings.find(name)
            if m is None or m.table != table.name:
                continue
            for c in m.columns:
                out.setdefault(c.name, c.wtype)
        return list(out.items())

    def _engine_replicas(self):
        with self._lock:
            if self._replicas is None:
                from .replica import Replicas
                self._replicas = Replicas(self._ctx, self._engine_locked().replicas)
            return self._replicas

    def resume_replicas(self) -> None:
        """Load the replicas recorded on disk and register them as change-log consumers
        again (the store calls this as it opens, before any write)."""
        self._engine_replicas()

    def wait_for_replicas(self, timeout: float = 60.0) -> bool:
        """Wait until no columnar replica is building; whether none is."""
        return self._replicas is None or self._replicas.wait(timeout)

    def replica_health(self) -> list:
        """Each columnar replica's ``health.LoopState`` (its builds and log passes)."""
        if self._replicas is None:
            return []
        return [r.health.state() for r in list(self._replicas.by_table.values())]

    def replica_state(self) -> dict:
        """Each replicated table -> its replica's state (ready, rows, positions, lag, health)."""
        return {} if self._replicas is None else self._replicas.state()

    def _forget_replicas(self) -> None:
        if self._replicas is None:
            return
        keep = set()
        for name in self.mappings.names():
            m = self.mappings.find(name)
            if m is None:
                continue
            try:
                keep.add(self._ctx.catalog.base_table(m.table).schema.table_id)
            except ObjectNotExist:
                continue
        self._replicas.forget(keep)

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
            return self._engine_locked()

    def _engine_locked(self):
        if self._duck is None:
            from .duck import Duck
            from .replica import replica_path
            path = replica_path(self._ctx.path)
            if path is not None:
                os.makedirs(os.path.dirname(path), exist_ok=True)
            self._duck = Duck(replica_path=path)
        return self._duck

    def _direct(self, plan: QueryPlan, access: Access, values: list, budget) -> SQLResult:
        """Plain columns of exact key ranges: the rows, read in key order, without DuckDB
        (bounded by ``max_scan_rows``). LIMIT and OFFSET apply here."""
        spec = plan.scans[0]
        tree_limit, tree_offset = spec.limit, spec.offset
        n = bind_value(tree_limit, values) if tree_limit is not None else None
        m = bind_value(tree_offset, values) if tree_offset is not None else 0
        if (n is not None and (type(n) is not int or n < 0)) or type(m) is not int or m < 0:
            raise ParameterInvalid(f"LIMIT and OFFSET must be integers >= 0, got "
                                   f"{describe(n)} and {describe(m)}")
        columns = [(name, SQL_NAME[c.wtype]) for name, c in plan.output]
        names = access.base.schema.pk_names if (access.kind == "index" and not access.covering) \
            or access.kind == "search" else access.table.schema.pk_names
        defined = defined_types(access.base) if names == access.base.schema.pk_names else {}
        key = (names, tuple(defined.items()), access.base.name)
        shape = plan.shapers.get(key)
        if shape is None:
            shape = plan.shapers[key] = Shaper(plan.output, names, defined, access.base.name)
        out: list[tuple] = []
        if stored_pages(access):  # stored rows decoded straight into output rows
            for page in rows(access, spec.columns, budget, stored=True):
                out += shape.blobs(page)
        else:
            for page in rows(access, spec.columns, budget):
                out += shape.page(page)
        if m:
            out = out[m:]
        if n is not None:
            out = out[:n]
        return SQLResult(columns, out, stats=budget.rows_read)

    def _count(self, plan: QueryPlan, access: Access, budget) -> SQLResult:
        """A bare COUNT(*) of exact key ranges or index ranges: the rows the access reads,
        counted without DuckDB (the same rows, read the same way, as DuckDB's scan would
        count; bounded by ``max_scan_rows``). A count the secondary index keeps for the
        range's key prefix is read instead (``fastpath.count_prefix``)."""
        prefix = count_prefix(plan, access)
        if prefix is not None:
            n = access.table.prefix_count(prefix)
            if n is not None:
                return SQLResult([(plan.output[0][0], "BIGINT")], [(n,)],
                                 stats={access.table.name: 0})
        n = 0
        for page in rows(access, plan.scans[0].columns, budget):
            n += len(page)
        return SQLResult([(plan.output[0][0], "BIGINT")], [(n,)], stats=budget.rows_read)

    def _point(self, plan: QueryPlan, values: list, text: str | None = None
               ) -> SQLResult | None:
        """The get_row path; None when the bound values do not fit the key (DuckDB decides).
        ``text``: the statement, whose compiled point path the next call takes."""
        spec = plan.scans[0]
        table = self._table(spec.mapping)
        path = PointPath(plan, table, self._ctx.tables)
        result = path.run(values)
        if result is not None:
            self._remember(text, path)
        return result

    def _remember(self, text: str | None, path) -> None:
        """Keep ``text``'s compiled path for its next calls (while its plan is cached)."""
        if text is None or path is None:
            return
        with self._lock:
            if text in self._cache:
                self._fast[text] = path

    def _key_path(self, plan: QueryPlan, access: Access) -> KeyPath | None:
        """``plan``'s direct read or count compiled over ``access``, or None if that
        access is not one exact key-prefix range (``KeyPath.eligible``). With nothing on
        the primary key's first column a search index would come first, so the path is
        made only while the table has none, and checks that on every call."""
        if not KeyPath.eligible(plan, access):
            return None
        searched = None
        base = access.base
        if base.schema.pk_names[0] not in {p.column for p in plan.scans[0].preds}:
            search = self._search
            if search is not None:
                if search.list_search_index(base.name):
                    return None
                name = base.name
                searched = lambda: bool(search.list_search_index(name))  # noqa: E731
        return KeyPath(plan, access, self._ctx.tables, searched,
                       (MAX_SCAN_ROWS, MAX_SCAN_BYTES, TIMEOUT))

    def _explain(self, plan: QueryPlan, values: list, columnar: bool = True,
                 budgeted: bool = True) -> SQLResult:
        """``budgeted``: the statement has a ``max_scan_rows`` (the direct paths need one)."""
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
        explained = []  # per scan: (row index, spec, replica)
        for spec, a in zip(plan.scans, accesses):
            path = a.describe()
            replica = None
            if a.kind == "full":
                why = self._no_replica(spec, a) if columnar else "columnar=False"
                if why is None:
                    replica, why = self._engine_replicas().for_scan(
                        a.base, spec.columns, self._wanted(a.base), False)
                if replica is not None:
                    path += " of the " + replica.describe() + ", by DuckDB"
                else:
                    cuts = None if spec.early else self._boundaries(a)
                    path += f" ({len(cuts) + 1} partitions in parallel)" if cuts else ""
            pushed = ["columns: " + (", ".join(c.name for c in spec.columns) or "(none)")]
            if a.used:
                pushed.append("predicates: " + " AND ".join(_show_pred(p) for p in a.used))
            if a.limit is not None:
                pushed.append(f"limit: {a.limit}")
            if a.kind == "full" and replica is None:
                pushed.append(f"rows read (no columnar replica: {why})")
            name = spec.mapping.name + (f" AS {spec.alias}" if spec.alias != spec.mapping.name else "")
            explained.append((len(rows), spec, replica))
            rows.append((name, path, "; ".join(pushed)))
        if plan.direct and accesses[0].exact and budgeted:
            rows.append(("(no duckdb)", "rows read directly", "plain columns of exact key ranges"
                         " (DuckDB runs it when max_scan_rows is None)" +
                         self._cached_note(plan, accesses[0])))
        elif plan.count and _countable(accesses[0]) and budgeted:
            prefix = count_prefix(plan, accesses[0])
            if prefix is not None:
                a = accesses[0]
                names = a.table.schema.pk_names
                where = " AND ".join(f"{n} = {v!r}" for n, v in zip(names, prefix))
                consistency = ("global, eventually consistent" if a.index_type == "GLOBAL"
                               else "local, strongly consistent")
                rows.append(("(no duckdb)", f"index count: {a.index} ({consistency})",
                             f"COUNT(*) is the count index {a.index} keeps for the key prefix "
                             f"{where}: one read, no entries read (DuckDB runs it when "
                             "max_scan_rows is None)" + self._cached_note(plan, a, True)))
            else:
                rows.append(("(no duckdb)", "rows counted directly", "COUNT(*) of exact key "
                             "ranges (DuckDB runs it when max_scan_rows is None)" +
                             self._cached_note(plan, accesses[0])))
        else:
            rows.append(("(duckdb)", "runs the rest", plan.duck_sql))
            self._explain_duck(plan, values, explained, rows)
        return SQLResult(columns, rows)

    def _cached_note(self, plan: QueryPlan, access: Access, counted: bool = False) -> str:
        if self._key_path(plan, access) is None:
            return ""
        return ("; cached key path: later calls with the default limits bind their "
                f"parameters into the one {'count read' if counted else 'key range'}, "
                "no planning")

    def _explain_duck(self, plan: QueryPlan, values: list, explained: list, rows: list) -> None:
        """What DuckDB's own optimizer pushes into each scan (filters, columns), and the
        operators it still runs, from its physical plan. A Python scan's pushed filters are
        applied exactly by Arrow's scanner on each batch (DuckDB hands a record batch
        reader's filters and columns to ``pyarrow.dataset.Scanner.from_batches`` and does
        not check them again); a replica's by DuckDB's table scan."""
        engine = self._engine()
        sources = []
        for _, spec, replica in explained:
            if replica is not None:
                sources.append((spec.view, None, engine.replicas.view_sql(
                    replica.table_id, [c.name for c in spec.columns])))
            else:
                sources.append((spec.view, arrow_schema(spec.columns), None))
        try:
            ops = engine.explain(plan.duck_sql, values, sources)
        except WidetableError as exc:  # EXPLAIN still shows the access paths
            rows.append(("(duckdb plan)", "not available", exc.message))
            return
        scans = [o for o in ops if o["name"] in ("ARROW_SCAN", "SEQ_SCAN", "TABLE_SCAN")]
        for o in scans:
            info = o["info"]
            cols = info.get("Projections") or []
            cols = {cols} if isinstance(cols, str) else set(cols)
            table = str(info.get("Table", ""))
            mine = [e for e in explained if (e[2] is not None and table.endswith(
                f"t_{e[2].table_id}")) or (e[2] is None and o["name"] == "ARROW_SCAN" and
                                           cols <= {c.name for c in e[1].columns})]
            filters = info.get("Filters")
            if len(mine) != 1 or not filters:
                continue
            filters = [filters] if isinstance(filters, str) else list(filters)
            i, _, replica = mine[0]
            by = "DuckDB's table scan" if replica is not None else \
                "Arrow's scanner on each batch, exactly"
            name, path, pushed = rows[i]
            rows[i] = (name, path, pushed + f"; DuckDB pushed into the scan: filters "
                       f"{' AND '.join(filters)} (applied by {by})")
        still = []
        for o in ops:
            if o["name"] in ("ARROW_SCAN", "SEQ_SCAN", "TABLE_SCAN"):
                continue
            info = o["info"]
            detail = info.get("Expression") or info.get("Conditions") or info.get("Groups") \
                or info.get("Aggregates") or ""
            if isinstance(detail, list):
                detail = ", ".join(map(str, detail))
            still.append(o["name"] + (f" ({detail})" if detail else ""))
        if still:
            rows.append(("(duckdb plan)", "still done by DuckDB", "; ".join(still)))

    def _point_fits(self, plan: QueryPlan, values: list) -> bool:
        spec = plan.scans[0]
        types = dict(self._table(spec.mapping).schema.primary_key)
        return all(fits(bind(p, values).values[0], types[p.column]) for p in spec.preds)

    def _copy(self, stmt, plan: QueryPlan, values: list, limits) -> SQLResult:
        accesses = self._bind(plan, values)
        budget = self._budget(limits)
        count = self._engine().copy(plan.duck_sql, values,
                                    self._sources(plan, accesses, budget, limits[3]),
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
            self._fast.clear()
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
        self._forget_replicas()  # a table no mapping maps any more keeps no replica
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
        if self._replicas is not None:
            self._replicas.close()
        if self._duck is not None:
            self._duck.close()
            self._duck = None


def _countable(access: Access) -> bool:
    """Whether a bare COUNT(*) may count ``access``'s rows itself: its ranges return
    exactly the rows WHERE selects, and they are key or index ranges (a full scan counts
    faster from a columnar replica, a search index's total from DuckDB's path)."""
    return access.exact and access.kind in ("point", "range", "index")


def bind_value(v: object, values: list) -> object:
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
