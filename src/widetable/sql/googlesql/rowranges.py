"""The row ranges a GoogleSQL WHERE can select, from its ``_key`` predicates.

Ranges are half-open byte intervals ``[lo, hi)``; ``hi`` None is unbounded and ``lo``
``b""`` is the first key (Bigtable keys are never empty). ``None`` for a whole answer
means the whole table. The ranges are a superset of the rows the WHERE keeps (DuckDB
still runs the whole WHERE), so anything not understood here is the whole table:

* ``_key = v``, ``_key IN (v, ...)``: points; ``< <= > >=`` and ``BETWEEN``: ranges;
* ``STARTS_WITH(_key, p)`` and ``_key LIKE 'p%...'``: the prefix range of ``p``
  (LIKE's prefix is what comes before its first wildcard or escape);
* AND intersects, OR unites; a NULL value selects nothing.

Values are the statement's literals (a STRING literal is its UTF-8, as the bind coerces
it) and its BYTES parameters. A STRING parameter is never compared with ``_key`` (the
bind rejects that), so it is not used here.
"""

from __future__ import annotations

from sqlglot import exp

from ...bigtable.types import RowRange, RowSet
from .text import PLACEHOLDER
from .types import KEY

Ranges = list[tuple[bytes, bytes | None]]
_NULL = object()


def key_row_set(where: exp.Expression | None, literals, params: dict) -> RowSet | None:
    """The RowSet to read (None: the whole table; an empty list of ranges: nothing)."""
    if where is None:
        return None
    ranges = _ranges(where.this if isinstance(where, exp.Where) else where, literals, params)
    if ranges is None:
        return None
    return RowSet(ranges=tuple(RowRange(start=lo or None, end=hi) for lo, hi in ranges))


def _value(node: exp.Expression, literals, params: dict):
    """The bytes a node stands for, ``_NULL`` for NULL, or None if not a usable constant."""
    if isinstance(node, exp.Paren):
        return _value(node.this, literals, params)
    if isinstance(node, exp.Null):
        return _NULL
    if not isinstance(node, exp.Parameter):
        return None
    name = node.name
    if name.startswith(PLACEHOLDER):
        v = literals[int(name[len(PLACEHOLDER):])]
        return v.encode("utf-8") if isinstance(v, str) else v
    value, t = params.get(name, (None, None))
    if t != "BYTES":
        return None
    return _NULL if value is None else value


def _is_key(node: exp.Expression) -> bool:
    while isinstance(node, exp.Paren):
        node = node.this
    return isinstance(node, exp.Column) and node.name == KEY


def _ranges(node: exp.Expression, literals, params: dict) -> Ranges | None:
    if isinstance(node, exp.Paren):
        return _ranges(node.this, literals, params)
    if isinstance(node, exp.And):
        a, b = _ranges(node.this, literals, params), _ranges(node.expression, literals, params)
        return b if a is None else a if b is None else intersect(a, b)
    if isinstance(node, exp.Or):
        a, b = _ranges(node.this, literals, params), _ranges(node.expression, literals, params)
        return None if a is None or b is None else unite(a + b)
    if isinstance(node, (exp.EQ, exp.LT, exp.LTE, exp.GT, exp.GTE)):
        return _compare(node, literals, params)
    if isinstance(node, exp.In) and _is_key(node.this) and not node.args.get("query"):
        out: Ranges = []
        for e in node.expressions:
            v = _value(e, literals, params)
            if v is None:
                return None
            if v is not _NULL:
                out.append((v, v + b"\x00"))
        return unite(out)
    if isinstance(node, exp.Between) and _is_key(node.this):
        lo, hi = _value(node.args["low"], literals, params), _value(node.args["high"], literals, params)
        if lo is None or hi is None:
            return None
        return [] if _NULL in (lo, hi) or lo > hi else [(lo, hi + b"\x00")]
    if isinstance(node, exp.StartsWith) and _is_key(node.this):
        p = _value(node.expression, literals, params)
        return None if p is None else [] if p is _NULL else prefix_range(p)
    if isinstance(node, exp.Like) and _is_key(node.this):
        p = _value(node.expression, literals, params)
        if p is None:
            return None
        if p is _NULL:
            return []
        cut = min((i for i, b in enumerate(p) if b in (0x25, 0x5F, 0x5C)), default=len(p))
        if cut == len(p):
            return [(p, p + b"\x00")]
        return prefix_range(p[:cut])
    return None


