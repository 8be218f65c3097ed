"""Query model -> a tantivy query of one shard (through the adapter's ``q_*`` builders).

What tantivy cannot answer by itself is resolved into a set of row ids first
(``Shard.q_ids``), which then composes with everything else (inside Bool,
must_not included):

* keyword (and token) ranges: the field's term dictionary, filtered in Python;
* geo queries: candidate geohash cells, then the exact test on the stored points;
* a fuzzy-analyzed TEXT match longer than its n-grams: candidates holding every
  longest n-gram, then an exact substring test;
* Nested: the child documents that match, mapped to their owner rows.
"""

from __future__ import annotations

import math
from functools import lru_cache

from ..errors import ParameterInvalid, describe
from . import analyzers, geo
from .documents import (
    ROW_ID, FieldLayout, Rejected, Slot, as_points, convert_scalar, decode_src, doc_id,
)
from .query import (
    AND, BoolQuery, ConstScoreQuery, ExistsQuery, FunctionScoreQuery, GeoBoundingBoxQuery,
    GeoDistanceQuery, GeoPolygonQuery, MatchAllQuery, MatchPhraseQuery, MatchQuery, NestedQuery,
    PrefixQuery, Query, RangeQuery, TermQuery, TermsQuery, WildcardQuery,
)
from .schema import DATE, DOUBLE, FUZZY, GEO_POINT, KEYWORD, LONG, NESTED, TEXT

_REGEX_META = set("\\.+*?()|[]{}^$#&-~")
_SCORE_MODES = {"avg": lambda ss: math.fsum(ss) / len(ss), "max": max, "min": min, "total": math.fsum}


def escape(text: str) -> str:
    """``text`` as a literal in tantivy's regex syntax."""
    return "".join("\\" + c if c in _REGEX_META else c for c in text)


def wildcard_regex(pattern: str) -> str:
    return "".join(".*" if c == "*" else "." if c == "?" else escape(c) for c in pattern)


