"""Mutations of one row: checked against the table's families before anything is read,
then applied to the row's decoded families under the row lock (``BigtableTable``).

Aggregate families (``FamilySpec.aggregate``) take AddToCell and MergeToCell only; their
cells hold an 8-byte big-endian int64 (sum, min, max) or an HLL state (``hll.py``).
Sums wrap around int64, as increments do.
"""

from __future__ import annotations

import logging
import warnings

from ..errors import ObjectNotExist, ParameterInvalid
from ..table.schema import FamilySchema
from . import cells as C
from .types import (
    MAX_QUALIFIER,
    MAX_ROW,
    MUTATION_TYPES,
    SERVER_TIME,
    WARN_VALUE,
    AddToCell,
    DeleteFromColumn,
    DeleteFromFamily,
    DeleteFromRow,
    MergeToCell,
    SetCell,
    check_qualifier,
    check_timestamp,
    check_value,
)

log = logging.getLogger("widetable.bigtable")

MAX_MUTATIONS = 100_000  # per row, as Bigtable
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_MASK = 2**64 - 1


def wrap_int64(n: int) -> int:
    """``n`` wrapped around into int64 (two's complement)."""
    return ((n + 2**63) & _MASK) - 2**63


def encode_int64(n: int) -> bytes:
    return (n & _MASK).to_bytes(8, "big")


def decode_int64(raw: bytes, what: str) -> int:
    if len(raw) != 8:
        raise ParameterInvalid(
            f"{what} holds {len(raw)} bytes, not an 8-byte big-endian int64: {raw[:16]!r}")
    return int.from_bytes(raw, "big", signed=True)


def family_of(families: dict[str, FamilySchema], name: object, table: str) -> FamilySchema:
    """The family called ``name``; ``OTSObjectNotExist`` naming it if the table has none."""
    family = families.get(name) if isinstance(name, str) else None
    if family is None:
        raise ObjectNotExist(f"column family {name!r} does not exist in table {table!r}")
    return family


def check_mutations(families: dict[str, FamilySchema], mutations: object, table: str) -> list:
    """``mutations`` checked against ``families`` (ParameterInvalid / ObjectNotExist naming
    the bad value); nothing is read or written."""
    if not isinstance(mutations, (list, tuple)) or not mutations:
        raise ParameterInvalid(f"a row mutation needs at least one mutation, got {mutations!r:.80}")
    if len(mutations) > MAX_MUTATIONS:
        raise ParameterInvalid(f"{len(mutations)} mutations in one row, over {MAX_MUTATIONS}")
    total = 0
    for m in mutations:
        if type(m) is SetCell:  # the common case first, with the checks of the SetCell branch
            family = families.get(m.family) if type(m.family) is str else None
            if family is not None and family.aggregate is None and type(m.qualifier) is bytes \
                    and len(m.qualifier) <= MAX_QUALIFIER and type(m.timestamp) is int \
                    and (m.timestamp == SERVER_TIME or (m.timestamp >= 0 and not m.timestamp % 1000)) \
                    and type(m.value) is bytes and len(m.value) <= WARN_VALUE:
                total += len(m.value)
                continue
        if not isinstance(m, MUTATION_TYPES):
            raise ParameterInvalid(f"not a mutation: {m!r:.80}")
        if isinstance(m, DeleteFromRow):
            continue
        family = family_of(families, m.family, table)
        if isinstance(m, DeleteFromFamily):
            continue
        check_qualifier(m.qualifier)
        if isinstance(m, SetCell):
            if family.aggregate is not None:
                raise ParameterInvalid(
                    f"family {family.name!r} is an aggregate ({family.aggregate}) family: write "
                    "it with AddToCell or MergeToCell, not SetCell")
            check_timestamp(m.timestamp, "SetCell timestamp", allow_server_time=True)
            check_value(m.value)
            total += len(m.value)
            if len(m.value) > WARN_VALUE:
                warnings.warn(f"cell value of {len(m.value)} bytes in family {family.name!r}: "
                              "Bigtable recommends cells of at most 10 MB", stacklevel=3)
        elif isinstance(m, DeleteFromColumn):
            for bound, what in ((m.start, "start"), (m.end, "end")):
                if bound is not None:
                    check_timestamp(bound, f"DeleteFromColumn {what} timestamp")
            if m.start is not None and m.end is not None and m.end <= m.start:
                raise ParameterInvalid(
                    f"DeleteFromColumn time range [{m.start}, {m.end}) is empty or inverted")
        else:  # AddToCell, MergeToCell
            _check_aggregate_input(family, m)
    if total > MAX_ROW:
        raise ParameterInvalid(f"row mutation of {total} bytes of values, over {MAX_ROW}")
    return list(mutations)


def _check_aggregate_input(family: FamilySchema, m: AddToCell | MergeToCell) -> None:
    kind = type(m).__name__
    if family.aggregate is None:
        raise ParameterInvalid(
            f"{kind} into family {family.name!r}, which is not an aggregate family")
    check_timestamp(m.timestamp, f"{kind} timestamp", allow_server_time=True)
    value = m.input
    if isinstance(m, MergeToCell):
        if not isinstance(value, (bytes, bytearray)):
            raise ParameterInvalid(f"MergeToCell input must be bytes (a serialized state), got {value!r:.60}")
        if family.aggregate == "hll":
            from .hll import check_hll

            check_hll(bytes(value))
        else:
            decode_int64(bytes(value), f"MergeToCell input for {family.aggregate} family {family.name!r}")
        return
    if family.aggregate == "hll":
        if isinstance(value, bool) or not isinstance(value, (int, bytes, bytearray)) or (
                isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX):
            raise ParameterInvalid(f"AddToCell input for hll family {family.name!r} must be bytes "
                                   f"or an int64, got {value!r:.60}")
        return
    if isinstance(value, bool) or not isinstance(value, int) or not INT64_MIN <= value <= INT64_MAX:
        raise ParameterInvalid(
            f"AddToCell input for {family.aggregate} family {family.name!r} must be an int64, "
            f"got {value!r:.60}")


