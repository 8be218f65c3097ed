"""``widetable.connect``: a remote Database with the embedded API.

Data calls (row reads and writes, ranges, batches), the change stream and
``describe_table`` go over widetable's own protocol (``native.py``) when the
server speaks it; the rest of the catalog, indexes,
transactions' start and end, and every call against a server without it go
over Tablestore's protocol.
"""

from __future__ import annotations

import itertools
import ssl
import threading
from collections.abc import Callable
from typing import Self, TypeVar

from ..descriptions import MAX_STREAM_RETENTION, IndexDescription, TableDescription, check_flag
from ..errors import NotSupported, ParameterInvalid, WidetableError, describe
from ..index.view import index_write_refused
from ..partition.retry import Retrier
from ..stream import api as stream_api
from ..stream.api import StreamDescription, StreamInfo, StreamRecords
from ..table.batch import (
    _READ_OPTIONS,
    MAX_BATCH_GET,
    MAX_BATCH_WRITE,
    _check_count,
    parse_get_item,
    parse_write_item,
)
from ..table.filters import RowExistence, as_condition
from ..table.row import BatchGetResult, BatchWriteResult, WriteResult
from ..table.schema import (
    DEFAULT_MAX_TIME_DEVIATION,
    TableOptions,
    TableSchema,
    check_auto_increment,
    check_primary_key,
)
from ..table.transaction import DEFAULT_TIMEOUT
from ..table.values import MAX_REQUEST_BYTES
from ..wire import convert, plainbuffer
from ..wire.busypoll import check_window
from ..wire.plainbuffer import PlainRow
from ..wire.proto import enum_value, pb
from . import idempotent as idem
from . import streams
from .search import RemoteSearch
from .native import NativeChannel, Unsendable
from .table import RT_AFTER_MODIFY, RT_PK, RemoteTable, RemoteTransaction, fill_read, read_row
from .transport import Transport, error_of

PUT, UPDATE, DELETE = (enum_value("OperationType", n) for n in ("PUT", "UPDATE", "DELETE"))
_OPS = {"put": PUT, "update": UPDATE, "delete": DELETE}
PROTOCOLS = ("auto", "native", "tablestore")
# Microseconds a call polls for its answer before it sleeps (``connect``): a 100-row page
# from a server on this machine comes back within it.
BUSY_POLL_US = 200
T = TypeVar("T")


