"""``mutate_rows``: many rows' mutations in one pass (``BigtableTable.mutate_rows``).

The pass, over every entry ``(row key, mutations)`` of a call:

1. check: the key and the mutations against the table's families; nothing is read
   yet, and an entry that fails gets its error alone. The common entry, SetCells into
   plain (not aggregate) families, is checked without building anything
   (``plain_bound``); any other goes through ``check_mutations``;
2. route: each entry through its row's partition (counted; throttled: that entry's
   ``OTSServerBusy``);
3. lock: the stripes of every row, in stripe order, once (``RowLocks.acquire``); then
   the table is checked again under them (dropped or closed: every entry fails; its
   families changed: every entry is checked again);
4. read: every touched family record of every row, one ``multi_get`` per column family;
5. merge: the entries of each row in their order, each all or nothing. An entry that
   cannot fail (plain SetCells, the row surely within its size limit) changes the
   row's decoded cells in place. Any other is applied in place too while the row is
   still as stored (a failure decodes it again), and later to a copy of the families
   it touches; either way GC'd and size-checked, and kept only if it passes;
6. write: every changed record in ONE engine batch, then the partitions' counters.

Checks, GC rules and limits are ``mutate_row``'s, and so are the results: the entries
of one row apply in order, each as a ``mutate_row`` of its own would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ParameterInvalid, WidetableError
from ..keys import layout
from . import cells as C
from .cells import now_micros
from .mutate import (
    apply_mutations,
    check_mutations,
    check_row_size,
    families_touched,
    plain_bound,
    size_added_bound,
)
from .types import MAX_QUALIFIER, MAX_ROW, MAX_ROW_KEY, SERVER_TIME, WARN_VALUE, SetCell, check_row_key

if TYPE_CHECKING:
    from .store import FamilyTable

MAX_MUTATE_ROWS = 100_000  # mutations in one mutate_rows call, as Bigtable

# An entry once checked: (index, key, mutations, families touched, size bound, plain).
# ``plain``: SetCells into plain families only (applying them cannot fail).


def _check(families, items, table: str, out: list) -> list[tuple]:
    """The entries of ``items`` (``(index, entry)`` pairs) that pass their checks; the
    error of one that fails goes in ``out`` at its index. ParameterInvalid for the whole
    call if an entry is no pair, or over ``MAX_MUTATE_ROWS`` mutations in all (nothing
    is routed or written before this returns)."""
    ok = []
    append = ok.append
    total = 0
    for i, entry in items:
        if type(entry) is not tuple or len(entry) != 2:
            if not isinstance(entry, (list, tuple)) or len(entry) != 2:
                raise ParameterInvalid(f"an entry is (row key, mutations), got {entry!r:.80}")
        key, mutations = entry
        if isinstance(mutations, (list, tuple)):
            total += len(mutations)
        if type(key) is bytes and 0 < len(key) <= MAX_ROW_KEY and type(mutations) is list \
                and len(mutations) == 1:  # the common entry, one plain SetCell, in line
            m = mutations[0]
            if type(m) is SetCell:
                family = families.get(m.family) if type(m.family) is str else None
                q, ts, v = m.qualifier, m.timestamp, m.value
                if family is not None and family.aggregate is None and type(q) is bytes \
                        and len(q) <= MAX_QUALIFIER and type(ts) is int \
                        and (ts == SERVER_TIME or (ts >= 0 and not ts % 1000)) \
                        and type(v) is bytes and len(v) <= WARN_VALUE:
                    append((i, key, mutations, (m.family,), len(q) + len(v) + 8, True))
                    continue
        try:
            if type(key) is not bytes or not key or len(key) > MAX_ROW_KEY:
                key = check_row_key(key)
            bound = plain_bound(families, mutations)
            if bound >= 0:
                names = (mutations[0].family,) if len(mutations) == 1 else \
                    tuple(dict.fromkeys(m.family for m in mutations))
                append((i, key, mutations, names, bound, True))
            else:
                checked = check_mutations(families, mutations, table)
                append((i, key, checked, None, size_added_bound(checked), False))
        except WidetableError as exc:
            out[i] = exc
    if total > MAX_MUTATE_ROWS:
        raise ParameterInvalid(f"{total} mutations in one mutate_rows call, over {MAX_MUTATE_ROWS}")
    return ok


def mutate_many(t: FamilyTable, entries) -> list[WidetableError | None]:
    """The statuses of ``entries`` (``(key, mutations)`` pairs), in order: None where
    applied, else the error that stopped that entry (it changed nothing). See the
    module doc."""
    out: list[WidetableError | None] = [None] * len(entries)
    ok = _check(t.families, enumerate(entries), t.name, out)
    # row key -> [partition, entry, entry, ...] (a row's entries in their order)
    rows: dict[bytes, list] = {}
    route = t._route_write
    for c, row_key in zip(ok, layout.bigtable_row_keys(t.table_id, [c[1] for c in ok])):
        try:
            part = route(row_key)
        except WidetableError as exc:
            out[c[0]] = exc
            continue
        row = rows.get(row_key)
        if row is None:
            rows[row_key] = [part, c]
        else:
            row.append(c)
    if not rows:
        return out
    schema = t.schema
    locks = t._ctx.row_locks
    held = locks.acquire(rows)
    try:
        t.check_usable()
        if t.schema is not schema:  # the families changed while we waited: check again
            _recheck(t, rows, entries, out)
        sizes = _apply(t, rows, out)
    except WidetableError as exc:  # the table went, or the engine failed: none applied
        for row in rows.values():
            for c in row[1:]:
                if out[c[0]] is None:
                    out[c[0]] = exc
        return out
    finally:
        locks.release(held)
    record = t._record_write
    for part, row_key, new_size, old in sizes:
        record(part, row_key, new_size, old)
    return out


def _recheck(t: FamilyTable, rows: dict[bytes, list], entries, out: list) -> None:
    """Every entry checked again against the table's current families (one that no
    longer passes gets its error in ``out`` and leaves its row)."""
    for row in rows.values():
        row[1:] = _check(t.families, [(c[0], entries[c[0]]) for c in row[1:]], t.name, out)


def _apply(t: FamilyTable, rows: dict[bytes, list], out: list) -> list:
    """Read, merge and write every row (under their locks); ``[(partition, row key,
    new bytes, old bytes)]`` of the rows written, for the partitions' counters."""
    order, families, stores = t.family_order, t.families, t.stores
    row_keys, names = [], []  # the records to read: (row key, family), in row order
    spans = []  # each row's touched families, in row order
    for row_key, row in rows.items():
        if len(row) == 2 and row[1][3] is not None:
            touched = row[1][3]
        else:
            touched = tuple(dict.fromkeys(
                n for c in row[1:] for n in (c[3] if c[3] is not None else
                                             families_touched(c[2], order))))
        spans.append(touched)
        for n in touched:
            row_keys.append(row_key)
            names.append(n)
    keys = layout.family_keys_of(row_keys, [families[n].family_id for n in names])
    blobs = _multi_get(stores, keys, names)
    decode, encode = C.decode_columns, C.encode_columns
    rules = t.gc_rules
    now = now_micros()
    batch = t._engine.batch()
    sizes = []
    at = 0  # where the row's records start in keys / names / blobs
    for (row_key, row), touched in zip(rows.items(), spans):
        if len(touched) == 1 and len(row) == 2:  # one entry, one family: the common row
            entry = row[1]
            blob = blobs[at]
            old = 0 if blob is None else len(blob)
            if entry[5] and 2 * old + entry[4] <= MAX_ROW:  # plain, within the limit: cannot fail
                name = touched[0]
                columns = decode(blob)
                for m in entry[2]:  # all of them into this family
                    _put(columns, m, now)
                if rules[name] is not None:
                    _collect(rules, {name: columns}, touched, now)
                blob = encode(columns)
                if blob is None:  # GC left nothing
                    batch.delete(keys[at], stores[name].handle)
                    sizes.append((row[0], row_key, 0, old))
                else:
                    batch.put(keys[at], blob, stores[name].handle)
                    sizes.append((row[0], row_key, len(blob), old))
                at += 1
                continue
        span = len(touched)
        stored = blobs[at:at + span]
        state = {n: decode(b) for n, b in zip(touched, stored)}
        old = sum(len(b) for b in stored if b is not None)
        if _merge(t, row, state, stored, old, out, now):
            new_size = 0
            for n, key in zip(touched, keys[at:at + span]):
                blob = encode(state[n])
                if blob is None:
                    batch.delete(key, stores[n].handle)
                else:
                    batch.put(key, blob, stores[n].handle)
                    new_size += len(blob)
            sizes.append((row[0], row_key, new_size, old))
        at += span
    t._engine.write(batch)
    return sizes


