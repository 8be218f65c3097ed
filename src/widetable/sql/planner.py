"""The planner: a parsed query -> the scans the store runs and the SQL DuckDB runs.

Pure planning over sqlglot trees; nothing here reads the store. For one query:

1. Every table reference must be a mapping table (``OTSObjectNotExist``); the
   tree is qualified against the mappings (sqlglot's ``qualify``), so every
   column names its table and ``*`` is expanded; an unknown column is
   ``OTSParameterInvalid``.
2. Each table reference becomes one :class:`ScanSpec`: the mapping, the
   columns the query uses (projection push-down), the index hint, and the
   predicates it may push down. WHERE is simplified (sqlglot's ``simplify``)
   and split into conjuncts; a conjunct on one table's column against a
   literal or ``?`` (``= < <= > >= IN BETWEEN``) becomes a :class:`Pred`.
   A table on the nullable side of an outer join takes no WHERE predicate
   (that would change which rows the join extends with NULLs); the ON
   predicates of a LEFT JOIN on its joined table do apply to that table.
3. A single-table query without aggregation, grouping, DISTINCT or ORDER BY
   whose every conjunct became a predicate may push LIMIT (+ OFFSET) into the
   scan, used when the access path turns out exact.
4. The DuckDB SQL is the qualified tree with each table reference replaced by
   its scan's registered name. DuckDB re-applies the whole WHERE, so pushed
   predicates only narrow what the store reads; none has to be exact for the
   answer to be right.

``point`` marks a query the session answers with one ``get_row`` and no
DuckDB: plain columns of one table, WHERE equality on every key column.
``direct`` marks plain columns of one table whose WHERE is all predicates (rows read
without DuckDB when the bound ranges are exact), ``count`` a bare ``COUNT(*)`` of the
same kind (rows counted without DuckDB when the ranges are exact key or index ranges).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope
from sqlglot.optimizer.simplify import simplify

from ..errors import ParameterInvalid
from .mapping import Column, Mapping, MappingCatalog


@dataclass(frozen=True, slots=True)
class Param:
    """The ``?`` parameter number ``n`` (1-based), bound per call."""

    n: int


@dataclass(frozen=True, slots=True)
class Pred:
    """A pushable conjunct: ``column op value`` (``op`` in = < <= > >=), or ``column IN values``."""

    column: str
    op: str
    values: tuple


@dataclass
class ScanSpec:
    """One table reference of a query, and what may be pushed into its scan."""

    view: str
    alias: str
    mapping: Mapping
    columns: tuple[Column, ...]
    preds: list[Pred] = field(default_factory=list)
    hint: str | None = None  # USE INDEX(name); "" for USE INDEX()
    residual: int = 0  # conjuncts of this table's WHERE that are not predicates
    limit: object = None  # int or Param: rows the scan may stop after (LIMIT + OFFSET)
    early: bool = False  # a LIMIT may stop the scan early: read in key order, not in parallel
    offset: object = None


@dataclass
class QueryPlan:
    """A planned query: its scans, DuckDB's SQL, and the point fast path if it has one."""

    scans: list[ScanSpec]
    duck_sql: str
    params: int
    point: bool = False
    direct: bool = False  # plain columns of one table: rows can come without DuckDB
    count: bool = False  # a bare COUNT(*) of one table: the rows can be counted without DuckDB
    output: list[tuple[str, Column]] = field(default_factory=list)  # the direct path's columns
    shapers: dict = field(default_factory=dict)  # the direct path's row shapers, made once


