"""Search-index APIs: CreateSearchIndex, DescribeSearchIndex, ListSearchIndex,
UpdateSearchIndex, DeleteSearchIndex, Search, ComputeSplits, ParallelScan.

Queries, sorts, aggregations and group-bys arrive as protobuf messages inside
``bytes`` fields (``Query{type, query}``, ``Aggregation{type, body}``);
values in them (terms, range bounds, ``missing``) are PlainBuffer bare values
(``plainbuffer.decode_value``). Rows go back as one PlainBuffer row per
element of ``rows``, attribute columns sorted by name, with exactly one
``search_hit`` per row. This module translates only; ``widetable.search``
does the work.
"""

from __future__ import annotations

import math

from ...db import Database
from ...errors import NotSupported, ParameterInvalid
from ...search import aggs as A
from ...search import query as Q
from ...search import sort as S
from ...search.execute import RETURN_ALL, RETURN_ALL_FROM_INDEX, RETURN_NONE
from ...search.schema import FieldSchema
from ...wire import convert, plainbuffer
from ...wire.proto import enum_value, pb

_FIELD_TYPES = {enum_value("FieldType", n): n for n in
                ("LONG", "DOUBLE", "BOOLEAN", "KEYWORD", "TEXT", "NESTED", "GEO_POINT", "DATE")}
_FIELD_TYPE_IDS = {v: k for k, v in _FIELD_TYPES.items()}
_ORDER = {0: "ASC", 1: "DESC"}
_MODE = {0: "min", 1: "max", 2: "avg"}
_SCORE_MODE = {1: "none", 2: "avg", 3: "max", 4: "total", 5: "min"}
_RETURN = {1: RETURN_ALL, 3: RETURN_NONE, 4: RETURN_ALL_FROM_INDEX}
FULL, INCR = enum_value("SyncPhase", "FULL"), enum_value("SyncPhase", "INCR")


# -- definitions ---------------------------------------------------------------------------


def _field_of(fs) -> FieldSchema:
    t = _FIELD_TYPES.get(fs.field_type)
    if t is None:
        raise ParameterInvalid(f"field {fs.field_name!r}: unsupported field type {fs.field_type}")
    params: dict = {}
    analyzer = fs.analyzer or None
    if fs.HasField("analyzer_parameter") and analyzer == "split":
        p = pb.SplitAnalyzerParameter.FromString(fs.analyzer_parameter)
        if p.HasField("delimiter"):
            params["delimiter"] = p.delimiter
    elif fs.HasField("analyzer_parameter") and analyzer == "fuzzy":
        p = pb.FuzzyAnalyzerParameter.FromString(fs.analyzer_parameter)
        if p.HasField("min_chars"):
            params["min_chars"] = p.min_chars
        if p.HasField("max_chars"):
            params["max_chars"] = p.max_chars
    return FieldSchema(
        fs.field_name, t, fs.index if fs.HasField("index") else True,
        fs.enable_sort_and_agg if fs.HasField("enable_sort_and_agg") else None,
        fs.store if fs.HasField("store") else True, fs.is_array, analyzer, params,
        tuple(_field_of(s) for s in fs.field_schemas),
    )


def _put_field(out, f: FieldSchema) -> None:
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
        _put_field(out.field_schemas.add(), s)


def create_search_index(db: Database, req) -> object:
    schema = req.schema
    fields = [_field_of(fs) for fs in schema.field_schemas]
    sort = None
    if schema.HasField("index_sort"):
        sort = []
        for s in schema.index_sort.sorter:
            if s.HasField("pk_sort"):
                continue
            if not s.HasField("field_sort"):
                raise ParameterInvalid("index_sort takes field sorts and the primary-key sort")
            sort.append((s.field_sort.field_name, _ORDER[s.field_sort.order]))
    setting = schema.index_setting
    routing = list(setting.routing_fields) or None
    kwargs = {}
    if setting.HasField("number_of_shards") and setting.number_of_shards > 0:
        kwargs["shards"] = setting.number_of_shards
    ttl = req.time_to_live if req.HasField("time_to_live") else -1
    db.create_search_index(req.table_name, req.index_name, fields, index_sort=sort or None,
                           routing_fields=routing, ttl=ttl, **kwargs)
    return pb.CreateSearchIndexResponse()


