"""Record a workload from a live table: its key sample and its statistics.

The recorded workload has one field per key column, drawn the way the sample
says: a time column becomes the virtual clock (new rows arrive at the end,
as they do), an increasing integer a sequence, anything else a choice among
the sampled values weighted by how often they occur. The read/write mix comes
from the statistics. The key design ``current`` rebuilds the table's own key;
:func:`with_design` adds a candidate. Rates are normalised to 400 operations
per second against the simulator's default capacity of 150 per partition: the
simulation compares how designs spread load, not absolute throughput.
"""

from __future__ import annotations

from collections import Counter

from .findings import Evidence, as_int, fraction, sequential_density, timestamp_like
from .workloads import FieldSpec, KeyColumn, KeyDesign, Operation, Workload

MAX_CHOICES = 2000
RATE = 400.0
DURATION = 60.0


def _field(ev: Evidence, i: int, name: str) -> FieldSpec:
    values = ev.column(i)
    if values and fraction(values, timestamp_like) >= 0.9:
        ints = [as_int(v) for v in values]
        unit = "ms" if ints and ints[0] is not None and ints[0] >= 1e12 else "s"
        return FieldSpec(name, "clock", unit=unit)
    if values and sequential_density(values) >= 0.5:
        return FieldSpec(name, "sequence")
    counts = Counter(values).most_common(MAX_CHOICES) or [("x", 1)]
    return FieldSpec(name, "choice", values=tuple(v for v, _ in counts),
                     weights=tuple(float(c) for _, c in counts))


def record_workload(ev: Evidence, name: str | None = None) -> Workload:
    """A workload that behaves like the table's recorded traffic, keyed as it is now."""
    fields = tuple(_field(ev, i, n) for i, (n, _) in enumerate(ev.primary_key))
    reads = writes = 0
    for b in (ev.stats or {}).get("buckets", []):
        for r in b["partitions"]:
            reads += r["reads"]
            writes += r["writes"]
    if reads + writes == 0:
        writes = 1
    ops = [Operation("write", float(writes))]
    if reads:
        if ev.range_scans:
            clock = next((f.name for f in fields if f.kind == "clock"), None)
            eq = tuple(f.name for f in fields[:1] if f.kind == "choice")
            ops.append(Operation("range", float(reads), eq=eq, range=clock, span=300, limit=50))
        else:
            ops.append(Operation("read", float(reads)))
    current = KeyDesign("current", tuple(KeyColumn(n, n, t) for n, t in ev.primary_key),
                        note="the table's key as it is")
    return Workload(
        name=name or f"recorded:{ev.table}", fields=fields, operations=tuple(ops),
        designs=(current,), rate=RATE, duration=DURATION,
        value_bytes=max(16, (ev.total_bytes // ev.total_rows) if ev.total_rows else 100),
        description=f"recorded from table {ev.table!r}: {len(ev.keys)} sampled keys",
    )


def with_design(workload: Workload, design: KeyDesign) -> Workload:
    """``workload`` with one more candidate design."""
    return Workload(
        workload.name, workload.fields, workload.operations, (*workload.designs, design),
        workload.rate, workload.duration, workload.value_bytes, workload.description,
        workload.seed_rule,
    )
