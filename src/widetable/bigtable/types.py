"""Value types of the Bigtable model (issue 23).

All are frozen, slotted dataclasses. They carry no behaviour beyond light validation
helpers (``check_*``), which raise :class:`~widetable.errors.ParameterInvalid` naming
the offending value. Timestamps are in MICROseconds, Bigtable's unit; writes enforce
Bigtable's millisecond granularity (``ts % 1000 == 0``).

Limits (Bigtable's): row key 1..4096 bytes, qualifier <= 16 KiB, cell value <= 100 MiB
(a warning over 10 MiB), row <= 256 MiB, <= 100 families per table, family names match
``[_a-zA-Z0-9][-_.a-zA-Z0-9]*`` and are at most 64 characters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Union

from widetable.errors import ParameterInvalid

MAX_ROW_KEY = 4096
MAX_QUALIFIER = 16 * 1024
MAX_VALUE = 100 * 1024 * 1024
WARN_VALUE = 10 * 1024 * 1024
MAX_ROW = 256 * 1024 * 1024
MAX_FAMILIES = 100
MAX_FAMILY_NAME = 64
SERVER_TIME = -1  # SetCell's timestamp meaning "the server's time"

COMPRESSIONS = ("none", "lz4", "zstd")
AGGREGATES = ("sum", "min", "max", "hll")
_FAMILY_NAME = re.compile(r"[_a-zA-Z0-9][-_.a-zA-Z0-9]*")


@dataclass(frozen=True, slots=True)
class Cell:
    """One version of one column. ``labels`` are added by ApplyLabel filters."""

    family: str
    qualifier: bytes
    timestamp: int
    value: bytes
    labels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class BigtableRow:
    """A row: cells in ROW ORDER -- family name ascending (str order), then qualifier
    bytes ascending, then timestamp DESCENDING (newest first)."""

    key: bytes
    cells: tuple[Cell, ...]


@dataclass(frozen=True, slots=True)
class RowRange:
    """A range of row keys; ``None`` is unbounded on that side."""

    start: bytes | None = None
    end: bytes | None = None
    start_inclusive: bool = True
    end_inclusive: bool = False


@dataclass(frozen=True, slots=True)
class RowSet:
    """Row keys and ranges; both empty means the whole table."""

    keys: tuple[bytes, ...] = ()
    ranges: tuple[RowRange, ...] = ()


# ---- mutations -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SetCell:
    """Write one cell; ``timestamp`` -1 = the server's time (ms granularity)."""

    family: str
    qualifier: bytes
    timestamp: int
    value: bytes


def _slot_builder(cls):
    """A function making ``cls`` (a frozen, slotted dataclass) from its fields in order,
    as its ``__init__`` does but through the slots' own setters (the ``__init__`` of a
    frozen dataclass calls ``object.__setattr__`` per field: 0.6 against 0.35 µs for a
    SetCell). For decoders that make one per entry of a large request."""
    new = cls.__new__
    setters = tuple(getattr(cls, name).__set__ for name in cls.__slots__)
    if len(setters) != 4:
        raise TypeError(f"{cls.__name__} has {len(setters)} fields, not 4")
    s0, s1, s2, s3 = setters

    def build(a, b, c, d):
        obj = new(cls)
        s0(obj, a)
        s1(obj, b)
        s2(obj, c)
        s3(obj, d)
        return obj

    return build


make_set_cell = _slot_builder(SetCell)  # make_set_cell(family, qualifier, timestamp, value)


@dataclass(frozen=True, slots=True)
class DeleteFromColumn:
    """Delete the versions of one column in ``[start, end)`` micros (None = unbounded)."""

    family: str
    qualifier: bytes
    start: int | None = None
    end: int | None = None


@dataclass(frozen=True, slots=True)
class DeleteFromFamily:
    """Delete every cell of one family in the row."""

    family: str


@dataclass(frozen=True, slots=True)
class DeleteFromRow:
    """Delete the whole row."""


@dataclass(frozen=True, slots=True)
class AddToCell:
    """Aggregate ``input`` into a cell of an aggregate family: an int for sum/min/max,
    the item counted (bytes or int) for hll."""

    family: str
    qualifier: bytes
    timestamp: int
    input: int | bytes


@dataclass(frozen=True, slots=True)
class MergeToCell:
    """Merge a serialized aggregate state (8-byte big-endian int64, or an HLL state)."""

    family: str
    qualifier: bytes
    timestamp: int
    input: bytes


Mutation = Union[SetCell, DeleteFromColumn, DeleteFromFamily, DeleteFromRow, AddToCell, MergeToCell]
MUTATION_TYPES = (SetCell, DeleteFromColumn, DeleteFromFamily, DeleteFromRow, AddToCell, MergeToCell)


@dataclass(frozen=True, slots=True)
class ReadModifyWriteRule:
    """Exactly one of ``append`` (bytes appended) or ``increment`` (int64, wraps around)."""

    family: str
    qualifier: bytes
    append: bytes | None = None
    increment: int | None = None