def describe_search_index(db: Database, req) -> object:
    d = db.describe_search_index(req.table_name, req.index_name)
    resp = pb.DescribeSearchIndexResponse()
    for f in d.meta.fields:
        _put_field(resp.schema.field_schemas.add(), f)
    resp.schema.index_setting.number_of_shards = d.meta.shards
    resp.schema.index_setting.routing_fields.extend(d.meta.routing_fields)
    for name, order in d.meta.index_sort:
        s = resp.schema.index_sort.sorter.add()
        s.field_sort.field_name = name
        s.field_sort.order = 1 if order == "DESC" else 0
    resp.schema.index_sort.sorter.add().pk_sort.order = 0
    resp.sync_stat.sync_phase = FULL if d.sync_phase == "FULL" else INCR
    resp.sync_stat.current_sync_timestamp = d.current_to * 1_000_000  # ns, as Tablestore sends
    resp.create_time = int(d.meta.created_at * 1_000_000)
    resp.time_to_live = d.meta.ttl
    return resp


def list_search_index(db: Database, req) -> object:
    resp = pb.ListSearchIndexResponse()
    table = req.table_name if req.HasField("table_name") and req.table_name else None
    for t, n in db.list_search_index(table):
        resp.indices.add(table_name=t, index_name=n)
    return resp


def update_search_index(db: Database, req) -> object:
    if not req.HasField("time_to_live"):
        raise ParameterInvalid("UpdateSearchIndex needs time_to_live")
    db.update_search_index(req.table_name, req.index_name, ttl=req.time_to_live)
    return pb.UpdateSearchIndexResponse()


def delete_search_index(db: Database, req) -> object:
    db.delete_search_index(req.table_name, req.index_name)
    return pb.DeleteSearchIndexResponse()


# -- queries -------------------------------------------------------------------------------


def _value(raw: bytes) -> object:
    return plainbuffer.decode_value(raw)


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
        m = pb.TermQuery.FromString(body)
        return Q.TermQuery(m.field_name, _value(m.term))
    if kind == "TERMS_QUERY":
        m = pb.TermsQuery.FromString(body)
        return Q.TermsQuery(m.field_name, [_value(t) for t in m.terms])
    if kind == "RANGE_QUERY":
        m = pb.RangeQuery.FromString(body)
        return Q.RangeQuery(m.field_name, _value(m.range_from) if m.HasField("range_from") else None,
                            _value(m.range_to) if m.HasField("range_to") else None,
                            m.include_lower, m.include_upper)
    if kind == "PREFIX_QUERY":
        m = pb.PrefixQuery.FromString(body)
        return Q.PrefixQuery(m.field_name, m.prefix)
    if kind == "WILDCARD_QUERY":
        m = pb.WildcardQuery.FromString(body)
        return Q.WildcardQuery(m.field_name, m.value)
    if kind == "EXISTS_QUERY":
        return Q.ExistsQuery(pb.ExistsQuery.FromString(body).field_name)
    if kind == "MATCH_QUERY":
        m = pb.MatchQuery.FromString(body)
        msm = int(m.new_minimum_should_match) if m.new_minimum_should_match else (
            m.minimum_should_match if m.HasField("minimum_should_match") else None)
        return Q.MatchQuery(m.field_name, m.text, msm, "AND" if m.operator == 2 else "OR")
    if kind == "MATCH_PHRASE_QUERY":
        m = pb.MatchPhraseQuery.FromString(body)
        return Q.MatchPhraseQuery(m.field_name, m.text, m.slop)
    if kind == "BOOL_QUERY":
        m = pb.BoolQuery.FromString(body)
        msm = int(m.new_minimum_should_match) if m.new_minimum_should_match else (
            m.minimum_should_match if m.HasField("minimum_should_match") else None)
        return Q.BoolQuery([sub(x) for x in m.must_queries], [sub(x) for x in m.must_not_queries],
                           [sub(x) for x in m.filter_queries], [sub(x) for x in m.should_queries], msm)
    if kind == "CONST_SCORE_QUERY":
        return Q.ConstScoreQuery(sub(pb.ConstScoreQuery.FromString(body).filter))
    if kind == "FUNCTION_SCORE_QUERY":
        m = pb.FunctionScoreQuery.FromString(body)
        return Q.FunctionScoreQuery(sub(m.query), Q.FieldValueFactor(m.field_value_factor.field_name))
    if kind == "NESTED_QUERY":
        m = pb.NestedQuery.FromString(body)
        return Q.NestedQuery(m.path, sub(m.query), _SCORE_MODE.get(m.score_mode, "avg"))
    if kind == "GEO_DISTANCE_QUERY":
        m = pb.GeoDistanceQuery.FromString(body)
        return Q.GeoDistanceQuery(m.field_name, m.center_point, m.distance)
    if kind == "GEO_BOUNDING_BOX_QUERY":
        m = pb.GeoBoundingBoxQuery.FromString(body)
        return Q.GeoBoundingBoxQuery(m.field_name, m.top_left, m.bottom_right)
    if kind == "GEO_POLYGON_QUERY":
        m = pb.GeoPolygonQuery.FromString(body)
        return Q.GeoPolygonQuery(m.field_name, list(m.points))
    raise NotSupported(f"query type {kind} is not supported")