class RemoteDatabase(RemoteSearch):
    """A widetable (or Tablestore) server, used like :class:`widetable.Database`. Thread-safe."""

    def __init__(self, transport: Transport, protocol: str = "auto", busy_poll: int = 0) -> None:
        """``protocol``: ``"auto"`` (widetable's own for data calls if the server speaks it,
        else Tablestore's), ``"native"`` (widetable's own, or OTSUnsupportOperation) or
        ``"tablestore"`` (Tablestore's for everything). ``busy_poll``: see ``connect``."""
        if protocol not in PROTOCOLS:
            raise ParameterInvalid(f"protocol must be one of {', '.join(PROTOCOLS)}, "
                                   f"got {describe(protocol)}")
        self._transport = transport
        self._tables: dict[str, RemoteTable] = {}
        self._bases: dict[str, str] = {}  # index name -> its table (for fetch_base)
        self._lock = threading.Lock()
        self.endpoint = transport.endpoint
        self._closed = False
        self._native: NativeChannel | None = None
        if protocol != "tablestore":
            self._native = NativeChannel(transport, self._no_native if protocol == "auto" else None,
                                         busy_poll)

    def _no_native(self) -> None:
        self._native = None

    @property
    def protocol(self) -> str:
        """``"native"`` while data calls go over widetable's own protocol, else ``"tablestore"``."""
        return "tablestore" if self._native is None else "native"

    def _check_open(self) -> None:
        if self._closed:
            raise ParameterInvalid("the connection is closed")

    def _call(self, api: str, request, idempotent: bool | None = None) -> bytes:
        """One call over Tablestore's protocol; ``idempotent`` as ``Transport.call``."""
        self._check_open()
        return self._transport.call(api, request, idempotent)

    def _over_native(self, call: Callable[[NativeChannel], T]) -> T | None:
        """``call`` on the native channel; None when there is none, or the call cannot
        travel there (the caller then goes over Tablestore's protocol)."""
        native = self._live_native()
        if native is None:
            return None
        try:
            return call(native)
        except Unsendable:
            return None

    def _live_native(self) -> NativeChannel | None:
        """The native channel for a data call, if there is one (and the connection is open)."""
        self._check_open()
        return self._native

    def close(self) -> None:
        self._closed = True
        native = self._native
        if native is not None:
            native.close()
        self._transport.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- SQL ----------------------------------------------------------------------

    def sql(self, statement: str, params: object = None):
        """Run one SQL statement on the server (SQLQuery); see ``Database.sql``. The
        answer (``client.sql.RemoteSQLResult``) holds its rows whole."""
        from . import sql as remote_sql
        return remote_sql.run(self._call, statement, params)

    # -- catalog ----------------------------------------------------------------

    def create_table(self, name: str, primary_key: list, max_versions: int = 1,
                     ttl: int | None = None, max_time_deviation: int = DEFAULT_MAX_TIME_DEVIATION,
                     split_points: list | None = None, defined_columns: list | None = None,
                     stream: bool = False, stream_retention: int = 86400,
                     **partition_options: float) -> RemoteTable:
        """Create a table (see :meth:`widetable.Database.create_table`). Of the partition
        options only ``reserved_throughput`` travels (as read CUs; a widetable server
        pools read + write); the others are server-side settings (``serve --capacity``).
        ``stream_retention`` travels in hours, as Tablestore's protocol counts it: it
        must be a whole number of hours."""
        check_flag(stream, "stream")
        reserved = _reserved(partition_options)
        req = pb.CreateTableRequest()
        req.table_meta.table_name = name if isinstance(name, str) else describe(name)
        # The store's own checks: type names in any case, and auto-increment declared in
        # each form the store takes, travel as the store reads them.
        key = check_primary_key(primary_key)
        auto = check_auto_increment(primary_key)
        for column, kind in key:
            c = req.table_meta.primary_key.add(name=column, type=convert.PK_TYPE_CODES[kind])
            if column == auto:
                c.option = convert.AUTO_INCREMENT_OPTION
        req.reserved_throughput.capacity_unit.read = reserved or 0
        req.reserved_throughput.capacity_unit.write = 0
        _fill_defined(req.table_meta, defined_columns)
        _fill_options(req.table_options, max_versions, -1 if ttl is None else ttl,
                      max_time_deviation)
        if stream or type(stream_retention) is not int or stream_retention != 86400:
            _fill_stream_spec(req.stream_spec, stream, stream_retention)
        if split_points:
            kind = key[0][1]
            bounds = [None, *split_points, None]
            for lo, hi in itertools.pairwise(bounds):
                req.partitions.add(begin=_split_value(lo, kind, 9), end=_split_value(hi, kind, 10))
        self._call("CreateTable", req)
        return self.table(name)

    def table(self, name: str) -> RemoteTable:
        """The table called ``name``; ``OTSObjectNotExist`` if there is none."""
        if not isinstance(name, str):
            raise error_of("OTSObjectNotExist",
                           f"Requested table does not exist. No table or index {describe(name)}")
        with self._lock:
            cached = self._tables.get(name)
        if cached is not None:
            return cached
        d = self.describe_table(name)
        schema = TableSchema(d.name, d.table_id, tuple(d.primary_key), d.options, d.created_at,
                             auto_increment=d.auto_increment,
                             defined_columns=tuple(d.defined_columns))
        table = RemoteTable(self, schema)
        with self._lock:
            self._tables[name] = table
        return table

    def _index_owner(self, name: str) -> str | None:
        """The table whose index ``name`` is, or None if it is no index. Neither protocol
        tells an index's table, so the catalog is searched for it; what is found is kept,
        as tables are."""
        with self._lock:
            owner = self._bases.get(name)
        if owner is None:
            owner = next((table for table in self.list_tables()
                          if any(i.name == name for i in self.describe_table(table).indexes)),
                         None)
            if owner is not None:
                with self._lock:
                    self._bases[name] = owner
        return owner

    def _index_base(self, index: RemoteTable) -> tuple[RemoteTable, tuple[int, ...]]:
        """The table ``index`` indexes, and where that table's key columns sit in the
        index's key: what ``fetch_base`` reads with."""
        owner = self._index_owner(index.name)
        if owner is None:
            raise ParameterInvalid(f"fetch_base reads the table rows an index points to, and "
                                   f"{index.name!r} is not an index")
        base = self.table(owner)
        return base, tuple(index._names.index(n) for n in base._names)

    def _refuse_index_write(self, name: str) -> None:
        """ParameterInvalid if ``name`` is an index: the store refuses every write to an
        index before it looks at the row, so a key that does not fit one (which the client
        checks before sending) is refused as that write, not as OTSInvalidPK. Called only
        on that error path: a plain write pays nothing for it."""
        owner = self._index_owner(name)
        if owner is not None:
            raise index_write_refused(name, owner)

    def list_tables(self) -> list[str]:
        resp = pb.ListTableResponse.FromString(self._call("ListTable", pb.ListTableRequest()))
        return sorted(resp.table_names)

    def describe_table(self, name: str) -> TableDescription:
        """The table's description. From a widetable server, exactly the embedded one
        (partitions with their load, split history, each global index's lag); over
        Tablestore's protocol, what DescribeTable carries."""
        if not isinstance(name, str):
            raise error_of("OTSObjectNotExist",
                           f"Requested table does not exist. No table or index {describe(name)}")
        described = self._over_native(lambda native: native.describe_table(name))
        if described is not None:
            return described
        resp = pb.DescribeTableResponse.FromString(
            self._call("DescribeTable", pb.DescribeTableRequest(table_name=name)))
        return _description(resp.table_meta, resp.table_options,
                            resp.reserved_throughput_details, resp.index_metas, resp.stream_details)

    def update_table(self, name: str, max_versions: int | None = None, ttl: int | None = None,
                     max_time_deviation: int | None = None, stream: bool | None = None,
                     stream_retention: int | None = None,
                     **partition_options: float) -> TableDescription:
        """Change table options; of the partition options only ``reserved_throughput`` travels.
        ``stream_retention`` (whole hours, in seconds) travels with ``stream``: changing it
        alone sends the table's current ``stream`` setting with it."""
        check_flag(stream, "stream", optional=True)

        def request():
            nonlocal stream
            req = pb.UpdateTableRequest(table_name=name)
            reserved = _reserved(partition_options)
            if stream is None and stream_retention is not None:
                stream = self.describe_table(name).stream
            if stream is not None:
                _fill_stream_spec(req.stream_spec, stream, stream_retention)
            if reserved is not None:
                req.reserved_throughput.capacity_unit.read = reserved
                req.reserved_throughput.capacity_unit.write = 0
            _fill_options(req.table_options, max_versions, ttl, max_time_deviation)
            return req

        req = self._table_first(name, request)
        self._call("UpdateTable", req)
        with self._lock:
            self._tables.pop(name, None)
        return self.describe_table(name)

    def _table_first(self, table: object, request: Callable[[], T]) -> T:
        """``request()``: a request, its arguments checked as it is made. The store looks
        the table up before it checks anything else (but flags), so if ``request`` refuses
        its arguments the table is looked up first: one that does not exist is
        OTSObjectNotExist, whatever else is wrong (only this error path pays for it)."""
        if not isinstance(table, str):
            raise error_of("OTSObjectNotExist",
                           f"Requested table does not exist. No table or index {describe(table)}")
        try:
            return request()
        except WidetableError:
            self.describe_table(table)
            raise

    def delete_table(self, name: str) -> None:
        self._call("DeleteTable", self._table_first(
            name, lambda: pb.DeleteTableRequest(table_name=name)))
        with self._lock:
            self._tables.clear()  # its indexes went with it
            self._bases.clear()

    # -- secondary indexes ----------------------------------------------------------

    def create_index(self, table: str, name: str, primary_key: list[str],
                     defined_columns: list[str] | None = None, index_type: str = "GLOBAL",
                     include_base_data: bool = True, progress: bool | None = None) -> RemoteTable:
        """Create a secondary index (see :meth:`widetable.Database.create_index`) and return
        it for reading. A global index is eventually consistent: poll it, or read
        ``describe_table(table).indexes``. ``progress`` has no effect remotely."""
        check_flag(include_base_data, "include_base_data")
        check_flag(progress, "progress", optional=True)

        def request():
            kind = str(getattr(index_type, "value", index_type)).upper()
            codes = convert.INDEX_TYPE_CODES.get(kind)
            if codes is None:
                raise ParameterInvalid(
                    f"index_type must be GLOBAL or LOCAL, got {describe(index_type)}")
            for what, names in (("primary_key", primary_key),
                                ("defined_columns", defined_columns or [])):
                if not isinstance(names, (list, tuple)) or not all(isinstance(n, str)
                                                                   for n in names):
                    raise ParameterInvalid(
                        f"{what} must be a list of column names, got {describe(names)}")
            req = pb.CreateIndexRequest(main_table_name=table, include_base_data=include_base_data)
            req.index_meta.name = name if isinstance(name, str) else describe(name)
            req.index_meta.primary_key.extend(primary_key)
            req.index_meta.defined_column.extend(defined_columns or [])
            req.index_meta.index_type, req.index_meta.index_update_mode = codes
            return req

        self._call("CreateIndex", self._table_first(table, request))
        return self.table(name)

    def drop_index(self, table: str, name: str) -> None:
        """Drop index ``name`` of ``table``."""
        self._call("DropIndex", self._table_first(table, lambda: pb.DropIndexRequest(
            main_table_name=table, index_name=name if isinstance(name, str) else describe(name))))
        with self._lock:
            self._tables.pop(name, None)
            self._bases.pop(name, None)

    # -- batches ------------------------------------------------------------------

    def batch_get_row(self, requests: list) -> list[BatchGetResult]:
        """Up to 100 rows across tables; one result per request, in order."""
        native = self._live_native()
        if native is not None:
            try:
                return native.batch_get_row(requests)
            except Unsendable:
                pass
        requests = _check_count(requests, MAX_BATCH_GET, "batch_get_row")
        req = pb.BatchGetRowRequest()
        groups: dict[tuple, object] = {}
        results: list[BatchGetResult] = []
        for item in requests:
            name, pk, opts, result = parse_get_item(item)
            results.append(result)
            try:
                # Checked in the store's order: the options' names, the table, the key, then
                # the options' values (an option the store does not know is refused, not
                # dropped).
                if not isinstance(opts, dict) or set(opts) - set(_READ_OPTIONS):
                    raise ParameterInvalid(f"batch_get_row options must be a dict of "
                                           f"{_READ_OPTIONS}, got {describe(opts)}")
                table = self.table(name)
                values = table._pk_values(pk)
            except WidetableError as exc:
                result.error = exc
                continue
            result.primary_key = values
            key = (name, repr(sorted(opts.items())))
            msg = groups.get(key)
            if msg is None:
                scratch = pb.TableInBatchGetRowRequest(table_name=name)
                try:
                    fill_read(scratch, opts.get("columns"), opts.get("max_versions"),
                              opts.get("time_range"), opts.get("filter"))
                except WidetableError as exc:
                    result.error = exc
                    continue
                msg = groups[key] = req.tables.add()
                msg.CopyFrom(scratch)
            msg.primary_key.append(convert.encode_key(table._names, values))  # type: ignore[attr-defined]
        order = list(groups)
        if not order:
            return results
        resp = pb.BatchGetRowResponse.FromString(self._call("BatchGetRow", req))
        cursor = {key: iter(t.rows) for key, t in zip(order, resp.tables)}
        for result, item in zip(results, requests):
            if result.error is not None:
                continue
            opts = item[2] if len(item) == 3 else {}
            row = next(cursor[(item[0], repr(sorted(opts.items())))])
            if not row.is_ok:
                result.error = error_of(row.error.code, row.error.message)
            else:
                data = row.row
                if data:
                    result.row = read_row(data)
        return results

    def batch_write_row(self, requests: list, transaction_id: str | None = None) -> list[BatchWriteResult]:
        """Up to 200 rows (4 MB) across tables; one result per row. Not atomic across rows.
        Rows throttled (``OTSServerBusy``) are sent again with backoff, as single calls are."""
        if not isinstance(requests, (list, tuple)):
            return self._batch_write_once(requests, transaction_id)  # refused as it is
        return self._transport.retrier.rows(
            lambda rows: self._batch_write_once(rows, transaction_id), requests)

    def _batch_write_once(self, requests: list, transaction_id: str | None) -> list[BatchWriteResult]:
        native = self._live_native()
        if native is not None:
            try:
                return native.batch_write_row(requests, transaction_id)
            except Unsendable:
                pass
        requests = _check_count(requests, MAX_BATCH_WRITE, "batch_write_row")
        tables: dict[str, list[bytes]] = {}  # table -> its rows: framed messages, in parts
        results: list[BatchWriteResult] = []
        known: dict[str, RemoteTable] = {}
        # Rows named so far, to refuse a batch naming one twice as the store does. The
        # server would too, but only among the rows sent: one that fails here (a value
        # it cannot carry) is not, and its twin would be written. (A transaction's batch
        # is the server's to judge: it takes its rows one by one.)
        seen: set[tuple[str, bytes]] | None = None if transaction_id else set()
        for item in requests:
            name, op, pk, payload, condition = parse_write_item(item)
            result = BatchWriteResult(name, op, pk if isinstance(pk, tuple) else (pk,))
            results.append(result)
            try:
                table = known.get(name) if type(name) is str else None
                if table is None:
                    table = known[name] = self.table(name)
                values, key = table._write_key(pk)  # an index: refused as every write to it
                result.primary_key = values
            except WidetableError as exc:
                result.error = exc
                continue
            if seen is not None and key is not None:
                if (name, key) in seen:
                    raise ParameterInvalid(
                        f"batch_write_row names row {describe(values)} of table {name!r} twice")
                seen.add((name, key))
            try:
                row = _write_row(table, op, values, payload, condition)
            except WidetableError as exc:
                result.error = exc
                continue
            rows = tables.get(name)
            if rows is None:
                rows = tables[name] = []
            rows += row
        if not tables:
            return results
        # BatchWriteRowRequest {tables = 1 {table_name = 1, rows = 2}, transaction_id = 2},
        # written as the framed rows are: joined once
        parts: list[bytes] = []
        for name, rows in tables.items():
            table_name = convert.framed(1, name.encode("utf-8"))
            parts.append(convert.field_head(1, len(table_name) + sum(map(len, rows))))
            parts.append(table_name)
            parts += rows
        if transaction_id:
            parts.append(convert.framed(2, transaction_id.encode("utf-8")))
        req = b"".join(parts)
        if len(req) > MAX_REQUEST_BYTES:
            raise ParameterInvalid(f"batch_write_row carries over {MAX_REQUEST_BYTES} bytes; split it")
        resp = pb.BatchWriteRowResponse.FromString(
            self._call("BatchWriteRow", req, idem.batch(requests)))
        cursor = {t.table_name: iter(t.rows) for t in resp.tables}
        for result in results:
            if result.error is not None:
                continue
            row = next(cursor[result.table])
            if not row.is_ok:
                result.error = error_of(row.error.code, row.error.message)
                continue
            data = row.row
            if data:  # else the result is WriteResult(primary_key), made when asked for
                result.result = RemoteTable._result(result.primary_key, data)
                result.primary_key = result.result.primary_key
        return results

    # -- transactions -------------------------------------------------------------

    def start_local_transaction(self, table: str, partition_key: object,
                                timeout: float = DEFAULT_TIMEOUT) -> RemoteTransaction:
        """Open a transaction on one partition-key value (see the embedded API). The
        server's timeout applies; the protocol carries no other."""
        if timeout != DEFAULT_TIMEOUT:
            raise NotSupported("the Tablestore protocol carries no transaction timeout")
        t = self.table(table)
        req = pb.StartLocalTransactionRequest(
            table_name=table,
            key=plainbuffer.encode_primary_key([(t._names[0], partition_key)]),
        )
        resp = pb.StartLocalTransactionResponse.FromString(self._call("StartLocalTransaction", req))
        return RemoteTransaction(self, t, partition_key, resp.transaction_id)

    def commit_transaction(self, transaction_id: str) -> None:
        self._call("CommitTransaction", pb.CommitTransactionRequest(transaction_id=transaction_id))

    def abort_transaction(self, transaction_id: str) -> None:
        self._call("AbortTransaction", pb.AbortTransactionRequest(transaction_id=transaction_id))

    # -- the change stream ------------------------------------------------------------
    # Over widetable's own protocol, exactly the embedded results; over Tablestore's
    # (``streams.py``), what its messages carry.

    def list_stream(self, table: str | None = None) -> list[StreamInfo]:
        """The streams of every table with ``stream`` on (or of ``table``)."""
        found = self._over_native(lambda native: native.list_stream(table))
        return streams.list_stream(self._call, table) if found is None else found

    def describe_stream(self, stream_id: str) -> StreamDescription:
        """A stream's shards with their parent and child links (see ``Database.describe_stream``)."""
        found = self._over_native(lambda native: native.describe_stream(stream_id))
        return streams.describe_stream(self._call, stream_id) if found is None else found

    def get_shard_iterator(self, stream_id: str, shard_id: int, position: object = "TRIM_HORIZON") -> str:
        """An opaque iterator into one shard: at ``TRIM_HORIZON``, ``LATEST`` or a sequence
        number (over Tablestore's protocol, ``TRIM_HORIZON`` only)."""
        stream_api.check_position(position)  # as the store checks it, on either protocol
        found = self._over_native(
            lambda native: native.get_shard_iterator(stream_id, shard_id, position))
        if found is None:
            found = streams.get_shard_iterator(self._call, stream_id, shard_id, position)
        return found

    def get_stream_record(self, iterator: str, limit: int = 100) -> StreamRecords:
        """Up to ``limit`` records from ``iterator`` in commit order, and the next iterator."""
        found = self._over_native(lambda native: native.get_stream_record(iterator, limit))
        return streams.get_stream_record(self._call, iterator, limit) if found is None else found

    def compute_split_points_by_size(self, name: str, split_size: int) -> list:
        """Ranges of about ``split_size`` bytes covering the table, as the embedded
        ``Database.compute_split_points_by_size``: the same ``SplitRange`` list (``start``,
        ``end``, ``location``) and the same check of ``split_size``.

        One difference: ``size`` is None. Tablestore's answer carries the split points
        and each range's location, not the estimated bytes in each range.
        """
        from ..keys import codec
        from ..partition.scan import SplitRange

        if type(split_size) is not int or split_size <= 0:
            # Checked here, as the embedded store does, so that 0 or a float is refused
            # and not sent as something else (the field is an int64 count of bytes).
            raise ParameterInvalid(
                f"split_size must be a positive number of bytes, got {describe(split_size)}")
        req = pb.ComputeSplitPointsBySizeRequest(
            table_name=name, split_size=min(split_size, 2**63 - 1),  # an int64; more: one range too
            split_size_unit_in_byte=1)
        resp = pb.ComputeSplitPointsBySizeResponse.FromString(
            self._call("ComputeSplitPointsBySize", req))
        arity = len(resp.schema)
        bounds = [(codec.INF_MIN,) * arity]
        for point in resp.split_points:  # trailing -inf is omitted on the wire: put it back
            values = tuple(v for _, v in plainbuffer.decode_row(point).primary_key)
            bounds.append(values + (codec.INF_MIN,) * (arity - len(values)))
        bounds.append((codec.INF_MAX,) * arity)
        locations = [int(loc.location) if loc.location.isdigit() else loc.location
                     for loc in resp.locations for _ in range(max(1, loc.repeat))]
        return [SplitRange(bounds[i], bounds[i + 1],
                           locations[i] if i < len(locations) else None, None)  # type: ignore[arg-type]
                for i in range(len(bounds) - 1)]


