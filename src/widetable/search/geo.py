"""Geo for an engine without geo: geohash cells to select candidates, exact tests to decide.

Each GEO_POINT value is indexed as its geohash cells at every precision from 1
to PRECISION characters. A geo query picks the finest precision at which at
most MAX_CELLS cells cover its bounding box, selects the documents in those
cells, and keeps the ones that pass the exact test: haversine distance on a
sphere of radius EARTH_RADIUS, containment in a bounding box, or a ray-casting
point-in-polygon test.

:func:`split` spares most of those tests: a cell that lies wholly inside the
shape (every corner within the distance, or inside the box with a margin)
matches as it is, and a cell on the shape's edge is refined into its 32
children (up to PRECISION, and a budget of cells in all, coarsest first), so only
the documents of the edge's finest cells are tested one by one. Finer cells cost more
term lookups and spare candidate tests: ``compile.geo_plans`` splits under several
budgets, and each shard picks by its density.
"""

from __future__ import annotations

import math
from collections import deque

from ..errors import ParameterInvalid, describe

PRECISION = 8  # DO NOT CHANGE: indexed cells (about 38 m x 19 m at 8)
MAX_CELLS = 64
REFINED_CELLS = 256
EARTH_RADIUS = 6371008.8  # metres (mean radius)
_BASE32 = "0123456789bcdefghjkmnpqrstuvwxyz"


def _spread(v: int) -> int:
    """The 20 low bits of ``v`` moved to the even bit positions of a 40-bit integer."""
    out = 0
    for i in range(0, 20, 5):
        out |= _SPREAD5[(v >> i) & 31] << (2 * i)
    return out


_SPREAD5 = [sum(((v >> b) & 1) << (2 * b) for b in range(5)) for v in range(32)]
_SCALE = float(1 << 20)


_SPREAD10 = [_spread(v) for v in range(1024)]  # 10 bits spread to the even bits of 20
_PAIRS = [_BASE32[v >> 5] + _BASE32[v & 31] for v in range(1024)]  # 10 bits as 2 characters


def encode(lat: float, lon: float, precision: int = PRECISION) -> str:
    """The geohash of a point (up to 8 characters: 40 bits, longitude first)."""
    if precision <= PRECISION:
        la = min(int((lat + 90.0) / 180.0 * _SCALE), (1 << 20) - 1)
        lo = min(int((lon + 180.0) / 360.0 * _SCALE), (1 << 20) - 1)
        s10 = _SPREAD10
        bits = (((s10[lo >> 10] << 20 | s10[lo & 1023]) << 1)
                | s10[la >> 10] << 20 | s10[la & 1023])
        p = _PAIRS
        h = p[bits >> 30] + p[(bits >> 20) & 1023] + p[(bits >> 10) & 1023] + p[bits & 1023]
        return h[:precision]
    return _encode_slow(lat, lon, precision)


def _encode_slow(lat: float, lon: float, precision: int) -> str:
    lat_lo, lat_hi, lon_lo, lon_hi = -90.0, 90.0, -180.0, 180.0
    out = []
    bits = 0
    ch = 0
    even = True
    while len(out) < precision:
        if even:
            mid = (lon_lo + lon_hi) / 2
            if lon >= mid:
                ch = ch * 2 + 1
                lon_lo = mid
            else:
                ch *= 2
                lon_hi = mid
        else:
            mid = (lat_lo + lat_hi) / 2
            if lat >= mid:
                ch = ch * 2 + 1
                lat_lo = mid
            else:
                ch *= 2
                lat_hi = mid
        even = not even
        bits += 1
        if bits == 5:
            out.append(_BASE32[ch])
            bits = ch = 0
    return "".join(out)


def cells_of(lat: float, lon: float) -> list[str]:
    """The cells a point is indexed under: its geohash's prefixes 1..PRECISION."""
    h = encode(lat, lon)
    return [h[:1], h[:2], h[:3], h[:4], h[:5], h[:6], h[:7], h]  # PRECISION prefixes


def _cell_size(p: int) -> tuple[float, float]:
    lon_bits = (5 * p + 1) // 2
    lat_bits = 5 * p // 2
    return 180.0 / (1 << lat_bits), 360.0 / (1 << lon_bits)


def covering(lat_min: float, lat_max: float, lon_min: float, lon_max: float) -> list[str]:
    """Cells (one precision) that cover the box; longitudes within [-180, 180]."""
    lat_min, lat_max = max(lat_min, -90.0), min(lat_max, 90.0)
    lon_min, lon_max = max(lon_min, -180.0), min(lon_max, 180.0)
    for p in range(PRECISION, 0, -1):
        dlat, dlon = _cell_size(p)
        i0, i1 = math.floor((lat_min + 90) / dlat), math.floor((lat_max + 90) / dlat)
        j0, j1 = math.floor((lon_min + 180) / dlon), math.floor((lon_max + 180) / dlon)
        if (i1 - i0 + 1) * (j1 - j0 + 1) <= MAX_CELLS or p == 1:
            cells = set()
            for i in range(i0, i1 + 1):
                for j in range(j0, j1 + 1):
                    lat = min(-90 + (i + 0.5) * dlat, 90.0)
                    lon = min(-180 + (j + 0.5) * dlon, 180.0)
                    cells.add(encode(lat, lon, p))
            return sorted(cells)
    return []


