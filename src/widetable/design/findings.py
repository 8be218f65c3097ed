"""What the advisor looks at (:class:`Evidence`) and what it says (:class:`Finding`).

Evidence is plain data gathered once: the schema, a sample of primary keys,
a sample of row shapes, recorded statistics (``db.table_stats``) and the
partition estimates. Every rule is a pure function of it, so a rule can be
tested on a crafted design with no store at all.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field

from ..keys.builders import INT64_OFFSET  # a signed int64 with its sign bit flipped sorts as bytes

INFO = "info"
WARNING = "warning"
CRITICAL = "critical"
SEVERITY_ORDER = {CRITICAL: 0, WARNING: 1, INFO: 2}

GIB = 1 << 30
PARTITION_VALUE_LIMIT = 10 * GIB  # seed 000: 同一分區索引值下的資料量建議控制在 10 GB 以內


@dataclass(frozen=True, slots=True)
class RowShape:
    """One sampled row: its attribute count, largest cell, size and last write (ms)."""

    columns: int
    max_cell_bytes: int
    row_bytes: int
    last_write_ms: int


@dataclass(frozen=True, slots=True)
class Evidence:
    """Everything the rules see. ``keys`` are primary-key tuples in sample order.

    ``range_scans`` says whether the workload reads ranges in the order of the
    first key column (None: unknown, which rules treat as no); reads of a range
    *within* one first-column value (one machine's last hour) do not count. ``total_rows``/``total_bytes`` are the table's
    estimates; ``expected_bytes`` a size the user says the table will reach.
    """

    table: str
    primary_key: tuple[tuple[str, str], ...]
    keys: tuple[tuple, ...] = ()
    rows: tuple[RowShape, ...] = ()
    stats: dict | None = None
    total_rows: int = 0
    total_bytes: int = 0
    partition_bytes: tuple[int, ...] = ()
    partition_ids: tuple[int, ...] = ()
    range_scans: bool | None = None
    expected_bytes: int | None = None
    now_ms: int = 0

    def column(self, i: int) -> list:
        return [k[i] for k in self.keys if len(k) > i]


@dataclass(frozen=True, slots=True)
class Comparison:
    """Simulated before/after of a fix: the design names and their headline metrics."""

    workload: str
    before: str
    after: str
    before_metrics: dict
    after_metrics: dict


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: ``rule`` id, severity, numbers as evidence, the seed rule, the fix."""

    rule: str
    severity: str
    title: str
    evidence: dict
    seed_rule: str
    fix: str
    column: str | None = None
    simulation: Comparison | None = None
    fix_design: tuple = field(default=(), compare=False)  # KeyColumn specs for the simulator

    def to_dict(self) -> dict:
        d = {
            "rule": self.rule, "severity": self.severity, "title": self.title,
            "column": self.column, "evidence": self.evidence, "seed_rule": self.seed_rule,
            "fix": self.fix,
        }
        if self.simulation is not None:
            s = self.simulation
            d["simulation"] = {
                "workload": s.workload, "before": {"design": s.before, **s.before_metrics},
                "after": {"design": s.after, **s.after_metrics},
            }
        return d


# -- value classifiers shared by rules ---------------------------------------------

_EPOCH_UNITS = (1, 1_000, 1_000_000, 1_000_000_000)  # s, ms, µs, ns
_EPOCH_FROM = 1e9  # 2001-09-09, in seconds: older times are not taken for timestamps
_FUTURE = 366 * 86400  # a time more than a year ahead is not a write's timestamp
_ISO_DATE = re.compile(r"^(19|20)\d\d-?[01]\d-?[0-3]\d")
HASH_PREFIX = re.compile(r"^[0-9a-f]{4,32}[,:#|_\-/]")
SALT_PREFIX = re.compile(r"^\d{1,4}[,:#|_\-/]")


BINARY_INT_WIDTH = 8  # an int64/uint64 stored big-endian in a BINARY key column


def as_int(v: object) -> int | None:
    """The integer a key value holds: an int, a digit string, or 8 big-endian bytes.

    Eight bytes are read unsigned; with the top bit set they are taken for an
    offset (sign-flipped) int64, so a timestamp stored either way reads as itself.
    """
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, bytes) and len(v) == BINARY_INT_WIDTH:
        n = int.from_bytes(v, "big")
        return n - INT64_OFFSET if n >= INT64_OFFSET else n
    if isinstance(v, str) and v.isascii() and v.isdigit() and len(v) <= 20:  # keys.concat pads to 20
        return int(v)
    return None


