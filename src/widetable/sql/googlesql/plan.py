"""GoogleSQL over a Bigtable table: parse (sqlglot, BigQuery dialect), check, and bind
into the SQL DuckDB runs, with the ``_key`` ranges the statement can read.

``parse_query`` runs once per statement text (the engine caches it): literals are decoded
first (``text``), the statement must be one SELECT over one table (with the table
options ``with_history => TRUE`` and ``latest_n => N``), ``*`` becomes ``_key`` and every
family, every name must be ``_key``, a family or a select alias, and every ``@param`` must
have a declared type. The table reference becomes the scan's source.

``bind`` runs per execution: each literal and parameter becomes a typed DuckDB value, then
the rewrite gives GoogleSQL's meaning where DuckDB's differs, typing just enough of the
tree to know where BYTES are:

* a STRING literal against BYTES (``_key = 'r1'``, ``cf['q']``, IN lists, LIKE) is coerced
  to BYTES, as GoogleSQL coerces literals; a STRING value that is not a literal is an
  error there (``No matching signature``);
* ``CAST(bytes AS STRING)`` decodes UTF-8 (``SAFE_CAST``: NULL when invalid), ``CAST(string
  AS BYTES)`` encodes it; ``TO_INT64(bytes)`` reads 8 big-endian bytes, ``TO_FLOAT64`` and
  ``TO_FLOAT32`` the 8 or 4 big-endian bytes of an IEEE 754 value; ``SAFE.f(...)`` is NULL
  where ``f`` raises an error;
* ``STARTS_WITH``/``ENDS_WITH``/``LIKE`` on BYTES match bytes (LIKE as a regex over hex).

``key_ranges`` derives from WHERE the row ranges that can hold an answer (a superset: the
whole WHERE still runs in DuckDB): ``_key`` compared with a value (``= < <= > >=``,
``IN``, ``BETWEEN``), ``STARTS_WITH(_key, p)`` and ``_key LIKE 'p%'``, under AND
(intersection) and OR (union).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from ...errors import ParameterInvalid
from .text import PLACEHOLDER, extract_literals
from .types import KEY, duck_type, family_type, type_name

SOURCE = "__wt_bigtable"
_LEADING_COMMENTS = re.compile(r"\A(?:\s+|--[^\n]*|#[^\n]*|/\*.*?\*/)*", re.DOTALL)
OPTIONS = ("with_history", "latest_n")
_CASTS = {exp.DataType.Type.TEXT: "STRING", exp.DataType.Type.VARCHAR: "STRING",
          exp.DataType.Type.VARBINARY: "BYTES", exp.DataType.Type.BINARY: "BYTES",
          exp.DataType.Type.BLOB: "BYTES", exp.DataType.Type.BIGINT: "INT64",
          exp.DataType.Type.DOUBLE: "FLOAT64", exp.DataType.Type.FLOAT: "FLOAT32",
          exp.DataType.Type.BOOLEAN: "BOOL"}
_SYMBOLS = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">=",
            exp.NullSafeEQ: "IS NOT DISTINCT FROM", exp.NullSafeNEQ: "IS DISTINCT FROM"}
# GoogleSQL's decoders of big-endian bytes, and the macros (MACROS) that do them
_FROM_BYTES = {"TO_INT64": "wt_to_int64", "TO_FLOAT64": "wt_to_float64",
               "TO_FLOAT32": "wt_to_float32"}
_COMPARE = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ, exp.NullSafeNEQ)


def _ieee_macro(name: str, n: int, ebits: int, mbits: int) -> str:
    """``wt_to_<name>(b)``: the IEEE 754 value of the ``n`` big-endian bytes ``b``, from its
    fields; every product is exact (a significand of at most 53 bits times a power of two)."""
    u, emax, bias = "wt_bits(b, %d, 'TO_%s', safe)" % (n, name.upper()), (1 << ebits) - 1, (1 << (ebits - 1)) - 1
    exp_, frac, sign = f"(({u} >> {mbits}) & {emax})", f"({u} & {(1 << mbits) - 1})", f"({u} >> {ebits + mbits})"
    value = (f"CASE WHEN {u} IS NULL THEN NULL WHEN {exp_} = {emax} THEN CASE WHEN {frac} <> 0 "
             f"THEN CAST('nan' AS DOUBLE) WHEN {sign} = 1 THEN CAST('-inf' AS DOUBLE) ELSE "
             f"CAST('inf' AS DOUBLE) END ELSE (CASE WHEN {sign} = 1 THEN -1.0 ELSE 1.0 END) * "
             f"CASE WHEN {exp_} = 0 THEN CAST({frac} AS DOUBLE) * pow(2.0, {1 - bias - mbits}) "
             f"ELSE CAST({frac} + {1 << mbits} AS DOUBLE) * pow(2.0, CAST({exp_} AS BIGINT) - "
             f"{bias + mbits}) END END")
    out = "DOUBLE" if n == 8 else "FLOAT"
    return f"CREATE OR REPLACE MACRO wt_to_{name}(b, safe) AS CAST({value} AS {out})"


# DuckDB macros for what GoogleSQL has and DuckDB spells otherwise (made once per database)
MACROS = (
    # the n big-endian bytes of b as an unsigned integer (TO_INT64, TO_FLOAT64, TO_FLOAT32);
    # with safe (SAFE.TO_...), NULL where there are not n bytes
    ("CREATE OR REPLACE MACRO wt_bits(b, n, what, safe) AS CASE WHEN CAST(b AS BLOB) IS NULL "
     "THEN NULL WHEN octet_length(CAST(b AS BLOB)) <> n THEN CASE WHEN safe THEN NULL ELSE "
     "error(what || ' needs the ' || n || ' bytes of a big-endian value, got ' || "
     "octet_length(CAST(b AS BLOB)) || ' bytes') END ELSE CAST(('0x' || hex(CAST(b AS BLOB))) AS "
     "UBIGINT) END"),
    ("CREATE OR REPLACE MACRO wt_to_int64(b, safe) AS CAST(CAST(wt_bits(b, 8, 'TO_INT64', safe) "
     "AS HUGEINT) - CASE WHEN wt_bits(b, 8, 'TO_INT64', safe) >= 9223372036854775808 THEN "
     "CAST(18446744073709551616 AS HUGEINT) ELSE 0 END AS BIGINT)"),
    ("CREATE OR REPLACE MACRO wt_bytes_to_string(b) AS CASE WHEN try(decode(CAST(b AS BLOB))) "
     "IS NULL AND CAST(b AS BLOB) IS NOT NULL THEN error('CAST(BYTES AS STRING): the bytes '"
     " || '0x' || hex(CAST(b AS BLOB))[1:64] || ' are not valid UTF-8; SAFE_CAST gives NULL') "
     "ELSE try(decode(CAST(b AS BLOB))) END"),
    *(_ieee_macro(name, n, ebits, mbits) for name, n, ebits, mbits in (
        ("float64", 8, 11, 52), ("float32", 4, 8, 23))),
    "CREATE OR REPLACE MACRO wt_starts_with(x, p) AS x[1:octet_length(p)] = p",
    ("CREATE OR REPLACE MACRO wt_ends_with(x, p) AS octet_length(p) = 0 OR "
     "(octet_length(x) >= octet_length(p) AND x[octet_length(x) - octet_length(p) + 1:] = p)"),
)


@dataclass(frozen=True)
class Parsed:
    """One checked statement, not yet bound to values."""
    table: str
    tree: exp.Select  # placeholders intact; the table reference is SOURCE
    families: tuple[tuple[str, str | None], ...]  # (name, aggregate) the statement reads
    history: bool
    latest_n: int | None
    names: tuple[str, ...]  # the answer's column names ("" for an unnamed expression)
    literals: tuple[str | bytes, ...]
    params: tuple[str, ...]  # the @params it uses


def parse_query(text: str, families_of) -> Parsed:
    """Check ``text``; ``families_of(table)`` gives a table's {family: aggregate} (and
    raises ObjectNotExist for an unknown table). ParameterInvalid naming what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise ParameterInvalid("the query is empty")
    clean, literals = extract_literals(text)
    words = _LEADING_COMMENTS.sub("", clean).split(None, 1)
    if not words:
        raise ParameterInvalid("the query is empty")
    if words[0].upper() not in ("SELECT", "WITH") and not words[0].startswith("("):
        raise ParameterInvalid(f"Syntax error: Unexpected {words[0][:40]!r}: a query "
                               "starts with SELECT")
    try:
        trees = [t for t in sqlglot.parse(clean, read="bigquery") if t is not None]
    except (ParseError, TokenError) as exc:
        raise ParameterInvalid(f"Syntax error: {_first_line(exc)}") from None
    if len(trees) != 1:
        raise ParameterInvalid(f"expected one statement, got {len(trees)}")
    tree = trees[0]
    if not isinstance(tree, exp.Select):
        raise ParameterInvalid(f"only SELECT queries are supported, got {tree.key.upper()}")
    _check_shape(tree)
    table, alias, history, latest_n = _table_of(tree)
    all_families = families_of(table)
    _expand_star(tree, all_families)
    names = _output_names(tree)
    used = _check_names(tree, table, alias, all_families)
    params = tuple(sorted({p.name for p in tree.find_all(exp.Parameter)
                           if not p.name.startswith(PLACEHOLDER)}))
    families = tuple((f, all_families[f]) for f in sorted(all_families) if f in used)
    return Parsed(table, tree, families, history, latest_n, tuple(names), tuple(literals), params)


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _check_shape(tree: exp.Select) -> None:
    for kind, what in ((exp.With, "WITH"), (exp.Join, "JOIN"), (exp.Lateral, "LATERAL"),
                       (exp.Unnest, "UNNEST"), (exp.Window, "window functions")):
        if tree.find(kind) is not None:
            raise ParameterInvalid(f"{what} is not supported in a Bigtable query")
    for sub in tree.find_all(exp.Select, exp.Union):
        if sub is not tree:
            raise ParameterInvalid("subqueries are not supported in a Bigtable query")
    from_ = tree.args.get("from")
    if from_ is None:
        raise ParameterInvalid("the query must read a table: SELECT ... FROM <table>")


