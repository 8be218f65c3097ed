"""The catalog table behind a Bigtable-model table: its families' records in the engine.

A Bigtable table is a catalog table (so partitions, splits, throttling, statistics,
the advisor and the Key Visualizer see it) whose primary key is one BINARY column,
``key``. Its rows have no 0x10 blob: each family's cells of a row are one record
under ``0x11 table_id family_id pk-tuple`` (``layout.family_key_of``), in the engine's
column family of that family's storage profile. Partitions route the row's 0x10 key
(``layout.bigtable_row_key``), so boundaries and samples are row keys as for any table.

:class:`FamilyTable` is that table: the Tablestore row API refuses it with a clear
error (``OTSParameterInvalid`` naming ``db.bigtable``), and it offers the record-level
reads and writes the model (``widetable.bigtable.table``) is built on. Every write of a
row, across families, is one engine batch under the row's lock.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..errors import ParameterInvalid
from ..keys import layout
from ..table.schema import FamilySchema, TableSchema
from ..table.table import Table
from . import cells as C

if TYPE_CHECKING:
    from ..context import StoreContext


def _gc_rule(family: FamilySchema) -> object:
    if family.gc is None:
        return None
    from .gc import gc_from_dict

    return gc_from_dict(family.gc)


class FamilyTable(Table):
    """A Bigtable-model table in the catalog. See the module doc."""

    model = "bigtable"

    def __init__(self, ctx: StoreContext, schema: TableSchema) -> None:
        super().__init__(ctx, schema)

    def _set_schema(self, schema: TableSchema) -> None:
        super()._set_schema(schema)
        self._encode = self._refused  # bulk and batch paths encode keys with it: refused
        fams = sorted((f for f in schema.families if f.family_id), key=lambda f: f.name)
        self.families: dict[str, FamilySchema] = {f.name: f for f in fams}
        self.family_order: list[str] = [f.name for f in fams]
        self.stores = {f.name: self._engine.column_family(f.profile) for f in fams}
        self.gc_rules = {f.name: _gc_rule(f) for f in fams}
        self.table_id = schema.table_id

    # -- the Tablestore row API refuses this table ------------------------------------------

    def _refused(self, *args: object, **kwargs: object):
        raise ParameterInvalid(
            f"table {self.name!r} is a Bigtable table (column families, one BINARY row key): "
            f"use db.bigtable.table({self.name!r}), not the Tablestore row API")

    get_row = stored_row = get_range = stored_range = scan = to_arrow = _refused  # type: ignore[assignment]
    put_row = update_row = delete_row = encode_put = _refused  # type: ignore[assignment]
    normalize_pk = _key = _range_bounds = _refused  # type: ignore[assignment]

    def check_usable(self) -> None:
        """``OTSObjectNotExist`` once dropped, the store's error once it is closed."""
        if self._unusable:
            self._check_open()

    # -- records ----------------------------------------------------------------------------

    def row_key(self, key: bytes) -> bytes:
        """The 0x10 row key of Bigtable row ``key`` (what partitions and row locks use)."""
        return layout.bigtable_row_key(self.table_id, key)

    def lock_of(self, row_key: bytes):
        return self._lock(row_key)

    def read_columns(self, row_key: bytes, names: list[str]) -> dict[str, tuple[C.Columns, int]]:
        """``{family: (columns, stored bytes)}`` of one row's families ``names`` that hold
        cells; reads only those families' records (one get per family, or one multi_get
        per column family when several share a storage profile)."""
        out: dict[str, tuple[C.Columns, int]] = {}
        families, stores = self.families, self.stores
        decode = C.decode_columns
        if len(names) == 1:
            name = names[0]
            blob = stores[name].get(layout.family_key_of(row_key, families[name].family_id))
            if blob is not None:
                out[name] = (decode(blob), len(blob))
            return out
        groups: dict[int, tuple[object, list[str]]] = {}
        for name in names:
            store = stores[name]
            groups.setdefault(id(store), (store, []))[1].append(name)
        for store, group in groups.values():
            keys = [layout.family_key_of(row_key, families[n].family_id) for n in group]
            for name, blob in zip(group, store.multi_get(keys)):  # type: ignore[attr-defined]
                if blob is not None:
                    out[name] = (decode(blob), len(blob))
        return out

    def read_blobs(self, wanted: list[tuple[bytes, str]]) -> dict[tuple[bytes, str], bytes]:
        """``{(row_key, family): stored blob}`` of the records ``wanted`` that exist, read
        with one multi_get per column family (the batched form of ``read_columns``; the
        blobs are left encoded, so a caller decodes each afresh)."""
        families, stores = self.families, self.stores
        groups: dict[int, tuple[object, list[tuple[bytes, str]]]] = {}
        for pair in wanted:
            store = stores[pair[1]]
            groups.setdefault(id(store), (store, []))[1].append(pair)
        out: dict[tuple[bytes, str], bytes] = {}
        key_of = layout.family_key_of
        for store, pairs in groups.values():
            keys = [key_of(row_key, families[name].family_id) for row_key, name in pairs]
            for pair, blob in zip(pairs, store.multi_get(keys)):  # type: ignore[attr-defined]
                if blob is not None:
                    out[pair] = blob
        return out

    def write_columns(self, row_key: bytes, changed: dict[str, C.Columns], batch=None) -> int:
        """Write the new columns of each family in ``changed`` (empty: its record is
        deleted) in ONE engine batch (``batch``: put them in it, the caller writes it);
        returns the bytes now stored for them."""
        own = batch is None
        if own:
            batch = self._engine.batch()
        families, stores = self.families, self.stores
        total = 0
        for name, columns in changed.items():
            key = layout.family_key_of(row_key, families[name].family_id)
            blob = C.encode_columns(columns)
            if blob is None:
                batch.delete(key, stores[name].handle)
            else:
                batch.put(key, blob, stores[name].handle)
                total += len(blob)
        if own:
            self._engine.write(batch)
        return total

    def scan_family(self, name: str, lo: bytes, hi: bytes, reverse: bool) -> Iterator[tuple[bytes, bytes]]:
        """``(row_key, blob)`` of family ``name``'s records of the rows in ``[lo, hi)``
        (0x10 row-key bounds), in key order (or reversed)."""
        fid = self.families[name].family_id
        start, end = layout.family_bounds(self.table_id, fid, lo, hi)
        back = layout.row_key_of_family_key
        for key, blob in self.stores[name].scan(start, end, reverse):
            yield back(key), blob

    def scan_rows(self, names: list[str], lo: bytes, hi: bytes,
                  reverse: bool) -> Iterator[tuple[bytes, dict[str, bytes]]]:
        """``(row_key, {family: blob})`` of every row in ``[lo, hi)`` with a record in one
        of ``names``, merging the families' scans in key order (or reversed)."""
        if len(names) == 1:
            name = names[0]
            for row_key, blob in self.scan_family(name, lo, hi, reverse):
                yield row_key, {name: blob}
            return
        streams = [((rk, i, blob) for rk, blob in self.scan_family(name, lo, hi, reverse))
                   for i, name in enumerate(names)]
        merged = heapq.merge(*streams, key=lambda t: t[0], reverse=reverse)
        current: bytes | None = None
        row: dict[str, bytes] = {}
        for rk, i, blob in merged:
            if rk != current:
                if current is not None:
                    yield current, row
                current, row = rk, {}
            row[names[i]] = blob
        if current is not None:
            yield current, row

    def measure_scan(self, start: bytes, end: bytes) -> Iterator[tuple[bytes, bytes]]:
        """What a partition's size measure reads (``split.measure_partition``): one
        ``(row_key, bytes)`` per row in ``[start, end)``, its records of every family."""
        for row_key, blobs in self.scan_rows(self.family_order, start, end, False):
            yield row_key, b"".join(blobs.values()) if len(blobs) > 1 else next(iter(blobs.values()))

    def delete_rows(self, lo: bytes, hi: bytes) -> None:
        """Delete every family's records of the rows in ``[lo, hi)`` in one batch."""
        batch = self._engine.batch()
        for name, family in self.families.items():
            start, end = layout.family_bounds(self.table_id, family.family_id, lo, hi)
            batch.delete_range(start, end, self.stores[name].handle)
        self._engine.write(batch)

    def purge_families(self, stopped: Callable[[], bool]) -> int:
        """Delete the cells each family's GC rule expires (the background purge); returns
        records rewritten. Each row is re-read and rewritten under its lock; stops once
        ``stopped()`` or the table is dropped."""
        rules = {n: r for n, r in self.gc_rules.items() if r is not None}
        if not rules:
            return 0
        from .gc import gc_expired

        changed = 0
        lo, hi = layout.table_range(self.table_id)
        for name, rule in rules.items():
            for row_key, blob in self.scan_family(name, lo, hi, False):
                if stopped() or self._unusable:
                    return changed
                if not C.collect_garbage(C.decode_columns(blob), gc_expired, rule, C.now_micros()):
                    continue
                with self._lock(row_key):
                    if self._unusable:
                        return changed
                    if self.gc_rules.get(name) is not rule:
                        break  # the family changed (or went) since: the next round
                    key = layout.family_key_of(row_key, self.families[name].family_id)
                    columns = C.decode_columns(self.stores[name].get(key))
                    if C.collect_garbage(columns, gc_expired, rule, C.now_micros()):
                        self.write_columns(row_key, {name: columns})
                        changed += 1
        return changed

    def sample_rows(self, limit: int = 100_000) -> Iterator[object]:
        """Rows for the advisor's sample (``design.advisor.sample_table``): the primary key
        ``(key,)`` and one column per family and qualifier, its newest value."""
        from ..table.row import Row

        lo, hi = layout.table_range(self.table_id)
        for n, (row_key, blobs) in enumerate(self.scan_rows(self.family_order, lo, hi, False)):
            if n >= limit:
                return
            columns: dict = {}
            stamps: dict = {}
            for name, blob in blobs.items():
                for q, versions in C.decode_columns(blob).items():
                    column = f"{name}:{q.decode('latin-1')}"
                    columns[column] = versions[0][1]
                    stamps[column] = versions[0][0] // 1000
            yield Row((layout.decode_bigtable_row_key(row_key),), columns, stamps)