# A RowInBatchWriteRowRequest of a put without condition, without its row_change (field 2).
_PLAIN_PUT = pb.RowInBatchWriteRowRequest(
    type=PUT, condition=pb.Condition(row_existence=convert.EXISTENCE_CODES[RowExistence.IGNORE]),
).SerializePartialToString()


def _write_row(table: RemoteTable, op: str, values: tuple, payload, condition) -> list[bytes]:
    """One RowInBatchWriteRowRequest framed as a row of its table (field 2), in parts."""
    condition = as_condition(condition)
    if op == "put" and condition is None and not table._auto:
        change = convert.encode_put(table._names, values, payload)
        head = convert.field_head(2, len(change))  # row_change
        return [convert.field_head(2, len(_PLAIN_PUT) + len(head) + len(change)),
                _PLAIN_PUT, head, change]
    row = pb.RowInBatchWriteRowRequest(type=_OPS[op])
    convert.encode_condition(row.condition, condition)
    if op == "put":
        row.row_change = convert.encode_put(table._names, values, payload)
        if table._auto:
            row.return_content.return_type = RT_PK
    elif op == "update":
        cells = list(zip(table._names, values))
        row.row_change = plainbuffer.encode_row(PlainRow(cells, convert.update_cells(**payload)))
        if payload.get("increment"):
            row.return_content.return_type = RT_AFTER_MODIFY
    else:
        row.row_change = convert.encode_key(table._names, values, True)
    data = row.SerializeToString()
    return [convert.field_head(2, len(data)), data]