def timestamp_like(v: object) -> bool:
    """An epoch time in s, ms, µs or ns (int or digit string) from 2001 to a year from
    now (a phone number's ten digits read as seconds would be decades ahead), or an
    ISO date string."""
    n = as_int(v)
    if n is not None:
        until = time.time() + _FUTURE
        return any(_EPOCH_FROM * unit <= n < until * unit for unit in _EPOCH_UNITS)
    return isinstance(v, str) and bool(_ISO_DATE.match(v))


_LEADING_NUMBER = re.compile(r"^(\d{1,20})\D")


def leading_number(v: object) -> int | None:
    """The number a concatenated string key starts with (``"1718000000123#dev7"``,
    ``keys.concat``'s zero-padded ``"00000000001718000000,dev7"``), or None."""
    if isinstance(v, str):
        m = _LEADING_NUMBER.match(v)
        if m is not None:
            return int(m.group(1))
    return None


LONG_MAX = 2**63 - 1


def reversed_timestamp_like(v: object) -> bool:
    """``keys.reverse_timestamp`` of a time (``Long.MAX_VALUE - ts``, int or digit string)."""
    n = as_int(v)
    return n is not None and 0 <= n <= LONG_MAX and timestamp_like(LONG_MAX - n)


def fraction(values: list, test) -> float:
    return sum(1 for v in values if test(v)) / len(values) if values else 0.0


def sequential_density(values: list, population: int | None = None) -> float:
    """How densely the integer values fill their span: near 1 for auto-increment ids.

    ``values`` may be a sample of ``population`` rows (then the population, not
    the sample, fills the span: 2,000 ids sampled from 1..20,000 are dense). A
    small set used over and over (up to 256 bucket numbers, each several times) is
    not a sequence.
    """
    ints = [n for n in (as_int(v) for v in values) if n is not None]
    distinct = len(set(ints))
    if distinct < 32 or len(ints) < len(values) * 0.9:
        return 0.0  # a few bucket numbers are not a sequence
    if distinct <= 256 and len(ints) >= 4 * distinct:
        return 0.0  # salt buckets: each number is reused, none is ever passed
    span = max(ints) - min(ints) + 1
    if population and population > 1.1 * span:
        population = None  # more rows than numbers: they repeat, so the rows are no sequence
    rows = max(distinct, population or 0)
    return min(rows / span, 1.0) if span > 0 else 0.0


def top_shares(values: list, k: int = 5) -> tuple[int, float, float, list]:
    """``(distinct, top-1 share, top-k share, [(value, share), ...])`` of ``values``."""
    if not values:
        return 0, 0.0, 0.0, []
    counts = Counter(values)
    n = len(values)
    top = counts.most_common(k)
    return len(counts), top[0][1] / n, sum(c for _, c in top) / n, [(v, c / n) for v, c in top]


def load_by_value(stats: dict | None) -> Counter:
    """Sampled request counts per partition-key value, from the statistics' hot keys."""
    out: Counter = Counter()
    for b in (stats or {}).get("buckets", []):
        for r in b["partitions"]:
            for key, count in r.get("hot_keys", []):
                if isinstance(key, tuple) and key:
                    out[key[0]] += count
    return out


def stats_totals(stats: dict | None) -> dict:
    """Operations, bytes written and seconds covered by the statistics."""
    buckets = (stats or {}).get("buckets", [])
    ops = sum(r["reads"] + r["writes"] for b in buckets for r in b["partitions"])
    written = sum(r["bytes_written"] for b in buckets for r in b["partitions"])
    seconds = sum(b["seconds"] for b in buckets)
    return {"operations": ops, "bytes_written": written, "seconds": seconds}


def rounded(d: dict) -> dict:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in d.items()}
