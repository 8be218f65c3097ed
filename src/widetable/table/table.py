"""A table: single-row reads and writes, conditions, increments and range reads.

Every write to a row holds that row's lock from read to write, so a row is
atomic and conditional writes and increments are linearizable. Each write is
one engine write, durable when it returns.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import accumulate, islice
from operator import itemgetter
from typing import TYPE_CHECKING

from ..errors import (
    ConditionCheckFail,
    InvalidPK,
    ObjectNotExist,
    OutOfColumnCountLimit,
    ParameterInvalid,
    describe,
)
from ..keys import codec, layout
from . import autoinc, rowcodec
from .filters import RowExistence, as_condition
from .reader import make_reader, plain_row, visible_versions
from .row import RangeResult, Row, WriteResult
from .schema import TableSchema
from .values import (
    INT64_MAX,
    INT64_MIN,
    MAX_COLUMNS_PER_WRITE,
    check_column_name,
    check_ms,
    check_packed,
    check_value,
    normalize_cells,
    now_ms,
    plain_cells,
)

if TYPE_CHECKING:
    from ..context import StoreContext

MAX_RANGE_ROWS = 5000
MAX_RANGE_BYTES = 4 * 1024 * 1024
# scan() reads in pages this small because results that stay in the CPU cache
# decode faster; measured in bench/core.py.
SCAN_PAGE_ROWS = 500
_KEY_OFFSET = layout.ROW_PK_OFFSET  # where a row key's encoded primary key starts
# A forward page of stored rows is read in chunks, the first this many rows: big enough
# for most pages to need one more chunk at most, small enough that rows of megabytes
# do not pile up far past the page's byte budget before their size is known.
_FIRST_CHUNK = 32


class _Unrouted:
    """The partition of a table with no partition router: counts go nowhere useful."""

    __slots__ = ("bytes_read", "bytes_written", "reads", "writes")

    def __init__(self) -> None:
        self.reads = self.writes = self.bytes_read = self.bytes_written = 0

    def may_span(self, p: object, lo: bytes, hi: bytes, reverse: bool) -> bool:
        return False

    def record_range(self, p: object, n: int, nbytes: int, *page: object) -> None:
        return None


_UNROUTED = _Unrouted()


def _unrouted(key: bytes) -> _Unrouted:
    return _UNROUTED


def _unrecorded(part: object, key: bytes, new_len: int, old_len: int | None) -> None:
    return None


_unpack = rowcodec.unpack


def _stored_page(items: Iterator[tuple[bytes, bytes]],
                 max_rows: int) -> tuple[list[bytes], tuple | None, int]:
    """The stored rows of a page read without options (every row read is returned: one
    budget counts rows read and kept), the next start key if the page is full, and the
    bytes read."""
    blobs: list[bytes] = []
    append = blobs.append
    nbytes = count = 0
    next_pk = None
    for key, blob in items:
        if count >= max_rows or nbytes >= MAX_RANGE_BYTES:
            next_pk = codec.decode_tuple(key, _KEY_OFFSET)
            break
        count += 1
        nbytes += len(blob)
        append(blob)
    return blobs, next_pk, nbytes


def _stored_values_page(values: Iterator[bytes], max_rows: int) -> tuple[list[bytes], tuple | None, int]:
    """``_stored_page`` of a forward read, from the rows' values alone (``Engine.values``).

    The same page: a row is in it while fewer than ``max_rows`` rows and fewer than
    ``MAX_RANGE_BYTES`` bytes come before it. The rows are taken in chunks, each one C
    call (``list(islice(...))``) with no Python work per row; the next start key is the
    primary key stored in the first row left out."""
    blobs: list[bytes] = []
    nbytes = 0
    step = min(max_rows + 1, _FIRST_CHUNK)
    while True:
        chunk = list(islice(values, step))
        blobs += chunk
        nbytes += sum(map(len, chunk))
        if len(chunk) < step or len(blobs) > max_rows:
            break  # the range ended, or the row after the page's last one is here
        if nbytes >= MAX_RANGE_BYTES:
            if nbytes - len(blobs[-1]) >= MAX_RANGE_BYTES:
                break  # the last row read is past the byte budget: left out
            step = 1  # the last row read is in: one more tells whether the page is full
            continue
        # As many rows as, at the mean size so far, reach the byte budget, and one more.
        step = min(max_rows + 1 - len(blobs), (MAX_RANGE_BYTES - nbytes) * len(blobs) // nbytes + 1)
    keep = min(len(blobs), max_rows)
    if nbytes >= MAX_RANGE_BYTES:  # rare: find the first row with the budget spent before it
        for i, total in enumerate(accumulate(map(len, blobs)), 1):
            if total >= MAX_RANGE_BYTES:
                keep = min(keep, i)
                break
    next_pk = None
    if keep < len(blobs):
        next_pk = _unpack(blobs[keep])[1]
        del blobs[keep:]
        nbytes = sum(map(len, blobs))
    return blobs, next_pk, nbytes


def _noting(items: Iterator[tuple[bytes, bytes]], read: list[tuple[bytes, int]]) -> Iterator[tuple[bytes, bytes]]:
    """``items``, noting each key and blob size: for a page that may cross partitions."""
    for key, blob in items:
        read.append((key, len(blob)))
        yield key, blob


_key_item, _size_item = itemgetter(0), itemgetter(1)


def _put_latest(pk: tuple, row: list | None, puts: list) -> bytes:
    """The stored row after ``puts`` (``(name, value, ts)``), for a table that keeps one
    version and has no TTL, from a stored row without history (or none): what the
    general merge (visible versions, merge, trim, encode) gives, without building a
    version list per column. A put older than the column's version loses to it."""
    if row is None:
        latest: dict = {}
        stamps: dict = {}
    else:
        latest = dict(row[2])
        shared = row[3]
        stamps = dict.fromkeys(latest, shared) if type(shared) is int else dict(shared)
    for name, value, ts in puts:
        old = stamps.get(name)
        if old is None or ts >= old:
            latest[name] = value
            stamps[name] = ts
    return rowcodec.encode_latest(pk, latest, stamps)