def decode_sort(msg) -> list[S.Sorter]:
    out: list[S.Sorter] = []
    for s in msg.sorter:
        if s.HasField("field_sort"):
            f = s.field_sort
            out.append(S.FieldSort(f.field_name, _ORDER[f.order],
                                   _MODE[f.mode] if f.HasField("mode") else None))
        elif s.HasField("pk_sort"):
            out.append(S.PrimaryKeySort(_ORDER[s.pk_sort.order]))
        elif s.HasField("score_sort"):
            out.append(S.ScoreSort(_ORDER[s.score_sort.order] if s.score_sort.HasField("order")
                                   else "DESC"))
        elif s.HasField("geo_distance_sort"):
            g = s.geo_distance_sort
            out.append(S.GeoDistanceSort(g.field_name, tuple(g.points), _ORDER[g.order],
                                         _MODE[g.mode] if g.HasField("mode") else "min"))
        else:
            raise NotSupported("only field, primary-key, score and geo-distance sorts are supported")
    return out


_AGGS = {1: ("AvgAggregation", A.AvgAgg), 2: ("MaxAggregation", A.MaxAgg),
         3: ("MinAggregation", A.MinAgg), 4: ("SumAggregation", A.SumAgg),
         5: ("CountAggregation", A.CountAgg), 6: ("DistinctCountAggregation", A.DistinctCountAgg)}
_AGG_RESULTS = {1: "AvgAggregationResult", 2: "MaxAggregationResult", 3: "MinAggregationResult",
                4: "SumAggregationResult", 5: "CountAggregationResult",
                6: "DistinctCountAggregationResult"}


def decode_aggs(msg) -> list:
    out = []
    for a in msg.aggs:
        if a.type not in _AGGS:
            raise NotSupported(f"aggregation type {a.type} is not supported over the wire yet")
        name, cls = _AGGS[a.type]
        body = getattr(pb, name).FromString(a.body)
        if a.type == 5:
            out.append(cls(a.name, body.field_name))
        else:
            missing = _value(body.missing) if body.HasField("missing") else None
            out.append(cls(a.name, body.field_name, missing))
    return out


def encode_aggs(aggs: list, results: dict):
    out = pb.AggregationsResult()
    for a in aggs:
        t = next(k for k, (_, cls) in _AGGS.items() if isinstance(a, cls))
        v = results[a.name]
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
            out.append(A.GroupKeySort(_ORDER[s.group_key_sort.order]))
        elif s.HasField("row_count_sort"):
            out.append(A.RowCountSort(_ORDER[s.row_count_sort.order]))
        elif s.HasField("sub_agg_sort"):
            out.append(A.SubAggSort(s.sub_agg_sort.sub_agg_name, _ORDER[s.sub_agg_sort.order]))
    return tuple(out)


def decode_group_bys(msg) -> list:
    out = []
    for g in msg.group_bys:
        if g.type == 1:
            m = pb.GroupByField.FromString(g.body)
            out.append(A.GroupByField(g.name, m.field_name, m.size if m.HasField("size") else 10,
                                      _group_sort(m.sort), tuple(decode_aggs(m.sub_aggs)),
                                      tuple(decode_group_bys(m.sub_group_bys))))
        elif g.type == 2:
            m = pb.GroupByRange.FromString(g.body)
            ranges = tuple((None if math.isinf(r.begin) else r.begin, None if math.isinf(r.end) else r.end)
                           for r in m.ranges)
            out.append(A.GroupByRange(g.name, m.field_name, ranges, tuple(decode_aggs(m.sub_aggs)),
                                      tuple(decode_group_bys(m.sub_group_bys))))
        elif g.type == 3:
            m = pb.GroupByFilter.FromString(g.body)
            out.append(A.GroupByFilter(g.name, tuple(decode_query(q) for q in m.filters),
                                       tuple(decode_aggs(m.sub_aggs)), tuple(decode_group_bys(m.sub_group_bys))))
        else:
            raise NotSupported(f"group-by type {g.type} is not supported over the wire yet")
    return out


