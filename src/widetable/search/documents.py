"""Base rows -> search documents: value conversion, rejection, field layout, routing.

A row becomes one *row document* (kind ``row``) plus, per NESTED field, one
*child document* per object (kind ``n<i>``). Every document of a row carries
the row's id in ``_owner``, so replacing or deleting a row is one
delete-by-term on a text field (tantivy's delete by term does nothing on u64
fields). ``_src`` of a row document holds ``msgpack([pk, values])``: the
converted values of every field the row has, which sorts, aggregations and
RETURN_ALL_FROM_INDEX read; a child's ``_src`` is its owner id.

Internal field names (``FieldLayout``): field ``i`` of the index is ``f<i>``;
a GEO_POINT also has ``f<i>_lat``/``f<i>_lon``... and its geohash cells in
``f<i>``; sub-field ``j`` of a NESTED field ``i`` is ``f<i>_<j>``.
"""

from __future__ import annotations

import json
import math
import struct
import threading
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone

import msgpack
import msgspec

from ..errors import ParameterInvalid, describe
from ..keys import codec
from . import analyzers, geo
from .schema import (
    BOOLEAN, DATE, DOUBLE, FUZZY, GEO_POINT, KEYWORD, LONG, NESTED, TEXT, FieldSchema, IndexMeta,
)

_KIND = {KEYWORD: "raw", LONG: "int", DATE: "int", DOUBLE: "float", BOOLEAN: "bool",
         GEO_POINT: "raw", TEXT: "tok"}


class Rejected(Exception):
    """A base row whose value does not fit its field."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        super().__init__(f"field {field!r}: {reason}: {describe(value)}")
        self.field = field
        self.value = value


@dataclass(frozen=True, slots=True)
class Slot:
    """Where one (sub-)field lives in tantivy."""

    field: FieldSchema
    name: str  # internal name
    kind: str  # tantivy adapter kind
    nested_kind: str | None = None  # the child documents' kind, for a NESTED sub-field
    point: tuple[str, str] | None = None  # layout 3, a single GEO_POINT: its lat/lon fast fields


PK_LEVELS = 8  # layout 2: the order key in 8 integer levels of 8 bytes (64 bytes)
ROW_ID = "_rid"  # layout 3 with a single GEO_POINT: a row document's number in its shard


class FieldLayout:
    """Internal names of an index's fields; ``slots`` by field path (``"a"`` or ``"n.s"``).

    Layout 2 (``IndexMeta.layout``) makes a top-level KEYWORD with enable_sort_and_agg a
    fast field (``rawfast``: tantivy sorts and aggregates it) and orders row documents by
    ``pk_levels`` integer fields instead of ``_pk``. Layout 3 puts the order field ``_o``
    (``search/frame.py``) before those levels, and gives a single-valued GEO_POINT its
    coordinates as fast fields ``f<i>_lat``/``f<i>_lon`` and the row documents a number
    ``_rid`` (``ROW_ID``), so an exact geo test reads fast values, not sources."""

    def __init__(self, meta: IndexMeta) -> None:
        self.meta = meta
        self.slots: dict[str, Slot] = {}
        self.tantivy_fields: list[tuple[str, str]] = []
        self.pk_levels = PK_LEVELS if meta.layout >= 2 else 0
        self.order_field = meta.layout >= 3
        self.row_ids = False
        self.has_nested = any(f.type == NESTED for f in meta.fields)
        self.sources = [(f, f.source) for f in meta.fields]
        self.stored_sources = [f.source for f in meta.fields if f.store]
        self.stored_set = frozenset(self.stored_sources)
        for i, f in enumerate(meta.fields):
            if f.type == NESTED:
                for j, s in enumerate(f.sub_fields):
                    self._add(f"{f.name}.{s.name}", Slot(s, f"f{i}_{j}", _KIND[s.type], f"n{i}"))
                self.slots[f.name] = Slot(f, f"f{i}", "nested", f"n{i}")
            else:
                kind = _KIND[f.type]
                if kind == "raw" and f.type == KEYWORD and f.enable_sort_and_agg and meta.layout >= 2:
                    kind = "rawfast"
                point = None
                if f.type == GEO_POINT and not f.is_array and f.index and meta.layout >= 3:
                    point = (f"f{i}_lat", f"f{i}_lon")
                    self.tantivy_fields += [(point[0], "fastfloat"), (point[1], "fastfloat")]
                    self.row_ids = True
                self._add(f.name, Slot(f, f"f{i}", kind, None, point))
        if self.row_ids:
            self.tantivy_fields.append((ROW_ID, "int"))

    def order(self, pk: tuple, frame=None) -> str | list[int]:
        """What a row document carries to be ordered by its key: ``_pk``'s string (layout
        1), the level integers (layout 2), or ``_o`` by ``frame`` (an ``OrderFrame``) and
        the levels (layout 3)."""
        if not self.pk_levels:
            return order_key(pk)
        raw = codec.encode_tuple(pk)
        if self.order_field:
            return [frame.value(raw)] + levels_of(raw, self.pk_levels)  # type: ignore[union-attr]
        return levels_of(raw, self.pk_levels)

    def fast(self, path: str) -> str | None:
        """The tantivy name of ``path`` when tantivy can sort and aggregate it exactly (a
        single-valued, indexed, top-level field stored as a fast field), else None."""
        s = self.slots.get(path)
        if s is None or "." in path or not s.field.index or s.field.is_array \
                or not s.field.enable_sort_and_agg or s.kind not in ("rawfast", "int", "float", "bool"):
            return None
        return s.name

    def _add(self, path: str, slot: Slot) -> None:
        self.slots[path] = slot
        if slot.field.index:
            self.tantivy_fields.append((slot.name, slot.kind))

    def slot(self, path: str) -> Slot:
        s = self.slots.get(path)
        if s is None:
            raise ParameterInvalid(f"search index {self.meta.name!r} has no field {describe(path)}")
        return s


_PACKERS = threading.local()


def pack(value: object) -> bytes:
    """``msgpack.packb(value, use_bin_type=True)`` with a reused packer per thread (making one
    per call costs more than the packing)."""
    p = getattr(_PACKERS, "p", None)
    if p is None:
        p = _PACKERS.p = msgpack.Packer(use_bin_type=True)
    return p.pack(value)


def doc_id(pk: tuple) -> str:
    """The id of a row's documents: its primary key, packed, in hex."""
    return pack(list(pk)).hex()


