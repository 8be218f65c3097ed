"""An index read like a table: ``db.table(index_name)`` returns an :class:`IndexTable`.

Reads (get_row, get_range, scan) work as on any table, over the index key.
``fetch_base=True`` returns the matching base rows instead of the index rows.
Each base row is checked against the entry's key: a row that is gone, or whose
indexed columns no longer hold the entry's values (a global index lags behind
its table), is left out, so a read of ``status == "paid"`` never returns a row
now ``"refunded"``. Every write raises ``OTSParameterInvalid``.
``prefix_count`` reads how many entries share a counted key prefix (``counts.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..errors import InvalidPK, ParameterInvalid
from ..keys import layout
from ..keys.compiled import compile_key_encoder
from ..table import rowcodec
from ..table.row import RangeResult, Row
from ..table.table import Table
from .counts import decode_count
from .schema import IndexCodec

if TYPE_CHECKING:
    from ..context import StoreContext


def index_write_refused(index: str, table: str) -> ParameterInvalid:
    """The error of a write to ``index`` of ``table``, embedded or through a server."""
    return ParameterInvalid(f"cannot write to index {index!r}: it is maintained from table "
                            f"{table!r}; write to the table instead")


class IndexTable(Table):
    """A read-only view of one index. ``base`` is the indexed table."""

    def __init__(self, ctx: StoreContext, base: Table, codec: IndexCodec) -> None:
        super().__init__(ctx, codec.schema)
        self.base = base
        self.index_type = codec.spec.index_type
        self._codec = codec
        self._prefix_encoders: dict[int, tuple] = {}

    def __repr__(self) -> str:
        return f"<Index {self.name!r} of {self.base.name!r} pk={list(self.schema.pk_names)}>"

    # -- reads ----------------------------------------------------------------

    def get_row(self, pk: object, columns: list[str] | None = None, max_versions: int | None = None,
                time_range: object = None, filter: object = None, fetch_base: bool = False) -> Row | None:
        """``Table.get_row`` on the index; with ``fetch_base`` the base row it points to."""
        row = super().get_row(pk, None if fetch_base else columns, max_versions, time_range,
                              None if fetch_base else filter)
        if row is None or not fetch_base:
            return row
        reader = self.base.reader(columns, max_versions, time_range, filter)
        blob = self.base.stored_row(self._codec.base_pk(row.primary_key))  # read and counted
        if blob is None:
            return None
        stored = base_unpack(blob)
        if not self._codec.still_matches(row.primary_key, stored[2]):
            return None  # changed since the entry was written: the index lags
        return reader(stored)

    def get_range(self, start: object, end: object, direction: str = "forward",
                  limit: int | None = None, columns: list[str] | None = None,
                  max_versions: int | None = None, time_range: object = None,
                  filter: object = None, fetch_base: bool = False) -> RangeResult:
        """``Table.get_range`` over the index key; with ``fetch_base`` the base rows, in index order."""
        if not fetch_base:
            return super().get_range(start, end, direction, limit, columns, max_versions,
                                     time_range, filter)
        page = super().get_range(start, end, direction, limit)
        return RangeResult(self._fetch(page.rows, columns, max_versions, time_range, filter),
                           page.next_start_primary_key)

    def scan(self, start: object = None, end: object = None, direction: str = "forward",
             columns: list[str] | None = None, max_versions: int | None = None,
             time_range: object = None, filter: object = None, page_size: int = 500,
             fetch_base: bool = False) -> Iterator[Row]:
        """``Table.scan`` over the index key; with ``fetch_base`` the base rows, in index order."""
        if not fetch_base:
            return super().scan(start, end, direction, columns, max_versions, time_range,
                                filter, page_size)
        return self._scan_base(start, end, direction, columns, max_versions, time_range, filter,
                               page_size)

    def _scan_base(self, start, end, direction, columns, max_versions, time_range, filter,
                   page_size) -> Iterator[Row]:
        page: list[Row] = []
        for row in super().scan(start, end, direction, page_size=page_size):
            page.append(row)
            if len(page) >= 100:
                yield from self._fetch(page, columns, max_versions, time_range, filter)
                page = []
        yield from self._fetch(page, columns, max_versions, time_range, filter)

    def _fetch(self, rows: list[Row], columns, max_versions, time_range, filter) -> list[Row]:
        if not rows:
            return []
        base, codec = self.base, self._codec
        keys = [base._key(codec.base_pk(r.primary_key))[1] for r in rows]
        reader = base.reader(columns, max_versions, time_range, filter)
        checks = codec.key_checks()
        out = []
        for entry, blob in zip(rows, base._engine.multi_get(keys)):
            if blob is None:
                continue
            stored = base_unpack(blob)
            if checks and not codec.still_matches(entry.primary_key, stored[2]):
                continue  # changed since the entry was written: the index lags
            row = reader(stored)
            if row is not None:
                out.append(row)
        return out

    def counted(self, length: int) -> bool:
        """Whether the index counts its entries by prefixes of ``length`` key columns."""
        counts = self._codec.counts
        return counts is not None and length in counts.lengths

    def prefix_count(self, values: tuple) -> int | None:
        """How many entries have key values starting with ``values`` (one read), or None
        when the index does not count prefixes of that length, or a value cannot be a
        key value (a string over 1 KB): then count the entries themselves. A global
        index's count lags as its entries do."""
        k = len(values)
        compiled = self._prefix_encoders.get(k)
        if compiled is None:
            if not self.counted(k):
                return None
            types = self.schema.pk_types[:k]
            compiled = self._prefix_encoders[k] = (
                compile_key_encoder(types), tuple(_PY[t] for t in types),
                layout.index_count_head(self.schema.table_id, k))
        if self._codec.counts is None:  # no longer counted
            return None
        encode, kinds, head = compiled
        if tuple(map(type, values)) != kinds:
            return None
        try:
            encoded = encode(values)
        except InvalidPK:
            return None
        return decode_count(self._engine.get(head + encoded))

    # -- writes are refused -----------------------------------------------------

    read_only = True

    def write_refused(self) -> ParameterInvalid:
        """The error of any write to the index (raised before its row is looked at)."""
        return index_write_refused(self.name, self.base.name)

    def _refuse(self, *args: object, **kwargs: object):
        raise self.write_refused()

    put_row = update_row = delete_row = encode_put = _refuse  # type: ignore[assignment]


_PY = {"STRING": str, "INTEGER": int, "BINARY": bytes}


def base_unpack(blob: bytes) -> tuple:
    return rowcodec.unpack(blob)
