"""HyperLogLog++ count-distinct state of an ``hll`` aggregate family.

A cell of an ``hll`` family holds one state; ``AddToCell`` adds an item to it
(:func:`hll_add`), ``MergeToCell`` merges another state into it (:func:`hll_merge`), and a
reader estimates the number of distinct items with :func:`hll_count`. States are
immutable ``bytes``; every function returns a new state (or the same object when nothing
changed). The format is OURS: it is NOT byte-compatible with Google's HLL++ sketches
(BigQuery's ``HLL_COUNT`` or Bigtable's own ``inthll`` states), so a state written by one
cannot be merged into the other.

The algorithm is HyperLogLog++ (Heule, Nunkesser, Hall 2013) in its structure: a 64-bit
hash, precision p = 14 (16384 registers, standard error about 1.04/sqrt(16384) = 0.81%),
and a sparse representation at precision p' = 25 while few registers are set. The
estimate is Ertl's improved estimator ("New cardinality estimation algorithms for
HyperLogLog sketches", 2017), which corrects the raw estimate's bias at small and large
cardinalities without HLL++'s empirical bias tables; in sparse mode it is evaluated over
the 2^25 sparse registers, so small counts are near exact.

The byte format (DO NOT CHANGE: embedded in on-disk data; a new layout needs a new
version byte, and readers must keep reading version 1)::

    state    := header body
    header   := version:u8 = 0x01  precision:u8 = 14  sparse_precision:u8 = 25  kind:u8
    body     := sparse_body  (kind = 0x00)
              | dense_body   (kind = 0x01)
    sparse_body := entry{0..4096}        ; strictly increasing by index25
    entry    := u32 big-endian = index25 << 6 | rho25
                ; index25 = the hash's top 25 bits, rho25 in 1..40 = 1 + the number of
                ; leading zeros of the hash's low 39 bits (40 when they are all zero);
                ; one entry per index25, holding the largest rho25 seen
    dense_body  := register{16384}       ; register i: u8 in 0..51
                ; register i = the largest rho14 of the items whose hash's top 14 bits
                ; are i (0 = none), rho14 = 1 + the leading zeros of the low 50 bits
    hash(item)  := the BLAKE2b digest of the item with digest_size 8, read big-endian
    item        := bytes as given | an int as 8 bytes big-endian two's complement (int64)

The empty state is ``01 0e 19 00``. A sparse state that would hold more than 4096
entries (the dense body's size, 16 KiB) becomes dense. The representation is canonical:
it depends only on the set of items added, never on their order or on how states were
merged, so :func:`hll_merge` is commutative, associative and idempotent byte for byte.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable

from widetable.errors import ParameterInvalid

VERSION = 1
P = 14
SP = 25
M = 1 << P                       # dense registers
SM = 1 << SP                     # sparse registers
Q = 64 - P                       # bits after the dense index (register values 0..Q+1)
SQ = 64 - SP                     # bits after the sparse index (rho25 values 1..SQ+1)
SPARSE = 0
DENSE = 1
SPARSE_MAX = M // 4              # entries; 4 bytes each, so at most the dense body's size
HEADER_SPARSE = bytes((VERSION, P, SP, SPARSE))
HEADER_DENSE = bytes((VERSION, P, SP, DENSE))
_HLEN = 4
_LOW_Q = (1 << Q) - 1
_LOW_SQ = (1 << SQ) - 1
_SHIFT = SP - P                  # index25 bits below the dense index
_LOW_SHIFT = (1 << _SHIFT) - 1
_ALPHA_INF = 1 / (2 * math.log(2))
_REGISTER_OK = bytes(range(Q + 2))
_BYTE = [bytes((k,)) for k in range(Q + 2)]
_LANE_HIGH = int.from_bytes(b"\x80" * M, "big")


def hll_new() -> bytes:
    """The empty state (count 0)."""
    return HEADER_SPARSE


def hll_add(state: bytes, item: bytes | int) -> bytes:
    """``state`` with ``item`` added. Adding an item already counted returns ``state``.

    Raises ParameterInvalid when ``state`` is not a version-1 state or ``item`` is
    neither bytes nor an int64.
    """
    h = _hash(item)
    kind = _kind(state)
    if kind == DENSE:
        idx = h >> Q
        rho = Q + 1 - (h & _LOW_Q).bit_length()
        if state[_HLEN + idx] >= rho:
            return state
        regs = bytearray(state)
        regs[_HLEN + idx] = rho
        return bytes(regs)
    entry = _sparse_entry(h)
    count = (len(state) - _HLEN) // 4
    pos, old = _sparse_find(state, count, entry >> 6)
    if old is not None:
        if (old & 63) >= (entry & 63):
            return state
        at = _HLEN + 4 * pos
        return state[:at] + entry.to_bytes(4, "big") + state[at + 4:]
    if count + 1 > SPARSE_MAX:
        regs = _sparse_to_registers(state)
        _dense_set(regs, entry)
        return HEADER_DENSE + bytes(regs)
    at = _HLEN + 4 * pos
    return state[:at] + entry.to_bytes(4, "big") + state[at:]


def hll_add_many(state: bytes, items: Iterable[bytes | int]) -> bytes:
    """``state`` with every item of ``items`` added (one decode and encode for all);
    the same bytes as adding them one by one with :func:`hll_add`."""
    kind = _kind(state)
    if kind == DENSE:
        regs = bytearray(state[_HLEN:])
        for item in items:
            h = _hash(item)
            idx = h >> Q
            rho = Q + 1 - (h & _LOW_Q).bit_length()
            regs[idx] = max(regs[idx], rho)
        return HEADER_DENSE + bytes(regs)
    entries = _sparse_dict(state)
    regs_d: bytearray | None = None
    for item in items:
        e = _sparse_entry(_hash(item))
        if regs_d is not None:
            _dense_set(regs_d, e)
            continue
        i = e >> 6
        if entries.get(i, 0) < (e & 63):
            entries[i] = e & 63
            if len(entries) > SPARSE_MAX:
                regs_d = bytearray(M)
                for j, r in entries.items():
                    _dense_set(regs_d, j << 6 | r)
    if regs_d is not None:
        return HEADER_DENSE + bytes(regs_d)
    return _encode_sparse(entries)


def hll_merge(a: bytes, b: bytes) -> bytes:
    """The state counting the union of the items of ``a`` and ``b``.

    Both are validated in full (a MergeToCell input comes from a client); raises
    ParameterInvalid naming what is wrong with a malformed state.
    """
    check_hll(a)
    check_hll(b)
    if a == b:
        return a
    ka, kb = a[3], b[3]
    if ka == SPARSE and kb == SPARSE:
        entries = _sparse_dict(a)
        for i, r in _sparse_dict(b).items():
            if entries.get(i, 0) < r:
                entries[i] = r
        if len(entries) <= SPARSE_MAX:
            return _encode_sparse(entries)
        regs = bytearray(M)
        for i, r in entries.items():
            _dense_set(regs, i << 6 | r)
        return HEADER_DENSE + bytes(regs)
    ra = a[_HLEN:] if ka == DENSE else bytes(_sparse_to_registers(a))
    rb = b[_HLEN:] if kb == DENSE else bytes(_sparse_to_registers(b))
    return HEADER_DENSE + _register_max(ra, rb)


def hll_count(state: bytes) -> int:
    """The estimated number of distinct items added to ``state`` (0 for the empty
    state). Raises ParameterInvalid when ``state`` is not a version-1 state."""
    kind = _kind(state)
    if kind == DENSE:
        body = state[_HLEN:]
        hist = [0] * (Q + 2)
        seen = 0
        for k in range(Q + 2):           # stop once every register is counted
            hist[k] = body.count(_BYTE[k])
            seen += hist[k]
            if seen == M:
                break
        return round(_estimate(hist, M, Q))
    count = (len(state) - _HLEN) // 4
    if count == 0:
        return 0
    hist = [0] * (SQ + 2)
    hist[0] = SM - count
    for off in range(_HLEN + 3, len(state), 4):
        hist[state[off] & 63] += 1
    return round(_estimate(hist, SM, SQ))


def check_hll(state: object) -> None:
    """Raise ParameterInvalid unless ``state`` is a well-formed version-1 state."""
    if not isinstance(state, (bytes, bytearray)):
        raise ParameterInvalid(f"HLL state must be bytes, got {type(state).__name__}")
    kind = _kind(bytes(state))
    if kind == DENSE:
        bad = state[_HLEN:].translate(None, _REGISTER_OK)
        if bad:
            raise ParameterInvalid(f"HLL state has a register value {bad[0]} above {Q + 1}")
        return
    last = -1
    for off in range(_HLEN, len(state), 4):
        e = int.from_bytes(state[off:off + 4], "big")
        rho = e & 63
        if e >> 6 <= last or e >> 6 >= SM or not 1 <= rho <= SQ + 1:
            raise ParameterInvalid(
                f"HLL state has a malformed sparse entry {e:#010x} at byte {off}")
        last = e >> 6


# ---- internals ---------------------------------------------------------------------


def _hash(item: bytes | int) -> int:
    if isinstance(item, int) and not isinstance(item, bool):
        if not -(1 << 63) <= item < (1 << 63):
            raise ParameterInvalid(f"HLL item {item} is outside int64")
        item = item.to_bytes(8, "big", signed=True)
    elif not isinstance(item, (bytes, bytearray, memoryview)):
        raise ParameterInvalid(f"HLL item must be bytes or an int64, got {type(item).__name__}")
    return int.from_bytes(hashlib.blake2b(item, digest_size=8).digest(), "big")


def _kind(state: bytes) -> int:
    """The state's kind after checking its header and length."""
    if len(state) < _HLEN or state[0] != VERSION or state[1] != P or state[2] != SP:
        raise ParameterInvalid(f"not a widetable HLL state (header {bytes(state[:4]).hex()})")
    kind = state[3]
    n = len(state) - _HLEN
    if kind == DENSE and n == M:
        return DENSE
    if kind == SPARSE and n % 4 == 0 and n // 4 <= SPARSE_MAX:
        return SPARSE
    raise ParameterInvalid(f"HLL state of kind {kind} has a body of {n} bytes")


