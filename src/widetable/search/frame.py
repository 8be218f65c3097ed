"""Layout 3's order field ``_o``: one 64-bit integer per row document whose order is the key's.

tantivy finds the top k of a query by one integer fast field in one search, but leaves ties
in any order; every tie at the page boundary costs another search (``search/ordered.py``).
``_o`` is made so that ties are rare: it spends its 64 bits on the key bytes that tell keys
apart, skipping the bytes keys share. A sorted list of *bounds* (encoded keys, the codec of
``keys/codec.py``) cuts the key space into intervals; a key's value is::

    slot (20 bits: how many bounds are <= the key) | within (44 bits)

Within a bounded interval ``[A, B)`` every key shares ``A``'s first ``lcp(A, B)`` bytes, so
``within`` is the next 5.5 bytes. Below the first bound and from the last one on, keys share
nothing in general: ``within`` is ``q`` (5 bits, the bytes shared with that bound, capped at
31; counted down above the last bound) and the 4.875 bytes after them, which for keys on one
side of a bound is monotone too (the nearer a key is to the bound, the more it shares). Each
part is a truncation of a monotone quantity, so ``value`` is monotone (non-decreasing) in the
key for *any* key, whatever the bounds: ``_o`` ties only keys that agree on the bytes it
keeps, and the key levels ``_k0..`` after it order those exactly.

The bounds come from the data (a rank is impossible under inserts; this is its monotone
stand-in): the first full sync reads the base table in key order, and before it adds a page
of rows it appends every ``STRIDE``-th key of the page and the key where the next page
starts. No document lies at or beyond the last bound when it is appended (the sync has not
reached there, and leaves the log records of keys there to the scan), and no bound is ever
inserted before another, so no document's value ever changes. After the first sync the bounds
are frozen; keys written later fall into the intervals of their neighbours at the time of the
sync, which keep them apart as long as the data keeps its shape. An index created on an empty
table has no bounds: ``_o`` is then the key's first 5.5 bytes (ties resolved by the levels).

The bounds are kept in the index directory, file ``order`` (DO NOT CHANGE: embedded in
on-disk data): records ``length:u16be key bytes``, appended and synced before each commit of
the shards (a torn last record, from a crash while appending, is dropped on open).
"""

from __future__ import annotations

import os
from bisect import bisect_right

SLOT_BITS = 20
WITHIN_BITS = 64 - SLOT_BITS  # 44
MAX_BOUNDS = (1 << SLOT_BITS) - 1
STRIDE = 16  # a bound every this many keys of a full sync's page
_Q_BITS = 5  # shared-byte count in an unbounded interval (capped at 31)
_Q_MAX = (1 << _Q_BITS) - 1
_TAIL_BITS = WITHIN_BITS - _Q_BITS  # 39
_I64 = 1 << 63
FILE = "order"


def _lcp(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class OrderFrame:
    """The bounds of one index and the value they give a key (``value``)."""

    __slots__ = ("bounds", "lcps", "path", "_flushed")

    def __init__(self, path: str | None = None) -> None:
        self.bounds: list[bytes] = []
        self.lcps: list[int] = []  # lcps[j]: bytes bounds[j] and bounds[j + 1] share
        self.path = path
        self._flushed = 0
        if path is not None and os.path.exists(path):
            raws, good = _read(path)
            if good < os.path.getsize(path):  # a torn last record: cut it before appending
                os.truncate(path, good)
            self._extend(raws)
            self._flushed = len(self.bounds)

    def value(self, raw: bytes) -> int:
        """The signed 64-bit ``_o`` of the encoded key ``raw``."""
        b = self.bounds
        j = bisect_right(b, raw)
        if 0 < j < len(b):  # [bounds[j-1], bounds[j]): skip the bytes both share
            p = self.lcps[j - 1]
            within = int.from_bytes(raw[p:p + 6].ljust(6, b"\x00"), "big") >> 4
        elif not b:
            within = int.from_bytes(raw[:6].ljust(6, b"\x00"), "big") >> 4
        elif j == 0:  # below the first bound: more shared with it is nearer to it, higher
            q = min(_lcp(raw, b[0]), _Q_MAX)
            within = (q << _TAIL_BITS) | _tail(raw, q)
        else:  # from the last bound on: more shared with it is nearer to it, lower
            q = min(_lcp(raw, b[-1]), _Q_MAX)
            within = ((_Q_MAX - q) << _TAIL_BITS) | _tail(raw, q)
        return ((j << WITHIN_BITS) | within) - _I64

    def add_page(self, raws: list[bytes], next_raw: bytes | None) -> None:
        """A full sync is about to add the rows of encoded keys ``raws`` (ascending), the page
        after them starting at ``next_raw`` (None: the table ends): append every ``STRIDE``-th
        of them and ``next_raw``, those after the last bound (a page read again after a
        crash adds nothing), up to ``MAX_BOUNDS``."""
        picked = raws[::STRIDE]
        if next_raw is not None:
            picked.append(next_raw)
        last = self.bounds[-1] if self.bounds else None
        self._extend([r for r in picked if last is None or r > last])

    def _extend(self, raws: list[bytes]) -> None:
        b = self.bounds
        for r in raws:
            if len(b) >= MAX_BOUNDS:
                return
            if b:
                if r <= b[-1]:
                    continue
                self.lcps.append(_lcp(b[-1], r))
            b.append(r)

    def flush(self) -> None:
        """Append the bounds added since the last flush to the file and sync it (before the
        shards commit documents valued with them)."""
        if self.path is None or self._flushed == len(self.bounds):
            return
        out = bytearray()
        for r in self.bounds[self._flushed:]:
            out += len(r).to_bytes(2, "big") + r
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, bytes(out))
            os.fsync(fd)
        finally:
            os.close(fd)
        self._flushed = len(self.bounds)

    def clear(self) -> None:
        """Forget every bound (the index starts again from nothing)."""
        self.bounds, self.lcps, self._flushed = [], [], 0
        if self.path is not None and os.path.exists(self.path):
            os.remove(self.path)


def _tail(raw: bytes, q: int) -> int:
    return int.from_bytes(raw[q:q + 5].ljust(5, b"\x00"), "big") >> (40 - _TAIL_BITS)


def _read(path: str) -> tuple[list[bytes], int]:
    """The complete records of the file, and the length they take."""
    with open(path, "rb") as f:
        data = f.read()
    out, pos = [], 0
    while pos + 2 <= len(data):
        n = int.from_bytes(data[pos:pos + 2], "big")
        if pos + 2 + n > len(data):
            break  # torn by a crash while appending: never used by a commit
        out.append(data[pos + 2:pos + 2 + n])
        pos += 2 + n
    return out, pos
