"""YCSB core workloads: the generators of YCSB's ``site.ycsb.generator`` package and
the operation mix of ``CoreWorkload``, ported to Python.

The port follows YCSB 0.17 line by line where it matters for the distribution:

* ``fnvhash64`` is Java's 64-bit FNV-1 over the 8 little-endian bytes of the key
  number, with Java's signed overflow and ``Math.abs``; the key is ``"user" + hash``
  (``insertorder=hashed``, ``zeropadding=1``).
* ``ZipfianGenerator`` is Gray et al., "Quickly Generating Billion-Record Synthetic
  Databases" (SIGMOD 1994), including the incremental zeta when the item count
  grows and YCSB's quirk of computing eta with the *constructed* item count.
* ``ScrambledZipfianGenerator`` draws from a zipfian over 10^16 items with YCSB's
  precomputed zeta and scatters it with ``fnvhash64(v) % itemcount``.
* ``SkewedLatestGenerator`` is ``last - zipfian.next(last)`` over the insert counter.
* Records are 10 fields ``field0..field9`` of 100 bytes of printable ASCII, as
  YCSB's ``RandomByteIterator`` makes them; reads read every field, updates write
  one random field (YCSB's defaults ``readallfields=true``, ``writeallfields=false``).

Randomness comes from one seeded ``random.Random`` per workload, so the operation
list is generated once and replayed identically against every system.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

FIELD_COUNT = 10
FIELD_LENGTH = 100
FIELDS = tuple(f"field{i}" for i in range(FIELD_COUNT))
ZIPFIAN_CONSTANT = 0.99
MAX_SCAN_LENGTH = 100

# Operation codes of a pre-generated op list: (code, key, arg).
READ, UPDATE, INSERT, SCAN, RMW = range(5)
OP_NAMES = ("read", "update", "insert", "scan", "rmw")

_MASK64 = (1 << 64) - 1
_SIGN64 = 1 << 63
_FNV_OFFSET_BASIS_64 = 0xCBF29CE484222325
_FNV_PRIME_64 = 1099511628211
# YCSB's RandomByteIterator yields bytes ' ' + (random & 63): printable ASCII.
_PRINTABLE = bytes(32 + (b & 63) for b in range(256))


def fnvhash64(val: int) -> int:
    """YCSB's ``Utils.fnvhash64``: FNV-1 over 8 bytes, as a non-negative Java long.

    Java's ``Math.abs(Long.MIN_VALUE)`` stays negative; that case is kept as is.
    """
    hashval = _FNV_OFFSET_BASIS_64
    for _ in range(8):
        hashval ^= val & 0xFF
        val >>= 8
        hashval = (hashval * _FNV_PRIME_64) & _MASK64
    if hashval >= _SIGN64:
        hashval -= 1 << 64
    return hashval if hashval == -_SIGN64 else abs(hashval)


def _java_mod(a: int, b: int) -> int:
    r = abs(a) % b
    return -r if a < 0 else r


def build_key_name(keynum: int) -> str:
    """``CoreWorkload.buildKeyName`` with hashed insert order and no zero padding."""
    return "user" + str(fnvhash64(keynum))


def zeta_static(start: int, n: int, theta: float, initial: float = 0.0) -> float:
    """Sum of 1/i^theta for i in (start, n]: Java's sequential loop, not fsum."""
    total = initial
    for i in range(start, n):
        total += 1.0 / ((i + 1) ** theta)
    return total


class ZipfianGenerator:
    """Items ``min..max`` inclusive, ``min`` the most popular (YCSB ZipfianGenerator)."""

    def __init__(
        self,
        rng: random.Random,
        min_item: int,
        max_item: int,
        constant: float = ZIPFIAN_CONSTANT,
        zetan: float | None = None,
    ) -> None:
        self._rng = rng
        self.items = max_item - min_item + 1
        self.base = min_item
        self.theta = constant
        self.zeta2theta = zeta_static(0, 2, constant)
        self.alpha = 1.0 / (1.0 - constant)
        self.zetan = zeta_static(0, self.items, constant) if zetan is None else zetan
        self.countforzeta = self.items
        self.eta = self._eta()
        self.next_value()  # YCSB's constructor draws once; keep the stream aligned.

    def _eta(self) -> float:
        # YCSB uses the constructed item count here even after it grows.
        return (1 - (2.0 / self.items) ** (1 - self.theta)) / (1 - self.zeta2theta / self.zetan)

    def next_long(self, itemcount: int) -> int:
        if itemcount > self.countforzeta:
            self.zetan = zeta_static(self.countforzeta, itemcount, self.theta, self.zetan)
            self.countforzeta = itemcount
            self.eta = self._eta()
        u = self._rng.random()
        uz = u * self.zetan
        if uz < 1.0:
            return self.base
        if uz < 1.0 + 0.5**self.theta:
            return self.base + 1
        return self.base + int(itemcount * (self.eta * u - self.eta + 1) ** self.alpha)

    def next_value(self) -> int:
        return self.next_long(self.items)


