"""``BigtableTable``: the data API of one Bigtable-model table (README: the Bigtable model).

Reads fetch only the families a filter can output (``filters.filter_families``), drop
the cells their family's GC rule deletes (``gc.gc_expired``: expired cells are never
returned, whether or not the background purge has run), then apply the filter
(``filters.compile_filter``). A read of several families of one row takes the row's
lock, so it never sees half of a write (the families are separate records).

Writes check everything first (a rejected request changes nothing), route the row
through its partition (counting it; ``OTSServerBusy`` when throttled), then read,
change and write the row's touched families in ONE engine batch under the row lock.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from operator import itemgetter
from typing import TYPE_CHECKING

from ..errors import ParameterInvalid, ServerBusy, WidetableError
from ..keys import layout
from . import cells as C
from .cells import now_micros
from .bulk import mutate_many
from .mutate import (
    INT64_MAX,
    INT64_MIN,
    apply_mutations,
    check_mutations,
    check_row_size,
    decode_int64,
    encode_int64,
    families_touched,
    family_of,
    size_added_bound,
    wrap_int64,
)
from .types import (
    BigtableRow,
    Cell,
    ReadModifyWriteRule,
    RowRange,
    RowSet,
    check_qualifier,
    check_row_key,
    check_row_range,
)

if TYPE_CHECKING:
    from .store import FamilyTable

PAGE_ROWS = 256  # rows of a range read counted on its partitions at a time
_first, _second = itemgetter(0), itemgetter(1)


def _compiled(filter: object):
    """``(compiled filter or None, families it can output or None)``; checks the filter.
    Filters are frozen values: the last few are kept compiled (checking and compiling
    one, regexes and all, costs several times a row read)."""
    if filter is None:
        return None, None
    try:
        return _compiled_cached(filter)
    except TypeError:  # an unhashable filter (a list where a tuple belongs): checked uncached
        return _compile(filter)


def _compile(filter: object):
    from .filters import check_filter, compile_filter, filter_families

    check_filter(filter)
    return compile_filter(filter), filter_families(filter)


_compiled_cached = functools.lru_cache(maxsize=512)(_compile)


def _gc_expired():
    from .gc import gc_expired

    return gc_expired


class BigtableTable:
    """One Bigtable table of a store; get it with ``db.bigtable.table(name)``."""

    def __init__(self, backing: FamilyTable) -> None:
        self._t = backing
        self.name = backing.name

    def __repr__(self) -> str:
        return f"<BigtableTable {self.name!r} families={self._t.family_order}>"

    def _table(self) -> FamilyTable:
        t = self._t
        t.check_usable()
        return t

    # -- reads ------------------------------------------------------------------------------

    def _names(self, t: FamilyTable, wanted: set[str] | None) -> list[str]:
        order = t.family_order
        return list(order) if wanted is None else [n for n in order if n in wanted]

    def _cells(self, t: FamilyTable, blobs: dict[str, object], now: int, decoded: bool) -> list[Cell]:
        """The row's cells in row order, GC applied (``blobs``: family -> blob or columns)."""
        out: list[Cell] = []
        expired = None
        for name in t.family_order:
            if name not in blobs:
                continue
            columns = blobs[name] if decoded else C.decode_columns(blobs[name])  # type: ignore[arg-type]
            rule = t.gc_rules[name]
            if rule is not None:
                expired = expired or _gc_expired()
                C.collect_garbage(columns, expired, rule, now)  # type: ignore[arg-type]
            out += C.to_cells(name, columns)  # type: ignore[arg-type]
        return out

    def _read_locked(self, t: FamilyTable, row_key: bytes, names: list[str]) -> tuple[dict, int]:
        if len(names) > 1:  # several records: under the lock, never half a write
            with t.lock_of(row_key):
                data = t.read_columns(row_key, names)
        else:
            data = t.read_columns(row_key, names)
        return {n: c for n, (c, _) in data.items()}, sum(size for _, size in data.values())

    def read_row(self, key: bytes, filter: object = None) -> BigtableRow | None:
        """The row ``key`` (cells in row order, through ``filter``), or None if it has no
        cell (or the filter leaves none). Reads only the families the filter can output."""
        t = self._table()
        key = check_row_key(key)
        compiled, wanted = _compiled(filter)
        names = self._names(t, wanted)
        row_key = t.row_key(key)
        part = t._route_read(row_key)
        if not names:
            return None
        schema = t.schema
        try:
            data, nbytes = self._read_locked(t, row_key, names)
        except KeyError:
            if t.schema is schema:
                raise
            # modify_families swapped the families while this read named them: again,
            # with the families as they are now.
            return self.read_row(key, filter)
        part.bytes_read += nbytes
        cells = self._cells(t, data, now_micros(), True)
        if compiled is not None:
            cells = compiled(key, cells)
        return BigtableRow(key, tuple(cells)) if cells else None

    def read_rows(self, row_set: RowSet | None = None, filter: object = None, limit: int = 0,
                  reverse: bool = False) -> Iterator[BigtableRow]:
        """Stream the rows of ``row_set`` (None or empty: the whole table) in key order
        (``reverse``: descending), through ``filter``; at most ``limit`` rows (0: all).
        Everything is checked before the first row is read."""
        t = self._table()
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ParameterInvalid(f"rows limit must be an int >= 0, got {limit!r}")
        if not isinstance(reverse, bool):
            raise ParameterInvalid(f"reverse must be a bool, got {reverse!r}")
        ranges = self._ranges(t, row_set)
        compiled, wanted = _compiled(filter)
        names = self._names(t, wanted)
        return self._stream(t, ranges, names, compiled, limit, reverse)

    def _ranges(self, t: FamilyTable, row_set: RowSet | None) -> list[tuple[bytes, bytes]]:
        """The row set as sorted, disjoint 0x10 row-key ranges ``[lo, hi)``."""
        tid = t.table_id
        if row_set is None:
            return [layout.table_range(tid)]
        if not isinstance(row_set, RowSet):
            raise ParameterInvalid(f"row_set must be a RowSet, got {row_set!r:.80}")
        if not row_set.keys and not row_set.ranges:
            return [layout.table_range(tid)]
        spans: list[tuple[bytes, bytes]] = []
        for k in row_set.keys:
            rk = layout.bigtable_row_key(tid, check_row_key(k))
            spans.append((rk, rk + b"\x00"))
        for r in row_set.ranges:
            r = check_row_range(r)
            start = None if r.start in (None, b"") else bytes(r.start)  # type: ignore[arg-type]
            end = None if r.end in (None, b"") else bytes(r.end)  # type: ignore[arg-type]
            lo, hi = layout.bigtable_range(tid, start, end, r.start_inclusive, r.end_inclusive)
            if lo < hi:
                spans.append((lo, hi))
        spans.sort()
        merged: list[tuple[bytes, bytes]] = []
        for lo, hi in spans:
            if merged and lo <= merged[-1][1]:
                if hi > merged[-1][1]:
                    merged[-1] = (merged[-1][0], hi)
            else:
                merged.append((lo, hi))
        return merged

    def _stream(self, t: FamilyTable, ranges: list[tuple[bytes, bytes]], names: list[str],
                compiled, limit: int, reverse: bool) -> Iterator[BigtableRow]:
        schema = t.schema
        try:
            yield from self._stream_rows(t, ranges, names, compiled, limit, reverse)
        except KeyError:
            if t.schema is schema:
                raise
            raise ServerBusy(
                f"the column families of table {t.name!r} changed during this read; retry it") from None

    def _stream_rows(self, t: FamilyTable, ranges: list[tuple[bytes, bytes]], names: list[str],
                     compiled, limit: int, reverse: bool) -> Iterator[BigtableRow]:
        if not names:
            return
        sent = 0
        decode_key = layout.decode_bigtable_row_key
        several = len(names) > 1
        for lo, hi in (reversed(ranges) if reverse else ranges):
            page: list[tuple[bytes, int]] = []
            part = None
            for row_key, blobs in t.scan_rows(names, lo, hi, reverse):
                if part is None:
                    part = t._route_read(row_key)
                t.check_usable()
                if several:
                    # Re-read the row's records under its lock: the families' scans are
                    # separate snapshots, and a row must never be seen half-written.
                    data, nbytes = self._read_locked(t, row_key, names)
                    cells = self._cells(t, data, now_micros(), True)
                else:
                    nbytes = sum(map(len, blobs.values()))
                    cells = self._cells(t, blobs, now_micros(), False)
                page.append((row_key, nbytes))
                if len(page) >= PAGE_ROWS:
                    self._count(t, part, page, reverse)
                    page, part = [], None
                if not cells:
                    continue
                key = decode_key(row_key)
                if compiled is not None:
                    cells = compiled(key, cells)
                    if not cells:
                        continue
                yield BigtableRow(key, tuple(cells))
                sent += 1
                if limit and sent >= limit:
                    if page and part is not None:
                        self._count(t, part, page, reverse)
                    return
            if page and part is not None:
                self._count(t, part, page, reverse)

    @staticmethod
    def _count(t: FamilyTable, part, page: list[tuple[bytes, int]], reverse: bool) -> None:
        """Count a page of a range read on the partitions it read (``Router.record_range``)."""
        first, last = page[0][0], page[-1][0]
        lo, hi = (last, first + b"\x00") if reverse else (first, last + b"\x00")
        t._ranges.record_range(part, len(page), sum(map(_second, page)), lo, hi, reverse,
                               page, _first, _second)

    # -- writes -----------------------------------------------------------------------------

    def _apply(self, t: FamilyTable, key: bytes, row_key: bytes, mutations: list, part) -> None:
        """Under the row lock: read the touched families, apply, GC, write one batch."""
        names = families_touched(mutations, t.family_order)
        data = t.read_columns(row_key, names)
        row = {n: (data[n][0] if n in data else {}) for n in names}
        old = sum(size for _, size in data.values())
        now = now_micros()
        apply_mutations(t.families, row, mutations, now)
        self._collect(t, row, now)
        check_row_size(key, row, 2 * old + size_added_bound(mutations))
        new = t.write_columns(row_key, row)
        t._record_write(part, row_key, new, old)

    def _collect(self, t: FamilyTable, row: dict[str, C.Columns], now: int) -> None:
        expired = None
        for name, columns in row.items():
            rule = t.gc_rules[name]
            if rule is not None and columns:
                expired = expired or _gc_expired()
                C.collect_garbage(columns, expired, rule, now)

    def _locked_write(self, key: bytes, mutations: list, decide=None):
        """Check, route, lock, recheck and apply: the frame of every row write."""
        t = self._table()
        key = check_row_key(key)
        schema = t.schema
        checked = check_mutations(t.families, mutations, t.name) if decide is None else mutations
        row_key = t.row_key(key)
        part = t._route_write(row_key)
        with t.lock_of(row_key):
            t.check_usable()
            if t.schema is not schema and decide is None:  # families changed: check again
                checked = check_mutations(t.families, mutations, t.name)
            if decide is not None:
                return decide(t, key, row_key, part)
            self._apply(t, key, row_key, checked, part)
        return None

    def mutate_row(self, key: bytes, mutations: list) -> None:
        """Apply ``mutations`` to row ``key`` atomically, across families: all or none.
        ``OTSObjectNotExist`` for an unknown family, ``OTSParameterInvalid`` naming a bad
        value, ``OTSServerBusy`` when the row's partition is throttled."""
        self._locked_write(key, mutations)

    def mutate_rows(self, entries: list) -> list[WidetableError | None]:
        """Apply each ``(key, mutations)`` entry as ``mutate_row`` would, in order; a status
        per entry (None: applied). One entry's failure does not stop the others. The
        applied entries are written in one engine batch (entries of one row apply in
        turn), under the rows' locks taken in stripe order (``bulk.py``). An entry that is
        no ``(key, mutations)`` pair, or more than 100,000 mutations in all, is
        ``OTSParameterInvalid`` for the whole call (nothing is written)."""
        if not isinstance(entries, (list, tuple)) or not entries:
            raise ParameterInvalid(f"mutate_rows needs at least one entry, got {entries!r:.80}")
        return mutate_many(self._table(), entries)

    def check_and_mutate_row(self, key: bytes, predicate: object = None, true_mutations=(),
                             false_mutations=()) -> bool:
        """Under the row lock: if ``predicate`` (a filter; None: the row has any cell)
        outputs a cell of row ``key``, apply ``true_mutations``, else ``false_mutations``.
        Returns whether it matched. Both lists are checked first."""
        t = self._table()
        key = check_row_key(key)
        compiled, wanted = _compiled(predicate)
        lists = []
        for muts in (true_mutations, false_mutations):
            lists.append(check_mutations(t.families, muts, t.name) if muts else [])

        def decide(t: FamilyTable, key: bytes, row_key: bytes, part) -> bool:
            names = self._names(t, wanted)
            data = t.read_columns(row_key, names)
            cells = self._cells(t, {n: c for n, (c, _) in data.items()}, now_micros(), True)
            matched = bool(compiled(key, cells) if compiled is not None else cells)
            chosen = lists[0] if matched else lists[1]
            if chosen:
                self._apply(t, key, row_key, check_mutations(t.families, chosen, t.name), part)
            return matched

        return self._locked_write(key, [], decide)  # type: ignore[return-value]

    def read_modify_write_row(self, key: bytes, rules: list) -> BigtableRow:
        """Append to or increment (int64, wrapping around) the newest cell of each rule's
        column, atomically; returns the changed cells. An increment of a cell that is not
        an 8-byte big-endian int64 is ``OTSParameterInvalid`` naming it (nothing written)."""
        t = self._table()
        key = check_row_key(key)
        checked = self._check_rules(t, rules)

        def decide(t: FamilyTable, key: bytes, row_key: bytes, part) -> BigtableRow:
            for rule in checked:  # families may have changed since the check
                family_of(t.families, rule.family, t.name)
            names = [n for n in t.family_order if n in {r.family for r in checked}]
            data = t.read_columns(row_key, names)
            row = {n: (data[n][0] if n in data else {}) for n in names}
            old = sum(size for _, size in data.values())
            now = now_micros()
            self._collect(t, row, now)
            changed: dict[tuple[str, bytes], None] = {}
            for rule in checked:
                columns = row[rule.family]
                q = bytes(rule.qualifier)
                versions = columns.get(q)
                ts0, value = versions[0] if versions else (0, None)
                if rule.append is not None:
                    new = (value or b"") + bytes(rule.append)
                else:
                    current = 0 if value is None else decode_int64(
                        value, f"cell {rule.family}:{q!r} of row {key[:32]!r}")
                    new = encode_int64(wrap_int64(current + rule.increment))  # type: ignore[operator]
                C.put_cell(columns, q, max(now, ts0), new)
                changed[(rule.family, q)] = None
            self._collect(t, row, now)
            check_row_size(key, row)
            t._record_write(part, row_key, t.write_columns(row_key, row), old)
            out = [Cell(f, q, *row[f][q][0]) for f, q in sorted(changed)]
            return BigtableRow(key, tuple(out))

        return self._locked_write(key, [], decide)  # type: ignore[return-value]

    @staticmethod
    def _check_rules(t: FamilyTable, rules: object) -> list[ReadModifyWriteRule]:
        if not isinstance(rules, (list, tuple)) or not rules:
            raise ParameterInvalid(f"read_modify_write_row needs at least one rule, got {rules!r:.80}")
        for rule in rules:
            if not isinstance(rule, ReadModifyWriteRule):
                raise ParameterInvalid(f"not a ReadModifyWriteRule: {rule!r:.80}")
            family = family_of(t.families, rule.family, t.name)
            if family.aggregate is not None:
                raise ParameterInvalid(
                    f"family {family.name!r} is an aggregate family: read_modify_write_row "
                    "cannot change it")
            check_qualifier(rule.qualifier)
            if (rule.append is None) == (rule.increment is None):
                raise ParameterInvalid(
                    f"rule for {rule.family}:{rule.qualifier!r} must set exactly one of "
                    "append and increment")
            if rule.append is not None and not isinstance(rule.append, (bytes, bytearray)):
                raise ParameterInvalid(f"append value must be bytes, got {rule.append!r:.60}")
            inc = rule.increment
            if inc is not None and (isinstance(inc, bool) or not isinstance(inc, int)
                                    or not INT64_MIN <= inc <= INT64_MAX):
                raise ParameterInvalid(f"increment must be an int64, got {inc!r:.60}")
        return list(rules)

    # -- table calls ------------------------------------------------------------------------

    def sample_row_keys(self) -> list[tuple[bytes, int]]:
        """``[(row key, offset), ...]`` from the table's real partitions (their bounds and
        sampled keys, estimated bytes before each); the last is ``(b"", total)``."""
        from ..partition import scan as partition_scan

        t = self._table()
        tp = t._ctx.partitions.partitions(t)
        out = []
        for key, offset in partition_scan.sample_row_keys(t, tp):
            out.append((bytes(key[0]) if key else b"", offset))  # type: ignore[arg-type]
        return out

    def drop_row_range(self, prefix: bytes | None = None, all_rows: bool = False) -> None:
        """Delete every row whose key starts with ``prefix`` (non-empty), or (``all_rows``)
        every row of the table: each family's records of them, in one batch."""
        t = self._table()
        if all_rows is not True and all_rows is not False:
            raise ParameterInvalid(f"all_rows must be a bool, got {all_rows!r}")
        if all_rows == (prefix is not None):
            raise ParameterInvalid("drop_row_range takes exactly one of prefix and all_rows=True")
        if all_rows:
            lo, hi = layout.table_range(t.table_id)
        else:
            if not isinstance(prefix, (bytes, bytearray)) or not prefix:
                raise ParameterInvalid(f"row key prefix must be non-empty bytes, got {prefix!r:.80}")
            lo, hi = layout.bigtable_prefix_range(t.table_id, bytes(prefix))
        t.delete_rows(lo, hi)


__all__ = ["BigtableTable", "RowRange", "RowSet", "now_micros"]