class Compiler:
    """Compiles queries for one shard; ``searcher`` answers the id-set resolutions."""

    def __init__(self, layout: FieldLayout, shard, searcher) -> None:
        self.layout = layout
        self.shard = shard
        self.searcher = searcher
        self.wide = False  # the query matches documents of every kind (match-all in it)
        self.nested_kinds = layout.has_nested
        # ``split_geo``: a top-level geo query on fast coordinates compiles to its inner
        # cells only, and the row documents of its edge cells that pass the exact test
        # (visible from ``since``) are left in ``passed`` as addresses, for the caller to
        # merge (a term query on their ``_rid`` costs a column scan when they are many)
        self.split_geo = False
        self.since: int | None = None
        self.passed: list | None = None

    def compile(self, q: Query, nested: str | None = None):
        s = self.shard
        if isinstance(q, MatchAllQuery):
            if nested is None:
                self.wide = True
            return s.q_all()
        if isinstance(q, FunctionScoreQuery):
            return self.compile(q.query, nested)
        if isinstance(q, BoolQuery):
            return self._bool(q, nested)
        if isinstance(q, ConstScoreQuery):
            return s.q_const(self.compile(q.filter, nested), 1.0)
        if isinstance(q, NestedQuery):
            return self._nested(q, nested)
        if isinstance(q, ExistsQuery):
            self._slot(q.field_name, nested, need_index=False)
            return s.q_has(q.field_name)
        slot = self._slot(q.field_name, nested)  # type: ignore[attr-defined]
        f = slot.field
        if isinstance(q, TermQuery):
            return s.q_term(slot.name, self._value(slot, q.column_value))
        if isinstance(q, TermsQuery):
            return s.q_terms(slot.name, [self._value(slot, v) for v in q.column_values])
        if isinstance(q, RangeQuery):
            return self._range(slot, q)
        if isinstance(q, (PrefixQuery, WildcardQuery)):
            if f.type not in (KEYWORD, TEXT):
                raise ParameterInvalid(f"{type(q).__name__} needs a KEYWORD or TEXT field, "
                                       f"{f.name!r} is {f.type}")
            if isinstance(q, PrefixQuery):
                if not isinstance(q.prefix, str):
                    raise ParameterInvalid(f"prefix must be a string, got {describe(q.prefix)}")
                return s.q_regex(slot.name, escape(q.prefix) + ".*")
            return s.q_regex(slot.name, wildcard_regex(q.value))
        if isinstance(q, (MatchQuery, MatchPhraseQuery)):
            return self._match(slot, q, nested)
        if isinstance(q, (GeoDistanceQuery, GeoBoundingBoxQuery, GeoPolygonQuery)):
            if nested:
                raise ParameterInvalid("geo queries inside a NestedQuery are not supported")
            return self._geo(slot, q)
        raise ParameterInvalid(f"unsupported query {describe(q)}")

    # -- fields and values ------------------------------------------------------------------

    @property
    def _limit(self) -> int:
        """Room for every document of the shard (asked only by the id-set resolutions)."""
        return max(self.searcher.num_docs, 1)

    def _slot(self, path: str, nested: str | None, need_index: bool = True) -> Slot:
        slot = self.layout.slot(path)
        if slot.kind == "nested":
            raise ParameterInvalid(f"field {path!r} is NESTED: query its sub-fields in a NestedQuery")
        inside = "." in path
        if inside and (nested is None or not path.startswith(nested + ".")):
            raise ParameterInvalid(f"field {path!r} is in a NESTED field: use a NestedQuery "
                                   f"with path {path.split('.')[0]!r}")
        if need_index and not slot.field.index:
            raise ParameterInvalid(f"field {path!r} is not indexed (index=False)")
        return slot

    def _value(self, slot: Slot, v: object) -> object:
        f = slot.field
        if f.type == GEO_POINT:
            raise ParameterInvalid(f"field {f.name!r} is GEO_POINT: use a geo query")
        try:
            out = convert_scalar(f, v)
        except Rejected:
            raise ParameterInvalid(f"value {describe(v)} does not fit field {f.name!r} "
                                   f"of type {f.type}") from None
        return out + 0.0 if type(out) is float else out  # -0.0 is indexed as 0.0

    def _range(self, slot: Slot, q: RangeQuery):
        f, s = slot.field, self.shard
        lo = None if q.range_from is None else self._value(slot, q.range_from)
        hi = None if q.range_to is None else self._value(slot, q.range_to)
        if f.type in (LONG, DATE, DOUBLE):
            return s.q_range(slot.name, lo, hi, q.include_lower, q.include_upper)
        if f.type not in (KEYWORD, TEXT):
            raise ParameterInvalid(f"RangeQuery needs a number, date or keyword field, "
                                   f"{f.name!r} is {f.type}")
        picked = []
        for t in s.terms(self.searcher, slot.name, _common_prefix(lo, hi)):
            if lo is not None and (t < lo or (t == lo and not q.include_lower)):  # type: ignore[operator]
                continue
            if hi is not None and (t > hi or (t == hi and not q.include_upper)):  # type: ignore[operator]
                continue
            picked.append(t)
        return s.q_terms(slot.name, picked)

    def _bool(self, q: BoolQuery, nested: str | None):
        s = self.shard
        clauses = [("must", self.compile(x, nested)) for x in q.must_queries]
        clauses += [("filter", s.q_const(self.compile(x, nested), 0.0)) for x in q.filter_queries]
        clauses += [("must_not", self.compile(x, nested)) for x in q.must_not_queries]
        should = [("should", self.compile(x, nested)) for x in q.should_queries]
        need = q.should_needed
        if should and need == 0 and not (q.must_queries or q.filter_queries):
            clauses.append(("must", s.q_all()))  # every should optional: scores only
            self.wide = self.wide or nested is None
        if not any(occ in ("must", "filter") for occ, _ in clauses) and not (should and need):
            clauses.append(("must", s.q_all()))
            self.wide = self.wide or nested is None
        if should:
            if need:
                clauses.append(("must", s.q_bool(should, need)))
            else:
                clauses += should
        return s.q_bool(clauses)

    def _match(self, slot: Slot, q: MatchQuery | MatchPhraseQuery, nested: str | None):
        f, s = slot.field, self.shard
        if not isinstance(q.text, str):
            raise ParameterInvalid(f"{type(q).__name__} text must be a string, got {describe(q.text)}")
        if f.type == KEYWORD:
            return s.q_term(slot.name, q.text)
        if f.type != TEXT:
            raise ParameterInvalid(f"{type(q).__name__} needs a TEXT or KEYWORD field, "
                                   f"{f.name!r} is {f.type}")
        if f.analyzer == FUZZY:
            return self._substring(slot, q.text.lower(), nested)
        tokens = analyzers.analyze(q.text, f.analyzer or "single_word", f.analyzer_parameter)
        if not tokens:
            return s.q_none()
        if isinstance(q, MatchPhraseQuery):
            return s.q_phrase(slot.name, tokens, q.slop)
        distinct = list(dict.fromkeys(tokens))
        if q.operator == AND:
            return s.q_bool([("must", s.q_term(slot.name, t)) for t in distinct])
        need = min(q.minimum_should_match or 1, len(distinct))
        return s.q_bool([("should", s.q_term(slot.name, t)) for t in distinct], need)

    def _substring(self, slot: Slot, text: str, nested: str | None):
        s = self.shard
        p = slot.field.analyzer_parameter
        lo, hi = p.get("min_chars", 1), p.get("max_chars", 7)
        if not text or len(text) < lo:
            return s.q_none()
        if len(text) <= hi:
            return s.q_term(slot.name, text)
        if nested:
            raise ParameterInvalid(f"a fuzzy match longer than {hi} characters inside a "
                                   "NestedQuery is not supported")
        grams = list(dict.fromkeys(text[i:i + hi] for i in range(len(text) - hi + 1)))
        cand = s.q_bool([("must", s.q_term(slot.name, g)) for g in grams] + [("must", s.q_rows())])
        name = slot.field.name
        ids = [doc_owner(pk) for pk, values in self._candidates(cand)
               if text in str(values.get(name, "")).lower()]
        return self._ids(ids)

    def _nested(self, q: NestedQuery, nested: str | None):
        s = self.shard
        if nested:
            raise ParameterInvalid("a NestedQuery cannot be inside another")
        slot = self.layout.slot(q.path)
        if slot.field.type != NESTED:
            raise ParameterInvalid(f"NestedQuery path {q.path!r} is not a NESTED field")
        inner = s.q_bool([("must", self.compile(q.query, q.path)),
                          ("must", s.q_const(s.q_kind(slot.nested_kind), 0.0))])
        scores: dict[str, list[float]] = {}
        for score, src in s.run(self.searcher, inner, self._limit):
            scores.setdefault(src.decode(), []).append(score)
        if q.score_mode == "none" or not scores:
            return s.q_const(self._ids(sorted(scores)), 0.0)
        # A row scores what its matching objects score, combined by the score mode; rows of one
        # score share a constant-score clause.
        combine = _SCORE_MODES[q.score_mode]
        by_score: dict[float, list[str]] = {}
        for owner, ss in scores.items():
            by_score.setdefault(combine(ss), []).append(owner)
        parts = [("should", s.q_const(self._ids(sorted(owners)), sc)) for sc, owners in by_score.items()]
        return parts[0][1] if len(parts) == 1 else s.q_bool(parts, 1)

    def _geo(self, slot: Slot, q):
        s = self.shard
        if slot.field.type != GEO_POINT:
            raise ParameterInvalid(f"{type(q).__name__} needs a GEO_POINT field, "
                                   f"{slot.field.name!r} is {slot.field.type}")
        test, inner, edge = self._geo_cells(slot, q)
        name = slot.field.name
        passed = None
        if self.split_geo and slot.point is not None:
            self.split_geo = False  # only the top-level query
            self.passed = []
            if edge:
                cand = self._rows_only(s.q_terms(slot.name, edge))
                if self.since is not None:
                    cand = s.q_bool([("must", cand), ("filter", s.q_ts_from(self.since))])
                self.passed = self._passing(cand, slot.point, test)
            if not inner:
                return s.q_none()
            return self._rows_only(s.q_const(s.q_terms(slot.name, inner), 1.0))
        if edge:
            cand = self._rows_only(s.q_terms(slot.name, edge))
            if slot.point is not None:  # layout 3: the coordinates are fast values
                passed = self._row_ids(cand, slot.point, test)
            else:
                passed = self._ids([doc_owner(pk) for pk, values in self._candidates(cand)
                                    if any(test(lat, lon) for lat, lon in as_points(values.get(name)))])
        if not inner:
            return passed if passed is not None else s.q_none()
        inside = self._rows_only(s.q_const(s.q_terms(slot.name, inner), 1.0))
        if passed is None:
            return inside
        return s.q_bool([("should", inside), ("should", passed)], 1)

    def _row_ids(self, cand, point: tuple[str, str], test):
        """The row documents of ``cand`` whose point (fast fields ``point``) passes ``test``,
        as a query on their ``_rid``."""
        s, se = self.shard, self.searcher
        passed = self._passing(cand, point, test)
        return s.q_const(s.q_terms(ROW_ID, s.fast_values(se, ROW_ID, passed)), 1.0)

    def _passing(self, cand, point: tuple[str, str], test) -> list:
        """The addresses of the documents of ``cand`` whose point passes ``test``."""
        s, se = self.shard, self.searcher
        addrs = s.addresses(se, cand, self._limit)
        lats = s.fast_values(se, point[0], addrs)
        lons = s.fast_values(se, point[1], addrs)
        return [a for a, la, lo in zip(addrs, lats, lons) if la is not None and test(la, lo)]

    def _geo_cells(self, slot: Slot, q) -> tuple:
        """The plan of ``q`` (``geo_plans``) that costs this shard least: term lookups
        against candidates tested one by one, the candidates estimated from the documents
        in the covering cells (their document frequencies)."""
        test, cover, plans = geo_plans(q)
        if len(plans) == 1:
            return test, plans[0][0], plans[0][1]
        s, se = self.shard, self.searcher
        docs = sum(s.doc_freq(se, slot.name, c) for c in cover)
        area = sum(geo.cell_area(c) for c in cover)
        density = docs / area if area > 0 else 0.0
        each = CANDIDATE_COST if slot.point is None else FAST_CANDIDATE_COST
        best = min(plans, key=lambda p: _lookup_cost(len(p[0])) + _lookup_cost(len(p[1]))
                   + each * density * p[2])
        return test, best[0], best[1]

    def _rows_only(self, query):
        """``query`` limited to row documents: only child documents (NESTED) could also match
        a top-level field, so without them the filter is left out (it costs a posting list
        of every row)."""
        if not self.nested_kinds:
            return query
        return self.shard.q_bool([("must", query), ("filter", self.shard.q_const(self.shard.q_rows(), 0.0))])

    def _ids(self, owners: list[str]):
        """The documents of ``owners``: with NESTED fields those include child documents, so
        the query is then filtered to rows."""
        if self.nested_kinds:
            self.wide = True
        return self.shard.q_ids(owners)

    def _candidates(self, query):
        for _, src in self.shard.run(self.searcher, query, self._limit):
            yield decode_src(src)[:2]


