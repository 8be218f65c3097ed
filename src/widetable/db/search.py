"""The search-index calls of the Database facade (Tablestore's SearchIndex API).

``Database`` mixes this in; every call checks the store is open and forwards to
``search.manager.SearchManager`` (``self._search``), resolving table names.
"""

from __future__ import annotations

from ..search.execute import SearchResult
from ..search.results import SearchIndexDescription, SearchIndexReport
from ..search.query import Query
from ..search.schema import DEFAULT_SHARDS, IndexMeta


class SearchFacade:
    """Search-index DDL, searches, parallel export and verification."""

    def create_search_index(self, table: str, name: str, fields: list, index_sort: list | None = None,
                            routing_fields: list | None = None, ttl: int = -1,
                            shards: int = DEFAULT_SHARDS) -> IndexMeta:
        """Create search index ``name`` on ``table`` and start its full sync (phase FULL,
        then INCR). ``fields``: FieldSchema objects, dicts or ``(name, type)``.
        Errors: OTSObjectAlreadyExist for a taken name; OTSParameterInvalid for an unknown
        type or analyzer, a field that cannot read its column's type, a TTL out of range."""
        self._check_open()  # type: ignore[attr-defined]
        with self._ddl_lock:  # type: ignore[attr-defined]
            return self._search.create(self._base_table(table), name, fields, index_sort,  # type: ignore[attr-defined]
                                       routing_fields, ttl, shards)

    def describe_search_index(self, table: str, name: str) -> SearchIndexDescription:
        """The definition (defaults filled in), sync phase, current-to time, lag, row count,
        size on disk, and rejected rows (count and the last one)."""
        self._check_open()  # type: ignore[attr-defined]
        return self._search.describe(self._base_table(table), name)  # type: ignore[attr-defined]

    def list_search_index(self, table: str | None = None) -> list[tuple[str, str]]:
        """``(table, index)`` of every search index (of ``table`` when given)."""
        self._check_open()  # type: ignore[attr-defined]
        return self._search.list(None if table is None else self._base_table(table))  # type: ignore[attr-defined]

    def update_search_index(self, table: str, name: str, ttl: int | None = None,
                            add_fields: list | None = None) -> IndexMeta:
        """Change the TTL, and/or add fields: the index is rebuilt in the background and
        searches switch to it once it has caught up."""
        self._check_open()  # type: ignore[attr-defined]
        with self._ddl_lock:  # type: ignore[attr-defined]
            return self._search.update(self._base_table(table), name, ttl, add_fields)  # type: ignore[attr-defined]

    def delete_search_index(self, table: str, name: str) -> None:
        """Drop the index and its files. OTSObjectNotExist if there is none."""
        self._check_open()  # type: ignore[attr-defined]
        with self._ddl_lock:  # type: ignore[attr-defined]
            self._search.delete(self._base_table(table), name)  # type: ignore[attr-defined]

    def search(self, table: str, index: str, query: Query, sort=None, offset: int = 0,
               limit: int = 10, next_token: bytes | None = None, columns=None,
               get_total_count: bool = False, aggs=None, group_bys=None,
               routing_values=None) -> SearchResult:
        """Run ``query`` (see ``widetable.search``); ``columns`` is RETURN_NONE (default),
        a list of names (RETURN_SPECIFIED), RETURN_ALL or RETURN_ALL_FROM_INDEX."""
        self._check_open()  # type: ignore[attr-defined]
        return self._search.search(self._base_table(table), index, query, sort, offset, limit,  # type: ignore[attr-defined]
                                   next_token, columns, get_total_count, aggs, group_bys,
                                   routing_values)

    def compute_splits(self, table: str, index: str) -> dict:
        """``{"session_id", "splits_count"}`` for a parallel scan."""
        self._check_open()  # type: ignore[attr-defined]
        return self._search.compute_splits(self._base_table(table), index)  # type: ignore[attr-defined]

    def search_parallel_scan(self, table: str, index: str, query: Query | None = None, session_id=None,
                      max_parallel: int = 1, current_parallel_id: int = 0, limit: int = 100,
                      next_token: bytes | None = None, columns=None) -> SearchResult:
        """One page of one split of a parallel export of a search index (Tablestore's
        ParallelScan; ``db.parallel_scan`` is the table's own). See ``SearchManager.parallel_scan``."""
        self._check_open()  # type: ignore[attr-defined]
        return self._search.parallel_scan(self._base_table(table), index, query, session_id,  # type: ignore[attr-defined]
                                          max_parallel, current_parallel_id, limit, next_token,
                                          columns)

    def verify_search_index(self, table: str, index: str, limit: int = 1000) -> SearchIndexReport:
        """Documents missing, stale or extra against the base table (waits for sync first)."""
        self._check_open()  # type: ignore[attr-defined]
        return self._search.verify(self._base_table(table), index, limit)  # type: ignore[attr-defined]

    def wait_for_search_indexes(self, table: str | None = None, index: str | None = None,
                                timeout: float = 30.0) -> bool:
        """Block until the search indexes have applied and committed every write."""
        self._check_open()  # type: ignore[attr-defined]
        t = None if table is None else self._base_table(table)  # type: ignore[attr-defined]
        return self._search.wait(t, index, timeout)  # type: ignore[attr-defined]
