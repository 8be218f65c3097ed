"""Aggregations and group-bys, computed exactly over the matching documents.

Each hit is ``(score, pk, values)`` (``values`` from the document's ``_src``).
An array field contributes each of its elements. ``missing`` stands in for a
document without the field. Results: an aggregation gives a number (None
when no document has a value), ``percentiles`` a ``{percent: value}`` dict
(linear interpolation between closest ranks), ``top_rows`` a list of rows.
A group-by gives a list of :class:`Group` (``key``, ``row_count``, ``aggs``,
``group_bys``); GroupByComposite gives ``(groups, next_token)``; GroupByGeoGrid's keys
are geohash cells.
"""

from __future__ import annotations

import calendar
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import msgpack

from ..errors import ParameterInvalid, describe
from . import geo
from .documents import as_list, as_points
from .query import Query
from .schema import DATE, DOUBLE, GEO_POINT, LONG, IndexMeta

MAX_GROUP_SIZE = 2000
MAX_TOP_ROWS = 100
MAX_AGGS = 20


class Agg:
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class AvgAgg(Agg):
    name: str
    field_name: str
    missing: object = None


@dataclass(frozen=True, slots=True)
class MaxAgg(Agg):
    name: str
    field_name: str
    missing: object = None


@dataclass(frozen=True, slots=True)
class MinAgg(Agg):
    name: str
    field_name: str
    missing: object = None


@dataclass(frozen=True, slots=True)
class SumAgg(Agg):
    name: str
    field_name: str
    missing: object = None


@dataclass(frozen=True, slots=True)
class CountAgg(Agg):
    """The number of documents with a value in the field."""

    name: str
    field_name: str


@dataclass(frozen=True, slots=True)
class DistinctCountAgg(Agg):
    name: str
    field_name: str
    missing: object = None


@dataclass(frozen=True, slots=True)
class PercentilesAgg(Agg):
    name: str
    field_name: str
    percentiles: tuple = (50.0,)
    missing: object = None


@dataclass(frozen=True, slots=True)
class TopRowsAgg(Agg):
    name: str
    limit: int = 1
    sort: object = None


class GroupBy:
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class GroupKeySort:
    order: str = "ASC"


@dataclass(frozen=True, slots=True)
class RowCountSort:
    order: str = "DESC"


@dataclass(frozen=True, slots=True)
class SubAggSort:
    sub_agg_name: str
    order: str = "DESC"


@dataclass(frozen=True, slots=True)
class GroupByField(GroupBy):
    name: str
    field_name: str
    size: int = 10
    group_by_sort: tuple = ()  # default: row count DESC, then key ASC
    sub_aggs: tuple = ()
    sub_group_bys: tuple = ()
    min_doc_count: int = 1


@dataclass(frozen=True, slots=True)
class GroupByRange(GroupBy):
    """Half-open ranges ``[from, to)``; None is unbounded."""

    name: str
    field_name: str
    ranges: tuple
    sub_aggs: tuple = ()
    sub_group_bys: tuple = ()


@dataclass(frozen=True, slots=True)
class GroupByFilter(GroupBy):
    name: str
    filters: tuple
    sub_aggs: tuple = ()
    sub_group_bys: tuple = ()


@dataclass(frozen=True, slots=True)
class GroupByGeoDistance(GroupBy):
    name: str
    field_name: str
    origin: object
    ranges: tuple  # metres, [from, to)
    sub_aggs: tuple = ()
    sub_group_bys: tuple = ()


@dataclass(frozen=True, slots=True)
class GroupByHistogram(GroupBy):
    """Buckets ``offset + k * interval``. ``field_range``: ``(min, max)``, only values with
    ``min <= v < max`` count; ``missing``: the value of a document without the field;
    ``group_by_sort``: as GroupByField's (default: the key ascending)."""

    name: str
    field_name: str
    interval: float
    offset: float = 0
    min_doc_count: int = 1
    sub_aggs: tuple = ()
    sub_group_bys: tuple = ()
    field_range: tuple | None = None
    missing: object = None
    group_by_sort: tuple = ()


@dataclass(frozen=True, slots=True)
class GroupByDateHistogram(GroupBy):
    """``interval``: milliseconds, or "month", "quarter" or "year" (UTC calendar);
    ``field_range``, ``missing`` and ``group_by_sort`` as GroupByHistogram's."""

    name: str
    field_name: str
    interval: object
    min_doc_count: int = 1
    sub_aggs: tuple = ()
    sub_group_bys: tuple = ()
    field_range: tuple | None = None
    missing: object = None
    group_by_sort: tuple = ()


