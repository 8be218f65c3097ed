"""Tablestore's search-index messages <-> widetable.search's values, both directions.

Shared by the server (``server/tablestore/search.py``) and the thin client
(``client/search.py``). Queries, aggregations and group-bys travel as protobuf
messages inside ``bytes`` fields (``Query{type, query}``, ``Aggregation{type,
body}``, ``GroupBy{type, body}``); values inside them (terms, bounds, missing)
are PlainBuffer bare values (``plainbuffer.encode_value`` / ``decode_value``).
"""

from __future__ import annotations

import base64
import math

from ..errors import NotSupported, ParameterInvalid, describe
from ..search import aggs as A
from ..search import query as Q
from ..search import geo
from ..search import sort as S
from ..search.execute import RETURN_ALL, RETURN_ALL_FROM_INDEX, RETURN_NONE
from ..search.schema import FieldSchema
from . import plainbuffer
from .proto import check_text, enum_value, pb

_FIELD_TYPES = {enum_value("FieldType", n): n for n in
                ("LONG", "DOUBLE", "BOOLEAN", "KEYWORD", "TEXT", "NESTED", "GEO_POINT", "DATE")}
_FIELD_TYPE_IDS = {v: k for k, v in _FIELD_TYPES.items()}
ORDER = {0: "ASC", 1: "DESC"}
_MODE = {0: "min", 1: "max", 2: "avg"}
_SCORE_MODE = {1: "none", 2: "avg", 3: "max", 4: "total", 5: "min"}
RETURN = {1: RETURN_ALL, 3: RETURN_NONE, 4: RETURN_ALL_FROM_INDEX}
FULL, INCR = enum_value("SyncPhase", "FULL"), enum_value("SyncPhase", "INCR")


def _parse(cls: type, body: bytes):
    """A request-side message carried in a bytes field, its text fields checked."""
    msg = cls.FromString(body)
    check_text(msg)
    return msg


# -- definitions ---------------------------------------------------------------------------


def field_of(fs) -> FieldSchema:
    t = _FIELD_TYPES.get(fs.field_type)
    if t is None:
        raise ParameterInvalid(f"field {fs.field_name!r}: unsupported field type {fs.field_type}")
    params: dict = {}
    analyzer = fs.analyzer or None
    if fs.HasField("analyzer_parameter") and analyzer == "split":
        p = _parse(pb.SplitAnalyzerParameter, fs.analyzer_parameter)
        if p.HasField("delimiter"):
            params["delimiter"] = p.delimiter
    elif fs.HasField("analyzer_parameter") and analyzer == "fuzzy":
        p = _parse(pb.FuzzyAnalyzerParameter, fs.analyzer_parameter)
        if p.HasField("min_chars"):
            params["min_chars"] = p.min_chars
        if p.HasField("max_chars"):
            params["max_chars"] = p.max_chars
    return FieldSchema(
        fs.field_name, t, fs.index if fs.HasField("index") else True,
        fs.enable_sort_and_agg if fs.HasField("enable_sort_and_agg") else None,
        fs.store if fs.HasField("store") else True, fs.is_array, analyzer, params,
        tuple(field_of(s) for s in fs.field_schemas),
    )


def put_field(out, f: FieldSchema) -> None:
    out.field_name = f.name
    out.field_type = _FIELD_TYPE_IDS[f.type]
    out.index = f.index
    out.enable_sort_and_agg = bool(f.enable_sort_and_agg)
    out.store = f.store
    out.is_array = f.is_array
    if f.type == "TEXT" and f.analyzer:
        out.analyzer = f.analyzer
        if f.analyzer == "split":
            out.analyzer_parameter = pb.SplitAnalyzerParameter(
                delimiter=f.analyzer_parameter.get("delimiter", " ")).SerializeToString()
        elif f.analyzer == "fuzzy":
            out.analyzer_parameter = pb.FuzzyAnalyzerParameter(
                min_chars=f.analyzer_parameter.get("min_chars", 1),
                max_chars=f.analyzer_parameter.get("max_chars", 7)).SerializeToString()
    for s in f.sub_fields:
        put_field(out.field_schemas.add(), s)


# -- queries -------------------------------------------------------------------------------


def _value(raw: bytes) -> object:
    return plainbuffer.decode_value(raw)


def _minimum_should_match(m) -> int | None:
    """A Match or Bool query's minimum_should_match: the string field, else the int one."""
    if m.new_minimum_should_match:
        try:
            return int(m.new_minimum_should_match)
        except ValueError:
            raise ParameterInvalid("minimum_should_match must be an integer, got "
                                   f"{describe(m.new_minimum_should_match)}") from None
    return m.minimum_should_match if m.HasField("minimum_should_match") else None