# ---- schema ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FamilySpec:
    """A column family: GC rule (a ``widetable.bigtable.gc`` rule, None = keep all),
    storage options and an optional aggregate type."""

    name: str
    gc: Any = None
    compression: str = "none"
    block_cache: bool = True
    bloom_filter: bool = True
    aggregate: str | None = None


@dataclass(frozen=True, slots=True)
class TableInfo:
    """What ``get_table`` answers."""

    name: str
    families: dict[str, FamilySpec] = field(default_factory=dict)
    split_keys: tuple[bytes, ...] = ()
    created: float = 0.0


# ---- validation helpers ----------------------------------------------------------------


def check_row_key(key: Any) -> bytes:
    """The row key as bytes; ParameterInvalid if not bytes or not 1..4096 bytes long."""
    if not isinstance(key, (bytes, bytearray, memoryview)):
        raise ParameterInvalid(f"row key must be bytes, got {type(key).__name__} {key!r:.80}")
    key = bytes(key)
    if not key:
        raise ParameterInvalid("row key must not be empty")
    if len(key) > MAX_ROW_KEY:
        raise ParameterInvalid(
            f"row key {key[:32]!r}... is {len(key)} bytes, over the limit of {MAX_ROW_KEY}")
    return key


def check_family_name(name: Any) -> str:
    """ParameterInvalid unless ``name`` matches ``[_a-zA-Z0-9][-_.a-zA-Z0-9]*``, <= 64 chars."""
    if not isinstance(name, str) or not _FAMILY_NAME.fullmatch(name):
        raise ParameterInvalid(
            f"family name {name!r} is invalid: it must match [_a-zA-Z0-9][-_.a-zA-Z0-9]*")
    if len(name) > MAX_FAMILY_NAME:
        raise ParameterInvalid(
            f"family name {name[:16]!r}... is {len(name)} characters, over {MAX_FAMILY_NAME}")
    return name


def check_qualifier(qualifier: Any) -> bytes:
    """The qualifier as bytes (may be empty); ParameterInvalid over 16 KiB or not bytes."""
    if not isinstance(qualifier, (bytes, bytearray, memoryview)):
        raise ParameterInvalid(
            f"column qualifier must be bytes, got {type(qualifier).__name__} {qualifier!r:.80}")
    qualifier = bytes(qualifier)
    if len(qualifier) > MAX_QUALIFIER:
        raise ParameterInvalid(
            f"column qualifier {qualifier[:32]!r}... is {len(qualifier)} bytes, "
            f"over the limit of {MAX_QUALIFIER}")
    return qualifier


def check_timestamp(ts: Any, what: str = "timestamp", allow_server_time: bool = False) -> int:
    """A microsecond timestamp with millisecond granularity (ts % 1000 == 0), >= 0
    (or -1 = server time when allowed)."""
    if isinstance(ts, bool) or not isinstance(ts, int):
        raise ParameterInvalid(f"{what} must be an int of microseconds, got {ts!r}")
    if allow_server_time and ts == SERVER_TIME:
        return ts
    if ts < 0:
        raise ParameterInvalid(f"{what} {ts} is negative")
    if ts % 1000:
        raise ParameterInvalid(
            f"{what} {ts} is not a multiple of 1000 micros: Bigtable's timestamps have "
            "millisecond granularity")
    return ts


def check_value(value: Any) -> bytes:
    """The cell value as bytes; ParameterInvalid over 100 MiB (callers warn over 10 MiB)."""
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise ParameterInvalid(f"cell value must be bytes, got {type(value).__name__}")
    value = bytes(value)
    if len(value) > MAX_VALUE:
        raise ParameterInvalid(
            f"cell value of {len(value)} bytes is over the limit of {MAX_VALUE} bytes")
    return value


def check_family_spec(spec: Any) -> FamilySpec:
    """A FamilySpec with a valid name, compression and aggregate (the GC rule is checked
    by ``widetable.bigtable.gc.check_gc``)."""
    if not isinstance(spec, FamilySpec):
        raise ParameterInvalid(f"expected a FamilySpec, got {type(spec).__name__} {spec!r:.80}")
    check_family_name(spec.name)
    if spec.compression not in COMPRESSIONS:
        raise ParameterInvalid(
            f"family {spec.name!r}: compression {spec.compression!r} is not one of {COMPRESSIONS}")
    if not isinstance(spec.block_cache, bool) or not isinstance(spec.bloom_filter, bool):
        raise ParameterInvalid(f"family {spec.name!r}: block_cache and bloom_filter must be bools")
    if spec.aggregate is not None and spec.aggregate not in AGGREGATES:
        raise ParameterInvalid(
            f"family {spec.name!r}: aggregate {spec.aggregate!r} is not one of {AGGREGATES}")
    return spec


def check_row_range(r: Any) -> RowRange:
    """A RowRange whose bounds are bytes or None."""
    if not isinstance(r, RowRange):
        raise ParameterInvalid(f"expected a RowRange, got {type(r).__name__} {r!r:.80}")
    for side in (r.start, r.end):
        if side is not None and not isinstance(side, (bytes, bytearray)):
            raise ParameterInvalid(f"row range bound must be bytes or None, got {side!r:.80}")
    return r
