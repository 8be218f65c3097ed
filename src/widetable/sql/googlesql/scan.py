"""A Bigtable table as GoogleSQL sees it, read as Arrow record batches.

The SQL table of a Bigtable table has a ``_key BYTES`` column and one column per column
family: ``MAP<BYTES, BYTES>`` from qualifier to the newest cell's value, or
``MAP<BYTES, INT64>`` for an int64 aggregate family (sum, min, max: the 8-byte big-endian
state decoded). With ``with_history => TRUE`` a family's values are every version,
newest first: ``MAP<BYTES, ARRAY<STRUCT<timestamp TIMESTAMP, value V>>>``.

A scan reads only the families a statement names (a family-name filter, so the store
skips the others' records: ``bigtable/filters.filter_families``) and only the row ranges
its ``_key`` predicates allow. A statement naming no family reads every family, values
stripped, to see which rows exist. A row with no cell in the families read is not a row
of the answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from ...bigtable import filters as F
from ...bigtable.types import RowSet
from ..scan import Budget
from .types import INT_AGGREGATES, KEY, family_type, to_arrow

FIRST_PAGE, LAST_PAGE = 256, 4096  # rows per batch: small first (a LIMIT stops early), growing


@dataclass(frozen=True, slots=True)
class ScanSpec:
    """What one statement reads: ``families`` (name, aggregate) in column order."""
    families: tuple[tuple[str, str | None], ...]
    history: bool = False
    latest_n: int | None = None

    def schema(self) -> pa.Schema:
        fields = [pa.field(KEY, pa.binary())]
        fields += [pa.field(name, to_arrow(family_type(agg, self.history)))
                   for name, agg in self.families]
        return pa.schema(fields)

    def row_filter(self):
        """The RowFilter of the read (None: every family, every version)."""
        if not self.families:
            return F.Chain((F.CellsPerRowLimit(1), F.StripValue()))
        picks = tuple(F.FamilyNameRegex(_re2_literal(name)) for name, _ in self.families)
        pick = picks[0] if len(picks) == 1 else F.Interleave(picks)
        n = None if self.history and self.latest_n is None else (self.latest_n or 1)
        return pick if n is None else F.Chain((pick, F.CellsPerColumnLimit(n)))


def _re2_literal(name: str) -> str:
    # family names are [-_.a-zA-Z0-9]: only '.' and '-' mean something to RE2
    return name.replace(".", "\\.").replace("-", "\\-")


def batches(table, rows: RowSet | None, spec: ScanSpec, budget: Budget, label: str,
            reverse: bool = False, limit: int = 0) -> Iterator[pa.RecordBatch]:
    """The rows of ``rows`` (None: the whole table) as record batches of ``spec.schema()``,
    in key order (``reverse``: descending), at most ``limit`` rows (0: all), each page
    charged to ``budget`` under ``label``."""
    schema = spec.schema()
    source = table.read_rows(rows, spec.row_filter(), limit=limit, reverse=reverse)
    page = FIRST_PAGE
    while not budget.stop.is_set():
        chunk = []
        for row in source:
            chunk.append(row)
            if len(chunk) >= page:
                break
        if not chunk:
            return
        budget.charge(label, len(chunk), sum(len(c.value) + len(c.qualifier) for r in chunk
                                             for c in r.cells) + sum(len(r.key) for r in chunk))
        yield _batch(chunk, spec, schema)
        if len(chunk) < page:
            return
        page = min(page * 2, LAST_PAGE)


def _batch(rows: list, spec: ScanSpec, schema: pa.Schema) -> pa.RecordBatch:
    arrays = [pa.array([r.key for r in rows], pa.binary())]
    for i, (name, agg) in enumerate(spec.families, start=1):
        arrays.append(_family_column(rows, name, agg in INT_AGGREGATES, spec.history,
                                     schema.field(i).type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _family_column(rows: list, name: str, as_int: bool, history: bool, t: pa.DataType) -> pa.Array:
    offsets, keys, values = [0], [], []
    stamps: list[int] = []
    version_offsets = [0]
    for row in rows:
        last = None
        for c in row.cells:
            if c.family != name:
                continue
            value = int.from_bytes(c.value, "big", signed=True) if as_int and len(c.value) == 8 \
                else (None if as_int else c.value)
            if history:
                if c.qualifier != last:
                    if last is not None:
                        version_offsets.append(len(values))
                    keys.append(c.qualifier)
                    last = c.qualifier
                stamps.append(c.timestamp)
                values.append(value)
            elif c.qualifier != last:  # newest first: the first cell of a column is its value
                keys.append(c.qualifier)
                values.append(value)
                last = c.qualifier
        if history and last is not None:
            version_offsets.append(len(values))
        offsets.append(len(keys))
    value_type = pa.int64() if as_int else pa.binary()
    items: pa.Array = pa.array(values, value_type)
    if history:
        versions = pa.StructArray.from_arrays(
            [pa.array(stamps, pa.timestamp("us", tz="UTC")), items], names=["timestamp", "value"])
        items = pa.ListArray.from_arrays(pa.array(version_offsets, pa.int32()), versions)
    return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(keys, pa.binary()),
                                   items, type=t)


__all__ = ["KEY", "ScanSpec", "batches", "family_type"]
