"""Remote tables and transactions: the embedded Table API over the network.

Every call is one request (``scan`` one per page) and returns the library's
own result objects; errors are the library's WidetableError classes with the
server's codes. A call goes over widetable's own protocol when the connection
has it (``native.py``: the server runs the embedded method itself), else over
Tablestore's, encoded here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Self

from ..errors import InvalidPK, ParameterInvalid, describe
from ..keys import codec
from ..table.batch import MAX_BATCH_GET
from ..table.filters import MAX_FILTER_DEPTH, CompositeFilter, Filter, as_condition, col
from ..table.reader import check_time_range
from ..table.row import RangeResult, Row, WriteResult
from ..table.schema import AUTO_INCREMENT, TableSchema
from ..table.table import (
    SCAN_PAGE_ROWS,
    Table,
    _check_direction,
    follow_pages,
    full_range,
    scan_partition,
)
from ..wire import convert, plainbuffer, rowshape
from ..wire.plainbuffer import PlainRow
from ..wire.proto import enum_value, pb
from . import idempotent as idem
from .native import Unsendable

if TYPE_CHECKING:
    from .database import RemoteDatabase

RT_PK = enum_value("ReturnType", "RT_PK")
RT_AFTER_MODIFY = enum_value("ReturnType", "RT_AFTER_MODIFY")
FORWARD = enum_value("Direction", "FORWARD")
BACKWARD = enum_value("Direction", "BACKWARD")


def to_row(row: PlainRow) -> Row:
    """A PlainBuffer result row as the library's Row (newest version first per column)."""
    pk = tuple(v for _, v in row.primary_key)
    columns: dict = {}
    stamps: dict = {}
    versions: dict[str, list] = {}
    for c in row.cells:
        if c.name not in columns:
            columns[c.name] = c.value
            stamps[c.name] = c.timestamp
            versions[c.name] = [(c.timestamp, c.value)]
        else:
            versions[c.name].append((c.timestamp, c.value))
    many = any(len(v) > 1 for v in versions.values())
    return Row(pk, columns, stamps, versions if many else None)


def read_row(buf: bytes) -> Row:
    """A PlainBuffer result row (one version per column, or several) as the library's Row."""
    hit = rowshape.decode(buf)
    if hit is None or not hit[0].unique:
        return to_row(convert.decode_row(buf))
    shape, pk, values, stamps = hit
    names = shape.names
    if not stamps:
        return Row(pk, dict(zip(names, values)), dict.fromkeys(names))
    first = stamps[0]
    shared = stamps.count(first) == len(stamps)  # one put wrote the row: Row keeps one int
    return Row(pk, dict(zip(names, values)), first if shared else dict(zip(names, stamps)))


INT64_MAX = 2**63 - 1  # the most a protobuf int64 holds
ALL_VERSIONS = 2**31 - 1  # the largest max_versions an int32 holds, and any table keeps


def _wire_time_range(window: tuple[int, int]) -> tuple[int, int]:
    """A checked ``(start, end)`` (``check_time_range``) as int64s that read the same versions.

    The store takes any ``0 <= start < end``. No version is stamped anywhere near
    int64's end (a write's timestamp is within ``max_time_deviation``, at most 2**31 - 1
    s, of now), so a range reaching past it reads what the range cut there reads: it is
    cut, not refused for a limit of the message alone.
    """
    start, end = window
    return min(start, INT64_MAX - 1), min(end, INT64_MAX)


