"""Sorts, their total order, and the search-after token.

Every sort ends with the primary key (ascending) unless it already holds a
PrimaryKeySort, so every order is total and a page boundary is exact. A
document's *sort key* is one ``(rank, value)`` per sorter: ``rank`` puts
missing values first or last whatever the direction; ``value`` is compared
in the sorter's direction.

Token (opaque bytes, valid when base64-encoded)::

    token := msgpack([1, signature, [key...], pk])

``signature`` is a digest of the sort, so a token is refused by a query
sorted differently.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cmp_to_key, lru_cache

import msgpack

from ..errors import ParameterInvalid, describe
from . import geo
from .documents import as_list, as_points, pack
from .schema import GEO_POINT, IndexMeta

ASC, DESC = "ASC", "DESC"
MODES = ("min", "max", "avg")
TOKEN_VERSION = 1  # DO NOT CHANGE: embedded in tokens handed out


class Sorter:
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class PrimaryKeySort(Sorter):
    sort_order: str = ASC


@dataclass(frozen=True, slots=True)
class ScoreSort(Sorter):
    sort_order: str = DESC


@dataclass(frozen=True, slots=True)
class FieldSort(Sorter):
    """``missing``: "last" or "first"; ``missing_value``: a value standing in for none."""

    field_name: str
    sort_order: str = ASC
    sort_mode: str | None = None  # arrays: min (default ASC), max (default DESC) or avg
    missing: str = "last"
    missing_value: object = None


@dataclass(frozen=True, slots=True)
class GeoDistanceSort(Sorter):
    field_name: str
    points: tuple
    sort_order: str = ASC
    sort_mode: str = "min"


def check_sort(meta: IndexMeta, sort: object) -> list[Sorter]:
    """The sorters of a search (index sort when ``sort`` is None), PK tie-break appended."""
    if sort is None:
        sorters: list[Sorter] = [FieldSort(f, o) for f, o in meta.index_sort]
    elif isinstance(sort, Sorter):
        sorters = [sort]
    elif isinstance(sort, (list, tuple)):
        sorters = list(sort)
    else:
        raise ParameterInvalid(f"sort is a sorter or a list of them, got {describe(sort)}")
    for s in sorters:
        if not isinstance(s, Sorter):
            raise ParameterInvalid(f"not a sorter: {describe(s)}")
        if s.sort_order not in (ASC, DESC):  # type: ignore[attr-defined]
            raise ParameterInvalid(f"sort_order must be ASC or DESC, got {describe(s.sort_order)}")  # type: ignore[attr-defined]
        if isinstance(s, FieldSort):
            f = meta.field(s.field_name)
            if not f.enable_sort_and_agg or "." in s.field_name:
                raise ParameterInvalid(f"field {s.field_name!r} cannot sort: enable_sort_and_agg is off")
            if f.type == GEO_POINT:
                raise ParameterInvalid(f"field {s.field_name!r} is GEO_POINT: sort with GeoDistanceSort")
            if s.sort_mode is not None and s.sort_mode not in MODES:
                raise ParameterInvalid(f"sort_mode must be one of {MODES}, got {describe(s.sort_mode)}")
            if s.sort_mode == "avg" and f.type not in ("LONG", "DOUBLE", "DATE"):
                raise ParameterInvalid(f"sort_mode avg needs a number field, {s.field_name!r} is {f.type}")
            if s.missing not in ("first", "last"):
                raise ParameterInvalid(f"missing must be 'first' or 'last', got {describe(s.missing)}")
        if isinstance(s, GeoDistanceSort):
            if meta.field(s.field_name).type != GEO_POINT:
                raise ParameterInvalid(f"GeoDistanceSort needs a GEO_POINT field, got {s.field_name!r}")
            if not s.points:
                raise ParameterInvalid("GeoDistanceSort needs at least one point")
            if s.sort_mode not in MODES:
                raise ParameterInvalid(f"sort_mode must be one of {MODES}, got {describe(s.sort_mode)}")
    if not any(isinstance(s, PrimaryKeySort) for s in sorters):
        sorters.append(PrimaryKeySort(ASC))
    return sorters


def _mode_value(values: list, mode: str) -> object:
    if mode == "min":
        return min(values)
    if mode == "max":
        return max(values)
    return sum(values) / len(values)


def sort_keys(sorters: list[Sorter]) -> SortKeys:
    """``SortKeys(sorters)``, made once per list of sorters without missing values (a search's
    fixed cost: its signature is a digest)."""
    if all(getattr(s, "missing_value", None) is None for s in sorters):
        try:
            return _sort_keys(tuple(sorters))
        except TypeError:  # an unhashable value inside a sorter (GeoDistanceSort's points)
            pass
    return SortKeys(sorters)


class SortKeys:
    """Sort keys of hits under one list of sorters."""

    def __init__(self, sorters: list[Sorter]) -> None:
        self.sorters = sorters
        self.desc = [s.sort_order == DESC for s in sorters]  # type: ignore[attr-defined]
        self.missing_first = [isinstance(s, FieldSort) and s.missing == "first" for s in sorters]
        self._geo = {}
        for i, s in enumerate(sorters):
            if isinstance(s, GeoDistanceSort):
                self._geo[i] = [geo.point(p, "GeoDistanceSort point") for p in s.points]
        self.cmp_key = cmp_to_key(self.compare)
        sig = repr([(type(s).__name__, getattr(s, "field_name", None), s.sort_order,  # type: ignore[attr-defined]
                     getattr(s, "sort_mode", None), getattr(s, "missing", None))
                    for s in sorters])
        self.signature = hashlib.blake2b(sig.encode(), digest_size=8).digest()

    def key(self, score: float, pk: tuple, values: dict) -> list:
        out = []
        for i, s in enumerate(self.sorters):
            if isinstance(s, PrimaryKeySort):
                out.append([1, list(pk)])
            elif isinstance(s, ScoreSort):
                out.append([1, score])
            elif isinstance(s, FieldSort):
                vs = as_list(values.get(s.field_name))
                if not vs and s.missing_value is not None:
                    vs = [s.missing_value]
                if not vs:
                    out.append([0, None])
                else:
                    mode = s.sort_mode or ("max" if s.sort_order == DESC else "min")
                    out.append([1, _mode_value(vs, mode)])
            else:
                pts = as_points(values.get(s.field_name))  # type: ignore[attr-defined]
                if not pts:
                    out.append([0, None])
                else:
                    ds = [geo.haversine(a, b, la, lo) for la, lo in pts for a, b in self._geo[i]]
                    out.append([1, _mode_value(ds, s.sort_mode)])  # type: ignore[attr-defined]
        return out

    def compare(self, a: list, b: list) -> int:
        for i, (x, y) in enumerate(zip(a, b)):
            if x[0] != y[0]:  # one is missing
                first = self.missing_first[i]
                return (-1 if x[0] == 0 else 1) if first else (1 if x[0] == 0 else -1)
            if x[0] == 0:
                continue
            u, v = x[1], y[1]
            if isinstance(u, list):
                u, v = tuple(u), tuple(v)
            if u == v:
                continue
            r = -1 if u < v else 1
            return -r if self.desc[i] else r
        return 0

    def sort(self, decorated: list) -> None:
        """Sort ``[(key, item)]`` in place by key: with tuple keys when every descending
        value is a number (much cheaper than ``compare``), else with ``compare``."""
        try:
            decorated.sort(key=lambda d: self._tuple(d[0]))
        except TypeError:  # a descending string or key: compare them
            decorated.sort(key=lambda d: self.cmp_key(d[0]))

    def _tuple(self, key: list) -> tuple:
        out: list = []
        for i, (rank, v) in enumerate(key):
            if rank == 0:  # missing: first or last whatever the direction
                out += (0 if self.missing_first[i] else 2, 0)
                continue
            if isinstance(v, list):
                if self.desc[i]:
                    raise TypeError("a descending key")
                v = tuple(v)
            elif self.desc[i]:
                if isinstance(v, str):
                    raise TypeError("a descending string")
                v = -v
            out += (1, v)
        return tuple(out)

    # -- tokens ---------------------------------------------------------------------------

    def encode_token(self, key: list) -> bytes:
        return pack([TOKEN_VERSION, self.signature, key])

    def decode_token(self, token: object) -> list:
        if not isinstance(token, (bytes, bytearray)) or not token:
            raise ParameterInvalid(f"next_token must be bytes, got {describe(token)}")
        try:
            version, sig, key = msgpack.unpackb(bytes(token), raw=False, use_list=True)
        except Exception:  # noqa: BLE001 - any malformed token
            raise ParameterInvalid("next_token is invalid") from None
        if version != TOKEN_VERSION or not isinstance(key, list) or len(key) != len(self.sorters):
            raise ParameterInvalid("next_token is invalid")
        if sig != self.signature:
            raise ParameterInvalid("next_token was made for a different sort")
        return key


@lru_cache(maxsize=256)
def _sort_keys(sorters: tuple) -> SortKeys:
    return SortKeys(list(sorters))
