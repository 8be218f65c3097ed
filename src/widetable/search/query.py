"""The query model of ``db.search``: one frozen value object per Tablestore query type.

Values compare as the field's type does: KEYWORD and TEXT as strings (code
point order, which is UTF-8 byte order), LONG and DATE (ms) as integers,
DOUBLE as floats, BOOLEAN as booleans. On an array field a query matches when
any element does. Geo points are ``"lat,lon"`` strings (or ``(lat, lon)``),
distances in metres.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ParameterInvalid, describe

MAX_TERMS = 1024
MAX_WILDCARD = 32
MAX_BOOL_CLAUSES = 1024
OR, AND = "OR", "AND"
SCORE_MODES = ("none", "avg", "max", "min", "total")


class Query:
    """The root of every query type."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class MatchAllQuery(Query):
    pass


@dataclass(frozen=True, slots=True)
class TermQuery(Query):
    field_name: str
    column_value: object


@dataclass(frozen=True, slots=True)
class TermsQuery(Query):
    field_name: str
    column_values: tuple

    def __post_init__(self) -> None:
        if not isinstance(self.column_values, (list, tuple)) or not self.column_values:
            raise ParameterInvalid(f"TermsQuery needs a non-empty list of terms, got "
                                   f"{describe(self.column_values)}")
        if len(self.column_values) > MAX_TERMS:
            raise ParameterInvalid(f"TermsQuery takes at most {MAX_TERMS} terms, got "
                                   f"{len(self.column_values)}")
        object.__setattr__(self, "column_values", tuple(self.column_values))


@dataclass(frozen=True, slots=True)
class RangeQuery(Query):
    field_name: str
    range_from: object = None
    range_to: object = None
    include_lower: bool = True
    include_upper: bool = False

    def __post_init__(self) -> None:
        if self.range_from is None and self.range_to is None:
            raise ParameterInvalid(f"RangeQuery on {self.field_name!r} needs range_from or range_to")


@dataclass(frozen=True, slots=True)
class PrefixQuery(Query):
    field_name: str
    prefix: str


@dataclass(frozen=True, slots=True)
class WildcardQuery(Query):
    field_name: str
    value: str

    def __post_init__(self) -> None:
        if not isinstance(self.value, str) or not self.value:
            raise ParameterInvalid(f"WildcardQuery value must be a non-empty string, got "
                                   f"{describe(self.value)}")
        if len(self.value) > MAX_WILDCARD:
            raise ParameterInvalid(f"WildcardQuery value {self.value!r} is longer than "
                                   f"{MAX_WILDCARD} characters")


@dataclass(frozen=True, slots=True)
class ExistsQuery(Query):
    field_name: str


@dataclass(frozen=True, slots=True)
class BoolQuery(Query):
    must_queries: tuple = ()
    must_not_queries: tuple = ()
    filter_queries: tuple = ()
    should_queries: tuple = ()
    minimum_should_match: int | None = None  # None: 1 when there is no must/filter, else 0

    def __post_init__(self) -> None:
        n = 0
        for name in ("must_queries", "must_not_queries", "filter_queries", "should_queries"):
            qs = tuple(getattr(self, name))
            for q in qs:
                if not isinstance(q, Query):
                    raise ParameterInvalid(f"BoolQuery.{name} holds a non-query {describe(q)}")
            object.__setattr__(self, name, qs)
            n += len(qs)
        if n > MAX_BOOL_CLAUSES:
            raise ParameterInvalid(f"BoolQuery takes at most {MAX_BOOL_CLAUSES} clauses, got {n}")
        m = self.minimum_should_match
        if m is not None and (type(m) is not int or m < 0 or m > len(self.should_queries)):
            raise ParameterInvalid(f"minimum_should_match must be in [0, {len(self.should_queries)}], "
                                   f"got {describe(m)}")

    @property
    def should_needed(self) -> int:
        if self.minimum_should_match is not None:
            return self.minimum_should_match
        return 1 if self.should_queries and not (self.must_queries or self.filter_queries) else 0


