"""Filters and write conditions, in Tablestore's filter language, with Pythonic builders.

``col("price") >= 10`` builds a single-column condition; ``&``, ``|`` and ``~``
compose them. ``ColumnPagination(offset, limit)`` pages over the columns of a
wide row. ``Condition`` pairs a row-existence expectation with a column filter
for conditional writes.
"""

from __future__ import annotations

import ast
import enum
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..errors import ParameterInvalid, describe
from .schema import check_name
from .values import check_value


class RowExistence(str, enum.Enum):
    IGNORE = "IGNORE"
    EXPECT_EXIST = "EXPECT_EXIST"
    EXPECT_NOT_EXIST = "EXPECT_NOT_EXIST"


_OPS: dict[str, Callable[[object, object], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


def _comparable(a: object, b: object) -> bool:
    ta, tb = type(a), type(b)
    if ta is tb:
        return True
    numeric = (int, float)
    return ta in numeric and tb in numeric


class Filter:
    """Base of the filter language. Subclasses implement ``matches``."""

    __slots__ = ()

    def matches(self, latest: Mapping[str, object], versions: Mapping[str, list] | None) -> bool:
        """Whether a row passes. ``versions`` maps column to ``[(ts, value), ...]``."""
        raise NotImplementedError

    @property
    def needs_versions(self) -> bool:
        return False

    @property
    def depth(self) -> int:
        """Levels of nesting: 1 for a single-column filter."""
        return 1

    def __bool__(self) -> bool:
        # ``0 < col("n") < 3`` and ``f and g`` would keep one side and drop the other.
        raise ParameterInvalid(
            "a filter has no truth value: combine filters with &, | and ~, and write a range "
            "as (col('n') > 0) & (col('n') < 3)"
        )

    def __and__(self, other: Filter) -> Filter:
        return _joined("AND", self, _check_filter(other))

    def __or__(self, other: Filter) -> Filter:
        return _joined("OR", self, _check_filter(other))

    def __invert__(self) -> Filter:
        return CompositeFilter("NOT", (self,))


def _check_filter(f: object) -> Filter:
    if not isinstance(f, Filter):
        raise ParameterInvalid(f"expected a filter, got {describe(f)}")
    return f


def _joined(op: str, a: Filter, b: Filter) -> Filter:
    """``a op b``, flattened: ``f & g & h`` is one AND of three, not two nested ANDs, so a
    chain of any length stays within MAX_FILTER_DEPTH."""
    parts = []
    for f in (a, b):
        if type(f) is CompositeFilter and f.op == op:
            parts += f.filters
        else:
            parts.append(f)
    return CompositeFilter(op, tuple(parts))


MAX_FILTER_DEPTH = 32  # levels of AND/OR/NOT nesting a filter may have (both APIs)
_FLAGS = ("pass_if_missing", "latest_version_only")


@dataclass(frozen=True, slots=True)
class SingleColumnFilter(Filter):
    """``column op value``. A missing column passes when ``pass_if_missing``.

    With ``latest_version_only=False`` the row passes if any version matches.
    Values of incomparable types never match.
    """

    column: str
    op: str
    value: object
    pass_if_missing: bool = True
    latest_version_only: bool = True

    def __post_init__(self) -> None:
        check_name(self.column, "column name")
        if type(self.op) is not str or self.op not in _OPS:
            raise ParameterInvalid(f"unknown comparison {describe(self.op)}; use one of {list(_OPS)}")
        # The value as a write stores it (a bytearray or memoryview becomes bytes), so it
        # compares with stored values.
        object.__setattr__(self, "value", check_value(self.column, self.value))
        for flag in _FLAGS:
            if type(getattr(self, flag)) is not bool:
                raise ParameterInvalid(
                    f"{flag} must be True or False, got {describe(getattr(self, flag))}")

    @property
    def needs_versions(self) -> bool:
        return not self.latest_version_only

    def _test(self, v: object) -> bool:
        return _comparable(v, self.value) and _OPS[self.op](v, self.value)

    def matches(self, latest: Mapping[str, object], versions: Mapping[str, list] | None) -> bool:
        if self.latest_version_only or versions is None:
            if self.column not in latest:
                return self.pass_if_missing
            return self._test(latest[self.column])
        cells = versions.get(self.column)
        if not cells:
            return self.pass_if_missing
        return any(self._test(v) for _, v in cells)


@dataclass(frozen=True, slots=True)
class CompositeFilter(Filter):
    """AND, OR or NOT over sub-filters."""

    op: str
    filters: tuple[Filter, ...]
    depth: int = field(init=False, repr=False, compare=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if type(self.op) is not str or self.op not in ("AND", "OR", "NOT"):
            raise ParameterInvalid(f"unknown logical operator {describe(self.op)}; use AND, OR or NOT")
        if isinstance(self.filters, list):
            object.__setattr__(self, "filters", tuple(self.filters))
        if type(self.filters) is not tuple:
            raise ParameterInvalid(
                f"{self.op} takes a tuple or list of filters, got {describe(self.filters)}")
        if self.op == "NOT" and len(self.filters) != 1:
            raise ParameterInvalid("NOT takes exactly one filter")
        if not self.filters:
            raise ParameterInvalid(f"{self.op} needs at least one filter")
        for f in self.filters:
            _check_filter(f)
        depth = 1 + max(f.depth for f in self.filters)
        if depth > MAX_FILTER_DEPTH:
            raise ParameterInvalid(f"filter nests deeper than {MAX_FILTER_DEPTH} levels")
        object.__setattr__(self, "depth", depth)

    @property
    def needs_versions(self) -> bool:
        return any(f.needs_versions for f in self.filters)

    def matches(self, latest: Mapping[str, object], versions: Mapping[str, list] | None) -> bool:
        if self.op == "AND":
            return all(f.matches(latest, versions) for f in self.filters)
        if self.op == "OR":
            return any(f.matches(latest, versions) for f in self.filters)
        return not self.filters[0].matches(latest, versions)


@dataclass(frozen=True, slots=True)
class ColumnPagination:
    """Return ``limit`` columns of a row starting at ``offset``, in column-name order."""

    offset: int = 0
    limit: int = 1024

    def __post_init__(self) -> None:
        if type(self.offset) is not int or self.offset < 0:
            raise ParameterInvalid(f"column pagination offset must be >= 0, got {self.offset!r}")
        if type(self.limit) is not int or self.limit <= 0:
            raise ParameterInvalid(f"column pagination limit must be > 0, got {self.limit!r}")


class col:
    """Builder: ``col("price") >= 10``, ``col("x").eq(1, pass_if_missing=False)``."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = check_name(name, "column name")

    def _make(self, op: str, value: object, **kw: bool) -> SingleColumnFilter:
        unknown = sorted(set(kw) - set(_FLAGS))
        if unknown:
            raise ParameterInvalid(f"unknown filter option {unknown[0]!r}; use {' or '.join(_FLAGS)}")
        return SingleColumnFilter(self.name, op, value, **kw)

    def __eq__(self, value: object) -> SingleColumnFilter:  # type: ignore[override]
        return self._make("==", value)

    def __ne__(self, value: object) -> SingleColumnFilter:  # type: ignore[override]
        return self._make("!=", value)

    def __gt__(self, value: object) -> SingleColumnFilter:
        return self._make(">", value)

    def __ge__(self, value: object) -> SingleColumnFilter:
        return self._make(">=", value)

    def __lt__(self, value: object) -> SingleColumnFilter:
        return self._make("<", value)

    def __le__(self, value: object) -> SingleColumnFilter:
        return self._make("<=", value)

    __hash__ = None  # type: ignore[assignment]

    def eq(self, value: object, **kw: bool) -> SingleColumnFilter:
        return self._make("==", value, **kw)

    def ne(self, value: object, **kw: bool) -> SingleColumnFilter:
        return self._make("!=", value, **kw)

    def gt(self, value: object, **kw: bool) -> SingleColumnFilter:
        return self._make(">", value, **kw)

    def ge(self, value: object, **kw: bool) -> SingleColumnFilter:
        return self._make(">=", value, **kw)

    def lt(self, value: object, **kw: bool) -> SingleColumnFilter:
        return self._make("<", value, **kw)

    def le(self, value: object, **kw: bool) -> SingleColumnFilter:
        return self._make("<=", value, **kw)


@dataclass(frozen=True, slots=True)
class Condition:
    """A write condition: a row-existence expectation plus an optional column filter."""

    row_existence: RowExistence = RowExistence.IGNORE
    column_condition: Filter | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "row_existence", RowExistence(self.row_existence))
        except ValueError:
            raise ParameterInvalid(
                f"unknown row existence expectation {describe(self.row_existence)}; use IGNORE, "
                "EXPECT_EXIST or EXPECT_NOT_EXIST"
            ) from None
        if self.column_condition is not None:
            _check_filter(self.column_condition)

    @property
    def needs_row(self) -> bool:
        return self.row_existence is not RowExistence.IGNORE or self.column_condition is not None


def as_condition(condition: object) -> Condition | None:
    """Accept a Condition, a RowExistence (or its name), a Filter, or None."""
    if condition is None or isinstance(condition, Condition):
        return condition  # type: ignore[return-value]
    if isinstance(condition, Filter):
        return Condition(RowExistence.IGNORE, condition)
    if isinstance(condition, (str, RowExistence)):
        return Condition(condition)  # type: ignore[arg-type]
    raise ParameterInvalid(f"invalid condition {describe(condition)}")


_AST_OPS = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<=",
}
_FLIP = {"==": "==", "!=": "!=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}


def parse_filter(text: str) -> Filter:
    """Parse ``price >= 10 and not (city == 'x' or paid == true)`` into a Filter.

    Used by the CLI. Values are Python literals, ``true``/``false`` included;
    a name on either side of a comparison is a column.
    """
    if type(text) is not str:
        raise ParameterInvalid(f"a filter to parse must be text, got {describe(text)}")
    try:
        tree = ast.parse(text, mode="eval")
        return _from_ast(tree.body, text)
    except SyntaxError as exc:
        raise ParameterInvalid(f"cannot parse filter {describe(text)}: {exc.msg}") from None
    except (RecursionError, MemoryError):  # the parser's own limit, before ours
        raise ParameterInvalid(
            f"filter nests deeper than {MAX_FILTER_DEPTH} levels: {describe(text)}") from None


_NAMED_LITERALS = {"true": True, "false": False, "True": True, "False": False}
_NO_LITERAL = object()


def _literal(node: ast.AST) -> object:
    """The value of a literal node, or ``_NO_LITERAL``."""
    if isinstance(node, ast.Name) and node.id in _NAMED_LITERALS:
        return _NAMED_LITERALS[node.id]
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _literal(node.operand)
        if type(inner) in (int, float):
            return -inner if isinstance(node.op, ast.USub) else inner  # type: ignore[operator]
    return _NO_LITERAL


def _column(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name) and node.id not in _NAMED_LITERALS:
        return node.id
    return None


def _from_ast(node: ast.AST, text: str) -> Filter:
    if isinstance(node, ast.BoolOp):
        op = "AND" if isinstance(node.op, ast.And) else "OR"
        return CompositeFilter(op, tuple(_from_ast(v, text) for v in node.values))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return CompositeFilter("NOT", (_from_ast(node.operand, text),))
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = node.left, node.comparators[0]
        op = _AST_OPS.get(type(node.ops[0]))
        if op is None:
            raise ParameterInvalid(f"unsupported comparison in filter {text!r}")
        column, value = _column(left), _literal(right)
        if column is not None and value is not _NO_LITERAL:
            return SingleColumnFilter(column, op, value)
        column, value = _column(right), _literal(left)
        if column is not None and value is not _NO_LITERAL:
            return SingleColumnFilter(column, _FLIP[op], value)
    raise ParameterInvalid(
        f"cannot parse filter {text!r}: use comparisons like price >= 10 joined by and/or/not"
    )