def _table_of(tree: exp.Select) -> tuple[str, str | None, bool, int | None]:
    ref = tree.args["from"].this
    if not isinstance(ref, exp.Table) or ref.args.get("db") or ref.args.get("catalog"):
        raise ParameterInvalid(f"FROM must name one table of the instance, got {ref.sql('bigquery')}")
    history, latest_n = False, None
    target = ref.this
    if isinstance(target, exp.Anonymous):  # t(with_history => TRUE, latest_n => 3)
        name = target.name
        for arg in target.expressions:
            if not isinstance(arg, exp.Kwarg):
                raise ParameterInvalid(f"table {name!r}: options are written name => value, "
                                       f"got {arg.sql('bigquery')}")
            option, value = arg.this.name.lower(), arg.expression
            if option == "with_history":
                if not isinstance(value, exp.Boolean):
                    raise ParameterInvalid(f"with_history must be TRUE or FALSE, got {value.sql('bigquery')}")
                history = bool(value.this)
            elif option == "latest_n":
                if not (isinstance(value, exp.Literal) and not value.is_string
                        and value.this.isdigit() and int(value.this) > 0):
                    raise ParameterInvalid(f"latest_n must be a positive integer, got {value.sql('bigquery')}")
                latest_n = int(value.this)
            else:
                raise ParameterInvalid(f"table option {option!r} is not supported (one of {OPTIONS})")
        if latest_n is not None and not history:
            raise ParameterInvalid("latest_n needs with_history => TRUE")
    elif isinstance(target, exp.Identifier):
        name = target.name
    else:
        raise ParameterInvalid(f"FROM must name one table, got {ref.sql('bigquery')}")
    alias = ref.alias or None
    ref.replace(exp.Table(this=exp.to_identifier(SOURCE, quoted=True),
                          alias=exp.TableAlias(this=exp.to_identifier(alias or name, quoted=True))))
    return name, alias, history, latest_n