class Table:
    """Rows of one table, sorted by primary key. Get one with ``db.table(name)``."""

    read_only = False  # an index's view (index/view.py) refuses writes: see write_refused

    def __init__(self, ctx: StoreContext, schema: TableSchema) -> None:
        self._ctx = ctx
        self._engine = ctx.engine
        self._get = ctx.engine.get
        self._locks = ctx.row_locks.stripes
        self._lock_mask = ctx.row_locks.mask
        self._txns = ctx.txns
        self.dropped = False
        self._unusable = False  # dropped, or its database closed: checked on every call
        # Partition-key values locked by local transactions; writers look only when non-empty.
        self._txn_locks = ctx.txn_locks
        # Partition hooks (widetable.partition): route a row key to its partition,
        # count the request and, when capacity is on, throttle it.
        self._route_read = self._route_write = _unrouted
        self._record_write = _unrecorded
        self._router = None
        self._ranges = _UNROUTED  # counts range pages: the Router once partitions attach
        # Change capture (widetable.stream.feed.TableFeed) when the table has a stream or an
        # index; None keeps the one-put write path. Read under the row lock.
        self._changes = None
        self._set_schema(schema)

    def _attach_partitions(self, route_read, route_write, record_write) -> None:
        """Install the partition layer's per-request hooks (called by the database)."""
        self._route_read, self._route_write = route_read, route_write
        self._record_write = record_write
        self._router = getattr(route_write, "__self__", None)  # for whole-batch routing
        self._ranges = self._router or _UNROUTED  # may_span / record_range of range pages

    def _set_schema(self, schema: TableSchema) -> None:
        self.schema = schema
        self.name = schema.name
        self._prefix = layout.table_prefix(schema.table_id)
        self._names = schema.pk_names
        self._pk_name_set = frozenset(schema.pk_names)
        self._types = schema.pk_types
        self._encode = codec.make_encoder(self._types, self._names)
        self._options = schema.options
        self._plain_reads = schema.options.ttl < 0  # no TTL: a plain read applies no options
        auto = schema.auto_increment
        self._auto_index = schema.pk_names.index(auto) if auto else None
        self._defined = {n: _PY_TYPES[t] for n, t in schema.defined_columns}

    def __repr__(self) -> str:
        return f"<Table {self.name!r} pk={list(self.schema.primary_key)}>"

    # -- keys -----------------------------------------------------------------

    def _check_open(self) -> None:
        if self.dropped:
            raise ObjectNotExist(f"Requested table does not exist. Table {self.name!r} was dropped")
        self._ctx.check_open()

    def _key(self, pk: object) -> tuple[tuple, bytes]:
        """The key tuple and its row key bytes; also checks the table is usable."""
        if self._unusable:
            self._check_open()
        values = pk if type(pk) is tuple else self.normalize_pk(pk)
        return values, self._prefix + self._encode(values)

    def normalize_pk(self, pk: object) -> tuple:
        """Accept a tuple/list of values in key order, a dict by column, or a scalar."""
        if type(pk) is tuple:
            return pk
        names = self._names
        if isinstance(pk, Mapping):
            extra = set(pk) - set(names)
            if extra or len(pk) != len(names):
                raise InvalidPK(
                    f"primary key {describe(pk)} must name exactly the columns {list(names)}"
                )
            return tuple(pk[n] for n in names)
        if isinstance(pk, list):
            if pk and all(isinstance(p, tuple) and len(p) == 2 for p in pk) and [
                p[0] for p in pk
            ] == list(names):
                return tuple(p[1] for p in pk)
            return tuple(pk)
        if isinstance(pk, (str, int, bytes)) and len(names) == 1:
            return (pk,)
        raise InvalidPK(f"invalid primary key {describe(pk)} for columns {list(names)}")

    def _lock(self, key: bytes):
        return self._locks[hash(key) & self._lock_mask]

    def reader(
        self, columns: object, max_versions: object, time_range: object, filter: object
    ):
        """The function that turns a stored row into a result under these read options."""
        return make_reader(
            columns, max_versions, time_range, filter, self._cutoff(now_ms()),
            self._options.max_versions, self._pk_name_set,
        )

    def _cutoff(self, now: int) -> int | None:
        ttl = self._options.ttl
        return None if ttl < 0 else now - ttl * 1000

    # -- reads ----------------------------------------------------------------

    def get_row(
        self,
        pk: object,
        columns: list[str] | None = None,
        max_versions: int | None = None,
        time_range: object = None,
        filter: object = None,
    ) -> Row | None:
        """Read one row, or None if it does not exist (or the filter rejects it).

        ``max_versions`` (default 1) and ``time_range`` (``(start_ms, end_ms)``)
        select versions; ``columns`` projects; ``filter`` is a Filter or a
        ColumnPagination.
        """
        plain = columns is None and max_versions is None and time_range is None and filter is None
        # Options are checked before the read: a bad one is refused whether the row exists
        # or not, as get_range and batch_get_row refuse it.
        reader = None if plain else self.reader(columns, max_versions, time_range, filter)
        blob = self.stored_row(pk)
        if blob is None:
            return None
        if reader is None:
            if self._plain_reads:
                row = _unpack(blob)
                return Row(row[1], row[2], row[3])
            reader = self.reader(None, None, None, None)
        return reader(_unpack(blob))

    def get_rows(self, pks: list[tuple], columns: list[str] | None = None) -> list[Row | None]:
        """``get_row(pk, columns)`` of each of ``pks`` (normalized key tuples), in order: one
        reader for them all and one engine ``multi_get`` (what a search's page reads)."""
        if not pks:
            return []
        reader = None if columns is None else self.reader(columns, None, None, None)
        if reader is None and not self._plain_reads:
            reader = self.reader(None, None, None, None)
        keys = []
        for pk in pks:
            key = self._prefix + self._encode(pk) if type(pk) is tuple and not self._unusable \
                else self._key(pk)[1]
            keys.append(key)
        out: list[Row | None] = []
        for key, blob in zip(keys, self._engine.multi_get(keys)):
            part = self._route_read(key)
            if blob is None:
                out.append(None)
                continue
            part.bytes_read += len(blob)
            if reader is None:
                row = _unpack(blob)
                out.append(Row(row[1], row[2], row[3]))
            else:
                out.append(reader(_unpack(blob)))
        return out

    def stored_row(self, pk: object) -> bytes | None:
        """The row's stored bytes (``rowcodec``'s layout), read and counted as ``get_row``
        reads it, or None. On a table without TTL (``plain_reads``), a read without
        options returns exactly its pk, latest values and timestamps: the server sends
        these bytes as they are."""
        if type(pk) is tuple and not self._unusable:
            key = self._prefix + self._encode(pk)
        else:
            key = self._key(pk)[1]
        part = self._route_read(key)
        blob = self._get(key)
        if blob is not None:
            part.bytes_read += len(blob)
        return blob

    @property
    def plain_reads(self) -> bool:
        """Whether a read without options returns stored rows as they are (no TTL to apply)."""
        return self._plain_reads

    def get_range(
        self,
        start: object,
        end: object,
        direction: str = "forward",
        limit: int | None = None,
        columns: list[str] | None = None,
        max_versions: int | None = None,
        time_range: object = None,
        filter: object = None,
    ) -> RangeResult:
        """Read rows in ``[start, end)`` (forward) or ``[start, end)`` walking down (backward).

        ``start`` is inclusive and ``end`` exclusive in both directions; forward needs
        ``start < end`` and backward ``start > end`` (as in Tablestore, a range whose bounds
        are equal, or encode equal, raises ``OTSParameterInvalid``). ``INF_MIN``/``INF_MAX`` stand in for any column,
        and a short tuple is padded with them. One call returns at most 5000
        rows or 4 MB; ``next_start_primary_key`` then says where to go on.
        """
        lo, hi, reverse, max_rows = self._range_of(start, end, direction, limit)
        reader = self.reader(columns, max_versions, time_range, filter)
        part = self._route_read(hi if reverse else lo)
        if reader is plain_row:
            blobs, next_pk = self._stored_blobs(lo, hi, reverse, max_rows, part)
            return RangeResult([Row(r[1], r[2], r[3]) for r in map(_unpack, blobs)], next_pk)
        items = self._engine.scan(lo, hi, reverse)
        read: list[tuple[bytes, int]] = []
        if self._ranges.may_span(part, lo, hi, reverse):
            items = _noting(items, read)  # rows per partition read, counted below
        rows: list[Row] = []
        append = rows.append
        next_pk = None
        unpack = _unpack
        scanned = nbytes = 0
        for key, blob in items:
            if scanned >= MAX_RANGE_ROWS or nbytes >= MAX_RANGE_BYTES or len(rows) >= max_rows:
                next_pk = codec.decode_tuple(key, _KEY_OFFSET)
                break
            scanned += 1
            nbytes += len(blob)
            row = reader(unpack(blob))
            if row is not None:
                append(row)
        self._ranges.record_range(part, scanned, nbytes, lo, hi, reverse, read, _key_item, _size_item)
        return RangeResult(rows, next_pk)

    def stored_range(self, start: object, end: object, direction: str = "forward",
                     limit: int | None = None) -> tuple[list[bytes], tuple | None]:
        """One page of ``get_range`` without read options, as the rows' stored bytes and the
        next start key; read and counted as ``get_range`` reads it. Only on a table with
        ``plain_reads`` are these the rows such a read returns."""
        lo, hi, reverse, max_rows = self._range_of(start, end, direction, limit)
        return self._stored_blobs(lo, hi, reverse, max_rows, self._route_read(hi if reverse else lo))

    def _stored_blobs(self, lo: bytes, hi: bytes, reverse: bool, max_rows: int,
                      part: object) -> tuple[list[bytes], tuple | None]:
        if reverse:
            blobs, next_pk, nbytes = _stored_page(self._engine.scan(lo, hi, True), max_rows)
        else:
            blobs, next_pk, nbytes = _stored_values_page(self._engine.values(lo, hi), max_rows)
        self._ranges.record_range(part, len(blobs), nbytes, lo, hi, reverse, blobs, self._key_of, len)
        return blobs, next_pk

    def _key_of(self, blob: bytes) -> bytes:
        """The row key of a stored row (its primary key is in the blob)."""
        return self._prefix + self._encode(tuple(_unpack(blob)[1]))

    def _range_of(self, start: object, end: object, direction: str,
                  limit: int | None) -> tuple[bytes, bytes, bool, int]:
        """``(low key, high key, backward, rows at most)`` of a page request, checked."""
        if self._unusable:
            self._check_open()
        reverse = _check_direction(direction)
        if limit is not None and (type(limit) is not int or limit <= 0):
            raise ParameterInvalid(f"limit must be a positive integer, got {describe(limit)}")
        lo, hi = self._range_bounds(start, end, reverse)
        return lo, hi, reverse, MAX_RANGE_ROWS if limit is None else min(limit, MAX_RANGE_ROWS)

    def scan(
        self,
        start: object = None,
        end: object = None,
        direction: str = "forward",
        columns: list[str] | None = None,
        max_versions: int | None = None,
        time_range: object = None,
        filter: object = None,
        page_size: int = SCAN_PAGE_ROWS,
    ) -> Iterator[Row]:
        """Iterate a whole range, following ``next_start_primary_key`` page by page.

        ``start``/``end`` default to the whole table in the chosen direction.
        """
        whole = full_range(len(self._names), _check_direction(direction))
        return follow_pages(
            self.get_range, whole[0] if start is None else start, whole[1] if end is None else end,
            direction, limit=page_size, columns=columns, max_versions=max_versions,
            time_range=time_range, filter=filter,
        )

    def to_arrow(self, start: object = None, end: object = None, columns: list[str] | None = None):
        """The newest version of each row in ``[start, end)`` as a ``pyarrow.Table``: the key
        columns, then ``columns`` (default: the predefined columns and those the first
        page holds). Types map INTEGER -> int64, DOUBLE -> float64, BOOLEAN -> bool,
        STRING -> string, BINARY -> binary; a value that does not fit is OTSParameterInvalid
        naming its row. ``widetable.sql.interchange`` streams the same as record batches.
        (The Arrow code lives there, so pyarrow stays out of the row layer.)"""
        from ..sql.interchange import table_to_arrow
        return table_to_arrow(self, start, end, columns)

    def _range_bounds(self, start: object, end: object, reverse: bool) -> tuple[bytes, bytes]:
        pad = codec.INF_MAX if reverse else codec.INF_MIN
        s = self._bound(start, pad, inclusive_upper=reverse)
        e = self._bound(end, pad, inclusive_upper=reverse)
        lo, hi = (e, s) if reverse else (s, e)
        if lo >= hi:
            raise empty_range(start, end, reverse)
        return lo, hi

    def _bound(self, values: object, pad: object, inclusive_upper: bool) -> bytes:
        """Key bytes for a range bound; see codec's note on ``0xFF``."""
        kind = type(values)
        if kind is tuple or kind is list:  # the usual bound, tested first: Mapping's check is slow
            vals = list(values)
        elif isinstance(values, Mapping):
            unknown = [n for n in values if n not in self._names]
            if unknown:
                raise InvalidPK(f"range bound {describe(values)} names {describe(unknown[0])}, "
                                f"not one of the key columns {list(self._names)}")
            vals = [values.get(n, pad) for n in self._names]
        elif isinstance(values, (tuple, list)):
            vals = list(values)
        else:
            vals = [values]
        if len(vals) > len(self._names):
            raise InvalidPK(f"range bound {describe(values)} has more columns than {list(self._names)}")
        vals += [pad] * (len(self._names) - len(vals))
        out = self._prefix
        for v, t, n in zip(vals, self._types, self._names):
            if v is codec.INF_MIN:
                return out
            if v is codec.INF_MAX:
                return out + b"\xff"
            out += codec.encode_element(v, t, n)
        # A full key: bump it past itself when the bound must include it from above.
        return out + b"\x00" if inclusive_upper else out

    # -- writes ---------------------------------------------------------------

    def put_row(self, pk: object, columns: object = None, condition: object = None) -> WriteResult:
        """Write a whole row, replacing every column and version it had.

        ``columns`` is ``{name: value}``, ``{name: (value, ts)}`` or a list of
        ``(name, value[, ts])``. Raises ``OTSConditionCheckFail`` if ``condition``
        fails; then nothing changes. On a table with an auto-increment column,
        pass ``AUTO_INCREMENT`` for it to get a new value, returned in
        ``WriteResult.primary_key``.
        """
        if self._auto_index is not None:
            return autoinc.put_row(self, pk, columns, condition)
        values, key = self._key(pk)
        cond = as_condition(condition)
        # A table with local indexes: keep the new row's decoded form for their entries
        # (a hint: the feed is read again under the row lock).
        changes = self._changes
        decoded: list | None = [] if changes is not None and changes.local else None
        blob = self.encode_put(values, columns, decoded)
        part = self._route_write(key)
        if self._txn_locks:
            self._txns.wait_for(self, values[0])
        with self._locks[hash(key) & self._lock_mask]:
            if self._unusable:  # dropped (or closed) since _key: see Catalog.delete_table
                self._check_open()
            if self._txn_locks:
                self._txns.check(self, values[0])
            if cond is not None and cond.needs_row:
                self._check_condition(values, self._engine.get(key), cond, now_ms())
            changes = self._changes
            if changes is None:
                self._engine.put(key, blob)
            else:
                changes.put(key, blob, decoded[0] if decoded else None)
        self._record_write(part, key, len(blob), None)
        return WriteResult(values)

    def encode_put(self, pk: tuple, columns: object, decoded: list | None = None) -> bytes:
        """Validate ``columns`` of a put and encode the row blob it writes.

        With a list as ``decoded``, a plain put (untimed values) also appends the row
        as ``rowcodec.unpack`` would return it, so index entries need not decode the blob.
        """
        now = now_ms()
        if type(columns) is dict:
            latest = plain_cells(columns)
            if latest is not None:
                self._reject_pk_names(latest)
                if self._defined:
                    self._check_defined(latest.items())
                if decoded is not None:
                    # A private copy: index entries and blob agree even if the caller's
                    # dict changes under us (its values are immutable: plain types).
                    latest = dict(latest)
                try:
                    blob = rowcodec.encode_latest(pk, latest, now)
                except (UnicodeEncodeError, OverflowError, ValueError):
                    for name, value in latest.items():
                        check_value(name, value)  # raises the precise error
                    raise
                check_packed(latest, len(blob))
                if decoded is not None:
                    decoded.append((rowcodec.FORMAT, pk, latest, now, None))
                return blob
        cells = normalize_cells(columns, now, self._options.max_time_deviation)
        self._reject_pk_names([c[0] for c in cells])
        if self._defined:
            self._check_defined((c[0], c[1]) for c in cells)
        return self._encode_new_row(pk, cells, now)

    def _reject_pk_names(self, names: object) -> None:
        """Attribute columns may not reuse a primary-key column's name, as in Tablestore.

        ``names`` is a collection (it may be read twice): the common case, no clash,
        costs one ``isdisjoint``."""
        if self._pk_name_set.isdisjoint(names):  # type: ignore[arg-type]
            return
        clash = min(self._pk_name_set.intersection(names))  # type: ignore[arg-type]
        raise ParameterInvalid(f"attribute column {clash!r} has the name of a primary key column")

    def _check_defined(self, cells: object) -> None:
        """Values of predefined columns must have the declared type (OTSParameterInvalid)."""
        defined = self._defined
        for name, value in cells:  # type: ignore[attr-defined]
            want = defined.get(name)
            if want is not None and type(value) is not want:
                raise ParameterInvalid(
                    f"column {name!r} is predefined as {_TYPE_NAMES[want]}; value {describe(value)} "
                    f"is {_TYPE_NAMES.get(type(value), type(value).__name__)}"
                )

    def _encode_new_row(self, pk: tuple, cells: list, now: int) -> bytes:
        names = {c[0] for c in cells}
        if len(names) == len(cells):
            return rowcodec.encode_latest(
                pk, {n: v for n, v, _ in cells}, {n: t for n, _, t in cells}
            )
        versions: dict[str, list] = {}
        for name, value, ts in cells:
            rowcodec.merge_version(versions.setdefault(name, []), ts, value)
        rowcodec.trim(versions, self._options.max_versions, None)
        return rowcodec.encode_versions(pk, versions)

    def update_row(
        self,
        pk: object,
        put: object = None,
        delete_version: object = None,
        delete_column: object = None,
        increment: object = None,
        condition: object = None,
    ) -> WriteResult:
        """Change some columns of a row, creating it if needed.

        Applied in order: ``delete_column`` (all versions of each named column),
        ``delete_version`` (``{column: ts}``), ``put``, then ``increment``
        (``{column: delta}``, atomic; a missing column counts as 0). The result
        carries the new value of each incremented column.

        As in Tablestore's UpdateRow, deleting every attribute column does not delete
        the row (that is ``delete_row``'s job): the row stays, with its primary key
        alone. An update of a missing row inserts it, even one that only deletes:
        the row then exists with no attribute columns.
        """
        if self._auto_index is not None:  # the key may have to raise the auto-increment counter
            return autoinc.update_row(self, pk, put, delete_version, delete_column, increment,
                                      condition)
        return self._update_row(pk, put, delete_version, delete_column, increment, condition)

    def _update_row(self, pk: object, put: object, delete_version: object, delete_column: object,
                    increment: object, condition: object,
                    encoded: tuple[tuple, bytes] | None = None) -> WriteResult:
        """``update_row``'s body; ``encoded``: ``self._key(pk)`` when the caller has it."""
        values, key = self._key(pk) if encoded is None else encoded
        now = now_ms()
        puts = normalize_cells(put, now, self._options.max_time_deviation, "put")
        # Each kind is checked only when given: a put-only update (the common one)
        # skips the rest, about 4 µs of a 20 µs call.
        del_versions = _pairs(delete_version, "delete_version") if delete_version is not None else []
        for name, ts in del_versions:
            check_column_name(name)
            check_ms(ts, f"delete_version of {name!r}")
        del_columns = _names(delete_column) if delete_column is not None else []
        incs = _increments(increment) if increment is not None else []
        total = len(puts) + len(del_versions) + len(del_columns) + len(incs)
        if total == 0:
            raise ParameterInvalid("update_row needs put, delete_version, delete_column or increment")
        if total > MAX_COLUMNS_PER_WRITE:
            raise OutOfColumnCountLimit(f"{total} column operations; the limit is {MAX_COLUMNS_PER_WRITE}")
        names = [c[0] for c in puts]
        if total != len(puts):
            names += [n for n, _ in incs] + del_columns + [n for n, _ in del_versions]
        self._reject_pk_names(names)
        if self._defined:
            self._check_defined([(c[0], c[1]) for c in puts] + [(n, 0) for n, _ in incs])
        if incs:
            clash = {n for n, _ in incs} & ({c[0] for c in puts} | set(del_columns))
            if clash:
                raise ParameterInvalid(
                    f"column {sorted(clash)[0]!r} is both incremented and written in one update")
        cond = as_condition(condition)
        part = self._route_write(key)
        if self._txn_locks:
            self._txns.wait_for(self, values[0])
        with self._lock(key):
            if self._unusable:  # dropped (or closed) since _key: see Catalog.delete_table
                self._check_open()
            if self._txn_locks:
                self._txns.check(self, values[0])
            blob = self._engine.get(key)
            row = rowcodec.unpack(blob) if blob is not None else None
            if cond is not None and cond.needs_row:
                self._check_condition(values, blob, cond, now, row)
            cutoff = self._cutoff(now)
            changes = self._changes
            if (changes is None and cutoff is None and self._options.max_versions == 1
                    and not (del_columns or del_versions or incs)
                    and (row is None or row[4] is None)):
                new = _put_latest(values, row, puts)
                self._engine.put(key, new)
                self._record_write(part, key, len(new), len(blob) if blob else 0)
                return WriteResult(values)
            versions = (
                visible_versions(row, cutoff, self._options.max_versions) if row is not None else {}
            )
            for name in del_columns:
                versions.pop(name, None)
            for name, ts in del_versions:
                if name in versions:
                    versions[name] = [tv for tv in versions[name] if tv[0] != ts]
            for name, value, ts in puts:
                rowcodec.merge_version(versions.setdefault(name, []), ts, value)
            results = self._apply_increments(versions, incs, now)
            rowcodec.trim(versions, self._options.max_versions, cutoff)
            new = rowcodec.encode_versions(values, versions)
            if changes is not None:
                changes.update(key, values, row, new, _changed_cells(
                    del_columns, del_versions, puts, results, versions, now))
            else:
                self._engine.put(key, new)
        self._record_write(part, key, len(new), len(blob) if blob else 0)
        return WriteResult(values, results)

    @staticmethod
    def _apply_increments(versions: dict, incs: list, now: int) -> dict[str, int]:
        results: dict[str, int] = {}
        for name, delta in incs:
            current = versions.get(name)
            old = current[0][1] if current else 0
            if type(old) is not int:
                raise ParameterInvalid(
                    f"cannot increment column {name!r}: its value {describe(old)} is not an INTEGER"
                )
            new = old + delta
            if not INT64_MIN <= new <= INT64_MAX:
                raise ParameterInvalid(f"incrementing column {name!r} by {delta} overflows int64")
            ts = max(now, current[0][0]) if current else now
            rowcodec.merge_version(versions.setdefault(name, []), ts, new)
            results[name] = new
        return results

    def delete_row(self, pk: object, condition: object = None) -> WriteResult:
        """Delete a row and all its versions. Deleting a missing row is not an error."""
        values, key = self._key(pk)
        cond = as_condition(condition)
        part = self._route_write(key)
        if self._txn_locks:
            self._txns.wait_for(self, values[0])
        with self._lock(key):
            if self._unusable:  # dropped (or closed) since _key: see Catalog.delete_table
                self._check_open()
            if self._txn_locks:
                self._txns.check(self, values[0])
            if cond is not None and cond.needs_row:
                self._check_condition(values, self._engine.get(key), cond, now_ms())
            changes = self._changes
            if changes is None:
                self._engine.delete(key)
            else:
                changes.delete(key, values)
        self._record_write(part, key, 0, None)
        return WriteResult(values)

    def _check_condition(
        self, pk: tuple, blob: bytes | None, cond, now: int, row: list | None = None
    ) -> None:
        """Raise ConditionCheckFail unless the row as stored satisfies ``cond``."""
        if blob is not None and row is None:
            row = rowcodec.unpack(blob)
        versions = (
            visible_versions(row, self._cutoff(now), self._options.max_versions)
            if row is not None
            else {}
        )
        exists = row is not None and (bool(versions) or not row[2])
        if cond.row_existence is RowExistence.EXPECT_EXIST and not exists:
            raise ConditionCheckFail(f"Condition check failed. Row {describe(pk)} does not exist")
        if cond.row_existence is RowExistence.EXPECT_NOT_EXIST and exists:
            raise ConditionCheckFail(f"Condition check failed. Row {describe(pk)} already exists")
        if cond.column_condition is not None:
            latest = {n: vs[0][1] for n, vs in versions.items()}
            if not cond.column_condition.matches(latest, versions):
                raise ConditionCheckFail(
                    f"Condition check failed. Row {describe(pk)} does not match "
                    f"{describe(cond.column_condition, 120)}"
                )