def fill_read(msg, columns, max_versions, time_range, filter) -> None:
    """Set the read options of a GetRow / GetRange / batch item message."""
    if columns is not None:
        if isinstance(columns, str) or not isinstance(columns, (list, tuple, set)):
            raise ParameterInvalid(f"columns must be a list of column names, got {describe(columns)}")
        try:
            msg.columns_to_get.extend(columns)
        except (TypeError, ValueError):  # not text, or not Unicode text (UnicodeEncodeError)
            raise ParameterInvalid(
                f"columns must be a list of column names, got {describe(columns)}") from None
    # The store's check, and the only one: it comes before the key's, as in the store.
    window = check_time_range(time_range)
    if type(time_range) is int:
        msg.time_range.specific_time = time_range  # 0 <= it < 2**63: an int64
    elif window is not None:
        msg.time_range.start_time, msg.time_range.end_time = _wire_time_range(window)
    if max_versions is not None:
        if type(max_versions) is not int or max_versions < 1:
            raise ParameterInvalid(f"max_versions must be a positive integer, got {describe(max_versions)}")
        # More than an int32 holds reads every version, as ALL_VERSIONS does: no table keeps
        # more (its max_versions is an int32 too), so the read is the same.
        msg.max_versions = min(max_versions, ALL_VERSIONS)
    else:  # the library's default; a time range alone would read every version in it
        msg.max_versions = 1
    if filter is not None:
        if not convert.is_filter(filter):
            raise ParameterInvalid(f"filter must be a Filter or ColumnPagination, got {describe(filter)}")
        msg.filter = convert.encode_filter(filter)