def _sparse_entry(h: int) -> int:
    return (h >> SQ) << 6 | (SQ + 1 - (h & _LOW_SQ).bit_length())


def _sparse_find(state: bytes, count: int, index: int) -> tuple[int, int | None]:
    """Binary search: (position, existing entry or None) of ``index`` in a sparse body."""
    lo, hi = 0, count
    while lo < hi:
        mid = (lo + hi) // 2
        off = _HLEN + 4 * mid
        e = int.from_bytes(state[off:off + 4], "big")
        i = e >> 6
        if i == index:
            return mid, e
        if i < index:
            lo = mid + 1
        else:
            hi = mid
    return lo, None


def _sparse_dict(state: bytes) -> dict[int, int]:
    out: dict[int, int] = {}
    for off in range(_HLEN, len(state), 4):
        e = int.from_bytes(state[off:off + 4], "big")
        out[e >> 6] = e & 63
    return out


def _encode_sparse(entries: dict[int, int]) -> bytes:
    return HEADER_SPARSE + b"".join((i << 6 | entries[i]).to_bytes(4, "big")
                                    for i in sorted(entries))


def _dense_set(regs: bytearray, entry: int) -> None:
    """Fold one sparse entry into dense registers (the exact dense rho, see the grammar)."""
    i25 = entry >> 6
    low = i25 & _LOW_SHIFT
    rho = _SHIFT + 1 - low.bit_length() if low else _SHIFT + (entry & 63)
    idx = i25 >> _SHIFT
    regs[idx] = max(regs[idx], rho)