def order_key(pk: tuple) -> str:
    """A string whose order is the primary key's (the order-preserving key codec, in hex)."""
    return codec.encode_tuple(pk).hex()


_I64 = 1 << 63


def order_levels(pk: tuple, levels: int = PK_LEVELS) -> list[int]:
    """The primary key's order as ``levels`` signed 64-bit integers: the order-preserving key
    codec, zero-padded, 8 bytes big-endian a level, less 2**63. The codec is prefix-free for
    one schema, so the lists compare as the keys do, up to the first ``8 * levels`` bytes."""
    return levels_of(codec.encode_tuple(pk), levels)


def levels_of(raw: bytes, levels: int = PK_LEVELS) -> list[int]:
    """``order_levels`` of the encoded key ``raw``."""
    raw = raw[:8 * levels].ljust(8 * levels, b"\x00")
    return [x - _I64 for x in struct.unpack(f">{levels}Q", raw)]


def locate(meta: IndexMeta, pk_names: tuple[str, ...], pk: tuple) -> tuple[str, int]:
    """``(doc_id(pk), shard_of(...))``, packing the key once when it routes by all of it."""
    packed = pack(list(pk))
    if meta.routing_fields:
        return packed.hex(), shard_of(meta, pk_names, pk)
    return packed.hex(), 0 if meta.shards == 1 else zlib.crc32(packed) % meta.shards


def shard_of(meta: IndexMeta, pk_names: tuple[str, ...], pk: tuple) -> int:
    """The shard of a row: a hash of its routing fields (default: the whole key)."""
    if meta.shards == 1:
        return 0
    if meta.routing_fields:
        values = dict(zip(pk_names, pk))
        key = [values[r] for r in meta.routing_fields]
    else:
        key = list(pk)
    return zlib.crc32(pack(key)) % meta.shards