def _expand_star(tree: exp.Select, families: dict) -> None:
    out = []
    for e in tree.expressions:
        star = e if isinstance(e, exp.Star) else (e.this if isinstance(e, exp.Column)
                                                  and isinstance(e.this, exp.Star) else None)
        if star is None:
            out.append(e)
            continue
        if star.args.get("rename"):
            raise ParameterInvalid("SELECT * RENAME is not supported")
        columns = [KEY, *sorted(families)]
        dropped = [c.name for c in star.args.get("except") or []]
        replaced = {a.alias: a for a in star.args.get("replace") or []}
        for name in [*dropped, *replaced]:
            if name not in columns:
                raise ParameterInvalid(f"Column {name} in SELECT * EXCEPT/REPLACE list does not "
                                       f"exist (the columns are {columns})")
        if len(set(dropped)) < len(dropped) or len(columns) == len(set(dropped)):
            raise ParameterInvalid(f"SELECT * EXCEPT ({', '.join(dropped)}) must name each column "
                                   "once and leave at least one")
        for name in columns:
            if name in replaced:
                out.append(replaced[name])
            elif name not in dropped:
                out.append(exp.column(exp.to_identifier(name, quoted=name != KEY)))
    tree.set("expressions", out)


def _output_names(tree: exp.Select) -> list[str]:
    names = []
    for e in tree.expressions:
        if isinstance(e, exp.Alias):
            names.append(e.alias)
        elif isinstance(e, exp.Column):
            names.append(e.name)
        else:
            names.append("")
    return names