def decode_query(msg, depth: int = 0) -> Q.Query:
    """A ``Query{type, query}`` message as the library's query."""
    if depth > 32:
        raise ParameterInvalid("query nests too deep")
    name = pb.Query.DESCRIPTOR.fields_by_name["type"].enum_type.values_by_number.get(msg.type)
    kind = name.name if name is not None else str(msg.type)
    body = msg.query
    sub = lambda m: decode_query(m, depth + 1)  # noqa: E731
    if kind == "MATCH_ALL_QUERY":
        return Q.MatchAllQuery()
    if kind == "TERM_QUERY":
        m = _parse(pb.TermQuery, body)
        return Q.TermQuery(m.field_name, _value(m.term))
    if kind == "TERMS_QUERY":
        m = _parse(pb.TermsQuery, body)
        return Q.TermsQuery(m.field_name, [_value(t) for t in m.terms])
    if kind == "RANGE_QUERY":
        m = _parse(pb.RangeQuery, body)
        return Q.RangeQuery(m.field_name, _value(m.range_from) if m.HasField("range_from") else None,
                            _value(m.range_to) if m.HasField("range_to") else None,
                            m.include_lower, m.include_upper)
    if kind == "PREFIX_QUERY":
        m = _parse(pb.PrefixQuery, body)
        return Q.PrefixQuery(m.field_name, m.prefix)
    if kind == "WILDCARD_QUERY":
        m = _parse(pb.WildcardQuery, body)
        return Q.WildcardQuery(m.field_name, m.value)
    if kind == "EXISTS_QUERY":
        return Q.ExistsQuery(_parse(pb.ExistsQuery, body).field_name)
    if kind == "MATCH_QUERY":
        m = _parse(pb.MatchQuery, body)
        msm = _minimum_should_match(m)
        return Q.MatchQuery(m.field_name, m.text, msm, "AND" if m.operator == 2 else "OR")
    if kind == "MATCH_PHRASE_QUERY":
        m = _parse(pb.MatchPhraseQuery, body)
        return Q.MatchPhraseQuery(m.field_name, m.text, m.slop)
    if kind == "BOOL_QUERY":
        m = _parse(pb.BoolQuery, body)
        msm = _minimum_should_match(m)
        return Q.BoolQuery([sub(x) for x in m.must_queries], [sub(x) for x in m.must_not_queries],
                           [sub(x) for x in m.filter_queries], [sub(x) for x in m.should_queries], msm)
    if kind == "CONST_SCORE_QUERY":
        return Q.ConstScoreQuery(sub(_parse(pb.ConstScoreQuery, body).filter))
    if kind == "FUNCTION_SCORE_QUERY":
        m = _parse(pb.FunctionScoreQuery, body)
        return Q.FunctionScoreQuery(sub(m.query), Q.FieldValueFactor(m.field_value_factor.field_name))
    if kind == "NESTED_QUERY":
        m = _parse(pb.NestedQuery, body)
        return Q.NestedQuery(m.path, sub(m.query), _SCORE_MODE.get(m.score_mode, "avg"))
    if kind == "GEO_DISTANCE_QUERY":
        m = _parse(pb.GeoDistanceQuery, body)
        return Q.GeoDistanceQuery(m.field_name, m.center_point, m.distance)
    if kind == "GEO_BOUNDING_BOX_QUERY":
        m = _parse(pb.GeoBoundingBoxQuery, body)
        return Q.GeoBoundingBoxQuery(m.field_name, m.top_left, m.bottom_right)
    if kind == "GEO_POLYGON_QUERY":
        m = _parse(pb.GeoPolygonQuery, body)
        return Q.GeoPolygonQuery(m.field_name, list(m.points))
    raise NotSupported(f"query type {kind} is not supported")


def decode_sort(msg) -> list[S.Sorter]:
    out: list[S.Sorter] = []
    for s in msg.sorter:
        if s.HasField("field_sort"):
            f = s.field_sort
            out.append(S.FieldSort(f.field_name, ORDER[f.order],
                                   _MODE[f.mode] if f.HasField("mode") else None))
        elif s.HasField("pk_sort"):
            out.append(S.PrimaryKeySort(ORDER[s.pk_sort.order]))
        elif s.HasField("score_sort"):
            out.append(S.ScoreSort(ORDER[s.score_sort.order] if s.score_sort.HasField("order")
                                   else "DESC"))
        elif s.HasField("geo_distance_sort"):
            g = s.geo_distance_sort
            out.append(S.GeoDistanceSort(g.field_name, tuple(g.points), ORDER[g.order],
                                         _MODE[g.mode] if g.HasField("mode") else "min"))
        else:
            raise NotSupported("only field, primary-key, score and geo-distance sorts are supported")
    return out


_AGGS = {1: ("AvgAggregation", A.AvgAgg), 2: ("MaxAggregation", A.MaxAgg),
         3: ("MinAggregation", A.MinAgg), 4: ("SumAggregation", A.SumAgg),
         5: ("CountAggregation", A.CountAgg), 6: ("DistinctCountAggregation", A.DistinctCountAgg)}