@dataclass(frozen=True, slots=True)
class MatchQuery(Query):
    field_name: str
    text: str
    minimum_should_match: int | None = None
    operator: str = OR

    def __post_init__(self) -> None:
        if self.operator not in (OR, AND):
            raise ParameterInvalid(f"MatchQuery operator must be OR or AND, got {describe(self.operator)}")
        m = self.minimum_should_match
        if m is not None and (type(m) is not int or m < 1):
            raise ParameterInvalid(f"minimum_should_match must be a positive integer, got {describe(m)}")


@dataclass(frozen=True, slots=True)
class MatchPhraseQuery(Query):
    field_name: str
    text: str
    slop: int = 0

    def __post_init__(self) -> None:
        if type(self.slop) is not int or not 0 <= self.slop <= 100:
            raise ParameterInvalid(f"MatchPhraseQuery slop must be in [0, 100], got {describe(self.slop)}")


@dataclass(frozen=True, slots=True)
class NestedQuery(Query):
    path: str
    query: Query
    score_mode: str = "avg"

    def __post_init__(self) -> None:
        if self.score_mode not in SCORE_MODES:
            raise ParameterInvalid(f"NestedQuery score_mode must be one of {SCORE_MODES}, got "
                                   f"{describe(self.score_mode)}")


@dataclass(frozen=True, slots=True)
class GeoDistanceQuery(Query):
    field_name: str
    center_point: object
    distance: float  # metres

    def __post_init__(self) -> None:
        if not isinstance(self.distance, (int, float)) or isinstance(self.distance, bool) \
                or not 0 < self.distance <= 20_100_000:
            raise ParameterInvalid(f"GeoDistanceQuery distance must be in (0, 20100000] metres, got "
                                   f"{describe(self.distance)}")


@dataclass(frozen=True, slots=True)
class GeoBoundingBoxQuery(Query):
    field_name: str
    top_left: object
    bottom_right: object


@dataclass(frozen=True, slots=True)
class GeoPolygonQuery(Query):
    field_name: str
    points: tuple

    def __post_init__(self) -> None:
        if not isinstance(self.points, (list, tuple)) or len(self.points) < 3:
            raise ParameterInvalid(f"GeoPolygonQuery needs at least 3 points, got {describe(self.points)}")
        object.__setattr__(self, "points", tuple(self.points))


@dataclass(frozen=True, slots=True)
class ConstScoreQuery(Query):
    filter: Query


@dataclass(frozen=True, slots=True)
class FieldValueFactor:
    field_name: str


@dataclass(frozen=True, slots=True)
class FunctionScoreQuery(Query):
    """The query's score times the field's value (1 for a document without it). Top level only."""

    query: Query
    field_value_factor: FieldValueFactor = field(default=None)  # type: ignore[assignment]


def check_query(q: object, top: bool = True) -> Query:
    """``q`` if it is a query tree this engine runs; ParameterInvalid otherwise."""
    if not isinstance(q, Query):
        raise ParameterInvalid(f"query must be a Query, got {describe(q)}")
    if isinstance(q, FunctionScoreQuery):
        if not top:
            raise ParameterInvalid("FunctionScoreQuery is supported as the top-level query only")
        if not isinstance(q.field_value_factor, FieldValueFactor):
            raise ParameterInvalid("FunctionScoreQuery needs a FieldValueFactor")
        check_query(q.query, False)
    elif isinstance(q, BoolQuery):
        for sub in (*q.must_queries, *q.must_not_queries, *q.filter_queries, *q.should_queries):
            check_query(sub, False)
    elif isinstance(q, (ConstScoreQuery,)):
        check_query(q.filter, False)
    elif isinstance(q, NestedQuery):
        check_query(q.query, False)
    return q