def routed_shards(meta: IndexMeta, pk_names: tuple[str, ...], routing_values: object) -> list[int]:
    """The shards ``routing_values`` (a list of dicts or tuples of routing-field values) map to."""
    if not meta.routing_fields:
        raise ParameterInvalid(f"search index {meta.name!r} has no routing_fields")
    if not isinstance(routing_values, (list, tuple)) or not routing_values:
        raise ParameterInvalid(f"routing_values is a non-empty list, got {describe(routing_values)}")
    out = set()
    for rv in routing_values:
        if isinstance(rv, dict):
            try:
                key = [rv[r] for r in meta.routing_fields]
            except KeyError as exc:
                raise ParameterInvalid(f"routing value {describe(rv)} lacks {exc.args[0]!r}") from None
        elif isinstance(rv, (list, tuple)) and len(rv) == len(meta.routing_fields):
            key = list(rv)
        elif len(meta.routing_fields) == 1 and not isinstance(rv, (list, tuple, dict)):
            key = [rv]
        else:
            raise ParameterInvalid(f"routing value {describe(rv)} does not give "
                                   f"{list(meta.routing_fields)}")
        out.add(0 if meta.shards == 1 else zlib.crc32(pack(key)) % meta.shards)
    return sorted(out)


# -- conversion --------------------------------------------------------------------------


def convert_scalar(f: FieldSchema, v: object) -> object:
    """A column value as field ``f`` indexes it; Rejected when it does not fit."""
    t = f.type
    if t in (KEYWORD, TEXT):
        if type(v) is not str:
            raise Rejected(f.name, v, f"{t} needs a string")
        return v
    if t == LONG:
        if type(v) is not int or not -2**63 <= v < 2**63:
            raise Rejected(f.name, v, "LONG needs a 64-bit integer")
        return v
    if t == DOUBLE:
        if type(v) is float and math.isfinite(v):
            return v
        if type(v) is int and abs(v) < 2**53:
            return float(v)
        raise Rejected(f.name, v, "DOUBLE needs a finite number")
    if t == BOOLEAN:
        if type(v) is not bool:
            raise Rejected(f.name, v, "BOOLEAN needs a boolean")
        return v
    if t == DATE:
        return parse_date(f.name, v)
    if t == GEO_POINT:
        return parse_point(f.name, v)
    raise Rejected(f.name, v, f"cannot index type {t}")


def parse_date(name: str, v: object) -> int:
    """A DATE: milliseconds since the epoch, or an ISO-8601 string (UTC unless it says)."""
    if type(v) is int and -2**62 < v < 2**62:
        return v
    if type(v) is str:
        try:
            d = datetime.fromisoformat(v)
        except ValueError:
            raise Rejected(name, v, "DATE needs milliseconds or an ISO-8601 string") from None
        if d.tzinfo is None:
            d = d.replace(tzinfo=timezone.utc)
        return int(round(d.timestamp() * 1000))
    raise Rejected(name, v, "DATE needs milliseconds or an ISO-8601 string")


def parse_point(name: str, v: object) -> tuple[float, float]:
    """A GEO_POINT ``"lat,lon"`` (or a (lat, lon) pair) as two floats."""
    try:
        if isinstance(v, str):
            lat_s, lon_s = v.split(",")
            lat, lon = float(lat_s), float(lon_s)
        elif isinstance(v, (tuple, list)) and len(v) == 2:
            lat, lon = float(v[0]), float(v[1])
        else:
            raise ValueError
    except (ValueError, TypeError):
        raise Rejected(name, v, 'GEO_POINT needs "lat,lon"') from None
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise Rejected(name, v, "GEO_POINT latitude must be in [-90, 90] and longitude in [-180, 180]")
    return (lat, lon)


def convert_field(f: FieldSchema, v: object) -> object:
    """The value of field ``f`` from column value ``v`` (None: the row has none)."""
    if f.type == NESTED:
        objs = _json(f, v)
        if isinstance(objs, dict):
            objs = [objs]
        if not isinstance(objs, list) or not all(isinstance(o, dict) for o in objs):
            raise Rejected(f.name, v, "NESTED needs a JSON array of objects")
        out = []
        for o in objs:
            sub = {}
            for s in f.sub_fields:
                if s.source in o and o[s.source] is not None:
                    sub[s.name] = convert_field(s, o[s.source] if not s.is_array
                                                else json.dumps(o[s.source]))
            out.append(sub)
        return out or None
    if f.is_array:
        items = _json(f, v)
        if not isinstance(items, list):
            raise Rejected(f.name, v, "an array field needs a JSON array")
        out = [convert_scalar(f, x) for x in items if x is not None]
        return out or None
    return convert_scalar(f, v)


def _json(f: FieldSchema, v: object) -> object:
    if isinstance(v, (list, dict)):
        return v
    if type(v) is not str:
        raise Rejected(f.name, v, "needs a JSON string")
    try:
        return json.loads(v)
    except ValueError:
        raise Rejected(f.name, v, "is not valid JSON") from None