def doc_owner(pk: tuple) -> str:
    return doc_id(pk)


def _common_prefix(lo: object, hi: object) -> str:
    if not isinstance(lo, str) or not isinstance(hi, str):
        return ""
    n = 0
    for a, b in zip(lo, hi):
        if a != b:
            break
        n += 1
    return lo[:n]


class GeoTest:
    """An exact geo predicate with the bounding box of its candidates; ``inside(bounds)``
    says whether a whole cell passes (False when unsure)."""

    def __init__(self, box: tuple[float, float, float, float], fn, inside=None) -> None:
        self.box = box  # lat_min, lat_max, lon_min, lon_max
        self._fn = fn
        self.inside = inside or (lambda b: False)

    def __call__(self, lat: float, lon: float) -> bool:
        return self._fn(lat, lon)


_EPS = 1e-9  # degrees: a margin for the rounding of a point's cell


def _circle_inside(clat: float, clon: float, d: float, box: tuple) -> object:
    """A cell is inside the circle when its four corners are. The distance from the centre
    is largest at a corner of a lat/lon cell when the circle's box spans less than 180
    degrees of longitude and no pole (the distance grows with the longitude difference up
    to 180, and has no maximum inside a latitude interval then)."""
    if box[2] <= -180.0 and box[3] >= 180.0:
        return None
    limit = d * (1 - 1e-9) - 1e-6

    def inside(b) -> bool:
        la0, la1, lo0, lo1 = b[0] - _EPS, b[1] + _EPS, b[2] - _EPS, b[3] + _EPS
        return all(geo.haversine(clat, clon, a, o) <= limit
                   for a, o in ((la0, lo0), (la0, lo1), (la1, lo0), (la1, lo1)))
    return inside