def _check_names(tree: exp.Select, table: str, alias: str | None, families: dict) -> set[str]:
    """The families the statement reads; ParameterInvalid for a name that is none of
    ``_key``, a family or a select alias."""
    used: set[str] = set()
    known = {e.alias for e in tree.expressions if isinstance(e, exp.Alias)}
    for col in tree.find_all(exp.Column):
        qualifier = col.table
        if qualifier and qualifier not in (alias or table,):
            raise ParameterInvalid(f"Unrecognized name: {qualifier}")
        name = col.name
        if name == KEY:
            continue
        if name in families:
            used.add(name)
        elif name not in known or qualifier:
            raise ParameterInvalid(
                f"Unrecognized name: {name} (table {table!r} has _key and the column families "
                f"{sorted(families)})")
    return used


# -- binding -----------------------------------------------------------------------------

class _NeedsValues(Exception):
    """The rewrite needs a parameter's value (LIKE on BYTES with a parameter pattern)."""


def template(parsed: Parsed, types: dict[str, object]) -> str | None:
    """The DuckDB SQL of ``parsed`` with each parameter a typed ``$name`` (run with the
    values as DuckDB's named parameters: made once per plan), or None when the rewrite
    needs the values themselves (then ``bind`` per call)."""
    try:
        return _generate(parsed, {n: (None, t) for n, t in types.items()}, placeholders=True)
    except _NeedsValues:
        return None


def bind(parsed: Parsed, params: dict[str, tuple[object, object]]) -> str:
    """The DuckDB SQL of ``parsed`` with ``params`` (name -> (value, type)) inlined."""
    return _generate(parsed, params, placeholders=False)


def _generate(parsed: Parsed, params: dict, placeholders: bool) -> str:
    tree = parsed.tree.copy()
    types = dict(_family_types(parsed))
    for node in list(tree.find_all(exp.Parameter)):
        name = node.name
        if name.startswith(PLACEHOLDER):
            value = parsed.literals[int(name[len(PLACEHOLDER):])]
            node.replace(_bytes_node(value) if isinstance(value, bytes) else exp.Literal.string(value))
        else:
            value, t = params[name]
            typed = exp.Cast(this=node.copy(), to=exp.DataType.build(duck_type(t), dialect="duckdb")) \
                if placeholders else _value_node(value, t)
            typed.meta["param"] = name
            node.replace(typed)
    tree = _rewrite(tree, types)
    for i, e in enumerate(tree.expressions):
        if not isinstance(e, exp.Alias):
            e.replace(exp.alias_(e.copy(), f"__wt_c{i}", quoted=True))
    return tree.sql("duckdb")


def _family_types(parsed: Parsed):
    for name, agg in parsed.families:
        yield name, family_type(agg, parsed.history)


def _bytes_node(value: bytes) -> exp.Expression:
    return exp.Anonymous(this="unhex", expressions=[exp.Literal.string(value.hex())])