@dataclass(frozen=True, slots=True)
class GroupByComposite(GroupBy):
    """Groups by every combination of its ``sources``' keys, in key order (a row without a
    source's value has None there, first), ``size`` groups a page; ``next_token``
    continues. A source is a field name or a GroupByField (the field's values), or a
    GroupByHistogram or GroupByDateHistogram (its buckets, with its ``field_range`` and
    ``missing``); only their keys are used. ``sub_aggs`` and ``sub_group_bys`` run per
    group."""

    name: str
    sources: tuple
    size: int = 10
    next_token: bytes | None = None
    sub_aggs: tuple = ()
    sub_group_bys: tuple = ()


@dataclass(frozen=True, slots=True)
class GroupByGeoGrid(GroupBy):
    """Groups a GEO_POINT field's points by geohash cell of ``precision`` characters
    (1-12: 5,000 km down to 37 mm), the ``size`` cells with the most rows first (then by
    cell); a group's key is the cell, ``geo.bounds(key)`` its box. A row counts once in
    each cell its points fall in."""

    name: str
    field_name: str
    precision: int
    size: int = 10
    sub_aggs: tuple = ()
    sub_group_bys: tuple = ()


def source_names(g: GroupByComposite) -> list[str]:
    """The names of a composite group-by's sources (a field name names itself)."""
    return [s if isinstance(s, str) else s.name for s in g.sources]  # type: ignore[attr-defined]


@dataclass(slots=True)
class Group:
    key: object
    row_count: int
    aggs: dict = field(default_factory=dict)
    group_bys: dict = field(default_factory=dict)


Hit = tuple  # (score, pk, values)


NUMERIC_AGGS = (AvgAgg, SumAgg, PercentilesAgg)  # they compute on numbers
NUMERIC_FIELDS = (LONG, DOUBLE, DATE)


def _check_numeric(agg: object, field_type: str) -> None:
    """OTSParameterInvalid unless ``agg`` (of NUMERIC_AGGS) reads a numeric field, and its
    ``missing`` value, if any, is a number."""
    kind = type(agg).__name__
    if field_type not in NUMERIC_FIELDS:
        raise ParameterInvalid(f"{kind} needs a LONG, DOUBLE or DATE field; "
                               f"{agg.field_name!r} is {field_type}")  # type: ignore[attr-defined]
    missing = agg.missing  # type: ignore[attr-defined]
    if missing is not None and (type(missing) is bool or not isinstance(missing, (int, float))):
        raise ParameterInvalid(f"{kind} missing value must be a number, got {describe(missing)}")