_TOP_ROWS, _PERCENTILES = 7, 8
_GEO_DISTANCE, _HISTOGRAM, _DATE_HISTOGRAM, _GEO_GRID, _COMPOSITE = 4, 5, 6, 7, 8
# DateTimeUnit: calendar units, then fixed ones in milliseconds
_CALENDAR = {1: "year", 2: "quarter", 3: "month"}
_UNIT_MS = {4: 7 * 86_400_000, 5: 86_400_000, 6: 3_600_000, 7: 60_000, 8: 1000, 9: 1}
_UTC = ("", "Z", "UTC", "+00:00", "-00:00", "+0000", "GMT")
_AGG_RESULTS = {1: "AvgAggregationResult", 2: "MaxAggregationResult", 3: "MinAggregationResult",
                4: "SumAggregationResult", 5: "CountAggregationResult",
                6: "DistinctCountAggregationResult"}


def decode_aggs(msg) -> list:
    out = []
    for a in msg.aggs:
        if a.type == _TOP_ROWS:
            body = _parse(pb.TopRowsAggregation, a.body)
            sort = decode_sort(body.sort) if body.HasField("sort") and len(body.sort.sorter) else None
            out.append(A.TopRowsAgg(a.name, body.limit if body.HasField("limit") else 1, sort))
            continue
        if a.type == _PERCENTILES:
            body = _parse(pb.PercentilesAggregation, a.body)
            missing = _value(body.missing_value) if body.HasField("missing_value") else None
            out.append(A.PercentilesAgg(a.name, body.field_name, tuple(body.percentiles) or (50.0,),
                                        missing))
            continue
        if a.type not in _AGGS:
            raise NotSupported(f"aggregation type {a.type} is not supported")
        name, cls = _AGGS[a.type]
        body = _parse(getattr(pb, name), a.body)
        if a.type == 5:
            out.append(cls(a.name, body.field_name))
        else:
            missing = _value(body.missing) if body.HasField("missing") else None
            out.append(cls(a.name, body.field_name, missing))
    return out


def encode_aggs(aggs: list, results: dict, encode_row=None):
    """``AggregationsResult`` of ``results``; ``encode_row(row)``: a PlainBuffer row (top_rows)."""
    out = pb.AggregationsResult()
    for a in aggs:
        v = results[a.name]
        if isinstance(a, A.TopRowsAgg):
            if encode_row is None:
                raise NotSupported("top_rows results need rows encoded")
            r = pb.TopRowsAggregationResult(rows=[encode_row(row) for row in v])
            out.agg_results.add(name=a.name, type=_TOP_ROWS, agg_result=r.SerializeToString())
            continue
        if isinstance(a, A.PercentilesAgg):
            r = pb.PercentilesAggregationResult()
            for p, x in (v or {}).items():
                r.percentiles_aggregation_items.add(key=float(p), value=plainbuffer.encode_value(x))
            out.agg_results.add(name=a.name, type=_PERCENTILES, agg_result=r.SerializeToString())
            continue
        t = next(k for k, (_, cls) in _AGGS.items() if isinstance(a, cls))
        r = getattr(pb, _AGG_RESULTS[t])()
        if t in (5, 6):
            r.value = int(v or 0)
        else:
            r.value = float("nan") if v is None else float(v)
            if v is None and t in (2, 3):
                r.value = -math.inf if t == 2 else math.inf
        out.agg_results.add(name=a.name, type=t, agg_result=r.SerializeToString())
    return out


def _group_sort(msg) -> tuple:
    out = []
    for s in msg.sorters:
        if s.HasField("group_key_sort"):
            out.append(A.GroupKeySort(ORDER[s.group_key_sort.order]))
        elif s.HasField("row_count_sort"):
            out.append(A.RowCountSort(ORDER[s.row_count_sort.order]))
        elif s.HasField("sub_agg_sort"):
            out.append(A.SubAggSort(s.sub_agg_sort.sub_agg_name, ORDER[s.sub_agg_sort.order]))
    return tuple(out)


def _range_of(m, typed: bool = True) -> tuple | None:
    if not m.HasField("field_range"):
        return None
    r = m.field_range
    if not (r.HasField("min") and r.HasField("max")):
        raise ParameterInvalid("field_range needs min and max")
    return (_value(r.min), _value(r.max))


def _interval_of(m) -> object:
    """A date histogram's interval: milliseconds, or "month", "quarter", "year"."""
    iv = m.interval
    n = iv.value if iv.HasField("value") else 0
    if n <= 0:
        raise ParameterInvalid(f"date histogram interval must be positive, got {n}")
    if iv.unit in _CALENDAR:
        if n != 1:
            raise NotSupported(f"a calendar interval of {n} {_CALENDAR[iv.unit]}s is not supported; use 1")
        return _CALENDAR[iv.unit]
    if iv.unit not in _UNIT_MS:
        raise ParameterInvalid(f"unknown date histogram unit {iv.unit}")
    return n * _UNIT_MS[iv.unit]


