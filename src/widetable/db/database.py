"""The Database facade: one store's public API over its catalog, background work and layers.

``widetable.open(path)`` returns a :class:`Database`. The facade checks the
store is open and forwards: DDL to ``catalog.py``, background work to
``background.py``, rows and batches to ``table/``, indexes to ``index/``,
streams to ``stream/``, partitions to ``partition/``. The lower layers share
one :class:`~widetable.context.StoreContext`, made here.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import math
import os
import threading
from collections.abc import Callable

from ..context import StoreContext
from ..descriptions import LoopState
from ..errors import ParameterInvalid, describe
from ..index.manager import IndexManager
from ..index.verify import IndexReport
from ..partition import scan as partition_scan
from ..partition.manager import PartitionManager
from ..search.changes import LogSource
from ..search.manager import SearchManager, search_root
from ..storage import Engine, open_engine
from ..stream import api as stream_api
from ..stream.consumers import ChangeLog
from ..table.autoinc import AutoIncrementCounters
from ..table.batch import batch_get_row, batch_write_row
from ..table.locks import DEFAULT_STRIPES, RowLocks
from ..table.row import BatchGetResult, BatchWriteResult
from ..table.schema import DEFAULT_MAX_TIME_DEVIATION
from ..table.table import Table
from ..table.transaction import DEFAULT_TIMEOUT, LocalTransaction, TransactionRegistry
from .background import DEFAULT_MAINTENANCE_INTERVAL, DEFAULT_PURGE_INTERVAL, Background
from .catalog import Catalog, TableDescription, TableIds
from .format import check_format
from .search import SearchFacade

ROW_LOCK_STRIPES = DEFAULT_STRIPES  # enough for a GIL-bound process; a 200-row batch takes ~140

log = logging.getLogger("widetable")
# Stores open in this process, closed at exit if their owner did not (see Database.close).
# Held strongly: a store whose Database object is gone still runs its threads (they hold
# the store context), and they too must stop before the interpreter does.
_OPEN: set[Database] = set()


@atexit.register
def _close_open_stores() -> None:
    """At interpreter exit, before modules and rocksdict go: close every store left open.

    Runs after non-daemon threads have ended and while daemon ones still run, so the
    background threads are stopped and joined while they can still finish their call."""
    for db in list(_OPEN):  # a copy: close() discards itself
        try:
            db.close()
        except Exception:  # noqa: BLE001 - at exit: report, and close the others
            log.exception("widetable: closing a store left open at exit failed")



def _googlesql(bt):
    """The GoogleSQL engine of ``db.bigtable`` (sqlglot, pyarrow and DuckDB load on the
    first query, not with the Bigtable model)."""
    from ..sql.googlesql import GoogleSQL

    return GoogleSQL(bt)

class Database(SearchFacade):
    """A store of wide tables. Thread-safe; close it (or use ``with``) when done."""

    def __init__(
        self,
        engine: Engine,
        purge_interval: float | None = DEFAULT_PURGE_INTERVAL,
        maintenance_interval: float | None = DEFAULT_MAINTENANCE_INTERVAL,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """``clock`` (unix seconds) drives partition passes, statistics and throttling
        instead of the wall clock: simulators pass a virtual one (widetable.design).

        Checks the store's format version first (``db/format.py``): a store of an older
        version is upgraded, one of a newer version refused (``OTSNotSupported``) and
        its engine closed."""
        try:
            check_format(engine, getattr(engine, "path", None))
        except BaseException:
            engine.close()
            raise
        ctx = self._ctx = StoreContext(engine, RowLocks(ROW_LOCK_STRIPES))
        self._engine = engine
        self._row_locks = ctx.row_locks.stripes
        self._ddl_lock = threading.RLock()
        self._tables: dict[str, Table] = ctx.tables
        ctx.ids = TableIds(engine)
        self._txns = ctx.txns = TransactionRegistry(ctx)
        self._txn_locks = ctx.txn_locks = self._txns.locks  # shared with every Table: empty = no checks
        self._autoinc = ctx.autoinc = AutoIncrementCounters(engine)
        self.path = ctx.path
        self._partitions = ctx.partitions = PartitionManager(engine, clock)
        self._changelog = ctx.changelog = ChangeLog(ctx)  # its consumers, feeds and trimming
        self._indexes = IndexManager(ctx)  # change feeds, secondary indexes, their applier
        self._indexer = self._indexes.indexer
        self._background = Background(ctx, purge_interval, maintenance_interval)
        self._catalog = ctx.catalog = Catalog(ctx, self._indexes, self._ddl_lock,
                                              self._background.max_versions_lowered)
        self._catalog.load()
        self._search = SearchManager(engine, search_root(ctx.path), self._catalog.base_table,
                                     ctx.ids.take, LogSource(ctx.changelog))
        self._search.open(self._tables)
        self._sql = None  # widetable.sql.SQLSession, made on the first db.sql call
        self._bigtable = None  # widetable.bigtable.BigtableInstance, made on first use
        self._sql_lock = threading.Lock()
        if isinstance(self.path, str) and os.path.exists(
                os.path.join(self.path, "sql", "replica.duckdb")):  # sql/replica.replica_path
            # SQL's columnar replicas are change-log consumers: registered before any write
            self._sql_session().resume_replicas()
        self._background.start()
        _OPEN.add(self)

    @property
    def bigtable(self):
        """The Bigtable data model over this store (``widetable.bigtable.BigtableInstance``):
        tables with one BINARY row key and column families, beside the Tablestore ones."""
        if self._bigtable is None:
            from ..bigtable.instance import BigtableInstance

            self._bigtable = BigtableInstance(self._ctx, sql=_googlesql)
        return self._bigtable

    # -- lifecycle --------------------------------------------------------------

    @property
    def _closed(self) -> bool:
        return self._ctx.closed

    def _check_open(self) -> None:
        self._ctx.check_open()

    def compact(self) -> None:
        """Flush memtables and compact the whole store: reads then find every row in one place."""
        self._check_open()
        self._engine.compact()

    def transactions_open(self) -> bool:
        """Whether a local transaction holds a partition key now: then a plain write to
        that key waits up to 50 ms for it (and fails with OTSRowOperationConflict)."""
        return bool(self._txn_locks)

    def close(self) -> None:
        """Stop background work and close the engine. Idempotent.

        A store still open when the interpreter exits is closed then (``atexit``):
        its threads are stopped and joined before the engine goes, so an exit
        without ``close()`` never kills a thread inside RocksDB (which aborted the
        process, SIGABRT)."""
        _OPEN.discard(self)
        if self._ctx.closed:
            return
        self._background.signal_stop()
        self._search.close()
        self._txns.close()
        self._indexes.close()
        self._background.join(timeout=10)
        if self._sql is not None:
            self._sql.close()
        if self._bigtable is not None:
            self._bigtable.close()
        with self._ddl_lock:
            self._partitions.flush()
            self._ctx.closed = True
            for table in [*self._tables.values(), *self._indexes.views.values()]:
                table._unusable = True  # each checks the store before its next call
            self._engine.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- catalog ----------------------------------------------------------------

    def create_table(
        self,
        name: str,
        primary_key: list,
        max_versions: int = 1,
        ttl: int | None = None,
        max_time_deviation: int = DEFAULT_MAX_TIME_DEVIATION,
        split_points: list | None = None,
        defined_columns: list | None = None,
        stream: bool = False,
        stream_retention: int = 86400,
        **partition_options: float,
    ) -> Table:
        """Create a table. Raises ``OTSObjectAlreadyExist`` if the name is taken.

        ``defined_columns`` (``[(name, type)]``, attribute types) are typed predefined
        columns: writes of another type fail, and indexes may use them. ``stream``
        turns on the change stream (``list_stream``, ``get_stream_record``), whose
        records are kept ``stream_retention`` seconds (24 h).
        ``split_points`` (partition-key values) pre-split it into partitions.
        ``partition_options`` are the TableOptions of partitions: ``capacity``
        (operations per second per partition, 0 = unlimited), ``reserved_throughput``,
        ``split_size``, ``split_load``, ``split_load_window``, ``merge_size``,
        ``merge_load``, ``merge_window``, ``stats_retention``.
        """
        self._check_open()
        return self._catalog.create_table(
            name, primary_key, max_versions, ttl, max_time_deviation, split_points,
            defined_columns, stream, stream_retention, partition_options,
        )

    def _take_table_id(self, batch) -> int:
        return self._ctx.ids.take(batch)

    def table(self, name: str) -> Table:
        """The table called ``name``; raises ``OTSObjectNotExist`` if there is none.

        An index's name gives a read-only view of the index (``widetable.index.view``).
        """
        return self._catalog.table(name)

    def _base_table(self, name: str) -> Table:
        """``table(name)``, refusing an index (DDL applies to tables)."""
        return self._catalog.base_table(name)

    def list_tables(self) -> list[str]:
        self._check_open()
        return sorted(self._tables)

    def describe_table(self, name: str) -> TableDescription:
        """The table's schema, options, partitions, indexes (lag, applier errors, rows too
        long to index) and the store's background loops (``background_state``)."""
        return dataclasses.replace(self._catalog.describe_table(name), background=self.background_state())

    def background_state(self) -> list[LoopState]:
        """How each background loop is doing: purge, maintenance, the index applier and
        each SQL columnar replica (ok, or the last error, when and how often; see
        ``widetable.health``)."""
        self._check_open()
        replicas = self._sql.replica_health() if self._sql is not None else []
        return [*self._background.states(), self._indexer.health.state(), *replicas]

    def update_table(
        self,
        name: str,
        max_versions: int | None = None,
        ttl: int | None = None,
        max_time_deviation: int | None = None,
        defined_columns: list | None = None,
        stream: bool | None = None,
        stream_retention: int | None = None,
        **partition_options: float,
    ) -> TableDescription:
        """Change table options (see ``create_table``); omitted options keep their value.

        ``defined_columns`` adds predefined columns; ``stream`` turns the change
        stream on or off (off drops its records unless a global index needs them).
        """
        return self._catalog.update_table(
            name, max_versions, ttl, max_time_deviation, defined_columns, stream,
            stream_retention, partition_options,
        )

    def delete_table(self, name: str) -> None:
        """Drop a table and all its rows (and its search indexes)."""
        with self._ddl_lock:
            self._search.drop_table(self._base_table(name))
            self._catalog.delete_table(name)

    # -- secondary indexes and the change stream -----------------------------------

    def create_index(
        self,
        table: str,
        name: str,
        primary_key: list[str],
        defined_columns: list[str] | None = None,
        index_type: str = "GLOBAL",
        include_base_data: bool = True,
        progress: bool | None = None,
    ) -> Table:
        """Create a secondary index of ``table`` and return its read-only view.

        The index key is ``primary_key`` (base key columns or predefined columns)
        followed by the table's remaining key columns. ``defined_columns``
        (predefined columns) are copied into each entry. A ``LOCAL`` index must
        start with the partition key and is written in the same batch as its
        row (strongly consistent); a ``GLOBAL`` one is applied from the change
        log in the background (eventually consistent; see ``describe_table`` for
        its lag). ``include_base_data`` backfills existing rows, with a progress
        bar on a terminal (``progress``).
        """
        self._check_open()
        return self._catalog.create_index(table, name, primary_key, defined_columns, index_type,
                                          include_base_data, progress)

    def drop_index(self, table: str, name: str) -> None:
        """Drop index ``name`` of ``table`` and its entries."""
        self._check_open()
        self._catalog.drop_index(table, name)

    def verify_index(self, table: str, name: str, limit: int = 1000) -> IndexReport:
        """Compare index ``name`` with the index derived from ``table``'s rows now:
        the report lists missing and stale entries (a global index may lag;
        call ``wait_for_indexes`` first)."""
        self._check_open()
        if type(limit) is not int or limit < 1:
            raise ParameterInvalid(f"limit must be a positive integer, got {describe(limit)}")
        return self._indexes.verify(self._base_table(table), name, limit)

    def wait_for_indexes(self, timeout: float | None = 30.0) -> bool:
        """Block until every global index has applied every committed write; False on timeout."""
        self._check_open()
        if timeout is not None and (type(timeout) not in (int, float) or not timeout >= 0):
            raise ParameterInvalid(
                f"timeout must be seconds >= 0 or None (no limit), got {describe(timeout)}")
        return self._indexer.wait(timeout)

    def trim_change_log(self) -> int:
        """Drop change records past retention that every index has applied; returns how many."""
        self._check_open()
        return self._indexes.trim()

    def list_stream(self, table: str | None = None) -> list[stream_api.StreamInfo]:
        """The streams of every table with ``stream`` on (or of ``table``)."""
        self._check_open()
        return stream_api.list_stream(self._ctx, table)

    def describe_stream(self, stream_id: str) -> stream_api.StreamDescription:
        """A stream's shards (partitions, current and past) with their parent and child links."""
        self._check_open()
        return stream_api.describe_stream(self._ctx, stream_id)

    def get_shard_iterator(self, stream_id: str, shard_id: int, position: object = "TRIM_HORIZON") -> str:
        """An opaque iterator into one shard: at ``TRIM_HORIZON`` (its oldest record),
        ``LATEST`` (after its newest) or a sequence number."""
        self._check_open()
        return stream_api.get_shard_iterator(self._ctx, stream_id, shard_id, position)

    def get_stream_record(self, iterator: str, limit: int = 100) -> stream_api.StreamRecords:
        """Up to ``limit`` records from ``iterator`` in commit order, and the next iterator
        (None once a closed shard is drained)."""
        self._check_open()
        return stream_api.get_stream_record(self._ctx, iterator, limit)

    def iterator_table(self, iterator: str) -> Table | None:
        """The table whose stream ``iterator`` reads (None: it is gone since);
        ``OTSParameterInvalid`` if ``iterator`` is not a shard iterator."""
        self._check_open()
        return stream_api.iterator_table(self._ctx, iterator)

    # -- batches ----------------------------------------------------------------

    def batch_get_row(self, requests: list) -> list[BatchGetResult]:
        """Read up to 100 rows across tables; one result (row or error) per request."""
        self._check_open()
        return batch_get_row(self._ctx, requests)

    def batch_write_row(self, requests: list) -> list[BatchWriteResult]:
        """Write up to 200 rows (4 MB) across tables; one result per row. Not atomic across rows."""
        self._check_open()
        return batch_write_row(self._ctx, requests)

    # -- local transactions -----------------------------------------------------

    def start_local_transaction(
        self, table: str, partition_key: object, timeout: float = DEFAULT_TIMEOUT
    ) -> LocalTransaction:
        """Open a transaction on the rows of ``table`` whose first key column is ``partition_key``.

        Its writes are buffered and land together at ``commit()``; reads in it
        see committed data plus its own writes (read committed). Until it
        ends, other writers to that partition-key value wait briefly and then
        fail with ``OTSRowOperationConflict``, as does a second transaction on
        it. After ``timeout`` idle seconds (60, as in Tablestore) it is
        aborted. Not allowed on tables with an auto-increment column, nor on
        an index (write to its table).
        """
        self._check_open()
        return self._txns.start(self._base_table(table), partition_key, timeout)

    def commit_transaction(self, transaction_id: str) -> None:
        """Commit the open transaction ``transaction_id``; ``OTSSessionNotExist`` if there is none."""
        self._txns.get(transaction_id).commit()

    def abort_transaction(self, transaction_id: str) -> None:
        """Abort the open transaction ``transaction_id``; ``OTSSessionNotExist`` if there is none."""
        self._txns.get(transaction_id).abort()

    def transaction(self, transaction_id: str) -> LocalTransaction:
        """The open transaction ``transaction_id``; ``OTSSessionNotExist`` if there is none."""
        return self._txns.get(transaction_id)

    # -- partitions -------------------------------------------------------------

    def maintain_partitions(self, name: str | None = None) -> int:
        """Run one partition pass now: split by size and load, merge cold neighbours,
        store statistics. Returns the splits, merges and hot keys recorded."""
        self._check_open()
        return self._partitions.maintain(self.table(name) if name else None)

    def split_partition(self, name: str, at: object) -> None:
        """Split the partition holding partition-key value ``at`` so one starts there."""
        with self._ddl_lock:
            self._partitions.split(self.table(name), at)

    def merge_partitions(self, name: str, index: int) -> None:
        """Merge partition ``index`` (as listed by describe_table) with the next one."""
        with self._ddl_lock:
            self._partitions.merge(self.table(name), index)

    def table_stats(self, name: str, since: float | None = None, until: float | None = None) -> dict:
        """Windowed per-partition counters of ``name`` as plain data (Key Visualizer input):
        ``{"buckets": [{"start", "seconds", "partitions": [...]}], "summary": {...}}``.
        ``since``/``until`` are unix seconds; the open bucket is included."""
        for what, value in (("since", since), ("until", until)):
            if value is not None and (type(value) not in (int, float) or not math.isfinite(value)):
                raise ParameterInvalid(f"{what} must be unix seconds or None, got {describe(value)}")
        return self._partitions.stats(self.table(name), since, until)

    def compute_split_points_by_size(self, name: str, split_size: int) -> list:
        """Ranges of about ``split_size`` bytes covering the table (estimates; see partition.scan)."""
        table = self.table(name)
        return partition_scan.compute_split_points_by_size(
            table, self._partitions.partitions(table), split_size
        )

    def sample_row_keys(self, name: str) -> list[tuple[tuple, int]]:
        """Bigtable's SampleRowKeys: ``[(key, byte offset), ...]`` ending with ``((), size)``."""
        table = self.table(name)
        return partition_scan.sample_row_keys(table, self._partitions.partitions(table))

    def parallel_scan(self, name: str, workers: int = 4, ordered: bool = True, **read_options):
        """Iterate every row of ``name``, scanning its partitions on ``workers`` threads;
        in key order if ``ordered``, else as they come. ``read_options``: columns, filter,
        max_versions."""
        unknown = sorted(set(read_options) - {"columns", "filter", "max_versions"})
        if unknown:
            raise ParameterInvalid(f"parallel_scan takes columns, filter and max_versions, "
                                   f"not {describe(unknown[0])}")
        table = self.table(name)
        return partition_scan.parallel_scan(
            table, self._partitions.partitions(table), workers, ordered, **read_options
        )

    # -- SQL ------------------------------------------------------------------------

    def sql(self, statement: str, params: list | None = None, **options: object):
        """Run one SQL statement (Tablestore's dialect; ``widetable.sql``) and return its
        ``SQLResult``: ``columns`` (names and SQL types), ``rows``, iteration (streamed),
        ``to_arrow()``, ``to_pandas()``. ``params`` bind the statement's ``?`` in order.
        ``options``: ``max_scan_rows`` (100,000), ``max_scan_bytes`` (128 MB) and
        ``timeout`` (30 s), each None for no limit. Queries see mapping tables
        (``CREATE TABLE t (..., PRIMARY KEY(...))`` maps data table ``t``)."""
        self._check_open()
        return self._sql_session().execute(statement, params, **options)  # type: ignore[arg-type]

    def wait_for_sql_replicas(self, timeout: float = 60.0) -> bool:
        """Wait until no columnar replica of SQL (``widetable.sql.replica``) is building;
        whether none is. Full scans read rows until their table's replica is ready."""
        self._check_open()
        return self._sql is None or self._sql.wait_for_replicas(timeout)

    def _sql_session(self):
        if self._sql is None:
            with self._sql_lock:
                if self._sql is None:
                    from ..sql import SQLSession
                    self._sql = SQLSession(self._ctx, search=self)  # its search-index calls
        return self._sql

    # -- garbage collection -----------------------------------------------------

    def purge_expired(self, name: str | None = None) -> int:
        """Rewrite rows holding cells expired by TTL or past max_versions; return rows changed."""
        self._check_open()
        changed = 0
        for table in [self.table(name)] if name else list(self._tables.values()):
            changed += self._background.purge_table(table)
        return changed


def open(
    path: str | None = "data",
    engine: str = "rocksdb",
    sync: bool = False,
    purge_interval: float | None = DEFAULT_PURGE_INTERVAL,
    maintenance_interval: float | None = DEFAULT_MAINTENANCE_INTERVAL,
    cache_mb: int | None = None,
) -> Database:
    """Open (creating if needed) a store at ``path``.

    ``engine="memory"`` (or ``path=":memory:"``) gives a store that lives only
    in this process. ``sync=True`` fsyncs every write for power-loss
    durability. Expired cells are purged every ``purge_interval`` seconds, and
    partitions split, merge and roll their statistics every
    ``maintenance_interval`` seconds (None turns either off).
    ``cache_mb``: RocksDB's block cache, in MB (default 256, filled only as
    data is read; 0 turns it off).
    """
    for what, value in (("purge_interval", purge_interval),
                        ("maintenance_interval", maintenance_interval)):
        if value is not None and (type(value) not in (int, float) or not 0 < value < math.inf):
            raise ParameterInvalid(f"{what} must be seconds > 0 or None (off), got {describe(value)}")
    return Database(open_engine(path, engine, sync, cache_mb), purge_interval,
                    maintenance_interval)