AGGREGATE_STATE_MAX = 16_388  # the largest aggregate state: a dense HLL (hll.py), 16 KiB + header


def size_added_bound(mutations: list) -> int:
    """At least what checked ``mutations`` can add to a row's ``cells.blob_size``."""
    n = 0
    for m in mutations:
        kind = type(m)
        if kind is SetCell:
            n += len(m.qualifier) + len(m.value) + 8
        elif kind is AddToCell or kind is MergeToCell:
            n += len(m.qualifier) + 8 + AGGREGATE_STATE_MAX
    return n


def plain_bound(families: dict[str, FamilySchema], mutations: object) -> int:
    """For mutations that are all SetCells into plain (not aggregate) families and that
    ``check_mutations`` would pass without a warning: what they can add to a row's
    ``cells.blob_size`` (``size_added_bound``). -1 for any other list (check it with
    ``check_mutations``). Checks only; nothing is read."""
    if type(mutations) is not list and type(mutations) is not tuple:
        return -1
    if not mutations or len(mutations) > MAX_MUTATIONS:
        return -1
    bound = values = 0
    for m in mutations:
        if type(m) is not SetCell:
            return -1
        family = families.get(m.family) if type(m.family) is str else None
        q, ts, v = m.qualifier, m.timestamp, m.value
        if family is None or family.aggregate is not None or type(q) is not bytes \
                or len(q) > MAX_QUALIFIER or type(ts) is not int \
                or not (ts == SERVER_TIME or (ts >= 0 and not ts % 1000)) \
                or type(v) is not bytes or len(v) > WARN_VALUE:
            return -1
        values += len(v)
        bound += len(q) + len(v) + 8
    return bound if values <= MAX_ROW else -1


def check_row_size(key: bytes, row: dict[str, C.Columns], bound: int = -1) -> None:
    """ParameterInvalid if ``row``'s families hold more than the row limit. ``bound``:
    at least their ``blob_size``, or -1 if unknown; nothing is summed when it is within
    the limit. A stored cell counts at most twice its encoded bytes in ``blob_size``, so
    twice the stored bytes of the families read plus ``size_added_bound`` of the
    mutations applied since is such a bound."""
    if 0 <= bound <= MAX_ROW:
        return
    size = sum(C.blob_size(c) for c in row.values())
    if size > MAX_ROW:
        raise ParameterInvalid(
            f"row {key[:32]!r} would hold {size} bytes in the families written, over the "
            f"row limit of {MAX_ROW}")


def families_touched(mutations: list, order: list[str]) -> list[str]:
    """The families a row's mutations change (every family for DeleteFromRow)."""
    if len(mutations) == 1:
        m = mutations[0]
        return list(order) if type(m) is DeleteFromRow else [m.family]
    if any(isinstance(m, DeleteFromRow) for m in mutations):
        return list(order)
    named = {m.family for m in mutations}
    return [n for n in order if n in named]


def _merge_state(family: FamilySchema, old: bytes | None, m: AddToCell | MergeToCell) -> bytes:
    from . import hll

    kind = family.aggregate
    if kind == "hll":
        state = old if old is not None else hll.hll_new()
        if isinstance(m, MergeToCell):
            return hll.hll_merge(state, bytes(m.input))
        return hll.hll_add(state, m.input if isinstance(m.input, int) else bytes(m.input))
    value = m.input if isinstance(m, AddToCell) else decode_int64(bytes(m.input), "MergeToCell input")
    if old is None:
        return encode_int64(value)  # type: ignore[arg-type]
    current = decode_int64(old, f"aggregate cell of family {family.name!r}")
    if kind == "sum":
        return encode_int64(wrap_int64(current + value))  # type: ignore[operator]
    if kind == "min":
        return encode_int64(min(current, value))  # type: ignore[type-var]
    return encode_int64(max(current, value))  # type: ignore[type-var]


def apply_mutations(families: dict[str, FamilySchema], row: dict[str, C.Columns],
                    mutations: list, now_micros: int) -> None:
    """Apply checked ``mutations`` in order to ``row`` (``{family: columns}`` holding every
    family they touch, possibly empty), in place. SERVER_TIME timestamps become
    ``now_micros`` (ms granularity)."""
    for m in mutations:
        if isinstance(m, SetCell):
            ts = now_micros if m.timestamp == SERVER_TIME else m.timestamp
            C.put_cell(row[m.family], bytes(m.qualifier), ts, bytes(m.value))
        elif isinstance(m, DeleteFromColumn):
            C.delete_versions(row[m.family], bytes(m.qualifier), m.start, m.end)
        elif isinstance(m, DeleteFromFamily):
            row[m.family].clear()
        elif isinstance(m, DeleteFromRow):
            for columns in row.values():
                columns.clear()
        else:
            family = families[m.family]
            ts = now_micros if m.timestamp == SERVER_TIME else m.timestamp
            columns = row[m.family]
            q = bytes(m.qualifier)
            old = next((v for t, v in columns.get(q, ()) if t == ts), None)
            C.put_cell(columns, q, ts, _merge_state(family, old, m))