class Aggregator:
    """Computes aggregations and group-bys over hits. ``match(query)`` gives the pks of
    the matching documents (for GroupByFilter); ``top_rows(hits, agg)`` the rows."""

    def __init__(self, meta: IndexMeta, match: Callable[[Query], set], top_rows: Callable) -> None:
        self.meta = meta
        self.match = match
        self.top_rows = top_rows

    def check(self, aggs: object, group_bys: object) -> tuple[list, list]:
        a = list(aggs or ())
        g = list(group_bys or ())
        if len(a) > MAX_AGGS or len(g) > MAX_AGGS:
            raise ParameterInvalid(f"at most {MAX_AGGS} aggregations and {MAX_AGGS} group-bys")
        names = set()
        for x in a + g:
            if not isinstance(x, (Agg, GroupBy)):
                raise ParameterInvalid(f"not an aggregation or group-by: {describe(x)}")
            if x.name in names:  # type: ignore[attr-defined]
                raise ParameterInvalid(f"duplicate aggregation name {x.name!r}")  # type: ignore[attr-defined]
            names.add(x.name)  # type: ignore[attr-defined]
            self._check_one(x)
        return a, g

    def _check_one(self, x: object) -> None:
        f = getattr(x, "field_name", None)
        if f is not None:
            fs = self.meta.field(f)
            if not fs.enable_sort_and_agg:
                raise ParameterInvalid(f"field {f!r} cannot aggregate: enable_sort_and_agg is off")
            if isinstance(x, NUMERIC_AGGS):
                _check_numeric(x, fs.type)
        if isinstance(x, GroupByField) and not 1 <= x.size <= MAX_GROUP_SIZE:
            raise ParameterInvalid(f"GroupByField size must be in [1, {MAX_GROUP_SIZE}], got {x.size}")
        if isinstance(x, GroupByComposite):
            self._check_composite(x)
        if isinstance(x, GroupByGeoGrid):
            if self.meta.field(x.field_name).type != GEO_POINT:
                raise ParameterInvalid(f"GroupByGeoGrid {x.name!r}: field {x.field_name!r} is not "
                                       "a GEO_POINT")
            if type(x.precision) is not int or not 1 <= x.precision <= 12:
                raise ParameterInvalid(f"GroupByGeoGrid precision must be in [1, 12], got "
                                       f"{describe(x.precision)}")
            if not 1 <= x.size <= MAX_GROUP_SIZE:
                raise ParameterInvalid(f"GroupByGeoGrid size must be in [1, {MAX_GROUP_SIZE}], "
                                       f"got {x.size}")
        if isinstance(x, TopRowsAgg) and not 1 <= x.limit <= MAX_TOP_ROWS:
            raise ParameterInvalid(f"TopRowsAgg limit must be in [1, {MAX_TOP_ROWS}], got {x.limit}")
        if isinstance(x, GroupByHistogram) and (type(x.interval) is bool or
                                                not isinstance(x.interval, (int, float)) or
                                                not x.interval > 0):
            raise ParameterInvalid(f"histogram interval must be positive, got {describe(x.interval)}")
        if isinstance(x, (GroupByHistogram, GroupByDateHistogram)):
            for v in (*(x.field_range or ()), x.missing):
                if v is not None and (type(v) is bool or not isinstance(v, (int, float))):
                    raise ParameterInvalid(f"{type(x).__name__} {x.name!r}: field_range and missing "
                                           f"are numbers, got {describe(v)}")
            if x.field_range is not None and (len(x.field_range) != 2 or None in x.field_range):
                raise ParameterInvalid(f"{type(x).__name__} {x.name!r}: field_range is (min, max), "
                                       f"got {describe(x.field_range)}")
        if isinstance(x, GroupByDateHistogram) and x.interval not in ("month", "quarter", "year") and \
                not (type(x.interval) is int and x.interval > 0):
            raise ParameterInvalid(f"date histogram interval must be ms > 0 or month, quarter, year; "
                                   f"got {describe(x.interval)}")
        if isinstance(x, PercentilesAgg):
            for p in x.percentiles:
                if not isinstance(p, (int, float)) or not 0 <= p <= 100:
                    raise ParameterInvalid(f"percentile {describe(p)} is not in [0, 100]")
        for sub in (*getattr(x, "sub_aggs", ()), *getattr(x, "sub_group_bys", ())):
            self._check_one(sub)

    def _check_composite(self, x: GroupByComposite) -> None:
        if not 1 <= x.size <= MAX_GROUP_SIZE:
            raise ParameterInvalid(f"GroupByComposite size must be in [1, {MAX_GROUP_SIZE}], got {x.size}")
        if not x.sources:
            raise ParameterInvalid(f"GroupByComposite {x.name!r} needs at least one source")
        for src in x.sources:
            if isinstance(src, str):
                src = GroupByField(src, src)
            if not isinstance(src, (GroupByField, GroupByHistogram, GroupByDateHistogram)):
                raise ParameterInvalid(f"GroupByComposite {x.name!r}: a source is a field name, "
                                       "a GroupByField, a GroupByHistogram or a GroupByDateHistogram,"
                                       f" got {describe(src)}")
            if self.meta.field(src.field_name).type == GEO_POINT:
                raise ParameterInvalid(f"GroupByComposite cannot group GEO_POINT field {src.field_name!r}")
            self._check_one(src)
        names = source_names(x)
        if len(set(names)) < len(names):
            raise ParameterInvalid(f"GroupByComposite {x.name!r}: duplicate source names {names}")

    # -- aggregations ----------------------------------------------------------------------

    def _values(self, hits: list, fname: str, missing: object) -> list:
        out = []
        for _, _, values in hits:
            vs = as_list(values.get(fname))
            if vs:
                out += vs
            elif missing is not None:
                out.append(missing)
        return out

    def aggregate(self, agg: Agg, hits: list) -> object:
        if isinstance(agg, TopRowsAgg):
            return self.top_rows(hits, agg)
        if isinstance(agg, CountAgg):
            return sum(1 for _, _, v in hits if as_list(v.get(agg.field_name)))
        vals = self._values(hits, agg.field_name, getattr(agg, "missing", None))  # type: ignore[attr-defined]
        if isinstance(agg, DistinctCountAgg):
            return len({_hashable(v) for v in vals})
        if not vals:
            return None
        if isinstance(agg, AvgAgg):
            return math.fsum(vals) / len(vals)
        if isinstance(agg, SumAgg):
            return math.fsum(vals) if any(type(v) is float for v in vals) else sum(vals)
        if isinstance(agg, MaxAgg):
            return max(vals)
        if isinstance(agg, MinAgg):
            return min(vals)
        if isinstance(agg, PercentilesAgg):
            return {p: percentile(sorted(vals), p) for p in agg.percentiles}
        raise ParameterInvalid(f"unsupported aggregation {describe(agg)}")

    def aggregate_all(self, aggs: list, hits: list) -> dict:
        return {a.name: self.aggregate(a, hits) for a in aggs}

    # -- group-bys ------------------------------------------------------------------------

    def group_all(self, group_bys: list, hits: list) -> dict:
        return {g.name: self.group(g, hits) for g in group_bys}

    def _finish(self, g: GroupBy, key: object, members: list) -> Group:
        return Group(key, len(members), self.aggregate_all(list(getattr(g, "sub_aggs", ())), members),
                     self.group_all(list(getattr(g, "sub_group_bys", ())), members))

    def group(self, g: GroupBy, hits: list) -> object:
        if isinstance(g, GroupByField):
            return self._by_field(g, hits)
        if isinstance(g, GroupByRange):
            return [self._finish(g, (lo, hi), [h for h in hits if any(
                (lo is None or v >= lo) and (hi is None or v < hi)
                for v in as_list(h[2].get(g.field_name)))]) for lo, hi in g.ranges]
        if isinstance(g, GroupByFilter):
            out = []
            for q in g.filters:
                pks = self.match(q)
                out.append(self._finish(g, q, [h for h in hits if h[1] in pks]))
            return out
        if isinstance(g, GroupByGeoDistance):
            olat, olon = geo.point(g.origin, "origin")
            out = []
            for lo, hi in g.ranges:
                members = [h for h in hits if any(
                    (lo is None or d >= lo) and (hi is None or d < hi)
                    for d in (geo.haversine(olat, olon, a, b) for a, b in as_points(h[2].get(g.field_name))))]
                out.append(self._finish(g, (lo, hi), members))
            return out
        if isinstance(g, (GroupByHistogram, GroupByDateHistogram)):
            return self._buckets(g, hits, _bucket_of(g))
        if isinstance(g, GroupByComposite):
            return self._composite(g, hits)
        if isinstance(g, GroupByGeoGrid):
            return self._geo_grid(g, hits)
        raise ParameterInvalid(f"unsupported group-by {describe(g)}")

    def _by_field(self, g: GroupByField, hits: list) -> list[Group]:
        if self.meta.field(g.field_name).type == GEO_POINT:
            raise ParameterInvalid(f"GroupByField cannot group GEO_POINT field {g.field_name!r}")
        members: dict = {}
        for h in hits:
            for v in dict.fromkeys(as_list(h[2].get(g.field_name))):
                members.setdefault(v, []).append(h)
        groups = [self._finish(g, k, m) for k, m in members.items() if len(m) >= g.min_doc_count]
        groups.sort(key=lambda x: x.key)  # the final tie-break: key ascending
        return order_groups(groups, g)[:g.size]

    def _buckets(self, g: GroupBy, hits: list, bucket: Callable) -> list[Group]:
        members: dict = {}
        fname = g.field_name  # type: ignore[attr-defined]
        rng = g.field_range  # type: ignore[attr-defined]
        missing = g.missing  # type: ignore[attr-defined]
        for h in hits:
            for b in _bucket_keys(h, fname, rng, missing, bucket):
                members.setdefault(b, []).append(h)
        groups = [self._finish(g, k, members[k]) for k in sorted(members)
                  if len(members[k]) >= g.min_doc_count]  # type: ignore[attr-defined]
        if g.group_by_sort:  # type: ignore[attr-defined]
            groups = order_groups(groups, g)  # type: ignore[arg-type]
        return groups

    def _composite(self, g: GroupByComposite, hits: list) -> tuple[list[Group], bytes | None]:
        keyers = [_source_keys(s) for s in g.sources]
        members: dict = {}
        for h in hits:
            combos: list[tuple] = [()]
            for keys_of in keyers:
                vs = keys_of(h) or [None]
                combos = [c + (v,) for c in combos for v in vs]
            for c in combos:
                members.setdefault(c, []).append(h)
        keys = sorted(members, key=_composite_order)
        if g.next_token is not None:
            try:
                after = tuple(msgpack.unpackb(g.next_token, raw=False))
            except Exception:  # noqa: BLE001 - malformed token
                raise ParameterInvalid("GroupByComposite next_token is invalid") from None
            keys = [k for k in keys if _composite_order(k) > _composite_order(after)]
        page = keys[:g.size]
        token = msgpack.packb(list(page[-1]), use_bin_type=True) if len(keys) > g.size else None
        return [self._finish(g, k, members[k]) for k in page], token


    def _geo_grid(self, g: GroupByGeoGrid, hits: list) -> list[Group]:
        members: dict = {}
        for h in hits:
            cells = dict.fromkeys(geo.encode(lat, lon, g.precision)
                                  for lat, lon in as_points(h[2].get(g.field_name)))
            for c in cells:
                members.setdefault(c, []).append(h)
        top = sorted(members, key=lambda c: (-len(members[c]), c))[:g.size]
        return [self._finish(g, c, members[c]) for c in top]


