"""The database: a catalog of tables in one engine, plus cross-table batches.

``widetable.open(path)`` returns a :class:`Database`. Schemas live in the
catalog keyspace; each table's rows live under its own table id, so dropping
a table is one range delete and a new table of the same name starts empty.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from .descriptions import MAX_STREAM_RETENTION, TableDescription, check_flag
from .errors import ObjectAlreadyExist, ObjectNotExist, ParameterInvalid, WidetableError, describe
from .index.manager import IndexManager
from .index.verify import IndexReport
from .keys import layout
from .partition import scan as partition_scan
from .partition.manager import PartitionManager
from .storage import Engine, open_engine
from .stream import api as stream_api
from .table import rowcodec
from .table.autoinc import AutoIncrementCounters
from .table.batch import batch_get_row, batch_write_row
from .table.reader import visible_versions
from .table.row import BatchGetResult, BatchWriteResult
from .table.schema import (
    DEFAULT_MAX_TIME_DEVIATION,
    PARTITION_OPTIONS,
    TableOptions,
    TableSchema,
    check_auto_increment,
    check_defined_columns,
    check_name,
    check_partition_options,
    check_primary_key,
    normalize_ttl,
)
from .table.table import Table
from .table.transaction import DEFAULT_TIMEOUT, LocalTransaction, TransactionRegistry
from .table.values import now_ms

ROW_LOCK_STRIPES = 256  # enough for a GIL-bound process; a 200-row batch takes ~140 of them
DEFAULT_PURGE_INTERVAL = 600.0
DEFAULT_MAINTENANCE_INTERVAL = 5.0  # seconds between partition split/merge passes


class Database:
    """A store of wide tables. Thread-safe; close it (or use ``with``) when done."""

    def __init__(
        self,
        engine: Engine,
        purge_interval: float | None = DEFAULT_PURGE_INTERVAL,
        maintenance_interval: float | None = DEFAULT_MAINTENANCE_INTERVAL,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """``clock`` (unix seconds) drives partition passes, statistics and throttling
        instead of the wall clock: simulators pass a virtual one (widetable.design)."""
        self._engine = engine
        self._row_locks = [threading.Lock() for _ in range(ROW_LOCK_STRIPES)]
        self._ddl_lock = threading.RLock()
        self._tables: dict[str, Table] = {}
        self._closed = False
        self._txns = TransactionRegistry(self)
        self._txn_locks = self._txns.locks  # shared with every Table: empty = no checks
        self._autoinc = AutoIncrementCounters(engine)
        self.path = getattr(engine, "path", None)
        self._partitions = PartitionManager(engine, clock)
        self._indexes = IndexManager(self)  # change feeds, secondary indexes, their applier
        self._indexer = self._indexes.indexer
        start, end = layout.catalog_range()
        for _, value in engine.scan(start, end):
            schema = TableSchema.from_json(value)
            self._tables[schema.name] = Table(self, schema)
            self._partitions.open_table(self._tables[schema.name])
            self._indexes.open_table(self._tables[schema.name])
        self._indexes.finish_builds()  # of indexes whose create_index was cut short
        self._stop = threading.Event()
        # Tables whose max_versions went down since the last background purge (their rows
        # may hold versions past it); None: the next pass covers every table (see _purge_round).
        self._purge_due: set[str] | None = None
        self._purge_due_lock = threading.Lock()
        self._purger: threading.Thread | None = None
        if purge_interval:
            self._purger = threading.Thread(
                target=self._purge_loop, args=(purge_interval,), name="widetable-purge", daemon=True
            )
            self._purger.start()
        self._maintainer: threading.Thread | None = None
        if maintenance_interval:
            self._maintainer = threading.Thread(
                target=self._maintain_loop, args=(maintenance_interval,),
                name="widetable-partitions", daemon=True,
            )
            self._maintainer.start()

    # -- lifecycle --------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise WidetableError("the database is closed", "OTSParameterInvalid")

    def compact(self) -> None:
        """Flush memtables and compact the whole store: reads then find every row in one place."""
        self._check_open()
        self._engine.compact()

    def transactions_open(self) -> bool:
        """Whether a local transaction holds a partition key now: then a plain write to
        that key waits up to 50 ms for it (and fails with OTSRowOperationConflict)."""
        return bool(self._txn_locks)

    def close(self) -> None:
        """Stop background work and close the engine. Idempotent."""
        if self._closed:
            return
        self._stop.set()
        self._txns.close()
        self._indexes.close()
        if self._purger is not None:
            self._purger.join(timeout=10)
        if self._maintainer is not None:
            self._maintainer.join(timeout=10)
        with self._ddl_lock:
            self._partitions.flush()
            self._closed = True
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
        check_name(name, "table name")
        pk = check_primary_key(primary_key)
        auto_increment = check_auto_increment(primary_key)
        options = TableOptions(
            max_versions, normalize_ttl(ttl), max_time_deviation,  # type: ignore[arg-type]
            **check_partition_options(partition_options),  # type: ignore[arg-type]
        ).checked()
        defined = check_defined_columns(defined_columns, pk)
        check_flag(stream, "stream")
        retention = _check_retention(stream_retention)
        with self._ddl_lock:
            if name in self._tables or name in self._indexes.views:
                raise ObjectAlreadyExist(f"table {name!r} already exists")
            batch = self._engine.batch()
            table_id = self._take_table_id(batch)
            schema = TableSchema(
                name, table_id, pk, options, time.time(), auto_increment=auto_increment,
                defined_columns=defined, stream=stream, stream_retention=retention,
            )
            batch.put(layout.catalog_key(name), schema.to_json())
            partitions = self._partitions.new_table(schema, split_points, batch)
            self._engine.write(batch)
            table = Table(self, schema)
            self._partitions.open_table(table, partitions)
            self._tables[name] = table
            if stream:
                self._indexes.configure(table)
            return table

    def _take_table_id(self, batch) -> int:
        """A new table (or index) id, taken for good once ``batch`` is written: the counter
        moves past it, and keys a crash of an older version may have left under it (ids
        were handed out before the counter was stored) are deleted, in the same batch."""
        raw = self._engine.get(layout.counter_key("table_id"))
        last = int.from_bytes(raw, "big") if raw else 0
        if last >= layout.MAX_TABLE_ID:
            raise WidetableError("no table ids left in this store")
        table_id = last + 1
        batch.put(layout.counter_key("table_id"), table_id.to_bytes(8, "big"))
        for lo, hi in (layout.table_range(table_id), layout.checkpoint_range(table_id),
                       layout.index_ref_range(table_id)):
            batch.delete_range(lo, hi)
        return table_id

    def table(self, name: str) -> Table:
        """The table called ``name``; raises ``OTSObjectNotExist`` if there is none.

        An index's name gives a read-only view of the index (``widetable.index.view``).
        """
        self._check_open()
        try:
            return self._tables[name]
        except (KeyError, TypeError):
            view = self._indexes.views.get(name) if isinstance(name, str) else None
            if view is not None:
                return view
            raise ObjectNotExist(f"table {describe(name)} does not exist") from None

    def _base_table(self, name: str) -> Table:
        """``table(name)``, refusing an index (DDL applies to tables)."""
        table = self.table(name)
        if name not in self._tables:
            raise ParameterInvalid(f"{name!r} is an index of table {table.base.name!r}, not a table")  # type: ignore[attr-defined]
        return table

    def list_tables(self) -> list[str]:
        self._check_open()
        return sorted(self._tables)

    def describe_table(self, name: str) -> TableDescription:
        table = self.table(name)
        s = table.schema
        partitions, history = self._partitions.describe(table)
        return TableDescription(
            s.name, list(s.primary_key), s.options, s.table_id, s.created_at,
            auto_increment=s.auto_increment, partitions=partitions, split_history=history,
            defined_columns=list(s.defined_columns), stream=s.stream,
            stream_retention=s.stream_retention, indexes=self._indexes.describe(table),
            stream_id=stream_api.stream_id_of(s) if s.stream else None,
        )

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
        check_flag(stream, "stream", optional=True)
        with self._ddl_lock:
            table = self._base_table(name)
            old = table.schema.options
            old_stream = table.schema.stream
            options = TableOptions(
                old.max_versions if max_versions is None else max_versions,
                old.ttl if ttl is None else ttl,
                old.max_time_deviation if max_time_deviation is None else max_time_deviation,
            ).checked()
            kept = {n: getattr(old, n) for n in PARTITION_OPTIONS}
            options = replace(options, **{**kept, **check_partition_options(partition_options)}).checked()
            schema = table.schema.with_options(options)
            if schema.indexes and (options.max_versions != 1 or options.ttl != -1):
                raise ParameterInvalid(
                    f"table {name!r} has indexes: max_versions must stay 1 and ttl -1"
                )
            if defined_columns is not None:
                added = check_defined_columns(
                    list(schema.defined_columns) + list(defined_columns), schema.primary_key
                )
                schema = replace(schema, defined_columns=added)
            if stream is not None:
                schema = replace(schema, stream=stream)
                if stream and not old_stream:
                    # Turned on (again): a new stream, of the records after the log's last
                    # seq. Stored with the flag in the one catalog write: a process dying
                    # after it reopens to this stream, never to the old one.
                    schema = replace(schema, stream_since=self._indexes.last_seq(table))
            if stream_retention is not None:
                schema = replace(schema, stream_retention=_check_retention(stream_retention))
            self._engine.put(layout.catalog_key(name), schema.to_json())
            table._set_schema(schema)
            if options.max_versions < old.max_versions:
                with self._purge_due_lock:
                    if self._purge_due is not None:
                        self._purge_due.add(name)
            self._partitions.configure(table)
            if stream is not None:
                self._indexes.configure(table)
            return self.describe_table(name)

    def delete_table(self, name: str) -> None:
        """Drop a table and all its rows."""
        with self._ddl_lock:
            table = self._base_table(name)
            start, end = layout.table_range(table.schema.table_id)
            batch = self._engine.batch()
            batch.delete(layout.catalog_key(name))
            batch.delete_range(start, end)
            batch.delete_range(*layout.auto_increment_range(table.schema.table_id))
            self._partitions.drop_table(table.schema.table_id, batch)
            self._indexes.drop_table(table, batch)  # its change log and indexes
            self._engine.write(batch)
            table.dropped = table._unusable = True
            del self._tables[name]

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
        check_flag(include_base_data, "include_base_data")
        check_flag(progress, "progress", optional=True)
        with self._ddl_lock:
            return self._indexes.create(
                self._base_table(table), name, primary_key, defined_columns, index_type,
                include_base_data, progress,
            )

    def drop_index(self, table: str, name: str) -> None:
        """Drop index ``name`` of ``table`` and its entries."""
        self._check_open()
        with self._ddl_lock:
            self._indexes.drop(self._base_table(table), name)

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

    def _changelog_trim(self) -> int:
        return 0 if self._closed else self._indexes.trim()

    def list_stream(self, table: str | None = None) -> list[stream_api.StreamInfo]:
        """The streams of every table with ``stream`` on (or of ``table``)."""
        self._check_open()
        return stream_api.list_stream(self, table)

    def describe_stream(self, stream_id: str) -> stream_api.StreamDescription:
        """A stream's shards (partitions, current and past) with their parent and child links."""
        self._check_open()
        return stream_api.describe_stream(self, stream_id)

    def get_shard_iterator(self, stream_id: str, shard_id: int, position: object = "TRIM_HORIZON") -> str:
        """An opaque iterator into one shard: at ``TRIM_HORIZON`` (its oldest record),
        ``LATEST`` (after its newest) or a sequence number."""
        self._check_open()
        return stream_api.get_shard_iterator(self, stream_id, shard_id, position)

    def get_stream_record(self, iterator: str, limit: int = 100) -> stream_api.StreamRecords:
        """Up to ``limit`` records from ``iterator`` in commit order, and the next iterator
        (None once a closed shard is drained)."""
        self._check_open()
        return stream_api.get_stream_record(self, iterator, limit)

    # -- batches ----------------------------------------------------------------

    def batch_get_row(self, requests: list) -> list[BatchGetResult]:
        """Read up to 100 rows across tables; one result (row or error) per request."""
        self._check_open()
        return batch_get_row(self, requests)

    def batch_write_row(self, requests: list) -> list[BatchWriteResult]:
        """Write up to 200 rows (4 MB) across tables; one result per row. Not atomic across rows."""
        self._check_open()
        return batch_write_row(self, requests)

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

    def _maintain_loop(self, interval: float) -> None:
        last = time.monotonic()
        while not self._stop.wait(min(interval, 1.0)):
            try:
                if time.monotonic() - last >= interval:
                    last = time.monotonic()
                    self._partitions.maintain()
                else:
                    self._partitions.tick()
            except WidetableError:
                if self._closed:
                    return
            except Exception:  # the engine closed under us, or a bug: never kill the process
                if self._closed:
                    return
                raise

    # -- garbage collection -----------------------------------------------------

    def purge_expired(self, name: str | None = None) -> int:
        """Rewrite rows holding cells expired by TTL or past max_versions; return rows changed."""
        self._check_open()
        changed = 0
        for table in [self.table(name)] if name else list(self._tables.values()):
            changed += self._purge_table(table)
        return changed

    def _purge_table(self, table: Table) -> int:
        opts = table.schema.options
        start, end = layout.table_range(table.schema.table_id)
        changed = 0
        for key, blob in self._engine.scan(start, end):
            if self._stop.is_set() or table.dropped:
                break
            now = now_ms()
            cutoff = None if opts.ttl < 0 else now - opts.ttl * 1000
            row = rowcodec.unpack(blob)
            if cutoff is None and not row[4]:
                continue
            with table._lock(key):
                current = self._engine.get(key)
                if current is None:
                    continue
                row = rowcodec.unpack(current)
                versions = visible_versions(row, cutoff)
                rowcodec.trim(versions, opts.max_versions, cutoff)
                new = rowcodec.encode_versions(row[1], versions) if versions else None
                if new == current or (not row[2] and new is None and cutoff is not None):
                    continue
                if table._changes is not None:  # local index entries; an internal PURGE record
                    table._changes.purge(key, row, new)
                elif new is None:
                    self._engine.delete(key)
                else:
                    self._engine.put(key, new)
                changed += 1
        return changed

    def _purge_round(self) -> int:
        """One background purge; returns rows changed.

        Only a table with a TTL gains expired cells as time passes. Every write
        trims versions to max_versions, so a table without TTL holds surplus
        versions only after update_table lowered max_versions: it is purged in
        the next round, and the first round after opening purges every table
        (the store may have closed before such a purge ran). The other rounds
        leave TTL-less tables unread instead of decoding every row of them.
        """
        with self._purge_due_lock:
            due, self._purge_due = self._purge_due, set()
        changed = 0
        try:
            for table in list(self._tables.values()):
                if due is None or table.schema.options.ttl >= 0 or table.name in due:
                    changed += self._purge_table(table)
        except BaseException:
            with self._purge_due_lock:  # a round that failed is owed again in full
                self._purge_due = None if due is None else due | self._purge_due  # type: ignore[operator]
            raise
        return changed

    def _purge_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self._purge_round()
            except WidetableError:
                if self._closed:
                    return


def _check_retention(seconds: object) -> int:
    if type(seconds) is not int or not 0 < seconds <= MAX_STREAM_RETENTION:
        raise ParameterInvalid(
            f"stream_retention must be seconds > 0 and at most {MAX_STREAM_RETENTION}, "
            f"got {describe(seconds)}")
    return seconds


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