class RemoteTable:
    """A table on a widetable server; the same methods as :class:`widetable.Table`."""

    normalize_pk = Table.normalize_pk

    def __init__(self, db: RemoteDatabase, schema: TableSchema) -> None:
        self._db = db
        self.schema = schema
        self.name = schema.name
        self._names = schema.pk_names
        self._auto = schema.auto_increment
        self._encode = codec.make_encoder(schema.pk_types, schema.pk_names)

    def __repr__(self) -> str:
        return f"<RemoteTable {self.name!r} pk={list(self.schema.primary_key)}>"

    def _pk_values(self, pk: object) -> tuple:
        return self._key(pk)[0]

    def _key(self, pk: object) -> tuple[tuple, bytes | None]:
        """The key tuple and the store's bytes of it (None for a key asking for an
        auto-increment value). The key is checked with the store's own encoder, so a bad
        one is OTSInvalidPK here as there, and is refused before anything else of the call
        is, in the store's order (a value the message could carry but the store refuses
        would otherwise fail on other grounds first, or a batch's row whole)."""
        values = self.normalize_pk(pk)
        if len(values) != len(self._names):
            raise InvalidPK(f"primary key {describe(pk)} must have {len(self._names)} columns "
                            f"{list(self._names)}")
        if self._auto and AUTO_INCREMENT in values:
            return values, None
        return values, self._encode(values)

    def _write_key(self, pk: object) -> tuple[tuple, bytes | None]:
        """``_key`` of a write: a key that does not fit an index is refused as every
        write to an index is (``RemoteDatabase._refuse_index_write``)."""
        try:
            return self._key(pk)
        except InvalidPK:
            self._db._refuse_index_write(self.name)
            raise

    def _pk_cells(self, pk: object) -> tuple[tuple, list]:
        values = self._write_key(pk)[0]
        return values, list(zip(self._names, values))

    # -- reads ------------------------------------------------------------------

    def get_row(self, pk: object, columns: list[str] | None = None, max_versions: int | None = None,
                time_range: object = None, filter: object = None,
                transaction_id: str | None = None, fetch_base: bool = False) -> Row | None:
        """Read one row, or None (see :meth:`widetable.Table.get_row`). On an index,
        ``fetch_base`` returns the base row its entry points to (see ``IndexTable``)."""
        if fetch_base:
            base = self._db._index_base(self)  # refused first on a table that is no index
            # As the store reads it: the entry with the version options, then the base row.
            entry = self.get_row(pk, None, max_versions, time_range, None, transaction_id)
            if entry is None:
                return None
            rows = self._fetch_base(base, [entry], columns, max_versions, time_range, filter)
            return rows[0] if rows else None
        native = self._db._live_native()
        if native is not None:
            if type(pk) is list:  # a list of values or of (name, value): a tuple travels
                pk = self.normalize_pk(pk)
            try:
                return native.get_row(self.name, pk, columns, max_versions, time_range, filter,
                                      transaction_id)
            except Unsendable:
                pass
        req = pb.GetRowRequest(table_name=self.name)
        fill_read(req, columns, max_versions, time_range, filter)  # before the key, as the store
        req.primary_key = convert.encode_key(self._names, self._pk_values(pk))
        if transaction_id:
            req.transaction_id = transaction_id
        data = pb.GetRowResponse.FromString(self._db._call("GetRow", req)).row
        return read_row(data) if data else None

    def get_range(self, start: object, end: object, direction: str = "forward",
                  limit: int | None = None, columns: list[str] | None = None,
                  max_versions: int | None = None, time_range: object = None,
                  filter: object = None, transaction_id: str | None = None,
                  fetch_base: bool = False) -> RangeResult:
        """One page of ``[start, end)`` (see :meth:`widetable.Table.get_range`). On an index,
        ``fetch_base`` returns the base rows of the page's entries, in index order."""
        if fetch_base:
            base = self._db._index_base(self)  # refused first on a table that is no index
            page = self.get_range(start, end, direction, limit, transaction_id=transaction_id)
            return RangeResult(self._fetch_base(base, page.rows, columns, max_versions,
                                                time_range, filter), page.next_start_primary_key)
        native = self._db._live_native()
        if native is not None and type(start) is not list and type(end) is not list:
            try:
                return native.get_range(self.name, start, end, direction, limit, columns,
                                        max_versions, time_range, filter, transaction_id)
            except Unsendable:
                pass
        reverse = _check_direction(direction)
        pad = codec.INF_MAX if reverse else codec.INF_MIN
        if limit is not None and (type(limit) is not int or limit <= 0):
            raise ParameterInvalid(f"limit must be a positive integer, got {describe(limit)}")
        for b in (start, end):
            if isinstance(b, (tuple, list)) and len(b) > len(self._names):
                raise InvalidPK(f"range bound {describe(b)} has more columns than {list(self._names)}")
        req = pb.GetRangeRequest(
            table_name=self.name, direction=BACKWARD if reverse else FORWARD,
            inclusive_start_primary_key=plainbuffer.encode_primary_key(
                convert.bound(self._names, start, pad)),
            exclusive_end_primary_key=plainbuffer.encode_primary_key(
                convert.bound(self._names, end, pad)),
        )
        if limit is not None:
            req.limit = min(limit, 2**31 - 1)
        fill_read(req, columns, max_versions, time_range, filter)
        if transaction_id:
            req.transaction_id = transaction_id
        resp = pb.GetRangeResponse.FromString(self._db._call("GetRange", req))
        rows = [to_row(r) for r in plainbuffer.decode_rows(resp.rows)]  # several rows: no shape
        nxt = None
        if resp.next_start_primary_key:
            nxt = tuple(v for _, v in plainbuffer.decode_row(resp.next_start_primary_key).primary_key)
        return RangeResult(rows, nxt)

    def scan(self, start: object = None, end: object = None, direction: str = "forward",
             columns: list[str] | None = None, max_versions: int | None = None,
             time_range: object = None, filter: object = None,
             page_size: int = SCAN_PAGE_ROWS, fetch_base: bool = False) -> Iterator[Row]:
        """Every row of a range, page by page (see :meth:`widetable.Table.scan`); on an
        index, ``fetch_base`` gives the base rows, in index order."""
        whole = full_range(len(self._names), _check_direction(direction))
        return follow_pages(
            self.get_range, whole[0] if start is None else start, whole[1] if end is None else end,
            direction, limit=page_size, columns=columns, max_versions=max_versions,
            time_range=time_range, filter=filter, **({"fetch_base": True} if fetch_base else {}),
        )

    def _fetch_base(self, index_base: tuple[RemoteTable, tuple[int, ...]], entries: list[Row],
                    columns, max_versions, time_range, filter) -> list[Row]:
        """What an index's ``fetch_base`` returns for these entries of it: the base rows,
        in order, that exist, read as something under these options, and still hold the
        entry's values in the index key's attribute columns (a global index lags behind
        its table; the store leaves such rows out too). The server checks that last part:
        each row's read carries a filter of its entry's values."""
        base, positions = index_base  # self._db._index_base(self)
        keys = [tuple(e.primary_key[i] for i in positions) for e in entries]
        checks = [(i, n) for i, n in enumerate(self._names) if n not in base._names]
        if not checks or not keys:
            return base._rows(keys, columns, max_versions, time_range, [filter] * len(keys))
        matches = [[col(n).eq(e.primary_key[i], pass_if_missing=False) for i, n in checks]
                   for e in entries]
        if filter is None or (isinstance(filter, Filter) and filter.depth < MAX_FILTER_DEPTH):
            extra = [] if filter is None else [filter]
            return base._rows(keys, columns, max_versions, time_range,
                              [_all_of(m + extra) for m in matches])
        # A column pagination (or a filter as deep as filters go) cannot join the check:
        # find the rows that still match first, then read those with the caller's options.
        alive = base._rows(keys, [checks[0][1]], None, None, [_all_of(m) for m in matches])
        found = {tuple(r.primary_key) for r in alive}
        keys = [k for k in keys if k in found]
        return base._rows(keys, columns, max_versions, time_range, [filter] * len(keys))

    def _rows(self, keys: list[tuple], columns, max_versions, time_range,
              filters: list) -> list[Row]:
        """The rows of ``keys`` that exist and read as something under these options (a
        filter per key), in order. One batch read per 100."""
        options = {name: value for name, value in (
            ("columns", columns), ("max_versions", max_versions), ("time_range", time_range))
            if value is not None}
        items = [(self.name, key, options if f is None else {**options, "filter": f})
                 for key, f in zip(keys, filters)]
        out = []
        for i in range(0, len(items), MAX_BATCH_GET):
            for r in self._db.batch_get_row(items[i:i + MAX_BATCH_GET]):
                if r.error is not None:
                    raise r.error
                if r.row is not None:
                    out.append(r.row)
        return out

    # -- writes -----------------------------------------------------------------

    def put_row(self, pk: object, columns: object = None, condition: object = None,
                transaction_id: str | None = None) -> WriteResult:
        """Write a whole row (see :meth:`widetable.Table.put_row`)."""
        native = self._db._live_native()
        if native is not None:
            if type(pk) is list:  # a list of values or of (name, value): a tuple travels
                pk = self.normalize_pk(pk)
            try:
                return native.put_row(self.name, pk, columns, condition, transaction_id)
            except Unsendable:
                pass
        values = self._write_key(pk)[0]
        req = pb.PutRowRequest(table_name=self.name,
                               row=convert.encode_put(self._names, values, columns))
        convert.encode_condition(req.condition, as_condition(condition))
        if self._auto:
            req.return_content.return_type = RT_PK
        if transaction_id:
            req.transaction_id = transaction_id
        resp = pb.PutRowResponse.FromString(self._db._call(
            "PutRow", req, idem.write("put", values, None, condition)))
        return self._result(values, resp.row)

    def update_row(self, pk: object, put: object = None, delete_version: object = None,
                   delete_column: object = None, increment: object = None,
                   condition: object = None, transaction_id: str | None = None) -> WriteResult:
        """Change some columns of a row (see :meth:`widetable.Table.update_row`)."""
        native = self._db._live_native()
        if native is not None:
            if type(pk) is list:  # a list of values or of (name, value): a tuple travels
                pk = self.normalize_pk(pk)
            try:
                return native.update_row(self.name, pk, put, delete_version, delete_column,
                                         increment, condition, transaction_id)
            except Unsendable:
                pass
        values, cells = self._pk_cells(pk)
        changes = convert.update_cells(put, delete_version, delete_column, increment)
        if not changes:
            raise ParameterInvalid("update_row needs put, delete_version, delete_column or increment")
        req = pb.UpdateRowRequest(table_name=self.name,
                                  row_change=plainbuffer.encode_row(PlainRow(cells, changes)))
        convert.encode_condition(req.condition, as_condition(condition))
        if increment:
            req.return_content.return_type = RT_AFTER_MODIFY
        if transaction_id:
            req.transaction_id = transaction_id
        resp = pb.UpdateRowResponse.FromString(self._db._call(
            "UpdateRow", req, not increment and idem.blind(condition)))
        return self._result(values, resp.row)

    def delete_row(self, pk: object, condition: object = None,
                   transaction_id: str | None = None) -> WriteResult:
        """Delete a row (see :meth:`widetable.Table.delete_row`)."""
        native = self._db._live_native()
        if native is not None:
            if type(pk) is list:  # a list of values or of (name, value): a tuple travels
                pk = self.normalize_pk(pk)
            try:
                return native.delete_row(self.name, pk, condition, transaction_id)
            except Unsendable:
                pass
        values = self._write_key(pk)[0]
        req = pb.DeleteRowRequest(table_name=self.name,
                                  primary_key=convert.encode_key(self._names, values, True))
        convert.encode_condition(req.condition, as_condition(condition))
        if transaction_id:
            req.transaction_id = transaction_id
        self._db._call("DeleteRow", req, idem.blind(condition))
        return WriteResult(values)

    @staticmethod
    def _result(values: tuple, data: bytes) -> WriteResult:
        if not data:
            return WriteResult(values)
        row = plainbuffer.decode_row(data)
        return WriteResult(tuple(v for _, v in row.primary_key),
                           {c.name: c.value for c in row.cells})