def _split_value(value: object, kind: str, inf: int) -> bytes:
    if value is None:
        return bytes((inf,))
    if kind == "STRING" and isinstance(value, str):
        raw = value.encode("utf-8")
        return bytes((plainbuffer.VT_STRING,)) + len(raw).to_bytes(4, "little") + raw
    return plainbuffer.encode_value(value)


def _reserved(partition_options: dict) -> int | None:
    """``reserved_throughput`` of the partition options; the others cannot travel."""
    options = dict(partition_options)
    reserved = options.pop("reserved_throughput", None)
    if options:
        raise NotSupported(f"partition options {sorted(options)} cannot be set over the "
                           "Tablestore protocol (a server sets capacity: widetable serve --capacity)")
    if reserved is not None and (type(reserved) is not int or not 0 <= reserved < 2**31):
        raise ParameterInvalid(f"reserved_throughput must be an int >= 0, got {describe(reserved)}")
    return reserved


def _fill_defined(meta, defined_columns: list | None) -> None:
    if defined_columns is None:
        return
    if not isinstance(defined_columns, (list, tuple)):
        raise ParameterInvalid(f"defined_columns must be a list of (name, type), got {describe(defined_columns)}")
    for col in defined_columns:
        if not isinstance(col, (list, tuple)) or len(col) != 2 or not isinstance(col[0], str):
            raise ParameterInvalid(f"defined column must be (name, type), got {describe(col)}")
        code = convert.DEFINED_TYPE_CODES.get(str(getattr(col[1], "value", col[1])).upper())
        if code is None:
            raise ParameterInvalid(f"defined column {col[0]!r} has type {describe(col[1])}; use one of "
                                   f"{', '.join(convert.DEFINED_TYPE_CODES)}")
        meta.defined_column.add(name=col[0], type=code)


