r"""Filters and write conditions, in Tablestore's filter language, with Pythonic builders.

``col("price") >= 10`` builds a single-column condition; ``&``, ``|`` and ``~``
compose them (at most 10 sub-filters in one AND or OR, Tablestore's limit).
``col("info").regex(r"age:(\d+)", "INTEGER") > 30`` builds Tablestore's
SingleColumnValueRegexFilter: a regular expression picks a substring of a STRING
value and casts it before the comparison. ``ColumnPagination(offset, limit)``
pages over the columns of a wide row. ``Condition`` pairs a row-existence
expectation with a column filter for conditional writes.

Regular expressions are RE2's (google-re2): the syntax Tablestore documents for
its filters, matched in time linear in the value's length whatever the pattern,
so a filter sent to a server cannot make it backtrack for ever.
"""

from __future__ import annotations

import ast
import enum
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import re2

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
MAX_SUB_FILTERS = 10  # sub-filters of one AND / OR, as in Tablestore
_FLAGS = ("pass_if_missing", "latest_version_only")


class _ColumnFilter(Filter):
    """What the single-column filters share: the checks of ``column``, ``op``, ``value``
    and the flags, and ``matches`` over the newest value or every version, each value
    judged by the subclass's ``_test``."""

    __slots__ = ()

    def _check_column_op_value(self) -> None:
        check_name(self.column, "column name")  # type: ignore[attr-defined]
        if type(self.op) is not str or self.op not in _OPS:  # type: ignore[attr-defined]
            raise ParameterInvalid(f"unknown comparison {describe(self.op)}; use one of {list(_OPS)}")  # type: ignore[attr-defined]
        # The value as a write stores it (a bytearray or memoryview becomes bytes), so it
        # compares with stored values.
        object.__setattr__(self, "value", check_value(self.column, self.value))  # type: ignore[attr-defined]

    def _check_flags(self) -> None:
        for flag in _FLAGS:
            if type(getattr(self, flag)) is not bool:
                raise ParameterInvalid(
                    f"{flag} must be True or False, got {describe(getattr(self, flag))}")

    @property
    def needs_versions(self) -> bool:
        return not self.latest_version_only  # type: ignore[attr-defined]

    def _test(self, v: object) -> bool:
        raise NotImplementedError

    def matches(self, latest: Mapping[str, object], versions: Mapping[str, list] | None) -> bool:
        column = self.column  # type: ignore[attr-defined]
        if self.latest_version_only or versions is None:  # type: ignore[attr-defined]
            if column not in latest:
                return self.pass_if_missing  # type: ignore[attr-defined]
            return self._test(latest[column])
        cells = versions.get(column)
        if not cells:
            return self.pass_if_missing  # type: ignore[attr-defined]
        return any(self._test(v) for _, v in cells)


@dataclass(frozen=True, slots=True)
class SingleColumnFilter(_ColumnFilter):
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
        self._check_column_op_value()
        self._check_flags()

    def _test(self, v: object) -> bool:
        return _comparable(v, self.value) and _OPS[self.op](v, self.value)


CAST_TYPES = ("STRING", "INTEGER", "DOUBLE")  # what a regex filter casts its match to
MAX_REGEX_BYTES = 1024  # of a regex filter's pattern (RE2's program grows with it)
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the caller's error, not a log line
# The text a cast accepts: a decimal integer, or a decimal number with an optional exponent.
# Python's int() and float() also take "1_000", " 7 ", "nan" and "inf"; these do not.
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
_DOUBLE_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_NO_MATCH = object()


def compile_regex(pattern: object) -> object:
    """The compiled RE2 pattern of a regex filter; OTSParameterInvalid names a bad one."""
    if type(pattern) is not str or not pattern:
        raise ParameterInvalid(f"a regex filter's pattern must be non-empty text, got {describe(pattern)}")
    if len(pattern.encode("utf-8", "surrogatepass")) > MAX_REGEX_BYTES:
        raise ParameterInvalid(
            f"regex {describe(pattern)} is longer than {MAX_REGEX_BYTES} bytes")
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except (re2.error, UnicodeError, TypeError) as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ParameterInvalid(f"invalid regex {describe(pattern)}: {reason}") from None


@dataclass(frozen=True, slots=True)
class SingleColumnRegexFilter(_ColumnFilter):
    """Tablestore's SingleColumnValueRegexFilter: ``cast(regex match of column) op value``.

    For each value looked at (the newest, or every version), the value must be a STRING;
    ``regex`` is searched in it (RE2 syntax), and the text of its first capturing group,
    or of the whole match when it has none, is cast to ``cast_type``: ``"STRING"`` (the
    text itself), ``"INTEGER"`` (decimal digits with an optional sign, in int64) or
    ``"DOUBLE"`` (a decimal number, exponent allowed). The cast value is compared with
    ``value`` as :class:`SingleColumnFilter` compares. A value that is not a STRING, that
    the regex does not match, or whose match does not cast, does not match. A missing
    column passes only with ``pass_if_missing``, which is False by default here, as the
    official SDKs send it.
    """

    column: str
    op: str
    value: object
    regex: str
    cast_type: str = "STRING"
    pass_if_missing: bool = False
    latest_version_only: bool = True
    compiled: object = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        self._check_column_op_value()
        cast = getattr(self.cast_type, "value", self.cast_type)
        if type(cast) is not str or cast.upper() not in CAST_TYPES:
            raise ParameterInvalid(
                f"regex filter cast_type must be one of {list(CAST_TYPES)}, got {describe(self.cast_type)}")
        object.__setattr__(self, "cast_type", cast.upper())
        object.__setattr__(self, "compiled", compile_regex(self.regex))
        self._check_flags()

    def transform(self, v: object) -> object:
        """The value the comparison sees: the cast match, or ``_NO_MATCH``."""
        if type(v) is not str:
            return _NO_MATCH
        m = self.compiled.search(v)  # type: ignore[attr-defined]
        if m is None:
            return _NO_MATCH
        text = m.group(1) if self.compiled.groups else m.group(0)  # type: ignore[attr-defined]
        if text is None:  # the group took no part in the match
            return _NO_MATCH
        cast = self.cast_type
        if cast == "STRING":
            return text
        if cast == "INTEGER":
            if _INTEGER_TEXT.fullmatch(text) is None:
                return _NO_MATCH
            n = int(text)
            return n if -(2**63) <= n < 2**63 else _NO_MATCH
        if _DOUBLE_TEXT.fullmatch(text) is None:
            return _NO_MATCH
        return float(text)

    def _test(self, v: object) -> bool:
        t = self.transform(v)
        return t is not _NO_MATCH and _comparable(t, self.value) and _OPS[self.op](t, self.value)


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
        if len(self.filters) > MAX_SUB_FILTERS:
            raise ParameterInvalid(
                f"{self.op} of {len(self.filters)} filters: a composite filter holds at most "
                f"{MAX_SUB_FILTERS} sub-filters, as in Tablestore; nest them in groups"
            )
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