# Relative costs (measured, microseconds): a term lookup in a Bool of term queries, and a
# candidate read from its stored source and tested exactly, or from its fast values (layout
# 3); a term set query costs about 200 whatever its size (see ``Shard.q_terms``).
TERM_COST, TERM_SET_COST, CANDIDATE_COST, FAST_CANDIDATE_COST = 2.5, 200.0, 4.0, 0.5
PLAN_BUDGETS = (16, 48, 128, geo.REFINED_CELLS, 1024)  # cells in all, one plan each


def _lookup_cost(n: int) -> float:
    return n * TERM_COST if n <= 48 else TERM_SET_COST + n * 0.5


def geo_plans(q) -> tuple[GeoTest, list[str], list[tuple[list[str], list[str], float]]]:
    """``(test, covering cells, plans)``: each plan ``(inner, edge, edge area)`` splits the
    covering cells under one of ``PLAN_BUDGETS``; a coarser plan looks up fewer terms and
    tests more candidates. Cached while the query is hashable."""
    try:
        return _geo_plans(q)
    except TypeError:  # a list inside the query
        return _geo_plans.__wrapped__(q)


@lru_cache(maxsize=256)
def _geo_plans(q) -> tuple:
    test = geo_test(q)
    cover = geo.covering(*test.box)
    plans = []
    for budget in PLAN_BUDGETS:
        inner, edge = geo.split(cover, test.box, test.inside, budget)
        plan = (inner, edge, sum(geo.cell_area(c) for c in edge))
        if not plans or (plan[0], plan[1]) != (plans[-1][0], plans[-1][1]):
            plans.append(plan)
    return test, cover, plans