def _compare(node: exp.Expression, literals, params: dict) -> Ranges | None:
    left, right = node.this, node.expression
    op = type(node)
    if _is_key(right) and not _is_key(left):
        left, right = right, left
        op = {exp.LT: exp.GT, exp.LTE: exp.GTE, exp.GT: exp.LT, exp.GTE: exp.LTE}.get(op, op)
    if not _is_key(left):
        return None
    v = _value(right, literals, params)
    if v is None:
        return None
    if v is _NULL:
        return []
    if op is exp.EQ:
        return [(v, v + b"\x00")]
    if op is exp.LT:
        return [(b"", v)] if v else []
    if op is exp.LTE:
        return [(b"", v + b"\x00")]
    if op is exp.GT:
        return [(v + b"\x00", None)]
    return [(v, None)]


def prefix_range(p: bytes) -> Ranges | None:
    """``[p, next(p))``; None (everything) for an empty prefix."""
    if not p:
        return None
    stripped = p.rstrip(b"\xff")
    if not stripped:
        return [(p, None)]
    return [(p, stripped[:-1] + bytes([stripped[-1] + 1]))]


def intersect(a: Ranges, b: Ranges) -> Ranges:
    out: Ranges = []
    for lo1, hi1 in a:
        for lo2, hi2 in b:
            lo = max(lo1, lo2)
            hi = hi1 if hi2 is None else hi2 if hi1 is None else min(hi1, hi2)
            if hi is None or lo < hi:
                out.append((lo, hi))
    return unite(out)


def unite(ranges: Ranges) -> Ranges:
    out: Ranges = []
    for lo, hi in sorted(ranges, key=lambda r: r[0]):
        if out and (out[-1][1] is None or lo <= out[-1][1]):
            last_hi = out[-1][1]
            out[-1] = (out[-1][0], None if last_hi is None or hi is None else max(last_hi, hi))
        else:
            out.append((lo, hi))
    return out




def exact(node: exp.Expression, literals, types: dict) -> bool:
    """Whether the row ranges of ``node`` are exactly the rows it keeps, whatever the
    parameters' values (``types``: the declared parameter types): only ``_key``
    predicates with constant BYTES values, under AND and OR."""
    if isinstance(node, exp.Paren):
        return exact(node.this, literals, types)
    if isinstance(node, (exp.And, exp.Or)):
        return exact(node.this, literals, types) and exact(node.expression, literals, types)

    def constant(e: exp.Expression) -> bool:
        while isinstance(e, exp.Paren):
            e = e.this
        if isinstance(e, exp.Null):
            return True
        if not isinstance(e, exp.Parameter):
            return False
        return e.name.startswith(PLACEHOLDER) or types.get(e.name) == "BYTES"
    if isinstance(node, (exp.EQ, exp.LT, exp.LTE, exp.GT, exp.GTE)):
        a, b = node.this, node.expression
        return (_is_key(a) and constant(b)) or (_is_key(b) and constant(a))
    if isinstance(node, exp.In):
        return _is_key(node.this) and not node.args.get("query") and all(
            constant(e) for e in node.expressions)
    if isinstance(node, exp.Between):
        return _is_key(node.this) and constant(node.args["low"]) and constant(node.args["high"])
    if isinstance(node, exp.StartsWith):
        return _is_key(node.this) and constant(node.expression)
    if isinstance(node, exp.Like) and _is_key(node.this):
        p = node.expression
        if not (isinstance(p, exp.Parameter) and p.name.startswith(PLACEHOLDER)):
            return False
        v = literals[int(p.name[len(PLACEHOLDER):])]
        raw = v.encode("utf-8") if isinstance(v, str) else v
        body = raw[:-1] if raw.endswith(b"%") else raw
        return not any(b in (0x25, 0x5F, 0x5C) for b in body)
    return False


__all__ = ["exact", "intersect", "key_row_set", "prefix_range", "unite"]
