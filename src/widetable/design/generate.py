"""The operation stream of a workload, and how a key design turns it into requests.

:class:`Generator` draws records and operations from a workload with one
``random.Random(seed)``, so a seed gives the same stream every time.
:func:`primary_key` builds a record's key under a design with the builders of
``widetable.keys``; :func:`key_ranges` turns a range operation into the key
ranges a client must read under that design (one per salt bucket for a
bucketed key, the whole table when the key cannot narrow the query).
"""

from __future__ import annotations

import random
from bisect import bisect_left
from dataclasses import dataclass
from itertools import accumulate

from ..errors import ParameterInvalid, describe
from ..keys import builders
from ..keys.codec import INF_MAX, INF_MIN
from .workloads import FieldSpec, KeyColumn, KeyDesign, Operation, Workload


@dataclass(frozen=True, slots=True)
class Op:
    """One logical request at virtual time ``t`` (seconds from the start)."""

    t: float
    kind: str  # write | read | range
    record: dict  # field -> value (range: the eq fields only)
    range_field: str | None = None
    lo: object = None
    hi: object = None
    limit: int = 100


def _zipf_cdf(n: int, s: float) -> list[float]:
    weights = [1.0 / (i + 1) ** s for i in range(n)]
    return list(accumulate(weights))


class Generator:
    """Draws :class:`Op` objects from a workload; deterministic for a seed."""

    def __init__(self, workload: Workload, seed: int = 0, epoch: int = 1_718_000_000) -> None:
        self.w = workload
        self.epoch = epoch  # clock fields read epoch + t (seed 000's Timestamp = 1718000001)
        self.rng = random.Random(seed)
        self.specs = {f.name: f for f in workload.fields}
        self._cdf = {f.name: _zipf_cdf(f.count, f.s) for f in workload.fields if f.kind == "zipf"}
        self._choice = {
            f.name: list(accumulate(f.weights or [1.0] * len(f.values)))
            for f in workload.fields if f.kind == "choice"
        }
        self._seq: dict[tuple, int] = {}
        self._op_cdf = list(accumulate(o.weight for o in workload.operations))

    def _index(self, f: FieldSpec, idx: dict) -> int:
        if f.kind == "uniform":
            return self.rng.randrange(f.count)
        if f.kind == "zipf":
            cdf = self._cdf[f.name]
            return min(bisect_left(cdf, self.rng.random() * cdf[-1]), f.count - 1)
        if f.kind == "of":
            src = self.specs[f.of]  # type: ignore[index]
            return idx[f.of] * f.count // max(src.count, 1)
        if f.kind == "int":
            return self.rng.randrange(f.lo, f.hi)
        cdf = self._choice[f.name]
        return min(bisect_left(cdf, self.rng.random() * cdf[-1]), len(f.values) - 1)

    @staticmethod
    def _render(f: FieldSpec, i: int) -> object:
        if f.kind == "choice":
            return f.values[i]
        if f.format is None:
            return i
        return f.format.format(i=i, hi=i // 256, lo=i % 256)

    def _clock(self, f: FieldSpec, t: float) -> int:
        return int((self.epoch + t) * 1000) if f.unit == "ms" else int(self.epoch + t)

    def record(self, t: float, only: tuple[str, ...] | None = None, advance: bool = True) -> dict:
        """A record at time ``t``; ``only`` limits it to some fields (and what they need)."""
        idx: dict[str, int] = {}
        out: dict[str, object] = {}
        for f in self.w.fields:
            if f.kind == "clock":
                out[f.name] = self._clock(f, t)
            elif f.kind == "sequence":
                group = (f.name, out.get(f.per) if f.per else None)
                n = self._seq.get(group, 0)
                if advance:
                    self._seq[group] = n + 1
                    out[f.name] = n
                else:
                    out[f.name] = self.rng.randrange(n) if n else 0
            else:
                idx[f.name] = self._index(f, idx)
                out[f.name] = self._render(f, idx[f.name])
        if only is not None:
            return {k: out[k] for k in only}
        return out

    def ops(self, count: int | None = None):
        """Yield ``count`` ops (default: rate x duration), evenly spaced in virtual time."""
        w = self.w
        total = int(w.rate * w.duration) if count is None else count
        step = 1.0 / w.rate
        for n in range(total):
            t = n * step
            o: Operation = w.operations[bisect_left(self._op_cdf, self.rng.random() * self._op_cdf[-1])]
            if o.op == "write":
                yield Op(t, "write", self.record(t))
            elif o.op == "read":
                yield Op(t, "read", self.record(t, advance=False))
            else:
                rec = self.record(t, advance=False)
                lo, hi = self._window(o, rec, t)
                yield Op(t, "range", {k: rec[k] for k in o.eq}, o.range, lo, hi, o.limit)

    def _window(self, o: Operation, rec: dict, t: float) -> tuple[object, object]:
        if o.range is None:
            return None, None
        f = self.specs[o.range]
        if f.kind == "clock":
            now = self._clock(f, t)
            return now - o.span, now + 1
        v = rec[o.range]
        if isinstance(v, int):
            return max(v - o.span, 0), v + 1
        return v, v + "\U0010ffff"


# -- keys ---------------------------------------------------------------------------


def column_value(col: KeyColumn, record: dict) -> object:
    """The value of key column ``col`` for ``record`` (every source field present)."""
    if col.transform == "concat":
        parts = [record[s] for s in col.source]  # type: ignore[union-attr]
        return builders.concat(*parts)
    v = record[col.source]  # type: ignore[index]
    tr = col.transform
    if tr is None:
        if col.type == "INTEGER":
            try:
                return int(v)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                raise ParameterInvalid(
                    f"key column {col.name!r} is INTEGER, but its field {col.source!r} made "
                    f"{describe(v)}; give the field no text format, or make the column STRING"
                ) from None
        if col.type == "BINARY":
            if isinstance(v, int) and 0 <= v < 2**64:
                return v.to_bytes(8, "big")  # as a recorded 8-byte column holds it, in order
            return v if isinstance(v, bytes) else str(v).encode()
        return str(v)
    if tr == "pad":
        return builders.concat(int(v), widths=[col.param or 20])  # type: ignore[arg-type]
    if tr == "hash_prefix":
        return builders.hash_prefix(v, col.param or 4)  # type: ignore[arg-type]
    if tr == "salted":
        return builders.salted(v, col.param or 16)  # type: ignore[arg-type]
    if tr == "bucket":
        return builders.bucket(v, col.param or 16)  # type: ignore[arg-type]
    if tr == "mod":
        return int(v) % (col.param or 16)  # type: ignore[arg-type]
    if tr == "reverse_digits":
        return builders.reverse_digits(str(v))
    if tr == "reverse_domain":
        return builders.reverse_domain(str(v))
    if tr == "reverse_timestamp":
        return builders.reverse_timestamp(int(v))  # type: ignore[arg-type]
    raise ValueError(f"unknown transform {tr!r}")


def _sources(col: KeyColumn) -> tuple[str, ...]:
    return col.source if isinstance(col.source, tuple) else (col.source,)


def primary_key(design: KeyDesign, record: dict) -> tuple:
    return tuple(column_value(c, record) for c in design.columns)


def key_ranges(design: KeyDesign, op: Op) -> list[tuple[tuple, tuple]]:
    """``[(start, end), ...]`` half-open primary-key ranges that hold the rows ``op`` asks for."""
    return _ranges(design.columns, op, [])


def _ranges(cols: tuple[KeyColumn, ...], op: Op, prefix: list) -> list[tuple[tuple, tuple]]:
    if not cols:
        return [(tuple(prefix), tuple(prefix))]
    col, rest = cols[0], cols[1:]
    pad_min = (INF_MIN,) * len(rest)
    srcs = _sources(col)
    if all(s in op.record for s in srcs):
        return _ranges(rest, op, prefix + [column_value(col, op.record)])
    if srcs == (op.range_field,) and op.lo is not None:
        tr = col.transform
        if tr in (None, "pad"):
            lo = column_value(col, {op.range_field: op.lo})
            hi = column_value(col, {op.range_field: op.hi})
            return [(tuple(prefix) + (lo, *pad_min), tuple(prefix) + (hi, *pad_min))]
        if tr == "reverse_timestamp":
            lo = builders.reverse_timestamp(op.hi - 1) if op.hi else 0  # type: ignore[operator]
            hi = builders.reverse_timestamp(op.lo) + 1  # type: ignore[arg-type]
            return [(tuple(prefix) + (lo, *pad_min), tuple(prefix) + (hi, *pad_min))]
        if tr in ("bucket", "mod"):  # seed 000 方法三: query every bucket, merge
            out = []
            for b in range(col.param or 16):
                out += _ranges(rest, op, prefix + [b])
            return out
    if col.transform == "salted" and all(s in op.record or s == op.range_field for s in srcs):
        out = []
        for label in builders.salt_prefixes(col.param or 16):
            end = label[:-1] + chr(ord(label[-1]) + 1)
            out.append((tuple(prefix) + (label, *pad_min), tuple(prefix) + (end, *pad_min)))
        return out
    inf_min = (INF_MIN,) * (len(rest) + 1)
    inf_max = (INF_MAX,) * (len(rest) + 1)
    return [(tuple(prefix) + inf_min, tuple(prefix) + inf_max)]