class _Comparisons:
    """The comparison operators and methods of a filter builder: each makes its filter
    through ``_make(op, value, **flags)``."""

    __slots__ = ()

    def _make(self, op: str, value: object, **kw: bool) -> Filter:
        raise NotImplementedError

    def __eq__(self, value: object) -> Filter:  # type: ignore[override]
        return self._make("==", value)

    def __ne__(self, value: object) -> Filter:  # type: ignore[override]
        return self._make("!=", value)

    def __gt__(self, value: object) -> Filter:
        return self._make(">", value)

    def __ge__(self, value: object) -> Filter:
        return self._make(">=", value)

    def __lt__(self, value: object) -> Filter:
        return self._make("<", value)

    def __le__(self, value: object) -> Filter:
        return self._make("<=", value)

    __hash__ = None  # type: ignore[assignment]

    def eq(self, value: object, **kw: bool) -> Filter:
        return self._make("==", value, **kw)

    def ne(self, value: object, **kw: bool) -> Filter:
        return self._make("!=", value, **kw)

    def gt(self, value: object, **kw: bool) -> Filter:
        return self._make(">", value, **kw)

    def ge(self, value: object, **kw: bool) -> Filter:
        return self._make(">=", value, **kw)

    def lt(self, value: object, **kw: bool) -> Filter:
        return self._make("<", value, **kw)

    def le(self, value: object, **kw: bool) -> Filter:
        return self._make("<=", value, **kw)


def _check_options(kw: dict) -> None:
    unknown = sorted(set(kw) - set(_FLAGS))
    if unknown:
        raise ParameterInvalid(f"unknown filter option {unknown[0]!r}; use {' or '.join(_FLAGS)}")


class col(_Comparisons):
    """Builder: ``col("price") >= 10``, ``col("x").eq(1, pass_if_missing=False)``."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = check_name(name, "column name")

    def _make(self, op: str, value: object, **kw: bool) -> SingleColumnFilter:
        _check_options(kw)
        return SingleColumnFilter(self.name, op, value, **kw)

    def regex(self, pattern: str, cast_type: str = "STRING") -> regex_col:
        r"""``col("info").regex(r"age:(\d+)", "INTEGER") > 30``: compare what ``pattern``
        picks out of the value, cast to ``cast_type`` (see SingleColumnRegexFilter)."""
        return regex_col(self.name, pattern, cast_type)


class regex_col(_Comparisons):
    """Builder of SingleColumnRegexFilter: ``col(name).regex(pattern, cast_type) op value``.

    The pattern and the cast are checked at once; ``.eq(v, pass_if_missing=True,
    latest_version_only=False)`` and the rest take the two flags."""

    __slots__ = ("cast_type", "name", "regex")

    def __init__(self, name: str, pattern: str, cast_type: str = "STRING") -> None:
        self.name = check_name(name, "column name")
        compile_regex(pattern)
        self.regex = pattern
        self.cast_type = cast_type

    def _make(self, op: str, value: object, **kw: bool) -> SingleColumnRegexFilter:
        _check_options(kw)
        return SingleColumnRegexFilter(self.name, op, value, self.regex, self.cast_type, **kw)


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
    a name on either side of a comparison is a column, and
    ``regex(info, 'age:(\\d+)', 'INTEGER') > 30`` is a SingleColumnRegexFilter.
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


def _regex_call(node: ast.AST, text: str) -> regex_col | None:
    """``regex(column, 'pattern'[, 'CAST'])`` as its builder, or None if ``node`` is no
    such call."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "regex"):
        return None
    args = node.args
    column = _column(args[0]) if args else None
    rest = [_literal(a) for a in args[1:]]
    if (node.keywords or column is None or not 1 <= len(rest) <= 2
            or any(type(v) is not str for v in rest)):
        raise ParameterInvalid(
            f"cannot parse filter {text!r}: write regex(column, 'pattern') or "
            "regex(column, 'pattern', 'INTEGER'), then a comparison")
    return regex_col(column, *rest)  # type: ignore[arg-type]


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
        for rule, other, how in ((left, right, op), (right, left, _FLIP[op])):
            made = _regex_call(rule, text)
            value = _literal(other)
            if made is not None and value is not _NO_LITERAL:
                return made._make(how, value)
    raise ParameterInvalid(
        f"cannot parse filter {text!r}: use comparisons like price >= 10 joined by and/or/not"
    )