def row_values(meta: IndexMeta, pk_names: tuple[str, ...], pk: tuple, columns: dict,
               sources: list | None = None) -> dict:
    """``{field: value}`` of the fields a row has (Rejected on the first that does not fit);
    ``sources``: ``FieldLayout.sources``, when the caller has it."""
    values = {}
    pkd = dict(zip(pk_names, pk))
    for f, src in sources if sources is not None else [(f, f.source) for f in meta.fields]:
        v = pkd[src] if src in pkd else columns.get(src)
        if v is None:
            continue
        cv = convert_field(f, v)
        if cv is not None:
            values[f.name] = cv
    return values


# -- documents ------------------------------------------------------------------------------


def _field_values(slot: Slot, v: object) -> list[tuple[str, object]]:
    f = slot.field
    items = v if isinstance(v, list) else [v]
    if f.type == TEXT:
        toks = analyzers.analyze(v, f.analyzer or "single_word", f.analyzer_parameter)  # type: ignore[arg-type]
        return [(slot.name, toks)] if toks else []
    if f.type == GEO_POINT:
        out = [(slot.name, cell) for p in items for cell in geo.cells_of(p[0], p[1])]  # type: ignore[index]
        if slot.point is not None:
            out += [(slot.point[0], v[0]), (slot.point[1], v[1])]  # type: ignore[index]
        return out
    return [(slot.name, x) for x in items]


def build_documents(layout: FieldLayout, values: dict) -> tuple[list[str], list, list]:
    """``(has, row_values, children)``: the ``_has`` names and ``(field, value)`` pairs of the
    row document, and ``(kind, has, pairs)`` of each child document."""
    has: list[str] = []
    pairs: list[tuple[str, object]] = []
    children: list = []
    for name, v in values.items():
        slot = layout.slots[name]
        has.append(name)
        if slot.kind == "nested":
            for obj in v:
                chas, cpairs = [], []
                for sname, sv in obj.items():
                    sslot = layout.slots[f"{name}.{sname}"]
                    chas.append(f"{name}.{sname}")
                    if sslot.field.index:
                        cpairs += _field_values(sslot, sv)
                children.append((slot.nested_kind, chas, cpairs))
            continue
        if slot.field.index:
            pairs += _field_values(slot, v)
    return has, pairs, children


def stored_columns(meta: IndexMeta, columns: dict) -> dict:
    """The base columns of the fields with ``store``: what RETURN_ALL_FROM_INDEX returns."""
    out = {}
    for f in meta.fields:
        if f.store and f.source in columns:
            out[f.source] = columns[f.source]
    return out


def encode_src(pk: tuple, values: dict, stored: dict) -> bytes:
    return pack([list(pk), values, stored])


_DECODE = msgspec.msgpack.Decoder()  # decodes what msgpack packs (thread-safe)
_DECODE_LAZY = msgspec.msgpack.Decoder(tuple[list, msgspec.Raw, msgspec.Raw])


def decode_src(raw: bytes) -> tuple[tuple, dict, dict]:
    pk, values, stored = _DECODE.decode(raw)
    return tuple(pk), values, stored


def decode_src_lazy(raw: bytes) -> tuple[tuple, object, object]:
    """``decode_src`` leaving ``values`` and ``stored`` encoded (``decode_part`` decodes them):
    a page in key order needs only the keys of its candidates."""
    pk, values, stored = _DECODE_LAZY.decode(raw)
    return tuple(pk), values, stored


def decode_part(part: object) -> dict:
    """A ``values`` or ``stored`` part that ``decode_src_lazy`` left encoded (a decoded one
    comes back as it is)."""
    return part if isinstance(part, dict) else _DECODE.decode(part)  # type: ignore[arg-type]


def as_points(v: object) -> list[tuple[float, float]]:
    """A GEO_POINT field's value(s) from ``_src`` (one pair, or a list of pairs)."""
    if not v:
        return []
    if isinstance(v[0], (int, float)):  # type: ignore[index]
        return [(v[0], v[1])]  # type: ignore[index]
    return [(p[0], p[1]) for p in v]  # type: ignore[union-attr]


def as_list(v: object) -> list:
    """A field's values from ``_src`` as a list (arrays as they are, one value as one item)."""
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def is_fuzzy(f: FieldSchema) -> bool:
    return f.type == TEXT and f.analyzer == FUZZY