def _value_node(value: object, t: object) -> exp.Expression:
    """A parameter's value as a typed DuckDB expression."""
    duck = exp.DataType.build(duck_type(t), dialect="duckdb")
    if value is None:
        return exp.Cast(this=exp.null(), to=duck)
    if t == "BYTES":
        return _bytes_node(value)  # type: ignore[arg-type]
    if t in ("STRING", "TIMESTAMP", "DATE"):
        text = value.isoformat() if isinstance(value, (dt.date, dt.datetime)) else value
        return exp.Cast(this=exp.Literal.string(text), to=duck)
    if t == "BOOL":
        return exp.Cast(this=exp.Boolean(this=bool(value)), to=duck)
    if t in ("FLOAT32", "FLOAT64"):
        f = float(value)  # type: ignore[arg-type]
        lit = exp.Literal.string(repr(f)) if math.isinf(f) or math.isnan(f) else exp.Literal.number(repr(f))
        return exp.Cast(this=lit, to=duck)
    if t == "INT64":
        return exp.Cast(this=exp.Literal.number(int(value)), to=duck)  # type: ignore[call-overload]
    if isinstance(t, tuple) and t[0] == "ARRAY":
        return exp.Cast(this=exp.Array(expressions=[_value_node(v, t[1]) for v in value]),  # type: ignore[attr-defined]
                        to=duck)
    raise ParameterInvalid(f"parameters of type {type_name(t)} are not supported")


def type_of(node: exp.Expression, types: dict) -> object:
    """The GoogleSQL type of ``node`` where the rewrite needs it (None: not known)."""
    if isinstance(node, exp.Paren):
        return type_of(node.this, types)
    if isinstance(node, exp.Column):
        return "BYTES" if node.name == KEY else types.get(node.name)
    if isinstance(node, exp.Bracket):
        t = type_of(node.this, types)
        return t[2] if isinstance(t, tuple) and t[0] == "MAP" else None
    if isinstance(node, exp.Anonymous) and node.name.lower() == "unhex":
        return "BYTES"
    if isinstance(node, exp.Cast):
        return _CASTS.get(node.to.this)
    if isinstance(node, exp.Literal) and node.is_string:
        return "STRING"
    return None


def _string_literal(node: exp.Expression) -> bool:
    return isinstance(node, exp.Literal) and node.is_string


def _coerce(node: exp.Expression, other: exp.Expression, types: dict, op: str) -> exp.Expression:
    """``node`` as BYTES when ``other`` is BYTES: a STRING literal is coerced; any other
    STRING is GoogleSQL's type error."""
    if type_of(other, types) != "BYTES":
        return node
    if _string_literal(node):
        return _bytes_node(node.this.encode("utf-8"))
    if type_of(node, types) == "STRING":
        what = f"@{node.meta['param']}" if "param" in node.meta else node.sql("bigquery")
        raise ParameterInvalid(f"No matching signature for operator {op} for argument types: "
                               f"BYTES, STRING ({what})")
    return node


def _rewrite(node: exp.Expression, types: dict) -> exp.Expression:
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expression):
            node.set(key, _rewrite(value, types))
        elif isinstance(value, list):
            node.set(key, [_rewrite(v, types) if isinstance(v, exp.Expression) else v for v in value])
    return _rewrite_node(node, types)