def _fill_options(options, max_versions: object, ttl: object, max_time_deviation: object) -> None:
    """The TableOptions fields of the options given (None: not sent). A value its field
    cannot hold (an int32, or int64) is one the store refuses as well, all three being
    at most 2**31 - 1: it is refused here as the store refuses it, not sent as another."""
    for what, attr, value in (("max_versions", "max_versions", max_versions),
                              ("ttl", "time_to_live", ttl),
                              ("max_time_deviation", "deviation_cell_version_in_sec",
                               max_time_deviation)):
        if value is None:
            continue
        if type(value) is not int:
            raise ParameterInvalid(f"{what} must be an int, got {describe(value)}")
        try:
            setattr(options, attr, value)
        except ValueError:  # out of the field's range
            raise ParameterInvalid(f"{what} must be from 1 to {2**31 - 1}"
                                   f"{' (or -1: forever)' if what == 'ttl' else ''}, "
                                   f"got {value}") from None


def _fill_stream_spec(spec, stream: object, retention: int | None) -> None:
    """A StreamSpecification: on or off, and the retention in hours (it must be whole hours)."""
    spec.enable_stream = stream
    if retention is not None:
        if type(retention) is not int or retention <= 0 or retention % 3600:
            raise ParameterInvalid(
                f"stream_retention must be a whole number of hours in seconds (3600, 7200, ...) "
                f"over Tablestore's protocol, got {describe(retention)}")
        if retention > MAX_STREAM_RETENTION:
            raise ParameterInvalid(f"stream_retention must be at most {MAX_STREAM_RETENTION} s, "
                                   f"got {retention}")
        spec.expiration_time = retention // 3600