class ScrambledZipfianGenerator:
    """Zipfian popularity scattered over ``min..max`` (YCSB ScrambledZipfianGenerator)."""

    ZETAN = 26.46902820178302  # zeta(10^16, 0.99), precomputed by YCSB
    ITEM_COUNT = 10_000_000_000_000_000

    def __init__(self, rng: random.Random, min_item: int, max_item: int) -> None:
        self.min = min_item
        self.itemcount = max_item - min_item + 1
        self._gen = ZipfianGenerator(rng, 0, self.ITEM_COUNT, ZIPFIAN_CONSTANT, self.ZETAN)

    def next_value(self) -> int:
        return self.min + _java_mod(fnvhash64(self._gen.next_value()), self.itemcount)


class InsertCounter:
    """YCSB's (Acknowledged)CounterGenerator, single-threaded: every insert is acknowledged."""

    def __init__(self, start: int) -> None:
        self.next = start

    def next_value(self) -> int:
        value = self.next
        self.next += 1
        return value

    def last_value(self) -> int:
        return self.next - 1


class SkewedLatestGenerator:
    """Recent inserts are the most popular (YCSB SkewedLatestGenerator)."""

    def __init__(self, rng: random.Random, basis: InsertCounter) -> None:
        self._basis = basis
        self._zipfian = ZipfianGenerator(rng, 0, basis.last_value() - 1)
        self.next_value()

    def next_value(self) -> int:
        last = self._basis.last_value()
        return last - self._zipfian.next_long(last)


@dataclass(frozen=True, slots=True)
class CoreWorkload:
    """One of YCSB's ``workloads/workload[a-f]`` property files."""

    name: str
    read: float = 0.0
    update: float = 0.0
    insert: float = 0.0
    scan: float = 0.0
    rmw: float = 0.0
    distribution: str = "zipfian"  # or "latest"


WORKLOADS: dict[str, CoreWorkload] = {
    "A": CoreWorkload("A", read=0.5, update=0.5),
    "B": CoreWorkload("B", read=0.95, update=0.05),
    "C": CoreWorkload("C", read=1.0),
    "D": CoreWorkload("D", read=0.95, insert=0.05, distribution="latest"),
    "E": CoreWorkload("E", scan=0.95, insert=0.05),
    "F": CoreWorkload("F", read=0.5, rmw=0.5),
}
# YCSB's recommended run order: the read-mostly ones first, the inserting ones last.
RUN_ORDER = ("A", "B", "C", "F", "D", "E")

Op = tuple[int, str, Any]
Row = tuple[str, dict[str, bytes]]


def random_value(rng: random.Random, length: int = FIELD_LENGTH) -> bytes:
    return rng.randbytes(length).translate(_PRINTABLE)


def build_values(rng: random.Random) -> dict[str, bytes]:
    blob = random_value(rng, FIELD_LENGTH * FIELD_COUNT)
    return {f: blob[i * FIELD_LENGTH : (i + 1) * FIELD_LENGTH] for i, f in enumerate(FIELDS)}


def load_rows(record_count: int, seed: int) -> list[Row]:
    """The load phase: key numbers 0..n-1 in order, i.e. hashed (random-looking) keys."""
    rng = random.Random(f"{seed}:load")
    return [(build_key_name(n), build_values(rng)) for n in range(record_count)]


def generate_ops(
    workload: CoreWorkload, record_count: int, operation_count: int, seed: int
) -> list[Op]:
    """The transaction phase of ``workload`` over ``record_count`` existing records.

    Inserted keys continue the key-number sequence at ``record_count``; the caller
    adds the number of inserts to the record count of the next workload it runs.
    """
    rng = random.Random(f"{seed}:{workload.name}")
    inserts = InsertCounter(record_count)
    if workload.distribution == "latest":
        chooser: Any = SkewedLatestGenerator(rng, inserts)
    else:
        expected_new = int(operation_count * workload.insert * 2.0)  # YCSB's fudge factor
        chooser = ScrambledZipfianGenerator(rng, 0, record_count + expected_new)
    choices = [
        (p, code)
        for p, code in (
            (workload.read, READ),
            (workload.update, UPDATE),
            (workload.insert, INSERT),
            (workload.scan, SCAN),
            (workload.rmw, RMW),
        )
        if p > 0
    ]
    total = sum(p for p, _ in choices)

    def next_keynum() -> int:
        while True:
            keynum = chooser.next_value()
            if keynum <= inserts.last_value():
                return keynum

    def single_value() -> dict[str, bytes]:
        return {FIELDS[rng.randint(0, FIELD_COUNT - 1)]: random_value(rng)}

    ops: list[Op] = []
    for _ in range(operation_count):
        u = rng.random()
        code = choices[-1][1]
        for p, c in choices:  # YCSB's DiscreteGenerator
            if u < p / total:
                code = c
                break
            u -= p / total
        if code == READ:
            ops.append((READ, build_key_name(next_keynum()), None))
        elif code == UPDATE or code == RMW:
            key = build_key_name(next_keynum())
            ops.append((code, key, single_value()))
        elif code == SCAN:
            key = build_key_name(next_keynum())
            ops.append((SCAN, key, rng.randint(1, MAX_SCAN_LENGTH)))
        else:
            ops.append((INSERT, build_key_name(inserts.next_value()), build_values(rng)))
    return ops


def count_inserts(ops: list[Op]) -> int:
    return sum(1 for op in ops if op[0] == INSERT)
