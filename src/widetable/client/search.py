"""The search-index calls of ``widetable.connect``, over Tablestore's protocol.

``RemoteDatabase`` mixes this in: the same calls as the embedded store
(``db/search.py``), with the messages of ``wire/search.py``. What Tablestore's
DescribeSearchIndex does not carry (row count, size, rejected rows, lag) is -1
or None; ``verify_search_index`` and ``wait_for_search_indexes`` have no
protocol call and are refused.
"""

from __future__ import annotations

import time

from ..errors import NotSupported
from ..search.execute import SearchHit, SearchResult
from ..search.query import MatchAllQuery, Query
from ..search.results import SearchIndexDescription
from ..search.schema import DEFAULT_SHARDS, IndexMeta, as_field, check_field
from ..table.values import now_ms
from ..wire import plainbuffer
from ..wire import search as codec
from ..wire.proto import pb
from .table import read_row


class RemoteSearch:
    """Search-index DDL, searches and parallel export through a server."""

    def create_search_index(self, table: str, name: str, fields: list, index_sort: list | None = None,
                            routing_fields: list | None = None, ttl: int = -1,
                            shards: int = DEFAULT_SHARDS) -> None:
        req = pb.CreateSearchIndexRequest(table_name=table, index_name=name, time_to_live=ttl)
        for f in fields:
            codec.put_field(req.schema.field_schemas.add(), check_field(as_field(f)))
        req.schema.index_setting.number_of_shards = shards
        req.schema.index_setting.routing_fields.extend(routing_fields or [])
        for item in index_sort or []:
            fname, order = (item, "ASC") if isinstance(item, str) else item
            s = req.schema.index_sort.sorter.add()
            s.field_sort.field_name = fname
            s.field_sort.order = 1 if str(order).upper() == "DESC" else 0
        self._call("CreateSearchIndex", req)  # type: ignore[attr-defined]

    def describe_search_index(self, table: str, name: str) -> SearchIndexDescription:
        resp = pb.DescribeSearchIndexResponse.FromString(self._call(  # type: ignore[attr-defined]
            "DescribeSearchIndex", pb.DescribeSearchIndexRequest(table_name=table, index_name=name,
                                                                 include_sync_stat=True)))
        fields = tuple(codec.field_of(fs) for fs in resp.schema.field_schemas)
        sort = tuple((s.field_sort.field_name, "DESC" if s.field_sort.order == 1 else "ASC")
                     for s in resp.schema.index_sort.sorter if s.HasField("field_sort"))
        setting = resp.schema.index_setting
        meta = IndexMeta(table, name, 0, fields, sort, tuple(setting.routing_fields),
                         resp.time_to_live, setting.number_of_shards or DEFAULT_SHARDS,
                         resp.create_time / 1_000_000)
        phase = "FULL" if resp.sync_stat.sync_phase == codec.FULL else "INCR"
        current = resp.sync_stat.current_sync_timestamp // 1_000_000
        lag = max(now_ms() - current, 0) if phase == "INCR" and current else -1
        return SearchIndexDescription(meta, phase, current, lag, -1, -1, -1, None)

    def list_search_index(self, table: str | None = None) -> list[tuple[str, str]]:
        req = pb.ListSearchIndexRequest()
        if table is not None:
            req.table_name = table
        resp = pb.ListSearchIndexResponse.FromString(self._call("ListSearchIndex", req))  # type: ignore[attr-defined]
        return sorted((i.table_name, i.index_name) for i in resp.indices)

    def update_search_index(self, table: str, name: str, ttl: int | None = None,
                            add_fields: list | None = None) -> None:
        if add_fields is not None:
            raise NotSupported("adding fields does not travel over Tablestore's protocol")
        self._call("UpdateSearchIndex", pb.UpdateSearchIndexRequest(  # type: ignore[attr-defined]
            table_name=table, index_name=name, time_to_live=ttl if ttl is not None else -1))

    def delete_search_index(self, table: str, name: str) -> None:
        self._call("DeleteSearchIndex", pb.DeleteSearchIndexRequest(table_name=table, index_name=name))  # type: ignore[attr-defined]

    def search(self, table: str, index: str, query: Query, sort=None, offset: int = 0,
               limit: int = 10, next_token: bytes | None = None, columns=None,
               get_total_count: bool = False, aggs=None, group_bys=None,
               routing_values=None) -> SearchResult:
        sq = pb.SearchQuery(offset=offset, limit=limit, query=codec.encode_query(query),
                            get_total_count=get_total_count)
        if sort is not None:
            sq.sort.CopyFrom(codec.encode_sort(_sorters(sort)))
        if next_token is not None:
            sq.token = next_token
        aggs, group_bys = list(aggs or ()), list(group_bys or ())
        if aggs:
            sq.aggs.CopyFrom(codec.encode_agg_requests(aggs))
        if group_bys:
            sq.group_bys.CopyFrom(codec.encode_group_by_requests(group_bys))
        req = pb.SearchRequest(table_name=table, index_name=index, search_query=sq.SerializeToString(),
                               columns_to_get=codec.columns_msg(columns))
        names = None
        for rv in routing_values or []:
            if names is None:
                names = self.describe_search_index(table, index).meta.routing_fields
            values = rv if isinstance(rv, (list, tuple)) else [rv]
            req.routing_values.append(plainbuffer.encode_primary_key(list(zip(names, values))))
        resp = pb.SearchResponse.FromString(self._call("Search", req))  # type: ignore[attr-defined]
        rows = [read_row(r) for r in resp.rows]
        hits = [SearchHit(h.score, r) for h, r in zip(resp.search_hits, rows)]
        return SearchResult(
            rows, resp.total_hits if get_total_count else -1,
            resp.next_token if resp.HasField("next_token") and resp.next_token else None,
            codec.decode_agg_results(aggs, resp.aggs, read_row) if aggs else {},
            codec.decode_group_by_results(group_bys, resp.group_bys, read_row) if group_bys else {},
            hits, resp.is_all_succeed)

    def compute_splits(self, table: str, index: str) -> dict:
        req = pb.ComputeSplitsRequest(table_name=table)
        req.search_index_splits_options.index_name = index
        resp = pb.ComputeSplitsResponse.FromString(self._call("ComputeSplits", req))  # type: ignore[attr-defined]
        return {"session_id": resp.session_id.decode("utf-8"), "splits_count": resp.splits_size}

    def search_parallel_scan(self, table: str, index: str, query: Query | None = None, session_id=None,
                             max_parallel: int = 1, current_parallel_id: int = 0, limit: int = 100,
                             next_token: bytes | None = None, columns=None) -> SearchResult:
        sq = pb.ScanQuery(query=codec.encode_query(query or MatchAllQuery()), limit=limit,
                          current_parallel_id=current_parallel_id, max_parallel=max_parallel)
        if next_token is not None:
            sq.token = next_token
        req = pb.ParallelScanRequest(table_name=table, index_name=index,
                                     session_id=str(session_id or "").encode(),
                                     scan_query=sq.SerializeToString(),
                                     columns_to_get=codec.columns_msg(columns))
        resp = pb.ParallelScanResponse.FromString(self._call("ParallelScan", req))  # type: ignore[attr-defined]
        return SearchResult([read_row(r) for r in resp.rows], -1,
                            resp.next_token if resp.next_token else None)

    def verify_search_index(self, table: str, index: str, limit: int = 1000):
        raise NotSupported("verify_search_index runs on the store itself (widetable.open)")

    def wait_for_search_indexes(self, table: str | None = None, index: str | None = None,
                                timeout: float = 30.0) -> bool:
        """Poll DescribeSearchIndex until the index follows the log (INCR) and has no lag."""
        deadline = time.monotonic() + timeout
        targets = [(table, index)] if table and index else self.list_search_index(table)
        for t, n in targets:
            while self.describe_search_index(t, n).sync_phase != "INCR":  # type: ignore[arg-type]
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.05)
        time.sleep(1.0)  # a write is searchable within a second once the index follows the log
        return True


def _sorters(sort: object) -> list:
    if isinstance(sort, (list, tuple)):
        return list(sort)
    return [sort]

