"""GoogleSQL queries the scan answers by itself, without DuckDB: the direct path.

Most queries of a Bigtable table read rows by key and pick columns out of them
(``SELECT _key, cf['q'] AS q FROM t WHERE _key = @k``). For those DuckDB's own cost (a
few milliseconds a statement) is most of the work, so a statement of this shape is
answered from the scan's batches with Arrow alone:

* every output is ``_key``, a family, or ``family['literal']`` (optionally aliased);
* the WHERE is absent or only ``_key`` predicates whose row ranges are exactly the rows it
  keeps (``rowranges``: comparisons, IN, BETWEEN and STARTS_WITH with constant values,
  LIKE with a constant ``'prefix%'``, under AND and OR);
* no GROUP BY, HAVING, DISTINCT, aggregate or window; ORDER BY absent or ``_key`` (ASC
  or DESC: a reverse scan); LIMIT and OFFSET constants or INT64 parameters;
* not ``with_history`` (its values are built for DuckDB's view).

The answer is the same as DuckDB's (the differential test checks both paths on the same
queries): the scan stops after OFFSET + LIMIT rows, and ``family['q']`` is Arrow's
``map_lookup``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from .rowranges import exact
from .text import PLACEHOLDER
from .types import KEY

_CLAUSES = {"expressions", "from", "where", "order", "limit", "offset"}


@dataclass(frozen=True)
class Shape:
    """What a direct statement outputs: per column ``(KEY,)``, ``(family,)`` or
    ``(family, qualifier)``; ``reverse`` for ORDER BY _key DESC; LIMIT/OFFSET nodes."""
    outputs: tuple[tuple, ...]
    reverse: bool
    limit: exp.Expression | None
    offset: exp.Expression | None


def shape_of(tree: exp.Select, families: set[str], literals, history: bool, types: dict
             ) -> Shape | None:
    """The direct shape of a checked statement, or None if DuckDB must run it."""
    if history or any(v for k, v in tree.args.items() if k not in _CLAUSES):
        return None
    outputs = []
    for e in tree.expressions:
        node = e.this if isinstance(e, exp.Alias) else e
        out = _output(node, families, literals)
        if out is None:
            return None
        outputs.append(out)
    where = tree.args.get("where")
    if where is not None and not exact(where.this, literals, types):
        return None
    reverse = False
    order = tree.args.get("order")
    if order is not None:
        if len(order.expressions) != 1:
            return None
        ordered = order.expressions[0]
        if not (isinstance(ordered.this, exp.Column) and ordered.this.name == KEY):
            return None
        reverse = bool(ordered.args.get("desc"))
    limit, offset = tree.args.get("limit"), tree.args.get("offset")
    limit_node = limit.expression if limit is not None else None
    offset_node = offset.expression if offset is not None else None
    if not all(_count_node(n, types) for n in (limit_node, offset_node) if n is not None):
        return None
    return Shape(tuple(outputs), reverse, limit_node, offset_node)


def _output(node: exp.Expression, families: set[str], literals) -> tuple | None:
    if isinstance(node, exp.Column):
        if node.name == KEY:
            return (KEY,)
        return (node.name,) if node.name in families else None
    if isinstance(node, exp.Bracket) and isinstance(node.this, exp.Column) \
            and node.this.name in families and len(node.expressions) == 1:
        key = node.expressions[0]
        if isinstance(key, exp.Parameter) and key.name.startswith(PLACEHOLDER):
            v = literals[int(key.name[len(PLACEHOLDER):])]
            return (node.this.name, v.encode("utf-8") if isinstance(v, str) else v)
    return None


def _count_node(node: exp.Expression, types: dict) -> bool:
    return (isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit()) or (
        isinstance(node, exp.Parameter) and types.get(node.name) == "INT64")


def count_of(node: exp.Expression | None, params: dict) -> int | None:
    """A LIMIT or OFFSET's value (None: none)."""
    if node is None:
        return None
    if isinstance(node, exp.Literal):
        return int(node.this)
    value, t = params[node.name]
    if t != "INT64" or value is None or value < 0:
        from ...errors import ParameterInvalid
        raise ParameterInvalid(f"LIMIT and OFFSET must be non-negative INT64 values, got "
                               f"@{node.name} = {value!r}")
    return int(value)


def answer(scan: Iterator[pa.RecordBatch], shape: Shape, names: list[str],
           schema: pa.Schema, offset: int, limit: int | None) -> Iterator[pa.RecordBatch]:
    """The answer's batches from the scan's (``names``: the scan's column names)."""
    where = {n: i for i, n in enumerate(names)}
    skip, left = offset, limit
    for batch in scan:
        if skip:
            cut = min(skip, batch.num_rows)
            batch, skip = batch.slice(cut), skip - cut
        if left is not None:
            batch = batch.slice(0, left)
            left -= batch.num_rows
        if batch.num_rows:
            yield pa.RecordBatch.from_arrays([_column(batch, o, where) for o in shape.outputs],
                                             schema=schema)
        if left == 0:
            return


def _column(batch: pa.RecordBatch, out: tuple, where: dict) -> pa.Array:
    col = batch.column(where[out[0]])
    if len(out) == 1:
        return col
    return pc.map_lookup(col, pa.scalar(out[1], pa.binary()), "first")


__all__ = ["Shape", "answer", "count_of", "shape_of"]