def geo_test(q) -> GeoTest:
    if isinstance(q, GeoDistanceQuery):
        clat, clon = geo.point(q.center_point, "center_point")
        d = float(q.distance)
        box = geo.circle_box(clat, clon, d)
        return GeoTest(box, lambda la, lo: geo.haversine(clat, clon, la, lo) <= d,
                       _circle_inside(clat, clon, d, box))
    if isinstance(q, GeoBoundingBoxQuery):
        top, left = geo.point(q.top_left, "top_left")
        bottom, right = geo.point(q.bottom_right, "bottom_right")
        if bottom > top or left > right:
            raise ParameterInvalid(f"bounding box {q.top_left!r} / {q.bottom_right!r}: top_left must "
                                   "be north-west of bottom_right")
        return GeoTest((bottom, top, left, right),
                       lambda la, lo: geo.in_box(la, lo, top, left, bottom, right),
                       lambda b: (b[0] - _EPS >= bottom and b[1] + _EPS <= top
                                  and b[2] - _EPS >= left and b[3] + _EPS <= right))
    poly = [geo.point(p, "polygon point") for p in q.points]
    lats, lons = [p[0] for p in poly], [p[1] for p in poly]
    return GeoTest((min(lats), max(lats), min(lons), max(lons)),
                   lambda la, lo: geo.in_polygon(la, lo, poly))



_HEX = "0123456789abcdef"


def hex_after(s: str, desc: bool = False) -> str:
    """A regex matching the hex strings after ``s`` in byte order (before it if ``desc``),
    nested so that it grows linearly with ``s``."""
    tail = None if desc else ".+"
    for c in reversed(s):
        k = _HEX.index(c)
        chars = _HEX[k + 1:] if not desc else _HEX[:k]
        alts = [""] if desc else []  # a proper prefix sorts before
        if chars:
            alts.append("[" + chars + "].*")
        if tail is not None:
            alts.append(c + "(" + tail + ")")
        tail = "|".join(alts)
    return tail if tail else "[^\\s\\S]"