def _bucket_of(g: GroupByHistogram | GroupByDateHistogram) -> Callable:
    """The bucket key of a value, for a histogram or a date histogram."""
    if isinstance(g, GroupByDateHistogram):
        return lambda v: date_bucket(v, g.interval)
    return lambda v: math.floor((v - g.offset) / g.interval) * g.interval + g.offset


def _bucket_keys(h: Hit, fname: str, rng: tuple | None, missing: object, bucket: Callable) -> list:
    """The distinct buckets of a hit's values of ``fname`` (``missing`` standing in for none),
    those in ``rng`` only."""
    vs = as_list(h[2].get(fname)) or ([] if missing is None else [missing])
    if rng is not None:
        vs = [v for v in vs if rng[0] <= v < rng[1]]
    return list(dict.fromkeys(bucket(v) for v in vs))


def _source_keys(src: object) -> Callable[[Hit], list]:
    """A composite source's keys of a hit: its field's distinct values or its buckets."""
    if isinstance(src, (str, GroupByField)):
        fname = src if isinstance(src, str) else src.field_name
        return lambda h: list(dict.fromkeys(as_list(h[2].get(fname))))
    bucket = _bucket_of(src)  # type: ignore[arg-type]
    fname, rng, missing = src.field_name, src.field_range, src.missing  # type: ignore[attr-defined]
    return lambda h: _bucket_keys(h, fname, rng, missing, bucket)