def _sparse_to_registers(state: bytes) -> bytearray:
    regs = bytearray(M)
    for off in range(_HLEN, len(state), 4):
        _dense_set(regs, int.from_bytes(state[off:off + 4], "big"))
    return regs


def _register_max(a: bytes, b: bytes) -> bytes:
    """Byte-wise max of two register arrays (values < 0x80) with big-int lane arithmetic:
    lane i of ``(A | 0x80..) - B`` has its high bit set exactly when a[i] >= b[i]."""
    x = int.from_bytes(a, "big")
    y = int.from_bytes(b, "big")
    ge = ((x | _LANE_HIGH) - y) & _LANE_HIGH
    full = (ge << 1) - (ge >> 7)          # 0xFF in the lanes where a >= b
    return ((x & full) | (y & ~full)).to_bytes(M, "big")


def _estimate(hist: list[int], m: int, q: int) -> float:
    """Ertl's improved estimator over a register histogram ``hist[0..q+1]``."""
    if hist[0] == m:
        return 0.0
    z = m * _tau(1 - hist[q + 1] / m)
    for k in range(q, 0, -1):
        z = 0.5 * (z + hist[k])
    z += m * _sigma(hist[0] / m)
    return _ALPHA_INF * m * m / z


def _sigma(x: float) -> float:
    if x == 1.0:
        return math.inf
    y, z = 1.0, x
    while True:
        x *= x
        z_old = z
        z += x * y
        y += y
        if z == z_old:
            return z


def _tau(x: float) -> float:
    if x == 0.0 or x == 1.0:
        return 0.0
    y, z = 1.0, 1 - x
    while True:
        x = math.sqrt(x)
        z_old = z
        y *= 0.5
        z -= (1 - x) ** 2 * y
        if z == z_old:
            return z / 3