def _multi_get(stores: dict, keys: list[bytes], names: list[str]) -> list[bytes | None]:
    """The stored value of each of ``keys`` (family ``names``' records): one multi_get
    per column family."""
    first = stores[names[0]]
    if len(set(map(id, stores.values()))) == 1 or all(stores[n] is first for n in names):
        return first.multi_get(keys)  # one column family (most tables: one storage profile)
    groups: dict[int, tuple[object, list[int]]] = {}
    for j, n in enumerate(names):
        store = stores[n]
        groups.setdefault(id(store), (store, []))[1].append(j)
    out: list[bytes | None] = [None] * len(keys)
    for store, where in groups.values():
        for j, blob in zip(where, store.multi_get([keys[j] for j in where])):  # type: ignore[attr-defined]
            out[j] = blob
    return out


def _merge(t: FamilyTable, row: list, state: dict[str, C.Columns], stored: list,
           old: int, out: list, now: int) -> bool:
    """Apply ``row``'s entries in order to ``state`` (the row's touched families, as
    stored: blobs ``stored``, ``old`` bytes), each all or nothing; True if one applied."""
    rules = t.gc_rules
    added = 0  # at least what the applied entries added to the families' blob_size
    changed = False  # state is no longer what is stored
    for i, key, mutations, names, bound, plain in row[1:]:
        if plain and 2 * old + added + bound <= MAX_ROW:
            _set_cells(state, mutations, now)  # cannot fail: in place
            for n in names:
                if rules[n] is not None:
                    _collect(rules, state, names, now)
                    break
            added += bound
            changed = True
            continue
        if names is None:
            names = families_touched(mutations, t.family_order)
        new = state if not changed else \
            {n: {q: list(v) for q, v in state[n].items()} for n in names}
        try:
            apply_mutations(t.families, new, mutations, now)
            _collect(rules, new, names, now)
            check_row_size(key, new if new is state else {**state, **new},
                           2 * old + added + bound)
        except WidetableError as exc:
            out[i] = exc
            if new is state:  # changed in place: back to what is stored
                state.update((n, C.decode_columns(b)) for n, b in zip(state, stored))
            continue
        if new is not state:
            state.update(new)
        added += bound
        changed = True
    return changed


def _set_cells(state: dict[str, C.Columns], mutations, now: int) -> None:
    """Plain SetCells (checked by ``plain_bound``) applied to ``state`` in place."""
    for m in mutations:
        _put(state[m.family], m, now)


def _put(columns: C.Columns, m, now: int) -> None:
    """One plain SetCell applied to its family's ``columns`` in place."""
    ts = m.timestamp
    if ts == SERVER_TIME:
        ts = now
    versions = columns.get(m.qualifier)
    if versions is None:
        columns[m.qualifier] = [(ts, m.value)]
    elif versions[0][0] == ts:
        versions[0] = (ts, m.value)
    else:
        C.put_cell(columns, m.qualifier, ts, m.value)


def _collect(rules: dict, state: dict[str, C.Columns], names, now: int) -> None:
    """GC of the families ``names`` of ``state`` that have a rule."""
    for n in names:
        rule = rules[n]
        if rule is not None and state[n]:
            from .gc import gc_expired

            C.collect_garbage(state[n], gc_expired, rule, now)