def encode_group_bys(gbs: list, results: dict):
    out = pb.GroupBysResult()
    for g in gbs:
        groups = results[g.name]
        if isinstance(g, A.GroupByField):
            r = pb.GroupByFieldResult()
            for grp in groups:
                item = r.group_by_field_result_items.add(key=str(grp.key), row_count=grp.row_count)
                _sub(item, g, grp)
            t = 1
        elif isinstance(g, A.GroupByRange):
            r = pb.GroupByRangeResult()
            for grp in groups:
                lo, hi = grp.key
                item = r.group_by_range_result_items.add(
                    range_from=-math.inf if lo is None else lo, range_to=math.inf if hi is None else hi,
                    row_count=grp.row_count)
                _sub(item, g, grp)
            t = 2
        else:
            r = pb.GroupByFilterResult()
            for grp in groups:
                item = r.group_by_filter_result_items.add(row_count=grp.row_count)
                _sub(item, g, grp)
            t = 3
        out.group_by_results.add(name=g.name, type=t, group_by_result=r.SerializeToString())
    return out


def _sub(item, g, grp) -> None:
    if g.sub_aggs:
        item.sub_aggs_result.CopyFrom(encode_aggs(list(g.sub_aggs), grp.aggs))
    if g.sub_group_bys:
        item.sub_group_bys_result.CopyFrom(encode_group_bys(list(g.sub_group_bys), grp.group_bys))


def _columns(ctg) -> object:
    if ctg.return_type == 2:
        return list(ctg.column_names)
    return _RETURN.get(ctg.return_type, RETURN_NONE)


def _routing(table, raw: list[bytes]) -> list | None:
    if not raw:
        return None
    return [tuple(v for _, v in convert.decode_row(r).primary_key) for r in raw]


def search(db: Database, req) -> object:
    table = db.table(req.table_name)
    sq = pb.SearchQuery.FromString(req.search_query)
    if sq.HasField("collapse"):
        raise NotSupported("collapse is not supported")
    query = decode_query(sq.query) if sq.HasField("query") else Q.MatchAllQuery()
    sort = decode_sort(sq.sort) if sq.HasField("sort") and len(sq.sort.sorter) else None
    aggs = decode_aggs(sq.aggs) if sq.HasField("aggs") else []
    gbs = decode_group_bys(sq.group_bys) if sq.HasField("group_bys") else []
    res = db.search(req.table_name, req.index_name, query, sort=sort,
                    offset=sq.offset if sq.HasField("offset") else 0,
                    limit=sq.limit if sq.HasField("limit") else 10,
                    next_token=sq.token if sq.HasField("token") and sq.token else None,
                    columns=_columns(req.columns_to_get), get_total_count=sq.get_total_count,
                    aggs=aggs, group_bys=gbs, routing_values=_routing(table, list(req.routing_values)))
    resp = pb.SearchResponse(total_hits=res.total_count, is_all_succeed=res.is_all_succeeded)
    for hit in res.search_hits:
        resp.rows.append(convert.encode_result(table._names, hit.row)[0])
        resp.search_hits.add(score=hit.score)
    if res.next_token:
        resp.next_token = res.next_token
    if aggs:
        resp.aggs = encode_aggs(aggs, res.aggs).SerializeToString()
    if gbs:
        resp.group_bys = encode_group_bys(gbs, res.group_bys).SerializeToString()
    return resp


def compute_splits(db: Database, req) -> object:
    if not req.HasField("search_index_splits_options"):
        raise ParameterInvalid("ComputeSplits needs search_index_splits_options")
    s = db.compute_splits(req.table_name, req.search_index_splits_options.index_name)
    return pb.ComputeSplitsResponse(session_id=s["session_id"].encode(), splits_size=s["splits_count"])


def parallel_scan(db: Database, req) -> object:
    table = db.table(req.table_name)
    sq = pb.ScanQuery.FromString(req.scan_query)
    query = decode_query(sq.query) if sq.HasField("query") else Q.MatchAllQuery()
    res = db.search_parallel_scan(
        req.table_name, req.index_name, query, req.session_id.decode("utf-8", "replace"),
        sq.max_parallel if sq.HasField("max_parallel") else 1,
        sq.current_parallel_id, sq.limit if sq.HasField("limit") else 100,
        sq.token if sq.HasField("token") and sq.token else None, _columns(req.columns_to_get))
    resp = pb.ParallelScanResponse()
    for row in res.rows:
        resp.rows.append(convert.encode_result(table._names, row)[0])
    if res.next_token:
        resp.next_token = res.next_token
    return resp