def _description(meta, options, throughput, index_metas=(), stream=None) -> TableDescription:
    primary_key = [(c.name, convert.PK_TYPES.get(c.type, str(c.type))) for c in meta.primary_key]
    auto = next((c.name for c in meta.primary_key
                 if c.HasField("option") and c.option == convert.AUTO_INCREMENT_OPTION), None)
    read, write = throughput.capacity_unit.read, throughput.capacity_unit.write
    opts = TableOptions(options.max_versions, options.time_to_live,
                        options.deviation_cell_version_in_sec, reserved_throughput=read + write,
                        # as the server stores them (server/tablestore/tables.py)
                        reserved_read=read if write else 0, reserved_write=write)
    defined = [(c.name, convert.DEFINED_TYPES.get(c.type, str(c.type))) for c in meta.defined_column]
    indexes = [
        IndexDescription(m.name, convert.INDEX_TYPES.get(m.index_type, (str(m.index_type),))[0],
                         tuple(m.primary_key), tuple(m.defined_column), None,
                         base_key=tuple(n for n, _ in primary_key if n not in m.primary_key))
        for m in index_metas
    ]
    streamed = stream is not None and stream.enable_stream
    stream_id = stream.stream_id if streamed and stream.HasField("stream_id") else None
    retention = stream.expiration_time * 3600 if stream is not None and stream.HasField(
        "expiration_time") else 86400
    return TableDescription(meta.table_name, primary_key, opts, 0,
                            float(throughput.last_increase_time), auto_increment=auto,
                            defined_columns=defined, stream=streamed, stream_retention=retention,
                            indexes=indexes, stream_id=stream_id)


