"""Search-index APIs: CreateSearchIndex, DescribeSearchIndex, ListSearchIndex,
UpdateSearchIndex, DeleteSearchIndex, Search, ComputeSplits, ParallelScan.

Rows go back as one PlainBuffer row per element of ``rows``, attribute columns
sorted by name, with exactly one ``search_hit`` per row. The messages are
translated by ``wire/search.py``; ``widetable.search`` does the work.
"""

from __future__ import annotations

from ...db import Database
from ...errors import NotSupported, ParameterInvalid
from ...search import query as Q
from ...wire import convert
from ...wire.proto import check_text, pb
from ...wire.search import (
    FULL, INCR, ORDER, RETURN, decode_aggs, decode_group_bys, decode_query, decode_sort,
    encode_aggs, encode_group_bys, field_of, put_field,
)
from ...search.execute import RETURN_NONE

def create_search_index(db: Database, req) -> object:
    schema = req.schema
    fields = [field_of(fs) for fs in schema.field_schemas]
    sort = None
    if schema.HasField("index_sort"):
        sort = []
        for s in schema.index_sort.sorter:
            if s.HasField("pk_sort"):
                continue
            if not s.HasField("field_sort"):
                raise ParameterInvalid("index_sort takes field sorts and the primary-key sort")
            sort.append((s.field_sort.field_name, ORDER[s.field_sort.order]))
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
        put_field(resp.schema.field_schemas.add(), f)
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


def _columns(ctg) -> object:
    if ctg.return_type == 2:
        return list(ctg.column_names)
    return RETURN.get(ctg.return_type, RETURN_NONE)


def _routing(table, raw: list[bytes]) -> list | None:
    if not raw:
        return None
    return [tuple(v for _, v in convert.decode_row(r).primary_key) for r in raw]


def search(db: Database, req) -> object:
    table = db.table(req.table_name)
    sq = pb.SearchQuery.FromString(req.search_query)
    check_text(sq)
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
    def encode_row(row) -> bytes:
        return convert.encode_result(table._names, row)[0]

    if aggs:
        resp.aggs = encode_aggs(aggs, res.aggs, encode_row).SerializeToString()
    if gbs:
        resp.group_bys = encode_group_bys(gbs, res.group_bys, encode_row).SerializeToString()
    return resp


def compute_splits(db: Database, req) -> object:
    if not req.HasField("search_index_splits_options"):
        raise ParameterInvalid("ComputeSplits needs search_index_splits_options")
    s = db.compute_splits(req.table_name, req.search_index_splits_options.index_name)
    return pb.ComputeSplitsResponse(session_id=s["session_id"].encode(), splits_size=s["splits_count"])


def parallel_scan(db: Database, req) -> object:
    table = db.table(req.table_name)
    sq = pb.ScanQuery.FromString(req.scan_query)
    check_text(sq)
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