def decode_group_bys(msg) -> list:
    out = []
    for g in msg.group_bys:
        if g.type == 1:
            m = _parse(pb.GroupByField, g.body)
            out.append(A.GroupByField(g.name, m.field_name, m.size if m.HasField("size") else 10,
                                      _group_sort(m.sort), tuple(decode_aggs(m.sub_aggs)),
                                      tuple(decode_group_bys(m.sub_group_bys))))
        elif g.type == 2:
            m = _parse(pb.GroupByRange, g.body)
            ranges = tuple((None if math.isinf(r.begin) else r.begin, None if math.isinf(r.end) else r.end)
                           for r in m.ranges)
            out.append(A.GroupByRange(g.name, m.field_name, ranges, tuple(decode_aggs(m.sub_aggs)),
                                      tuple(decode_group_bys(m.sub_group_bys))))
        elif g.type == 3:
            m = _parse(pb.GroupByFilter, g.body)
            out.append(A.GroupByFilter(g.name, tuple(decode_query(q) for q in m.filters),
                                       tuple(decode_aggs(m.sub_aggs)), tuple(decode_group_bys(m.sub_group_bys))))
        elif g.type == _GEO_DISTANCE:
            m = _parse(pb.GroupByGeoDistance, g.body)
            ranges = tuple((None if math.isinf(r.begin) else r.begin, None if math.isinf(r.end) else r.end)
                           for r in m.ranges)
            out.append(A.GroupByGeoDistance(g.name, m.field_name, (m.origin.lat, m.origin.lon), ranges,
                                            tuple(decode_aggs(m.sub_aggs)),
                                            tuple(decode_group_bys(m.sub_group_bys))))
        elif g.type == _HISTOGRAM:
            m = _parse(pb.GroupByHistogram, g.body)
            if not m.HasField("interval"):
                raise ParameterInvalid(f"GroupByHistogram {g.name!r} needs an interval")
            out.append(A.GroupByHistogram(
                g.name, m.field_name, _value(m.interval), 0,
                m.min_doc_count if m.HasField("min_doc_count") else 1,
                tuple(decode_aggs(m.sub_aggs)), tuple(decode_group_bys(m.sub_group_bys)),
                _range_of(m), _value(m.missing_value) if m.HasField("missing_value") else None,
                _group_sort(m.sort)))
        elif g.type == _DATE_HISTOGRAM:
            m = _parse(pb.GroupByDateHistogram, g.body)
            if m.HasField("time_zone") and m.time_zone not in _UTC:
                raise NotSupported(f"date histogram time zone {m.time_zone!r}: only UTC is supported")
            if m.HasField("offset") and m.offset.value:
                raise NotSupported("a date histogram offset is not supported")
            out.append(A.GroupByDateHistogram(
                g.name, m.field_name, _interval_of(m),
                m.min_doc_count if m.HasField("min_doc_count") else 1,
                tuple(decode_aggs(m.sub_aggs)), tuple(decode_group_bys(m.sub_group_bys)),
                _range_of(m), _value(m.missing) if m.HasField("missing") else None,
                _group_sort(m.sort)))
        elif g.type == _GEO_GRID:
            m = _parse(pb.GroupByGeoGrid, g.body)
            if not m.HasField("precision"):
                raise ParameterInvalid(f"GroupByGeoGrid {g.name!r} needs a precision")
            out.append(A.GroupByGeoGrid(g.name, m.field_name, m.precision,
                                        m.size if m.HasField("size") else 10,
                                        tuple(decode_aggs(m.sub_aggs)),
                                        tuple(decode_group_bys(m.sub_group_bys))))
        elif g.type == _COMPOSITE:
            m = _parse(pb.GroupByComposite, g.body)
            sources = decode_group_bys(m.sources)
            for src in sources:
                if not isinstance(src, (A.GroupByField, A.GroupByHistogram, A.GroupByDateHistogram)):
                    raise NotSupported(f"GroupByComposite source {src.name!r}: the sources are "
                                       "GroupByField, GroupByHistogram and GroupByDateHistogram")
            token = None
            if m.HasField("next_token") and m.next_token:
                try:
                    token = base64.b64decode(m.next_token, validate=True)
                except ValueError:
                    raise ParameterInvalid("GroupByComposite next_token is invalid") from None
            out.append(A.GroupByComposite(g.name, tuple(sources), m.size if m.HasField("size") else 10,
                                          token, tuple(decode_aggs(m.sub_aggs)),
                                          tuple(decode_group_bys(m.sub_group_bys))))
        else:
            raise NotSupported(f"group-by type {g.type} is not supported")
    return out