def bounds(cell: str) -> tuple[float, float, float, float]:
    """``(lat_min, lat_max, lon_min, lon_max)`` of a geohash cell."""
    lat_lo, lat_hi, lon_lo, lon_hi = -90.0, 90.0, -180.0, 180.0
    even = True
    for ch in cell:
        v = _BASE32.index(ch)
        for b in range(4, -1, -1):
            bit = (v >> b) & 1
            if even:
                mid = (lon_lo + lon_hi) / 2
                lon_lo, lon_hi = (mid, lon_hi) if bit else (lon_lo, mid)
            else:
                mid = (lat_lo + lat_hi) / 2
                lat_lo, lat_hi = (mid, lat_hi) if bit else (lat_lo, mid)
            even = not even
    return lat_lo, lat_hi, lon_lo, lon_hi


def _children(cell: str, b: tuple[float, float, float, float]) -> list:
    """The 32 children of ``cell`` (bounds ``b``) with their bounds."""
    lon_first = (5 * len(cell)) % 2 == 0  # geohash bits alternate, longitude first
    nlon, nlat = (8, 4) if lon_first else (4, 8)
    dlat, dlon = (b[1] - b[0]) / nlat, (b[3] - b[2]) / nlon
    out = []
    for v, ch in enumerate(_BASE32):
        i = j = 0  # lat and lon index among the children
        even = lon_first
        for bit in range(4, -1, -1):
            x = (v >> bit) & 1
            if even:
                j = j * 2 + x
            else:
                i = i * 2 + x
            even = not even
        out.append((cell + ch, (b[0] + i * dlat, b[0] + (i + 1) * dlat,
                                b[2] + j * dlon, b[2] + (j + 1) * dlon)))
    return out


def cell_area(cell: str) -> float:
    """A cell's area in square degrees (the same for every cell of one precision)."""
    dlat, dlon = _cell_size(len(cell))
    return dlat * dlon


def split(cells: list[str], box: tuple[float, float, float, float], inside,
          budget: int = REFINED_CELLS) -> tuple[list, list]:
    """``(inner, edge)``: ``cells`` refined so that each is wholly inside the shape
    (``inside(bounds)``) or on its edge, up to ``budget`` cells in all; cells missing the
    box are dropped. Coarser cells are refined first (breadth first), so a small budget
    still narrows the whole edge."""
    inner: list[str] = []
    edge: list[str] = []
    todo = deque((c, bounds(c)) for c in cells)
    total = len(todo)
    while todo:
        c, b = todo.popleft()
        if b[0] > box[1] or b[1] < box[0] or b[2] > box[3] or b[3] < box[2]:
            total -= 1
            continue
        if inside(b):
            inner.append(c)
        elif len(c) < PRECISION and total + 31 <= budget:
            todo += _children(c, b)
            total += 31
        else:
            edge.append(c)
    return inner, edge


def haversine(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in metres."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS * math.asin(min(1.0, math.sqrt(a)))


def circle_box(lat: float, lon: float, distance: float) -> tuple[float, float, float, float]:
    """A box holding every point within ``distance`` metres of (lat, lon)."""
    ang = distance / EARTH_RADIUS
    dlat = math.degrees(ang) * 1.000001 + 1e-9
    lat_min, lat_max = lat - dlat, lat + dlat
    if lat_min <= -90 or lat_max >= 90 or ang >= math.pi / 2:
        return max(lat_min, -90), min(lat_max, 90), -180.0, 180.0
    s = math.sin(ang) / math.cos(math.radians(lat))
    if s >= 1:
        return lat_min, lat_max, -180.0, 180.0
    dlon = math.degrees(math.asin(s)) * 1.000001 + 1e-9
    if lon - dlon < -180 or lon + dlon > 180:  # crosses the antimeridian: every longitude
        return lat_min, lat_max, -180.0, 180.0
    return lat_min, lat_max, lon - dlon, lon + dlon


def in_box(lat: float, lon: float, top: float, left: float, bottom: float, right: float) -> bool:
    return bottom <= lat <= top and left <= lon <= right


def in_polygon(lat: float, lon: float, poly: list[tuple[float, float]]) -> bool:
    """Ray casting in the (lon, lat) plane; points on an edge may fall either way."""
    inside = False
    n = len(poly)
    for i in range(n):
        la1, lo1 = poly[i]
        la2, lo2 = poly[i - 1]
        if (la1 > lat) != (la2 > lat):
            x = lo1 + (lat - la1) * (lo2 - lo1) / (la2 - la1)
            if lon < x:
                inside = not inside
    return inside


def point(value: object, what: str) -> tuple[float, float]:
    """A query's point argument: ``"lat,lon"`` or ``(lat, lon)``."""
    try:
        if isinstance(value, str):
            a, b = value.split(",")
            lat, lon = float(a), float(b)
        else:
            lat, lon = float(value[0]), float(value[1])  # type: ignore[index]
    except (ValueError, TypeError, IndexError):
        raise ParameterInvalid(f'{what} must be "lat,lon", got {describe(value)}') from None
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise ParameterInvalid(f"{what} {describe(value)} is outside the globe")
    return lat, lon