_PY_TYPES = {"STRING": str, "INTEGER": int, "DOUBLE": float, "BOOLEAN": bool, "BINARY": bytes}
_TYPE_NAMES = {t: n for n, t in _PY_TYPES.items()}


def _changed_cells(del_columns: list, del_versions: list, puts: list, increments: dict,
                   versions: dict, now: int) -> list:
    """An update's changes as change-log entries ``[column, kind, value, version]``."""
    out: list = [[n, 2, None, None] for n in del_columns]
    out += [[n, 1, None, ts] for n, ts in del_versions]
    out += [[n, 0, v, ts] for n, v, ts in puts]
    for name, value in increments.items():
        vs = versions.get(name)
        out.append([name, 0, value, vs[0][0] if vs else now])
    return out


def empty_range(start: object, end: object, reverse: bool) -> ParameterInvalid:
    """Tablestore's answer to a range that holds no key: its start is not below its end
    (forward) or not above it (backward), bounds that encode equal included."""
    if reverse:
        text = "Begin key must more than end key in BACKWARD"
    else:
        text = "Begin key must less than end key in FORWARD"
    return ParameterInvalid(f"{text}: range {describe(start)} -> {describe(end)}")


def full_range(columns: int, reverse: bool, prefix: tuple = ()) -> tuple[tuple, tuple]:
    """``(start, end)`` covering every key that starts with ``prefix``, in scan direction."""
    lo, hi = (codec.INF_MAX, codec.INF_MIN) if reverse else (codec.INF_MIN, codec.INF_MAX)
    pad = columns - len(prefix)
    return prefix + (lo,) * pad, prefix + (hi,) * pad