def connect(endpoint: str, access_key_id: str, access_key_secret: str,
            instance: str = "widetable", timeout: float | None = 30.0, retrier: Retrier | None = None,
            ssl_context: ssl.SSLContext | None = None, protocol: str = "auto",
            busy_poll: int = BUSY_POLL_US) -> RemoteDatabase:
    """A widetable server at ``endpoint`` (``http://host:port``), used like a local Database.

    ``endpoint`` may also be ``unix:///path`` (``widetable serve --socket``).
    Requests are signed with the access key; throttling errors are retried with
    backoff (``retrier``). ``timeout``: seconds a call may wait for the server
    before it fails (None: no limit). No request is made until the first call. ``protocol``:
    ``"auto"`` sends data calls over widetable's own protocol when the server
    speaks it (a widetable server does; the Tablestore service does not) and
    everything else over Tablestore's; ``"native"`` insists on widetable's own;
    ``"tablestore"`` uses Tablestore's for everything. ``busy_poll``: microseconds a
    call over widetable's own protocol polls for its answer before it sleeps, while
    answers come back within that time (a server on this machine; TLS connections
    never poll): up to this much CPU per call, for answers picked up without a
    thread's wake-up; 0 turns it off.
    """
    try:
        check_window(busy_poll)  # the server's own check of a window
    except ValueError as exc:
        raise ParameterInvalid(str(exc)) from None
    if timeout is not None and (type(timeout) not in (int, float) or not 0 < timeout < 1e9):
        raise ParameterInvalid(f"timeout must be seconds > 0 (or None: no limit), got "
                               f"{describe(timeout)}")
    if not isinstance(access_key_id, str) or not access_key_id:
        raise ParameterInvalid("access_key_id must be a non-empty string")
    if not isinstance(access_key_secret, str) or not access_key_secret:
        raise ParameterInvalid("access_key_secret must be a non-empty string")
    return RemoteDatabase(Transport(endpoint, access_key_id, access_key_secret, instance, timeout,
                                    retrier, ssl_context), protocol, busy_poll)


__all__ = ["RemoteDatabase", "WriteResult", "connect"]