class RemoteTransaction:
    """A local transaction on a widetable server (see :class:`widetable.LocalTransaction`)."""

    def __init__(self, db: RemoteDatabase, table: RemoteTable, partition_key: object,
                 transaction_id: str) -> None:
        self._db = db
        self.table = table
        self.partition_key = partition_key
        self.transaction_id = transaction_id
        self.state = "active"

    def __repr__(self) -> str:
        return f"<RemoteTransaction {self.transaction_id} {self.table.name!r} {self.state}>"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.state != "active":
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    def get_row(self, pk: object, **options) -> Row | None:
        return self.table.get_row(pk, transaction_id=self.transaction_id, **options)

    def get_range(self, start: object, end: object, direction: str = "forward", **options) -> RangeResult:
        return self.table.get_range(start, end, direction, transaction_id=self.transaction_id, **options)

    def scan(self, direction: str = "forward", **options) -> Iterator[Row]:
        return scan_partition(self, self.table._names, self.partition_key, direction, **options)

    def put_row(self, pk: object, columns: object = None, condition: object = None) -> WriteResult:
        return self.table.put_row(pk, columns, condition, transaction_id=self.transaction_id)

    def update_row(self, pk: object, put: object = None, delete_version: object = None,
                   delete_column: object = None, increment: object = None,
                   condition: object = None) -> WriteResult:
        return self.table.update_row(pk, put, delete_version, delete_column, increment, condition,
                                     transaction_id=self.transaction_id)

    def delete_row(self, pk: object, condition: object = None) -> WriteResult:
        return self.table.delete_row(pk, condition, transaction_id=self.transaction_id)

    def commit(self) -> None:
        """Commit; ``OTSSessionNotExist`` if the transaction already ended."""
        self._db.commit_transaction(self.transaction_id)
        self.state = "committed"

    def abort(self) -> None:
        """Abort; ``OTSSessionNotExist`` if the transaction already ended."""
        self._db.abort_transaction(self.transaction_id)
        self.state = "aborted"


def _all_of(filters: list) -> object:
    return filters[0] if len(filters) == 1 else CompositeFilter("AND", tuple(filters))
