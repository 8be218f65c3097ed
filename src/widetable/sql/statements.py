"""Statements: the pre-pass, parsing with sqlglot's MySQL dialect, and what each statement is.

sqlglot parses every statement it knows. A small pre-pass recognises the few
forms of Tablestore's dialect that sqlglot does not parse (``SHOW INDEX IN t``,
``DROP MAPPING TABLE t``) and ``EXPLAIN`` (which sqlglot reads as DESCRIBE);
nothing here is a hand-written parser of SQL.

``parse(text)`` returns one :class:`Statement`; a syntax error is
``OTSParameterInvalid`` quoting sqlglot's position. ``?`` parameters are
numbered in text order (``$1``, ``$2``, ...), so later rewrites that reorder
predicates cannot mix them up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from ..errors import ParameterInvalid
from .mapping import Column, column_of

_NAME = r"`?([A-Za-z_][A-Za-z0-9_\-.]*)`?"
_EXPLAIN = re.compile(r"^\s*EXPLAIN\s+(.+)$", re.I | re.S)
_SHOW_INDEX = re.compile(rf"^\s*SHOW\s+(?:INDEX|INDEXES|KEYS)\s+(?:IN|FROM)\s+{_NAME}\s*$", re.I)
_DROP_MAPPING = re.compile(rf"^\s*DROP\s+MAPPING\s+TABLE\s+(IF\s+EXISTS\s+)?{_NAME}\s*$", re.I)

QUERY_TYPES = (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery)


@dataclass
class Statement:
    """One parsed statement. ``kind`` is one of: query, explain, copy, create, alter_add,
    alter_drop, drop_mapping, describe, show_tables, show_index."""

    kind: str
    name: str = ""  # the mapping a DDL statement names
    query: exp.Expression | None = None
    columns: list[Column] = field(default_factory=list)
    primary_key: list[str] = field(default_factory=list)
    column: str = ""
    path: str = ""
    copy_format: str = "parquet"
    if_exists: bool = False
    params: int = 0  # how many ? parameters
    table: str = ""  # the data table a CREATE maps
    search_index: str | None = None  # ENGINE='searchindex': the index it maps


def parse(text: str) -> Statement:
    """Parse one statement (a trailing ``;`` is allowed)."""
    if not isinstance(text, str) or not text.strip():
        raise ParameterInvalid("SQL statement must be a non-empty string")
    body = text.strip().rstrip(";").strip()
    m = _EXPLAIN.match(body)
    if m:
        inner = parse(m.group(1))
        if inner.kind != "query":
            raise ParameterInvalid("EXPLAIN takes a SELECT statement")
        inner.kind = "explain"
        return inner
    m = _SHOW_INDEX.match(body)
    if m:
        return Statement("show_index", name=m.group(1))
    m = _DROP_MAPPING.match(body)
    if m:
        return Statement("drop_mapping", name=m.group(2), if_exists=bool(m.group(1)))
    tree = _parse_sql(body)
    return _classify(tree, body)


def _parse_sql(body: str) -> exp.Expression:
    try:
        trees = sqlglot.parse(body, read="mysql")
    except (ParseError, TokenError) as e:
        raise ParameterInvalid(f"SQL syntax error: {_first_line(e)}") from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise ParameterInvalid(f"one SQL statement at a time, got {len(trees)}")
    return trees[0]


def _first_line(e: Exception) -> str:
    errors = getattr(e, "errors", None)
    if errors:
        d = errors[0]
        return (f"{d.get('description')} at line {d.get('line')}, column {d.get('col')} "
                f"near {d.get('highlight')!r}")
    return str(e).splitlines()[0]


def _number_params(tree: exp.Expression, body: str = "") -> tuple[exp.Expression, int]:
    """Number the ``?`` of ``tree`` in the order they appear in the text (``$1``, ``$2``...).

    sqlglot's tree holds clauses in its own order (LIMIT before WHERE), so the order
    comes from the statement as MySQL writes it: clause order, except ``LIMIT a, b``
    where the offset comes first in the text.
    """
    marks = [n for n in tree.find_all(exp.Placeholder) if not n.this]
    if not marks:
        return tree, 0
    for k, node in enumerate(marks):
        node.set("this", f"wtp{k}")
    generated = tree.sql("mysql")
    order = [int(m) for m in re.findall(r":wtp(\d+)", generated)]
    comma_limits = iter(_comma_limits(body))
    for m in re.finditer(r"LIMIT :wtp(\d+) OFFSET :wtp(\d+)", generated):
        if next(comma_limits, False):
            a, b = order.index(int(m.group(1))), order.index(int(m.group(2)))
            order[a], order[b] = order[b], order[a]
    position = {k: i + 1 for i, k in enumerate(order)}
    for k, node in enumerate(marks):
        node.set("this", str(position[k]))
    return tree, len(marks)


def _comma_limits(body: str) -> list[bool]:
    """For each LIMIT of ``body`` that takes two ``?``, whether it is written ``LIMIT ?, ?``."""
    from sqlglot.tokens import TokenType
    tokens = sqlglot.Dialect.get_or_raise("mysql").tokenize(body)
    out = []
    for i, t in enumerate(tokens):
        if t.token_type == TokenType.LIMIT and i + 1 < len(tokens):
            nxt = [x.token_type for x in tokens[i + 1:i + 4]]
            if nxt[:1] == [TokenType.PLACEHOLDER]:
                if nxt == [TokenType.PLACEHOLDER, TokenType.COMMA, TokenType.PLACEHOLDER]:
                    out.append(True)
                elif len(nxt) >= 3 and nxt[1] == TokenType.OFFSET:
                    out.append(False)
    return out


def _table_name(node: exp.Expression | None) -> str:
    table = node.find(exp.Table) if node is not None and not isinstance(node, exp.Table) else node
    if not isinstance(table, exp.Table) or not table.name:
        raise ParameterInvalid("the statement must name a table")
    if table.args.get("db"):
        raise ParameterInvalid(f"table names take no database prefix, got {table.sql('mysql')!r}")
    return table.name


def _classify(tree: exp.Expression, body: str) -> Statement:
    if isinstance(tree, QUERY_TYPES):
        tree, n = _number_params(tree, body)
        return Statement("query", query=tree, params=n)
    if isinstance(tree, exp.Copy):
        return _copy(tree)
    if isinstance(tree, exp.Create) and str(tree.args.get("kind", "")).upper() == "TABLE":
        return _create(tree)
    if isinstance(tree, exp.Alter):
        return _alter(tree)
    if isinstance(tree, exp.Describe):
        if isinstance(tree.this, QUERY_TYPES):
            tree, n = _number_params(tree.this, body)
            return Statement("explain", query=tree, params=n)
        return Statement("describe", name=_table_name(tree.this))
    if isinstance(tree, exp.Show) and str(tree.name).upper() == "TABLES":
        return Statement("show_tables")
    if isinstance(tree, exp.Drop):
        raise ParameterInvalid("SQL cannot drop data tables; DROP MAPPING TABLE removes a mapping")
    word = body.split(None, 1)[0].upper() if body.split() else ""
    raise ParameterInvalid(f"SQL statement {word!r} is not supported: use SELECT, EXPLAIN, "
                           "CREATE TABLE, ALTER TABLE, DROP MAPPING TABLE, DESCRIBE, SHOW TABLES, "
                           "SHOW INDEX or COPY")


def _create(tree: exp.Create) -> Statement:
    schema = tree.this
    if not isinstance(schema, exp.Schema):
        raise ParameterInvalid("CREATE TABLE must declare its columns and PRIMARY KEY(...)")
    name = _table_name(schema.this)
    props = tree.args.get("properties")
    engine, attribute = None, None
    for p in (props.expressions if props else []):
        if isinstance(p, exp.EngineProperty):
            engine = p.this.name if isinstance(p.this, exp.Expression) else str(p.this)
        elif isinstance(p, exp.Property) and p.name.upper() == "ENGINE_ATTRIBUTE":
            value = p.args.get("value")
            attribute = value.name if isinstance(value, exp.Expression) else str(value)
    table, search_index = name, None
    if engine is not None:
        if engine.lower() != "searchindex":
            raise ParameterInvalid(f"ENGINE={engine!r} is not supported; mapping tables map a "
                                   "data table, or a search index with ENGINE='searchindex'")
        table, search_index = _search_attribute(attribute, name)
    columns: list[Column] = []
    pk: list[str] = []
    for e in schema.expressions:
        if isinstance(e, exp.ColumnDef):
            kind = e.args.get("kind")
            if kind is None:
                raise ParameterInvalid(f"column {e.name!r} needs a type")
            columns.append(column_of(e.name, kind.sql("mysql")))
            for c in e.args.get("constraints") or []:
                if isinstance(c.kind, exp.PrimaryKeyColumnConstraint):
                    pk.append(e.name)
        elif isinstance(e, exp.PrimaryKey):
            pk.extend(c.name for c in e.expressions)
        else:
            raise ParameterInvalid(f"unsupported item in CREATE TABLE: {e.sql('mysql')!r}")
    if not pk:
        raise ParameterInvalid(f"CREATE TABLE {name} must declare PRIMARY KEY(...)")
    return Statement("create", name=name, columns=columns, primary_key=pk, table=table,
                     search_index=search_index)


def _search_attribute(attribute: str | None, name: str) -> tuple[str, str]:
    """``(table, index)`` of ENGINE_ATTRIBUTE='{"index_name": ..., "table_name": ...}'."""
    import json
    try:
        d = json.loads(attribute) if attribute else None
    except ValueError:
        d = None
    if not isinstance(d, dict) or not isinstance(d.get("index_name"), str) \
            or not isinstance(d.get("table_name"), str):
        raise ParameterInvalid(
            f"mapping {name!r} with ENGINE='searchindex' needs ENGINE_ATTRIBUTE="
            "'{\"index_name\": \"...\", \"table_name\": \"...\"}'")
    return d["table_name"], d["index_name"]


def _alter(tree: exp.Alter) -> Statement:
    name = _table_name(tree.this)
    actions = tree.args.get("actions") or []
    if len(actions) != 1:
        raise ParameterInvalid("ALTER TABLE takes one ADD COLUMN or DROP COLUMN per statement")
    action = actions[0]
    if isinstance(action, exp.ColumnDef):
        kind = action.args.get("kind")
        if kind is None:
            raise ParameterInvalid(f"column {action.name!r} needs a type")
        return Statement("alter_add", name=name, columns=[column_of(action.name, kind.sql("mysql"))])
    if isinstance(action, exp.Drop) and str(action.args.get("kind", "")).upper() == "COLUMN":
        return Statement("alter_drop", name=name, column=action.this.name)
    raise ParameterInvalid(f"ALTER TABLE supports ADD COLUMN and DROP COLUMN, got "
                           f"{action.sql('mysql')!r}")


def _copy(tree: exp.Copy) -> Statement:
    query = tree.this
    if isinstance(query, exp.Subquery):
        query = query.this
    if not isinstance(query, QUERY_TYPES) or tree.args.get("kind"):
        raise ParameterInvalid("COPY takes the form COPY (SELECT ...) TO 'file.parquet'")
    files = tree.args.get("files") or []
    if len(files) != 1 or not isinstance(files[0], exp.Literal) or not files[0].is_string:
        raise ParameterInvalid("COPY ... TO needs one quoted file name")
    path = files[0].this
    fmt = "parquet"
    for p in tree.args.get("params") or []:
        if p.this and p.this.name.upper() == "FORMAT":
            fmt = (p.args.get("expression") or p.expression).name.lower()
    if path.lower().endswith((".arrow", ".feather", ".ipc")):
        fmt = "arrow"
    if fmt not in ("parquet", "arrow", "csv"):
        raise ParameterInvalid(f"COPY format must be parquet, arrow or csv, got {fmt!r}")
    query, n = _number_params(query, tree.sql("mysql"))
    return Statement("copy", query=query, path=path, copy_format=fmt, params=n)