def order_groups(groups: list[Group], g: GroupByField) -> list[Group]:
    """``groups`` (sorted by key) in the order of ``g.group_by_sort`` (default: row count
    descending), the key ascending as the final tie-break."""
    for s in reversed(list(g.group_by_sort) or [RowCountSort("DESC")]):
        desc = s.order == "DESC"
        if isinstance(s, GroupKeySort):
            groups.sort(key=lambda x: x.key, reverse=desc)
        elif isinstance(s, RowCountSort):
            groups.sort(key=lambda x: x.row_count, reverse=desc)
        elif isinstance(s, SubAggSort):
            present = [x for x in groups if x.aggs.get(s.sub_agg_name) is not None]
            absent = [x for x in groups if x.aggs.get(s.sub_agg_name) is None]
            present.sort(key=lambda x: x.aggs[s.sub_agg_name], reverse=desc)
            groups = present + absent
        else:
            raise ParameterInvalid(f"unsupported group sort {describe(s)}")
    return groups


def _composite_order(key: tuple) -> tuple:
    return tuple((0, "") if v is None else (1, v) for v in key)


def _hashable(v: object) -> object:
    return tuple(v) if isinstance(v, list) else v


def percentile(vals: list, p: float) -> float:
    """The ``p``-th percentile of sorted ``vals`` (linear between closest ranks)."""
    if len(vals) == 1:
        return vals[0]
    r = (len(vals) - 1) * p / 100
    lo = math.floor(r)
    hi = min(lo + 1, len(vals) - 1)
    return vals[lo] + (vals[hi] - vals[lo]) * (r - lo)


def date_bucket(ms: int, interval: object) -> int:
    """The start (ms, UTC) of the bucket holding ``ms``."""
    if type(interval) is int:
        return ms // interval * interval
    d = datetime.fromtimestamp(ms / 1000, tz=UTC)
    month = 1 if interval == "year" else (d.month - 1) // 3 * 3 + 1 if interval == "quarter" else d.month
    return calendar.timegm((d.year, month, 1, 0, 0, 0)) * 1000