def encode_group_bys(gbs: list, results: dict, encode_row=None):
    out = pb.GroupBysResult()
    for g in gbs:
        groups = results[g.name]
        if isinstance(g, A.GroupByField):
            r = pb.GroupByFieldResult()
            for grp in groups:
                item = r.group_by_field_result_items.add(key=str(grp.key), row_count=grp.row_count)
                _sub(item, g, grp, encode_row)
            t = 1
        elif isinstance(g, (A.GroupByRange, A.GroupByGeoDistance)):
            by_distance = isinstance(g, A.GroupByGeoDistance)
            r = pb.GroupByGeoDistanceResult() if by_distance else pb.GroupByRangeResult()
            items = r.group_by_geo_distance_result_items if by_distance else r.group_by_range_result_items
            for grp in groups:
                lo, hi = grp.key
                item = items.add(range_from=-math.inf if lo is None else lo,
                                 range_to=math.inf if hi is None else hi, row_count=grp.row_count)
                _sub(item, g, grp, encode_row)
            t = _GEO_DISTANCE if by_distance else 2
        elif isinstance(g, A.GroupByHistogram):
            r = pb.GroupByHistogramResult()
            for grp in groups:
                item = r.group_by_histogra_items.add(key=plainbuffer.encode_value(grp.key),
                                                     value=grp.row_count)
                _sub(item, g, grp, encode_row)
            t = _HISTOGRAM
        elif isinstance(g, A.GroupByDateHistogram):
            r = pb.GroupByDateHistogramResult()
            for grp in groups:
                item = r.group_by_date_histogram_items.add(timestamp=int(grp.key), row_count=grp.row_count)
                _sub(item, g, grp, encode_row)
            t = _DATE_HISTOGRAM
        elif isinstance(g, A.GroupByComposite):
            page, token = groups
            r = pb.GroupByCompositeResult(source_group_by_names=A.source_names(g))
            for grp in page:
                item = r.group_by_composite_result_items.add(
                    keys=["" if k is None else str(k) for k in grp.key],
                    is_null_keys=[k is None for k in grp.key], row_count=grp.row_count)
                _sub(item, g, grp, encode_row)
            if token is not None:
                r.next_token = base64.b64encode(token).decode()
            t = _COMPOSITE
        elif isinstance(g, A.GroupByGeoGrid):
            r = pb.GroupByGeoGridResult()
            for grp in groups:
                lat_min, lat_max, lon_min, lon_max = geo.bounds(grp.key)
                item = r.group_by_geo_grid_result_items.add(
                    key=grp.key, row_count=grp.row_count, geo_grid=pb.GeoGrid(
                        top_left=pb.GeoPoint(lat=lat_max, lon=lon_min),
                        bottom_right=pb.GeoPoint(lat=lat_min, lon=lon_max)))
                _sub(item, g, grp, encode_row)
            t = _GEO_GRID
        else:
            r = pb.GroupByFilterResult()
            for grp in groups:
                item = r.group_by_filter_result_items.add(row_count=grp.row_count)
                _sub(item, g, grp, encode_row)
            t = 3
        out.group_by_results.add(name=g.name, type=t, group_by_result=r.SerializeToString())
    return out


def _sub(item, g, grp, encode_row=None) -> None:
    if g.sub_aggs:
        item.sub_aggs_result.CopyFrom(encode_aggs(list(g.sub_aggs), grp.aggs, encode_row))
    if getattr(g, "sub_group_bys", ()):
        item.sub_group_bys_result.CopyFrom(encode_group_bys(list(g.sub_group_bys), grp.group_bys,
                                                            encode_row))




# -- the client's direction: library values -> request messages; results -> library values ------

_QUERY_TYPE = {name: pb.Query.DESCRIPTOR.fields_by_name["type"].enum_type.values_by_name[name].number
               for name in pb.Query.DESCRIPTOR.fields_by_name["type"].enum_type.values_by_name}
_SCORE_MODE_IDS = {v: k for k, v in _SCORE_MODE.items()}
_MODE_IDS = {v: k for k, v in _MODE.items()}
_ORDER_IDS = {"ASC": 0, "DESC": 1}


def _q(kind: str, body) -> object:
    return pb.Query(type=_QUERY_TYPE[kind], query=body.SerializeToString())