def _rewrite_node(node: exp.Expression, types: dict) -> exp.Expression:
    if isinstance(node, _COMPARE):
        op = _SYMBOLS.get(type(node), node.key.upper())
        node.set("this", _coerce(node.this, node.expression, types, op))
        node.set("expression", _coerce(node.expression, node.this, types, op))
        return node
    if isinstance(node, exp.In):
        node.set("expressions", [_coerce(e, node.this, types, "IN") for e in node.expressions])
        return node
    if isinstance(node, exp.Between):
        for side in ("low", "high"):
            node.set(side, _coerce(node.args[side], node.this, types, "BETWEEN"))
        return node
    if isinstance(node, exp.Bracket):
        t = type_of(node.this, types)
        if isinstance(t, tuple) and t[0] == "MAP" and t[1] == "BYTES":
            node.set("expressions", [_coerce(e, _bytes_node(b""), types, "[]")
                                     for e in node.expressions])
        return node
    if isinstance(node, (exp.StartsWith, exp.EndsWith)) and type_of(node.this, types) == "BYTES":
        pattern = _coerce(node.expression, node.this, types, node.key.upper())
        macro = "wt_starts_with" if isinstance(node, exp.StartsWith) else "wt_ends_with"
        return exp.Anonymous(this=macro, expressions=[node.this, pattern])
    if isinstance(node, exp.Like) and type_of(node.this, types) == "BYTES":
        return _bytes_like(node, types)
    if isinstance(node, (exp.Cast, exp.TryCast)):
        return _cast(node, types)
    if isinstance(node, exp.Dot) and isinstance(node.this, exp.Identifier) \
            and node.this.name.upper() == "SAFE" and isinstance(node.expression, exp.Func):
        # SAFE.f(...): NULL where f would raise an error. sqlglot leaves f unknown after
        # SAFE., so f is made again as the function its name is
        f = node.expression
        if isinstance(f, exp.Anonymous) and f.name in _FROM_BYTES.values():
            return exp.Anonymous(this=f.name, expressions=[f.expressions[0], exp.true()])
        if isinstance(f, exp.Anonymous):
            f = exp.func(f.name, *f.expressions, dialect="bigquery")
        return exp.Anonymous(this="try", expressions=[f])
    if isinstance(node, exp.Anonymous):
        name = node.name.upper()
        if name in _FROM_BYTES:
            if len(node.expressions) != 1:
                raise ParameterInvalid(f"{name} takes one BYTES argument, got "
                                       f"{len(node.expressions)}")
            arg = _coerce(node.expressions[0], _bytes_node(b""), types, name)
            t = "INT64" if isinstance(arg, exp.Literal) and not arg.is_string else type_of(arg, types)
            if t not in ("BYTES", None):
                raise ParameterInvalid(f"No matching signature for function {name} for argument "
                                       f"types: {type_name(t)} (it takes BYTES)")
            return exp.Anonymous(this=_FROM_BYTES[name], expressions=[arg, exp.false()])
        if name == "MAP_CONTAINS_KEY" and len(node.expressions) == 2:
            m, k = node.expressions
            t = type_of(m, types)
            if isinstance(t, tuple) and t[1] == "BYTES":
                k = _coerce(k, _bytes_node(b""), types, "MAP_CONTAINS_KEY")
            return exp.Anonymous(this="map_contains", expressions=[m, k])
    return node


def _cast(node: exp.Cast, types: dict) -> exp.Expression:
    source, target = type_of(node.this, types), _CASTS.get(node.to.this)
    safe = isinstance(node, exp.TryCast) or bool(node.args.get("safe"))
    if source == "BYTES" and target == "STRING" and not _string_literal(node.this):
        if safe:
            return exp.Anonymous(this="try", expressions=[
                exp.Anonymous(this="decode", expressions=[node.this])])
        return exp.Anonymous(this="wt_bytes_to_string", expressions=[node.this])
    if source == "STRING" and target == "BYTES":
        return exp.Anonymous(this="encode", expressions=[node.this])
    return node


def _bytes_like(node: exp.Like, types: dict) -> exp.Expression:
    pattern = node.expression
    if _string_literal(pattern):
        raw = pattern.this.encode("utf-8")
    elif isinstance(pattern, exp.Anonymous) and pattern.name.lower() == "unhex":
        raw = bytes.fromhex(pattern.expressions[0].this)
    elif isinstance(pattern, exp.Cast) and isinstance(pattern.this, exp.Null):
        return exp.Cast(this=exp.null(), to=exp.DataType.build("BOOLEAN"))
    elif isinstance(pattern, exp.Cast) and isinstance(pattern.this, exp.Parameter) \
            and _CASTS.get(pattern.to.this) == "BYTES":
        raise _NeedsValues(pattern.this.name)
    else:
        _coerce(pattern, node.this, types, "LIKE")
        raise ParameterInvalid("LIKE on BYTES needs a constant pattern, got "
                               f"{pattern.sql('bigquery')}")
    regex, escaped = [], False
    for b in raw:  # '%' any bytes, '_' one byte, '\\' makes the next byte itself
        if escaped or b not in (0x25, 0x5F, 0x5C):
            regex.append(f"{b:02X}")
            escaped = False
        elif b == 0x5C:
            escaped = True
        else:
            regex.append("(..)*" if b == 0x25 else "..")
    if escaped:
        raise ParameterInvalid(f"LIKE pattern {raw!r:.80} ends with an escape character")
    return exp.Anonymous(this="regexp_full_match", expressions=[
        exp.Anonymous(this="hex", expressions=[node.this]), exp.Literal.string("".join(regex))])


__all__ = ["MACROS", "SOURCE", "Parsed", "bind", "parse_query", "template", "type_of"]
