"""The Key Visualizer matrix: time across, the key space down.

Input is a list of *cells*: ``(time column, low key, high key, value)``, where
the keys are row-key bytes in store order and ``high`` is None for a point
(one key) or the end of a range (a partition). Building follows two designs:

* **Bigtable's Key Visualizer**: the key space is cut into at most ``rows``
  (about 1,000) buckets of contiguous keys, each holding about as many distinct
  observed keys; a range's value is spread over the buckets it covers.
* **TiDB's heatmap**: consecutive buckets that stay cold (their hottest moment
  under ``cold`` x the hottest cell) are merged into one row, so the hot ranges
  keep the screen. A merged row shows the largest value of its members.

Each row is labelled with the key prefix it starts at (decoded and pretty-printed).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from ...keys import codec

METRICS = ("reads", "writes", "bytes", "throttled")
DEFAULT_ROWS = 1000
DEFAULT_COLD = 0.05


@dataclass(frozen=True, slots=True)
class KeyRow:
    """One row of the heatmap: keys ``[start, end)`` (labels), ``buckets`` merged into it."""

    label: str
    start: str
    end: str
    buckets: int


@dataclass(frozen=True, slots=True)
class KeyvizMatrix:
    """``values[row][column]``: the metric for the row's key range in the column's time slice."""

    title: str
    metric: str
    column_seconds: float
    times: tuple[float, ...]
    rows: tuple[KeyRow, ...]
    values: tuple[tuple[float, ...], ...]

    @property
    def max(self) -> float:
        return max((max(r) for r in self.values if r), default=0.0)

    def row_heat(self) -> list[float]:
        return [max(r) if r else 0.0 for r in self.values]

    def to_dict(self) -> dict:
        return {
            "title": self.title, "metric": self.metric, "column_seconds": self.column_seconds,
            "times": list(self.times),
            "rows": [{"label": r.label, "start": r.start, "end": r.end, "buckets": r.buckets} for r in self.rows],
            "values": [list(v) for v in self.values],
        }


def key_label(key: bytes | None, width: int = 48) -> str:
    """A row key (relative to its table) as ``a / b / c``, shortened to ``width``."""
    if key is None:
        return "+inf"
    if not key:
        return "-inf"
    try:
        parts = codec.decode_tuple(key)
    except Exception:  # noqa: BLE001 - a cut key: show its bytes
        return key.hex()[:width]
    text = " / ".join(v.hex() if isinstance(v, bytes) else str(v) for v in parts)
    return text if len(text) <= width else text[: width - 1] + "…"


def build(
    cells: list[tuple[int, bytes, bytes | None, float]],
    columns: int,
    column_seconds: float,
    title: str,
    metric: str,
    rows: int = DEFAULT_ROWS,
    cold: float = DEFAULT_COLD,
    ranges: bool = False,
) -> KeyvizMatrix:
    """The matrix of ``cells`` (see the module docstring). ``ranges``: cells are key
    ranges (partitions; ``high`` None = to the end) rather than points."""
    bounds = sorted({c[1] for c in cells} | ({c[2] for c in cells if c[2] is not None} if ranges else set()))
    if not bounds:
        bounds = [b""]
    segs = len(bounds)
    groups = min(rows, segs)
    grid = [[0.0] * columns for _ in range(groups)]

    def group(i: int) -> int:
        return i * groups // segs

    for col, lo, hi, value in cells:
        if not value or not 0 <= col < columns:
            continue
        i = bisect_left(bounds, lo)
        if not ranges:
            grid[group(i)][col] += value
            continue
        j = segs if hi is None else bisect_left(bounds, hi)
        j = max(j, i + 1)
        share = value / (j - i)
        g = group(i)
        while g < groups:
            first = max(i, -(-g * segs // groups))
            last = min(j, -(-(g + 1) * segs // groups))
            if first >= j:
                break
            if last > first:
                grid[g][col] += share * (last - first)
            g += 1
    starts = [bounds[-(-g * segs // groups)] for g in range(groups)]
    ends: list[bytes | None] = [starts[g + 1] for g in range(groups - 1)] + [None]
    return _merge_cold(grid, starts, ends, columns, column_seconds, title, metric, cold)


def _merge_cold(grid, starts, ends, columns, column_seconds, title, metric, cold) -> KeyvizMatrix:
    heat = [max(r) for r in grid]
    top = max(heat, default=0.0)
    limit = top * cold
    out_rows: list[KeyRow] = []
    out_vals: list[tuple[float, ...]] = []
    g = 0
    while g < len(grid):
        h = g + 1
        if heat[g] < limit or top == 0:
            while h < len(grid) and (heat[h] < limit or top == 0):
                h += 1
        vals = tuple(max(grid[k][c] for k in range(g, h)) for c in range(columns)) if h > g + 1 else tuple(grid[g])
        start, end = key_label(starts[g]), key_label(ends[h - 1])
        label = start if h == g + 1 else f"{start} … ({h - g} cold)"
        out_rows.append(KeyRow(label, start, end, h - g))
        out_vals.append(vals)
        g = h
    times = tuple(round(c * column_seconds, 6) for c in range(columns))
    return KeyvizMatrix(title, metric, column_seconds, times, tuple(out_rows), tuple(out_vals))


# -- sources --------------------------------------------------------------------------


def _metric_index(metric: str) -> int:
    if metric not in METRICS:
        raise ValueError(f"metric {metric!r} is not one of {', '.join(METRICS)}")
    return METRICS.index(metric)


def from_simulation(data: dict, metric: str = "writes", rows: int = DEFAULT_ROWS,
                    cold: float = DEFAULT_COLD) -> KeyvizMatrix:
    """The matrix of one simulated design (``DesignResult.keyviz``): per-key counters."""
    m = _metric_index(metric)
    cells = [(c[0], bytes.fromhex(c[1]), None, float(c[2 + m])) for c in data["cells"]]
    title = f"{data.get('design', 'simulation')} — {metric}"
    return build(cells, data["columns"], data["column_seconds"], title, metric, rows, cold)


def from_stats(stats: dict, metric: str = "writes", rows: int = DEFAULT_ROWS,
               cold: float = DEFAULT_COLD) -> KeyvizMatrix:
    """The matrix of ``db.table_stats(name)``: per-partition counters per 10 s bucket."""
    _metric_index(metric)
    buckets = stats.get("buckets", [])
    if not buckets:
        return build([], 1, float(stats.get("bucket_seconds", 10)), f"{stats.get('table', '')} — {metric}", metric)
    first = buckets[0]["start"]
    secs = float(stats.get("bucket_seconds", 10))
    columns = int((buckets[-1]["start"] - first) // secs) + 1
    cells = []
    for b in buckets:
        col = int((b["start"] - first) // secs)
        for r in b["partitions"]:
            if metric == "bytes":
                v = r["bytes_read"] + r["bytes_written"]
            else:
                v = r[metric]
            cells.append((col, bytes(r["start_key"] or b""), r["end_key"], float(v)))
    return build(cells, columns, secs, f"{stats.get('table', 'table')} — {metric}", metric, rows, cold, ranges=True)


def hot_row(matrix: KeyvizMatrix, column: int | None = None) -> int:
    """Index of the hottest row (in ``column``, or over all time)."""
    if column is None:
        heat = matrix.row_heat()
    else:
        heat = [r[column] for r in matrix.values]
    return max(range(len(heat)), key=lambda i: (heat[i], -i)) if heat else 0


__all__ = ["METRICS", "KeyRow", "KeyvizMatrix", "build", "from_simulation", "from_stats", "hot_row",
           "key_label"]