def encode_query(q: Q.Query):
    """The ``Query`` message of a library query."""
    enc = plainbuffer.encode_value
    if isinstance(q, Q.MatchAllQuery):
        return _q("MATCH_ALL_QUERY", pb.MatchAllQuery())
    if isinstance(q, Q.TermQuery):
        return _q("TERM_QUERY", pb.TermQuery(field_name=q.field_name, term=enc(q.column_value)))
    if isinstance(q, Q.TermsQuery):
        return _q("TERMS_QUERY", pb.TermsQuery(field_name=q.field_name,
                                               terms=[enc(v) for v in q.column_values]))
    if isinstance(q, Q.RangeQuery):
        m = pb.RangeQuery(field_name=q.field_name, include_lower=q.include_lower,
                          include_upper=q.include_upper)
        if q.range_from is not None:
            m.range_from = enc(q.range_from)
        if q.range_to is not None:
            m.range_to = enc(q.range_to)
        return _q("RANGE_QUERY", m)
    if isinstance(q, Q.PrefixQuery):
        return _q("PREFIX_QUERY", pb.PrefixQuery(field_name=q.field_name, prefix=q.prefix))
    if isinstance(q, Q.WildcardQuery):
        return _q("WILDCARD_QUERY", pb.WildcardQuery(field_name=q.field_name, value=q.value))
    if isinstance(q, Q.ExistsQuery):
        return _q("EXISTS_QUERY", pb.ExistsQuery(field_name=q.field_name))
    if isinstance(q, Q.MatchQuery):
        m = pb.MatchQuery(field_name=q.field_name, text=q.text, operator=2 if q.operator == "AND" else 1)
        if q.minimum_should_match is not None:
            m.new_minimum_should_match = str(q.minimum_should_match)
        return _q("MATCH_QUERY", m)
    if isinstance(q, Q.MatchPhraseQuery):
        return _q("MATCH_PHRASE_QUERY", pb.MatchPhraseQuery(field_name=q.field_name, text=q.text,
                                                            slop=q.slop))
    if isinstance(q, Q.BoolQuery):
        m = pb.BoolQuery(must_queries=[encode_query(x) for x in q.must_queries],
                         must_not_queries=[encode_query(x) for x in q.must_not_queries],
                         filter_queries=[encode_query(x) for x in q.filter_queries],
                         should_queries=[encode_query(x) for x in q.should_queries])
        if q.minimum_should_match is not None:
            m.new_minimum_should_match = str(q.minimum_should_match)
        return _q("BOOL_QUERY", m)
    if isinstance(q, Q.ConstScoreQuery):
        return _q("CONST_SCORE_QUERY", pb.ConstScoreQuery(filter=encode_query(q.filter)))
    if isinstance(q, Q.FunctionScoreQuery):
        return _q("FUNCTION_SCORE_QUERY", pb.FunctionScoreQuery(
            query=encode_query(q.query),
            field_value_factor=pb.FieldValueFactor(field_name=q.field_value_factor.field_name)))
    if isinstance(q, Q.NestedQuery):
        return _q("NESTED_QUERY", pb.NestedQuery(path=q.path, query=encode_query(q.query),
                                                 score_mode=_SCORE_MODE_IDS[q.score_mode]))
    if isinstance(q, Q.GeoDistanceQuery):
        return _q("GEO_DISTANCE_QUERY", pb.GeoDistanceQuery(
            field_name=q.field_name, center_point=_point_text(q.center_point), distance=q.distance))
    if isinstance(q, Q.GeoBoundingBoxQuery):
        return _q("GEO_BOUNDING_BOX_QUERY", pb.GeoBoundingBoxQuery(
            field_name=q.field_name, top_left=_point_text(q.top_left),
            bottom_right=_point_text(q.bottom_right)))
    if isinstance(q, Q.GeoPolygonQuery):
        return _q("GEO_POLYGON_QUERY", pb.GeoPolygonQuery(
            field_name=q.field_name, points=[_point_text(p) for p in q.points]))
    raise ParameterInvalid(f"query must be a Query, got {q!r}")


def _point_text(p: object) -> str:
    return p if isinstance(p, str) else f"{p[0]},{p[1]}"  # type: ignore[index]


def encode_sort(sorters: list) -> object:
    out = pb.Sort()
    for s in sorters:
        item = out.sorter.add()
        if isinstance(s, S.FieldSort):
            if s.missing != "last" or s.missing_value is not None:
                raise NotSupported("FieldSort missing options do not travel over Tablestore's protocol")
            item.field_sort.field_name = s.field_name
            item.field_sort.order = _ORDER_IDS[s.sort_order]
            if s.sort_mode is not None:
                item.field_sort.mode = _MODE_IDS[s.sort_mode]
        elif isinstance(s, S.PrimaryKeySort):
            item.pk_sort.order = _ORDER_IDS[s.sort_order]
        elif isinstance(s, S.ScoreSort):
            item.score_sort.order = _ORDER_IDS[s.sort_order]
        elif isinstance(s, S.GeoDistanceSort):
            g = item.geo_distance_sort
            g.field_name = s.field_name
            g.points.extend(_point_text(p) for p in s.points)
            g.order = _ORDER_IDS[s.sort_order]
            g.mode = _MODE_IDS[s.sort_mode]
        else:
            raise ParameterInvalid(f"not a sorter: {s!r}")
    return out


def encode_agg_requests(aggs: list):
    out = pb.Aggregations()
    for a in aggs:
        if isinstance(a, A.TopRowsAgg):
            body = pb.TopRowsAggregation(limit=a.limit)
            if a.sort is not None:
                body.sort.CopyFrom(encode_sort(list(a.sort) if isinstance(a.sort, (list, tuple))
                                               else [a.sort]))
            out.aggs.add(name=a.name, type=_TOP_ROWS, body=body.SerializeToString())
            continue
        if isinstance(a, A.PercentilesAgg):
            body = pb.PercentilesAggregation(field_name=a.field_name,
                                             percentiles=[float(p) for p in a.percentiles])
            if a.missing is not None:
                body.missing_value = plainbuffer.encode_value(a.missing)
            out.aggs.add(name=a.name, type=_PERCENTILES, body=body.SerializeToString())
            continue
        t = next((k for k, (_, cls) in _AGGS.items() if type(a) is cls), None)
        if t is None:
            raise NotSupported(f"{type(a).__name__} does not travel over the wire")
        body = getattr(pb, _AGGS[t][0])(field_name=a.field_name)
        if t != 5 and a.missing is not None:
            body.missing = plainbuffer.encode_value(a.missing)
        out.aggs.add(name=a.name, type=t, body=body.SerializeToString())
    return out


def _group_sort_msg(sorts: tuple):
    out = pb.GroupBySort()
    for s in sorts:
        item = out.sorters.add()
        if isinstance(s, A.GroupKeySort):
            item.group_key_sort.order = _ORDER_IDS[s.order]
        elif isinstance(s, A.RowCountSort):
            item.row_count_sort.order = _ORDER_IDS[s.order]
        else:
            item.sub_agg_sort.sub_agg_name = s.sub_agg_name
            item.sub_agg_sort.order = _ORDER_IDS[s.order]
    return out