_OPS = {exp.EQ: "=", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}
_FLIP = {"=": "=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}


def plan_query(tree: exp.Expression, mappings: MappingCatalog, params: int) -> QueryPlan:
    """Plan a query tree (``statements.parse``'s); the tree is copied, never changed."""
    tree = tree.copy()
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    used: dict[str, Mapping] = {}
    for t in tree.find_all(exp.Table):
        if t.name in ctes and not t.args.get("db"):
            continue
        if t.args.get("db"):
            raise ParameterInvalid(f"table names take no database prefix, got {t.sql('mysql')!r}")
        used[t.name] = mappings.get(t.name)
    _name_outputs(tree)
    schema = {name: {c.name: c.sql_type for c in m.columns} for name, m in used.items()}
    try:
        tree = qualify(tree, schema=schema, dialect="mysql", validate_qualify_columns=True,
                       quote_identifiers=True, identify=True)
    except OptimizeError as e:
        raise ParameterInvalid(f"SQL: {_unknown(str(e))}") from None
    scans: list[ScanSpec] = []
    for scope in traverse_scope(tree):
        _plan_scope(scope, used, scans, tree)
    _push_limit(tree, scans)
    for t in list(tree.find_all(exp.Table)):
        t.set("hints", None)  # read into the scans; DuckDB has no index hints
    plan = QueryPlan(scans, tree.sql(dialect="duckdb"), params)
    _mark_point(tree, plan)
    return plan


def _unknown(message: str) -> str:
    if "could not be resolved" in message:
        return "unknown column " + message.split("'")[1].strip('"`') + " (" + message + ")"
    return message


def _name_outputs(tree: exp.Expression) -> None:
    """Give unnamed output expressions their SQL text as name (``COUNT(*)``), as MySQL does."""
    select = tree
    while isinstance(select, (exp.Union, exp.Intersect, exp.Except)):
        select = select.this
    if not isinstance(select, exp.Select):
        return
    out = []
    for e in select.expressions:
        if isinstance(e, (exp.Alias, exp.Column, exp.Star)):
            out.append(e)
        else:
            out.append(exp.alias_(e, e.sql("mysql"), quoted=True))
    select.set("expressions", out)


def _hint(table: exp.Table) -> str | None:
    hints = table.args.get("hints") or []
    for h in hints:
        if isinstance(h, exp.IndexTableHint):
            kind = str(h.this).upper()
            if kind not in ("USE", "FORCE"):
                raise ParameterInvalid(f"index hint {kind} INDEX is not supported; use USE INDEX")
            names = [e.name for e in h.expressions]
            if len(names) > 1:
                raise ParameterInvalid("USE INDEX names at most one index")
            return names[0] if names else ""
    return None


def _plan_scope(scope, used: dict[str, Mapping], scans: list[ScanSpec], root) -> None:
    select = scope.expression
    tables = {alias: src for alias, src in scope.sources.items()
              if isinstance(src, exp.Table) and src.name in used}
    if not tables:
        return
    nullable, on_preds = _joins(select) if isinstance(select, exp.Select) else (set(tables), {})
    where = select.args.get("where") if isinstance(select, exp.Select) else None
    conjuncts = _conjuncts(where.this) if where is not None else []
    for alias, table in tables.items():
        mapping = used[table.name]
        names = {c.name for c in root.find_all(exp.Column) if c.table == alias}
        columns = tuple(c for c in mapping.columns if c.name in names)
        hint = _hint(table)
        if hint is None:
            hint = mapping.search_index  # a search-index mapping reads its index
        spec = ScanSpec(f"__wt_scan_{len(scans)}", alias, mapping, columns, hint=hint)
        if alias not in nullable:
            for c in conjuncts:
                tabs = {col.table for col in c.find_all(exp.Column)}
                if tabs != {alias}:
                    if alias in tabs:
                        spec.residual += 1
                    continue
                pred = _pred(c, mapping)
                if pred is None:
                    spec.residual += 1
                else:
                    spec.preds.append(pred)
        else:
            spec.residual += len(conjuncts)
        for c in on_preds.get(alias, []):
            pred = _pred(c, mapping) if {x.table for x in c.find_all(exp.Column)} == {alias} else None
            if pred is not None:
                spec.preds.append(pred)
        table.set("this", exp.to_identifier(spec.view, quoted=True))
        scans.append(spec)


def _joins(select: exp.Select) -> tuple[set[str], dict[str, list[exp.Expression]]]:
    """The aliases on the nullable side of an outer join, and the LEFT JOIN ON conjuncts
    that may be pushed into the joined table's scan."""
    from_ = select.args.get("from")
    seen = [from_.this.alias_or_name] if from_ is not None else []
    nullable: set[str] = set()
    on_preds: dict[str, list[exp.Expression]] = {}
    for j in select.args.get("joins") or []:
        name = j.this.alias_or_name
        side = (j.side or "").upper()
        if side in ("LEFT", "FULL"):
            nullable.add(name)
        if side in ("RIGHT", "FULL"):
            nullable.update(seen)
        if side == "LEFT" and j.args.get("on") is not None:
            on_preds[name] = _conjuncts(j.args["on"])
        if not side and j.args.get("on") is not None and name not in nullable:
            on_preds[name] = _conjuncts(j.args["on"])
        seen.append(name)
    return nullable, on_preds


def _conjuncts(condition: exp.Expression) -> list[exp.Expression]:
    simple = simplify(condition.copy())
    if isinstance(simple, exp.And):
        return list(simple.flatten())
    return [simple]


def _value(node: exp.Expression) -> object:
    """A literal's Python value, a Param, or ``_NONE`` when the node is not a plain literal."""
    if isinstance(node, exp.Paren):
        return _value(node.this)
    if isinstance(node, exp.Placeholder) and node.this:
        return Param(int(node.this))
    if isinstance(node, exp.Neg):
        v = _value(node.this)
        return -v if type(v) in (int, float) else _NONE
    if isinstance(node, exp.Boolean):
        return node.this
    if isinstance(node, exp.HexString):
        try:
            return bytes.fromhex(node.this if len(node.this) % 2 == 0 else "0" + node.this)
        except ValueError:
            return _NONE
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        try:
            return int(text)
        except ValueError:
            try:
                return float(text)
            except ValueError:
                return _NONE
    return _NONE


_NONE = object()


def _pred(c: exp.Expression, mapping: Mapping) -> Pred | None:
    op = _OPS.get(type(c))
    if op is not None:
        left, right = c.this, c.expression
        if isinstance(right, exp.Column) and not isinstance(left, exp.Column):
            left, right, op = right, left, _FLIP[op]
        if not isinstance(left, exp.Column) or mapping.column(left.name) is None:
            return None
        v = _value(right)
        return None if v is _NONE else Pred(left.name, op, (v,))
    if isinstance(c, exp.In) and isinstance(c.this, exp.Column) and not c.args.get("query"):
        if mapping.column(c.this.name) is None:
            return None
        values = [_value(e) for e in c.expressions]
        if not values or any(v is _NONE for v in values):
            return None
        return Pred(c.this.name, "in", tuple(values))
    return None


def _aggregates(select: exp.Select) -> bool:
    return any(select.find_all(exp.AggFunc)) or any(select.find_all(exp.Window))


def _push_limit(tree: exp.Expression, scans: list[ScanSpec]) -> None:
    if not isinstance(tree, exp.Select) or len(scans) != 1 or tree.args.get("joins"):
        return
    if any(tree.args.get(k) for k in ("group", "having", "distinct", "order", "qualify")):
        return
    from_ = tree.args.get("from")
    if from_ is None or not isinstance(from_.this, exp.Table) or _aggregates(tree):
        return
    limit = tree.args.get("limit")
    if limit is None:
        return
    scans[0].early = True
    if scans[0].residual:
        return
    n = _value(limit.expression)
    offset = tree.args.get("offset")
    m = _value(offset.expression) if offset is not None else 0
    if n is _NONE or m is _NONE:
        return
    scans[0].limit, scans[0].offset = n, m


def _mark_count(tree: exp.Select, plan: QueryPlan) -> None:
    """Whether the query is ``SELECT COUNT(*) [AS name]`` (or ``COUNT(1)``) alone, no LIMIT
    or OFFSET (the caller checked: one table, WHERE all predicates, no grouping): ``count``,
    with its output name. COUNT(column) and COUNT(DISTINCT ...) stay with DuckDB."""
    if len(tree.expressions) != 1 or tree.args.get("limit") or tree.args.get("offset"):
        return
    e = tree.expressions[0]
    agg = e.this if isinstance(e, exp.Alias) else e
    # COUNT(*), or COUNT of a literal that is not NULL (COUNT(1)): every row counts
    if type(agg) is not exp.Count or not isinstance(agg.this, (exp.Star, exp.Literal)) or \
            agg.args.get("distinct") or agg.expressions:
        return
    plan.count = True
    plan.output = [(e.alias_or_name, None)]


def _mark_point(tree: exp.Expression, plan: QueryPlan) -> None:
    """Whether the query is plain columns of one table with nothing for DuckDB to do but
    filter (``direct``: when the bound key ranges are exact, the session reads the rows
    itself), and whether it is one row by its full key (``point``: one get_row)."""
    if len(plan.scans) != 1 or not isinstance(tree, exp.Select):
        return
    spec = plan.scans[0]
    if tree.args.get("joins") or spec.residual:
        return
    if any(tree.args.get(k) for k in ("group", "having", "distinct", "order", "qualify")):
        return
    from_ = tree.args.get("from")
    if from_ is None or not isinstance(from_.this, exp.Table):
        return
    if _aggregates(tree):
        _mark_count(tree, plan)
        return
    if (tree.args.get("limit") or tree.args.get("offset")) and spec.limit is None:
        return  # a LIMIT or OFFSET that is not a literal or ?: DuckDB's to apply
    out = []
    for e in tree.expressions:
        col = e.this if isinstance(e, exp.Alias) else e
        if not isinstance(col, exp.Column):
            return
        out.append((e.alias_or_name, spec.mapping.column(col.name)))
    plan.direct = True
    plan.output = out
    if tree.args.get("offset") or spec.hint is not None:
        return
    limit = tree.args.get("limit")
    if limit is not None:
        n = _value(limit.expression)
        if type(n) is not int or n < 1:
            return
    key = spec.mapping.primary_key
    eq = [p for p in spec.preds if p.op == "="]
    if len(eq) != len(spec.preds) or sorted(p.column for p in eq) != sorted(key):
        return
    plan.point = True