def follow_pages(get_range, start: object, end: object, direction: str, **options) -> Iterator[Row]:
    """Every row of ``get_range(start, end, direction, **options)``, page after page,
    following ``next_start_primary_key``: the loop behind each ``scan``."""
    while True:
        page = get_range(start, end, direction, **options)
        yield from page.rows
        if page.next_start_primary_key is None:
            return
        start = page.next_start_primary_key


def scan_partition(reader, names: tuple, partition_key: object, direction: str,
                   **options) -> Iterator[Row]:
    """Every row whose first key value is ``partition_key``, through ``reader``'s get_range
    (or, for a one-column key ``names``, its get_row: that range is the one row, and a
    range whose bounds are both that key holds no key at all)."""
    if len(names) == 1:
        _check_direction(direction)
        options.pop("limit", None)
        row = reader.get_row((partition_key,), **options)
        return iter(() if row is None else (row,))
    start, end = full_range(len(names), _check_direction(direction), (partition_key,))
    return follow_pages(reader.get_range, start, end, direction, **options)


def _check_direction(direction: str) -> bool:
    d = getattr(direction, "value", direction)
    if d in ("forward", "FORWARD"):
        return False
    if d in ("backward", "BACKWARD"):
        return True
    raise ParameterInvalid(f"direction must be 'forward' or 'backward', got {describe(direction)}")


def direction_name(reverse: bool) -> str:
    return "backward" if reverse else "forward"


def _pairs(value: object, what: str) -> list[tuple[str, object]]:
    if value is None:
        return []
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, (list, tuple)) and all(
        isinstance(p, (list, tuple)) and len(p) == 2 for p in value
    ):
        return [tuple(p) for p in value]  # type: ignore[misc]
    raise ParameterInvalid(f"{what} must be a dict or a list of (column, value) pairs, got {describe(value)}")


def _names(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise ParameterInvalid(f"delete_column must be a list of column names, got {describe(value)}")
    return [check_column_name(n) for n in value]


def _increments(value: object) -> list[tuple[str, int]]:
    out = []
    for name, delta in _pairs(value, "increment"):
        check_column_name(name)
        if type(delta) is not int or not INT64_MIN <= delta <= INT64_MAX:
            raise ParameterInvalid(f"increment of {name!r} must be an int64, got {describe(delta)}")
        out.append((name, delta))
    return out


__all__ = ["Table"]