def encode_group_by_requests(gbs: list):
    out = pb.GroupBys()
    for g in gbs:
        if isinstance(g, A.GroupByField):
            body = pb.GroupByField(field_name=g.field_name, size=g.size, sort=_group_sort_msg(g.group_by_sort),
                                   sub_aggs=encode_agg_requests(list(g.sub_aggs)),
                                   sub_group_bys=encode_group_by_requests(list(g.sub_group_bys)))
            t = 1
        elif isinstance(g, A.GroupByRange):
            body = pb.GroupByRange(field_name=g.field_name, ranges=[
                pb.Range(begin=-math.inf if lo is None else lo, end=math.inf if hi is None else hi)
                for lo, hi in g.ranges], sub_aggs=encode_agg_requests(list(g.sub_aggs)),
                sub_group_bys=encode_group_by_requests(list(g.sub_group_bys)))
            t = 2
        elif isinstance(g, A.GroupByFilter):
            body = pb.GroupByFilter(filters=[encode_query(q) for q in g.filters],
                                    sub_aggs=encode_agg_requests(list(g.sub_aggs)),
                                    sub_group_bys=encode_group_by_requests(list(g.sub_group_bys)))
            t = 3
        elif isinstance(g, A.GroupByGeoDistance):
            lat, lon = geo.point(g.origin, "GroupByGeoDistance origin")
            body = pb.GroupByGeoDistance(field_name=g.field_name, origin=pb.GeoPoint(lat=lat, lon=lon), ranges=[
                pb.Range(begin=-math.inf if lo is None else lo, end=math.inf if hi is None else hi)
                for lo, hi in g.ranges], sub_aggs=encode_agg_requests(list(g.sub_aggs)),
                sub_group_bys=encode_group_by_requests(list(g.sub_group_bys)))
            t = _GEO_DISTANCE
        elif isinstance(g, (A.GroupByHistogram, A.GroupByDateHistogram)):
            date = isinstance(g, A.GroupByDateHistogram)
            body = pb.GroupByDateHistogram() if date else pb.GroupByHistogram()
            body.field_name = g.field_name
            if date:
                body.interval.CopyFrom(_interval_msg(g.interval))
            else:
                if g.offset:
                    raise NotSupported("a histogram offset does not travel over Tablestore's protocol")
                body.interval = plainbuffer.encode_value(g.interval)
            body.min_doc_count = g.min_doc_count
            if g.field_range is not None:
                body.field_range.min = plainbuffer.encode_value(g.field_range[0])
                body.field_range.max = plainbuffer.encode_value(g.field_range[1])
            if g.missing is not None:
                if date:
                    body.missing = plainbuffer.encode_value(g.missing)
                else:
                    body.missing_value = plainbuffer.encode_value(g.missing)
            if g.group_by_sort:
                body.sort.CopyFrom(_group_sort_msg(g.group_by_sort))
            body.sub_aggs.CopyFrom(encode_agg_requests(list(g.sub_aggs)))
            body.sub_group_bys.CopyFrom(encode_group_by_requests(list(g.sub_group_bys)))
            t = _DATE_HISTOGRAM if date else _HISTOGRAM
        elif isinstance(g, A.GroupByComposite):
            sources = encode_group_by_requests([A.GroupByField(s, s) if isinstance(s, str) else s
                                                for s in g.sources])
            body = pb.GroupByComposite(sources=sources, size=g.size,
                                       sub_aggs=encode_agg_requests(list(g.sub_aggs)),
                                       sub_group_bys=encode_group_by_requests(list(g.sub_group_bys)))
            if g.next_token is not None:
                body.next_token = base64.b64encode(g.next_token).decode()
            t = _COMPOSITE
        elif isinstance(g, A.GroupByGeoGrid):
            body = pb.GroupByGeoGrid(field_name=g.field_name, precision=g.precision, size=g.size,
                                     sub_aggs=encode_agg_requests(list(g.sub_aggs)),
                                     sub_group_bys=encode_group_by_requests(list(g.sub_group_bys)))
            t = _GEO_GRID
        else:
            raise NotSupported(f"{type(g).__name__} does not travel over the wire")
        out.group_bys.add(name=g.name, type=t, body=body.SerializeToString())
    return out


def _interval_msg(interval: object):
    """The DateTimeValue of a date histogram's interval (ms, or a calendar unit)."""
    if isinstance(interval, str):
        unit = next(k for k, v in _CALENDAR.items() if v == interval)
        return pb.DateTimeValue(value=1, unit=unit)
    for unit in (5, 6, 7, 8, 9):  # the coarsest fixed unit dividing it (value is an int32)
        ms = _UNIT_MS[unit]
        if interval % ms == 0 and interval // ms < 2**31:  # type: ignore[operator]
            return pb.DateTimeValue(value=interval // ms, unit=unit)  # type: ignore[operator]
    raise ParameterInvalid(f"date histogram interval {interval!r} ms does not travel")


def decode_agg_results(aggs: list, raw: bytes, decode_row=None) -> dict:
    msg = pb.AggregationsResult.FromString(raw)
    out: dict = {}
    for r in msg.agg_results:
        if r.type == _TOP_ROWS:
            rows = pb.TopRowsAggregationResult.FromString(r.agg_result).rows
            out[r.name] = [decode_row(x) for x in rows] if decode_row else list(rows)
            continue
        if r.type == _PERCENTILES:
            items = pb.PercentilesAggregationResult.FromString(r.agg_result).percentiles_aggregation_items
            out[r.name] = {it.key: _value(it.value) for it in items} or None
            continue
        body = getattr(pb, _AGG_RESULTS[r.type]).FromString(r.agg_result)
        v = body.value
        if r.type in (1, 4) and isinstance(v, float) and math.isnan(v):
            v = None
        elif r.type in (2, 3) and math.isinf(v):
            v = None
        out[r.name] = v
    for a in aggs:  # integers travel as doubles: give them back as the library does
        v = out.get(a.name)
        if isinstance(v, float) and v.is_integer() and isinstance(a, (A.SumAgg, A.MaxAgg, A.MinAgg)):
            out[a.name] = v
    return out


def decode_group_by_results(gbs: list, raw: bytes, decode_row=None) -> dict:
    msg = pb.GroupBysResult.FromString(raw)
    by_name = {g.name: g for g in gbs}
    out: dict = {}
    for r in msg.group_by_results:
        g = by_name.get(r.name)
        body = r.group_by_result
        groups: list = []
        if r.type == 1:
            for it in pb.GroupByFieldResult.FromString(body).group_by_field_result_items:
                groups.append(_group(g, it.key, it, decode_row))
        elif r.type in (2, _GEO_DISTANCE):
            res = pb.GroupByRangeResult.FromString(body).group_by_range_result_items if r.type == 2 \
                else pb.GroupByGeoDistanceResult.FromString(body).group_by_geo_distance_result_items
            for it in res:
                key = (None if math.isinf(it.range_from) else it.range_from,
                       None if math.isinf(it.range_to) else it.range_to)
                groups.append(_group(g, key, it, decode_row, it.row_count))
        elif r.type == 3:
            items = pb.GroupByFilterResult.FromString(body).group_by_filter_result_items
            for q, it in zip(g.filters if g is not None else [None] * len(items), items):
                groups.append(_group(g, q, it, decode_row))
        elif r.type == _HISTOGRAM:
            for it in pb.GroupByHistogramResult.FromString(body).group_by_histogra_items:
                groups.append(_group(g, _value(it.key), it, decode_row, it.value))
        elif r.type == _DATE_HISTOGRAM:
            for it in pb.GroupByDateHistogramResult.FromString(body).group_by_date_histogram_items:
                groups.append(_group(g, it.timestamp, it, decode_row))
        elif r.type == _GEO_GRID:
            for it in pb.GroupByGeoGridResult.FromString(body).group_by_geo_grid_result_items:
                groups.append(_group(g, it.key, it, decode_row))
        elif r.type == _COMPOSITE:
            res = pb.GroupByCompositeResult.FromString(body)
            for it in res.group_by_composite_result_items:
                # keys travel as text (Tablestore's message): they come back as text
                key = tuple(None if null else k for k, null in zip(it.keys, it.is_null_keys))
                groups.append(_group(g, key, it, decode_row))
            token = base64.b64decode(res.next_token) if res.HasField("next_token") and res.next_token \
                else None
            out[r.name] = (groups, token)
            continue
        out[r.name] = groups
    return out


def _group(g, key: object, item, decode_row=None, count: int | None = None) -> A.Group:
    aggs = decode_agg_results(list(getattr(g, "sub_aggs", ())), item.sub_aggs_result.SerializeToString(),
                              decode_row) if item.HasField("sub_aggs_result") else {}
    subs = decode_group_by_results(list(getattr(g, "sub_group_bys", ())),
                                   item.sub_group_bys_result.SerializeToString(), decode_row) \
        if item.HasField("sub_group_bys_result") else {}
    return A.Group(key, item.row_count if count is None else count, aggs, subs)


def columns_msg(columns: object):
    """``ColumnsToGet`` of a library ``columns`` argument."""
    if columns is None or columns == RETURN_NONE:
        return pb.ColumnsToGet(return_type=3)
    if columns == RETURN_ALL:
        return pb.ColumnsToGet(return_type=1)
    if columns == RETURN_ALL_FROM_INDEX:
        return pb.ColumnsToGet(return_type=4)
    names = columns[1] if isinstance(columns, tuple) and len(columns) == 2 and columns[0] == "RETURN_SPECIFIED" \
        else columns
    if not isinstance(names, (list, tuple)):
        raise ParameterInvalid(f"columns must be RETURN_NONE, RETURN_ALL, RETURN_ALL_FROM_INDEX or a "
                               f"list of names, got {columns!r}")
    return pb.ColumnsToGet(return_type=2, column_names=list(names))
